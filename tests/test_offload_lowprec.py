"""Low-precision gpu tiers live (SPEC §12, docs/offload.md "Low-precision tiers live"): an
int8 or int4 gpu tier under the full-precision device cache in HuggingFace attach. generate()
runs on every experts implementation; the accesses the mechanism computed from quantised
copies equal the runtime's approximate counts (overall and per tier) and a replay's of the
trace recorded in the same run; an approximate compute is exactly the experts function on the
dequantised copy; in_place_requant moves nothing from the host, copy demotions do; a tiered
policy at the checkpoint's precision stays bit-identical; CUDA's ordering rules hold on the
CUDA-semantics double; the runtime and the mechanism are checked to agree; what still does not
run live is refused, located."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl import traceio  # noqa: E402
from mpl.mechanism import quant  # noqa: E402
from mpl.mechanism.device import SyncOps  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import IMPLS, generate, row, replayed  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Approximately right.")])


def warm(dtype, hot=2, cap=6, mechanism="in_place_requant", extra="", threshold=None):
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy warm {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  dtype = {dtype}  capacity = {cap} }}
    on demote(hot -> warm) {{ mechanism = {mechanism} }}{promote}
    eviction = lru
  }}
  {extra}
}}''')


def gen(model, n=5):
    return generate(model, PROMPT, n)


@pytest.mark.parametrize("dtype", ["int8", "int4"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe"])
def test_generate_counts_equal_the_runtime_and_a_replay(family, impl, dtype, tmp_path):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref = gen(model)
    # fp-only tiers: the same model, bit for bit
    h = mpl.loads("policy t { hierarchy { tier g { location = gpu  capacity = 2 }\n"
                  "tier r { location = cpu } } }").attach(model)
    exact = gen(model)
    h.detach()
    assert torch.equal(ref[0], exact[0]) and torch.equal(ref[1], exact[1])

    policy = warm(dtype, extra="prefetch { strategy = history  budget = 1 }")
    h = policy.attach(model)
    with Recorder(model) as rec:
        out = gen(model)
    st = h.get_stats()
    h.detach()
    mech = st["mechanism"]["tiers"]
    w = row(st, "warm")
    assert st["approximate_computes"] == mech["approximate"] == w["approximate"] > 0
    assert mech["lowprec"][0]["approximate"] == w["approximate"]
    assert sum(r["approximate"] for r in st["tiers"]) == st["approximate_computes"]
    assert mech["requants"] > 0 and mech["requants"] == w["demotions"]
    assert mech["quantized_from_host"] == w["promotions"]
    assert st["mechanism"]["copies"] == st["loads"]
    # a replay of the routing recorded in the same run: the same per-tier statistics
    rs = replayed(policy, rec.trace(), h.shape)
    assert rs["tiers"] == st["tiers"]
    # the saved trace carries the checkpoint's precision: it replays alike without the model
    # (else a replay takes 16 bits and the fp32 model's tier bytes come out halved)
    for name in ("t.mpltrace", "t.jsonl"):
        path = str(tmp_path / name)
        if name.endswith(".jsonl"):
            with open(path, "w") as f:
                traceio.dump_jsonl(rec.trace(), f)
        else:
            traceio.save_native(rec.trace(), path)
        saved = traceio.load(path)
        assert saved.header.stored_bits == 32
        assert replayed(policy, saved, None)["tiers"] == st["tiers"], name
    for k in ("accesses", "loads", "evictions", "approximate_computes", "bytes_loaded"):
        assert rs[k] == st[k], k
    # computed from the quantised copies: not the unmodified model's numbers
    assert out[0].shape == ref[0].shape and not torch.equal(out[1], ref[1])
    # detach put every parameter back, bit for bit
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n].detach(), before[n]) for n in before)
    assert torch.equal(gen(model)[1], ref[1])


def fake_quantized(model, dtype):
    """``model`` with every expert matrix replaced by its dequantised int8 / int4 copy (the
    weights a warm tier computes from)."""
    from mpl.offload.hf import discover
    with torch.no_grad():
        for b in discover(model):
            tr = bool(b.module.is_transposed)
            for p in b.module.parameters(recurse=False):
                if p.dim() != 3:
                    continue
                for e in range(p.shape[0]):
                    m = p[e].t() if tr else p[e]
                    s = quant.spec(m.shape[0], m.shape[1], dtype)
                    dq = quant.dequantize(*quant.quantize(m, s), s, p.dtype)
                    p[e].copy_(dq.t() if tr else dq)
    return model


@pytest.mark.parametrize("family,impl,dtype", [("tiny-mixtral", "eager", "int4"),
                                               ("tiny-qwen2-moe", "grouped_mm", "int8"),
                                               ("tiny-gpt-oss", "batched_mm", "int4")])
def test_an_approximate_compute_is_the_experts_function_on_the_dequantised_copy(family, impl, dtype):
    # every access served from the warm tier (trigger_threshold 1: never promoted to the
    # top tier; the warm tier holds every expert): the run is the model whose experts are
    # their dequantised copies, bit for bit
    model = build_model(family, layers=2, experts_implementation=impl)
    want = gen(fake_quantized(build_model(family, layers=2, experts_implementation=impl), dtype))
    h = warm(dtype, hot=2, cap=16, threshold=1.0).attach(model)
    out = gen(model)
    st = h.get_stats()
    h.detach()
    assert st["approximate_computes"] == st["accesses"] == st["mechanism"]["tiers"]["approximate"]
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])


class CountingOps(SyncOps):
    """The CPU's operations, counting copies by what they move (their tags)."""

    def __init__(self, device) -> None:
        super().__init__(device)
        self.tags: dict = {}

    def copy(self, dst, src, *, non_blocking=False, tag=None) -> None:
        kind = tag[0] if isinstance(tag, tuple) else tag
        self.tags[kind] = self.tags.get(kind, 0) + 1
        super().copy(dst, src, non_blocking=non_blocking, tag=tag)


