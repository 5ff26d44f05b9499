"""Memory tiers in the runtime (SPEC §12; docs/runtime.md "Memory tiers"), through the public
API on parsed policies:

* a replay of a tiered policy on a synthetic trace gives the per-tier counts that a small,
  independent reference simulation of the documented rules (written here, sharing no code
  with the runtime) gives;
* a policy whose only tier below its device cache is host memory makes exactly the decisions
  of the same ``cache`` policy: the same Plans and statistics, dispatch by dispatch and in a
  replay, for every eviction rule a tier can have, prefetching, every schedule mode and adapt
  rules;
* the Plan's tier steps, ``residency = always``, ``granularity_split``, ``weighted_sum``,
  bands over the model's decoder-layer ids, a hierarchy without a gpu tier;
* the compiled engine holds tiers of whole experts at one precision per tier; a dtype_ladder
  runs pure and says why (tests/test_tiers_backends.py compares the backends).
"""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest
from hypothesis import given, strategies as st

import mpl
from mpl.runtime import compiled
from mpl.runtime.core import RuntimeConfigError
from mpl.runtime.plan import CPU, DEMOTE, LOWER, PROMOTE, READ, REQUANT, SERVE, STREAM, Step
from mpl.sim import synthesize
from property_profiles import prop


def trace(preset="mixtral-8x7b", steps=30, seed=5):
    return synthesize(preset, steps=steps, seed=seed)


# ------------------------------------------------------------------ the reference simulation
class Ref:
    """The documented rules for hot (gpu, LRU) / warm (gpu int4, LRU, requantized in place) /
    ram (cpu, LRU) / ssd (disk), gpu_only, whole experts, an optional trigger_threshold on
    promote(warm -> hot), and nothing else: per access the fastest tier holding the key serves
    it; a key from the disk is read into ram first; it then goes to hot (if the threshold
    admits it there), else to warm; a key in warm is promoted to hot when the threshold admits
    it (leaving warm), else computed from warm; hot's victims go to warm, warm's to ram
    (unless ram kept its copy), ram's are dropped. Victims are the least recent keys the
    dispatch does not use."""

    def __init__(self, hot, warm, ram, threshold=None, window=100):
        self.cap = {"hot": hot, "warm": warm, "ram": ram}
        self.t = {k: OrderedDict() for k in self.cap}
        self.threshold, self.window = threshold, window
        self.win = {}
        self.count = {k: dict.fromkeys(("served", "promoted", "demoted", "evicted"), 0)
                      for k in ("hot", "warm", "ram", "ssd")}
        self.approx = 0            # accesses computed from warm's int4 copy

    def share(self, key):
        q = self.win.get(key[0], [])
        return q.count(key[1]) / len(q) if q else 0.0

    def victim(self, tier, inuse):
        for k in self.t[tier]:
            if k not in inuse:
                del self.t[tier][k]
                self.count[tier]["evicted"] += 1
                return k
        return None

    def put(self, tier, key, inuse):
        """Make key resident in tier (its victim goes down); False when nothing can leave."""
        t = self.t[tier]
        if len(t) >= self.cap[tier]:
            v = self.victim(tier, inuse)
            if v is None:
                return False
            self.down(tier, v, inuse)
        t[key] = None
        return True

    def down(self, tier, key, inuse):
        below = {"hot": "warm", "warm": "ram", "ram": None}[tier]
        if below is None or key in self.t[below]:
            return
        if self.put(below, key, inuse):
            self.count[below]["demoted"] += 1

    def dispatch(self, layer, experts):
        q = self.win.setdefault(layer, [])
        q.extend(experts)
        del q[:-self.window]
        inuse = {(layer, e) for e in experts}
        for e in experts:
            key = (layer, e)
            if key in self.t["hot"]:
                self.t["hot"].move_to_end(key)
                self.count["hot"]["served"] += 1
                continue
            if key in self.t["warm"]:
                src = "warm"
            elif key in self.t["ram"]:
                src = "ram"
            else:
                src = "ssd"
            if src != "ssd":
                self.t[src].move_to_end(key)
            self.count[src]["served"] += 1
            if src == "ssd" and self.put("ram", key, inuse):
                self.count["ram"]["promoted"] += 1
            to_hot = self.threshold is None or self.share(key) >= self.threshold
            if src == "warm" and not to_hot:
                self.approx += 1               # computed from warm
                continue
            if src == "warm":
                del self.t["warm"][key]
            if to_hot and self.put("hot", key, inuse):
                self.count["hot"]["promoted"] += 1
            elif src != "warm" and self.put("warm", key, inuse):
                self.count["warm"]["promoted"] += 1
                self.approx += 1


