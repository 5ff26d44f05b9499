"""A low-precision gpu tier with a dtype ladder live (SPEC §12; docs/offload.md, "Low-precision
tiers live"): ``dtype_ladder = [int8, int4]`` on the gpu tier under the full-precision device
cache in HuggingFace attach. The mechanism carries out the runtime's steps (a key entering
the tier at the rung the ladder gives, residents pushed one rung down in place, a key
computed from its copy at its rung): the approximate computes it made, by precision, equal
the runtime's and a replay's of the trace recorded in the same run; a step down a rung is the
int8 copy requantized to int4 on the device; the device area and the memory estimate count
every slot at the first rung's record; the runtime and the mechanism are checked to agree;
CUDA's ordering rules hold on the CUDA-semantics double; a ladder live execution does not
run is refused, located."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import quant  # noqa: E402
from mpl.mechanism.device import SyncOps  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.mechanism.lowprec import LowPrecArea, QuantLayout  # noqa: E402
from mpl.mechanism.pool import SlotPool  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import IMPLS, generate, row, replayed  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Approximately right.")])


def ladder(hot=2, cap=3, mechanism="in_place_requant", threshold=0.3, rungs="int8, int4",
           extra="prefetch { strategy = history  budget = 1 }"):
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy ladder {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  dtype_ladder = [{rungs}]  capacity = {cap} }}
    on demote(hot -> warm) {{ mechanism = {mechanism} }}{promote}
    eviction = lru
  }}
  {extra}
}}''')


def gen(model, n=6):
    return generate(model, PROMPT, n)


@pytest.mark.parametrize("mechanism", ["in_place_requant", "copy"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe"])
def test_generate_counts_by_precision_equal_the_runtime_and_a_replay(family, impl, mechanism):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref = gen(model)
    policy = ladder(mechanism=mechanism)
    h = policy.attach(model)
    with Recorder(model) as rec:
        out = gen(model)
    st = h.get_stats()
    h.detach()
    mech = st["mechanism"]["tiers"]
    w = row(st, "warm")
    low = mech["lowprec"][0]
    assert low["dtype_ladder"] == w["dtype_ladder"] == ["int8", "int4"]
    # approximate computes, overall and by the precision each was computed at
    assert st["approximate_computes"] == mech["approximate"] == w["approximate"] > 0
    assert mech["approximate_by_dtype"] == st["approximate_by_dtype"]
    assert low["approximate_at"] == {d: st["approximate_by_dtype"].get(d, 0)
                                     for d in ("int8", "int4")}
    # what the tier holds at each rung now, and the approximate computes at each rung
    assert low["resident_at"] == w["resident_at"]
    assert sum(low["resident_at"].values()) == w["resident"] > 0
    assert sum(low["approximate_at"].values()) == w["approximate"]
    # the residents pushed one rung down where they are
    assert mech["rung_requants"] == low["requantized"] == w["requantized"] > 0
    assert mech["quantized_from_host"] == w["promotions"] + (
        w["demotions"] if mechanism == "copy" else 0)
    assert mech["requants"] == (w["demotions"] if mechanism == "in_place_requant" else 0)
    assert st["mechanism"]["copies"] == st["loads"]
    # a replay of the routing recorded in the same run: the same per-tier statistics
    rs = replayed(policy, rec.trace(), h.shape)
    assert rs["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "evictions", "approximate_computes", "approximate_by_dtype",
              "bytes_loaded"):
        assert rs[k] == st[k], k
    assert out[0].shape == ref[0].shape and not torch.equal(out[1], ref[1])
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n].detach(), before[n]) for n in before)
    assert torch.equal(gen(model)[1], ref[1])


def test_the_keys_held_at_each_rung_follow_the_runtime_as_it_runs():
    # a small ladder: several keys leave to make room for one (LEAVE steps), residents are
    # pushed down; after every generate the area holds at each rung what the runtime says
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    policy = ladder(hot=1, cap=2)
    h = policy.attach(model)
    try:
        with Recorder(model) as rec:
            seen = set()
            for n in (2, 5, 9):
                gen(model, n)
                st = h.get_stats()
                low = st["mechanism"]["tiers"]["lowprec"][0]
                w = row(st, "warm")
                assert low["resident_at"] == w["resident_at"], n
                assert low["approximate_at"] == {d: st["approximate_by_dtype"].get(d, 0)
                                                 for d in ("int8", "int4")}
                seen |= {d for d, k in low["resident_at"].items() if k}
        rs = replayed(policy, rec.trace(), h.shape)
        assert row(rs, "warm")["resident_at"] == low["resident_at"]
        assert seen == {"int8", "int4"}       # not vacuous: both rungs held at some point
    finally:
        h.detach()


def test_some_accesses_are_computed_at_each_rung():
    # a small ladder and a promotion threshold: keys grow cold in the tier, are pushed down
    # to int4, and are computed from there
    model = build_model("tiny-mixtral", layers=2, experts_implementation="eager")
    h = ladder().attach(model)
    gen(model, 8)
    st = h.get_stats()
    h.detach()
    by = st["mechanism"]["tiers"]["approximate_by_dtype"]
    assert by.get("int8", 0) > 0 and by.get("int4", 0) > 0
    assert by == st["approximate_by_dtype"]


def _area(template, slots=2, ops=None):
    ops = ops or SyncOps(torch.device("cpu"))
    pool = SlotPool(template, 2, 1, torch.device("cpu"), ops)
    lays = [QuantLayout(template, d) for d in ("int8", "int4")]
    return LowPrecArea(lays, slots, pool, label="hierarchy", tier="warm", index=1), pool


def test_a_step_down_is_the_int8_copy_requantized_to_int4_in_place():
    torch.manual_seed(0)
    E, out_dim, in_dim = 3, 24, 80          # (int4 groups of 64: a short last group)
    host = {"w": torch.randn(E, out_dim, in_dim), "b": torch.randn(E, out_dim)}
    a, pool = _area(host)
    assert a.stride == QuantLayout(host, "int8").stride > QuantLayout(host, "int4").stride
    a.fill_from_host(1, host, 2, (0, 2), dtype="int8")
    s8 = quant.spec(out_dim, in_dim, "int8")
    s4 = quant.spec(out_dim, in_dim, "int4")
    w8 = quant.dequantize(*quant.quantize(host["w"][2], s8), s8, torch.float32)
    a.dequant(1, 0)
    assert torch.equal(pool.tensors["w"][0], w8) and torch.equal(pool.tensors["b"][0], host["b"][2])
    a.requant_down(1, "int4")
    assert a.held[1] == "int4" and a.where[(0, 2)] == 1 and a.rung_requants == 1
    w4 = quant.dequantize(*quant.quantize(w8, s4), s4, torch.float32)
    a.dequant(1, 0)
    assert torch.equal(pool.tensors["w"][0], w4) and torch.equal(pool.tensors["b"][0], host["b"][2])
    assert a.dequants_at == {"int8": 1, "int4": 1}
    # a slot takes a key at any rung: int4 straight from the host
    a.fill_from_host(0, host, 1, (0, 1), dtype="int4")
    a.dequant(0, 0)
    w4b = quant.dequantize(*quant.quantize(host["w"][1], s4), s4, torch.float32)
    assert torch.equal(pool.tensors["w"][0], w4b)
    with pytest.raises(LiveError, match="holds int8, int4"):
        a.fill_from_host(0, host, 1, (0, 1), dtype="fp16")


def test_memory_every_slot_is_the_first_rungs_record_and_the_estimate_counts_it(monkeypatch):
    from mpl.mechanism import footprint
    from mpl.offload.hf import discover
    model = build_model("tiny-olmoe", layers=2)
    b = discover(model)[0]
    template = {n: p.data for n, p in b.module._parameters.items()}
    i8 = QuantLayout(template, "int8").stride
    h = ladder(cap=3, threshold=None).attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    low = st["mechanism"]["tiers"]["lowprec"][0]
    # capacity 3 at int8 = 6 keys at int4: 6 slots, each an int8 record
    assert low["slots"] == 6 and low["record_bytes"] == i8 and low["bytes"] == 6 * i8
    assert st["memory"]["lowprec_bytes"] == low["bytes"]
    # attach's estimate names the area at the bytes it takes (KiB, rounded)
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        ladder(cap=3, threshold=None).attach(model)
    msg = str(err.value)
    kib = float(msg.split("int8 tier 'warm' area +")[1].split(" KiB")[0].replace(",", ""))
    assert abs(kib * 1024 - low["bytes"]) < 1024


def test_the_mechanism_checks_the_rung_the_runtime_says():
    model = build_model("tiny-mixtral", layers=2)
    h = ladder().attach(model)
    try:
        gen(model, 2)
        area = h.engine.tiers.areas[0]
        # the slots no longer hold the rungs the runtime thinks (int8 and int4 swapped)
        swap = {"int8": "int4", "int4": "int8", None: None}
        area.held[:] = [swap[d] for d in area.held]
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 8)
    finally:
        h.detach()


def test_cuda_ordering_on_the_double():
    from offload_cuda_double import (generate_on_double, host_buffer_reused_in_flight,
                                     ordering_violations, slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    policy = ladder()
    h = policy.attach(model)
    want = gen(model)
    h.detach()
    out, st, ops = generate_on_double(policy, model, gen)
    assert torch.equal(want[0], out[0]) and torch.equal(want[1], out[1])
    assert ordering_violations(ops, host_buffer_reused_in_flight, slot_reused_before_demotion) == {}
    assert st["mechanism"]["tiers"]["rung_requants"] > 0


def test_a_ladder_live_execution_does_not_run_is_refused_located(tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def refused(text, match):
        path = tmp_path / "p.moe"
        path.write_text(text)
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")
        after = dict(model.named_parameters())
        assert all(torch.equal(after[n].detach(), before[n]) for n in before)
        return str(err.value)

    # a ladder with two rungs at full precision (with the checkpoint's precision as its only
    # full-precision rung, first, it runs: tests/test_offload_lowprec_full_rung.py)
    msg = refused("policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"
                  "    tier w { location = gpu  dtype_ladder = [fp32, bf16, int8]  capacity = 4 }\n"
                  "  }\n}\n", "several precisions")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:4:")
    # a ladder on the top tier
    refused("policy t {\n  hierarchy {\n    tier g { location = gpu  dtype_ladder = [int8, int4]"
            "  capacity = 2 }\n  }\n}\n", "as the top tier")
