"""Memory tiers in the engine-neutral live executor vLLM's offload runs on
(``mpl.mechanism.live.LiveExecutor`` with ``mpl.mechanism.tiered.TierBuild``), without vLLM:
random MoE layers in the Triton kernel's layout, a plain-torch kernel, tiered policies at
the checkpoint's precision (the device cache over a host tier with a capacity over a disk
tier; over host memory; bands mixing both), real runtimes built as the vLLM worker builds
them, dispatch sequences of several tokens per step. Outputs equal the kernel on the full
weights bit for bit; the mechanism's disk reads, demotions and copies equal the runtime's;
the layers on disk keep no host copy; a replay of the recorded trace gives the same per-tier
statistics; a forward without a Plan reads the disk without touching the policy; the
runtime and the mechanism are checked to agree; the CUDA-semantics double
(tests/offload_cuda_double.py) keeps CUDA's ordering rules; ``not_live_yet`` lets these
through for vLLM and refuses a disk tier without path."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

import mpl  # noqa: E402
from mpl.mechanism.live import LiveError, LiveExecutor, silu_experts  # noqa: E402
from mpl.mechanism.shadow import policy_runtime  # noqa: E402
from mpl.mechanism.tiered import TierBuild  # noqa: E402
from mpl.trace import Trace, TraceHeader, records_of  # noqa: E402

import tier_helpers  # noqa: E402
from live_layers import E, H, I, K, L, dispatch_steps, kernel as _kernel, random_layers as _layers  # noqa: E402

torch.set_num_threads(1)
EXPERT_BYTES = (2 * I * H + H * I) * 4


def disk_policy(folder, gpu=3, ram=5, prefetch=True):
    return mpl.loads(tier_helpers.disk_policy(folder, gpu, ram, None if prefetch else ""))


def band_policy(folder):
    # decoder layer 0 over host memory, layers 1..2 over a host tier and the disk
    return mpl.loads(f'''policy b {{
    per_layer_hierarchy {{
        band layers = 0..0 {{ tier g {{ location = gpu  capacity = 2 }}  tier r {{ location = cpu }} }}
        band layers = 1..2 {{
            tier g {{ location = gpu  capacity = 2 }}
            tier r {{ location = cpu  capacity = 3 }}
            tier d {{ location = disk  path = "{folder}" }}
        }}
    }}
}}''')


def _steps(n_steps=10, seed=1, base=0):
    """(layer, x, weights, ids, Dispatch) for every MoE layer of every step."""
    return [row[1:] for row in dispatch_steps(n_steps, seed, base)]


def _header():
    return TraceHeader("tiny", L, tuple(range(L)), E, K, EXPERT_BYTES, "test")


def _start(policy, ops=None, readers=2, stream_slots=E):
    """The executor as vLLM's Offload builds it (the worker's runtime, the files written
    from the engine's tensors first)."""
    _, _, rt = policy_runtime(policy, _header())
    layers = _layers()
    build = TierBuild(rt, layers, list(range(L)), ir=policy.ir)
    ex = LiveExecutor(rt, layers, "cpu", kernel=_kernel, cpu_kernel=_kernel,
                      stream_slots=stream_slots, ops=ops, tiers=build, readers=readers)
    return ex, rt, build, layers


def _run(ex, layers, steps):
    outs = []
    for layer, x, w, ids, d in steps:
        ex.plan(d)
        outs.append((ex.forward(layer, x, w, ids), silu_experts(x, layers[layer], w, ids)))
    return outs


def rows(stats):
    return {r["location"]: r for r in stats["tiers"]}