FOUR_TIERS = """policy four {
    hierarchy {
        tier hot  { location = gpu  capacity = %d }
        tier warm { location = gpu  dtype = int4  capacity = %d }
        tier ram  { location = cpu  capacity = %d }
        tier ssd  { location = disk }
        on demote(hot -> warm) { mechanism = in_place_requant }
        %s
        eviction = lru
    }
}
"""


@pytest.mark.parametrize("caps, threshold", [((8, 16, 40), None), ((4, 24, 60), None),
                                             ((6, 12, 30), 0.05), ((16, 32, 96), 0.1)])
def test_a_replay_gives_the_reference_simulations_per_tier_counts(caps, threshold):
    t = trace()
    on = "" if threshold is None else f"on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
    rep = mpl.loads(FOUR_TIERS % (*caps, on)).replay(t)
    ref = Ref(*caps, threshold=threshold)
    for d in t.dispatches:
        ref.dispatch(d.layer, d.distinct())
    rows = {r["tier"]: r for r in rep.stats["tiers"]}
    for name in ("hot", "warm", "ram", "ssd"):
        got = rows[name]
        want = ref.count[name]
        assert (got["hits"], got["promotions"], got["demotions"], got["evictions"]) == \
            (want["served"], want["promoted"], want["demoted"], want["evicted"]), name
        if name != "ssd":
            assert got["resident"] == len(ref.t[name])
    assert rows["ssd"]["reads"] == ref.count["ssd"]["served"] == rep.sim["disk_reads"]
    assert rep.stats["hits"] == ref.count["hot"]["served"]
    # what is computed from warm's int4 copy is counted as approximate (with no threshold
    # every key goes to hot: none)
    assert rep.stats["approximate_computes"] == rows["warm"]["approximate"] == ref.approx
    assert (ref.approx == 0) == (threshold is None)


# ------------------------------------------------------------------ the two-tier equivalence
def _pair(rule: str, rest: str, cap: int = 12):
    tiered = mpl.loads(f"policy t {{\n  hierarchy {{ tier hot {{ location = gpu  capacity = {cap} }}  "
                       f"eviction = {rule} }}\n{rest}}}\n")
    cache = mpl.loads(f"policy c {{\n  cache {{ capacity = {cap}  eviction = {rule} }}\n{rest}}}\n")
    return tiered, cache


RULES = ["lru", "lfu", "score", "frequency_threshold", "arc", "s3fifo", "lfru", "crf",
         "classlru", "vllm_lfru", "farthest_layer", "least_stale"]
REST = [
    "",
    "  prefetch { strategy = history  budget = 2 }\n",
    "  prefetch { strategy = affinity  budget = 3  lookahead = 2 }\n  schedule { mode = cpu_fallback }\n",
    "  prefetch { strategy = lookahead  budget = 2 }\n  schedule { mode = hybrid  offload_threshold_ms = 5 }\n",
    "  prefetch { strategy = learned  budget = 2 }\n",
    "  monitor { window = 40 }\n  adapt {\n    when hit_rate < 0.3 for 20 accesses { prefetch.strategy = history  prefetch.budget = 2 }\n"
    "    when hit_rate > 0.5 { schedule.mode = cpu_fallback  trigger flush }\n  }\n",
]


def _records(seed=3, n=240, L=4, E=16, K=2):
    r = random.Random(seed)
    out = []
    for i in range(n):
        layer = i % L
        ex = r.sample(range(E), K if r.random() < 0.85 else K + 2)
        w = [r.random() + 0.01 for _ in ex] if r.random() < 0.7 else None
        tokens = 1 if r.random() < 0.8 else r.randint(2, 6)
        preds = {(layer + 1) % L: r.sample(range(E), 3)} if r.random() < 0.3 else None
        out.append((layer, ex, w, tokens, preds))
    return out


def _untiered(stats: dict) -> dict:
    return {k: v for k, v in stats.items()
            if k not in ("tiers", "approximate_computes", "approximate_by_dtype")}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("rest", range(len(REST)))
