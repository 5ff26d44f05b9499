"""The pure-Python policy runtime: caches, eviction rules, prefetchers, schedule, triggers,
monitor, adapt and per-layer budgets. Compiled policy modules import only this package; it
never imports the compiler, lark, torch or numpy."""

from mpl.runtime.cost import CostModel
from mpl.runtime.core import DispatchError, Runtime, RuntimeConfigError
from mpl.runtime.fast import backend
from mpl.runtime.guard import RuntimeBusyError
from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, PREFETCH, STREAM, Load, Plan

__all__ = ["Runtime", "RuntimeConfigError", "DispatchError", "RuntimeBusyError", "CostModel", "Plan",
           "Load", "CPU", "STREAM", "DEMAND", "BACKGROUND", "PREFETCH", "backend"]
