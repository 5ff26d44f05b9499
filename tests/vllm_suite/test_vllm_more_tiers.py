"""Memory tiers beyond the checkpoint's precision in vLLM's live offload
(PolicyRunner(..., offload=True) with a ``hierarchy``), on a tiny random-initialised
Qwen3-MoE (float32, greedy), one request and six concurrent requests:

* a low-precision gpu tier (int8, int4, the int8/int4 ``dtype_ladder``) right under the
  device cache over host memory (alone, and in a band beside a band over a second gpu tier,
  a host tier and a disk tier), over a host tier and a disk tier, and holding parts
  (``granularity_split``): the statistics report the accesses computed from
  quantised copies (the runtime's ``approximate_computes``, the tier's row, the
  mechanism's dequantisations: all equal, above 0), and a replay of the trace recorded in
  the same run gives the same per-tier statistics;
* a second full-precision gpu tier (over host memory; over a host tier and a disk tier),
  ``granularity_split`` (over host memory; over a host tier and a disk tier, over groups
  of tokens through two transient entries), computing on the CPU (``cpu_fallback``;
  ``hybrid`` with a split) over a disk tier: the token ids equal the engine's without
  offload (and, computing nothing on the CPU, its log-probabilities: bit for bit), the
  copies the runtime's loads, a replay of
  the recorded trace gives the same per-tier statistics, and the expert files are removed
  when the policy is switched off.

One engine: the reference runs with recording only, then ``PolicyRunner.switch`` installs
each policy live (the experts read back onto the layers in between)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.needs_vllm

from prompts import LAYERS, EXPERTS, logprobs, tiered_runs  # noqa: E402

KEYS = LAYERS * EXPERTS


def policy(name: str, tiers: str, extra: str = "") -> str:
    return f"policy {name} {{\n    hierarchy {{\n{tiers}    }}\n    {extra}\n}}\n"


def low(dtype: str) -> str:
    return (f"        tier hot  {{ location = gpu  capacity = 4 }}\n"
            f"        tier warm {{ location = gpu  {dtype}  capacity = 12 }}\n"
            f"        tier ram  {{ location = cpu }}\n"
            f"        on demote(hot -> warm) {{ mechanism = in_place_requant }}\n"
            f"        eviction = lru\n")


DISK = ("        tier r {{ location = cpu  capacity = {ram} }}\n"
        "        tier d {{ location = disk  path = \"FOLDER\" }}\n")

#: (case, policy text (FOLDER: the disk tier's path), extra switch arguments)
LOW = [
    ("int8", policy("int8", low("dtype = int8"), "prefetch { strategy = history  budget = 2 }"), {}),
    ("int4", policy("int4", low("dtype = int4")), {}),
    ("ladder", policy("ladder", low("dtype_ladder = [int8, int4]")), {}),
    # over a host tier with a capacity and a disk tier: the warm tier filled from the host
    # tier's records, its victims read back from the disk
    ("int8-disk", policy("int8d", "        tier hot  { location = gpu  capacity = 4 }\n"
                                  "        tier warm { location = gpu  dtype = int8  capacity = 10 }\n"
                         + DISK.format(ram=8) + "        eviction = lru\n",
                         "prefetch { strategy = history  budget = 2 }"), {}),
    # quantised parts: the expert put together from its dequantised parts
    ("int4-split", policy("int4s", "        tier hot  { location = gpu  capacity = 4 }\n"
                                   "        tier warm { location = gpu  dtype = int4  capacity = 12 }\n"
                                   "        tier ram  { location = cpu }\n"
                                   "        granularity_split = 2\n        eviction = lru\n"), {}),
    # bands: decoder layer 0 over an int4 tier and host memory, the others over a second gpu
    # tier, a host tier and the disk
    ("bands", "policy bands {\n    per_layer_hierarchy {\n"
              "        band layers = 0..0 { tier hot { location = gpu  capacity = 2 }\n"
              "            tier warm { location = gpu  dtype = int4  capacity = 4 }\n"
              "            tier ram { location = cpu } }\n"
              "        band layers = 1..2 { tier hot { location = gpu  capacity = 3 }\n"
              "            tier g2 { location = gpu  capacity = 3 }\n"
              "            tier r { location = cpu  capacity = 6 }\n"
              "            tier d { location = disk  path = \"FOLDER\" } }\n"
              "    }\n}\n", {}),
]
FULL = [
    ("gpu2-host", policy("g2h", "        tier g { location = gpu  capacity = 4 }\n"
                                "        tier g2 { location = gpu  capacity = 8 }\n"
                                "        tier r { location = cpu }\n"), {}),
    ("gpu2-disk", policy("g2d", "        tier g { location = gpu  capacity = 3 }\n"
                                "        tier g2 { location = gpu  capacity = 4 }\n"
                         + DISK.format(ram=6), "prefetch { strategy = history  budget = 2 }"), {}),
    ("split-host", policy("sh", "        tier g { location = gpu  capacity = 8 }\n"
                                "        tier r { location = cpu }\n"
                                "        granularity_split = 2\n"), {}),
    # the step's experts through 2 transient slots, in passes
    ("split-disk", policy("sd", "        tier g { location = gpu  capacity = 8 }\n"
                          + DISK.format(ram=10) + "        granularity_split = 2\n"),
     {"stream_slots": 2}),
    ("split-gpu2-disk", policy("sgd", "        tier g { location = gpu  capacity = 8 }\n"
                                      "        tier g2 { location = gpu  capacity = 8 }\n"
                               + DISK.format(ram=10) + "        granularity_split = 2\n"), {}),
    ("cpu-disk", policy("cd", "        tier g { location = gpu  capacity = 4 }\n" + DISK.format(ram=8),
                        "schedule { mode = cpu_fallback }"), {}),
    ("hybrid-split-disk", policy("hsd", "        tier g { location = gpu  capacity = 16 }\n"
                                 + DISK.format(ram=12) + "        granularity_split = 2\n",
                                 "schedule { mode = hybrid }"), {}),
]


def row(stats: dict, tier: str) -> dict:
    return next(r for r in stats["tiers"] if r["tier"] == tier)


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory):
    """{"reference": (one, many), case: (one, many, files seen while installed, present,
    folder, policy text)} from one engine (``prompts.tiered_runs``)."""
    yield from tiered_runs(tiny("qwen3-moe"), LOW + FULL, tmp_path_factory)


def replayed(many, text, tmp_path) -> dict:
    import mpl
    from mpl import traceio

    path = tmp_path / "live.mpltrace"
    traceio.save(many.trace, str(path))
    assert traceio.load(str(path)).header.stored_bits == 32     # the float32 engine's experts
    return mpl.replay(mpl.loads(text), str(path), belady=False).stats


@pytest.mark.parametrize("case", [c[0] for c in LOW])
def test_low_precision_computes_are_counted_and_a_replay_agrees(runs, case, tmp_path):
    one, many, _files, _present, _folder, text = runs[case]
    assert one.report["mode"] == "offload"
    for res in (one, many):
        stats, mech = res.stats, res.report["offload"]
        tiers = mech["tiers"]
        warm = row(stats, "warm")
        assert stats["approximate_computes"] == tiers["approximate"] == warm["approximate"] > 0
        assert tiers["lowprec"][0]["approximate"] == warm["approximate"]
        assert tiers["lowprec_bytes"] == tiers["lowprec"][0]["bytes"] > 0
        assert mech["copies"] == stats["loads"]
        assert mech["layer_bytes_after"] == mech["pool_bytes"]
    tiers = many.report["offload"]["tiers"]
    if case == "bands":
        assert tiers["disk_reads"] > 0 and tiers["gpu_tiers"][0]["tier"] == "g2"
    if case == "int8-disk":
        assert tiers["disk_reads"] > 0 and many.report["offload"]["host_store_bytes"] == 0
    if case == "int4-split":
        assert tiers["parts"]["split"] == 2 and tiers["parts"]["gathers"] > 0
    if case == "ladder":
        low = tiers["lowprec"][0]
        assert low["dtype_ladder"] == ["int8", "int4"]
        assert sum(low["approximate_at"].values()) == low["approximate"]
    rep = replayed(many, text, tmp_path)
    live = many.stats
    assert rep["tiers"] == live["tiers"], case
    for k in ("accesses", "loads", "evictions", "approximate_computes", "bytes_loaded",
              "streamed"):
        assert rep[k] == live[k], (case, k)


@pytest.mark.parametrize("case", [c[0] for c in FULL])
def test_full_precision_tiers_give_the_engines_tokens(runs, case):
    ref_one, ref_many = runs["reference"]
    one, many, *_ = runs[case]
    assert ref_one.report is None and one.report["mode"] == "offload"
    assert any(len(b) > 1 for b in many.trace.header.extra["batches"])
    assert one.token_ids == ref_one.token_ids, f"{case}: one request"
    assert many.token_ids == ref_many.token_ids, f"{case}: concurrent requests"
    if case not in ("cpu-disk", "hybrid-split-disk"):
        # bit for bit (the final logits' floats), "split-disk" through two transient entries
        # over groups of tokens; a CPU-placed expert's output is added after the kernel's
        assert logprobs(one) == logprobs(ref_one), case
        assert logprobs(many) == logprobs(ref_many), case
    if case == "split-disk":
        mech = many.report["offload"]
        assert mech["row_pass_dispatches"] == mech["multi_pass_dispatches"] > 0


@pytest.mark.parametrize("case", [c[0] for c in FULL])
def test_full_precision_tiers_copies_and_replay_agree(runs, case, tmp_path):
    _, many, files, present, _folder, text = runs[case]
    stats, mech = many.stats, many.report["offload"]
    tiers = mech["tiers"]
    assert stats["accesses"] > 0 and stats.get("approximate_computes", 0) == 0
    assert mech["copies"] == stats["loads"] > 0
    assert mech["dispatches"] == len(many.trace)
    if "disk" in case:
        disk = next(r for r in stats["tiers"] if r["location"] == "disk")
        assert tiers["disk_reads"] == disk["reads"] > 0
        assert mech["host_store_bytes"] == 0
        assert len(files) == LAYERS and all(present)
    if "gpu2" in case:
        g2 = tiers["gpu_tiers"][0]
        assert g2["tier"] == "g2" and g2["serves"] + g2["promotions"] > 0
    if "split" in case:
        parts = tiers["parts"]
        assert parts["split"] == 2 and parts["gathers"] > 0
        assert mech["cache_slots"] == parts["slots"]
    if case == "split-disk":
        assert mech["multi_pass_dispatches"] > 0
    if "cpu" in case or "hybrid" in case:
        assert mech["cpu_computes"] == stats["cpu_computes"] > 0
        assert tiers["cpu_from_records"] > 0
    rep = replayed(many, text, tmp_path)
    assert rep["tiers"] == stats["tiers"], case
    for k in ("accesses", "loads", "evictions", "prefetch_issued", "bytes_loaded", "streamed",
              "cpu_computes"):
        assert rep[k] == stats[k], (case, k)


def test_the_expert_files_are_removed_when_each_policy_is_switched_off(runs):
    for name, *_ in LOW + FULL:
        _, _, files, present, folder, _ = runs[name]
        if "disk" not in name and name != "bands":
            assert files == []
            continue
        assert files and all(present), name
        assert not any(os.path.exists(f) for f in files), name
        assert os.listdir(folder) == [], name