def test_a_device_cache_over_host_memory_decides_as_the_cache_policy(rule, rest):
    tiered, cache = _pair(rule, REST[rest])
    a = tiered.runtime(4, 16, 2)
    b = cache.runtime(4, 16, 2, backend="pure")
    c = cache.runtime(4, 16, 2)                  # (the compiled engine where it is built)
    for layer, ex, w, tokens, preds in _records():
        pa = a.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa == b.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa == c.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa.steps == []
    sa = a.stats()
    assert _untiered(sa) == b.stats() == c.stats()
    assert set(sa) - set(b.stats()) == {"tiers", "approximate_computes", "approximate_by_dtype"}
    assert a.resident() == b.resident() and a.store_keys() == b.store_keys()
    assert a.capacities() == b.capacities() and a.metrics() == b.metrics()
    assert a.monitor_log() == b.monitor_log()


@pytest.mark.parametrize("rule, rest", [("lru", 0), ("lfu", 1), ("arc", 2), ("crf", 3), ("lru", 5)])
def test_a_device_cache_over_host_memory_replays_as_the_cache_policy(rule, rest):
    tiered, cache = _pair(rule, REST[rest], cap=40)
    t = trace("deepseek-v2-lite", steps=12)
    ra, rb = tiered.replay(t), cache.replay(t)
    assert _untiered(ra.stats) == rb.stats
    assert ra.sim == {**rb.sim, **{k: ra.sim[k] for k in ("disk_busy_ms", "disk_reads", "disk_bytes",
                                                           "d2h_busy_ms", "device_copy_ms")}}
    assert ra.sim["disk_reads"] == 0 and ra.sim["device_copy_ms"] == 0
    assert ra.belady["hits"] == rb.belady["hits"] and ra.gap == rb.gap
    rows = ra.stats["tiers"]
    assert [r["tier"] for r in rows] == ["hot", "<host>"]
    assert rows[0]["hits"] + rows[1]["hits"] == ra.stats["accesses"]


# ------------------------------------------------------------------ steps of the Plan
def test_the_plan_says_each_move_with_its_tier_and_precision():
    pol = mpl.loads(FOUR_TIERS % (2, 2, 4, ""))
    rt = pol.runtime(1, 16, 2)
    plans = [rt.dispatch(0, ex) for ex in ([0, 1], [2, 3], [4, 5], [0, 1])]
    # the first: both read from the disk into ram, then loaded into hot
    assert [(s.op, s.key, s.source, s.target, s.dtype) for s in plans[0].steps] == [
        (READ, (0, 0), 3, 2, None), (READ, (0, 1), 3, 2, None)]
    assert [ld.key for ld in plans[0].loads] == [(0, 0), (0, 1)]
    # the second: hot's victims are requantized in place into warm (int4)
    ops = [(s.op, s.key, s.source, s.target, s.dtype) for s in plans[1].steps]
    assert (REQUANT, (0, 0), 0, 1, "int4") in ops and (REQUANT, (0, 1), 0, 1, "int4") in ops
    assert [k for k, _ in plans[1].evicted] == [(0, 0), (0, 1)]
    # the fourth: 0 and 1 were demoted on to ram (copied), and ram kept its copies: no disk read
    assert all(s.op != READ for s in plans[3].steps)
    assert all(isinstance(s, Step) for p in plans for s in p.steps)
    assert rt.stats()["tiers"][3]["reads"] == 6


def test_a_key_the_threshold_keeps_below_is_computed_from_the_lower_tier():
    text = FOUR_TIERS % (4, 8, 20, "on promote(warm -> hot) { trigger_threshold = 1 }")
    rt = mpl.loads(text).runtime(1, 16, 2)
    p = rt.dispatch(0, [3, 4])
    # a share of 1 is never reached with two experts: both land in warm, computed from int4
    assert p.where == [LOWER, LOWER] and p.loads == [] and p.hit == [False, False]
    serve = [s for s in p.steps if s.op == SERVE]
    assert [(s.key, s.source, s.dtype) for s in serve] == [((0, 3), 1, "int4"), ((0, 4), 1, "int4")]
    promote = [s for s in p.steps if s.op == PROMOTE]
    assert [(s.key, s.source, s.target) for s in promote] == [((0, 3), 2, 1), ((0, 4), 2, 1)]
    assert rt.stats()["approximate_computes"] == 2


