"""A memory tier's ``dtype_ladder`` in the runtime and replay (SPEC §12; docs/runtime.md,
"Memory tiers", the ladder rule):

* a replay on a synthetic trace gives the per-tier and per-precision counts (served at each
  rung, steps down, evictions, what is resident at each rung, approximate accesses by
  precision, bytes over the link) that a small independent reference simulation of the
  documented rule (written here, sharing no code with the runtime) gives, for a ladder on
  the top tier and on a lower gpu tier;
* the Plan names each key's precision: REQUANT steps inside the tier, a PROMOTE step beside
  every load into a ladder top tier, a SERVE step for a hit below the first rung;
* the cost model charges the rung's bytes: moved, and computed from;
* the compiled engine does not hold a dtype_ladder: a runtime on the default backend is pure, says
  why, and gives the plans of one asked to be pure.
"""

from __future__ import annotations

from collections import OrderedDict

import pytest

import mpl
from mpl import shapes
from mpl.runtime.plan import PROMOTE, REQUANT, SERVE, Plan, Step
from mpl.sim import synthesize
from mpl.timemodel import hardware as hw
from mpl.timemodel.tiers import TieredTimeline

BITS = {"fp16": 16, "int8": 8, "int4": 4}


#: a small model whose trace reuses experts within a few dispatches (4 MoE layers x 16
#: experts, top-2, skewed popularity): caches of a few slots hit, miss and evict
SHAPE = shapes.ModelShape("ladder-test", 4, (0, 1, 2, 3), 16, 2, hidden_size=256,
                          intermediate_size=512)


def trace(steps=250, seed=5):
    return synthesize(SHAPE, steps=steps, seed=seed, skew=1.1, reuse=0.3)


# ------------------------------------------------------------------ the reference simulation
class LadderRef:
    """One ladder tier by the documented rule, LRU: a key enters at the first rung; room is
    made from the coldest key the dispatch does not use, each one rung down, or out when at
    the lowest rung, passes over the keys until the key fits at the first rung; when every
    other key is gone it takes the highest rung that fits, else it is not admitted."""

    def __init__(self, rungs, budget):
        self.rungs, self.budget = list(rungs), budget
        self.keys = OrderedDict()              # key -> rung index, coldest first
        self.requants = self.evictions = 0

    def cost(self, r):
        return BITS[self.rungs[r]]

    def used(self):
        return sum(self.cost(r) for r in self.keys.values())

    def put(self, key, inuse) -> tuple:
        """-> (rung it entered at or None, the keys evicted, in order)."""
        room = self.budget - self.used()
        out = []
        low = len(self.rungs) - 1
        if room < self.cost(0):
            kept = sum(self.cost(r) for k, r in self.keys.items() if k in inuse)
            if self.budget - kept < self.cost(low):
                return None, out
            while room < self.cost(0):
                moved = False
                for k in list(self.keys):
                    if k in inuse:
                        continue
                    r = self.keys[k]
                    if r < low:
                        self.keys[k] = r + 1
                        room += self.cost(r) - self.cost(r + 1)
                        self.requants += 1
                    else:
                        del self.keys[k]
                        room += self.cost(r)
                        self.evictions += 1
                        out.append(k)
                    moved = True
                    if room >= self.cost(0):
                        break
                if not moved:
                    break
        at = next(r for r in range(len(self.rungs)) if self.cost(r) <= room)
        self.keys[key] = at
        return at, out


class TopRef:
    """hot (gpu, the ladder) over host memory, gpu_only, whole experts."""

    def __init__(self, rungs, slots):
        self.hot = LadderRef(rungs, slots * BITS[rungs[0]])
        self.served_at = {d: 0 for d in rungs}
        self.approx = {}
        self.streamed = 0
        self.link_bits = 0          # bits-per-parameter x experts moved over the link

    def dispatch(self, layer, experts):
        inuse = {(layer, e) for e in experts}
        for e in experts:
            key = (layer, e)
            if key in self.hot.keys:
                self.hot.keys.move_to_end(key)
                d = self.hot.rungs[self.hot.keys[key]]
                self.served_at[d] += 1
            else:
                at, _ = self.hot.put(key, inuse)
                if at is None:
                    self.streamed += 1
                    self.link_bits += 16
                    continue
                d = self.hot.rungs[at]
                self.link_bits += BITS[d]
            if BITS[d] < 16:
                self.approx[d] = self.approx.get(d, 0) + 1


