"""A second full-precision gpu tier over a host tier and a disk tier live (SPEC §12;
docs/offload.md, "Over a host tier and a disk tier"): a ``warm`` gpu tier of whole experts
under the device cache, over a host tier with a capacity over a disk tier, in HuggingFace
attach. The warm tier is filled from the host tier's records (a READ first when only the disk
holds the key, or the bounce record when the host tier does not admit it), and its victims are
copied device to host into the records the Plan names. generate() gives the unmodified
model's tokens and logits bit for bit on every experts implementation; the disk reads,
demotions, fills and promotions equal the runtime's per-tier statistics and a replay's of
the trace recorded in the same run; CUDA's ordering rules hold on the CUDA-semantics double;
the runtime and the mechanism are checked to agree; the estimate counts the warm tier's area
and the host tier's records; what does not run live is refused, located."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import (  # noqa: E402
    IMPLS, assert_a_disagreement_is_caught, assert_replay_agrees, generate, row, run_recorded)

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Warm on the device, cold on the disk.")])


def text(folder, hot=2, warm=3, ram=3, threshold=None,
         extra="prefetch { strategy = history  budget = 1 }"):
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  capacity = {warm} }}
    tier ram  {{ location = cpu  capacity = {ram} }}
    tier ssd  {{ location = disk  path = "{folder}" }}{promote}
    eviction = lru
  }}
  {extra}
}}'''


def gen(model, n=6):
    return generate(model, PROMPT, n)


def run(model, policy):
    return run_recorded(model, policy, PROMPT)


def check_counts(st, rs):
    mech = st["mechanism"]
    tiers = mech["tiers"]
    g = tiers["gpu_tiers"][0]
    w, r, d = row(st, "warm"), row(st, "ram"), row(st, "ssd")
    assert_replay_agrees(st, rs)
    assert st["approximate_computes"] == 0
    assert mech["copies"] == st["loads"] and mech["stream_copies"] == st["streamed"]
    assert tiers["disk_reads"] == d["reads"] > 0
    # into the warm tier: the device cache's victims, fills from the host tier's records
    assert g["demotions"] == w["demotions"] > 0
    assert g["filled_from_host"] == w["promotions"] > 0
    # out of it: promotions into the device cache, victims into the host tier's records
    assert g["promotions"] + g["demoted_to_host"] == w["reads"]
    assert tiers["demotions"] == r["demotions"]
    assert g["demoted_to_host"] > 0
    assert mech["bytes_copied"] + g["bytes_from_host"] == st["bytes_loaded"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_bit_identical_and_counts_equal_the_runtime_and_a_replay(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    # (1 over 2 over 2: every miss evicts in every tier, reads the disk, uses the bounce
    # record; a threshold: accesses computed from the warm tier's copy)
    for hot, warm, ram, thr in ((2, 3, 3, None), (1, 2, 2, None), (2, 4, 3, 0.3)):
        policy = mpl.loads(text(tmp_path, hot, warm, ram, thr))
        out, st, rs = run(model, policy)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1]), (hot, warm, ram)
        check_counts(st, rs)
        if thr is not None:
            assert st["mechanism"]["tiers"]["gpu_tiers"][0]["serves"] > 0
        assert os.listdir(tmp_path) == []
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_cpu_fallback_computes_from_the_host_tiers_records(tmp_path):
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    policy = mpl.loads(text(tmp_path, 1, 2, 2, extra="schedule { mode = cpu_fallback }"))
    out, st, rs = run(model, policy)
    # (on a CPU-only machine the CPU's compute is the model's own)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    assert st["cpu_computes"] == st["mechanism"]["cpu_computes"] > 0
    assert st["mechanism"]["tiers"]["cpu_from_records"] == st["cpu_computes"]
    assert rs["tiers"] == st["tiers"] and rs["cpu_computes"] == st["cpu_computes"]
    g = st["mechanism"]["tiers"]["gpu_tiers"][0]
    assert g["filled_from_host"] == row(st, "warm")["promotions"] > 0


def test_the_checkpoints_own_files_serve_the_host_tier(tmp_path):
    from transformers import AutoModelForCausalLM

    build_model("tiny-mixtral", layers=2).save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path), local_files_only=True).eval()
    listing = sorted(os.listdir(tmp_path))
    ref = gen(model)
    policy = mpl.loads(text(tmp_path, 1, 2, 2).replace(f'  path = "{tmp_path}"', ""))
    out, st, rs = run(model, policy)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    check_counts(st, rs)
    assert sorted(os.listdir(tmp_path)) == listing


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    for args in ((1, 2, 2, None), (2, 4, 3, 0.3)):
        out, st, ops = generate_on_double(mpl.loads(text(tmp_path, *args)), model, gen)
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                                   host_record_rewritten_in_flight,
                                   slot_reused_before_demotion) == {}
        tiers = st["mechanism"]["tiers"]
        g = tiers["gpu_tiers"][0]
        # not vacuous: warm slots copied to host records, records read into and filled from
        assert g["demoted_to_host"] > 0 and g["filled_from_host"] > 0
        assert sum(op.kind == "host_write" for op in ops.log) == tiers["disk_reads"] > 2
        assert any(op.kind == "copy" and op.tag == ("demote", "host") and op.non_blocking
                   for op in ops.log)


def test_the_mechanism_checks_that_the_runtime_agrees(tmp_path):
    pol = mpl.loads(text(tmp_path, 1, 2, 2, extra=""))
    assert_a_disagreement_is_caught(build_model("tiny-mixtral", layers=2), pol,
                                    lambda h: h.engine.tiers.fulls[0], gen)
    assert os.listdir(tmp_path) == []


def test_the_estimate_counts_the_area_and_the_records(monkeypatch, tmp_path):
    from mpl.mechanism.device import ALIGN
    model = build_model("tiny-olmoe", layers=2)
    policy = mpl.loads(text(tmp_path, 2, 5, 3))
    h = policy.attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    g = st["mechanism"]["tiers"]["gpu_tiers"][0]
    assert g["slots"] == 5 and g["bytes"] == 6 * g["entry_bytes"]
    assert st["memory"]["gpu_tier_bytes"] == g["bytes"]
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert "host tier cache +" in msg
    kib = float(msg.split("gpu tier 'warm' area +")[1].split(" KiB")[0].replace(",", ""))
    assert g["bytes"] - 1024 < kib * 1024 < g["bytes"] + 6 * ALIGN + 1024
    assert os.listdir(tmp_path) == []


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
        assert sorted(os.listdir(tmp_path)) == ["p.moe"]

    # (with granularity_split it runs: tests/test_offload_parts_gpu_tier.py)
    refused(text(tmp_path).replace("tier ram", "tier w2 { location = gpu  capacity = 2 }\n"
                                   "    tier ram"), "second gpu tier")
    ir = mpl.loads(text(tmp_path)).ir
    assert not_live_yet(ir, "huggingface") is None
    assert not_live_yet(ir, "vllm") is None          # vLLM runs it too
