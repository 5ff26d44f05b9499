"""Experts moved and cached as parts live (SPEC §12 ``granularity_split``; docs/offload.md,
"Parts live"): the device cache of parts over host memory in HuggingFace attach. generate()
gives the unmodified model's tokens and logits bit for bit on every experts implementation
(an expert is put together from its parts before it is computed); the part copies, streamed
parts and bytes equal the runtime's counts in parts and a replay's of the trace recorded in
the same run; CUDA's ordering rules hold on the CUDA-semantics double; the runtime and the
mechanism are checked to agree; the memory is the part slots; what does not run live is
refused, located."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.mechanism.disk import PartLayout  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import IMPLS, assert_replay_agrees, generate, run_recorded  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Every part in its place.")])


def parts(n=4, cap=3, extra="prefetch { strategy = history  budget = 1 }", mode=None):
    sched = f"\n  schedule {{ mode = {mode} }}" if mode else ""
    return mpl.loads(f'''policy parts {{
  hierarchy {{
    tier hot {{ location = gpu  capacity = {cap} }}
    granularity_split = {n}
    eviction = lru
  }}
  {extra}{sched}
}}''')


def gen(model, n=6):
    return generate(model, PROMPT, n)


def check_counts(st, rs=None):
    mech = st["mechanism"]
    assert mech["copies"] == st["loads"] > 0
    assert mech["stream_copies"] == st["streamed"]
    assert mech["bytes_copied"] == st["bytes_loaded"]
    if rs is not None:
        assert_replay_agrees(st, rs)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_generate_is_bit_identical_and_counts_equal_the_runtime_and_a_replay(family, impl, n):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    out, st, rs = run_recorded(model, parts(n), PROMPT)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    check_counts(st, rs)
    assert st["mechanism"]["pool_slots"] == 3 * n       # the device cache in parts
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_bands_of_one_split_and_the_cpu_schedule():
    model = build_model("tiny-qwen2-moe", layers=3, experts_implementation="grouped_mm")
    ref = gen(model)
    policy = mpl.loads('''policy bands {
  per_layer_hierarchy {
    band layers = 0..0 { tier g { location = gpu  capacity = 2 }  granularity_split = 2 }
    band layers = 1..2 { tier g { location = gpu  capacity = 4 }  granularity_split = 2
                         eviction = lfu }
  }
  schedule { mode = cpu_fallback }
}''')
    out, st, rs = run_recorded(model, policy, PROMPT)
    assert torch.equal(out[0], ref[0])
    assert st["cpu_computes"] > 0 and st["mechanism"]["cpu_computes"] == st["cpu_computes"]
    check_counts(st, rs)


def test_a_part_is_an_equal_run_of_every_parameters_row():
    t = {"w": torch.zeros(2, 5, 3), "b": torch.zeros(2, 5)}       # rows of 15 and 5
    lay = PartLayout(t, 4)
    assert lay.chunk == {"w": 4, "b": 2}
    assert [r["w"] for r in lay.ranges] == [(0, 4), (4, 8), (8, 12), (12, 15)]
    assert [r["b"] for r in lay.ranges] == [(0, 2), (2, 4), (4, 5), (5, 5)]


def test_memory_is_the_part_slots_and_the_estimate_counts_them(monkeypatch):
    from mpl.mechanism import footprint
    model = build_model("tiny-olmoe", layers=2)
    h = parts(4, cap=3).attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    mech = st["mechanism"]
    whole = build_model("tiny-olmoe", layers=2)
    h = mpl.loads("policy w { hierarchy { tier hot { location = gpu  capacity = 3 } } }").attach(whole)
    gen(whole, 2)
    w = h.get_stats()["mechanism"]
    h.detach()
    # 12 part slots take about as much as the 3 whole slots, and the transient entries the same
    entry = w["pool_bytes"] // (w["pool_slots"] + w["stream_slots"] + 1)
    assert mech["pool_slots"] == 12
    assert mech["pool_bytes"] < w["pool_bytes"] + entry // 2
    assert st["memory"]["pool_bytes"] == mech["pool_bytes"]
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        parts(4, cap=3).attach(model)
    kib = float(str(err.value).split("device slot pool +")[1].split(" KiB")[0].replace(",", ""))
    # (the estimate counts each entry's alignment: an upper bound, by at most that)
    from mpl.mechanism.device import ALIGN
    entries = (mech["pool_slots"] + 1) + (mech["stream_slots"] + 1)
    assert mech["pool_bytes"] - 1024 < kib * 1024 < mech["pool_bytes"] + entries * ALIGN + 1024


def test_the_mechanism_checks_that_the_runtime_agrees():
    model = build_model("tiny-mixtral", layers=2)
    h = parts(2).attach(model)
    try:
        gen(model, 2)
        pp = h.engine.tiers.parts
        for j, k in enumerate(pp.content):
            if k is not None:
                pp.content[j] = (k[0], k[1], 1 - k[2])     # each slot holds the other part
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 4)
    finally:
        h.detach()


def test_cuda_ordering_on_the_double():
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight, ordering_violations)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    out, st, ops = generate_on_double(parts(4), model, gen)
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    log = ops.log
    assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order) == {}
    assert st["mechanism"]["tiers"]["parts"]["gathers"] > 0
    assert any(op.kind == "copy" and op.tag[0] == "part-prefetch" for op in log)


def test_what_does_not_run_live_is_refused_located(tmp_path):
    from mpl.api import not_live_yet
    model = build_model("tiny-mixtral", layers=2)

    def refused(text, match):
        path = tmp_path / "p.moe"
        path.write_text(text)
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")

    # (with a low-precision tier it runs: tests/test_offload_parts_lowprec.py)
    refused('''policy t {
  per_layer_hierarchy {
    band layers = 0..0 { tier g { location = gpu  capacity = 2 }  granularity_split = 2 }
    band layers = 1..1 { tier g { location = gpu  capacity = 2 }  granularity_split = 4 }
  }
}
''', "different numbers of parts")
    assert not_live_yet(parts(2).ir, "vllm") is None          # vLLM runs it too
    assert not_live_yet(parts(2).ir, "huggingface") is None
