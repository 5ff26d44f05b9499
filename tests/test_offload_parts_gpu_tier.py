"""Parts with a second full-precision gpu tier live (SPEC §12 ``granularity_split`` and two
``gpu`` tiers at the checkpoint's precision; docs/offload.md, "Parts in a second gpu tier"):
the warm tier caches parts too, one per slot of its device area, over host memory or over a
host tier and a disk tier. A part is demoted from a part slot into the warm tier, promoted
back by a device-to-device Load, filled from the host store's runs or a host tier's part
record, copied into a part record when the warm tier evicts it, and gathered from its warm
slot when the Plan computes it there (``LOWER``). generate() gives the unmodified model's
tokens and logits bit for bit on every experts implementation; the copies, fills, demotions
and bytes equal the runtime's per-tier statistics and a replay's of the trace recorded in the
same run; CUDA's ordering rules hold on the CUDA-semantics double; the runtime and the
mechanism are checked to agree; the estimate counts the part-sized area; it runs in
HuggingFace attach, not in vLLM's live offload (with a low-precision tier in place of the
second full-precision one: tests/test_offload_parts_lowprec.py)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import IMPLS, assert_replay_agrees, generate, row, run_recorded  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Parts kept warm on the device.")])


def text(hot=2, warm=3, n=2, threshold=None, disk=None, ram=3,
         extra="prefetch { strategy = history  budget = 1 }"):
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    below = (f'\n    tier ram  {{ location = cpu  capacity = {ram} }}'
             f'\n    tier ssd  {{ location = disk  path = "{disk}" }}' if disk else "")
    return f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  capacity = {warm} }}{below}{promote}
    granularity_split = {n}
    eviction = lru
  }}
  {extra}
}}'''


def gen(model, n=6):
    return generate(model, PROMPT, n)


def run(model, policy):
    return run_recorded(model, policy, PROMPT)


def check_counts(st, rs, n, warm):
    mech = st["mechanism"]
    tiers = mech["tiers"]
    g = tiers["gpu_tiers"][0]
    w = row(st, "warm")
    assert_replay_agrees(st, rs)
    assert st["approximate_computes"] == 0
    assert mech["copies"] == st["loads"] > 0 and mech["stream_copies"] == st["streamed"]
    assert g["slots"] == warm * n and tiers["parts"]["split"] == n
    assert g["demotions"] == w["demotions"] and g["filled_from_host"] == w["promotions"]
    assert g["promotions"] + g["demoted_to_host"] == w["reads"]
    assert g["serves"] == tiers["parts"]["lowered_parts"]
    # over the link: part copies into part slots, part fills of the warm tier
    assert mech["bytes_copied"] + g["bytes_from_host"] == st["bytes_loaded"]
    if "ssd" in {r["tier"] for r in st["tiers"]}:
        assert tiers["disk_reads"] == row(st, "ssd")["reads"] > 0
        assert tiers["demotions"] == row(st, "ram")["demotions"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_bit_identical_and_counts_equal_the_runtime_and_a_replay(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    # over host memory (the swap through the stash; a threshold: parts computed from the
    # warm tier), over a host tier and a disk tier (every tier evicting)
    for kw in ({"n": 2}, {"hot": 1, "warm": 2, "n": 4, "threshold": 0.3},
               {"n": 2, "disk": tmp_path}, {"hot": 1, "warm": 2, "n": 4, "threshold": 0.3,
                                            "disk": tmp_path, "ram": 2}):
        policy = mpl.loads(text(**kw))
        out, st, rs = run(model, policy)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1]), kw
        check_counts(st, rs, kw["n"], kw.get("warm", 3))
        g = st["mechanism"]["tiers"]["gpu_tiers"][0]
        if "threshold" in kw:
            assert g["serves"] > 0
        else:
            assert g["promotions"] > 0 and g["stashes"] > 0
        assert os.listdir(tmp_path) == []
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    for kw in ({"n": 2}, {"hot": 1, "warm": 2, "n": 4, "threshold": 0.3, "disk": tmp_path,
                          "ram": 2}):
        out, st, ops = generate_on_double(mpl.loads(text(**kw)), model, gen)
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                                   host_record_rewritten_in_flight,
                                   slot_reused_before_demotion) == {}
        g = st["mechanism"]["tiers"]["gpu_tiers"][0]
        assert g["promotions"] + g["serves"] > 0 and g["filled_from_host"] > 0
        assert any(op.kind == "copy" and op.tag[0] == "gather" for op in ops.log)
        assert any(op.kind == "copy" and op.tag[0] == "gpu-tier-fill" for op in ops.log)


def test_the_mechanism_checks_that_the_runtime_agrees():
    model = build_model("tiny-mixtral", layers=2)
    h = mpl.loads(text(hot=1, warm=2, n=2, threshold=0.3)).attach(model)
    try:
        gen(model, 2)
        a = h.engine.tiers.fulls[0]
        for j, k in enumerate(a.content):
            if k is not None:
                a.put(j, (k[0], k[1], 1 - k[2]))      # each slot holds the other part
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 6)
    finally:
        h.detach()


def test_the_estimate_counts_the_part_sized_area(monkeypatch):
    from mpl.mechanism.device import ALIGN
    model = build_model("tiny-olmoe", layers=2)
    policy = mpl.loads(text(warm=5, n=4))
    h = policy.attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    g = st["mechanism"]["tiers"]["gpu_tiers"][0]
    # 20 part slots and the stash, each a part: about as much as 5 whole experts
    assert g["slots"] == 20 and g["bytes"] == 21 * g["entry_bytes"]
    assert st["memory"]["gpu_tier_bytes"] == g["bytes"]
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    kib = float(str(err.value).split("gpu tier 'warm' area +")[1].split(" KiB")[0].replace(",", ""))
    assert g["bytes"] - 1024 < kib * 1024 < g["bytes"] + 21 * ALIGN + 1024


def test_it_runs_live_in_huggingface_only():
    from mpl.api import not_live_yet
    ir = mpl.loads(text()).ir
    assert not_live_yet(ir, "huggingface") is None
    assert not_live_yet(ir, "vllm") is None          # vLLM runs it too
