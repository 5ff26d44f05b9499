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
    # the grid: the eight rules and three prefetch strategies it always had
    evs = {b["cache"]["eviction"] for b in s1}
    assert evs == set(T.GRID_EVICTIONS) and "belady" not in evs
    assert {b["prefetch"]["strategy"] for b in s2} == {"history", "affinity", "lookahead"}


def test_lookahead_only_with_predictions():
    s1 = T._stage1(64, 16, 8)[:2]
    assert all(b["prefetch"]["strategy"] != "lookahead" for b in T._stage2(s1, predictions=False))


@pytest.mark.parametrize("search", ["halving", "grid"])
def test_tune_in_process_prefers_per_layer_on_a_many_layer_trace(search):
    # 96 slots: less than one step's accesses (16 layers x top-8) in a shared cache, and
    # 6 per layer (below top-8: 128 would make every rule keep exactly the last dispatch)
    tr = synthesize("olmoe-1b-7b", steps=25, seed=4)
    res = T.tune(tr, 96, jobs=1, objective="hit_rate", search=search)
    assert res.evaluated == len(res.leaderboard) > 30
    assert res.search == search
    # the rows replayed on the whole trace first, best first; then the rest by trace share
    whole = [c for c in res.leaderboard if c.fraction >= 1.0]
    assert res.leaderboard[:len(whole)] == whole
    scores = [c.score("hit_rate") for c in whole]
    assert scores == sorted(scores, reverse=True)
    shares = [c.fraction for c in res.leaderboard]
    assert shares == sorted(shares, reverse=True)
    assert "per_layer" in res.best.blocks
    text = T.winner_text(res, "test trace", "mplc tune --trace x --budget 96")
    assert text.startswith("# Tuned by mplc tune") and "per_layer" in text
    assert not analyze(text).errors


def test_bad_objective_and_hardware():
    tr = synthesize("mixtral-8x7b", steps=3, seed=0)
    with pytest.raises(ValueError, match="objective"):
        T.tune(tr, 16, objective="speed", jobs=1)
    from mpl.timemodel.hardware import HardwareError
    with pytest.raises(HardwareError):
        T.tune(tr, 16, hardware="abacus", jobs=1)
