"""``mplc tune --device-memory X [--host-memory Y] [--disk NAME]``: the tuner's memory-tier
search (mpl/tune_tiers.py; docs/simulation.md, "Tuning memory tiers"), as a user runs it.

Mixtral-8x7B's experts are 256 x 336 MiB = 84 GiB: with 100 GiB of device memory they fit
on the device (no hierarchy); with 16 GiB of device memory and 128 GiB of host memory (115.2
GiB after the 10% reserve) they fit in host memory, and the plain cache is ranked beside
hierarchies with an int8 / int4 gpu warm tier; with 64 GiB of host memory (57.6 GiB) they
need a disk tier, and the winner has one. The written policy checks clean with ``mplc
check``; bad input is one line and exit 1 (or 2 for a usage error)."""

from __future__ import annotations

import json

import pytest

from mpl import traceio
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
    return d


def _tune(d, *args, out=None):
    extra = ["-o", out, "--force"] if out else []
    r = mplc("tune", "--trace", "mx.mpltrace", "-j", "2", "--no-progress", "--json", *args,
             *extra, cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _checks_clean(d, name):
    r = mplc("check", name, cwd=d)
    clean(r)
    assert r.returncode == 0 and "no problems" in r.stdout, r.stdout + r.stderr


def test_experts_that_fit_on_the_device_need_no_hierarchy(d):
    j = _tune(d, "--device-memory", "100GiB", out="dev.moe")
    t = j["tiers"]
    assert t["case"] == "device" and "no hierarchy needed" in t["message"]
    assert t["model_bytes"] == 256 * t["expert_bytes"] and t["device_slots"] >= 256
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
    assert t["device_slots"] == 16 * GIB // t["expert_bytes"] == j["budget_slots"] == 48
    assert t["candidates"] >= 6                  # int8 / int4 x the hot shares, per base
    hier = t["hierarchies"]
    assert hier, "no hierarchy reached the whole trace"
    assert all(h["description"].startswith("tiers hot ") and "warm" in h["description"]
               for h in hier)
    assert all(h["fraction"] == 1.0 and h["approximate_computes"] is not None for h in hier)
    assert t["plain_best"] is not None and "tiers" not in t["plain_best"]["description"]
    assert "fit in host memory, not on the device" in t["message"]
    # the winner is the objective's best of every row on the whole trace, tiers or not
    best = j["best"]["tokens_per_s"]
    assert best >= max(h["tokens_per_s"] for h in hier)
    assert best >= t["plain_best"]["tokens_per_s"]
    _checks_clean(d, "host.moe")


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
    # the winner's per-tier rows: every access served by one tier, the disk read
    rows = {r["tier"]: r for r in t["winner_tiers"]}
    assert {"hot", "ram", "ssd"} <= set(rows)
    acc = sum(r["hits"] for r in t["winner_tiers"])
    assert acc > 0 and rows["ssd"]["reads"] > 0
    assert t["approximate_computes"] == sum(t["approximate_by_dtype"].values())
    _checks_clean(d, "disk.moe")
    text = (d / "disk.moe").read_text()
    mib = int(t["host_tier_bytes"] // 2 ** 20)
    assert f"capacity = {mib}MiB" in text
    # the text report: the case, the hierarchies, the plain cache marked as not this machine's
    out = mplc("tune", "--trace", "mx.mpltrace", "--device-memory", "16GiB", "--host-memory",
               "64GiB", "-j", "2", "--no-progress", cwd=d)
    clean(out)
    assert "the model needs a disk tier" in out.stdout
    assert "needs host memory for every expert: not this machine's" in out.stdout
    assert "the winner's tiers on the whole trace:" in out.stdout


@pytest.mark.parametrize("args, code, message", [
    (["--device-memory", "lots"], 1, "--device-memory 'lots': give a size with a unit"),
    (["--device-memory", "24"], 1, "give a size with a unit"),
    (["--device-memory", "16GiB", "--host-memory", "many"], 1, "--host-memory 'many'"),
    (["--device-memory", "64GiB", "--host-memory", "32GiB"], 1, "larger than the host memory"),
    (["--device-memory", "200MiB"], 1, "fewer than the 2 a dispatch uses"),
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
    r = mplc("tune", "--trace", "anon.jsonl", "--device-memory", "1GiB", "--model",
             "mixtral-8x7b", "-j", "1", "--no-progress", "--json", cwd=d)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tiers"]["case"] in ("host", "disk")


def test_help_documents_the_options():
    r = mplc("tune", "--help", cwd=".")
    for opt in ("--device-memory", "--host-memory", "--disk", "nvme-gen4"):
        assert opt in r.stdout
