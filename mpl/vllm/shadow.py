"""A policy in shadow mode beside the engine: its compiled runtime sees each MoE layer's
routing the moment the router chooses it, and every Plan is played on the simulated
timeline of a hardware profile (the engine itself is not changed: vLLM keeps all experts
resident; the statistics say what the policy would have done).

The decisions and the timing are those ``mpl replay`` makes for the recorded trace — the
same runtime, the same records (``mpl.trace.records_of``), the same time model
(``mpl.timemodel``: profiles, costs, timeline, summary) — so the live statistics equal a
replay of the trace the engine recorded (tests/vllm_suite check it). Like the replayer, it
reaches them through the neutral modules, never through ``mpl.sim``.
"""

from __future__ import annotations

from mpl.trace import Dispatch, TraceHeader


def policy_runtime(policy_text: str, header: TraceHeader, *, policy_name: str | None = None,
                   policy_path: str | None = None, hardware=None):
    """(policy, hardware profile, costs, runtime) for a policy beside (shadow) or inside
    (live offload) an engine whose trace has ``header``: the runtime a replay of that trace
    builds (the same expert size, the same cost model for the hybrid schedule), so the
    decisions are the replay's."""
    import mpl
    from mpl.timemodel import hardware as hw

    policy = mpl.loads(policy_text, policy_name, path=policy_path)
    ir = policy.ir            # checked for a live runtime (no belady) by preflight
    profile = hw.resolve(hardware)
    eb, costs = hw.costs_for_trace(profile, ir, header)
    rt = policy.runtime(header.num_moe_layers, header.num_experts, header.top_k,
                        expert_bytes=eb, cost=hw.runtime_cost_model(costs))
    return policy, profile, costs, rt


class Shadow:
    def __init__(self, policy_text: str, header: TraceHeader, *, policy_name: str | None = None,
                 policy_path: str | None = None, hardware=None) -> None:
        from mpl.timemodel.timeline import Timeline

        self.policy, self.profile, self.costs, self.rt = policy_runtime(
            policy_text, header, policy_name=policy_name, policy_path=policy_path,
            hardware=hardware)
        ir = self.policy.ir
        self.tl = Timeline(self.costs, overlap=bool(ir["schedule.overlap"]))
        self.header = header
        self.dispatches = 0
        self._steps: dict[int, int] = {}

    def feed(self, d: Dispatch) -> None:
        """One MoE layer's routing, as the router chose it."""
        from mpl.trace import records_of

        layer, experts, weights, tokens, step, predictions, tokens_of = next(records_of((d,)))
        plan = self.rt.dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
        stall = self.tl.dispatch(plan, tokens_of, tokens)
        if stall > 0:
            self.rt.add_stall(stall)
        self.dispatches += 1
        if self._steps.get(step, 0) < tokens:
            self._steps[step] = tokens

    def report(self) -> dict:
        from mpl.timemodel.timeline import arrived_stats, summary

        sim = summary(self.tl, len(self._steps), sum(self._steps.values()))
        return {"policy": self.policy.name, "hardware": self.profile.to_dict(),
                "dispatches": self.dispatches, "stats": arrived_stats(self.rt.stats(), self.tl),
                "sim": sim,
                "costs": self.costs.to_dict()}
