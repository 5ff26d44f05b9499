"""A policy in shadow mode beside a HuggingFace model: the model is not changed (its experts
stay where they are, its forward is its own); a forward pre-hook on every experts module
(the recorder's) sees each MoE layer's routing as the router chose it and feeds it to the
policy's runtime, whose Plans are timed on a hardware profile (``mpl.mechanism.shadow``,
what the vLLM adapter's shadow runs too). The statistics say what the policy would have
done, and equal a replay of the trace recorded in the same run (``handle.trace()``; SPEC §8).

    handle = mpl.offload.shadow(policy, model, hardware="h100")   # or policy.shadow(model, ...)
    model.generate(...)                      # the model's own output, bit for bit
    handle.get_stats()                       # the runtime's statistics, stall simulated
    handle.report()                          # plus hardware, simulated time, costs
    handle.trace()                           # the routing seen so far
    handle.detach()                          # the hooks removed
"""

from __future__ import annotations

import torch

from mpl.features import features
from mpl.trace import Trace

from .errors import AttachError
from .hf import _replay_only_eviction, discover, model_shape, preflight
from .recorder import Recorder


class ShadowHandle:
    """What :func:`shadow` returns: the statistics, the report, the trace, ``detach()``."""

    def __init__(self, policy, model, recorder: Recorder, shadow, header, diagnostics) -> None:
        self.policy = policy
        self.model = model
        self.recorder = recorder
        self.shadow = shadow
        self.header = header
        self.layers = recorder.layers
        self.shape = recorder.shape
        self.diagnostics = list(diagnostics)
        self.attached = True

    @property
    def runtime(self):
        return self.shadow.rt

    @property
    def moe_layers(self) -> tuple[int, ...]:
        return tuple(b.layer_id for b in self.layers)

    def get_stats(self) -> dict:
        """The runtime's statistics (SPEC §5); ``stall_ms`` simulated on the hardware profile."""
        return self.shadow.stats()

    stats = get_stats

    def report(self) -> dict:
        """The statistics plus the hardware profile, the simulated time (``sim``) and the
        per-operation costs: the fields a replay report of the recorded trace has."""
        return {**self.shadow.report(), "mode": "shadow", "engine": "hf"}

    def trace(self) -> Trace:
        """The routing every forward since :func:`shadow` produced (the trace a replay of
        which gives these statistics)."""
        if not self.recorder.keep:
            raise AttachError("this shadow keeps no trace (record=False)")
        return Trace(self.header, list(self.recorder.dispatches))

    def detach(self) -> None:
        """Remove the hooks; the statistics stay readable."""
        if self.attached:
            self.recorder.__exit__(None, None, None)
            self.attached = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    def __repr__(self) -> str:
        state = "beside the model" if self.attached else "detached"
        return (f"<mpl ShadowHandle {state}: policy {getattr(self.policy, 'name', '?')}, "
                f"{len(self.layers)} MoE layers x {self.layers[0].num_experts} experts, "
                f"simulated on {self.shadow.profile.name}>")


def shadow(policy, model, *, hardware=None, lookahead: int | None = None, record: bool = True,
           check: bool = True) -> ShadowHandle:
    """Run ``policy`` (an ``mpl.Policy``) in shadow mode beside the HuggingFace MoE ``model``.

    ``hardware``: the profile the stalls are simulated on, and the cost model of a hybrid
    schedule's decisions (a name, a JSON file, a dict; default ``rtx-4090``: as ``mplc
    replay --hardware``). ``lookahead``: layers ahead to record pre-gating predictions for
    (default: the policy's distance when it pre-gates, else none). ``record``: keep the
    routing for :meth:`ShadowHandle.trace`. ``check``: check the policy against the
    model's shape first (located diagnostics; :class:`mpl.offload.PolicyDoesNotFit`, as
    attach does).

    Nothing on the model changes but the hooks (``detach()`` removes them): its outputs are
    its own. Refusals raise :class:`AttachError` before any hook is added."""
    from mpl.mechanism.shadow import Shadow
    from mpl.timemodel import hardware as hw

    if not hasattr(policy, "runtime") or not hasattr(policy, "ir"):
        raise AttachError(f"shadow needs an mpl Policy (mpl.load / mpl.loads), got {type(policy).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise AttachError(f"shadow needs a torch.nn.Module (a HuggingFace model), got {type(model).__name__}")
    bad = _replay_only_eviction(policy)
    if bad:
        raise AttachError(f"policy '{policy.name}' uses eviction = {bad}, which needs the future "
                          "and exists for trace replay only: replay a recorded trace instead")
    if lookahead is not None and (isinstance(lookahead, bool) or not isinstance(lookahead, int)
                                  or lookahead < 0):
        raise AttachError(f"lookahead must be an integer >= 0 (0: no predictions), got {lookahead!r}")
    try:
        profile = hw.resolve(hardware)
    except hw.HardwareError as e:
        raise AttachError(str(e)) from None
    live = getattr(model, "_mpl_handle", None)      # a policy attached live: beside it too
    if live is not None:
        layers, shape = live.layers, live.shape
    else:
        layers = discover(model)
        shape = model_shape(model, layers)
        gpus = sorted({p.device for p in model.parameters() if p.device.type == "cuda"}, key=str)
        if gpus:
            shape = shape.with_device_memory(torch.cuda.get_device_properties(gpus[0]).total_memory)
    diags = preflight(policy, shape) if check else []
    if lookahead is None:
        feats = features(policy.ir)
        lookahead = feats.affinity_depth if (feats.lookahead_strategy or feats.learned) else 0
    rec = Recorder(model, lookahead=lookahead, layers=layers, keep=bool(record))
    header = rec.header(source="recorded by mpl.offload.shadow")
    try:
        sh = Shadow(policy, header, hardware=profile)
    except (ValueError, TypeError) as e:
        raise AttachError(f"policy '{policy.name}' cannot run on this model: {e}") from None
    rec.on_dispatch = sh.feed
    rec.__enter__()
    return ShadowHandle(policy, model, rec, sh, header, diags)
