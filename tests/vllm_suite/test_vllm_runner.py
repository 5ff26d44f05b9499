"""PolicyRunner on a tiny Qwen3-MoE in vLLM's CPU build: the recorded routing equals
transformers' for the same token ids (token by token, layer by layer, in router order,
each request of a mixed batch), and the shadow policy's live statistics equal an mpl
replay of the trace vLLM recorded."""

from __future__ import annotations

import pytest

from routing import assert_same_routing, hf_routing, split_by_request

pytestmark = pytest.mark.needs_vllm

PROMPTS = [[5, 17, 33, 81, 120, 7, 64, 200, 19, 3, 44], [9, 8, 7], [300, 301, 302, 303, 42, 42]]
MAX_TOKENS = 6
POLICY = """policy shadowed {
    cache    { capacity = 5  eviction = lru }
    prefetch { strategy = history  budget = 2 }
}
"""


@pytest.fixture(scope="module")
def run(tiny, tmp_path_factory):
    from mpl.vllm import PolicyRunner

    path = tiny("qwen3-moe")
    pol = tmp_path_factory.mktemp("pol") / "shadowed.moe"
    pol.write_text(POLICY)
    runner = PolicyRunner(model=path, policy=str(pol), hardware="rtx-4090", dtype="float32",
                          max_model_len=256, seed=0)
    try:
        result = runner.generate(PROMPTS, max_tokens=MAX_TOKENS, ignore_eos=True)
        yield path, str(pol), result
    finally:
        runner.close()


def test_routing_matches_transformers_per_request(run):
    path, _, res = run
    tr = res.trace
    h = tr.header
    assert h.moe_layers == (0, 1, 2) and h.num_experts == 8 and h.top_k == 2
    # continuous batching: steps run several requests at once (prefills and decodes mixed)
    batches = h.extra["batches"]
    assert len(batches) == tr.num_steps and any(len(b) > 1 for b in batches)
    assert sorted(n for b in batches for _, n in b) == sorted(
        [len(p) for p in PROMPTS] + [1] * (len(PROMPTS) * (MAX_TOKENS - 1)))
    per_req = split_by_request(tr)
    compared = 0
    for prompt, rid, gen in zip(PROMPTS, res.request_ids, res.token_ids):
        assert len(gen) == MAX_TOKENS
        compared += assert_same_routing(per_req[rid], hf_routing(path, prompt, gen), f"request {rid}")
    assert compared == 3 * sum(len(p) + MAX_TOKENS - 1 for p in PROMPTS)


def test_shadow_stats_equal_replay_of_recorded_trace(run, tmp_path):
    import mpl
    from mpl import traceio

    _, pol, res = run
    out = tmp_path / "qwen3.mpltrace"
    traceio.save(res.trace, str(out))
    rep = mpl.replay(mpl.load(pol), str(out), hardware="rtx-4090", belady=False)
    assert res.stats["accesses"] > 0 and res.stats["loads"] > 0
    assert res.stats == rep.stats
    assert res.report["sim"] == rep.sim
    assert res.report["hardware"] == rep.hardware


def test_model_without_moe_layers_is_a_clear_error(tiny):
    """No policy, so nothing is checked before the engine: the worker finds no MoE layer to
    bind and says so (never an empty trace)."""
    from mpl.vllm import PolicyRunner, VllmIntegrationError

    with pytest.raises(VllmIntegrationError, match="has no MoE layers"):
        PolicyRunner(model=tiny("qwen3-dense"), dtype="float32", max_model_len=256)
