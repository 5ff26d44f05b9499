"""The memory-tier search's parts (mpl/tune_tiers.py), below the CLI:

* the per-layer LRU hit curves equal an independent per-layer LRU simulation at every
  capacity, the slots go to the layers whose working set is larger, and the bands split where
  the layers' shares change;
* the device's memory is accounted as attach allocates it (mpl.mechanism.footprint): the
  skeleton, the KV reserve, the transient entries, each low-precision tier's records;
* every candidate of every family, in the host and the disk case and on a model whose first
  layer is dense, checks without errors or warnings on the model and its device, replays,
  fits the device, and puts every MoE layer in exactly one band;
* on a trace where half the layers use two experts and the other half cycle through eight,
  a shared device cache thrashes; the search finds the bands that keep the small working
  sets, and its written winner replays to its numbers.
"""

from __future__ import annotations

from collections import OrderedDict

import pytest

from mpl import shapes, tune as T, tune_tiers as TT
from mpl.api import load_for_replay
from mpl.checker import analyze
from mpl.mechanism.footprint import ALIGN, DEVICE
from mpl.sim import synth
from mpl.sim.replay import replay
from mpl.sim.tracemodel import with_model
from mpl.timemodel import hardware as hw
from mpl.trace import Dispatch, Trace, TraceHeader

GIB = 2 ** 30
#: 8 MoE layers x 16 experts, top-2, experts of 1.5 MiB (hidden 512, intermediate 512)
SMALL = shapes.ModelShape("small-moe", 8, tuple(range(8)), 16, 2, hidden_size=512,
                          intermediate_size=512)


def split_trace(steps: int = 60) -> Trace:
    """Layers 0..3 use experts 0 and 1 every step; layers 4..7 two of the other fourteen,
    scattered. A step touches 16 keys: a shared LRU cache of 12 loses the small working
    sets between their uses; a band of layers 0..3 with 8 slots keeps them."""
    import random

    rng = random.Random(7)
    d = []
    for s in range(steps):
        for layer in range(8):
            pair = [0, 1] if layer < 4 else rng.sample(range(2, 16), 2)
            d.append(Dispatch(s, layer, [pair]))
    h = TraceHeader("small-moe", 8, tuple(range(8)), 16, 2)
    return with_model(Trace(h, d), SMALL)


