"""The policy runtime: caches, eviction rules, prefetchers, schedule, triggers, monitor, adapt
and per-layer budgets, on one of two backends chosen for a runtime's whole life (the compiled
engine, mpl/runtime/c, or the pure-Python reference: mpl.runtime.backend). Compiled policy
modules import only this package; it never imports the compiler, lark, torch or numpy."""

from mpl.runtime.backend import Runtime, info as backend_info
from mpl.runtime.core import DispatchError, PureRuntime, RuntimeConfigError
from mpl.runtime.cost import CostModel
from mpl.runtime.guard import RuntimeBusyError
from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, PREFETCH, STREAM, Load, Plan

__all__ = ["Runtime", "PureRuntime", "RuntimeConfigError", "DispatchError", "RuntimeBusyError",
           "CostModel", "Plan", "Load", "CPU", "STREAM", "DEMAND", "BACKGROUND", "PREFETCH",
           "backend", "backend_info"]


def backend() -> str:
    """The backend a new runtime gets where the compiled engine covers its policy."""
    from mpl.runtime.backend import default
    return default()
