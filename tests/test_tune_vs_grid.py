"""The default search (successive halving) never recommends a policy worse by the objective
than the grid search at the same budget, and both recommend one at least as fast and with
at least the demand hit rate of every engine rule at its best schedule: on every synthetic
preset, at a quarter, a half and three quarters of the model's experts. Short traces keep it
fast; every preset, not one."""

from __future__ import annotations

import pytest

from mpl import shapes, tune as T
from mpl.sim import synthesize


@pytest.fixture(scope="module")
def traces():
    return {p: synthesize(p, steps=16, seed=1) for p in shapes.PRESETS}


@pytest.mark.parametrize("share", (25, 50, 75))
@pytest.mark.parametrize("preset", sorted(shapes.PRESETS))
def test_halving_is_never_worse_than_the_grid(traces, preset, share):
    tr = traces[preset]
    h = tr.header
    slots = max(1, round(share / 100 * h.num_moe_layers * h.num_experts))
    grid = T.tune(tr, slots, jobs=1, search="grid")
    halving = T.tune(tr, slots, jobs=1)
    assert halving.best.fraction == 1.0
    assert halving.best.score("tokens_per_s")[0] >= grid.best.score("tokens_per_s")[0], (
        halving.best.describe(), grid.best.describe())
    # both searches replay the reference rules and choose alike: a winner at least as fast,
    # with at least the demand hit rate, as every engine rule at its best schedule
    for res in (halving, grid):
        refs = T.reference_rows(res)
        assert {c.blocks["cache"]["eviction"] for c in refs} >= {"lru", "crf", "classlru",
                                                                 "farthest_layer"}
        b = res.best
        assert res.dominates is True, (res.search, b.describe())
        assert b.tokens_per_s >= max(c.tokens_per_s for c in refs)
        assert b.demand_hit_rate >= max(c.demand_hit_rate for c in refs)


def test_of_belady_never_exceeds_one_for_a_prefetching_policy():
    """"% of Belady" is on the demand hit rate: a prefetch's first use is not a demand hit."""
    from mpl.api import load_for_replay
    from mpl.sim.replay import replay

    tr = synthesize("mixtral-8x7b", steps=40, seed=3, pred_accuracy=1.0)
    c = T.Candidate("p", {"cache": {"capacity": 2, "eviction": "lru"},
                          "per_layer": {"total_budget": 64, "min_capacity": 1},
                          "prefetch": {"strategy": "lookahead", "budget": 2}})
    r = replay(load_for_replay(T.render("p", c.blocks)), tr, belady=True)
    (c.hit_rate, c.tokens_per_s, c.belady) = (r.stats["hit_rate"], r.tokens_per_s,
                                              r.belady_hit_rate)
    c.counts = T._counts(r)
    assert r.stats["prefetch_useful"] > 0
    assert c.demand_hit_rate <= c.hit_rate
    assert c.of_belady is not None and c.of_belady <= 1.0
    assert c.gap >= 0
