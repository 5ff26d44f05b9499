"""A dtype ladder whose first rung is the checkpoint's precision live (SPEC §12; docs/offload.md,
"A ladder with the checkpoint's precision"): ``dtype_ladder = [fp32, int8, int4]`` (or
``[fp32, int8]``, ``[bf16, int8, int4]`` on a bfloat16 model) on the gpu tier under the
device cache, over host memory or over a host tier and a disk tier, in HuggingFace attach.
The keys at the first rung are held whole in a full-precision area (served and promoted to
the device cache exactly, device to device), the others quantised. The per-tier statistics,
the keys held at each rung and the approximate computes equal the runtime's and a replay's
of the trace recorded in the same run; a run with no approximate compute is the unmodified
model bit for bit; a run over a disk tier is the run over host memory bit for bit; CUDA's
ordering rules hold on the CUDA-semantics double; what does not run live yet is refused,
located."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import IMPLS, generate, replayed, row  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("The hottest at full precision.")])


def text(folder=None, rungs="fp32, int8, int4", hot=2, cap=3, ram=2, threshold=None,
         extra="prefetch { strategy = history  budget = 1 }"):
    below = "tier ram  { location = cpu }" if folder is None else (
        f"tier ram  {{ location = cpu  capacity = {ram} }}\n"
        f"    tier ssd  {{ location = disk  path = \"{folder}\" }}")
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  dtype_ladder = [{rungs}]  capacity = {cap} }}
    {below}{promote}
    eviction = lru
  }}
  {extra}
}}''')


def gen(model, n=6):
    return generate(model, PROMPT, n)


def run(model, policy):
    h = policy.attach(model)
    with Recorder(model) as rec:
        out = gen(model)
    st = h.get_stats()
    h.detach()
    return out, st, replayed(policy, rec.trace(), h.shape)


def check_counts(st, rs, rungs) -> None:
    tiers = st["mechanism"]["tiers"]
    low = tiers["lowprec"][0]
    w = row(st, "warm")
    assert rs["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "evictions", "streamed", "bytes_loaded",
              "approximate_computes", "approximate_by_dtype"):
        assert rs[k] == st[k], k
    assert low["dtype_ladder"] == w["dtype_ladder"] == rungs
    assert low["resident_at"] == w["resident_at"]
    # computed from a quantised copy: approximate; from the full rung: exact, not counted
    assert st["approximate_computes"] == tiers["approximate"] == w["approximate"]
    assert tiers["approximate_by_dtype"] == st["approximate_by_dtype"]
    # the accesses the tier served at the full rung: each computed from its whole copy (a
    # serve) or loaded out of it into the device cache (a promotion); keys the same dispatch
    # fills are computed from it too, and prefetches promote
    full = low["full_rung"]
    assert w["served_at"][rungs[0]] <= full["serves"] + full["promotions"]
    assert st["mechanism"]["copies"] == st["loads"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_counts_equal_the_runtime_and_exact_where_nothing_is_approximate(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    seen = {"serves": 0, "promotions": 0, "approximate": 0, "exact": 0}
    for rungs, thr in (("fp32, int8, int4", None), ("fp32, int8, int4", 0.3), ("fp32, int8", 0.3)):
        outs = []
        for folder in (None, tmp_path):
            policy = text(folder, rungs, threshold=thr)
            out, st, rs = run(model, policy)
            check_counts(st, rs, [r.strip() for r in rungs.split(",")])
            full = st["mechanism"]["tiers"]["lowprec"][0]["full_rung"]
            seen["serves"] += full["serves"]
            seen["promotions"] += full["promotions"]
            if st["approximate_computes"] == 0:
                # every compute from a copy at the checkpoint's precision: bit for bit
                assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
                seen["exact"] += 1
            else:
                seen["approximate"] += 1
            outs.append(out)
            assert os.listdir(tmp_path) == []
        # over a disk tier: the same run as over host memory
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    # not vacuous: computed from and promoted out of the full rung, runs of both kinds
    assert all(seen.values()), seen
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_a_bfloat16_model_with_a_bf16_first_rung():
    model = build_model("tiny-qwen2-moe", layers=2, dtype=torch.bfloat16,
                        experts_implementation="grouped_mm")
    ref = gen(model)
    out, st, rs = run(model, text(rungs="bf16, int8, int4"))
    check_counts(st, rs, ["bf16", "int8", "int4"])
    if st["approximate_computes"] == 0:
        assert torch.equal(out[1], ref[1])
    # a first rung at another precision than the model's would hold converted copies
    with pytest.raises(AttachError, match="fp32, but the model's experts are bf16"):
        text(rungs="fp32, int8").attach(model)
    assert not hasattr(model, "_mpl_handle")


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion, slot_write_while_read)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    for folder, thr in ((None, None), (tmp_path, 0.3)):
        policy = text(folder, threshold=thr)
        h = policy.attach(model)
        want = gen(model)
        h.detach()
        out, st, ops = generate_on_double(policy, model, gen)
        assert torch.equal(want[0], out[0]) and torch.equal(want[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                                   host_record_rewritten_in_flight,
                                   slot_reused_before_demotion) == {}
        assert slot_write_while_read(ops.log) == []
        full = st["mechanism"]["tiers"]["lowprec"][0]["full_rung"]
        assert full["serves"] + full["promotions"] > 0 and full["demotions"] > 0
        assert st["mechanism"]["tiers"]["rung_requants"] > 0
    assert os.listdir(tmp_path) == []


def test_the_area_and_the_estimate_count_the_full_rung(monkeypatch):
    model = build_model("tiny-olmoe", layers=2)
    policy = text(cap=4)
    h = policy.attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    low = st["mechanism"]["tiers"]["lowprec"][0]
    full = low["full_rung"]
    # the keys the tier holds at the first rung (its capacity), and one more
    assert full["entries"] == 4 + 1 and full["dtype"] == "fp32"
    assert low["bytes"] == low["slots"] * low["record_bytes"] + full["bytes"]
    assert st["memory"]["lowprec_bytes"] == low["bytes"]
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    kib = float(str(err.value).split("tier 'warm' fp32 rung area +")[1].split(" KiB")[0]
                .replace(",", ""))
    assert full["bytes"] - 1024 < kib * 1024 < full["bytes"] + 5 * 4096


def test_what_does_not_run_live_is_refused_located(tmp_path):
    from mpl.api import not_live_yet
    model = build_model("tiny-mixtral", layers=2)

    def refused(body, match):
        path = tmp_path / "p.moe"
        path.write_text(body)
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")

    head = "policy t {\n  hierarchy {\n"
    refused(head + "    tier g { location = gpu  dtype_ladder = [fp32, int8]  capacity = 2 }\n"
            "  }\n}\n", "as the top tier")
    refused(head + "    tier g { location = gpu  capacity = 2 }\n"
            "    tier w { location = gpu  dtype_ladder = [fp32, int8]  capacity = 2 }\n"
            "    granularity_split = 2\n  }\n}\n", "splits them into parts")
    ir = text().ir
    assert not_live_yet(ir, "huggingface") is None
    assert "several precisions" in not_live_yet(ir, "vllm")