@pytest.mark.parametrize("gpu,ram,stream_slots", [(3, 5, E), (1, 2, E), (2, 3, 2)])
def test_outputs_equal_the_full_kernel_and_reads_equal_the_runtimes(tmp_path, gpu, ram,
                                                                     stream_slots):
    ex, rt, build, layers = _start(disk_policy(tmp_path, gpu, ram), stream_slots=stream_slots)
    files = ex.stats()["tiers"]["files"]
    assert len(files) == L and all(os.path.isfile(f) for f in files)
    # the layers on disk keep no host copy: the host store holds nothing, the host tier its
    # slots only
    assert ex.hosts == [{}] * L and ex.stats()["host_store_bytes"] == 0
    steps = _steps()
    for got, want in _run(ex, layers, steps):
        assert torch.equal(got, want)
    ex.flush_stalls()
    s, m = rt.stats(), ex.stats()
    t, mt = rows(s), m["tiers"]
    assert mt["disk_reads"] == t["disk"]["reads"] > 0
    assert mt["disk_bytes_read"] == mt["disk_reads"] * mt["record_bytes"]
    assert mt["demotions"] == t["cpu"]["demotions"]
    assert mt["host_cache_slots"] == t["cpu"]["capacity"] == ram
    assert mt["host_cache_bytes"] <= (ram + 1) * mt["record_bytes"]     # + the bounce record
    assert m["copies"] == s["loads"] and m["demand_copies"] == s["demand_loads"]
    assert m["prefetch_copies"] == s["prefetch_loads"] and m["stream_copies"] == s["streamed"]
    assert m["bytes_copied"] == (s["loads"] + s["streamed"]) * m["expert_bytes"]
    assert m["dispatches"] == len(steps) and m["expert_bytes_total"] == L * E * EXPERT_BYTES
    if gpu == 1:            # every miss evicts, demotes, reads
        assert mt["demotions"] > 0 and mt["host_evictions"] > 0
    if stream_slots == 2:
        assert m["multi_pass_dispatches"] > 0
    ex.release()
    build.remove()
    assert not any(os.path.exists(f) for f in files) and os.listdir(tmp_path) == []


def test_replay_of_the_recorded_trace_gives_the_same_tier_statistics(tmp_path):
    policy = disk_policy(tmp_path, 2, 4)
    ex, rt, build, layers = _start(policy)
    steps = _steps(12)
    _run(ex, layers, steps)
    ex.flush_stalls()
    live = rt.stats()
    reads = ex.stats()["tiers"]["disk_reads"]
    ex.release()
    build.remove()
    trace = Trace(_header(), [d for *_, d in steps])
    rep = policy.replay(trace, belady=False)
    stats = rep.stats
    assert stats["tiers"] == live["tiers"]
    for k in ("accesses", "hits", "loads", "evictions", "prefetch_issued", "bytes_loaded"):
        assert stats[k] == live[k], k
    assert reads == rows(stats)["disk"]["reads"] > 0


def test_bands_mix_host_memory_and_the_disk(tmp_path):
    policy = band_policy(tmp_path)
    ex, rt, build, layers = _start(policy)
    assert build.in_ram == [0] and build.on_disk == [1, 2]
    assert set(ex.hosts[0]) == {"w13_weight", "w2_weight"} and ex.hosts[1] == ex.hosts[2] == {}
    for got, want in _run(ex, layers, _steps()):
        assert torch.equal(got, want)
    ex.flush_stalls()
    s, m = rt.stats(), ex.stats()
    assert m["tiers"]["disk_reads"] == sum(r["reads"] for r in s["tiers"] if r["location"] == "disk") > 0
    assert m["copies"] == s["loads"]
    assert len(m["tiers"]["files"]) == 2          # one file per layer on disk
    ex.release()
    build.remove()
    assert os.listdir(tmp_path) == []


def test_a_gpu_over_host_policy_runs_as_its_cache_twin():
    tiered = mpl.loads("policy t { hierarchy { tier g { location = gpu  capacity = 4 }\n"
                       "tier r { location = cpu } } }")
    ex, rt, build, layers = _start(tiered)
    assert build.disks == [] and build.in_ram == list(range(L))
    steps = _steps()
    for got, want in _run(ex, layers, steps):
        assert torch.equal(got, want)
    _, _, twin = policy_runtime(mpl.loads("policy c { cache { capacity = 4 } }"), _header())
    for layer, experts, weights, tokens, step, predictions, _ in records_of([d for *_, d in steps]):
        twin.dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
    assert ex.stats()["tiers"]["disk_reads"] == 0
    for k in ("accesses", "hits", "loads", "evictions"):
        assert rt.stats()[k] == twin.stats()[k], k
    ex.release()


