"""The tiers beyond the checkpoint's precision in the engine-neutral live executor vLLM's
offload runs on (``mpl.mechanism.live.LiveExecutor`` with ``mpl.mechanism.tiered``), without
vLLM: random MoE layers in the Triton kernel's layout, the plain-torch kernel, real runtimes
built as the vLLM worker builds them, dispatch sequences of several tokens per step.

* a low-precision gpu tier (int8, int4, the int8/int4 ``dtype_ladder``) right under the top
  tier over host memory: the accesses computed from quantised copies equal the runtime's
  approximate computes (overall, per tier, per rung) and a replay's of the recorded trace;
  an approximate compute is exactly the kernel on the dequantised copy; in a band beside a
  band over a second gpu tier, a host tier and the disk, with ``cpu_fallback``;
* a second full-precision gpu tier (over host memory, over a host tier and a disk tier),
  ``granularity_split`` (over host memory, over a host tier and a disk tier, with the second
  gpu tier), computing on the CPU (``cpu_fallback``, ``hybrid``) over a disk tier (with and
  without a split): outputs equal the kernel on the full weights bit for bit, the copies
  equal the runtime's loads, a replay gives the same per-tier statistics, a forward without
  a Plan computes exactly and leaves the policy alone;
* what vLLM still refuses is refused, located (``not_live_yet(..., "vllm")``)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

import mpl  # noqa: E402
from mpl.mechanism import quant  # noqa: E402
from mpl.mechanism.live import LiveExecutor, silu_experts  # noqa: E402
from mpl.mechanism.preflight import not_live_yet  # noqa: E402
from mpl.mechanism.shadow import policy_runtime  # noqa: E402
from mpl.mechanism.tiered import TierBuild  # noqa: E402
from mpl.trace import Trace, TraceHeader  # noqa: E402

from live_layers import E, H, I, K, L, dispatch_steps, kernel, random_layers  # noqa: E402

torch.set_num_threads(1)
EXPERT_BYTES = (2 * I * H + H * I) * 4


def _header():
    return TraceHeader("tiny", L, tuple(range(L)), E, K, EXPERT_BYTES, "test")


def _start(policy, stream_slots=E, readers=2, layers=None):
    _, _, rt = policy_runtime(policy, _header())
    layers = layers or random_layers()
    build = TierBuild(rt, layers, list(range(L)), ir=policy.ir)
    ex = LiveExecutor(rt, layers, "cpu", kernel=kernel, cpu_kernel=kernel,
                      stream_slots=stream_slots, tiers=build, readers=readers)
    return ex, rt, build, layers


def _steps(n=10, seed=1, base=0):
    return [row[1:] for row in dispatch_steps(n, seed, base)]


def _run(ex, steps):
    out = []
    for layer, x, w, ids, d in steps:
        ex.plan(d)
        out.append(ex.forward(layer, x, w, ids))
    return out


def _replayed(policy, steps):
    return policy.replay(Trace(_header(), [d for *_, d in steps]), belady=False).stats


def rows(stats):
    return {r["tier"]: r for r in stats["tiers"]}


def low_policy(dtype, hot=2, cap=6, threshold=None, extra=""):
    kind = (f"dtype_ladder = [{', '.join(dtype)}]" if isinstance(dtype, list)
            else f"dtype = {dtype}")
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy warm {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  {kind}  capacity = {cap} }}
    tier ram  {{ location = cpu }}
    on demote(hot -> warm) {{ mechanism = in_place_requant }}{promote}
    eviction = lru
  }}
  {extra}
}}''')


@pytest.mark.parametrize("dtype", ["int8", "int4", ["int8", "int4"]])
def test_low_precision_counts_equal_the_runtime_and_a_replay(dtype):
    policy = low_policy(dtype, extra="prefetch { strategy = history  budget = 1 }")
    assert not_live_yet(policy.ir, "vllm") is None
    ex, rt, build, layers = _start(policy)
    steps = _steps(12)
    got = _run(ex, steps)
    ex.flush_stalls()
    st, m = rt.stats(), ex.stats()
    mt = m["tiers"]
    w = rows(st)["warm"]
    assert st["approximate_computes"] == mt["approximate"] == w["approximate"] > 0
    assert mt["lowprec"][0]["approximate"] == w["approximate"]
    assert m["copies"] == st["loads"] and m["stream_copies"] == st["streamed"]
    assert mt["requants"] > 0
    if isinstance(dtype, list):         # each rung's computes, and keys pushed a rung down
        low = mt["lowprec"][0]
        assert low["dtype_ladder"] == dtype
        assert sum(low["approximate_at"].values()) == w["approximate"]
        assert mt["approximate_by_dtype"] == {d: n for d, n in low["approximate_at"].items() if n}
    rep = _replayed(policy, steps)
    assert rep["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "evictions", "approximate_computes", "bytes_loaded"):
        assert rep[k] == st[k], k
    # computed from the quantised copies: some outputs are not the full weights' numbers
    want = [silu_experts(x, layers[layer], wt, ids) for layer, x, wt, ids, _ in steps]
    assert any(not torch.equal(a, b) for a, b in zip(got, want))
    ex.release()


def _dequantised(layers, dtype):
    """``layers`` with every expert matrix replaced by its dequantised copy (the Triton
    layout is ``[output, input]``: quantised as it is)."""
    out = []
    for layer in layers:
        new = {}
        for name, t in layer.items():
            d = t.clone()
            for e in range(t.shape[0]):
                s = quant.spec(t.shape[1], t.shape[2], dtype)
                d[e] = quant.dequantize(*quant.quantize(t[e], s), s, t.dtype)
            new[name] = d
        out.append(new)
    return out


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_an_approximate_compute_is_the_kernel_on_the_dequantised_copy(dtype):
    # every access computed from the warm tier (trigger_threshold 1: never promoted; the warm
    # tier holds every expert): the kernel on the dequantised layers, bit for bit
    policy = low_policy(dtype, hot=2, cap=L * E, threshold=1.0)
    ex, rt, build, layers = _start(policy)
    fake = _dequantised(layers, dtype)
    steps = _steps(6)
    for got, (layer, x, w, ids, _) in zip(_run(ex, steps), steps):
        assert torch.equal(got, silu_experts(x, fake[layer], w, ids))
    st = rt.stats()
    assert st["approximate_computes"] == st["accesses"] == ex.stats()["tiers"]["approximate"]
    ex.release()


def disk_tiers(folder, gpu=2, ram=4):
    return (f'    tier r {{ location = cpu  capacity = {ram} }}\n'
            f'    tier d {{ location = disk  path = "{folder}" }}\n')


def full_policy(body, top=3, extra=""):
    return mpl.loads(f"policy t {{\n  hierarchy {{\n    tier g {{ location = gpu  capacity = {top} }}\n"
                     f"{body}  }}\n  {extra}\n}}\n")


#: (case, tier lines under the top tier (FOLDER: the disk tier's path), top capacity, extra
#: policy text, stream slots)
FULL_CASES = [
    ("gpu2-host", "    tier g2 { location = gpu  capacity = 5 }\n    tier r { location = cpu }\n",
     2, "", E),
    ("gpu2-disk", "    tier g2 { location = gpu  capacity = 4 }\n" + disk_tiers("FOLDER"), 2,
     "prefetch { strategy = history  budget = 2 }", E),
    ("split-host", "    tier r { location = cpu }\n    granularity_split = 2\n", 4, "", E),
    ("split-disk", disk_tiers("FOLDER", ram=6) + "    granularity_split = 2\n", 4,
     "prefetch { strategy = history  budget = 2 }", 3),
    ("split-gpu2-disk", "    tier g2 { location = gpu  capacity = 6 }\n"
     + disk_tiers("FOLDER", ram=6) + "    granularity_split = 4\n", 4, "", E),
    ("cpu-disk", disk_tiers("FOLDER"), 2, "schedule { mode = cpu_fallback }", E),
    ("hybrid-split-disk", disk_tiers("FOLDER", ram=12) + "    granularity_split = 2\n", 16,
     "schedule { mode = hybrid }", E),
]


@pytest.mark.parametrize("case,body,top,extra,slots", FULL_CASES, ids=[c[0] for c in FULL_CASES])
def test_full_precision_tiers_are_bit_identical_and_agree_with_a_replay(tmp_path, case, body,
                                                                       top, extra, slots):
    policy = full_policy(body.replace("FOLDER", str(tmp_path)), top, extra)
    assert not_live_yet(policy.ir, "vllm") is None, case
    ex, rt, build, layers = _start(policy, stream_slots=slots)
    steps = _steps(12)
    for got, (layer, x, w, ids, _) in zip(_run(ex, steps), steps):
        assert torch.equal(got, silu_experts(x, layers[layer], w, ids)), case
    ex.flush_stalls()
    st, m = rt.stats(), ex.stats()
    mt = m["tiers"]
    assert m["copies"] == st["loads"] > 0
    assert m["dispatches"] == len(steps)
    rep = _replayed(policy, steps)
    assert rep["tiers"] == st["tiers"], case
    for k in ("accesses", "loads", "evictions", "bytes_loaded", "cpu_computes"):
        assert rep[k] == st[k], (case, k)
    t = {r["location"]: r for r in st["tiers"]}
    if "disk" in case:
        assert mt["disk_reads"] == t["disk"]["reads"] > 0
        assert ex.hosts == [{}] * L and m["host_store_bytes"] == 0
    if "gpu2" in case:
        g2 = mt["gpu_tiers"][0]
        assert g2["tier"] == "g2" and g2["serves"] + g2["promotions"] > 0
        assert mt["gpu_tier_bytes"] == g2["bytes"] > 0
    if "split" in case:
        parts = mt["parts"]
        assert parts["split"] in (2, 4) and parts["gathers"] > 0
        assert m["cache_slots"] == parts["slots"] and m["part_pool_bytes"] == parts["bytes"]
        assert m["pool_slots"] == slots + 1          # the compute pool: transient entries only
    if "cpu" in case or "hybrid" in case:
        assert m["cpu_computes"] == st["cpu_computes"] > 0
        assert mt["cpu_from_records"] > 0
    # a forward without a Plan: exact, and the policy's statistics do not move
    before = rt.stats()
    x = torch.randn(5, H)
    ids = torch.tensor([[e, (e + 3) % E] for e in range(5)], dtype=torch.int32)
    w = torch.softmax(torch.randn(5, K), dim=-1)
    assert torch.equal(ex.forward(1, x, w, ids), silu_experts(x, layers[1], w, ids))
    assert rt.stats() == before and ex.stats()["copies"] == m["copies"]
    ex.release()
    build.remove()
    assert os.listdir(tmp_path) == []


def test_footprint_counts_the_tiers_areas_and_part_slots(tmp_path):
    from mpl.mechanism import footprint
    from mpl.mechanism.lowprec import QuantLayout

    layers = random_layers()
    entry = sum(t[0].numel() * t.element_size() + footprint.ALIGN for t in layers[0].values())

    def parts_of(policy):
        _, _, rt = policy_runtime(policy, _header())
        fp = footprint.live_executor(layers, rt.num_slots, E, "cpu", tier_layout=rt.tier_layout)
        return {p.what: p.nbytes for p in fp.parts}, rt

    for dtype in ("int8", "int4"):
        for tr in (False, True):
            assert footprint.quant_stride(layers[0], dtype, transposed=tr) == \
                QuantLayout(layers[0], dtype, transposed=tr).stride
    biased = {**layers[0], "bias": torch.zeros(E, 7)}       # kept at its own precision
    assert footprint.quant_stride(biased, "int4") == QuantLayout(biased, "int4").stride
    got, rt = parts_of(low_policy("int4", cap=5))
    q = QuantLayout(layers[0], "int4").stride
    assert got["int4 tier 'warm' area"] == 5 * q and got["int4 staging record"] == q
    assert got["device slot pool"] == (rt.num_slots + E + 1) * entry
    got, rt = parts_of(full_policy("    tier g2 { location = gpu  capacity = 5 }\n"
                                   "    tier r { location = cpu }\n", 2))
    assert got["gpu tier 'g2' area"] == 6 * entry
    got, rt = parts_of(full_policy("    tier r { location = cpu }\n    granularity_split = 2\n", 4))
    part = sum(-(-t[0].numel() // 2) * t.element_size() + footprint.ALIGN
               for t in layers[0].values())
    assert got["device slot pool"] == (E + 1) * entry + (rt.num_slots + 1) * part


def test_what_vllm_still_refuses_is_located(tmp_path):
    path = tmp_path / "p.moe"

    def refused(body, match, extra=""):
        path.write_text("policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"
                        + body + "  }\n" + extra + "}\n")
        why = not_live_yet(mpl.load(str(path)).ir, "vllm")
        assert why is not None and why.startswith(f"{path}:") and "\n" not in why, why
        assert match in why, why
        return why

    # a low-precision tier over a host tier with a capacity and a disk tier, or holding
    # parts, runs (tests/vllm_suite/test_vllm_more_tiers.py)
    for body in ("    tier w { location = gpu  dtype = int8  capacity = 4 }\n" + disk_tiers(tmp_path),
                 "    tier w { location = gpu  dtype = int4  capacity = 4 }\n"
                 "    tier r { location = cpu }\n    granularity_split = 2\n"):
        path.write_text("policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"
                        + body + "  }\n}\n")
        assert not_live_yet(mpl.load(str(path)).ir, "vllm") is None
    # the rules both engines share
    refused("    tier w { location = gpu  dtype_ladder = [fp32, int8]  capacity = 4 }\n"
            "    tier r { location = cpu }\n", "several precisions")
    refused("    tier w { location = gpu  capacity = 4 }\n    tier w2 { location = gpu  capacity = 4 }\n"
            "    tier r { location = cpu }\n", "second gpu tier")
    refused("    tier w { location = gpu  dtype = int8  capacity = 4 }\n"
            "    tier w2 { location = gpu  capacity = 4 }\n    tier r { location = cpu }\n",
            "beside a low-precision gpu tier")
    # a disk tier without path: vLLM does not read the checkpoint's own files
    refused("    tier r { location = cpu  capacity = 4 }\n    tier d { location = disk }\n",
            "no path")


@pytest.mark.parametrize("case", ["int4", "gpu2-disk", "split-disk", "cpu-disk"])
def test_cuda_ordering_on_the_double(tmp_path, case):
    from offload_cuda_double import (FakeCudaOps, compute_before_copy, copies_out_of_order,
                                     foreign_waits, host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion, slot_write_while_read,
                                     unpinned_async_copies)
    if case == "int4":
        policy = low_policy("int4", extra="prefetch { strategy = history  budget = 1 }")
    else:
        _, body, top, extra, _ = next(c for c in FULL_CASES if c[0] == case)
        policy = full_policy(body.replace("FOLDER", str(tmp_path)), top, extra)
    ops = FakeCudaOps()
    _, _, rt = policy_runtime(policy, _header())
    layers = random_layers()
    build = TierBuild(rt, layers, list(range(L)), ir=policy.ir)
    ex = LiveExecutor(rt, layers, "cpu", kernel=kernel, cpu_kernel=kernel, stream_slots=3,
                      ops=ops, tiers=build, readers=2)
    steps = _steps(10)
    for got, (layer, x, w, ids, _) in zip(_run(ex, steps), steps):
        if case != "int4":
            assert torch.allclose(got, silu_experts(x, layers[layer], w, ids), atol=1e-6)
    ex.flush_stalls()
    assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                               host_record_rewritten_in_flight, slot_reused_before_demotion,
                               slot_write_while_read, compute_before_copy,
                               unpinned_async_copies) == {}
    assert foreign_waits(ops.log, ops.compute_stream) == []
    m, st = ex.stats(), rt.stats()
    assert m["copies"] == st["loads"]
    mt = m["tiers"]
    # not vacuous: what each case moves was moved
    if case == "int4":
        assert mt["approximate"] == st["approximate_computes"] > 0 and mt["requants"] > 0
    if "disk" in case:
        assert sum(op.kind == "host_write" for op in ops.log) >= mt["disk_reads"] > 0
    if case == "gpu2-disk":
        assert mt["gpu_tiers"][0]["serves"] + mt["gpu_tiers"][0]["promotions"] > 0
    if case == "split-disk":
        assert mt["parts"]["gathers"] > 0
    if case == "cpu-disk":
        assert m["cpu_computes"] > 0 and mt["cpu_from_records"] > 0
    # the same sequence again: nothing allocated on the device or in pinned host memory
    allocs, pinned = ops.allocations, ops.host_allocations
    _run(ex, _steps(6, base=100))
    assert ops.allocations == allocs and ops.host_allocations == pinned
    ex.release()
    build.remove()


def test_a_forward_without_a_plan_puts_split_experts_together_on_the_double(tmp_path):
    # granularity_split over a disk tier: a forward no Plan drove (vLLM's warm-up) reads the
    # parts the host tier does not hold, puts each expert together in one page-locked record
    # and copies it; exact, counted apart, and CUDA's ordering rules hold
    from offload_cuda_double import (FakeCudaOps, host_record_rewritten_in_flight,
                                     ordering_violations, unpinned_async_copies)
    _, body, top, extra, _ = next(c for c in FULL_CASES if c[0] == "split-disk")
    policy = full_policy(body.replace("FOLDER", str(tmp_path)), top, "")
    ops = FakeCudaOps()
    _, _, rt = policy_runtime(policy, _header())
    layers = random_layers()
    build = TierBuild(rt, layers, list(range(L)), ir=policy.ir)
    ex = LiveExecutor(rt, layers, "cpu", kernel=kernel, stream_slots=3, ops=ops, tiers=build,
                      readers=2)
    _run(ex, _steps(4))
    ex.flush_stalls()
    before, m0 = rt.stats(), ex.stats()
    for layer in range(L):
        x = torch.randn(E, H)
        ids = torch.tensor([[e, (e + 3) % E] for e in range(E)], dtype=torch.int32)
        w = torch.softmax(torch.randn(E, K), dim=-1)
        assert torch.allclose(ex.forward(layer, x, w, ids), silu_experts(x, layers[layer], w, ids),
                              atol=1e-6)
    ex.flush_stalls()
    m = ex.stats()
    assert rt.stats() == before and m["copies"] == m0["copies"]
    assert m["tiers"]["disk_reads"] == m0["tiers"]["disk_reads"]
    assert m["tiers"]["unplanned_reads"] > 0 and m["unplanned_copies"] == L * E
    assert ordering_violations(ops, host_record_rewritten_in_flight, unpinned_async_copies) == {}
    for got, (layer, x, w, ids, _) in zip(_run(ex, _steps(4, seed=5, base=50)),
                                          _steps(4, seed=5, base=50)):
        assert torch.allclose(got, silu_experts(x, layers[layer], w, ids), atol=1e-6)
    ex.release()
    build.remove()


def test_bands_mix_a_low_precision_tier_and_a_second_gpu_tier_over_the_disk(tmp_path):
    # decoder layer 0 over an int4 tier and host memory; layers 1..2 over a second gpu tier,
    # a host tier and the disk; misses computed on the CPU
    policy = mpl.loads(f'''policy b {{ per_layer_hierarchy {{
  band layers = 0..0 {{ tier g {{ location = gpu  capacity = 2 }}
    tier w {{ location = gpu  dtype = int4  capacity = 4 }}  tier r {{ location = cpu }} }}
  band layers = 1..2 {{ tier g {{ location = gpu  capacity = 2 }}
    tier g2 {{ location = gpu  capacity = 3 }}  tier r {{ location = cpu  capacity = 3 }}
    tier d {{ location = disk  path = "{tmp_path}" }} }}
}} schedule {{ mode = cpu_fallback }} }}''')
    assert not_live_yet(policy.ir, "vllm") is None
    ex, rt, build, layers = _start(policy)
    assert build.in_ram == [0] and build.on_disk == [1, 2]
    steps = _steps(10)
    for got, (layer, x, w, ids, _) in zip(_run(ex, steps), steps):
        if layer > 0:       # the layers without a low-precision tier: bit for bit
            assert torch.equal(got, silu_experts(x, layers[layer], w, ids))
    ex.flush_stalls()
    st, m = rt.stats(), ex.stats()
    assert st["approximate_computes"] == m["tiers"]["approximate"] > 0
    assert m["cpu_computes"] == st["cpu_computes"] > 0 and m["tiers"]["disk_reads"] > 0
    assert m["copies"] == st["loads"]
    assert _replayed(policy, steps)["tiers"] == st["tiers"]
    ex.release()
    build.remove()
    assert os.listdir(tmp_path) == []
