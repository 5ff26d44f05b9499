"""A policy in shadow mode beside an engine: its compiled runtime sees each MoE layer's
routing the moment the router chooses it, and every Plan is played on the simulated
timeline of a hardware profile. The engine itself is not changed (it keeps every expert
where it was); the statistics say what the policy would have done.

The decisions and the timing are those ``mplc replay`` makes for the recorded trace — the
same runtime, the same records (``mpl.trace.records_of``), the same time model
(``mpl.timemodel``: profiles, costs, timeline, summary) — so the shadow's statistics equal a
replay of the trace the engine recorded. Like the replayer, it reaches them through the
neutral modules, never through ``mpl.sim``; and it takes a loaded policy, never policy text
(the adapter loads it: ``mpl.load`` in the HuggingFace adapter, the worker's ``mpl.loads``
in vLLM's). No torch: the HuggingFace adapter (``mpl.offload.shadow``) and the vLLM worker
session (``mpl.vllm.session``) feed it the dispatches their routing capture records.
"""

from __future__ import annotations

import threading

from mpl.trace import Dispatch, TraceHeader, records_of


def policy_runtime(policy, header: TraceHeader, *, hardware=None):
    """(hardware profile, costs, runtime) for ``policy`` (a loaded mpl Policy) beside
    (shadow) or inside (live offload) an engine whose trace has ``header``: the runtime a
    replay of that trace builds (the same expert size, the same cost model for the hybrid
    schedule), so the decisions are the replay's. The policy is checked for live use (no
    ``belady``) by the adapter's preflight (``mpl.mechanism.preflight``)."""
    from mpl.timemodel import hardware as hw

    profile = hw.resolve(hardware)
    eb, costs = hw.costs_for_trace(profile, policy.ir, header)
    # (per-layer pins and bands name decoder-layer ids: the trace's header maps them to its
    # ordinals; memory tiers take the checkpoint's precision as a replay of the trace does)
    rt = policy.runtime(header.num_moe_layers, header.num_experts, header.top_k,
                        expert_bytes=eb, cost=hw.runtime_cost_model(costs),
                        **hw.tier_arguments(policy.ir, header))
    return profile, costs, rt


class Shadow:
    """``policy`` (a loaded mpl Policy) beside an engine whose trace has ``header``;
    ``hardware``: the profile the stalls are simulated on (a name, a JSON file, a dict, a
    Profile; None: the default). :meth:`feed` each dispatch as the router chose it;
    :meth:`report` at any time: a read from another thread waits for the dispatch being fed
    (the runtime and the timeline are read together), one from a callback the runtime invokes
    while it is fed (a logging handler) sees the state before that dispatch's timing."""

    def __init__(self, policy, header: TraceHeader, *, hardware=None) -> None:
        from mpl.timemodel.timeline import Timeline

        self.policy = policy
        self.profile, self.costs, self.rt = policy_runtime(policy, header, hardware=hardware)
        self.tl = Timeline(self.costs, overlap=bool(policy.ir["schedule.overlap"]))
        self.header = header
        self.dispatches = 0
        self._steps: dict[int, int] = {}
        self._lock = threading.RLock()

    def feed(self, d: Dispatch) -> None:
        """One MoE layer's routing, as the router chose it."""
        layer, experts, weights, tokens, step, predictions, tokens_of = next(records_of((d,)))
        with self._lock:
            plan = self.rt.dispatch(layer, experts, weights, tokens, step=step,
                                    predictions=predictions)
            stall = self.tl.dispatch(plan, tokens_of, tokens)
            if stall > 0:
                self.rt.add_stall(stall)
            self.dispatches += 1
            if self._steps.get(step, 0) < tokens:
                self._steps[step] = tokens

    def stats(self) -> dict:
        """The runtime's statistics (SPEC §5), ``stall_ms`` simulated, hits counted when the
        simulated transfer has landed (late prefetches apart)."""
        from mpl.timemodel.timeline import arrived_stats

        with self._lock:
            return arrived_stats(self.rt.stats(), self.tl)

    def report(self) -> dict:
        """The statistics plus the hardware profile, the simulated time (``sim``, as a
        replay report's) and the per-operation costs."""
        from mpl.timemodel.timeline import arrived_stats, summary

        with self._lock:
            sim = summary(self.tl, len(self._steps), sum(self._steps.values()))
            return {"policy": self.policy.name, "hardware": self.profile.to_dict(),
                    "dispatches": self.dispatches,
                    "stats": arrived_stats(self.rt.stats(), self.tl), "sim": sim,
                    "costs": self.costs.to_dict()}
