"""The tuner's search (successive halving on prefixes, mpl.tune_search): what it covers
(every live eviction rule, pins, every prefetch strategy, every schedule mode), the reference
rows (plain LRU and the engines' rules on the whole trace), the floor (never slower than
LRU at the same budget), and every row's Belady optimum and gap."""

from __future__ import annotations

import re

import json
import random

import pytest

from mpl import schema, tune as T, tune_search as S
from mpl.checker import analyze
from mpl.sim import synthesize
from mpl.trace import Dispatch, Trace, TraceHeader

from cli_helpers import clean, mplc


@pytest.fixture(scope="module")
def mx():
    return synthesize("mixtral-8x7b", steps=80, seed=2)


@pytest.fixture(scope="module")
def res(mx):
    return T.tune(mx, 128, jobs=1)


def test_rung_sizes():
    assert S.rung_sizes(500) == [None]
    assert S.rung_sizes(3000) == [1000, None]
    assert S.rung_sizes(64000) == [4000, 8000, None]
    # each round is a window of at least MIN_PREFIX after the warm-up
    assert S.rung_sizes(64000, warm=5000) == [6000, 8000, None]
    assert S.rung_sizes(6500, warm=5000) == [6000, None]


def test_warm_point_is_where_the_budget_and_every_layer_fill():
    tr = _hot_zero(steps=40, L=8, E=32)
    w = S.warm_point(tr, 32)
    # 32 distinct keys and 4 per layer: step boundaries only
    assert w % 8 == 0 and 0 < w < len(tr)
    seen = {(d.layer, e) for d in tr.dispatches[:w] for e in d.experts[0]}
    assert len(seen) >= 32 and all(sum(1 for k in seen if k[0] == l) >= 4 for l in range(8))
    before = {(d.layer, e) for d in tr.dispatches[:w - 8] for e in d.experts[0]}
    assert len(before) < 32 or any(sum(1 for k in before if k[0] == l) < 4 for l in range(8))
    assert S.warm_point(tr, 10_000) == 0           # never fills


def test_tuned_values_come_from_the_schema_and_lie_in_its_ranges():
    tuned = {p.key: p for b in schema.BLOCK_ORDER if schema.block(b)
             for p in schema.block(b).params if p.tune}
    assert {"cache.freq_threshold", "cache.crf_half_life", "cache.frequency_decay"} <= set(tuned)
    for p in tuned.values():
        for v in p.tune:
            assert p.min is None or (v > p.min if p.min_open else v >= p.min), (p.key, v)
            assert p.max is None or (v < p.max if p.max_open else v <= p.max), (p.key, v)
    for rule in ("crf", "classlru", "frequency_threshold", "lfu"):
        params = S.rule_params(rule)
        assert params and all(rule in p.only_with[1] for p in params)


def test_candidates_cover_every_rule_strategy_and_mode_and_check_clean():
    structures = T._structures(128, 32, 2)
    s1 = S.structure_rules(structures)
    live = {e.name for e in schema.param("cache.eviction").enum if not e.replay_only}
    assert {b["cache"]["eviction"] for b in s1} == live
    for p in (schema.param("cache.crf_half_life"), schema.param("cache.freq_threshold"),
              schema.param("cache.frequency_decay")):
        assert {b["cache"].get(p.name) for b in s1} >= {None, *p.tune}
    assert {"shared", "uniform", "entropy", "frequency"} == {
        b["per_layer"]["allocation"] if "per_layer" in b else "shared" for b in s1}
    s2 = S.prefetch_variants(s1[:2], predictions=True)
    strategies = set(schema.param("prefetch.strategy").enum_names()) - {"none"}
    assert {b["prefetch"]["strategy"] for b in s2} == strategies
    assert "lookahead" not in {b["prefetch"]["strategy"] for b in S.prefetch_variants(s1[:2], False)}
    s3 = S.schedule_variants(s1[:1])
    assert {b["schedule"]["mode"] for b in s3} == set(schema.param("schedule.mode").enum_names()) - {"gpu_only"}
    every = S.every_mode(s1[:1])
    assert {S.mode_of(b) for b in every} == set(schema.param("schedule.mode").enum_names())
    for blocks in s1 + s2 + s3:
        an = analyze(T.render("c", blocks))
        assert not an.errors, (blocks, [d.message for d in an.errors])


