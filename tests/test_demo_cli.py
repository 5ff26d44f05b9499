"""The user's entry points as subprocesses: ``mplc demo``, ``mplc run``, ``mplc trace record``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def mplc(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout)


def test_demo_passes_every_check():
    r = mplc("demo", "--json", "--max-new-tokens", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] is True
    assert all(rep["checks"].values())
    assert rep["policy"] == "frequency_filter"                       # the default
    assert "replay decisions == live decisions (hits + late prefetches)" in rep["checks"]
    v = rep["comparison"]
    assert v["loads"]["hits"] + v["loads"]["late_prefetches"] == rep["live"]["hits"]
    assert rep["mechanism"]["copies"] == rep["live"]["loads"] > 0
    assert rep["slots"] < rep["moe_layers"] * rep["experts"]      # it really offloads
    assert len(rep["generated_tokens"]) == 8
    # the value beside the proof: LRU with the same slots and Belady on the same routing
    assert v["policy"]["hit_rate"] == rep["replay_hit_rate"] and v["slots"] == rep["slots"]
    assert 0 <= v["lru"]["hit_rate"] <= v["belady"] <= 1 and v["lru"]["tokens_per_s"] > 0
    loads = v["loads"]
    assert loads["loads"] == loads["demand_loads"] + loads["background_loads"] + loads["prefetch_loads"]


def test_demo_text_shows_lru_belady_and_where_loads_come_from():
    r = mplc("demo", "std/balanced", "--max-new-tokens", "6", "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "value on the recorded routing (4 slots; simulated on rtx-4090):" in out
    assert re.search(r"^    policy balanced +hit rate +\d+\.\d\d% +\d+\.\d tok/s$", out, re.M)
    assert re.search(r"^    plain LRU +hit rate +\d+\.\d\d% +\d+\.\d tok/s$", out, re.M)
    assert re.search(r"^    Belady \(the optimum\) +hit rate +\d+\.\d\d%", out, re.M)
    m = re.search(r"^  (\d+) loads = (\d+) misses loaded on demand \+ (\d+) prefetched ahead of use "
                  r"\((\d+) of them used before eviction\)", out, re.M)
    assert m and int(m[1]) == int(m[2]) + int(m[3])
    live = re.search(r"live: +(\d+) accesses, hit rate [\d.]+, (\d+) loads", out)
    if int(live[2]) > int(live[1]):
        assert "more loads than accesses: every prefetch is a load" in out


TIERED_EXACT = """policy exact_tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 8 }
    }
}
"""

TIERED_INT4 = """policy int4_tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 4 }
        tier warm { location = gpu  dtype = int4  capacity = 8 }
        on demote(hot -> warm) { mechanism = in_place_requant }
    }
}
"""


def test_demo_runs_memory_tiers_beside_lru_of_the_top_tiers_slots(tmp_path):
    """A policy with memory tiers gets plain LRU with its top tiers' slots beside it; at full
    precision every bit-identity check applies, and where accesses were computed from int4
    copies the demo counts them and checks no identity (the output is approximate by design)."""
    exact, approx = tmp_path / "exact.moe", tmp_path / "int4.moe"
    exact.write_text(TIERED_EXACT)
    approx.write_text(TIERED_INT4)
    r = mplc("demo", str(exact), "--json", "--max-new-tokens", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["checks"]["tokens identical"] and rep["checks"]["logits identical"]
    v = rep["comparison"]
    assert v["tiered"] and v["slots"] == 8 and 0 <= v["lru"]["hit_rate"] <= v["belady"] <= 1
    assert rep["approximate_computes"] == 0

    r = mplc("demo", str(approx), "--json", "--max-new-tokens", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and "tokens identical" not in rep["checks"]
    assert rep["approximate_computes"] > 0
    assert rep["approximate_by_dtype"] == {"int4": rep["approximate_computes"]}
    assert rep["comparison"]["slots"] == 4
    r = mplc("demo", str(approx), "--max-new-tokens", "8", "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"approximate by design: \d+ of \d+ accesses computed from lower-precision "
                     r"copies \(\d+ from int4 copies\)", r.stdout)
    r = mplc("demo", "std/int4_warm", "--max-new-tokens", "4", "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr

def test_run_prints_text_and_stats_and_json(tmp_path):
    pol = tmp_path / "p.moe"
    pol.write_text("version 1\npolicy p {\n  cache { capacity = 6 }\n  schedule { mode = cpu_fallback }\n}\n")
    r = mplc("run", str(pol), "--model", "tiny-deepseek-v3", "--max-new-tokens", "4",
             "--experts-implementation", "eager", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert len(rep["tokens"]) == 4 and isinstance(rep["text"], str)
    assert rep["stats"]["mechanism"]["cpu_computes"] == rep["stats"]["cpu_computes"] > 0
    assert rep["stats"]["mechanism"]["modes"] == {"eager": 4 * 2}
    r = mplc("run", "std/lru_basic", "--model", "tiny-qwen2-moe", "--max-new-tokens", "3")
    assert r.returncode == 0, r.stderr
    assert "hit rate" in r.stdout and "copies into slots" in r.stdout


@pytest.mark.parametrize("args, needle", [
    (["run", "nope.moe", "--model", "tiny-olmoe"], "no such policy file"),
    (["run", "std/lru_basic", "--model", "tiny-nothing"], "unknown model 'tiny-nothing'"),
    (["run", "BAD", "--model", "tiny-olmoe"], "capcity"),
])
def test_bad_input_is_a_clear_error(tmp_path, args, needle):
    if args[1] == "BAD":
        bad = tmp_path / "bad.moe"
        bad.write_text("version 1\npolicy p {\n  cache { capcity = 4 }\n}\n")
        args = [args[0], str(bad), *args[2:]]
    r = mplc(*args)
    assert r.returncode == 1, r.stdout + r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_trace_record_writes_a_loadable_trace(tmp_path):
    out = tmp_path / "t.mpltrace"
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--prompt", "hello", "--max-new-tokens", "3",
             "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["steps"] == 3 and summary["dispatches"] == 9
    from mpl import traceio
    t = traceio.load(str(out))
    assert t.num_steps == 3 and t.header.num_moe_layers == 3 and t.header.top_k == 2
    assert t.dispatches[0].tokens == len(b"hello")
    assert t.dispatches[0].predictions
