"""vLLM's live offload with memory tiers bounds its transient area by default: a tiny
random-initialised Qwen3-MoE with 32 experts a layer (top-2) over a device cache of 8 slots
gets a quarter of the cache or the decode floor (16 entries), not one entry per expert, and
the concurrent prefill that streams more than 16 experts is computed over groups of tokens:
the token ids and every position's log-probabilities equal the engine's without offload, and
the runtime's counts are the mechanism's."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.needs_vllm

from prompts import logprobs, tiered_runs

EXPERTS, TOP_K, CACHE = 32, 2, 8


def policy(name: str, lower: str) -> str:
    return (f"policy {name} {{\n    hierarchy {{\n"
            f"        tier g {{ location = gpu  capacity = {CACHE} }}\n{lower}    }}\n}}\n")


CASES = [
    ("host", "        tier r { location = cpu }\n"),
    ("disk", "        tier r { location = cpu  capacity = 24 }\n"
             "        tier d { location = disk  path = \"FOLDER\" }\n"),
]


@pytest.fixture(scope="module")
def runs(models_dir, tmp_path_factory):
    import tiny_models

    path = tiny_models.build("qwen3-moe", os.path.join(models_dir, "qwen3-moe-32"),
                             num_experts=EXPERTS)
    yield from tiered_runs(path, [(name, policy(name, lower), {}) for name, lower in CASES],
                           tmp_path_factory)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_the_default_area_is_a_share_of_the_cache_and_keeps_the_bits(runs, case):
    from mpl.mechanism.footprint import live_stream_slots
    ref_one, ref_many = runs["reference"]
    one, many, *_ = runs[case]
    assert one.token_ids == ref_one.token_ids and many.token_ids == ref_many.token_ids, case
    assert logprobs(one) == logprobs(ref_one) and logprobs(many) == logprobs(ref_many), case
    mech, stats = many.report["offload"], many.stats
    assert mech["stream_slots"] == live_stream_slots(EXPERTS, TOP_K, CACHE) == 16
    assert mech["pool_slots"] == CACHE + 16 + 1
    assert mech["row_passes"] == "alone"          # the start-up probe of the CPU kernel
    assert mech["row_pass_dispatches"] == mech["multi_pass_dispatches"] > 0
    assert mech["host_window_dispatches"] == 0
    assert mech["copies"] == stats["loads"]
    assert mech["stream_copies"] == stats["streamed"]
    if case == "disk":
        disk = [r for r in stats["tiers"] if r["location"] == "disk"][0]
        assert mech["tiers"]["disk_reads"] == disk["reads"] > 0