def test_residency_always_fills_once_and_never_evicts():
    text = """policy p { hierarchy {
        tier pinned { location = gpu  capacity = 2  residency = always }
        tier hot { location = gpu  capacity = 2 }
    } }"""
    rt = mpl.loads(text).runtime(1, 16, 2)
    rt.dispatch(0, [0, 1])
    assert rt.resident() == {(0, 0): 0, (0, 1): 1}
    for ex in ([2, 3], [4, 5], [6, 7]):
        p = rt.dispatch(0, ex)
        assert p.where == [LOWER, LOWER] and not p.evicted
    assert rt.resident() == {(0, 0): 0, (0, 1): 1}
    assert rt.dispatch(0, [0, 1]).hit == [True, True]
    rows = rt.stats()["tiers"]
    assert (rows[0]["evictions"], rows[0]["resident"], rows[1]["resident"]) == (0, 2, 2)
    # an adapt rule's flush empties a top tier, not one whose residency is always
    # (two misses in a row fire it: on 4 and 5, when 0 and 1 are not in use)
    flush = text.replace("} }", "} monitor { window = 2  warmup = none } "
                                "adapt { when miss_rate > 0.9 { trigger flush } } }")
    for always in (True, False):
        rt = mpl.loads(flush if always else flush.replace("residency = always", "")).runtime(1, 16, 2)
        for ex in ([0, 1], [0, 1], [4, 5]):
            rt.dispatch(0, ex)
        assert len(rt.stats()["adapt_log"]) == 2
        assert ((0, 0) in rt.resident() and (0, 1) in rt.resident()) == always


def test_granularity_split_caches_parts():
    text = """policy p { hierarchy { tier hot { location = gpu  capacity = 3 }  granularity_split = 2 } }"""
    rt = mpl.loads(text).runtime(1, 16, 2)
    assert rt.capacities() == [6] and rt.num_slots == 6       # 3 experts: 6 part slots
    p = rt.dispatch(0, [0, 1])
    assert [ld.key for ld in p.loads] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
    assert p.where == [(0, 1), (2, 3)] and p.hit == [False, False]
    p = rt.dispatch(0, [2, 0])
    assert p.hit == [False, True] and p.where == [(4, 5), (0, 1)] and not p.evicted
    p = rt.dispatch(0, [3])
    # expert 1 is the least recent: both its parts leave, each part one load
    assert [k for k, _ in p.evicted] == [(0, 1, 0), (0, 1, 1)] and p.where == [(2, 3)]
    s = rt.stats()
    assert s["demand_loads"] == 8 and s["bytes_loaded"] == int(8 * rt.expert_bytes / 2)
    assert s["hits"] == 1 and s["tiers"][0]["resident"] == 6


def test_weighted_sum_ranks_by_both_rules():
    base = "policy p {{ hierarchy {{ tier hot {{ location = gpu  capacity = {} }}  eviction = weighted_sum({}) }} }}"

    def victim(cap, weights, uses):
        rt = mpl.loads(base.format(cap, weights)).runtime(1, 16, 1)
        for e in uses:
            rt.dispatch(0, [e])
        return rt.dispatch(0, [9]).evicted[0][0][1]

    # after 1 1 1 2 3: lru ranks 1, 2, 3 (coldest first), lfu 2, 3, 1
    uses = (1, 1, 1, 2, 3)
    assert victim(3, "lru = 1, lfu = 0.01", uses) == 1          # (nearly) lru alone
    assert victim(3, "lru = 0.01, lfu = 1", uses) == 2          # (nearly) lfu alone
    assert victim(3, "lru = 0.5, lfu = 0.5", uses) == 2         # 1: 0.5, 2: 0.25, 3: 0.75
    assert victim(3, "lru = 1, lfu = 0.2", uses) == 1           # 1: 0.2, 2: 0.5
    # after 1 1 2: lru ranks 1, 2 and lfu 2, 1: equal sums; the first rule named decides
    assert victim(2, "lru = 0.5, lfu = 0.5", (1, 1, 2)) == 1
    assert victim(2, "lfu = 0.5, lru = 0.5", (1, 1, 2)) == 2


