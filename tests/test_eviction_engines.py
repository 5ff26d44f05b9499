"""The serving engines' eviction rules (crf, classlru, vllm_lfru) and the layer-aware
farthest_layer: each against a small reference written from its published description
(docs/runtime.md, "Eviction rules of serving engines"), decision by decision on random
routing, in shared and per-layer caches; the same replay on both backends; the invariants
every plan keeps with prefetch, triggers and adapt rules around them."""

from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

import mpl
from mpl import features as _features
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.runtime.eviction import RULES
from mpl.runtime.plan import STREAM
from property_profiles import prop
from runtime_helpers import runtime_for, zipf_trace


def outcomes(plan):
    """Per expert: ('hit',) | ('load', victim) | ('stream',)."""
    loads = {ld.key: ld for ld in plan.loads}
    out = []
    for e, h, w in zip(plan.experts, plan.hit, plan.where):
        if h:
            out.append(("hit",))
        elif w == STREAM:
            out.append(("stream",))
        else:
            out.append(("load", loads[(plan.layer, e)].victim))
    return out


class Ref:
    """One demand cache of ``cap`` keys; a dispatch's keys are in use (never victims); the
    step advances when a layer is not above the previous one (as a model's forward pass)."""

    def __init__(self, cap):
        self.cap = cap
        self.res = set()
        self.step = -1
        self.prev_layer = None
        self.tick = 0

    def dispatch(self, layer, experts):
        if self.prev_layer is None or layer <= self.prev_layer:
            self.step += 1
        self.prev_layer = layer
        self.layer = layer
        inuse = {(layer, e) for e in experts}
        out = []
        for e in experts:
            key = (layer, e)
            self.tick += 1
            if key in self.res:
                self.used(key, hit=True)
                out.append(("hit",))
                continue
            self.used(key, hit=False)
            victim = None
            if len(self.res) >= self.cap:
                victim = self.victim(inuse)
                if victim is None:
                    out.append(("stream",))
                    continue
                self.res.discard(victim)
                self.gone(victim)
            self.res.add(key)
            self.loaded(key)
            out.append(("load", victim))
        return out

    def gone(self, key):
        pass

    def loaded(self, key):
        pass


def floor_log2(x: float) -> int:
    c = 0
    while 2.0 ** (c + 1) <= x:
        c += 1
    return c


class RefCRF(Ref):
    """llama.cpp CRF: per key crf = crf * 2^(-(now - last)/H) + 1 at each step using it, kept
    after eviction; the victim has the lowest decayed CRF (ties: least recent, then the
    earliest loaded)."""

    def __init__(self, cap, h):
        super().__init__(cap)
        self.h = h
        self.crf, self.last, self.seq, self.n = {}, {}, {}, 0

    def used(self, key, hit):
        if key in self.last and self.last[key] == self.step:
            return
        old = self.crf.get(key)
        self.crf[key] = 1.0 if old is None else old * 2.0 ** (-(self.step - self.last[key]) / self.h) + 1.0
        self.last[key] = self.step

    def loaded(self, key):
        self.n += 1
        self.seq[key] = self.n

    def victim(self, inuse):
        cand = [k for k in self.res if k not in inuse]
        return min(cand, key=lambda k: (self.crf[k] * 2.0 ** (-(self.step - self.last[k]) / self.h),
                                        self.last[k], self.seq[k]), default=None)


class RefClassLRU(RefCRF):
    """llama.cpp ClassLRU: class = min(7, floor(log2 CRF)) as of the last use; the victim,
    among residents not used this step, maximises age / 2^class (ties: lower class, then the
    least recent use)."""

    def used(self, key, hit):
        super().used(key, hit)
        self.cls = getattr(self, "cls", {})
        self.order = getattr(self, "order", {})
        self.cls[key] = min(7, floor_log2(self.crf[key]))
        self.order[key] = self.tick

    def victim(self, inuse):
        best = None
        for k in self.res:
            if k in inuse or self.last[k] == self.step:
                continue
            age = self.step - self.last[k]
            score = (age / 2 ** self.cls[k], -self.cls[k], -self.order[k])
            if best is None or score > best[0]:
                best = (score, k)
        return None if best is None else best[1]


