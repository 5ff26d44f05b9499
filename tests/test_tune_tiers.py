"""``mplc tune --device-memory X [--host-memory Y] [--disk NAME]``: the tuner's memory-tier
search (mpl/tune_tiers.py; docs/simulation.md, "Tuning memory tiers"), as a user runs it.

Mixtral-8x7B's experts are 256 x 336 MiB = 84 GiB, its skeleton (everything else) 3.2 GB:
a device of 100 GiB less the skeleton, the KV-cache reserve (10 GiB) and the slot pool's 9
transient entries holds every expert (no hierarchy); 16 GiB of device memory leaves room for
25 experts, and with 128 GiB of host memory (115.2 GiB after the 10% reserve) they fit in host
memory: the plain cache is ranked beside hierarchies with an int8 / int4 gpu warm tier, a
dtype_ladder warm tier and per-layer bands; with 64 GiB of host memory (57.6 GiB) they need a
disk tier, and the winner has one. The written policy checks clean with ``mplc check`` (the
hint that a lower-precision tier computes approximately is the only thing it may say) and
replays to the reported numbers; bad input is one line and exit 1 (or 2 for a usage
error)."""

from __future__ import annotations

import json

import pytest

from mpl import shapes, traceio
from mpl.mechanism.footprint import ALIGN
from mpl.sim import synth
from mpl.tune_tiers import HOST_RESERVE

from cli_helpers import clean, mplc

GIB = 2 ** 30


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune_tiers")
    traceio.save(synth.synthesize("mixtral-8x7b", steps=40, seed=3), str(d / "mx.mpltrace"))
    traceio.save(synth.synthesize("mixtral-8x7b", steps=5, seed=1), str(d / "full.jsonl"))
    lines = (d / "full.jsonl").read_text().splitlines()[1:]
    # the original's JSONL header without a model the tuner knows: no expert size
    (d / "anon.jsonl").write_text("\n".join([json.dumps({"model": "my-moe", "num_experts": 8,
                                                         "top_k": 2})] + lines) + "\n")
    # a header with the expert size and no model the tuner knows: no skeleton, no matrices
    (d / "sized.jsonl").write_text("\n".join([json.dumps({
        "model": "my-moe", "num_experts": 8, "top_k": 2, "num_layers": 32,
        "moe_layers": list(range(32)), "expert_bytes": MX.expert_bytes})] + lines) + "\n")
    return d