def test_a_forward_without_a_plan_reads_the_disk_and_leaves_the_policy_alone(tmp_path):
    ex, rt, build, layers = _start(disk_policy(tmp_path, 2, 3, prefetch=False), stream_slots=3)
    _run(ex, layers, _steps(4))
    ex.flush_stalls()
    before, m0 = rt.stats(), ex.stats()
    x = torch.randn(9, H)
    ids = torch.tensor([[e, (e + 3) % E] for e in range(E)] + [[0, 1]], dtype=torch.int32)
    w = torch.softmax(torch.randn(9, K), dim=-1)
    got = ex.forward(1, x, w, ids)
    assert torch.equal(got, silu_experts(x, layers[1], w, ids))
    m = ex.stats()
    assert rt.stats() == before and m["copies"] == m0["copies"]
    assert m["tiers"]["disk_reads"] == m0["tiers"]["disk_reads"]
    # every expert the host tier does not hold was read (into the bounce record), apart
    held = sum(1 for k in build.levels[1].cache.content if k is not None and k[0] == 1)
    assert m["tiers"]["unplanned_reads"] == E - held > 0
    assert m["unplanned_dispatches"] == 1 and m["unplanned_copies"] == E
    # and the policy's run goes on bit-identical
    for got, want in _run(ex, layers, _steps(4, seed=5, base=50)):
        assert torch.equal(got, want)
    ex.release()
    build.remove()


def test_reads_in_the_calling_thread_give_the_same_run(tmp_path):
    got = []
    for readers in (0, 3):
        ex, rt, build, layers = _start(disk_policy(tmp_path, 2, 4), readers=readers)
        for a, b in _run(ex, layers, _steps()):
            assert torch.equal(a, b)
        ex.flush_stalls()
        got.append((ex.stats()["tiers"], rt.stats()["tiers"]))
        ex.release()
        build.remove()
    (m0, t0), (m1, t1) = got
    assert m0["disk_reads"] == m1["disk_reads"] and t0 == t1
    assert m0["readers"] == 0 and m0["deferred_copies"] == 0 and m1["readers"] == 3


def test_the_mechanism_checks_that_the_runtime_agrees(tmp_path):
    ex, rt, build, layers = _start(disk_policy(tmp_path, 1, 2, prefetch=False))
    _run(ex, layers, _steps(3))
    cache = build.levels[0].cache
    j = next(i for i, k in enumerate(cache.content) if k is not None)
    cache.put(j, (99, 99))          # the record no longer holds what the runtime thinks
    with pytest.raises(LiveError, match="disagree"):
        _run(ex, layers, _steps(6, seed=3, base=10))
    ex.release()
    build.remove()
    assert os.listdir(tmp_path) == []


def test_tiers_and_runtime_must_match(tmp_path):
    policy = disk_policy(tmp_path)
    _, _, rt = policy_runtime(policy, _header())
    with pytest.raises(LiveError, match="needs its tiers"):
        LiveExecutor(rt, _layers(), "cpu", kernel=_kernel, stream_slots=E)
    plain = mpl.loads("policy c { cache { capacity = 4 } }").runtime(L, E, K)
    build = TierBuild(rt, _layers(), list(range(L)), ir=policy.ir)
    with pytest.raises(LiveError, match="without memory tiers"):
        LiveExecutor(plain, _layers(), "cpu", kernel=_kernel, stream_slots=E, tiers=build)
    build.remove()
    assert os.listdir(tmp_path) == []


