"""Every policy of the seed document (tests/corpus/) and of the standard library checks clean
and means what the seed says."""

import glob
import os

import pytest

from mpl import ir
from mpl.checker import analyze, check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.moe")))
STDLIB = sorted(glob.glob(os.path.join(ROOT, "stdlib", "*.moe")))

# files that deliberately carry a non-error diagnostic: file -> expected codes
EXPECTED = {
    "full_syntax.moe": ["MPL404"],     # uses the original's adapt name lfu_decay on purpose
    # the original's low-precision tiers: the hint SPEC section 12 asks for, on each of them
    "tiers.moe": ["MPL420"] * 3,
    # the standard library's low-precision warm tier: the same hint, the trade it is about
    "int4_warm.moe": ["MPL420"],
}


def _load(name):
    path = os.path.join(ROOT, "tests", "corpus", name)
    with open(path, encoding="utf-8") as f:
        return analyze(f.read(), path)


def test_corpus_exists():
    names = {os.path.basename(p) for p in CORPUS}
    assert {"balanced.moe", "aggressive.moe", "demo.moe", "epcb_per_layer.moe"} <= names


@pytest.mark.parametrize("path", CORPUS + STDLIB, ids=os.path.basename)
def test_checks_clean(path):
    diags = check(path)
    expected = EXPECTED.get(os.path.basename(path), [])
    assert [d.code for d in diags] == expected, [(d.code, d.span.line, d.message) for d in diags]
    with open(path, encoding="utf-8") as f:
        a = analyze(f.read(), path)
    assert a.ir and set(a.ir) == set(a.policies)


def test_balanced_means_what_the_seed_says():
    p = _load("balanced.moe").ir["balanced"]
    assert p["cache.capacity"] == 16 and p["cache.eviction"] == "lfu"
    assert p["cache.frequency_decay"] == 0.9
    assert p["prefetch.strategy"] == "history" and p["prefetch.budget"] == 4
    assert p["schedule.mode"] == "hybrid"
    [rule] = p.adapt
    assert rule.condition == ir.Condition("hit_rate", "<", 0.4)
    assert rule.duration == ir.Count(100, "accesses")
    assert rule.actions == (ir.SetAction("cache.eviction", "lru"),)
    assert not p.per_layer


def test_aggressive_and_demo():
    a = _load("aggressive.moe").ir["aggressive"]
    assert (a["cache.capacity"], a["cache.eviction"], a["prefetch.strategy"]) == (8, "lru", "none")
    d = _load("demo.moe").ir["demo"]
    assert d["prefetch.strategy"] == "lookahead" and d["prefetch.lookahead"] == 1
    assert d["schedule.mode"] == "gpu_only" and d["cache.capacity"] == 8


def test_epcb_per_layer():
    p = _load("epcb_per_layer.moe").ir["epcb_per_layer"]
    assert p.per_layer
    assert p["per_layer.total_budget"] == 864 and p["per_layer.allocation"] == "uniform"
    assert (p["per_layer.min_capacity"], p["per_layer.max_capacity"]) == (4, 48)
    assert p["per_layer.rebalance_interval"] == 500


def test_full_syntax_values():
    a = _load("full_syntax.moe")
    base, tuned = a.ir["base"], a.ir["tuned"]
    assert base["cache.capacity"] == ir.Size(12 * 2 ** 30)
    assert base["cache.eviction"] == "lfu|lru"
    assert base["cache.ttl"] == ir.Count(4096, "steps")
    assert base["schedule.offload_threshold_ms"] == 25.0
    assert base["monitor.metrics"] == ("hit_rate", "miss_rate", "prefetch_accuracy", "stall_ms")
    # lfu_decay is the alias of cache.frequency_decay
    assert ir.SetAction("cache.frequency_decay", 0.99) in base.adapt[1].actions
    # the child copies the parent and applies its own
    assert tuned.parent == "base" and tuned["cache.eviction"] == "lfu"
    assert tuned["prefetch.strategy"] == "affinity" and tuned["schedule.mode"] == "cpu_fallback"
    assert tuned["cache.capacity"] == 24
    cond = [r for r in tuned.adapt if r.origin == "conditional"]
    assert [r.actions for r in cond] == [(ir.SetAction("cache.capacity", 32),),
                                         (ir.SetAction("cache.capacity", 24),)]
    assert len(tuned.adapt) == len(base.adapt) + 2