def test_reference_rows_are_replayed_on_the_whole_trace(res):
    roles = {(c.role, c.describe()) for c in res.leaderboard if c.role}
    lru = [d for r, d in roles if r == "lru"]
    # plain LRU, shared and per-layer, on the default schedule and at its best one
    plain = [d for d in lru if "schedule=" not in d]
    assert len(plain) == 2 and any(d.startswith("shared") for d in plain)
    assert 2 <= len(lru) <= 4
    anchors = {d for r, d in roles if r == "anchor"}
    for rule in ("crf", "classlru", "vllm_lfru"):
        assert any(d.startswith("per_layer(uniform)") and f"eviction={rule}" in d for d in anchors)
    assert any(d.startswith("shared") and "eviction=farthest_layer" in d for d in anchors)
    assert all(c.fraction == 1.0 for c in res.leaderboard if c.role)


def test_the_winner_beats_every_reference_and_lru(res):
    refs = [c for c in res.leaderboard if c.role and not c.error]
    assert refs and res.lru is not None
    assert res.best.fraction == 1.0
    for c in refs:
        assert res.best.tokens_per_s >= c.tokens_per_s
    assert res.best.tokens_per_s >= res.lru.tokens_per_s


def test_every_row_has_its_structures_optimum(res, mx):
    from mpl.api import load_for_replay

    rows = [c for c in res.leaderboard if not c.error]
    assert all(c.belady is not None and c.gap == pytest.approx(c.belady - c.demand_hit_rate)
               for c in rows)
    # the demand hit rate never beats the structure's optimum, prefetching or not
    assert all(c.of_belady is None or c.of_belady <= 1.0 + 1e-12 for c in rows)
    assert any("prefetch" in c.blocks for c in rows)
    # the winner's optimum is the one of its structure on the whole trace
    pol = load_for_replay(res.best.text, name=res.best.name)
    assert res.belady == T.belady_of(T.structure_of(pol, mx), mx)
    # a prefix row's optimum is that of the prefix
    short = next(c for c in rows if c.fraction < 1.0)
    part = T.prefix(mx, short.dispatches)
    pol = load_for_replay(short.text, name=short.name)
    assert short.belady == T.belady_of(T.structure_of(pol, part), part)
    assert len(part) == short.dispatches and part.dispatches[-1].step != mx.dispatches[len(part)].step


def test_halving_replays_most_candidates_on_prefixes(res):
    assert res.search == "halving"
    assert res.evaluated > 54            # more candidates than the grid
    # most of them on a prefix: fewer whole-trace replays than candidates
    assert res.replayed < res.evaluated
    assert any(c.fraction < 1.0 for c in res.leaderboard)


def test_hit_rate_objective_never_recommends_slower_than_lru(mx):
    r = T.tune(mx, 64, jobs=1, objective="hit_rate")
    assert r.best.tokens_per_s >= r.lru.tokens_per_s
    if r.set_aside is not None:
        assert r.set_aside.hit_rate >= r.best.hit_rate
        assert r.set_aside.tokens_per_s < r.lru.tokens_per_s


def _hot_zero(steps=120, L=8, E=32, seed=0):
    """Expert 0 is one of the two experts of every layer at every step; the other is random:
    a shared cache smaller than one step keeps the zeros only if they are pinned (or a rule
    protects them)."""
    r = random.Random(seed)
    h = TraceHeader(model="t", num_layers=L, moe_layers=tuple(range(L)), num_experts=E, top_k=2)
    out = [Dispatch(s, l, [[0, r.randrange(1, E)]]) for s in range(steps) for l in range(L)]
    return Trace(h, out)