class WarmRef:
    """hot (gpu, fp16, LRU slots) over warm (gpu, the ladder) over host memory, gpu_only: a
    host key is loaded into hot; a key in warm is promoted into hot, leaving warm first; hot's
    victim (the least recent key the dispatch does not use) is demoted into warm."""

    def __init__(self, hot, rungs, slots):
        self.cap = hot
        self.hot = OrderedDict()
        self.warm = LadderRef(rungs, slots * BITS[rungs[0]])
        self.served = {"hot": 0, "warm": 0, "host": 0}
        self.served_at = {d: 0 for d in rungs}
        self.demoted = self.hot_evictions = 0

    def dispatch(self, layer, experts):
        inuse = {(layer, e) for e in experts}
        for e in experts:
            key = (layer, e)
            if key in self.hot:
                self.hot.move_to_end(key)
                self.served["hot"] += 1
                continue
            if key in self.warm.keys:
                self.served["warm"] += 1
                self.served_at[self.warm.rungs[self.warm.keys[key]]] += 1
                del self.warm.keys[key]            # promoted: it leaves warm first
            else:
                self.served["host"] += 1
            victim = None
            if len(self.hot) >= self.cap:
                victim = next(k for k in self.hot if k not in inuse)
                del self.hot[victim]
                self.hot_evictions += 1
            self.hot[key] = None
            if victim is not None:
                at, _ = self.warm.put(victim, inuse)
                if at is not None:
                    self.demoted += 1


TOP = """policy top {
    hierarchy {
        tier hot { location = gpu  dtype_ladder = [%s]  capacity = %d }
        eviction = lru
    }
}
"""

WARM = """policy warm {
    hierarchy {
        tier hot  { location = gpu  capacity = %d }
        tier warm { location = gpu  dtype_ladder = [%s]  capacity = %d }
        eviction = lru
    }
}
"""


@pytest.mark.parametrize("rungs, slots", [(("fp16", "int8", "int4"), 8), (("fp16", "int8", "int4"), 40),
                                          (("fp16", "int4"), 20), (("int8", "int4"), 12)])
def test_a_ladder_top_tier_counts_what_the_reference_counts(rungs, slots):
    t = trace()
    rep = mpl.loads(TOP % (", ".join(rungs), slots)).replay(t)
    ref = TopRef(rungs, slots)
    for d in t.dispatches:
        ref.dispatch(d.layer, d.distinct())
    row = rep.stats["tiers"][0]
    assert row["dtype_ladder"] == list(rungs)
    assert row["served_at"] == ref.served_at
    assert row["hits"] == rep.stats["hits"] == sum(ref.served_at.values())
    assert row["requantized"] == ref.hot.requants
    assert row["evictions"] == ref.hot.evictions == rep.stats["evictions"]
    assert row["resident"] == len(ref.hot.keys)
    assert row["resident_at"] == {d: sum(1 for r in ref.hot.keys.values() if rungs[r] == d)
                                  for d in rungs}
    assert rep.stats["streamed"] == ref.streamed
    assert rep.stats["approximate_by_dtype"] == ref.approx
    assert rep.stats["approximate_computes"] == sum(ref.approx.values()) == row["approximate"]
    # the link moved each load at the rung it landed at
    eb = rep.trace["expert_bytes"]
    assert rep.stats["bytes_loaded"] == int(ref.link_bits * eb / 16)
    assert rep.sim["bytes_transferred"] == pytest.approx(ref.link_bits * eb / 16, rel=1e-9)
    # the ladder holds more experts than its first rung alone would, never more bytes
    held = sum(BITS[rungs[r]] for r in ref.hot.keys.values())
    assert held <= slots * BITS[rungs[0]]