def test_in_place_requant_moves_nothing_from_the_host_and_copy_demotion_does():
    model = build_model("tiny-mixtral", layers=2, experts_implementation="batched_mm")
    got = {}
    for mechanism in ("in_place_requant", "copy"):
        ops = CountingOps(torch.device("cpu"))
        h = warm("int8", mechanism=mechanism).attach(model, ops=ops)
        gen(model)
        st = h.get_stats()
        h.detach()
        got[mechanism] = (ops.tags, st)
    tags, st = got["in_place_requant"]
    w = row(st, "warm")
    assert w["demotions"] > 0
    # host -> device: the pool's loads (one copy per expert parameter) and the warm tier's
    # promotions from host memory (one record each); the demotions none
    params = 2
    assert tags.get("demand", 0) + tags.get("prefetch", 0) == st["loads"] * params
    assert tags.get("quantize", 0) == w["promotions"]
    assert tags.get("requant", 0) > 0 and st["mechanism"]["tiers"]["requants"] == w["demotions"]
    tags_c, st_c = got["copy"]
    w_c = row(st_c, "warm")
    assert w_c["demotions"] == w["demotions"]      # the same decisions
    assert tags_c.get("quantize", 0) == w_c["promotions"] + w_c["demotions"]
    assert tags_c.get("requant", 0) == 0 and st_c["mechanism"]["tiers"]["requants"] == 0
    mech = st_c["mechanism"]["tiers"]
    assert mech["quantized_bytes_from_host"] == mech["quantized_from_host"] * \
        mech["lowprec"][0]["record_bytes"]


def test_memory_the_area_holds_the_tiers_slots():
    model = build_model("tiny-olmoe", layers=2)
    h = warm("int4", cap=5).attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    low = st["mechanism"]["tiers"]["lowprec"][0]
    assert low["slots"] == 5 and low["bytes"] == 5 * low["record_bytes"]
    eb = st["mechanism"]["pool_bytes"] // (st["mechanism"]["pool_slots"] + st["mechanism"]["stream_slots"] + 1)
    assert low["record_bytes"] < eb / 4         # int4 codes + scales: under a third of fp32
    assert st["memory"]["lowprec_bytes"] == low["bytes"]
    assert st["memory"]["peak_bytes"] == (st["memory"]["pool_peak_bytes"]
                                          + st["memory"]["store_peak_bytes"] + low["bytes"])


