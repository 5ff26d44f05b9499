"""Sizing that cannot mislead, through the CLI: no capacity is silently ignored beside
``per_layer.total_budget`` (MPL409; ``--capacity`` on such a policy is each layer's capacity
and says so; a sweep whose points change nothing is refused), ``total_budget`` takes sizes,
the device-memory check counts the pool actually allocated, leaves room for the skeleton and
the KV cache and suggests a capacity that fits (MPL504), the guide's lessons are warnings
(MPL508, MPL509), and the tuner uses the whole budget and says when it holds every expert."""

from __future__ import annotations

import json
import re

import pytest

from cli_helpers import clean, mplc
from mpl import traceio
from mpl.sim import synth

PER_LAYER = """\
policy pl {
    cache {
        capacity = 16
        eviction = lru
    }
    per_layer {
        total_budget = 416
    }
}
"""

DS = ["--model", "deepseek-v2-lite"]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    d = tmp_path_factory.mktemp("sizing")
    traceio.save(synth.synthesize("deepseek-v2-lite", steps=40, seed=0), str(d / "ds.mpltrace"))
    return d


def _hit_rate(r) -> float:
    return json.loads(r.stdout)["stats"]["hit_rate"]


# ------------------------------------------------------------------ capacity vs total_budget
def test_a_capacity_beside_total_budget_is_a_warning_naming_the_winner(tmp_path):
    (tmp_path / "pl.moe").write_text(PER_LAYER)
    r = mplc("check", "pl.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0
    assert ("pl.moe:3:9: warning[MPL409]: 'capacity' has no effect: per_layer.total_budget = 416 "
            "decides every layer's capacity") in r.stdout
    assert "= help: Remove 'capacity'" in r.stdout
    r = mplc("check", "--fix", "pl.moe", cwd=tmp_path)
    assert r.returncode == 0 and "1 file checked: no problems" in r.stdout
    assert "capacity" not in (tmp_path / "pl.moe").read_text()     # not needed beside the budget


def test_an_adapt_action_on_an_overridden_capacity_is_a_warning(tmp_path):
    (tmp_path / "a.moe").write_text(
        "policy a {\n    cache { eviction = lru }\n    per_layer { total_budget = 416 }\n"
        "    adapt { when hit_rate < 0.3 { capacity = 8  eviction = lfu } }\n}\n")
    r = mplc("check", "a.moe", cwd=tmp_path)
    assert r.returncode == 0
    assert "a.moe:4:35: warning[MPL409]: this action has no effect" in r.stdout


def test_replay_capacity_on_a_budgeted_per_layer_policy_is_each_layers(ds):
    (ds / "pl.moe").write_text(PER_LAYER)
    rates = {}
    for cap in ("8", "16", "24"):
        r = mplc("replay", "pl.moe", "-t", "ds.mpltrace", "--capacity", cap, "--json",
                 "--no-belady", cwd=ds)
        clean(r)
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert [x["capacity"] for x in rep["stats"]["per_layer"]] == [int(cap)] * 26
        assert rep["notes"] == [f"capacity {cap} is each layer's capacity: the policy's total_budget "
                                f"416 is replaced by 26 layers x {cap} = {26 * int(cap)} slots"]
        rates[cap] = rep["stats"]["hit_rate"]
    assert rates["8"] < rates["16"] < rates["24"]
    r = mplc("replay", "pl.moe", "-t", "ds.mpltrace", "--capacity", "8", "--no-belady", cwd=ds)
    assert "note: capacity 8 is each layer's capacity" in r.stdout


def test_a_sweep_of_a_budgeted_per_layer_policy_changes_every_row(ds):
    (ds / "pl.moe").write_text(PER_LAYER)
    r = mplc("sweep", "pl.moe", "-t", "ds.mpltrace", "--capacity", "8,16,32", "--json",
             "--no-belady", cwd=ds)
    clean(r)
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)["points"]
    assert [p["total_slots"] for p in points] == [208, 416, 832]
    assert len({p["hit_rate"] for p in points}) == 3


def test_a_sweep_whose_points_do_not_change_the_policy_is_refused(ds):
    r = mplc("sweep", "std/lru_basic", "-t", "ds.mpltrace", "--param", "frequency_decay=0.9,0.5",
             cwd=ds)
    clean(r)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("mplc sweep: error: lru_basic: the sweep's points (frequency_decay=0.9) "
                               "and (frequency_decay=0.5) replay the same policy: 'frequency_decay' "
                               "has no effect with eviction = lru")
    assert "[MPL401]" in r.stderr


def test_total_budget_takes_a_size(ds):
    (ds / "sz.moe").write_text("policy sz {\n    cache { eviction = lfu }\n"
                               "    per_layer { total_budget = 10GiB }\n}\n")
    r = mplc("check", "sz.moe", *DS, "--device-memory", "16GB", cwd=ds)
    clean(r)
    assert r.returncode == 0 and "no problems" in r.stdout
    r = mplc("replay", "sz.moe", "-t", "ds.mpltrace", "--json", "--no-belady", cwd=ds)
    clean(r)
    caps = [x["capacity"] for x in json.loads(r.stdout)["stats"]["per_layer"]]
    expert = 3 * 2048 * 1408 * 2
    assert sum(caps) == (10 << 30) // expert == 620 and set(caps) == {23, 24}