def test_a_disk_tier_that_cannot_be_written_is_a_located_error(tmp_path):
    from mpl.mechanism.disk import DiskError

    path = tmp_path / "p.moe"
    path.write_text(f'''policy t {{
    hierarchy {{
        tier g {{ location = gpu  capacity = 2 }}
        tier r {{ location = cpu  capacity = 3 }}
        tier d {{ location = disk  path = "{tmp_path}/no/such" }}
    }}
}}''')
    policy = mpl.load(str(path))
    _, _, rt = policy_runtime(policy, _header())
    with pytest.raises(DiskError) as err:
        TierBuild(rt, _layers(), list(range(L)), ir=policy.ir)
    assert str(err.value).startswith(f"{path}:5: disk tier 'd' of policy 't'")
    assert "does not exist" in str(err.value)
    assert sorted(os.listdir(tmp_path)) == ["p.moe"]


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (FakeCudaOps, compute_before_copy, demand_delayed_by_prefetch,
                                     foreign_waits, host_record_rewritten_in_flight,
                                     slot_reused_before_demotion, slot_write_while_read,
                                     unpinned_async_copies)
    ops = FakeCudaOps()
    ex, rt, build, layers = _start(disk_policy(tmp_path, 1, 2), ops=ops, stream_slots=3)
    for got, want in _run(ex, layers, _steps()):
        assert torch.allclose(got, want, atol=1e-6)
    ex.flush_stalls()
    m = ex.stats()
    log = ops.log
    assert host_record_rewritten_in_flight(log) == []
    assert slot_reused_before_demotion(log) == []
    assert slot_write_while_read(log) == []
    assert compute_before_copy(log) == []
    assert foreign_waits(log, ops.compute_stream) == []
    assert demand_delayed_by_prefetch(log) == []
    assert unpinned_async_copies(log) == []
    # not vacuous: records rewritten after copies out of them, slots demoted then reused
    assert sum(op.kind == "host_write" for op in log) == m["tiers"]["disk_reads"] > 2
    assert m["tiers"]["demotions"] > 0
    assert any(op.kind == "copy" and op.tag == ("demote", "host") and op.non_blocking for op in log)
    assert m["tiers"]["disk_reads"] == rows(rt.stats())["disk"]["reads"]
    # the same sequence again: nothing allocated on the device or in pinned host memory
    allocs, pinned = ops.allocations, ops.host_allocations
    for got, want in _run(ex, layers, _steps(base=100)):
        assert torch.allclose(got, want, atol=1e-6)
    assert ops.allocations == allocs and ops.host_allocations == pinned
    ex.release()
    build.remove()


def test_footprint_counts_the_host_tier_not_the_experts_on_disk(tmp_path):
    from mpl.mechanism import footprint
    from mpl.mechanism.disk import IO_ALIGN, RecordLayout

    policy = disk_policy(tmp_path, 3, 5)
    _, _, rt = policy_runtime(policy, _header())
    layers = _layers()
    fp = footprint.live_executor(layers, rt.num_slots, E, "cpu", tier_layout=rt.tier_layout)
    stride = RecordLayout(layers[0]).stride
    parts = {p.what: p.nbytes for p in fp.parts}
    assert parts["host tier cache"] == 5 * stride + IO_ALIGN
    assert parts["disk bounce record"] == stride + IO_ALIGN
    assert "host store" not in parts            # every layer is on disk: no host copy
    plain = footprint.live_executor(layers, rt.num_slots, E, "cpu")
    assert fp.peak(footprint.HOST) < plain.peak(footprint.HOST)


def test_not_live_yet_lets_these_tiers_through_for_vllm(tmp_path):
    # (the low-precision, second gpu tier, split and CPU-over-disk cases, and what vLLM
    # still refuses: tests/test_vllm_live_more_tiers.py)
    from mpl.mechanism.preflight import not_live_yet

    assert not_live_yet(disk_policy(tmp_path).ir, "vllm") is None
    assert not_live_yet(band_policy(tmp_path).ir, "vllm") is None
    path = tmp_path / "p.moe"
    path.write_text("policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"
                    "    tier r { location = cpu  capacity = 4 }\n    tier d { location = disk }\n"
                    "  }\n}\n")
    why = not_live_yet(mpl.load(str(path)).ir, "vllm")
    assert why.startswith(f"{path}:5: the disk tier 'd'") and "no path" in why
    assert not_live_yet(mpl.load(str(path)).ir, "huggingface") is None
