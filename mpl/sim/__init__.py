"""The offline workbench (SPEC §8): trace formats, synthetic traces, replay, Belady's
optimum, the hardware cost model, sweeps and plots. No torch.

``replay(policy, trace, hardware=None, capacity=None, belady=True)`` -> :class:`ReplayReport`
(``policy``: an mpl Policy, or a .moe path or text that ``mpl.api.load_for_replay`` loads).
"""

from mpl.trace import Dispatch, Trace, TraceHeader
from mpl.sim.replay import ReplayReport, ReplayError, PolicyLoadError
# sim takes a policy (mpl.sim.replay.replay); a .moe path or text becomes one in the API layer
from mpl.api import load_for_replay as load_policy, replay
from mpl.traceio import TraceFormatError, load as load_trace, save as save_trace
from mpl.sim.synth import synthesize

__all__ = ["replay", "ReplayReport", "ReplayError", "PolicyLoadError", "load_policy", "Trace",
           "TraceHeader", "Dispatch", "TraceFormatError", "load_trace", "save_trace",
           "synthesize"]