class RefVLLM(Ref):
    """vLLM CachedWeightProvider: clock +1 per access; entries [freq, last]; evict the lowest
    freq / (clock - last + 1) among the keys not needed now, first in load order on ties."""

    def __init__(self, cap):
        super().__init__(cap)
        self.lru = {}
        self.clock = 0

    def used(self, key, hit):
        if hit:
            self.clock += 1
            self.lru[key][0] += 1
            self.lru[key][1] = self.clock

    def loaded(self, key):
        self.clock += 1
        self.lru[key] = [1, self.clock]

    def gone(self, key):
        del self.lru[key]

    def victim(self, inuse):
        best_key, best_score = None, float("inf")
        for k, (freq, last) in self.lru.items():
            if k in inuse:
                continue
            score = freq / (self.clock - last + 1)
            if score < best_score:
                best_score, best_key = score, k
        return best_key


class RefFarthest(Ref):
    """Evict the key of the layer the pass reaches last from the current one (its distance
    (layer - cur - 1) mod L is the largest); least recent among them."""

    def __init__(self, cap, L):
        super().__init__(cap)
        self.L = L
        self.t = {}

    def used(self, key, hit):
        self.t[key] = self.tick

    def victim(self, inuse):
        cand = [k for k in self.res if k not in inuse]
        return max(cand, key=lambda k: ((k[0] - self.layer - 1) % self.L, -self.t[k]), default=None)


REFS = {
    "crf": lambda cap, L, h: RefCRF(cap, h),
    "classlru": lambda cap, L, h: RefClassLRU(cap, h),
    "vllm_lfru": lambda cap, L, h: RefVLLM(cap),
    "farthest_layer": lambda cap, L, h: RefFarthest(cap, L),
}