def test_pins_are_the_most_used_ids_and_pinned_twins_are_searched():
    tr = _hot_zero()
    assert S.pin_ids(tr, 1) == [0]
    assert S.pins_for({"cache": {"capacity": 12, "eviction": "lru"}}, 8) == 0
    assert S.pins_for({"cache": {"capacity": 32, "eviction": "lru"}}, 8) == 1
    assert S.pins_for({"cache": {"capacity": 4}, "per_layer": {}}, 8) == 1
    r = T.tune(tr, 32, jobs=1)
    # the best survivors' pinned twins: a shared cache pins id 0 in every layer, a per-layer
    # cache each layer's own hottest expert (here 0 in every layer)
    pinned = [c for c in r.leaderboard
              if c.blocks["cache"].get("pin") or c.blocks["cache"].get(S.LAYER_PINS)]
    assert len(pinned) >= 3
    for c in pinned:
        assert not analyze(c.text).errors
        if c.blocks["cache"].get("pin"):
            assert c.blocks["cache"]["pin"] == (0,) and "pin = [0]" in c.text
        else:
            assert c.blocks["cache"][S.LAYER_PINS] == tuple((layer, (0,)) for layer in range(8))
            assert "pin layers = 0..7 {" in c.text
    # what a static placement is worth where the rule alone fails: a shared LRU cache
    # smaller than one step evicts the hot expert every step; pinned, every zero hits
    from mpl.api import load_for_replay
    from mpl.sim.replay import replay

    lru = replay(load_for_replay(T.render("a", {"cache": {"capacity": 12, "eviction": "lru"}})),
                 tr, belady=False)
    pin = replay(load_for_replay(T.render("b", {"cache": {"capacity": 12, "eviction": "lru",
                                                          "pin": (0,)}})), tr, belady=False)
    assert lru.hit_rate < 0.05 and pin.hit_rate > 0.45


def test_cli_json_keeps_its_keys_and_adds_the_search(tmp_path, mx):
    from mpl import traceio

    traceio.save(mx, str(tmp_path / "mx.mpltrace"))
    r = mplc("tune", "--trace", "mx.mpltrace", "--budget", "128", "-j", "1", "--json", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("objective", "budget_slots", "evaluated", "best", "belady", "expert_bytes",
                "expert_bytes_source", "leaderboard", "policy_text"):
        assert key in d
    assert d["search"] == "halving" and d["lru"]["role"] == "lru"
    assert {p["strategy"] for p in d["predictors"]} == {"history", "affinity", "learned"}
    row = d["leaderboard"][0]
    assert {"hit_rate", "tokens_per_s", "belady", "gap", "fraction", "description"} <= set(row)
    r = mplc("tune", "--trace", "mx.mpltrace", "--budget", "128", "-j", "1", "--search", "grid",
             "--top", "3", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    # the grid's 54 candidates and the reference rows in every schedule mode
    grid = re.search(r"(\d+) candidates, grid search", r.stdout)
    assert grid and int(grid.group(1)) > 54 and "Belady" in r.stdout
    assert "the winner is at least as fast and hits at least as often (demand hit rate)" in r.stdout
    r = mplc("tune", "--trace", "mx.mpltrace", "--budget", "128", "--search", "random", cwd=tmp_path)
    assert r.returncode == 2


def _hot_per_layer(steps=120, L=8, E=32, seed=0):
    """In layer l expert l is one of the two experts at every step; the other is random: one
    hot expert per layer, a different one in each, which ids pinned in every layer cannot
    place (a per-layer cache of 4 pinning the 4 most used ids overall holds at most one layer's
    hot expert)."""
    r = random.Random(seed)
    h = TraceHeader(model="t", num_layers=L, moe_layers=tuple(range(L)), num_experts=E, top_k=2)
    out = []
    for s in range(steps):
        for layer in range(L):
            other = r.randrange(E - 1)
            out.append(Dispatch(s, layer, [[layer, other + (other >= layer)]]))
    return Trace(h, out)


def test_per_layer_caches_are_searched_with_each_layers_own_hot_experts():
    tr = _hot_per_layer()
    assert S.layer_placement(tr, 1) == tuple((layer, (layer,)) for layer in range(8))
    r = T.tune(tr, 32, jobs=1, objective="hit_rate")
    placed = [c for c in r.leaderboard if c.blocks["cache"].get(S.LAYER_PINS)]
    assert placed and all("per_layer" in c.blocks for c in placed)
    for c in placed:
        assert not analyze(c.text).errors and "pin layers = " in c.text
        assert "pins/layer=1" in c.describe()
    # what it is worth: every hot access hits; the winner is one of them
    best = max(placed, key=lambda c: c.hit_rate)
    assert best.hit_rate > 0.45
    assert r.best.hit_rate >= best.hit_rate