def test_bands_name_the_models_decoder_layers():
    text = """policy p { per_layer_hierarchy {
        band layers = 1..13  { tier hot { location = gpu  capacity = 12 } }
        band layers = 14..26 { tier hot { location = gpu  capacity = 30 }  eviction = lfu }
    } }"""
    pol = mpl.loads(text)
    ids = list(range(1, 27))                 # DeepSeek-V2-Lite: decoder layer 0 is dense
    rt = pol.runtime(26, 64, 6, layer_ids=ids)
    assert rt.capacities() == [12, 30]
    assert [t["layers"] for t in rt.tiers] == [list(range(0, 13)), list(range(13, 26))]
    with pytest.raises(RuntimeConfigError, match="MoE layer 0 .decoder layer 0. is in no band"):
        pol.runtime(26, 64, 6)
    rep = pol.replay(trace("deepseek-v2-lite", steps=6))
    assert rep.belady["capacities"] == [12, 30]
    assert [r["set"] for r in rep.stats["tiers"]] == ["layers 1..13"] * 2 + ["layers 14..26"] * 2


def test_a_hierarchy_without_a_gpu_tier_computes_from_host_memory():
    for mode, where in (("gpu_only", STREAM), ("cpu_fallback", CPU)):
        text = f"""policy p {{ hierarchy {{ tier ram {{ location = cpu  capacity = 4 }}  tier ssd {{ location = disk }} }}
                  schedule {{ mode = {mode} }} }}"""
        rt = mpl.loads(text).runtime(1, 16, 2)
        p = rt.dispatch(0, [0, 1])
        assert p.where == [where, where] and p.loads == [] and [s.op for s in p.steps] == [READ, READ]
        p = rt.dispatch(0, [0, 1])
        assert p.steps == []                 # in host memory now: no read
        rows = rt.stats()["tiers"]
        assert (rows[0]["hits"], rows[1]["hits"], rows[1]["reads"]) == (2, 2, 2)


def test_demotion_into_a_host_cache_copies_what_it_lost():
    text = FOUR_TIERS % (1, 1, 2, "")
    rt = mpl.loads(text).runtime(1, 16, 1)
    for e in (0, 1):
        rt.dispatch(0, [e])
    # reading 2 makes ram drop 0; hot's victim 1 is requantized into warm, whose victim 0
    # goes down to ram, which lost it: copied back into host memory (ram's victim is 1,
    # which the device holds)
    ops = [(s.op, s.key, s.source, s.target) for s in rt.dispatch(0, [2]).steps]
    assert ops == [(READ, (0, 2), 3, 2), (DEMOTE, (0, 0), 1, 2), (REQUANT, (0, 1), 0, 1)]


# ------------------------------------------------------------------ backends, set, errors
def test_the_compiled_engine_holds_tiers_of_experts_parts_and_ladders():
    pol = mpl.loads(FOUR_TIERS % (4, 8, 20, ""))
    rt = pol.runtime(4, 16, 2)
    if compiled.available():
        assert rt.backend == "compiled" and rt.backend_reason is None
    ladder = mpl.loads("policy p { hierarchy { tier hot { location = gpu  capacity = 4 }\n"
                       " tier warm { location = gpu  capacity = 8  dtype_ladder = [fp16, int8, int4] } } }")
    rt = ladder.runtime(4, 16, 2)
    if compiled.available():
        assert rt.backend == "compiled" and rt.backend_reason is None
    top = mpl.loads("policy p { hierarchy { tier hot { location = gpu  capacity = 8  "
                    "dtype_ladder = [fp16, int8, int4] } } }")
    rt = top.runtime(4, 16, 2)
    if compiled.available():
        assert rt.backend == "compiled" and rt.backend_reason is None
    split = mpl.loads("policy p { hierarchy { tier hot { location = gpu  capacity = 8 }  granularity_split = 2 } }")
    rt = split.runtime(4, 16, 2)
    if compiled.available():
        assert rt.backend == "compiled" and rt.backend_reason is None
    rt = split.runtime(512, 1024, 2)        # 2^19 experts in 2 parts: 2^20 keys, within 2^22
    if compiled.available():
        assert rt.backend == "compiled"
    rt = split.runtime(4096, 1024, 2)       # 2^22 experts in 2 parts: beyond
    assert rt.backend == "pure"
    if compiled.available():
        why = "4,194,304 layers x experts in 2 parts each are more keys than the compiled engine's 4,194,304"
        assert rt.backend_reason == why
        with pytest.raises(RuntimeConfigError, match=why):
            split.runtime(4096, 1024, 2, backend="compiled")


def test_set_refuses_cache_parameters_of_a_tiered_policy():
    rt = mpl.loads(FOUR_TIERS % (4, 8, 20, "")).runtime(4, 16, 2)
    with pytest.raises(RuntimeConfigError, match="memory tiers instead of a cache block"):
        rt.set("cache.capacity", 2)
    assert rt.set("prefetch.budget", 2) == []