def small_plan(slots: int, host="1GiB"):
    """A plan on SMALL whose room holds ``slots`` full-precision entries (no skeleton known,
    a KV reserve of 1 MiB), and the device size (whole MiB)."""
    entry = SMALL.expert_bytes + ALIGN
    device = -(-(2 ** 20 + (SMALL.num_experts + 1 + slots) * entry) // 2 ** 20)
    return TT.plan(split_trace(2).header, f"{device}MiB", host, None, hw.resolve(None),
                   kv_reserve="1MiB"), f"{device}MiB"


def lru_hits(accesses, cap):
    c, hits = OrderedDict(), 0
    for k in accesses:
        if k in c:
            hits += 1
            c.move_to_end(k)
        else:
            c[k] = None
            if len(c) > cap:
                c.popitem(last=False)
    return hits


def test_layer_curves_are_each_layers_lru_hits_at_every_capacity():
    tr = synth.synthesize(SMALL, steps=80, seed=4, skew=1.0)
    curves = TT.layer_curves(tr)
    for layer in range(SMALL.num_moe_layers):
        acc = [e for x in tr.dispatches if x.layer == layer for e in x.distinct()]
        for cap in range(SMALL.num_experts + 1):
            assert curves[layer][cap] == lru_hits(acc, cap), (layer, cap)
    # a prefix: only its dispatches count
    short = TT.layer_curves(tr, limit=10)
    assert sum(c[-1] for c in short) < sum(c[-1] for c in curves)


def test_slots_go_to_the_layers_that_gain_and_bands_split_where_shares_change():
    curves = TT.layer_curves(split_trace())
    got = TT.allocate(curves, 12)
    assert sum(got) == 12 and got[:4] == [2, 2, 2, 2]     # the small working sets first
    ws = TT.working_sets(curves)
    assert ws[:4] == [2, 2, 2, 2] and min(ws[4:]) >= 10
    assert TT.bands(ws, 2) == [(0, 3), (4, 7)]
    # a layer whose hits come only after a flat stretch still gets its slots
    flat = [[0, 0, 0, 9, 9], [0, 1, 2, 2, 2]]
    assert TT.allocate(flat, 3) == [3, 0]
    # no gain anywhere: evenly, at most every expert of a layer
    assert TT.allocate([[0] * 5, [0] * 5], 6) == [3, 3]
    assert TT.allocate([[0] * 3, [0] * 3], 10) == [2, 2]
    assert TT.bands([4, 4, 4, 4], 4) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_the_device_holds_the_skeleton_reserve_and_transient_entries():
    h = with_model(synth.synthesize("mixtral-8x7b", steps=2, seed=1), None).header
    p = TT.plan(h, "24GiB", "128GiB", None, hw.resolve(None))
    mx = shapes.preset("mixtral-8x7b")
    entry = mx.expert_bytes + ALIGN
    assert p.skeleton_bytes == mx.skeleton_bytes and p.kv_reserve == shapes.default_kv_reserve(24 * GIB)
    assert p.room == 24 * GIB - mx.skeleton_bytes - p.kv_reserve - 9 * entry
    assert p.device_slots == p.room // entry
    # the footprint of a candidate: its pool and records, the parts attach allocates
    fp = p.footprint(10, [("warm", "int4", 20)])
    parts = {x.what: x.nbytes for x in fp.parts}
    assert parts["device slot pool"] == (10 + 9) * entry
    assert parts["int4 tier 'warm' area"] == 20 * p.record_bytes["int4"]
    # an int4 record is a quarter of the expert and its scales (one float32 per 64 columns)
    assert mx.expert_bytes // 4 < p.record_bytes["int4"] < mx.expert_bytes * 0.3
    assert p.skeleton_source == "model mixtral-8x7b"
    # a model whose skeleton is unknown: not counted, and the plan says so
    q, _dev = small_plan(12)
    assert q.skeleton_bytes == 0 and "not counted" in q.message()
    assert q.device_slots == 12 and q.kv_source == "--kv-reserve"


@pytest.mark.parametrize("preset, device, host", [
    ("mixtral-8x7b", "24GiB", "128GiB"),            # host
    ("mixtral-8x7b", "24GiB", "64GiB"),             # disk
    ("deepseek-v2-lite", "12GiB", "64GiB"),         # a dense first layer; host
])
def test_every_candidate_checks_replays_and_fits(preset, device, host):
    tr = with_model(synth.synthesize(preset, steps=12, seed=2), None)
    profile = hw.resolve(None)
    p = TT.plan(tr.header, device, host, None, profile)
    assert p.case in ("host", "disk")
    shape = shapes.preset(preset).with_device_memory(TT.size_of(device, "d"))
    base = {"cache": {"eviction": "lfu"}, "prefetch": {"strategy": "history", "budget": 2}}
    cands = TT.candidates(p, [base], TT.layer_curves(tr))
    assert set(p.families) >= {"split", "ladder", "bands"}, p.families
    hw_ = TT.profile_for(p, profile)
    moe = set(tr.header.moe_layers)
    for c in cands:
        h = c[TT.HIERARCHY]
        text = T.render("c", c)
        bad = [f"{x.code} {x.message}" for x in analyze(text, model=shape).diagnostics
               if x.code != "MPL420"]
        assert not bad, text + "\n" + "\n".join(bad)
        assert TT.device_need(p, h).peak(DEVICE) <= p.device_bytes, TT.describe(h)
        r = replay(load_for_replay(text), tr, hardware=hw_, belady=False)
        assert r.stats["accesses"] > 0
        if "bands" in h:
            covered = [x for a, b, _t, _m in h["bands"] for x in moe if a <= x <= b]
            assert sorted(covered) == sorted(moe)         # every MoE layer in one band
            assert "per_layer_hierarchy" in text and "band layers = " in text
        if TT.family(h) == "ladder":
            warm = dict(h["tiers"][1][1])
            assert warm["dtype_ladder"] == "[int8, int4]"
            assert TT.top_slots(h) + 2 * warm["capacity"] < p.every
    # the families can be chosen (the benchmark compares them)
    only = TT.candidates(p, [base], None, ("split",))
    assert set(p.families) <= {"split", "whole"} and 0 < len(only) < len(cands)


def test_bands_keep_the_small_working_sets_a_shared_cache_loses():
    tr = split_trace()
    p, device = small_plan(12)
    assert p.device_slots == 12 and p.case == "host"
    hw_ = TT.profile_for(p, hw.resolve(None))
    cands = TT.candidates(p, [{"cache": {"eviction": "lru"}}], TT.layer_curves(tr), ("bands",))
    two = next(c for c in cands if [(a, b) for a, b, _t, _m in c[TT.HIERARCHY]["bands"]][:1]
               == [(0, 3)] and len(c[TT.HIERARCHY]["bands"]) == 2
               and len(c[TT.HIERARCHY]["bands"][0][2]) == 1)
    assert two[TT.HIERARCHY]["bands"][0][2][0][1][-1] == ("capacity", 8)

    def hits(blocks):
        return replay(load_for_replay(T.render("c", blocks)), tr, hardware=hw_,
                      belady=False).stats["hit_rate"]

    shared = hits({"cache": {"capacity": 12, "eviction": "lru"}})
    banded = hits(two)
    assert shared < 0.05 and banded > 0.45          # layers 0..3's accesses are half


def test_the_search_ranks_bands_and_its_winner_replays_to_its_numbers():
    tr = split_trace()
    p, device = small_plan(12)
    res = T.tune(tr, device_memory=device, host_memory="1GiB", kv_reserve="1MiB", jobs=1)
    t = res.tiers
    assert t.plan.device_slots == 12 and t.plan.families.get("bands", 0) >= 2
    best = res.best
    rows = [c for c in res.leaderboard if TT.HIERARCHY in c.blocks
            and "bands" in c.blocks[TT.HIERARCHY] and not c.error]
    assert rows and not [c for c in res.leaderboard if c.error]
    # the bands that isolate layers 0..3 keep their working sets: half the accesses
    two = next(c for c in rows if c.describe().startswith("bands 0..3: hot 8 | 4..7: hot 4"))
    assert two.hit_rate > 0.45 and two.belady is not None and two.belady >= two.hit_rate
    whole = [c for c in rows if c.fraction >= 1.0]
    assert all(best.score(res.objective) >= c.score(res.objective) for c in whole)
    if t.winner_tiered:
        assert t.winner_device["total"] <= t.plan.device_bytes
    text = T.winner_text(res, "the split trace", "mplc tune ...")
    r = replay(load_for_replay(text), tr, hardware=TT.profile_for(t.plan, hw.resolve(None)),
               belady=False)
    assert r.stats["hit_rate"] == pytest.approx(best.hit_rate, abs=1e-12)
    assert r.sim["tokens_per_s"] == pytest.approx(best.tokens_per_s, rel=1e-9)
