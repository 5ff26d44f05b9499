"""A second gpu tier at the checkpoint's precision live (SPEC §12: an access it serves is a hit,
bit-identical; docs/offload.md, "A second full-precision gpu tier live"): a ``warm`` gpu tier of
whole, unconverted experts right under the device cache in HuggingFace attach. generate()
gives the unmodified model's tokens and logits bit for bit on every experts implementation;
the mechanism's copies (over the link and device to device) equal the runtime's counts and a
replay's of the trace recorded in the same run; the swap of a promoted key and the device
cache's victim goes through the stash; CUDA's ordering rules hold on the CUDA-semantics
double; the runtime and the mechanism are checked to agree; what does not run live is
refused, located."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import (  # noqa: E402
    IMPLS, assert_a_disagreement_is_caught, assert_replay_agrees, generate, row, run_recorded)

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Two tiers, one precision.")])


def two(hot=2, warm=3, threshold=None, extra="prefetch { strategy = history  budget = 1 }"):
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return mpl.loads(f'''policy two {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  capacity = {warm} }}{promote}
    eviction = lru
  }}
  {extra}
}}''')


def gen(model, n=6):
    return generate(model, PROMPT, n)


@pytest.mark.parametrize("threshold", [None, 0.3])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_generate_is_bit_identical_and_counts_equal_the_runtime_and_a_replay(family, impl,
                                                                             threshold):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    out, st, rs = run_recorded(model, two(threshold=threshold), PROMPT)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    mech = st["mechanism"]
    g = mech["tiers"]["gpu_tiers"][0]
    w = row(st, "warm")
    assert st["approximate_computes"] == 0
    assert mech["copies"] == st["loads"] and mech["stream_copies"] == st["streamed"]
    # the warm tier: promotions out of it are device copies (the runtime's reads of it),
    # demotions into it device copies, promotions into it copies from the host
    assert g["promotions"] == w["reads"] and g["demotions"] == w["demotions"] > 0
    assert g["filled_from_host"] == w["promotions"]
    # over the link: the pool's copies from the host and the warm tier's fills
    assert mech["bytes_copied"] + g["bytes_from_host"] == st["bytes_loaded"]
    if threshold is not None:
        assert g["serves"] > 0          # computed from the warm tier's copy, bit for bit
    assert_replay_agrees(st, rs)
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_a_promotion_swapped_with_the_victim_goes_through_the_stash():
    # a full warm tier: each promotion out of it frees the slot the hot tier's victim takes
    model = build_model("tiny-mixtral", layers=2, experts_implementation="eager")
    ref = gen(model)
    h = two(hot=2, warm=3, extra="").attach(model)
    out = gen(model, 6)
    st = h.get_stats()
    h.detach()
    g = st["mechanism"]["tiers"]["gpu_tiers"][0]
    assert g["stashes"] > 0 and g["promotions"] >= g["stashes"]
    assert torch.equal(out[1], ref[1])


def test_memory_is_the_tiers_slots_and_the_stash(monkeypatch):
    from mpl.mechanism import footprint
    model = build_model("tiny-olmoe", layers=2)
    h = two(warm=5).attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    g = st["mechanism"]["tiers"]["gpu_tiers"][0]
    assert g["slots"] == 5 and g["bytes"] == 6 * g["entry_bytes"]
    assert st["memory"]["gpu_tier_bytes"] == g["bytes"]
    assert st["memory"]["peak_bytes"] == (st["memory"]["pool_peak_bytes"]
                                          + st["memory"]["store_peak_bytes"] + g["bytes"])
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        two(warm=5).attach(model)
    from mpl.mechanism.device import ALIGN
    kib = float(str(err.value).split("gpu tier 'warm' area +")[1].split(" KiB")[0].replace(",", ""))
    assert g["bytes"] - 1024 < kib * 1024 < g["bytes"] + 6 * ALIGN + 1024


def test_the_mechanism_checks_that_the_runtime_agrees():
    pol = two(threshold=0.3)
    assert_a_disagreement_is_caught(build_model("tiny-mixtral", layers=2), pol,
                                    lambda h: h.engine.tiers.fulls[0], gen)


def test_cuda_ordering_on_the_double():
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight, ordering_violations,
                                     slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    for policy in (two(), two(threshold=0.3)):
        out, st, ops = generate_on_double(policy, model, gen)
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, slot_reused_before_demotion,
                                   copies_out_of_order) == {}
        g = st["mechanism"]["tiers"]["gpu_tiers"][0]
        assert g["promotions"] + g["serves"] > 0


def test_what_does_not_run_live_is_refused_located(tmp_path):
    from mpl.api import not_live_yet
    model = build_model("tiny-mixtral", layers=2)
    head = "policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"

    def refused(body, match):
        path = tmp_path / "p.moe"
        path.write_text(head + body + "  }\n}\n")
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")
        return str(err.value)

    msg = refused("    tier w { location = gpu:1  capacity = 4 }\n", "on gpu:1")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:4:")
    refused("    tier w { location = gpu  capacity = 4 }\n"
            "    tier v { location = gpu  capacity = 4 }\n", "second gpu tier")
    refused("    tier w { location = gpu  capacity = 4 }\n"
            "    tier r { location = cpu  capacity = 4 }\n"
            "    tier s { location = cpu  capacity = 8 }\n"
            f"    tier d {{ location = disk  path = \"{tmp_path}\" }}\n",
            "over tiers other than host memory holding every expert")
    refused("    tier w { location = gpu  capacity = 4 }\n"
            "    tier q { location = gpu  dtype = int8  capacity = 4 }\n",
            "tier 'q' of policy 't' holds experts at int8")
    refused("    tier q { location = gpu  dtype = int8  capacity = 4 }\n"
            "    tier w { location = gpu  capacity = 4 }\n",
            "beside a low-precision gpu tier")
    # (with granularity_split it runs: tests/test_offload_parts_gpu_tier.py)
    assert not_live_yet(two().ir, "vllm") is None          # vLLM runs it too
    assert not_live_yet(two().ir, "huggingface") is None


@pytest.mark.parametrize("impl", IMPLS)
def test_a_key_demoted_and_prefetched_back_in_one_dispatch(impl, monkeypatch):
    # DeepSeek's tiny models: a dispatch's victim goes down into the warm tier and the same
    # dispatch's prefetch promotes it back; its Load reads the slot the demotion filled
    from mpl.mechanism import tiered
    plans = []
    transfers = tiered.TierExecutor.transfers

    def spy(self, plan, **kw):
        plans.append(plan)
        return transfers(self, plan, **kw)

    monkeypatch.setattr(tiered.TierExecutor, "transfers", spy)
    model = build_model("tiny-deepseek-v3", layers=3, experts_implementation=impl)
    ref = gen(model)
    policy = two(hot=4, warm=8, extra="prefetch { strategy = history  budget = 2 }")
    out, st, rs = run_recorded(model, policy, PROMPT)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    back = [s.key for p in plans for s in p.steps if s.op == "promote" and s.target == 0
            and any(d.op == "demote" and d.key == s.key and d.target == s.source
                    for d in p.steps[:p.steps.index(s)])]
    assert back, "no dispatch demoted a key and promoted it back"
    assert st["mechanism"]["copies"] == st["loads"]
    assert_replay_agrees(st, rs)
