"""benchmarks/bench_policies.py on a tiny trace: one row per anchor rule and per stdlib
policy, each with its structure's optimum, the tuned row matching or beating every anchor,
and the tables docs/choosing-a-policy.md is made of."""

from __future__ import annotations

import importlib.util
import os

from mpl.stdlib_path import stdlib_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_policies", os.path.join(ROOT, "benchmarks", "bench_policies.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_budget_of_one_preset():
    b = _bench()
    spec = ("synth", "mixtral-8x7b", 40, 0, {})
    res = b.measure((spec, "mixtral", 50, None, True, 1))
    assert res["slots"] == 128
    names = [r["policy"] for r in res["rows"]]
    # each engine's rule at its best schedule: "NAME [MODE]"
    anchors = names[:len(b.ANCHORS)]
    assert [a[0] for a in b.ANCHORS] == [n.rsplit(" [", 1)[0] for n in anchors]
    assert all(n.endswith("]") and n.rsplit(" [", 1)[1][:-1] in
               ("gpu_only", "cpu_fallback", "hybrid") for n in anchors)
    assert {f"std/{n}" for n in stdlib_names()} <= set(names)
    for r in res["rows"]:
        assert "error" not in r, r
        assert 0.0 <= r["hit_rate"] <= 1.0 and r["tokens_per_s"] > 0
        if r["kind"] == "anchor":        # demand-only: never above the optimum
            assert r["hit_rate"] <= r["belady"] + 1e-12
            assert r["of_belady"] == r["hit_rate"] / r["belady"]
    (s,) = b.summary([res])
    assert s["tuned"] is not None and s["tuned_beats_anchors"] is True
    out = {"summary": [s], "predictors": [b.predictors(spec, "mixtral")], "ceiling": None}
    md = b.markdown(out)
    assert md.count("\n| mixtral |") == 2 and "llama.cpp crf per-layer" in md
