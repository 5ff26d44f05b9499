"""The engine-independent half of live offload in vLLM (``mpl.mechanism.live.LiveExecutor``),
without vLLM: random MoE layers in the Triton kernel's layout, a plain-torch kernel, real
policy runtimes and dispatch sequences of several tokens per step. Outputs equal the
kernel on the full weights (bit for bit on the device path, passes included), copies equal
the runtime's loads, a forward without a Plan leaves the policy untouched; and the same
sequences run against the CUDA-semantics double (tests/offload_cuda_double.py) keep CUDA's
ordering rules: no slot overwritten while compute reads it, compute after the copies it
reads, demand loads never behind prefetches, pinned host sides, nothing allocated per step."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

import mpl  # noqa: E402
from mpl.trace import Dispatch  # noqa: E402
from mpl.mechanism.live import LiveError, LiveExecutor, silu_experts  # noqa: E402

from live_layers import E, H, K, L, dispatch_steps as _steps, kernel as _kernel, random_layers as _layers  # noqa: E402

from offload_cuda_double import (FakeCudaOps, compute_before_copy, demand_delayed_by_prefetch,  # noqa: E402
                                 foreign_waits, host_buffer_reused_in_flight,
                                 slot_write_while_read, unpinned_async_copies)

torch.set_num_threads(1)

POLICIES = {
    "shared lru 4": "cache { capacity = 4 }",
    "shared lru 12": "cache { capacity = 12 }",
    "history prefetch": "cache { capacity = 8 }\n prefetch { strategy = history\n budget = 2 }",
    "per-layer lfu": ("cache { capacity = 3\n eviction = lfu }\n per_layer { allocation = entropy\n"
                      " min_capacity = 2\n max_capacity = 6\n rebalance_interval = 4 }"),
    "cpu_fallback": "cache { capacity = 6 }\n schedule { mode = cpu_fallback }",
}


def _policy(body: str):
    return mpl.loads("policy p {\n" + body + "\n}")


def _run(label, ops=None, stream_slots=E, steps=None):
    pol = _policy(POLICIES[label])
    rt = pol.runtime(L, E, K)
    layers = _layers()
    ex = LiveExecutor(rt, layers, "cpu", kernel=_kernel, cpu_kernel=_kernel,
                      stream_slots=stream_slots, ops=ops)
    outs = []
    for _s, layer, x, w, ids, d in steps or _steps():
        ex.plan(d)
        outs.append((ex.forward(layer, x, w, ids), silu_experts(x, layers[layer], w, ids)))
    return ex, rt, outs


@pytest.mark.parametrize("label", list(POLICIES))
@pytest.mark.parametrize("where", ["cpu", "cuda double"])
@pytest.mark.parametrize("stream_slots", [E, 2])
def test_outputs_equal_the_full_kernel_and_copies_equal_loads(label, stream_slots, where):
    # on the CPU a dispatch that streams more experts than the transient entries is the
    # kernel on the host store (the host window); with CUDA's operations it runs in passes
    ex, rt, outs = _run(label, stream_slots=stream_slots,
                        ops=FakeCudaOps() if where == "cuda double" else None)
    for got, want in outs:
        if label == "cpu_fallback" or (where == "cuda double" and stream_slots == 2):
            # (the CPU pass, and each pass, add their rows separately)
            assert torch.allclose(got, want, atol=1e-6)
        else:
            assert torch.equal(got, want)
    s, m = rt.stats(), ex.stats()
    window = m["host_window_streamed"]
    assert m["dispatches"] == len(outs) and s["accesses"] > 0
    assert m["copies"] == s["loads"] and m["demand_copies"] == s["demand_loads"]
    assert m["prefetch_copies"] == s["prefetch_loads"]
    assert m["background_copies"] == s["background_loads"]
    assert m["stream_copies"] + window == s["streamed"]
    assert m["bytes_copied"] == (s["loads"] + s["streamed"] - window) * m["expert_bytes"]
    assert m["cpu_computes"] == s["cpu_computes"]
    assert m["pool_slots"] == rt.num_slots + stream_slots + 1
    assert m["pool_bytes"] == m["pool_slots"] * m["expert_bytes"]
    assert m["expert_bytes_total"] == L * E * m["expert_bytes"]
    if label == "shared lru 4":
        assert s["streamed"] > 0          # prefill steps touch more experts than the cache
        if stream_slots == 2 and where == "cuda double":
            assert m["multi_pass_dispatches"] > 0 and m["passes"] > m["dispatches"]
            assert m["host_window_dispatches"] == window == 0
        elif stream_slots == 2:
            assert m["host_window_dispatches"] > 0 and window > 0
            assert m["multi_pass_dispatches"] == 0
    if stream_slots == E or label == "cpu_fallback":
        assert window == 0              # (everything fits; a CPU pass runs its own passes)
    if label == "cpu_fallback":
        assert s["cpu_computes"] > 0


def test_a_forward_without_a_plan_leaves_the_policy_alone():
    ex, rt, _ = _run("shared lru 4", stream_slots=3)
    before, copies = rt.stats(), ex.stats()["copies"]
    x = torch.randn(9, H)
    ids = torch.tensor([[e, (e + 3) % E] for e in range(E)] + [[0, 1]], dtype=torch.int32)
    w = torch.softmax(torch.randn(9, K), dim=-1)
    got = ex.forward(1, x, w, ids)
    assert torch.equal(got, silu_experts(x, _layers()[1], w, ids))
    assert rt.stats() == before and ex.stats()["copies"] == copies
    m = ex.stats()
    assert m["unplanned_dispatches"] == 1 and m["unplanned_copies"] == E


def test_a_slot_that_does_not_hold_the_planned_expert_is_an_error():
    ex, rt, _ = _run("shared lru 12")
    x, w = torch.randn(1, H), torch.ones(1, K) / K
    ex.plan(Dispatch(50, 0, [[0, 1]], None))
    ex.forward(0, x, w, torch.tensor([[0, 1]], dtype=torch.int32))
    ex.plan(Dispatch(51, 0, [[0, 1]], None))          # both hit now
    plan = ex._plans[0][0]
    assert all(plan.hit)
    ex.pool.content[plan.where[0]] = (2, 7)            # the slot no longer holds expert 0
    with pytest.raises(LiveError, match="the runtime and the mechanism disagree"):
        ex.forward(0, x, w, torch.tensor([[0, 1]], dtype=torch.int32))


def test_no_transient_slot_is_refused():
    rt = _policy(POLICIES["shared lru 4"]).runtime(L, E, K)
    with pytest.raises(LiveError, match="at least one transient slot"):
        LiveExecutor(rt, _layers(), "cpu", kernel=_kernel, stream_slots=0)


@pytest.mark.parametrize("label", list(POLICIES))
def test_dispatch_sequences_keep_cuda_invariants(label):
    ops = FakeCudaOps()
    ex, rt, outs = _run(label, ops=ops, stream_slots=3)
    for got, want in outs:
        assert torch.allclose(got, want, atol=1e-6)
    log = ops.log
    assert slot_write_while_read(log) == []
    assert compute_before_copy(log) == []
    assert foreign_waits(log, ops.compute_stream) == []
    assert demand_delayed_by_prefetch(log) == []
    assert unpinned_async_copies(log) == []
    assert host_buffer_reused_in_flight(log) == []
    copies = [op for op in log if op.kind == "copy" and isinstance(op.tag, tuple)
              and op.tag[0] in ("demand", "prefetch", "background", "stream")]
    assert copies and all(op.non_blocking and op.src_pinned for op in copies)
    # the same sequence again: nothing allocated on the device or in pinned host memory
    allocs, pinned = ops.allocations, ops.host_allocations
    for _s, layer, x, w, ids, d in _steps():
        ex.plan(Dispatch(d.step + 100, layer, d.experts, d.weights))
        ex.forward(layer, x, w, ids)
    assert ops.allocations == allocs and ops.host_allocations == pinned


def test_demand_and_prefetch_copies_use_their_own_streams():
    ops = FakeCudaOps()
    ex, _, _ = _run("history prefetch", ops=ops)
    by_kind: dict = {}
    for op in ops.log:
        if op.kind == "copy" and isinstance(op.tag, tuple) and op.tag[0] in ("demand", "prefetch"):
            by_kind.setdefault(op.tag[0], set()).add(op.stream)
    assert by_kind["demand"] and by_kind["prefetch"]
    assert not (by_kind["demand"] & by_kind["prefetch"])
    (demand,) = by_kind["demand"]
    (prefetch,) = by_kind["prefetch"]
    assert demand.priority < prefetch.priority          # demand first
