"""The offline workbench (SPEC §8): trace formats, synthetic traces, replay, Belady's
optimum, the hardware cost model, sweeps and plots. No torch.

``replay(policy, trace, hardware=None, capacity=None, belady=True)`` -> :class:`ReplayReport`.
"""

from mpl.trace import Dispatch, Trace, TraceHeader
from mpl.sim.replay import ReplayReport, ReplayError, PolicyLoadError, replay, load_policy
from mpl.sim.traceio import TraceFormatError, load as load_trace, save as save_trace
from mpl.sim.synth import synthesize

__all__ = ["replay", "ReplayReport", "ReplayError", "PolicyLoadError", "load_policy", "Trace",
           "TraceHeader", "Dispatch", "TraceFormatError", "load_trace", "save_trace",
           "synthesize"]
