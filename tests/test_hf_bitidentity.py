"""Acceptance: with gpu_only policies the attached model's greedy tokens and logits are
bit-identical to the unmodified model, for every family, experts implementation and
capacity (1, top-k, half and all experts), a per-layer policy and prefetching policies;
the mechanism really offloads (copies == runtime loads, no expert parameter on the model,
pool memory constant); detach() restores the model exactly.

One model and one reference generation per (family, implementation); every policy is
attached, run and detached in turn on that model, which also tests detach repeatedly.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
mpl = pytest.importorskip("mpl.api")

from mpl.offload.hf import attach  # noqa: E402
from mpl.offload.models import PRESETS, build_model, encode  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Offload me, bit for bit!")])
NEW = 5
IMPLS = ("eager", "batched_mm", "grouped_mm")


def gen(model):
    with torch.no_grad():
        out = model.generate(PROMPT, max_new_tokens=NEW, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def policies(L, E, K):
    """(label, .moe text) of the policies every (family, implementation) runs."""
    def cache(cap, extra=""):
        return f"version 1\npolicy p {{\n cache {{ capacity = {cap} }}\n{extra}}}\n"
    half = max(1, E // 2)
    return [
        ("capacity 1", cache(1)),
        ("capacity top-k", cache(K)),
        ("capacity E/2", cache(half)),
        ("capacity all", cache(L * E)),
        ("per-layer", "version 1\npolicy p {\n cache { capacity = %d\n eviction = lfu }\n"
                      " per_layer { allocation = entropy\n min_capacity = 1\n max_capacity = %d\n"
                      " rebalance_interval = 4 }\n}\n" % (max(K, 2), E)),
        ("history prefetch", cache(max(2, K), " prefetch { strategy = history\n budget = %d }\n" % max(1, K // 2))),
        ("lookahead prefetch", cache(E, " prefetch { strategy = lookahead\n budget = %d }\n" % K)),
        ("adaptive capacity", cache(K, " monitor { window = 8 }\n adapt { when hit_rate < 0.9 { capacity = %d } }\n" % (2 * K + 1))),
        ("affinity prefetch", cache(K + 1, " prefetch { strategy = affinity\n budget = 1\n affinity_threshold = 0.1 }\n")),
    ]


def expert_params(model):
    return [n for n, _ in model.named_parameters() if ".experts." in n]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", list(PRESETS))
def test_gpu_only_bit_identical(family, impl):
    model = build_model(family, experts_implementation=impl)
    names_before = [n for n, _ in model.named_parameters()]
    params_before = {n: p for n, p in model.named_parameters()}
    ref_seq, ref_logits = gen(model)
    shape = None
    for label, text in policies(*_shape(model)):
        policy = mpl.loads(text)
        h = attach(policy, model)
        shape = h.shape
        assert expert_params(model) == [], label
        ptrs, nbytes = h.pool.data_ptrs(), h.pool.nbytes
        seq, logits = gen(model)
        assert torch.equal(seq, ref_seq), f"{family}/{impl}/{label}: tokens differ"
        assert torch.equal(logits, ref_logits), f"{family}/{impl}/{label}: logits differ"
        st = h.get_stats()
        mech = st["mechanism"]
        assert mech["copies"] == st["loads"], label
        assert mech["modes"] == {impl: mech["dispatches"]}, label
        assert st["accesses"] == sum(x["accesses"] for x in mech["per_layer"])
        assert st["hits"] == sum(x["hits"] for x in mech["per_layer"])
        assert h.pool.data_ptrs() == ptrs and h.pool.nbytes == nbytes, "pool memory changed"
        if label == "capacity 1":
            assert mech["stream_copies"] > 0 and st["streamed"] == mech["stream_copies"]
        if label == "adaptive capacity":
            assert st["adapt_log"], "the adapt rule never fired"
        if label == "lookahead prefetch":
            assert mech["lookahead_calls"] > 0
        h.detach()
        assert [n for n, _ in model.named_parameters()] == names_before
        assert all(p is params_before[n] for n, p in model.named_parameters())
    seq, logits = gen(model)
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    assert shape.num_moe_layers >= 2


def _shape(model):
    from mpl.offload.hf import discover
    layers = discover(model)
    return len(layers), layers[0].num_experts, layers[0].top_k


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-deepseek-v3", "tiny-gpt-oss"])
def test_bf16_bit_identical(family, impl):
    model = build_model(family, experts_implementation=impl, dtype=torch.bfloat16)
    ref_seq, ref_logits = gen(model)
    h = attach(mpl.loads("version 1\npolicy p { cache { capacity = 3 } }"), model)
    seq, logits = gen(model)
    h.detach()
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)


def test_every_stdlib_policy_runs_live(tmp_path):
    """Every shipped policy attaches and generates the reference tokens (gpu_only: logits
    too); the mechanism's copies equal the runtime's loads. One that live execution does not
    run yet is refused with the one line that says why, the model left unchanged. The model
    is loaded from a saved folder, as a user's is, so a disk tier without path
    (std/larger_than_ram) reads its safetensors."""
    from transformers import AutoModelForCausalLM

    from mpl.stdlib_path import stdlib_file, stdlib_names
    build_model("tiny-qwen2-moe").save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path), local_files_only=True).eval()
    ref_seq, ref_logits = gen(model)
    names = stdlib_names()
    assert len(names) >= 5
    from mpl.mechanism.preflight import not_live_yet
    from mpl.offload.errors import AttachError

    for name in names:
        policy = mpl.load(stdlib_file(name))
        why = not_live_yet(policy.ir)
        if why is not None:              # what live execution does not run yet: refused, said so
            with pytest.raises(AttachError) as e:
                attach(policy, model)
            assert str(e.value) == why, name
            assert torch.equal(gen(model)[0], ref_seq), name     # the model is unchanged
            continue
        h = attach(policy, model)
        seq, logits = gen(model)
        st = h.get_stats()
        h.detach()
        assert torch.equal(seq, ref_seq), name
        if policy.ir.get("schedule.mode") == "gpu_only" and not any(
                getattr(a, "key", "") == "schedule.mode" for r in policy.ir.adapt for a in r.actions):
            assert torch.equal(logits, ref_logits), name
        assert st["mechanism"]["copies"] == st["loads"], name
