"""The autotuner: budgets, candidates that check clean, per-layer winners, the written file."""

import pytest

from mpl import tune as T
from mpl.checker import analyze
from mpl.sim import synthesize


def test_budget_slots():
    assert T.budget_slots("864", 10) == 864
    assert T.budget_slots(16, 10) == 16
    assert T.budget_slots("1GiB", 2 ** 20) == 1024
    assert T.budget_slots("1 GB", 10 ** 6) == 1000
    for bad in ("lots", "0", "1MB"):
        with pytest.raises(ValueError):
            T.budget_slots(bad, 17_000_000)


@pytest.mark.parametrize("budget,layers", [(64, 16), (8, 26), (864, 26), (3, 4)])
def test_every_candidate_checks_clean(budget, layers):
    s1 = T._stage1(budget, layers, 4)
    assert any("per_layer" in b for b in s1) == (budget // layers >= 1)
    s2 = T._stage2(s1, predictions=True)
    s3 = T._stage3(s1)
    for blocks in s1 + s2 + s3:
        text = T.render("c", blocks)
        an = analyze(text)
        assert not an.errors, (text, [d.message for d in an.errors])
    # every live eviction rule and every prefetch strategy is searched
    evs = {b["cache"]["eviction"] for b in s1}
    assert {"lru", "lfu", "arc", "s3fifo", "lfru", "score"} <= evs and "belady" not in evs
    assert {b["prefetch"]["strategy"] for b in s2} == {"history", "affinity", "lookahead"}


def test_lookahead_only_with_predictions():
    s1 = T._stage1(64, 16, 8)[:2]
    assert all(b["prefetch"]["strategy"] != "lookahead" for b in T._stage2(s1, predictions=False))


def test_tune_in_process_prefers_per_layer_on_a_many_layer_trace():
    tr = synthesize("olmoe-1b-7b", steps=25, seed=4)
    res = T.tune(tr, 128, jobs=1, objective="hit_rate")
    assert res.evaluated == len(res.leaderboard) > 30
    scores = [c.score("hit_rate") for c in res.leaderboard]
    assert scores == sorted(scores, reverse=True)
    assert "per_layer" in res.best.blocks
    text = T.winner_text(res, "test trace", "mplc tune --trace x --budget 128")
    assert text.startswith("# Tuned by mplc tune") and "per_layer" in text
    assert not analyze(text).errors


def test_bad_objective_and_hardware():
    tr = synthesize("mixtral-8x7b", steps=3, seed=0)
    with pytest.raises(ValueError, match="objective"):
        T.tune(tr, 16, objective="speed", jobs=1)
    from mpl.timemodel.hardware import HardwareError
    with pytest.raises(HardwareError):
        T.tune(tr, 16, hardware="abacus", jobs=1)