# ------------------------------------------------------------------ the device-memory check
def test_a_per_layer_size_is_per_layer_and_the_pool_must_fit_the_device(tmp_path):
    (tmp_path / "p.moe").write_text("policy p {\n    cache { capacity = 10GiB  eviction = lru }\n"
                                    "    per_layer { allocation = uniform }\n}\n")
    r = mplc("check", "p.moe", *DS, "--device-memory", "16GiB", cwd=tmp_path)
    clean(r)
    lines = [line for line in r.stdout.splitlines() if "warning[" in line]
    mpl504 = next(line for line in lines if "MPL504" in line)
    assert "10 GiB per layer = 620 slots per layer" in mpl504
    assert "the slot pool of 1,664 experts (every expert of the model) x 16.5 MiB = 26.8 GiB" in mpl504
    assert "after the skeleton (2.44 GiB) and the KV-cache reserve (1.6 GiB)" in mpl504
    assert "0.0 GB" not in r.stdout
    m = re.search(r"set total_budget = (\d+) \(", mpl504)
    assert m, mpl504
    # the suggestion fits: written as it says, no MPL504 remains
    (tmp_path / "q.moe").write_text(f"policy q {{\n    cache {{ eviction = lru }}\n"
                                    f"    per_layer {{ total_budget = {m.group(1)} }}\n}}\n")
    r = mplc("check", "q.moe", *DS, "--device-memory", "16GiB", cwd=tmp_path)
    assert r.returncode == 0 and "MPL504" not in r.stdout, r.stdout
    size = re.search(r"total_budget = (\d+(\.\d+)?GiB)", mpl504).group(1)
    (tmp_path / "q.moe").write_text(f"policy q {{\n    cache {{ eviction = lru }}\n"
                                    f"    per_layer {{ total_budget = {size} }}\n}}\n")
    r = mplc("check", "q.moe", *DS, "--device-memory", "16GiB", cwd=tmp_path)
    assert r.returncode == 0 and "MPL504" not in r.stdout, r.stdout


def test_the_kv_reserve_is_stated_and_can_be_given(tmp_path):
    (tmp_path / "c.moe").write_text("policy c {\n    cache { capacity = 700 }\n}\n")
    r = mplc("check", "c.moe", *DS, "--device-memory", "16GiB", cwd=tmp_path)
    assert "MPL504" not in r.stdout                      # 700 x 16.5 MiB fit in what is left
    r = mplc("check", "c.moe", *DS, "--device-memory", "16GiB", "--kv-reserve", "4GiB", cwd=tmp_path)
    assert "warning[MPL504]" in r.stdout and "the KV-cache reserve (4 GiB)" in r.stdout
    r = mplc("check", "c.moe", "--kv-reserve", "4GiB", cwd=tmp_path)
    assert r.returncode == 2 and "mplc check: error: --kv-reserve needs --device-memory" in r.stderr


# ------------------------------------------------------------------ the guide's lessons
def test_a_shared_cache_below_one_step_is_a_warning(tmp_path):
    (tmp_path / "s.moe").write_text("policy s {\n    cache { capacity = 64  eviction = lfu }\n}\n")
    r = mplc("check", "s.moe", *DS, cwd=tmp_path)
    assert r.returncode == 0
    assert ("warning[MPL508]: a shared cache of capacity 64 is below one step's accesses of "
            "deepseek-v2-lite (26 MoE layers x top-6 = 156)") in r.stdout
    (tmp_path / "s.moe").write_text("policy s {\n    cache { capacity = 64  eviction = farthest_layer }\n}\n")
    assert "MPL508" not in mplc("check", "s.moe", *DS, cwd=tmp_path).stdout
    (tmp_path / "s.moe").write_text("policy s {\n    cache { capacity = 160  eviction = lfu }\n}\n")
    assert "MPL508" not in mplc("check", "s.moe", *DS, cwd=tmp_path).stdout


def test_the_seeds_example_would_hit_only_by_prefetching(tmp_path):
    r = mplc("check", "std/balanced_adaptive", *DS, cwd=tmp_path)
    assert "warning[MPL509]" in r.stdout and "every hit would be a prefetch" in r.stdout


# ------------------------------------------------------------------ the tuner's budget
def test_the_tuner_uses_the_whole_budget(ds):
    r = mplc("tune", "-t", "ds.mpltrace", "-b", "10GiB", "--search", "grid", "--jobs", "1",
             "--json", "--no-progress", cwd=ds)
    clean(r)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["budget_slots"] == 620 and d["holds_every_expert"] is False and d["note"] is None
    per_layer = re.search(r"total_budget = (\d+)", d["policy_text"])
    capacity = re.search(r"capacity = (\d+)", d["policy_text"])
    assert (per_layer and int(per_layer.group(1)) == 620) or (capacity and int(capacity.group(1)) == 620)
    for row in d["leaderboard"]:
        if row["description"].startswith("per_layer"):
            assert "23-24/layer (620 slots)" in row["description"]


def test_the_tuner_says_when_the_budget_holds_every_expert(ds):
    r = mplc("tune", "-t", "ds.mpltrace", "-b", "100GiB", "--search", "grid", "--jobs", "1",
             "--no-progress", cwd=ds)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert ("note: the budget (6,206 slots) holds all 1,664 experts of the trace's model: nothing "
            "needs offloading") in r.stdout
    assert "budget 1664 slots" in r.stdout
