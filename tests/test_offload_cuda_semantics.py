"""The CUDA path on the CPU: the live mechanism runs against a CUDA-semantics double of its
device operations (tests/offload_cuda_double.py) and real dispatch sequences of tiny models
are checked against CUDA's ordering rules; and the host synchronisations are counted, with
the double and with the ordinary CPU operations, for every experts implementation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from mpl.offload.hf import attach  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import generate, policy, teacher_forced_logits  # noqa: E402
from offload_cuda_double import (FakeCudaOps, compute_before_copy, demand_delayed_by_prefetch,  # noqa: E402
                                 foreign_waits, host_buffer_reused_in_flight, slot_write_while_read,
                                 small_pool, unpinned_async_copies)

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Streams, events and slots")])
IMPLS = ("eager", "batched_mm", "grouped_mm")

POLICIES = {
    "lru capacity 3": "cache { capacity = 3 }",
    "history prefetch": "cache { capacity = 6 }\n prefetch { strategy = history\n budget = 2 }",
    "lookahead prefetch": "cache { capacity = 8 }\n prefetch { strategy = lookahead\n budget = 2 }",
    "score eviction": "cache { capacity = 4\n eviction = score }",
    "cpu_fallback": "cache { capacity = 12 }\n schedule { mode = cpu_fallback }",
    "hybrid": "cache { capacity = 3 }\n schedule { mode = hybrid }",
    "per-layer lfu": ("cache { capacity = 3\n eviction = lfu }\n per_layer { allocation = entropy\n"
                      " min_capacity = 2\n max_capacity = 8\n rebalance_interval = 4 }"),
    # a pool of one entry per key (3 layers x 8 experts): home placement
    "every expert": "cache { capacity = 24 }",
    "every expert, ttl": "cache { capacity = 24\n ttl = 5 }",
}


def _gen(model, n=5):
    return generate(model, PROMPT, n)


@pytest.fixture(scope="module")
def models():
    return {impl: build_model("tiny-mixtral", experts_implementation=impl) for impl in IMPLS}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("label", list(POLICIES))
def test_dispatch_sequences_keep_cuda_invariants(models, impl, label):
    model = models[impl]
    seq0, log0 = _gen(model)
    ref = teacher_forced_logits(model, seq0)
    ops = FakeCudaOps()
    h = attach(policy(POLICIES[label]), model, ops=ops)
    try:
        seq1, log1 = _gen(model)
        if label in ("cpu_fallback", "hybrid"):   # the CPU's sums differ in the last bits: teacher forcing
            assert torch.allclose(ref, teacher_forced_logits(model, seq0), atol=1e-4)
        else:
            assert torch.equal(seq0, seq1) and torch.equal(log0, log1)
        allocs = ops.allocations
        _gen(model)                       # the same shapes again: nothing new to allocate
        assert ops.allocations == allocs, "the mechanism allocated device memory per step"
        stats = h.get_stats()["mechanism"]
    finally:
        h.detach()
    log = ops.log
    assert slot_write_while_read(log) == []
    assert compute_before_copy(log) == []
    assert foreign_waits(log, ops.compute_stream) == []
    assert demand_delayed_by_prefetch(log) == []
    assert unpinned_async_copies(log) == []
    assert host_buffer_reused_in_flight(log) == []
    # the log really exercised the queues (the checks above are not vacuous)
    copies = [op for op in log if op.kind == "copy" and op.non_blocking]
    assert copies and any(op.kind == "compute" for op in log)
    assert any(op.kind == "wait" and op.stream is ops.compute_stream for op in log)
    if "prefetch" in label:
        assert any(op.tag and op.tag[0] == "prefetch" for op in copies)
    assert stats["host_syncs"] == stats["dispatches"]
    if label == "cpu_fallback":
        assert stats["cpu_computes"] > 0
    if impl != "eager" and label in ("lru capacity 3", "history prefetch", "per-layer lfu"):
        assert stats["lean_dispatches"] > 0       # the lean decode path is among what is checked
    if impl != "eager" and label.startswith("every expert"):
        assert stats["home_placement"] and stats["home_dispatches"] > 0


def test_demand_and_prefetch_use_different_streams(models):
    ops = FakeCudaOps()
    h = attach(policy(POLICIES["history prefetch"]), models["batched_mm"], ops=ops)
    _gen(models["batched_mm"])
    h.detach()
    streams = {}
    for op in ops.log:
        if op.kind == "copy" and op.tag and op.tag[0] in ("demand", "prefetch", "background", "stream"):
            streams.setdefault(op.tag[0], set()).add(op.stream)
    assert streams["demand"] and streams["prefetch"]
    assert not (streams["demand"] & streams["prefetch"])
    (d,), (p,) = streams["demand"], streams["prefetch"]
    assert d.priority < p.priority          # demand first when both have work


def test_cpu_experts_inputs_leave_before_the_device_pass(models):
    """cpu_fallback: the CPU experts' hidden states come to the host in the dispatch's one
    read, before the device pass is queued; their result returns non_blocking from pinned
    memory after it (the CPU computes while the device pass runs)."""
    ops = FakeCudaOps()
    model = models["batched_mm"]
    h = attach(policy(POLICIES["cpu_fallback"]), model, ops=ops)
    seen = []

    def spy(real):
        def compute(*a, **k):
            seen.append(len(ops.log))
            return real(*a, **k)
        return compute
    for b in h.layers:
        b.cpu.compute = spy(b.cpu.compute)
    _gen(model, 3)
    st = h.get_stats()["mechanism"]
    h.detach()
    assert st["cpu_computes"] > 0 and seen
    log = ops.log
    overlapped = 0
    for at in seen:
        before = log[:at]
        fetch = max(i for i, op in enumerate(before) if op.kind == "fetch")
        # the device pass (its compute op; none when every expert is on the CPU) is queued
        # between the read and the CPU compute
        overlapped += any(op.kind == "compute" for op in before[fetch:])
        # and no host synchronisation happens between the read and the CPU compute
        assert not any(op.kind in ("fetch", "sync") for op in before[fetch + 1:])
        after = log[at:]
        up = next(op for op in after if op.kind == "copy")
        assert up.tag[0] == "upload" and up.non_blocking and up.src_pinned
    assert overlapped > 0
    assert st["host_syncs"] == st["dispatches"]


@pytest.mark.parametrize("label", ["lru capacity 3", "lookahead prefetch", "cpu_fallback"])
def test_reads_reuse_one_pinned_buffer(models, label, monkeypatch):
    """CudaOps.fetch / read_ids (run as on a GPU: the double replaces only the CUDA
    primitives): once the read buffer has grown to the largest read, a generate allocates
    no pinned host memory at all, and no read copies into bytes an earlier copy may still be
    writing. (Before: ``torch.empty(..., pin_memory=True)`` per tensor per read.)"""
    real_empty = torch.empty
    pinned = []

    def empty(*a, **k):               # the caching host allocator's way in
        if k.pop("pin_memory", False):
            pinned.append(a)
        return real_empty(*a, **k)
    monkeypatch.setattr(torch, "empty", empty)
    ops = FakeCudaOps()
    model = models["grouped_mm"]
    h = attach(policy(POLICIES[label]), model, ops=ops)
    try:
        _gen(model)                   # the prompt's read is the largest: the buffer grows once
        before = ops.host_allocations
        _gen(model)
        st = h.get_stats()["mechanism"]
    finally:
        h.detach()
    assert pinned == [], "pinned host memory allocated outside Ops.host_buffer"
    assert ops.host_allocations == before, "pinned host buffers allocated per step"
    reads = [op for op in ops.log if op.kind == "copy" and op.tag == ("read", None)]
    assert len(reads) >= st["dispatches"]
    assert all(op.non_blocking and op.dst_pinned and op.buffer for op in reads)
    assert len({op.buffer[2] for op in reads[-st["dispatches"] // 2:]}) == 1   # one buffer, reused
    assert host_buffer_reused_in_flight(ops.log) == []
    assert st["host_syncs"] == st["dispatches"]


def test_checks_catch_a_host_buffer_reused_in_flight():
    ops = FakeCudaOps()
    dst = ops.alloc((4,), torch.float32)
    buf = ops.host_buffer(4, torch.float32)
    ops.copy(dst, buf, non_blocking=True, tag=("upload", None))
    ev = ops.event()
    ops.record(ev)
    ops.synchronize(ev)                     # the copy out of buf is done: buf may be rewritten
    ops.copy(dst, buf, non_blocking=True, tag=("upload", None))
    assert host_buffer_reused_in_flight(ops.log) == []
    ops.copy(dst, buf, non_blocking=True, tag=("upload", None))    # no wait: still in flight
    assert len(host_buffer_reused_in_flight(ops.log)) == 1
    # a fetch that did not wait for its copies before the next one reuses its buffer
    ops = FakeCudaOps()
    ops.synchronize = lambda event=None: None
    ids = torch.tensor([[1, 2]])
    ops.fetch([ids])
    ops.fetch([ids])
    assert len(host_buffer_reused_in_flight(ops.log)) == 1


# ---------------------------------------------------------------------------- sync counting
_SYNCING = ("nonzero", "_local_scalar_dense", "masked_select", "unique", "_unique")


class SyncCounter(TorchDispatchMode):
    """Counts the aten ops that make the host wait for the device on CUDA (data-dependent
    shapes or scalar reads)."""

    def __init__(self):
        super().__init__()
        self.hits = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in _SYNCING or (name == "index" and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()))):
            self.hits.append(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("fake", [False, True], ids=["cpu-ops", "cuda-double"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("label", list(POLICIES))
def test_one_blocking_read_per_moe_layer(models, impl, label, fake):
    model = models[impl]
    ops = FakeCudaOps() if fake else None
    h = attach(policy(POLICIES[label]), model, ops=ops)
    counter = SyncCounter()
    calls = {b.module: b.module.forward for b in h.layers}     # the engine's per-layer forward

    def counting(call):
        def counted(*a):
            with counter:
                return call(*a)
        return counted
    for module, call in calls.items():
        module.forward = counting(call)
    try:
        _gen(model, 4)
        st = h.get_stats()["mechanism"]
    finally:
        for module, call in calls.items():
            module.forward = call
        h.detach()
    assert counter.hits == [], f"syncing ops in the engine: {sorted(set(counter.hits))}"
    assert st["dispatches"] > 0
    assert st["host_syncs"] == st["dispatches"], \
        f"{st['host_syncs']} blocking reads for {st['dispatches']} MoE dispatches"


# ---------------------------------------------------------------------------- the checks catch
def test_checks_catch_a_single_fifo_copy_stream():
    ops = FakeCudaOps()
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (0, 1), "prefetch")
    pool.copy_in(1, host, 2, (0, 2), "demand")
    assert demand_delayed_by_prefetch(ops.log) == []
    ops = FakeCudaOps()
    pool, host = small_pool(ops)
    pool.prefetch_stream = pool.demand_stream          # the old design: one FIFO stream
    pool.copy_in(0, host, 1, (0, 1), "prefetch")
    pool.copy_in(1, host, 2, (0, 2), "demand")
    assert len(demand_delayed_by_prefetch(ops.log)) == 1


def test_checks_catch_overwrite_and_early_compute():
    ops = FakeCudaOps()
    pool, host = small_pool(ops)
    pool.copy_in(0, host, 1, (0, 1), "demand")
    pool.wait_for([0])
    pool.release([0])                                 # compute reads slot 0
    pool.copy_in(0, host, 2, (0, 2), "demand")        # waits for that compute: fine
    assert slot_write_while_read(ops.log) == [] and compute_before_copy(ops.log) == []
    assert foreign_waits(ops.log, ops.compute_stream) == []
    # without the free event: the copy may overwrite the slot while compute reads it
    pool.wait_for([0])
    pool.release([0])
    pool.free[0] = None
    pool.ready[0] = None
    pool.copy_in(0, host, 3, (0, 3), "demand")
    assert len(slot_write_while_read(ops.log)) == 1
    # compute that does not wait for the copy into the slot it reads
    ops.compute([0])
    assert len(compute_before_copy(ops.log)) == 1
    # compute that waits for a slot it does not read
    pool.copy_in(1, host, 4, (0, 4), "demand")
    pool.wait_for([1])
    ops.compute([2])
    assert len(foreign_waits(ops.log, ops.compute_stream)) == 1


def test_checks_catch_pageable_async_copies():
    ops = FakeCudaOps()
    dst = ops.alloc((4,), torch.float32)
    ops.copy(dst, ops.host_buffer(4, torch.float32), non_blocking=True)
    assert unpinned_async_copies(ops.log) == []
    ops.copy(dst, torch.ones(4), non_blocking=True)   # pageable: a hidden synchronous copy
    assert len(unpinned_async_copies(ops.log)) == 1
