"""Memory tiers on both backends (SPEC §5 "Backends", §12): a tiered policy the compiled engine
holds (mpl/runtime/c/tiers.c) gives the pure runtime's Plans (every step with its tier and
precision) and statistics (``stats()["tiers"]`` per tier included), dispatch by dispatch and
in a replay, for random hierarchies and bands drawn by hypothesis (derandomised) over random
dispatches; the policies it does not hold run pure for their whole life and say why; hostile
arguments behave the same on both."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, strategies as st

import mpl
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.runtime.core import DispatchError, RuntimeConfigError
from mpl.sim import synthesize
from mpl.sim.replay import ReplayError
from mpl.trace import Dispatch, Trace, TraceHeader
from property_profiles import prop
from tier_helpers import FOUR, four_in_parts

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

SETTINGS = prop(80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.data_too_large])

RULES = ["lru", "lfu", "score", "frequency_threshold", "arc", "s3fifo", "lfru", "crf", "classlru",
         "vllm_lfru", "farthest_layer", "least_stale"]
#: a tier's eviction: a rule of the engine, or a weighted_sum of single-queue rules
EVICTIONS = RULES + ["weighted_sum(lru = 0.5, lfu = 0.5)", "weighted_sum(lfu = 1, score = 0.25)",
                     "weighted_sum(frequency_threshold = 0.3, lru = 0.7, score = 0.1)",
                     "weighted_sum(score = 1, lru = 1, lfu = 0.5, frequency_threshold = 0.5)"]
DTYPES = ["", "", "  dtype = fp16", "  dtype = int8", "  dtype = int4", "  dtype = bf16", "  dtype = fp32"]
#: a tier may hold a dtype_ladder instead
LADDERS = ["  dtype_ladder = [fp16, int8, int4]", "  dtype_ladder = [int8, int4]",
           "  dtype_ladder = [bf16, int4]", "  dtype_ladder = [fp32, fp16, int8]"]
REST = [
    "",
    "prefetch { strategy = history  budget = 2 }",
    "prefetch { strategy = affinity  budget = 3  lookahead = 2 }\n schedule { mode = cpu_fallback }",
    "prefetch { strategy = lookahead  budget = 2 }\n schedule { mode = hybrid  offload_threshold_ms = 5 }",
    "prefetch { strategy = learned  budget = 2 }",
    "schedule { mode = cpu_fallback }",
    "schedule { mode = gpu_only  priority_routing = true }",
    "monitor { window = 20  warmup = none }\n adapt {\n  when hit_rate < 0.5 for 10 accesses "
    "{ prefetch.strategy = history  prefetch.budget = 2  cache.capacity = 3 }\n"
    "  when miss_rate > 0.6 { schedule.mode = cpu_fallback  trigger flush }\n }",
    "monitor { window = 16 }\n adapt {\n  when miss_rate > 0.4 { trigger memory_pressure  cache.eviction = lfu }\n"
    "  when hit_rate > 0.5 { trigger flush  trigger ttl }\n }",
    "monitor { window = 8 }\n adapt {\n  when hit_rate < 0.9 { cache.capacity = 1MB  cache.ttl = 4 steps }\n }",
]


def tier_set(draw, name: str) -> str:
    """The tiers of a hierarchy or a band (its items)."""
    parts = []
    ngpu = draw(st.integers(0, 3))
    names, low = [], set()
    for i in range(ngpu):
        always = "  residency = always" if draw(st.integers(0, 5)) == 0 else ""
        ev = f"  eviction = {draw(st.sampled_from(EVICTIONS))}" if draw(st.booleans()) else ""
        dt = draw(st.sampled_from(DTYPES + LADDERS)) if i else draw(st.sampled_from(DTYPES[:3] + DTYPES[3:4] + LADDERS))
        parts.append(f"tier g{i}{name} {{ location = gpu  capacity = {draw(st.integers(3, 6))}{dt}{always}{ev} }}")
        names.append(f"g{i}{name}")
        if "int" in dt:
            low.add(names[-1])
    disk = draw(st.booleans())
    if disk or (ngpu == 0) or draw(st.booleans()):
        ev = f"  eviction = {draw(st.sampled_from(EVICTIONS))}" if draw(st.booleans()) else ""
        lad = draw(st.sampled_from(LADDERS[:2])) if draw(st.integers(0, 4)) == 0 else ""
        parts.append(f"tier ram{name} {{ location = cpu  capacity = {draw(st.integers(3, 12))}{lad}{ev} }}")
        names.append(f"ram{name}")
    if disk:
        parts.append(f"tier ssd{name} {{ location = disk }}")
        names.append(f"ssd{name}")
    for a, b in zip(names, names[1:]):
        if b in low and draw(st.booleans()):
            parts.append(f"on demote({a} -> {b}) {{ mechanism = "
                         f"{draw(st.sampled_from(['copy', 'in_place_requant']))} }}")
        if draw(st.integers(0, 2)) == 0:
            parts.append(f"on promote({b} -> {a}) {{ trigger_threshold = "
                         f"{draw(st.sampled_from([0, 0.05, 0.2, 0.5]))} }}")
    parts.append(f"eviction = {draw(st.sampled_from(EVICTIONS))}")
    if draw(st.integers(0, 2)) == 0:            # experts cached as parts
        parts.append(f"granularity_split = {draw(st.sampled_from([2, 3, 4]))}")
    return "\n  ".join(parts)


@st.composite
def tiered(draw):
    rest = draw(st.sampled_from(REST))
    if draw(st.integers(0, 2)) == 0:            # bands over the model's decoder layers
        cut = draw(st.integers(0, 2))
        body = (" per_layer_hierarchy {\n  band layers = 0..%d {\n  %s\n  }\n  band layers = %d..3 {\n  %s\n  }\n }\n"
                % (cut, tier_set(draw, "a"), cut + 1, tier_set(draw, "b")))
    else:
        body = " hierarchy {\n  " + tier_set(draw, "") + "\n }\n"
    return "policy p {\n" + body + " " + rest + "\n}\n"


def dispatches(seed: int, n: int = 160, L: int = 4, E: int = 10):
    r = random.Random(seed)
    out = []
    for i in range(n):
        layer = i % L if r.random() < 0.9 else r.randrange(L)
        ex = r.sample(range(E), r.choice([1, 2, 2, 3]))
        if r.random() < 0.1:
            ex = ex + ex[:1]                     # a repeated expert
        w = [r.random() + 0.01 for _ in ex] if r.random() < 0.6 else None
        tokens = r.choice([1, 1, 1, 3, 40])
        preds = {(layer + 1) % L: r.sample(range(E), 3)} if r.random() < 0.3 else None
        out.append((layer, ex, w, tokens, preds))
    return out


def small_trace(seed: int, steps: int = 30, L: int = 4, E: int = 10, K: int = 2) -> Trace:
    """A trace of L MoE layers (decoder layers 0..L-1): Zipf-like picks, some tokens > 1,
    weights and lookahead predictions on some dispatches."""
    r = random.Random(seed)
    pw = [1.0 / (i + 1) ** 1.1 for i in range(E)]
    ds = []
    for step in range(steps):
        for layer in range(L):
            rows = []
            for _ in range(r.choice([1, 1, 1, 3])):
                row = []
                while len(row) < K:
                    e = r.choices(range(E), pw)[0]
                    if e not in row:
                        row.append(e)
                rows.append(row)
            ws = [[r.random() + 0.01 for _ in row] for row in rows] if r.random() < 0.5 else None
            preds = {(layer + 1) % L: r.sample(range(E), 3)} if r.random() < 0.3 else None
            ds.append(Dispatch(step, layer, rows, ws, preds))
    return Trace(TraceHeader("tiny", L, tuple(range(L)), E, K, expert_bytes=50_000_000), ds)


def state(rt) -> tuple:
    return (rt.stats(), rt.resident(), rt.store_keys(), rt.capacities(), rt.step, rt.metrics(),
            rt.monitor_log(), rt.values())


def pair(pol, L=4, E=10, K=2):
    a = pol.runtime(L, E, K, backend="pure")
    b = pol.runtime(L, E, K)
    return a, b


def loads(text):
    try:
        return mpl.loads(text)
    except mpl.PolicyError:
        return None                 # (a combination the checker refuses)


@needs_engine
@SETTINGS
@given(tiered(), st.integers(0, 2 ** 16))
def test_random_tiered_policies_decide_the_same_on_both_backends(text, seed):
    pol = loads(text)
    if pol is None:
        return
    a, b = pair(pol)
    assert b.backend == "compiled", b.backend_reason
    for layer, ex, w, tokens, preds in dispatches(seed):
        pa = a.dispatch(layer, ex, w, tokens, predictions=preds)
        pb = b.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa == pb
    assert state(a) == state(b)
    assert a.stats()["tiers"] and "approximate_by_dtype" in b.stats()


@needs_engine
@pytest.mark.parametrize("size", ["1MB", "2GiB"])
def test_a_cache_size_an_adapt_rule_sets_on_tiers_is_only_recorded(size):
    """A policy with memory tiers has no cache block: an adapt rule's `cache.capacity` (the
    checker warns, MPL422) is recorded in the log, never turned into slots, on both
    backends; a size smaller than one expert (which gives no slot) included."""
    pol = mpl.loads("policy p {\n per_layer_hierarchy {\n  band layers = 0..3 { tier hot { "
                    "location = gpu  capacity = 2 } }\n }\n monitor { window = 4 }\n adapt {\n"
                    f"  when hit_rate < 0.9 {{ cache.capacity = {size} }}\n }}\n}}\n")
    a, b = pair(pol)
    assert b.backend == "compiled", b.backend_reason
    for layer, ex, w, tokens, preds in dispatches(3, n=40):
        assert a.dispatch(layer, ex, w, tokens, predictions=preds) == \
            b.dispatch(layer, ex, w, tokens, predictions=preds)
    assert state(a) == state(b)
    log = b.stats()["adapt_log"]
    assert log and {e["key"] for e in log} == {"cache.capacity"}
    assert b.capacities() == a.capacities() == [2]


@needs_engine
@prop(25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiered(), st.integers(0, 2 ** 16))
def test_random_tiered_policies_replay_the_same_on_both_backends(text, seed):
    pol = loads(text)
    if pol is None:
        return
    t = small_trace(seed)
    try:
        with forced("pure"):
            ra = pol.replay(t)
    except ReplayError as e:        # does not fit the trace's shape (attach would refuse it)
        with pytest.raises(ReplayError) as other:
            pol.replay(t)
        assert str(other.value) == str(e) and "does not fit the trace's model" in str(e)
        return
    rb = pol.replay(t)
    assert ra.stats == rb.stats and ra.sim == rb.sim and ra.belady == rb.belady


@needs_engine
def test_a_four_tier_policy_runs_compiled_with_every_kind_of_step():
    pol = mpl.loads(FOUR)
    a, b = pair(pol, 2, 16, 2)
    assert b.backend == "compiled" and b.backend_reason is None
    ops = set()
    for layer, ex, w, tokens, preds in dispatches(11, n=300, L=2, E=16):
        pa, pb = a.dispatch(layer, ex, w, tokens), b.dispatch(layer, ex, w, tokens)
        assert pa == pb
        ops |= {s.op for s in pb.steps}
        assert all(type(x) is type(y) for x, y in zip(pa.steps, pb.steps))
    assert ops == {"read", "promote", "demote", "requant", "serve"}
    assert state(a) == state(b)
    rows = b.stats()["tiers"]
    assert [r["tier"] for r in rows] == ["hot", "warm", "ram", "ssd"]
    assert b.stats()["approximate_computes"] > 0
    # set() between dispatches, then more dispatches
    assert a.set("prefetch.budget", 1) == b.set("prefetch.budget", 1)
    for layer, ex, w, tokens, preds in dispatches(12, n=60, L=2, E=16):
        assert a.dispatch(layer, ex, w, tokens) == b.dispatch(layer, ex, w, tokens)
    assert state(a) == state(b)


@needs_engine
def test_a_four_tier_policy_replays_the_same_on_both_backends():
    pol = mpl.loads(FOUR)
    t = synthesize("deepseek-v2-lite", steps=8, seed=2)
    with forced("pure"):
        ra = pol.replay(t)
    rb = pol.replay(t)
    assert ra.stats == rb.stats and ra.sim == rb.sim and ra.gap == rb.gap
    assert rb.stats["tiers"][3]["reads"] > 0


@pytest.mark.parametrize("text, shape, why", [
    ("policy p { hierarchy { tier hot { location = gpu  capacity = 3 }  granularity_split = 64 } }",
     (128, 1024, 2), "131,072 layers x experts in 64 parts each are more keys than the compiled "
     "engine's 4,194,304"),
])
def test_what_the_engine_does_not_hold_runs_pure_and_says_why(text, shape, why):
    pol = mpl.loads(text)
    rt = pol.runtime(*shape)
    assert rt.backend == "pure"
    if compiled.available():
        assert rt.backend_reason == why
        with pytest.raises(RuntimeConfigError, match=why):
            pol.runtime(*shape, backend="compiled")


@needs_engine
@pytest.mark.parametrize("split", [2, 3])
def test_granularity_split_runs_compiled_part_by_part(split):
    """Experts cached as parts: a hit only when every part is on the device (``where`` a tuple
    of the parts' slots), loads, evictions and tier steps per part, statistics alike."""
    pol = mpl.loads(four_in_parts(split))
    a, b = pair(pol, 2, 16, 2)
    assert b.backend == "compiled" and b.backend_reason is None
    tuples = partial = 0
    for layer, ex, w, tokens, preds in dispatches(11, n=300, L=2, E=16):
        pa, pb = a.dispatch(layer, ex, w, tokens), b.dispatch(layer, ex, w, tokens)
        assert pa == pb
        tuples += sum(type(x) is tuple and len(x) == split for x in pb.where)
        partial += sum(type(x) is tuple and not h and any(type(s) is int for s in x)
                       for x, h in zip(pb.where, pb.hit))
        assert all(len(k) == 3 for k, *_ in pb.loads) and all(len(s.key) == 3 for s in pb.steps)
    assert tuples and partial        # whole hits and accesses with some parts on the device
    assert state(a) == state(b)
    assert all(len(k) == 3 for k in b.resident())


class _Mutating(float):
    """A weight whose conversion changes the caller's lists."""

    def __float__(self):
        self.target.clear()
        return 0.5


@needs_engine
@pytest.mark.parametrize("split", [1, 3])
def test_hostile_arguments_behave_the_same_on_both_backends(split):
    pol = mpl.loads(four_in_parts(split))
    a, b = pair(pol, 2, 16, 2)
    for rt in (a, b):
        rt.dispatch(0, [1, 2])
        rt.dispatch(1, [])
        rt.dispatch(0, [7] * 40 + [8], tokens=9)
    cases = [((0, [99]), {}), ((5, [1]), {}), ((0, [1]), {"step": 2 ** 70}), ((0, [1]), {"tokens": 0}),
             ((0, [1, 2], [1.0]), {}), ((0, [1]), {"step": -1}), ((0, [-1]), {}), ((0, [16]), {})]
    for args, kw in cases:
        errs = []
        for rt in (a, b):
            with pytest.raises(DispatchError) as e:
                rt.dispatch(*args, **kw)
            errs.append(str(e.value))
        assert errs[0] == errs[1]
    plans = []
    for rt in (a, b):
        ex = [3, 4]
        w = _Mutating(0.5)
        w.target = ex
        plans.append(rt.dispatch(0, ex, [w, 0.25]))
    assert plans[0] == plans[1]
    big = 2 ** 62
    assert a.dispatch(1, [5], step=big) == b.dispatch(1, [5], step=big)
    for rt in (a, b):
        with pytest.raises(DispatchError):
            rt.dispatch(0, [5])                 # the step counter would pass 2**62
    assert state(a) == state(b)
    assert not math.isnan(b.stats()["hit_rate"])


WEIGHTED = """policy w {
    hierarchy {
        tier hot  { location = gpu  capacity = 3  eviction = weighted_sum(lru = 0.5, lfu = 0.5) }
        tier warm { location = gpu  dtype = int8  capacity = 4
                    eviction = weighted_sum(frequency_threshold = 0.3, score = 1, lru = 0.2) }
        tier ram  { location = cpu  capacity = 6  eviction = weighted_sum(lfu = 1, score = 0.25) }
        tier ssd  { location = disk }
        eviction = lru
    }
    prefetch { strategy = history  budget = 2 }
}
"""


@needs_engine
def test_weighted_sum_tier_eviction_runs_compiled():
    pol = mpl.loads(WEIGHTED)
    a, b = pair(pol, 2, 16, 2)
    assert b.backend == "compiled" and b.backend_reason is None
    for layer, ex, w, tokens, preds in dispatches(5, n=300, L=2, E=16):
        assert a.dispatch(layer, ex, w, tokens, predictions=preds) == \
            b.dispatch(layer, ex, w, tokens, predictions=preds)
    assert state(a) == state(b)
    assert sum(r["evictions"] for r in b.stats()["tiers"]) > 0
    t = synthesize("deepseek-v2-lite", steps=6, seed=3)
    with forced("pure"):
        ra = pol.replay(t)
    rb = pol.replay(t)
    assert ra.stats == rb.stats and ra.sim == rb.sim


LADDER = [(0, 16, 1e6, 1), (1, 8, 5e5, 0), (2, 4, 2.5e5, 0)]
BAD_TIERS = [(11, r) for r in (
    (("lru", 0.5),), (("lru", 0.5), ("arc", 0.5)), (("lru", 0.5), ("nope", 0.5)),
    (("lru", 0.0), ("lfu", 0.5)), (("lru", float("nan")), ("lfu", 0.5)), (("lru", float("inf")), ("lfu", 1.0)),
    (("lru", 0.5), ("lfu", "x")), (("lru", 0.5), ("lfu", 0.5, 1)), ("lru", 0.5), (("lru", 0.5),) * 9, 7)] + [
    (12, r) for r in (tuple(LADDER[:1]), tuple(LADDER * 3), ((0, 16, 1e6),) + tuple(LADDER[1:]),
                      ((9, 16, 1e6, 1),) + tuple(LADDER[1:]), ((0, 12, 1e6, 1),) + tuple(LADDER[1:]),
                      ((0, 16, -1.0, 1),) + tuple(LADDER[1:]), ((0, 16, float("inf"), 1),) + tuple(LADDER[1:]),
                      ((0, 16, 1e6, 1), [1, 8, 5e5, 0]), 3)] + [(13, b) for b in (0, -1, 2 ** 62 + 1, 2 ** 64)]


@needs_engine
@pytest.mark.parametrize("at, value", BAD_TIERS)
def test_a_bad_tier_in_the_engine_configuration_is_an_exception(at, value):
    """A hostile weighted_sum, dtype_ladder or ladder size (on the warm tier of WEIGHTED, a
    lower gpu tier) is refused with a Python exception; a valid ladder there is taken."""
    rt = mpl.loads(WEIGHTED).runtime(2, 16, 2, backend="pure")
    cfg = compiled.engine_config(rt._lay, rt._impl.p, {}, (), (), ())
    stored, window, level_of, dtypes, levels = cfg["tiers"]
    label, layers, gpu, disk, read_into, split, tiers = levels[0]
    dtypes = ("fp16", "int8", "int4")

    def build(at, value, budget=None):
        t = list(tiers[1])
        t[at] = value
        if budget is not None:
            t[13] = budget
        cfg["tiers"] = (stored, window, level_of, dtypes,
                        ((label, layers, gpu, disk, read_into, split, (tiers[0], tuple(t)) + tiers[2:]),))
        return compiled.engine.Engine(cfg)

    build(12, tuple(LADDER), 64)
    with pytest.raises((RuntimeConfigError, TypeError, ValueError, OverflowError)):
        if at == 13:
            build(12, tuple(LADDER), value)
        else:
            build(at, value, 64 if at == 12 else None)


LADDERED = """policy l {
    hierarchy {
        tier hot  { location = gpu  capacity = 3  eviction = lfu }
        tier warm { location = gpu  capacity = 4  dtype_ladder = [fp16, int8, int4] }
        tier ram  { location = cpu  capacity = 8  dtype_ladder = [fp16, int8]  eviction = weighted_sum(lru = 0.5, lfu = 1) }
        tier ssd  { location = disk }
        on promote(warm -> hot) { trigger_threshold = 0.1 }
        eviction = lru
    }
    prefetch { strategy = history  budget = 2 }
}
"""


@needs_engine
def test_dtype_ladders_below_the_top_tier_run_compiled_with_every_kind_of_step():
    pol = mpl.loads(LADDERED)
    a, b = pair(pol, 2, 16, 2)
    assert b.backend == "compiled" and b.backend_reason is None
    ops = set()
    for layer, ex, w, tokens, preds in dispatches(7, n=400, L=2, E=16):
        pa = a.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa == b.dispatch(layer, ex, w, tokens, predictions=preds)
        ops |= {s.op for s in pa.steps}
    assert ops == {"read", "promote", "demote", "requant", "serve", "leave"}
    assert state(a) == state(b)
    warm = b.stats()["tiers"][1]
    assert warm["requantized"] > 0 and all(warm["served_at"].values())
    t = synthesize("deepseek-v2-lite", steps=6, seed=4)
    with forced("pure"):
        ra = pol.replay(t)
    rb = pol.replay(t)
    assert ra.stats == rb.stats and ra.sim == rb.sim


TOP_LADDER = """policy t {
    hierarchy {
        tier hot  { location = gpu  capacity = 3  dtype_ladder = [fp16, int8, int4]  eviction = lfu }
        tier warm { location = gpu  capacity = 3  dtype_ladder = [int8, int4] }
        tier ram  { location = cpu  capacity = 6 }
        tier ssd  { location = disk }
        on demote(hot -> warm) { mechanism = in_place_requant }
    }
    prefetch { strategy = history  budget = 2 }
    schedule { mode = hybrid  offload_threshold_ms = 5 }
    monitor { window = 16 }
    adapt {
        when miss_rate > 0.6 { trigger memory_pressure }
        when hit_rate > 0.5 { trigger flush }
    }
}
"""


@needs_engine
def test_a_top_tier_ladder_runs_compiled_its_hits_at_their_rungs():
    pol = mpl.loads(TOP_LADDER)
    a, b = pair(pol, 2, 16, 2)
    assert b.backend == "compiled" and b.backend_reason is None
    serves = 0
    for layer, ex, w, tokens, preds in dispatches(9, n=400, L=2, E=16):
        pa = a.dispatch(layer, ex, w, tokens, predictions=preds)
        assert pa == b.dispatch(layer, ex, w, tokens, predictions=preds)
        serves += sum(1 for s in pa.steps if s.op == "serve" and s.source == 0)
        assert state(a) == state(b)
    hot = b.stats()["tiers"][0]
    assert serves > 0 and hot["requantized"] > 0 and hot["approximate"] > 0
    t = synthesize("deepseek-v2-lite", steps=6, seed=5)
    with forced("pure"):
        ra = pol.replay(t)
    rb = pol.replay(t)
    assert ra.stats == rb.stats and ra.sim == rb.sim


@pytest.mark.parametrize("backend", ["pure", "compiled"])
def test_a_set_without_a_gpu_tier_keeps_its_first_tiers_clock(backend):
    # least_stale on the host tier of a set with no gpu tier: a new step makes the keys of the
    # last one stale, a hit moves its key back to current, and the victim is stale's head
    pol = mpl.loads("policy p {\n  hierarchy {\n"
                    "    tier host { location = cpu  capacity = 2  eviction = least_stale }\n"
                    "    tier ssd { location = disk }\n  }\n}")
    rt = pol.runtime(1, 8, 2, backend=backend)
    assert rt.backend == backend
    rt.dispatch(0, [0, 1], step=0)
    rt.dispatch(0, [0], step=1)              # (0, 0) hit: current again; (0, 1) stays stale
    (read,) = rt.dispatch(0, [2], step=1).steps
    assert (read.op, read.key, read.victim) == ("read", (0, 2), (0, 1))


@needs_engine
@pytest.mark.parametrize("parts, split", [(0, 1), (-1, 1), (65, 1), (2 ** 40, 1), (2 ** 64, 1), (1, 2),
                                          (2, 3), (2, 0), (2, -1), (64, 2)])
def test_a_bad_split_in_the_engine_configuration_is_an_exception(parts, split):
    """The engine's parts per expert and a set's granularity_split: a set never splits into more
    parts than the engine keys, and the key space stays within the engine's."""
    rt = mpl.loads(WEIGHTED).runtime(2, 16, 2, backend="pure")
    cfg = compiled.engine_config(rt._lay, rt._impl.p, {}, (), (), ())
    stored, window, level_of, dtypes, levels = cfg["tiers"]
    lv = list(levels[0])
    lv[5] = split
    cfg["tiers"] = (stored, window, level_of, dtypes, (tuple(lv),))
    cfg["parts"] = parts
    if parts == 64 and split == 2:       # within the key space: taken
        assert compiled.engine.Engine(cfg) is not None
        cfg["num_layers"], cfg["num_experts"] = 2, 2 ** 16
    with pytest.raises((RuntimeConfigError, TypeError, ValueError, OverflowError)):
        compiled.engine.Engine(cfg)