def test_cuda_ordering_on_the_double():
    from offload_cuda_double import (generate_on_double, host_buffer_reused_in_flight,
                                     ordering_violations, slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    policy = warm("int4", mechanism="copy", extra="prefetch { strategy = history  budget = 1 }")
    h = policy.attach(model)
    want = gen(model)
    h.detach()
    out, st, ops = generate_on_double(policy, model, gen)
    assert torch.equal(want[0], out[0]) and torch.equal(want[1], out[1])
    log = ops.log
    assert ordering_violations(ops, host_buffer_reused_in_flight, slot_reused_before_demotion) == {}
    mech = st["mechanism"]["tiers"]
    assert mech["approximate"] > 0 and mech["quantized_from_host"] > 0
    assert any(op.kind == "copy" and op.tag[0] == "quantize" and op.non_blocking for op in log)
    assert st["mechanism"]["host_syncs"] == st["mechanism"]["dispatches"]


def test_cuda_ordering_of_in_place_requant_on_the_double():
    from offload_cuda_double import FakeCudaOps, compute_before_copy, slot_write_while_read
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="eager")
    ops = FakeCudaOps()
    h = warm("int8", hot=1, cap=3).attach(model, ops=ops)
    try:
        gen(model)
        st = h.get_stats()
    finally:
        h.detach()
    assert st["mechanism"]["tiers"]["requants"] > 0
    # a requant reads its pool entry (a compute on the copy stream) before the entry's next
    # copy, and after the copy that filled it
    assert slot_write_while_read(ops.log) == [] and compute_before_copy(ops.log) == []
    assert any(op.kind == "copy" and op.tag[0] == "requant" for op in ops.log)


def test_the_mechanism_checks_that_the_runtime_agrees():
    model = build_model("tiny-mixtral", layers=2)
    h = warm("int8", hot=1, cap=3).attach(model)
    try:
        gen(model, 2)
        area = h.engine.tiers.areas[0]
        j = next(i for i, k in enumerate(area.content) if k is not None)
        area.put(j, (99, 99))             # the slot no longer holds what the runtime thinks
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 4)
    finally:
        h.detach()


def test_what_does_not_run_live_is_refused_located(tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    head = "policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"

    def refused(body, match):
        path = tmp_path / "p.moe"
        path.write_text(head + body + "  }\n}\n")
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")
        after = dict(model.named_parameters())
        assert all(torch.equal(after[n].detach(), before[n]) for n in before)
        return str(err.value)

    msg = refused("    tier w { location = gpu  dtype = int8  capacity = 4 }\n"
                  "    tier v { location = gpu  dtype = int4  capacity = 4 }\n",
                  "tier 'v' of policy 't' holds experts at int4")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:5:")
    refused("    tier w { location = cpu  dtype = int8  capacity = 4 }\n", "on the host")
    # (over a host tier and a disk tier it runs: tests/test_offload_lowprec_disk.py; over
    # two host tiers it does not)
    refused("    tier w { location = gpu  dtype = int4  capacity = 4 }\n"
            "    tier r { location = cpu  capacity = 4 }\n"
            "    tier r2 { location = cpu }\n",
            "over tiers other than host memory or a host tier and a disk tier")
    # (a second gpu tier at the checkpoint's precision runs: tests/test_offload_gpu_tier.py;
    # one at another floating-point precision would hold converted copies)
    refused("    tier w { location = gpu  dtype = fp16  capacity = 4 }\n",
            "tier 'w' of policy 't' holds experts at fp16, but the model's experts are fp32")


def test_int4_warm_from_the_standard_library_attaches():
    # 6 GiB at full precision holds every expert of a tiny model: nothing is approximate
    model = build_model("tiny-qwen2-moe", layers=2)
    ref = gen(model)
    h = mpl.load("std/int4_warm").attach(model)
    out = gen(model)
    st = h.get_stats()
    h.detach()
    assert st["approximate_computes"] == 0 and torch.equal(out[1], ref[1])
    assert st["mechanism"]["tiers"]["lowprec"][0]["dtype"] == "int4"
