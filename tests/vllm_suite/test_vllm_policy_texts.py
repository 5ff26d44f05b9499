"""Random policy texts (tests/policy_texts.py, a fixed list of seeds: the same texts every
run) switched live into one vLLM engine, as a user's files would be: each one the checks let
through runs with the token ids and log-probabilities of the engine without offload where it
computes nothing approximately and nothing on the CPU, copies equal to its runtime's loads; one
refused (before the engine is touched, or by a worker) is refused with a located message and
the engine goes on serving. ``MPL_VLLM_TEXTS`` draws more texts (a hunt)."""

from __future__ import annotations

import os
import random
import sys

import pytest

pytestmark = pytest.mark.needs_vllm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from policy_texts import Texts  # noqa: E402
from prompts import generate_both, logprobs  # noqa: E402

#: how many seeds (texts) a run draws
TEXTS = int(os.environ.get("MPL_VLLM_TEXTS", "60"))


def test_random_policy_texts_switched_live(tiny, tmp_path):
    import mpl
    from mpl.checker import analyze
    from mpl.mechanism.preflight import not_live_yet
    from mpl.vllm import PolicyRunner, VllmIntegrationError

    runner = PolicyRunner(model=tiny("qwen3-moe"), dtype="float32", max_model_len=256, seed=0,
                          enable_prefix_caching=False)
    ran = refused = 0
    try:
        ref_one, ref_many = generate_both(runner)
        for seed in range(TEXTS):
            text = Texts(random.Random(seed)).policy()
            if any(d.is_error for d in analyze(text, None).diagnostics):
                continue
            folder = tmp_path / f"experts-{seed}"
            folder.mkdir()
            text = text.replace("location = disk", f'location = disk  path = "{folder}"')
            if not_live_yet(mpl.loads(text).ir, "vllm"):
                continue
            try:
                runner.switch(text, offload=True)
            except VllmIntegrationError as e:      # (PolicyDoesNotFit is one too)
                refused += 1
                assert str(e).startswith("<text>:"), (seed, str(e))
                continue
            one, many = generate_both(runner)
            ran += 1
            stats, mech = many.stats, many.report["offload"]
            assert mech["copies"] == stats["loads"], seed
            approximate = stats.get("approximate_computes") or stats["cpu_computes"]
            if not approximate:
                assert one.token_ids == ref_one.token_ids, seed
                assert many.token_ids == ref_many.token_ids, seed
                assert logprobs(many) == logprobs(ref_many), seed
        runner.switch(None)
        assert generate_both(runner)[1].token_ids == ref_many.token_ids
    finally:
        runner.close()
    assert ran >= TEXTS // 6 and refused >= 1, (ran, refused)