def _tune(d, *args, out=None):
    extra = ["-o", out, "--force"] if out else []
    r = mplc("tune", "--trace", "mx.mpltrace", "-j", "2", "--no-progress", "--json", *args,
             *extra, cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _checks_clean(d, name, device=None):
    """No error or warning, for the model on its ``device`` too (its memory checks: the
    slot pool and the gpu tiers fit); a lower-precision tier's hint (MPL420: it computes
    approximately) is the only thing it may say."""
    model = ["--model", "mixtral-8x7b", "--device-memory", device] if device else None
    for extra in ([], model) if model else ([],):
        r = mplc("check", name, *extra, cwd=d)
        clean(r)
        assert r.returncode == 0, r.stdout + r.stderr
        said = [ln for ln in r.stdout.splitlines() if ": hint[" in ln or ": warning[" in ln
                or ": error[" in ln]
        assert "no problems" in r.stdout or all("hint[MPL420]" in ln for ln in said), r.stdout


MX = shapes.preset("mixtral-8x7b")
ENTRY = MX.expert_bytes + ALIGN                 # one slot-pool entry


def _room(device, kv):
    """What a device leaves for experts: less the skeleton, the KV reserve and the slot
    pool's transient entries (one per expert of a layer, and one)."""
    return device - MX.skeleton_bytes - kv - (MX.num_experts + 1) * ENTRY


def _replays_to_the_report(d, name, j, host=None, disk=None):
    """The written policy replayed (the CLI for the hit rate, the API on the tuner's hardware
    for the tokens/s) gives the numbers the tuner reported for the winner."""
    r = mplc("replay", name, "--trace", "mx.mpltrace", "--json", "--no-belady", cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    best = j["best"]
    assert rep["stats"]["hit_rate"] == pytest.approx(best["hit_rate"], abs=1e-12)
    from mpl import tracecols
    from mpl.tune_tiers import plan, profile_for
    from mpl.timemodel import hardware as hw
    from mpl.sim.tracemodel import with_model

    trace = with_model(tracecols.load(str(d / "mx.mpltrace")), None)
    profile = profile_for(plan(trace.header, "16GiB", host, disk), hw.resolve(None))
    from mpl.api import load_for_replay
    res = load_for_replay((d / name).read_text()).replay(trace, hardware=profile, belady=False)
    assert res.sim["tokens_per_s"] == pytest.approx(best["tokens_per_s"], rel=1e-9)
    assert res.stats["hit_rate"] == pytest.approx(best["hit_rate"], abs=1e-12)


def test_experts_that_fit_on_the_device_need_no_hierarchy(d):
    j = _tune(d, "--device-memory", "100GiB", out="dev.moe")
    t = j["tiers"]
    assert t["case"] == "device" and "no hierarchy needed" in t["message"]
    assert t["model_bytes"] == 256 * t["expert_bytes"] and t["device_slots"] >= 256
    # the device's memory holds the skeleton, the KV reserve and the transient entries too
    assert (t["skeleton_bytes"], t["skeleton_source"]) == (MX.skeleton_bytes, "model mixtral-8x7b")
    assert t["kv_reserve"] == 10 * GIB and t["stream_slots"] == 8
    assert t["transient_bytes"] == 9 * ENTRY == 9 * t["entry_bytes"]
    assert t["expert_room"] == _room(100 * GIB, 10 * GIB)
    assert t["device_slots"] == t["expert_room"] // ENTRY
    assert t["hierarchies"] == [] and t["candidates"] == 0 and not t["winner_tiered"]
    assert j["holds_every_expert"] and j["budget_slots"] == 256
    assert "hierarchy" not in j["policy_text"] and "cache" in j["policy_text"]
    _checks_clean(d, "dev.moe")
    text = mplc("tune", "--trace", "mx.mpltrace", "--device-memory", "100GiB", "-j", "2",
                "--no-progress", cwd=d).stdout
    assert "memory tiers: the model's experts fit on the device: no hierarchy needed" in text


def test_experts_that_fit_in_host_memory_rank_hierarchies_beside_the_plain_cache(d):
    j = _tune(d, "--device-memory", "16GiB", "--host-memory", "128GiB", out="host.moe")
    t = j["tiers"]
    assert t["case"] == "host" and t["plain_feasible"]
    assert t["host_tier_bytes"] == int(128 * GIB * (1 - HOST_RESERVE))
    # 16 GiB less the skeleton (3.2 GB), the KV reserve (1.6 GiB) and 9 transient entries
    assert t["expert_room"] == _room(16 * GIB, int(1.6 * GIB))
    assert t["device_slots"] == t["expert_room"] // ENTRY == j["budget_slots"] == 25
    assert "less the skeleton" in t["message"] and "25 at full precision" in t["message"]
    # int8 / int4 splits, ladders, and per-layer bands, per base
    assert t["families"]["split"] >= 6 and t["families"]["ladder"] >= 3
    assert t["families"]["bands"] >= 2
    assert sum(t["families"].values()) == t["candidates"]
    searched = [x["description"] for x in j["leaderboard"]]
    assert any(x.startswith("bands 0..") for x in searched)
    assert any("[int8, int4]" in x for x in searched)
    assert not [x for x in j["leaderboard"] if x["error"]]     # every candidate replays
    hier = t["hierarchies"]
    assert hier, "no hierarchy reached the whole trace"
    assert all((h["description"].startswith("tiers hot ") and "warm" in h["description"])
               or h["description"].startswith("bands ") for h in hier)
    assert all(h["fraction"] == 1.0 and h["approximate_computes"] is not None for h in hier)
    assert t["plain_best"] is not None and "tiers" not in t["plain_best"]["description"]
    assert "fit in host memory, not on the device" in t["message"]
    # the winner is the objective's best of every row on the whole trace, tiers or not
    best = j["best"]["tokens_per_s"]
    assert best >= max(h["tokens_per_s"] for h in hier)
    assert best >= t["plain_best"]["tokens_per_s"]
    _checks_clean(d, "host.moe", "16GiB")
    _replays_to_the_report(d, "host.moe", j, host="128GiB")
    if t["winner_tiered"]:
        dev = t["winner_device"]
        assert dev["total"] <= t["device_bytes"] and dev["the skeleton"] == MX.skeleton_bytes


def test_experts_that_do_not_fit_in_host_memory_need_a_disk_tier(d):
    j = _tune(d, "--device-memory", "16GiB", "--host-memory", "64GiB", "--disk", "nvme-gen5",
              out="disk.moe")
    t = j["tiers"]
    assert t["case"] == "disk" and "needs a disk tier" in t["message"]
    assert (t["disk"], t["disk_source"]) == ("nvme-gen5", "--disk")
    assert not t["plain_feasible"] and t["winner_tiered"]
    assert "hierarchy" in j["policy_text"] and "location = disk" in j["policy_text"]
    assert all("/ ram " in h["description"] and "/ ssd" in h["description"]
               for h in t["hierarchies"])
    assert t["winner_device"]["total"] <= t["device_bytes"]
    assert not [x for x in j["leaderboard"] if x["error"]]
    assert any(x["description"].startswith("bands ") for x in j["leaderboard"])
    assert t["winner_family"] in ("whole", "split", "ladder", "bands")
    # every family runs live in attach (a split or a ladder over a host tier and a disk tier
    # too: tests/test_offload_lowprec_disk.py)
    assert t["winner_live"] is None
    # the winner's per-tier rows: every access served by one tier, the disk read
    rows = {r["tier"]: r for r in t["winner_tiers"]}
    assert {"hot", "ram", "ssd"} <= set(rows)
    acc = sum(r["hits"] for r in t["winner_tiers"])
    assert acc > 0 and rows["ssd"]["reads"] > 0
    assert t["approximate_computes"] == sum(t["approximate_by_dtype"].values())
    _checks_clean(d, "disk.moe", "16GiB")
    _replays_to_the_report(d, "disk.moe", j, host="64GiB", disk="nvme-gen5")
    text = (d / "disk.moe").read_text()
    mib = int(t["host_tier_bytes"] // 2 ** 20)
    if t["winner_family"] == "bands":        # the host tier shared by the bands' layers
        caps = [int(x.split("MiB")[0]) for x in text.split("capacity = ")[1:] if "MiB" in x]
        assert mib - len(caps) <= sum(caps) <= mib
    else:
        assert f"capacity = {mib}MiB" in text
    # the text report: the case, the hierarchies, the plain cache marked as not this machine's
    out = mplc("tune", "--trace", "mx.mpltrace", "--device-memory", "16GiB", "--host-memory",
               "64GiB", "-j", "2", "--no-progress", cwd=d)
    clean(out)
    assert "the model needs a disk tier" in out.stdout
    assert "needs host memory for every expert: not this machine's" in out.stdout
    assert "the winner's tiers on the whole trace:" in out.stdout
    assert "hierarchies searched (" in out.stdout and " bands" in out.stdout
    assert "GiB of the device's 16.0 GiB: the skeleton" in out.stdout


@pytest.mark.parametrize("args, code, message", [
    (["--device-memory", "lots"], 1, "--device-memory 'lots': give a size with a unit"),
    (["--device-memory", "24"], 1, "give a size with a unit"),
    (["--device-memory", "16GiB", "--host-memory", "many"], 1, "--host-memory 'many'"),
    (["--device-memory", "64GiB", "--host-memory", "32GiB"], 1, "larger than the host memory"),
    (["--device-memory", "200MiB"], 1, "fewer than the 2 a dispatch uses"),
    # 7 GiB less the skeleton (3.2 GB), 1 GiB of KV reserve and 9 transient entries of
    # 336 MiB: 68 MiB, no expert
    (["--device-memory", "7GiB"], 1, "leaves 0.1 GiB for experts"),
    (["--device-memory", "16GiB", "--kv-reserve", "lots"], 1, "--kv-reserve 'lots'"),
    (["--device-memory", "16GiB", "--kv-reserve", "0GiB"], 1, "a finite number of bytes, at least one"),
    # a KV reserve above the device: nothing left for experts, with every figure
    (["--device-memory", "16GiB", "--kv-reserve", "20GiB"], 1,
     "the KV-cache reserve 20.0 GiB (--kv-reserve)"),
    (["--kv-reserve", "2GiB", "--budget", "8"], 2, "go with --device-memory"),
    (["--device-memory", "16GiB", "--budget", "8"], 2, "not both"),
    (["--host-memory", "64GiB", "--budget", "8"], 2, "go with --device-memory"),
    ([], 2, "give --budget SLOTS|SIZE or --device-memory SIZE"),
    (["--device-memory", "16GiB", "--disk", "floppy"], 2, "invalid choice"),
    (["--device-memory", "16GiB", "--search", "grid"], 2, "runs with --search halving"),
])
def test_bad_input_is_one_line(d, args, code, message):
    r = mplc("tune", "--trace", "mx.mpltrace", "-j", "1", "--no-progress", *args, cwd=d)
    assert r.returncode == code, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_trace_without_a_known_model_needs_model(d):
    r = mplc("tune", "--trace", "anon.jsonl", "--device-memory", "16GiB", "-j", "1",
             "--no-progress", cwd=d)
    assert r.returncode == 1 and "give --model PRESET|config.json" in r.stderr
    assert "Traceback" not in r.stderr
    r = mplc("tune", "--trace", "anon.jsonl", "--device-memory", "12GiB", "--model",
             "mixtral-8x7b", "-j", "1", "--no-progress", "--json", cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)["tiers"]
    assert t["case"] in ("host", "disk")
    assert (t["skeleton_bytes"], t["skeleton_source"]) == (MX.skeleton_bytes, "model mixtral-8x7b")


def test_a_header_with_only_the_expert_size_counts_no_skeleton_and_says_so(d):
    r = mplc("tune", "--trace", "sized.jsonl", "--device-memory", "16GiB", "--host-memory",
             "128GiB", "-j", "1", "--no-progress", "--json", cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)["tiers"]
    assert t["skeleton_bytes"] == 0 and "not counted" in t["skeleton_source"]
    assert "not counted" in t["message"]
    # the low-precision records from the expert size at the precision's bits
    assert t["record_bytes"] == {"int8": MX.expert_bytes // 2, "int4": MX.expert_bytes // 4}
    assert t["expert_room"] == 16 * GIB - int(1.6 * GIB) - 9 * ENTRY


def test_help_documents_the_options():
    r = mplc("tune", "--help", cwd=".")
    for opt in ("--device-memory", "--host-memory", "--disk", "nvme-gen4", "--kv-reserve"):
        assert opt in r.stdout
