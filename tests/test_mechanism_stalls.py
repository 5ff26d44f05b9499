"""Stall measurement on the shared mechanism: ``SlotPool.flush_stalls`` collects every
pending wait of the compute stream for a copy, each once, and both engines (the
HuggingFace one in ``mpl.offload`` and vLLM's live executor) add what it returns to their
own ``stall_ms`` and to the runtime's. Run on the CUDA-semantics double
(tests/offload_cuda_double.py) with a fixed elapsed time per wait, so a stall is a known
number on the CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import mpl  # noqa: E402
from mpl.mechanism.device import SyncOps  # noqa: E402

from offload_cuda_double import FakeCudaOps, small_pool  # noqa: E402

WAIT_MS = 1.25


class TimedOps(FakeCudaOps):
    """The double, with every measured wait lasting ``WAIT_MS``."""

    def elapsed_ms(self, start, end) -> float:
        return WAIT_MS


def test_flush_collects_every_pending_wait_once():
    ops = TimedOps()
    pool, host = small_pool(ops)
    assert pool.flush_stalls() == 0.0                     # nothing waited yet
    pool.copy_in(0, host, 1, (0, 1), "demand")
    pool.copy_in(1, host, 2, (0, 2), "prefetch")
    pool.wait_for([0, 1])                                 # both copies still in flight
    pool.release([0, 1])
    assert len(pool._pending_stalls) == 2
    assert pool.collect_stalls() == 0.0                   # not complete: nothing without blocking
    assert len(pool._pending_stalls) == 2
    assert pool.flush_stalls() == pytest.approx(2 * WAIT_MS)
    assert pool._pending_stalls == []
    assert pool.flush_stalls() == 0.0                     # each wait counted once
    # a copy that has arrived before compute reads it is no wait at all
    pool.copy_in(2, host, 3, (0, 3), "demand")
    ops.synchronize()
    pool.wait_for([2])
    assert pool.flush_stalls() == 0.0


def test_flush_waits_for_the_copies_it_measures():
    ops = TimedOps()
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (0, 1), "demand")
    ev = pool.ready[0]
    pool.wait_for([0])
    assert not ops.query(ev)
    pool.flush_stalls()
    assert ops.query(ev)                                  # the host synchronised on the copy


def test_flush_without_cuda_is_zero():
    ops = SyncOps(torch.device("cpu"))
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (0, 1), "demand")            # synchronous: its time is copy_in's
    pool.wait_for([0])
    assert pool.flush_stalls() == 0.0
    assert pool._pending_stalls == []


def test_the_live_executor_charges_the_flushed_stalls():
    from mpl.mechanism.live import LiveExecutor, silu_experts
    from mpl.trace import Dispatch

    L, E, K, H, I = 2, 6, 2, 8, 4
    g = torch.Generator().manual_seed(0)
    layers = [{"w13_weight": torch.randn(E, 2 * I, H, generator=g),
               "w2_weight": torch.randn(E, H, I, generator=g)} for _ in range(L)]
    rt = mpl.loads("policy p {\n cache { capacity = 3 }\n}").runtime(L, E, K)

    def kernel(ordinal, x, tensors, weights, ids, first, shared):
        return silu_experts(x, tensors, weights, ids)

    ex = LiveExecutor(rt, layers, "cpu", kernel=kernel, cpu_kernel=kernel,
                      stream_slots=E, ops=TimedOps())
    rows = [[0, 1], [2, 3], [4, 5]]
    for step in range(3):
        for layer in range(L):
            r = rows[(step + layer) % 3]
            w = torch.full((1, K), 0.5)
            ex.plan(Dispatch(step, layer, [r], w.tolist()))
            ex.forward(layer, torch.randn(1, H, generator=g), w, torch.tensor([r], dtype=torch.int32))
    pending = len(ex.pool._pending_stalls)
    before = ex.stall_ms
    assert pending > 0
    ex.flush_stalls()
    assert ex.stall_ms == pytest.approx(before + pending * WAIT_MS)
    assert rt.stats()["stall_ms"] == pytest.approx(ex.stall_ms)
    ex.flush_stalls()
    assert ex.stall_ms == pytest.approx(before + pending * WAIT_MS)


def test_the_hf_engine_charges_the_flushed_stalls():
    pytest.importorskip("transformers")
    from mpl.offload.hf import attach
    from mpl.offload.models import build_model, encode

    from offload_helpers import generate, policy

    model = build_model("tiny-mixtral")
    h = attach(policy("cache { capacity = 3 }"), model, ops=TimedOps())
    try:
        generate(model, torch.tensor([encode("stalls, once")]), 3)
        pending = len(h.pool._pending_stalls)
        before = h.engine.stall_ms
        assert pending > 0
        st = h.get_stats()                                # flushes
        assert h.pool._pending_stalls == []
        assert st["mechanism"]["stall_ms"] == pytest.approx(before + pending * WAIT_MS)
        assert st["stall_ms"] == pytest.approx(st["mechanism"]["stall_ms"])
        assert h.get_stats()["mechanism"]["stall_ms"] == pytest.approx(st["mechanism"]["stall_ms"])
    finally:
        h.detach()


# ------------------------------------------------------------------ late prefetches
def test_a_prefetch_still_in_flight_when_compute_waits_is_late():
    """SPEC §5: a hit whose copy (prefetch or background load) has not landed when compute
    waits for it is a late prefetch; a demand load in flight is a miss's own wait, and a
    copy that has arrived is a hit."""
    ops = TimedOps()
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (2, 1), "prefetch")
    pool.copy_in(1, host, 2, (3, 2), "background")
    pool.copy_in(2, host, 3, (3, 3), "demand")
    pool.wait_for([0, 1, 2])
    assert pool.late == 2 and pool.late_layers == {2: 1, 3: 1}
    pool.wait_for([0, 1, 2])                  # waited for already: each counted once
    assert pool.late == 2
    pool.copy_in(3, host, 4, (2, 4), "prefetch")
    ops.synchronize()                          # it has landed: a hit, not late
    pool.wait_for([3])
    assert pool.late == 2 and pool.late_layers == {2: 1, 3: 1}


def test_without_cuda_no_copy_is_ever_late():
    ops = SyncOps(torch.device("cpu"))
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (0, 1), "prefetch")
    pool.wait_for([0])
    assert pool.late == 0 and pool.late_layers == {}


PREFETCHING = "cache { capacity = 4 }\n prefetch { strategy = history  budget = 2 }"


@pytest.mark.parametrize("cuda", [True, False])
def test_the_hf_stats_count_hits_on_arrival(cuda):
    """Live hits are counted on arrival: with copies that land only when the host syncs
    (the double), prefetched keys the next dispatch reads are late, taken out of the hits;
    on the CPU (synchronous copies) nothing is late and the stats are the runtime's."""
    pytest.importorskip("transformers")
    from mpl.offload.hf import attach
    from mpl.offload.models import build_model, encode

    from offload_helpers import generate, policy

    model = build_model("tiny-mixtral")
    h = attach(policy(PREFETCHING), model, **({"ops": TimedOps()} if cuda else {}))
    try:
        generate(model, torch.tensor([encode("late or not late")]), 4)
        st = h.get_stats()
        raw = h.runtime.stats()
        late = st["late_prefetches"]
        assert (late > 0) == cuda, st
        assert late == h.pool.late
        assert st["hits"] + late == raw["hits"]
        assert st["accesses"] == raw["accesses"]
        assert st["hit_rate"] == pytest.approx(st["hits"] / st["accesses"])
        assert sum(r["late_prefetches"] for r in st["per_layer"]) == late
        for row, rraw in zip(st["per_layer"], raw["per_layer"]):
            assert row["hits"] + row["late_prefetches"] == rraw["hits"]
    finally:
        h.detach()
