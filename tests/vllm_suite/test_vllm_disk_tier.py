"""Memory tiers in vLLM's live offload (PolicyRunner(..., offload=True) with a ``hierarchy``):
a tiny random-initialised Qwen3-MoE (float32, greedy) generates exactly the token ids and
log-probabilities of the same engine without offload, for one request and for six concurrent
requests (with two transient entries too: a step beyond them runs over groups of tokens), with the
device cache over a host tier smaller than the experts over a disk tier (a tmp folder), and
over host memory; the disk reads equal the runtime's, the copies its loads; the layers keep
only the pool and the host only the host tier's records; a replay of the trace recorded in
the same run gives the same per-tier statistics; the expert files are removed when the
policy is switched off.

One engine: the reference runs with recording only, then ``PolicyRunner.switch`` installs
each policy live (the experts read back onto the layers in between)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.needs_vllm

from prompts import CONCURRENT, EXPERTS, LAYERS, MAX_TOKENS, SINGLE, logprobs, tiered_runs  # noqa: F401


def disk_policy(name: str, folder: str, gpu: int, ram: int, extra: str = "") -> str:
    return (f"policy {name} {{\n    hierarchy {{\n"
            f"        tier g {{ location = gpu  capacity = {gpu} }}\n"
            f"        tier r {{ location = cpu  capacity = {ram} }}\n"
            f"        tier d {{ location = disk  path = \"{folder}\" }}\n    }}\n    {extra}\n}}\n")


#: (case name, policy text with FOLDER for the disk tier's path, extra switch arguments)
CASES = [
    # 6 device slots over 8 host records (a third of the 24 experts) over the disk
    ("disk", disk_policy("disk", "FOLDER", 6, 8), {}),
    # 3 slots over 4 records, history prefetch (reads overlap compute, a copy whose read is
    # still running deferred), the step's experts beyond the cache through 2 transient
    # slots, over groups of tokens
    ("disk-tight", disk_policy("tight", "FOLDER", 3, 4,
                               "prefetch { strategy = history  budget = 2 }"), {"stream_slots": 2}),
    # the device cache over host memory holding every expert (no disk)
    ("host", "policy host { hierarchy { tier g { location = gpu  capacity = 6 }\n"
             "tier r { location = cpu } } }\n", {}),
]


def rows(stats: dict) -> dict:
    return {r["location"]: r for r in stats["tiers"]}


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory):
    """{"reference": (one, many), case: (one, many, files seen while installed, present,
    folder, policy text)} from one engine (``prompts.tiered_runs``)."""
    yield from tiered_runs(tiny("qwen3-moe"), CASES, tmp_path_factory)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_tokens_identical_to_the_engine_without_offload(runs, case):
    ref_one, ref_many = runs["reference"]
    one, many, *_ = runs[case]
    assert ref_one.report is None and one.report["mode"] == "offload"
    assert any(len(b) > 1 for b in many.trace.header.extra["batches"])
    assert one.token_ids == ref_one.token_ids, f"{case}: one request"
    assert many.token_ids == ref_many.token_ids, f"{case}: concurrent requests"
    assert all(len(t) == MAX_TOKENS for t in many.token_ids)
    # bit for bit: the final logits' floats
    assert logprobs(one) == logprobs(ref_one) and logprobs(many) == logprobs(ref_many), case


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_disk_reads_and_copies_equal_the_runtimes(runs, case):
    _, many, files, present, folder, _ = runs[case]
    stats, mech = many.stats, many.report["offload"]
    tiers, t = mech["tiers"], rows(stats)
    assert stats["accesses"] > 0
    assert mech["copies"] == stats["loads"]
    assert mech["bytes_copied"] == (stats["loads"] + stats["streamed"]) * mech["expert_bytes"]
    assert mech["dispatches"] == len(many.trace)
    # the layers hold the pool only
    assert mech["layer_bytes_after"] == mech["pool_bytes"]
    assert mech["layer_bytes_before"] == LAYERS * EXPERTS * mech["expert_bytes"]
    if case == "host":
        assert "disk" not in t and tiers["disk_reads"] == 0 and files == []
        assert mech["host_store_bytes"] >= mech["expert_bytes_total"]
        return
    assert tiers["disk_reads"] == t["disk"]["reads"] > 0
    assert tiers["disk_bytes_read"] == tiers["disk_reads"] * tiers["record_bytes"]
    assert tiers["demotions"] == t["cpu"]["demotions"]
    assert tiers["host_cache_slots"] == t["cpu"]["capacity"] < LAYERS * EXPERTS
    # host memory holds the host tier's records (and one bounce record), no layer's experts
    assert mech["host_store_bytes"] == 0
    assert tiers["host_cache_bytes"] <= (t["cpu"]["capacity"] + 1) * tiers["record_bytes"]
    assert len(files) == LAYERS and all(present)
    if case == "disk-tight":
        assert tiers["demotions"] > 0 and stats["prefetch_issued"] > 0
        # vLLM's CPU kernel adds each token's experts inside: a step beyond the two transient
        # entries runs over groups of tokens (none over experts), copying an expert again
        # when its entry went to another in between (counted apart from the runtime's)
        assert mech["row_passes"] == "alone"      # the start-up probe of the kernel
        assert mech["row_pass_dispatches"] == mech["multi_pass_dispatches"] > 0
        assert mech["restream_copies"] > 0
    else:
        # the default with memory tiers, a quarter of the cache but at least the decode
        # floor, is every expert of this tiny model's layer: every step in one call
        assert mech["stream_slots"] == EXPERTS and mech["multi_pass_dispatches"] == 0


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_replay_of_the_recorded_trace_gives_the_same_tier_statistics(runs, case, tmp_path):
    import mpl
    from mpl import traceio

    _, many, *_, text = runs[case]
    path = tmp_path / "live.mpltrace"
    traceio.save(many.trace, str(path))
    assert traceio.load(str(path)).header.stored_bits == 32     # the float32 engine's experts
    rep = mpl.replay(mpl.loads(text), str(path), belady=False)
    live = many.stats
    assert rep.stats["tiers"] == live["tiers"], case
    for k in ("accesses", "loads", "evictions", "prefetch_issued", "bytes_loaded", "streamed"):
        assert rep.stats[k] == live[k], (case, k)
    assert live["hits"] + live["late_prefetches"] == rep.stats["hits"] + rep.stats["late_prefetches"]


def test_the_expert_files_are_removed_when_the_policy_is_switched_off(runs):
    for name in ("disk", "disk-tight"):
        _, _, files, present, folder, _ = runs[name]
        assert files and all(present)
        assert not any(os.path.exists(f) for f in files), name
        assert os.listdir(folder) == [], name