def trace(steps, L, E, K, seed):
    # two phases with different popularity: old favourites must age out
    return zipf_trace(steps // 2, L, E, K, seed=seed) + \
        zipf_trace(steps - steps // 2, L, E, K, seed=seed + 1000)


def check(rule, cap, *, per_layer, L, E, K, steps, seed, h=4):
    values = {"cache.capacity": cap, "cache.eviction": rule, "cache.crf_half_life": h}
    blocks = ("cache",)
    if per_layer:
        values.update({"per_layer.min_capacity": 1, "per_layer.max_capacity": cap})
        blocks = ("cache", "per_layer")
    rt = runtime_for(values, L=L, E=E, K=K, blocks=blocks)
    refs = [REFS[rule](cap, L, h) for _ in range(L if per_layer else 1)]
    decisions = streams = victims = 0
    for n, (layer, experts, _w) in enumerate(trace(steps, L, E, K, seed)):
        got = outcomes(rt.dispatch(layer, experts))
        # a per-layer cache sees only its layer, whose every dispatch is a new step
        ref = refs[layer if per_layer else 0]
        want = ref.dispatch(layer, experts)
        assert got == want, f"{rule} dispatch {n} (layer {layer}, experts {experts}): {got} != {want}"
        decisions += len(got)
        streams += got.count(("stream",))
        victims += sum(1 for o in got if o[0] == "load" and o[1] is not None)
    assert rt.stats()["accesses"] == decisions
    return victims, streams


@pytest.mark.parametrize("rule", sorted(REFS))
@pytest.mark.parametrize("cap", [1, 3, 7, 12])
@pytest.mark.parametrize("per_layer", [False, True])
def test_rule_matches_its_reference(rule, cap, per_layer):
    victims, _ = check(rule, cap if not per_layer else max(1, cap // 3), per_layer=per_layer,
                       L=3, E=10, K=3, steps=160, seed=cap + 17 * len(rule))
    assert victims > 0


@given(rule=st.sampled_from(sorted(REFS)), cap=st.integers(1, 14), L=st.integers(1, 5),
       E=st.integers(3, 12), K=st.integers(1, 3), h=st.sampled_from([1, 2, 3, 8, 128]),
       seed=st.integers(0, 10 ** 6), per_layer=st.booleans())
@example(rule="classlru", cap=2, L=1, E=3, K=2, h=1, seed=0, per_layer=False)
@prop(60)
def test_rules_match_references_on_random_shapes(rule, cap, L, E, K, h, seed, per_layer):
    K = min(K, E)
    check(rule, cap, per_layer=per_layer, L=L, E=E, K=K, steps=40, seed=seed, h=h)


def test_classlru_streams_when_every_resident_was_used_this_step():
    """A shared cache smaller than one step: what the step already used is kept, the rest
    streams (LRU would evict the step's own keys and hit nothing the next step)."""
    _, streams = check("classlru", 4, per_layer=False, L=4, E=6, K=2, steps=30, seed=3)
    assert streams > 0


def test_farthest_layer_beats_lru_on_a_cyclic_shared_cache():
    """Below one step of keys, LRU gets nothing on a fixed cyclic pattern; the layer-aware
    rule keeps the keys of the layers it reaches next."""
    L, K = 8, 2
    pattern = [(layer, [2 * layer % 6, (2 * layer + 1) % 6]) for layer in range(L)]

    def rate(rule):
        rt = runtime_for({"cache.capacity": 10, "cache.eviction": rule}, L=L, E=6, K=K)
        for _ in range(30):
            for layer, ex in pattern:
                rt.dispatch(layer, ex)
        return rt.stats()["hit_rate"]

    assert rate("lru") == 0.0
    assert rate("farthest_layer") > 0.3


def test_crf_a_dispatch_repeating_its_step_runs_alike_on_both_backends():
    """A step given twice (rt.dispatch(..., step=s)) uses a key twice in one step: the second
    use changes nothing (the pure store once pushed a heap entry equal to the live one and
    compared the two entries' keys: a TypeError)."""
    pol = mpl.loads("policy p { cache { capacity = 2 eviction = crf } }")
    pure = pol.runtime(2, 4, 1, backend="pure")
    comp = pol.runtime(2, 4, 1)
    calls = [(0, [1], 0), (0, [1], 0), (0, [2], 0), (0, [1, 3], 1), (0, [1], 1), (0, [2], 2)]
    plans = [[(p.hit, p.evicted) for p in (rt.dispatch(layer, ex, step=step)
                                          for layer, ex, step in calls)] for rt in (pure, comp)]
    assert plans[0] == plans[1]
    assert plans[0][1][0] == [True]


def test_clocked_rules_are_the_ones_the_generator_knows():
    assert set(_features.CLOCKED_EVICTIONS) == {name for name, cls in RULES.items() if cls.clocked}


def test_every_list_of_rules_is_the_schemas():
    """The rules the runtime has, the sides of a segmented pair, the compiled engine's rules
    and the tuner's grid all follow the schema's eviction values."""
    from mpl import schema
    from mpl.runtime import compiled
    from mpl.runtime.eviction import SEGMENT_RULES
    from mpl.tune import GRID_EVICTIONS
    enum = schema.param("cache.eviction").enum
    runnable = {e.name for e in enum if not e.replay_only} - {"fallback"}   # (lfu | lru)
    assert set(RULES) == runnable
    assert set(SEGMENT_RULES) == {e.name for e in enum if e.segment}
    assert set(GRID_EVICTIONS) == {e.name for e in enum if e.grid}
    if compiled.available():
        assert compiled.rule_names() == runnable


@pytest.mark.parametrize("rule", sorted(REFS))
def test_engine_rules_replay_the_same_on_both_backends(rule):
    """The compiled engine holds these rules: a replay gives the same statistics and clocks
    as with MPL_PURE."""
    from mpl.sim import synthesize
    from mpl.sim.replay import replay

    tr = synthesize("olmoe-1b-7b", steps=20, seed=1)
    for text in (f"policy p {{ cache {{ capacity = 96 eviction = {rule} }} }}",
                 f"policy p {{ cache {{ capacity = 6 eviction = {rule} }} per_layer {{ }} "
                 f"prefetch {{ strategy = history budget = 2 }} }}"):
        pol = mpl.loads(text)
        a = replay(pol, tr, belady=False)
        with forced("pure"):
            b = replay(pol, tr, belady=False)
        assert a.stats == b.stats and a.sim == b.sim
        rt = pol.runtime(16, 64, 8)
        assert rt.backend == ("compiled" if compiled.available() else "pure")


@pytest.mark.parametrize("seed", range(12))
def test_plans_stay_consistent_with_the_new_rules(seed, monkeypatch):
    """The randomised-policy invariants (tests/test_runtime_invariants.py: prefetch, pins,
    triggers, per-layer rebalancing, adapt rules switching rules) with the new rules."""
    import test_runtime_invariants as inv

    monkeypatch.setattr(inv, "EVICTIONS", sorted(REFS) + ["lru"])
    inv.test_plans_are_consistent(seed)