@pytest.mark.parametrize("hot, slots", [(8, 8), (16, 24), (4, 40)])
def test_a_ladder_below_the_top_tier_counts_what_the_reference_counts(hot, slots):
    t = trace(seed=9)
    rep = mpl.loads(WARM % (hot, "int8, int4", slots)).replay(t)
    ref = WarmRef(hot, ("int8", "int4"), slots)
    for d in t.dispatches:
        ref.dispatch(d.layer, d.distinct())
    rows = {r["tier"]: r for r in rep.stats["tiers"]}
    assert rows["hot"]["hits"] == ref.served["hot"] == rep.stats["hits"]
    assert rows["warm"]["hits"] == ref.served["warm"]
    assert rows["<host>"]["hits"] == ref.served["host"]
    assert rows["warm"]["served_at"] == ref.served_at
    assert rows["warm"]["demotions"] == ref.demoted
    assert rows["warm"]["requantized"] == ref.warm.requants
    assert rows["warm"]["evictions"] == ref.warm.evictions
    assert rows["hot"]["evictions"] == ref.hot_evictions
    assert rows["warm"]["resident_at"] == {
        d: sum(1 for r in ref.warm.keys.values() if ("int8", "int4")[r] == d) for d in ("int8", "int4")}
    # every access is promoted to hot and computed at fp16: nothing approximate
    assert rep.stats["approximate_computes"] == 0 and rep.stats["approximate_by_dtype"] == {}


# ------------------------------------------------------------------ the Plan
@pytest.mark.parametrize("hot, slots", [(4, 8), (8, 24)])
def test_the_plans_steps_alone_give_a_lower_ladder_tiers_contents(hot, slots):
    """What a lower ladder tier holds, and at which rung, follows from the Plans' steps alone
    (the mechanism keeps its device area that way): a key enters by a DEMOTE, REQUANT or
    PROMOTE into it, is pushed down by a REQUANT inside it, and leaves by a PROMOTE out, in
    place of a step's victim, or, a ladder's further victim, by a LEAVE step."""
    from mpl.runtime.plan import DEMOTE, LEAVE
    t = trace(seed=9)
    rt = mpl.loads(WARM % (hot, "int8, int4", slots)).runtime(
        SHAPE.num_moe_layers, SHAPE.num_experts, SHAPE.top_k, expert_bytes=1e6, backend="pure")
    warm: dict = {}                      # key -> (slot, rung)
    leaves = 0
    for d in t.dispatches:
        steps = rt.dispatch(d.layer, d.distinct()).steps
        # (a key promoted out of the tier frees its slot for the hot tier's victim, which
        # may be demoted into it before the promotion's step: the two swap)
        out = {s.key for s in steps if s.op == PROMOTE and s.source == 1}
        for s in steps:
            if s.target == 1 and s.op in (DEMOTE, REQUANT, PROMOTE) and s.source != 1:
                if s.victim is not None:
                    assert warm.pop(s.victim)[0] == s.slot
                holder = [k for k, v in warm.items() if v[0] == s.slot]
                if holder:
                    assert s.victim is None and holder[0] in out
                    del warm[holder[0]]
                warm[s.key] = (s.slot, s.dtype)
            elif s.op == REQUANT and s.source == s.target == 1:
                assert warm[s.key][0] == s.slot
                warm[s.key] = (s.slot, s.dtype)
            elif s.op == LEAVE:
                assert s.source == s.target == 1 and warm.pop(s.key)[0] == s.slot
                leaves += 1
            elif s.op == PROMOTE and s.source == 1:
                warm.pop(s.key, None)
        row = next(r for r in rt.stats()["tiers"] if r["tier"] == "warm")
        assert row["resident"] == len(warm)
        assert row["resident_at"] == {r: sum(1 for _s, x in warm.values() if x == r)
                                      for r in ("int8", "int4")}
    assert leaves > 0


