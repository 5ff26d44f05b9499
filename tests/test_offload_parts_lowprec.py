"""Parts in a low-precision tier live (SPEC §12 ``granularity_split = N`` with an ``int8`` /
``int4`` gpu tier; docs/offload.md, "Parts in a low-precision tier"): the warm tier under the
device cache of parts holds quantised parts (one precision or a ``dtype_ladder``), over host
memory or over a host tier and a disk tier, in HuggingFace attach. A part the runtime serves
from the warm tier is dequantised into its place in the transient entry the expert is put
together in: the run is the model whose experts are quantised part by part, bit for bit
(and, where the parts are whole rows of a family that stores ``[output, input]``, the model
whose whole experts are quantised); the approximate computes (by precision), the keys held
at each rung, the fills, requants, disk reads and demotions equal the runtime's per-tier
statistics and a replay's of the trace recorded in the same run; CUDA's ordering rules hold
on the CUDA-semantics double; the runtime and the mechanism are checked to agree; attach's
estimate counts the tier's area."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint, quant  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import IMPLS, assert_replay_agrees, generate, row, run_recorded  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Parts, approximately.")])


def text(folder=None, warm="dtype = int8", hot=2, cap=5, ram=4, n=2, mechanism="copy",
         threshold=None, extra="prefetch { strategy = history  budget = 1 }"):
    """The policy; ``folder`` None: host memory holding every expert under the gpu tiers,
    else a host tier of ``ram`` part records over a disk tier written there."""
    below = "tier ram  { location = cpu }" if folder is None else (
        f"tier ram  {{ location = cpu  capacity = {ram} }}\n"
        f"    tier ssd  {{ location = disk  path = \"{folder}\" }}")
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  {warm}  capacity = {cap} }}
    {below}
    on demote(hot -> warm) {{ mechanism = {mechanism} }}{promote}
    granularity_split = {n}
    eviction = lru
  }}
  {extra}
}}''')


def gen(model, n=6):
    return generate(model, PROMPT, n)


def check_counts(st, rs, *, disk: bool, mechanism: str, ladder: bool) -> None:
    mech = st["mechanism"]
    tiers = mech["tiers"]
    low = tiers["lowprec"][0]
    w = row(st, "warm")
    assert_replay_agrees(st, rs)
    for k in ("approximate_computes", "approximate_by_dtype"):
        assert rs[k] == st[k], k
    # experts computed with a part dequantised, by the lowest precision among their parts
    assert st["approximate_computes"] == tiers["approximate"] == w["approximate"] > 0
    assert tiers["approximate_by_dtype"] == st["approximate_by_dtype"]
    assert low["dequantized_parts"] >= low["approximate"]
    if ladder:
        assert low["resident_at"] == w["resident_at"]
        assert tiers["rung_requants"] == w["requantized"]
    # into the warm tier: the device cache's victims (in place from the part slot, or by
    # copy from the host store's row; over a disk tier from the part slot), promotions
    # from host memory or the host tier's part records
    if disk or mechanism == "in_place_requant":
        assert tiers["requants"] == w["demotions"] > 0
        assert tiers["quantized_from_host"] == w["promotions"] > 0
    else:
        assert tiers["requants"] == 0
        assert tiers["quantized_from_host"] == w["promotions"] + w["demotions"]
    if disk:
        r, d = row(st, "ram"), row(st, "ssd")
        assert tiers["disk_reads"] == d["reads"] > 0
        assert tiers["demotions"] + tiers["low_demotions"] == r["demotions"]
        assert tiers["demotion_reads"] <= tiers["low_demotions"]
    assert mech["tiers"]["parts"]["split"] == 2


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_counts_equal_the_runtime_and_a_replay(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    for folder, warm, mechanism, thr in (
            (None, "dtype = int8", "copy", None),
            (None, "dtype_ladder = [int8, int4]", "in_place_requant", 0.3),
            (tmp_path, "dtype = int4", "copy", 0.3),
            (tmp_path, "dtype_ladder = [int8, int4]", "in_place_requant", None)):
        policy = text(folder, warm, mechanism=mechanism, threshold=thr)
        out, st, rs = run_recorded(model, policy, PROMPT)
        check_counts(st, rs, disk=folder is not None, mechanism=mechanism,
                     ladder="ladder" in warm)
        assert out[0].shape == ref[0].shape and not torch.equal(out[1], ref[1])
        assert os.listdir(tmp_path) == []
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)
    assert torch.equal(gen(model)[1], ref[1])


def part_quantized(model, dtype: str, n: int):
    """``model`` with every expert's parts replaced by their dequantised copies, each part
    quantised alone: for every 2-D parameter, the stored rows its run touches (the elements
    outside the run zero), as the ``[output, input]`` matrix."""
    from mpl.offload.hf import discover
    with torch.no_grad():
        for b in discover(model):
            tr = bool(b.module.is_transposed)
            for p in b.module.parameters(recurse=False):
                for e in range(p.shape[0]):
                    row_ = p[e]
                    flat = row_.reshape(-1)
                    numel, c = flat.numel(), -(-flat.numel() // n)
                    out = flat.clone()
                    for k in range(n):
                        a, z = min(k * c, numel), min((k + 1) * c, numel)
                        if z <= a or row_.dim() != 2:
                            continue
                        C = row_.shape[1]
                        r0, r1 = a // C, -(-z // C)
                        blk = torch.zeros((r1 - r0) * C, dtype=p.dtype)
                        blk[a - r0 * C:z - r0 * C] = flat[a:z]
                        m = blk.view(r1 - r0, C)
                        m = m.t() if tr else m
                        s = quant.spec(m.shape[0], m.shape[1], dtype)
                        dq = quant.dequantize(*quant.quantize(m, s), s, p.dtype)
                        dq = dq.t() if tr else dq
                        out[a:z] = dq.reshape(-1)[a - r0 * C:z - r0 * C]
                    flat.copy_(out)
    return model


@pytest.mark.parametrize("family,impl,dtype,n", [("tiny-mixtral", "eager", "int4", 2),
                                                 ("tiny-qwen2-moe", "grouped_mm", "int8", 3),
                                                 ("tiny-gpt-oss", "batched_mm", "int4", 2),
                                                 ("tiny-olmoe", "batched_mm", "int8", 4)])
def test_an_approximate_compute_is_the_experts_function_on_the_dequantised_parts(
        family, impl, dtype, n):
    # every access served from the warm tier (trigger_threshold 1: never promoted to the top
    # tier; the warm tier holds every part): the run is the model whose parts are their
    # dequantised copies, bit for bit
    from test_offload_lowprec import fake_quantized
    model = build_model(family, layers=2, experts_implementation=impl)
    want = gen(part_quantized(build_model(family, layers=2, experts_implementation=impl),
                              dtype, n))
    h = text(warm=f"dtype = {dtype}", cap=64, n=n, threshold=1.0, extra="").attach(model)
    out = gen(model)
    st = h.get_stats()
    h.detach()
    assert st["approximate_computes"] == st["accesses"] == st["mechanism"]["tiers"]["approximate"]
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    if n in (2, 4) and family != "tiny-gpt-oss":
        # whole stored rows of [output, input] matrices: quantised as the whole expert's rows
        whole = gen(fake_quantized(build_model(family, layers=2, experts_implementation=impl),
                                   dtype))
        assert torch.equal(out[1], whole[1])


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    for folder, warm, mechanism in ((None, "dtype = int4", "copy"),
                                    (tmp_path, "dtype_ladder = [int8, int4]", "in_place_requant")):
        policy = text(folder, warm, mechanism=mechanism, threshold=0.3)
        h = policy.attach(model)
        want = gen(model)
        h.detach()
        out, st, ops = generate_on_double(policy, model, gen)
        assert torch.equal(want[0], out[0]) and torch.equal(want[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                                   host_record_rewritten_in_flight,
                                   slot_reused_before_demotion) == {}
        low = st["mechanism"]["tiers"]["lowprec"][0]
        assert low["dequantized_parts"] > 0 and low["quantized_from_host"] > 0
        assert any(op.kind == "copy" and op.tag[0] == "quantize" and op.non_blocking
                   for op in ops.log)
    assert os.listdir(tmp_path) == []


def test_the_mechanism_checks_that_the_runtime_agrees():
    model = build_model("tiny-mixtral", layers=2)
    h = text(hot=1, cap=3, extra="").attach(model)
    try:
        gen(model, 2)
        a = h.engine.tiers.areas[0]
        for j, k in enumerate(a.content):
            if k is not None:
                a.put(j, (k[0], k[1], 1 - k[2]))    # the slot holds the other part
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 6)
    finally:
        h.detach()


def test_the_area_and_the_estimate_count_part_records(monkeypatch):
    from mpl.mechanism.lowprec import QuantLayout
    from mpl.mechanism.lowprec_parts import PartQuantLayout
    model = build_model("tiny-olmoe", layers=2)
    policy = text(warm="dtype = int4", cap=6, n=4)
    h = policy.attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    template = {n: p.data for n, p in h.layers[0].module._parameters.items()}
    low = st["mechanism"]["tiers"]["lowprec"][0]
    stride = PartQuantLayout(template, 4, "int4").stride
    # (capacity 6 experts: 6 x 4 part slots, as the runtime counts the tier in parts)
    assert low["record_bytes"] == stride and low["slots"] == 6 * 4
    assert stride < QuantLayout(template, "int4").stride // 2       # a part, not an expert
    assert st["memory"]["lowprec_bytes"] == low["bytes"] == 24 * stride
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    kib = float(str(err.value).split("int4 tier 'warm' area +")[1].split(" KiB")[0]
                .replace(",", ""))
    assert abs(kib * 1024 - 24 * stride) < 1024


@pytest.mark.parametrize("family", ["tiny-olmoe", "tiny-gpt-oss"])
def test_the_estimate_lays_part_records_out_as_the_tier_does(family):
    """The memory estimate's part record size (from shapes, no quantisation) is the one the
    tier allocates, for every split and precision, rows [output, input] and transposed."""
    from mpl.mechanism.lowprec_parts import PartQuantLayout
    model = build_model(family, layers=1)
    binding = mpl.offload.hf.discover(model)[0]
    template = {n: p.data for n, p in binding.module._parameters.items()}
    tr = bool(getattr(binding.module, "is_transposed", False))
    for n in (2, 3, 4, 7):
        for dtype in ("int8", "int4"):
            assert footprint.part_quant_stride(template, n, dtype, transposed=tr) == \
                PartQuantLayout(template, n, dtype, transposed=tr).stride, (n, dtype)


def test_it_runs_live_in_both_engines(tmp_path):
    # (vLLM's: tests/vllm_suite/test_vllm_more_tiers.py)
    from mpl.api import not_live_yet
    for folder in (None, tmp_path):
        ir = text(folder).ir
        assert not_live_yet(ir, "huggingface") is None
        assert not_live_yet(ir, "vllm") is None


def test_cpu_fallback_over_a_disk_tier_computes_from_the_part_records(tmp_path):
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    sched = "schedule { mode = cpu_fallback }"
    h = text(None, hot=2, cap=6, threshold=0.3, extra=sched).attach(model)
    want = gen(model)
    h.detach()
    policy = text(tmp_path, hot=2, cap=6, ram=3, threshold=0.3, extra=sched)
    out, st, rs = run_recorded(model, policy, PROMPT)
    # (the CPU computes from the same bytes as from the host store)
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    tiers = st["mechanism"]["tiers"]
    assert st["cpu_computes"] == tiers["cpu_from_records"] > 0
    assert st["approximate_computes"] == tiers["approximate"] > 0
    assert_replay_agrees(st, rs)
    assert rs["cpu_computes"] == st["cpu_computes"]
    assert os.listdir(tmp_path) == []