@pytest.mark.parametrize("kw, match", [
    ({"layer_ids": [0, 1]}, "layer_ids must be 4"), ({"layer_ids": [0, 0, 1, 2]}, "distinct"),
    ({"layer_ids": "abcd"}, "decoder-layer ids"), ({"stored_bits": 8}, "16 or 32"),
    ({"stored_bits": True}, "16 or 32")])
def test_bad_tier_arguments_are_clear_errors(kw, match):
    with pytest.raises(RuntimeConfigError, match=match):
        mpl.loads(FOUR_TIERS % (4, 8, 20, "")).runtime(4, 16, 2, **kw)


def test_a_tier_below_one_expert_is_refused():
    text = "policy p { hierarchy { tier hot { location = gpu  capacity = 1MiB  dtype = int4 } } }"
    with pytest.raises(RuntimeConfigError, match="tier 'hot': capacity of 1048576 bytes is smaller than one expert"):
        mpl.loads(text).runtime(4, 16, 2, expert_bytes=1e8)


# ------------------------------------------------------------------ invariants, any policy
_TIER = st.sampled_from(["lru", "lfu", "score", "arc", "frequency_threshold",
                         "weighted_sum(lru = 0.5, lfu = 0.5)", "weighted_sum(score = 1, lru = 0.25)"])


@st.composite
def tiered(draw):
    hot = draw(st.integers(1, 8))
    parts = [f"tier hot {{ location = gpu  capacity = {hot}"
             + ("  residency = always" if draw(st.booleans()) and draw(st.booleans()) else "") + " }"]
    warm = draw(st.booleans())
    if warm:
        parts.append(f"tier warm {{ location = gpu  dtype = {draw(st.sampled_from(['int8', 'int4']))}  "
                     f"capacity = {draw(st.integers(1, 8))}  eviction = {draw(_TIER)} }}")
    disk = draw(st.booleans())
    if disk:
        parts.append(f"tier ram {{ location = cpu  capacity = {draw(st.integers(1, 12))} }}")
        parts.append("tier ssd { location = disk }")
    if warm and draw(st.booleans()):
        parts.append(f"on demote(hot -> warm) {{ mechanism = {draw(st.sampled_from(['copy', 'in_place_requant']))} }}")
    if warm and draw(st.booleans()):
        parts.append(f"on promote(warm -> hot) {{ trigger_threshold = {draw(st.sampled_from([0.05, 0.2, 0.6]))} }}")
    parts.append(f"eviction = {draw(_TIER)}")
    parts.append(f"granularity_split = {draw(st.sampled_from([1, 1, 2, 3]))}")
    rest = draw(st.sampled_from(["", "prefetch { strategy = history  budget = 1 }",
                                 "schedule { mode = cpu_fallback }", "schedule { mode = hybrid }"]))
    return "policy p {\n hierarchy {\n  " + "\n  ".join(parts) + "\n }\n " + rest + "\n}\n"


@prop(40, deadline=None)
@given(tiered(), st.integers(0, 2 ** 16))
def test_every_tier_keeps_its_capacity_and_gpu_tiers_hold_a_key_once(text, seed):
    try:
        pol = mpl.loads(text)
    except mpl.PolicyError:
        return                                # (a combination the checker refuses)
    rt = pol.runtime(3, 8, 2, backend="pure")      # (reads the pure runtime's tiers)
    r = random.Random(seed)
    impl = rt._impl
    for i in range(60):
        rt.dispatch(i % 3, r.sample(range(8), r.choice([1, 2, 2, 3])), tokens=r.choice([1, 1, 4]))
        for st_ in impl._states:
            gpu = [c for c, t in zip(st_.caches, st_.spec.tiers) if t.kind == "gpu"]
            seen = set()
            for c in gpu:
                assert len(c.resident) <= c.capacity
                assert not (seen & set(c.resident))
                seen |= set(c.resident)
                assert len(set(c.resident.values())) == len(c.resident)   # one key per slot
            for c in st_.caches:
                if c is not None:
                    assert len(c.resident) <= c.capacity
                    assert set(c.store.keys()) == set(c.resident)
    s = rt.stats()
    served = sum(row["hits"] for row in s["tiers"])
    assert served == s["accesses"]