def test_the_plan_names_each_keys_precision():
    pol = mpl.loads(TOP % ("fp16, int8, int4", 2))
    rt = pol.runtime(num_layers=1, num_experts=16, top_k=1, expert_bytes=1e6)
    plans = [rt.dispatch(0, [e]) for e in (0, 1, 2)]
    # two fp16 slots: the first two land at fp16 (a PROMOTE step beside each load names it)
    for p, e in zip(plans[:2], (0, 1)):
        assert [s for s in p.steps if s.op == PROMOTE] == [
            Step(PROMOTE, (0, e), 1, 0, p.loads[0].slot, None, "fp16", "demand")]
    # the third: the coldest (expert 0) goes one rung down, then the next (expert 1)
    third = plans[2]
    req = [s for s in third.steps if s.op == REQUANT]
    assert [(s.key, s.source, s.target, s.dtype) for s in req] == [((0, 0), 0, 0, "int8"),
                                                                    ((0, 1), 0, 0, "int8")]
    assert third.steps.index(req[-1]) < next(i for i, s in enumerate(third.steps) if s.op == PROMOTE)
    assert third.loads[0].victim is None             # room made without an eviction
    # a hit below the first rung is computed from that copy: a SERVE step in the top tier
    hit = rt.dispatch(0, [0])
    assert hit.hit == [True] and hit.steps == [Step(SERVE, (0, 0), 0, 0, hit.where[0], None, "int8", None)]
    assert rt.dispatch(0, [2]).steps == []           # at fp16: a plain hit
    s = rt.stats()
    assert s["approximate_by_dtype"] == {"int8": 1} and s["tiers"][0]["served_at"] == \
        {"fp16": 1, "int8": 1, "int4": 0}


def test_a_fixed_ladder_tier_fills_and_never_changes():
    pol = mpl.loads("""policy f { hierarchy {
        tier pinned { location = gpu  dtype_ladder = [fp16, int4]  capacity = 1  residency = always }
        tier hot { location = gpu  capacity = 4 } } }""")
    rt = pol.runtime(num_layers=1, num_experts=16, top_k=1, expert_bytes=1e6)
    for e in range(8):
        rt.dispatch(0, [e])
    row = rt.stats()["tiers"][0]
    assert row["resident_at"] == {"fp16": 1, "int4": 0} and row["requantized"] == 0
    assert row["evictions"] == 0


# ------------------------------------------------------------------ the cost model
def test_the_timeline_computes_a_hit_from_the_rungs_bytes():
    pol = mpl.loads(TOP % ("fp16, int8, int4", 4))
    rt = pol.runtime(num_layers=1, num_experts=8, top_k=1, expert_bytes=4e8)
    costs = hw.costs_for(hw.resolve("h100"), expert_bytes=int(4e8))

    def busy(steps):
        tl = TieredTimeline(costs, layout=rt.tier_layout)
        tl.dispatch(Plan(0, 0, [3], [0], [True], [], [], steps))
        return tl.gpu_ms

    full = busy([])
    for dtype, share in (("int8", 2), ("int4", 4)):
        got = busy([Step(SERVE, (0, 3), 0, 0, 0, None, dtype, None)])
        assert got == pytest.approx(full - costs.expert_ms_at(4e8) + costs.expert_ms_at(4e8 / share))
        assert got < full


def test_a_ladder_that_never_fills_replays_as_its_first_rung():
    t = trace(steps=10)
    every = t.header.num_moe_layers * t.header.num_experts
    a = mpl.loads(TOP % ("fp16, int8, int4", every)).replay(t)
    b = mpl.loads("policy b { hierarchy { tier hot { location = gpu  capacity = %d } } }" % every).replay(t)
    assert a.stats["tiers"][0]["requantized"] == 0
    assert (a.stats["hits"], a.stats["bytes_loaded"]) == (b.stats["hits"], b.stats["bytes_loaded"])
    assert a.sim["total_ms"] == pytest.approx(b.sim["total_ms"], rel=1e-12)


# ------------------------------------------------------------------ backends
def test_a_top_tier_ladder_gives_the_same_plans_on_both_backends():
    pol = mpl.loads(TOP % ("fp16, int8, int4", 6))
    t = trace(steps=8)
    h = t.header
    default = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=1e6)
    pure = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=1e6, backend="pure")
    from mpl.runtime import compiled
    assert default.backend == ("compiled" if compiled.available() else "pure")
    for d in t.dispatches:
        assert default.dispatch(d.layer, d.distinct()) == pure.dispatch(d.layer, d.distinct())
    assert default.stats() == pure.stats()
    assert default.stats()["tiers"][0]["requantized"] > 0
