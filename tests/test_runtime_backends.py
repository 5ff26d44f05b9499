"""The two backends of a runtime, held equal: for random policies (every eviction rule and
segmented pair, pins, TTL, memory pressure, every prefetch strategy one or more layers ahead,
each schedule mode, per-layer caches with every allocation and rebalancing, a monitor, adapt
rules of every metric, comparison and unit with every kind of action) and random call
sequences (good and bad arguments, predictions, explicit steps, several tokens, stalls,
``set``, reads in the middle), the compiled engine and the pure runtime return equal Plans (or
the same DispatchError), and every getter reads the same state; replays of random traces give
the same reports. Derandomized (property_profiles.prop): this is the step-by-step net beside
the behaviour tests, which run on both backends."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, strategies as st

import mpl
from mpl.api import from_ir
from mpl.runtime import compiled
from mpl.runtime.core import DispatchError, RuntimeConfigError
from property_profiles import prop
from runtime_helpers import STATE_EVICTIONS, observable, state_policy

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

SETTINGS = prop(int(os.environ.get("MPL_BACKEND_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def pair(ir, L, E, K, **kw):
    """(compiled, pure) runtimes of one policy."""
    pol = from_ir(ir)
    return (pol.runtime(L, E, K, backend="compiled", **kw),
            pol.runtime(L, E, K, backend="pure", **kw))


def fields(p):
    return (p.step, p.layer, list(p.experts), list(p.where), list(p.hit), list(p.raw_loads),
            list(p.evicted), [tuple(x) for x in p.loads], list(p.steps))


def outcome(fn, *args, **kw):
    """What a call gives: its value (a Plan's fields), or its error's type and message."""
    try:
        r = fn(*args, **kw)
    except (DispatchError, RuntimeConfigError) as e:
        return ("error", type(e).__name__, str(e))
    if hasattr(r, "raw_loads"):
        return ("plan", fields(r))
    return ("value", r)


def calls(L, E, K):
    """One call: mostly a good dispatch, some of every kind of bad argument, hits(), stalls,
    set(), reads."""
    ids = st.integers(0, E - 1)
    good = st.tuples(st.integers(0, L - 1), st.lists(ids, min_size=0, max_size=K, unique=True))

    def weights_for(n):
        return st.one_of(st.none(), st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n))

    @st.composite
    def one(draw):
        layer, ex = draw(good)
        args = [layer, ex]
        kw = {}
        kind = draw(st.sampled_from(["plain"] * 8 + ["weights", "tokens", "bad_layer", "bad_id",
                                                     "float_id", "bool_id", "dup", "bad_w",
                                                     "nan_w", "int_w", "step", "tuple", "kw",
                                                     "tokens0", "predictions", "hits", "stall",
                                                     "set", "read", "big_step", "big_tokens"]))
        if kind == "weights":
            args.append(draw(weights_for(len(ex))))
        elif kind == "tokens":
            args += [draw(weights_for(len(ex))), draw(st.integers(1, 5))]
        elif kind == "bad_layer":
            args[0] = draw(st.sampled_from([-1, L, L + 3, 1.0, True, "0", None]))
        elif kind == "bad_id":
            args[1] = ex + [draw(st.sampled_from([-1, E, E + 5]))]
        elif kind == "float_id":
            args[1] = ex + [float(draw(ids))]
        elif kind == "bool_id":
            args[1] = ex + [True]
        elif kind == "dup" and ex:
            args[1] = ex + [ex[0]]
            args.append([0.5 + 0.1 * i for i in range(len(args[1]))] if draw(st.booleans()) else None)
        elif kind == "bad_w":
            args.append([0.5] * (len(ex) + 1))
        elif kind == "nan_w" and ex:
            args.append([float("nan")] + [0.5] * (len(ex) - 1))
        elif kind == "int_w" and ex:
            args.append([1] * len(ex))
        elif kind == "step":
            kw["step"] = draw(st.sampled_from([0, 3, 10, -1]))
        elif kind == "big_step":
            kw["step"] = draw(st.sampled_from([2**62 - 1, 2**62, 2**62 + 1, 2**63 - 1, 2**64]))
        elif kind == "big_tokens":
            args += [None, draw(st.sampled_from([2**53, 2**53 + 1, 2**63]))]
        elif kind == "kw":   # the mechanism's call: weights=, tokens=, step=, predictions=
            kw["weights"] = draw(weights_for(len(ex)))
            kw["tokens"] = draw(st.integers(1, 4))
            if draw(st.booleans()):
                kw["step"] = draw(st.integers(0, 12))
            kw["predictions"] = draw(st.sampled_from([None, {}]))
        elif kind == "tuple":
            args[1] = tuple(ex)
        elif kind == "tokens0":
            args += [None, draw(st.sampled_from([0, -2, 1.5]))]
        elif kind == "predictions":     # the lookahead's picks (the mechanism passes them)
            t = (layer + 1) % L
            pick = draw(st.lists(ids, max_size=K + 2))
            kw["predictions"] = draw(st.sampled_from([
                {0: list(ex)}, {t: pick}, {t: tuple(pick), (t + 1) % L: pick[::-1]},
                {t: pick + pick[:1]}, {L: pick}, {t: pick + [E]}, {t: set(pick)}, {t: [1.0]}]))
        elif kind == "stall":
            return "add_stall", (draw(st.sampled_from([0.0, 0.25, 3, -1.0, float("nan"), "x"])),), {}
        elif kind == "set":
            return "set", draw(st.sampled_from([
                ("cache.capacity", 3), ("cache.eviction", "lru"), ("cache.eviction", "arc"),
                ("prefetch.budget", 2), ("prefetch.lookahead", 0), ("monitor.window", 5),
                ("schedule.mode", "cpu_fallback"), ("per_layer.rebalance_interval", 0),
                ("cache.frequency_decay", 0.5), ("prefetch.strategy", "history"),
                ("cache.ttl", None), ("per_layer.total_budget", 7), ("nonsense", 1)])), {}
        elif kind == "read":
            return "read", (), {}
        return ("hits" if kind == "hits" else "dispatch"), tuple(args), kw
    return one()


def play(a, b, seq):
    """Each call on both runtimes: the same outcome, and (after a read) the same state."""
    for name, args, kw in seq:
        if name == "read":
            assert observable(a) == observable(b)
            continue
        ga = outcome(getattr(a, name), *args, **kw)
        gb = outcome(getattr(b, name), *args, **kw)
        assert ga == gb, (name, args, kw)


@st.composite
def random_policies(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    r = random.Random(seed)
    ir = state_policy(r, learned=r.random() < 0.2, priority=r.random() < 0.3)
    L = r.randint(1, 5)
    E = r.randint(2, 12)
    K = r.randint(1, min(6, E))
    return ir, L, E, K


@needs_engine
@given(st.data())
@SETTINGS
def test_the_backends_give_the_same_plans_and_state(data):
    ir, L, E, K = data.draw(random_policies())
    try:
        a, b = pair(ir, L, E, K)
    except RuntimeConfigError as e:
        with pytest.raises(RuntimeConfigError, match=str(e)[:30].replace("(", r"\(").replace(")", r"\)")):
            from_ir(ir).runtime(L, E, K, backend="pure")
        return
    assert a.backend == "compiled" and b.backend == "pure"
    seq = data.draw(st.lists(calls(L, E, K), min_size=1, max_size=80))
    play(a, b, seq)
    assert observable(a) == observable(b)


@needs_engine
@pytest.mark.parametrize("rule", STATE_EVICTIONS)
def test_every_rule_long_run(rule):
    """A long run of every rule (a shared and a per-layer cache, prefetch, a monitor that
    switches the rule): the same Plans all along."""
    from runtime_helpers import make_ir, zipf_trace
    from mpl import ir as _ir
    for per_layer in (False, True):
        vals = {"cache.capacity": 5, "cache.eviction": rule, "prefetch.strategy": "history",
                "prefetch.budget": 2, "monitor.window": 20}
        blocks = ["cache", "prefetch", "monitor", "adapt"]
        if per_layer:
            blocks.append("per_layer")
            vals.update({"per_layer.allocation": "entropy", "per_layer.rebalance_interval": 13,
                         "per_layer.min_capacity": 1, "per_layer.max_capacity": 8})
        other = "lfu" if rule != "lfu" else "lru"
        adapt = (_ir.AdaptRule(0, _ir.Condition("hit_rate", "<", 0.5), _ir.Count(10, "accesses"),
                               (_ir.SetAction("cache.eviction", other),)),)
        ir = make_ir(vals, blocks=tuple(blocks), adapt=adapt)
        a, b = pair(ir, 4, 16, 3)
        for layer, ex, w in zipf_trace(150, 4, 16, 3, seed=3, weights=True):
            assert fields(a.dispatch(layer, ex, w)) == fields(b.dispatch(layer, ex, w))
        assert observable(a) == observable(b)


# ------------------------------------------------------------------ memory tiers
#: tiered policies (SPEC §12) on both backends, one of them (the third) with experts cached as
#: parts (granularity_split); tests/test_tiers_backends.py draws random ones
TIERED = [
    "policy t { hierarchy { tier hot { location = gpu  capacity = 5 }  eviction = lfu } "
    "prefetch { strategy = history  budget = 2 } }",
    "policy t { hierarchy { tier hot { location = gpu  capacity = 3 } "
    "tier warm { location = gpu  dtype = int4  capacity = 6 }  tier ram { location = cpu  capacity = 10 } "
    "tier ssd { location = disk }  on demote(hot -> warm) { mechanism = in_place_requant } "
    "on promote(warm -> hot) { trigger_threshold = 0.2 }  eviction = lru } schedule { mode = hybrid } }",
    "policy t { hierarchy { tier pinned { location = gpu  capacity = 2  residency = always } "
    "tier hot { location = gpu  capacity = 4 }  granularity_split = 2 "
    "eviction = weighted_sum(lru = 0.5, lfu = 0.5) } schedule { mode = cpu_fallback } "
    "monitor { window = 20 } adapt { when hit_rate < 0.2 { trigger flush } } }",
    "policy t { per_layer_hierarchy { band layers = 0..1 { tier hot { location = gpu  capacity = 3 } } "
    "band layers = 2..4 { tier hot { location = gpu  capacity = 4 }  tier ram { location = cpu  capacity = 6 } "
    "tier ssd { location = disk }  eviction = arc } } prefetch { strategy = affinity  budget = 1 } }",
    "policy t { hierarchy { tier pinned { location = gpu  capacity = 2  residency = always } "
    "tier hot { location = gpu  capacity = 4 }  tier ram { location = cpu  capacity = 7 }  tier ssd { location = disk } "
    "eviction = weighted_sum(lru = 0.5, lfu = 0.5) } schedule { mode = cpu_fallback } "
    "monitor { window = 20 } adapt { when hit_rate < 0.2 { trigger flush } } }",
    "policy t { hierarchy { tier hot { location = gpu  capacity = 3  dtype_ladder = [fp16, int8, int4] } "
    "tier warm { location = gpu  capacity = 3  dtype_ladder = [int8, int4] }  tier ram { location = cpu  capacity = 7 } "
    "tier ssd { location = disk } } prefetch { strategy = history  budget = 2 } "
    "monitor { window = 20 } adapt { when miss_rate > 0.5 { trigger memory_pressure } } }",
]


def tier_pair(text, L, E, K):
    """(compiled, pure) runtimes of a tiered policy (without the engine: skipped, saying why)."""
    pol = mpl.loads(text)
    rt = pol.runtime(L, E, K)
    if rt.backend != "compiled":
        if compiled.available():
            raise AssertionError(f"the engine does not hold {text!r}: {rt.backend_reason}")
        pytest.skip(f"the compiled side: {rt.backend_reason}")
    return rt, pol.runtime(L, E, K, backend="pure")


@pytest.mark.parametrize("text", TIERED)
@given(st.data())
@prop(20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_tiered_policies_give_the_same_plans_and_state(text, data):
    a, b = tier_pair(text, 5, 12, 3)
    seq = data.draw(st.lists(calls(5, 12, 3), min_size=1, max_size=80))
    play(a, b, seq)
    assert observable(a) == observable(b)


# ------------------------------------------------------------------ per-layer pins
@st.composite
def pinned_policies(draw):
    """A random policy of :func:`random_policies` with per-layer pins: items over random
    ranges of its layers (gaps between them), a few expert ids each."""
    import dataclasses
    from mpl import ir as _ir
    ir, L, E, K = draw(random_policies())
    r = random.Random(draw(st.integers(0, 2**32 - 1)))
    items, layer = [], 0
    while layer < L:
        last = min(L - 1, layer + r.randint(0, 2))
        if r.random() < 0.7:
            ids = tuple(sorted(r.sample(range(E), r.randint(1, min(3, E)))))
            items.append(_ir.LayerPins(_ir.Layers(layer, last), ids))
        layer = last + 1 + r.randint(0, 1)
    return dataclasses.replace(ir, layer_pins=tuple(items)), L, E, K


@needs_engine
@given(st.data())
@SETTINGS
def test_per_layer_pins_give_the_same_plans_and_are_never_evicted(data):
    ir, L, E, K = data.draw(pinned_policies())
    try:
        a, b = pair(ir, L, E, K)
    except RuntimeConfigError as e:
        with pytest.raises(RuntimeConfigError, match=str(e)[:30].replace("(", r"\(").replace(")", r"\)")):
            from_ir(ir).runtime(L, E, K, backend="pure")
        return
    assert a.backend == "compiled" and b.backend == "pure"
    pinned = {(x, e) for p in ir.layer_pins for x in range(p.layers.first, p.layers.last + 1)
              for e in p.experts} | {(x, e) for x in range(L) for e in ir["cache.pin"]}
    seq = data.draw(st.lists(calls(L, E, K), min_size=1, max_size=80))
    for name, args, kw in seq:
        if name == "read":
            assert observable(a) == observable(b)
            continue
        ga = outcome(getattr(a, name), *args, **kw)
        gb = outcome(getattr(b, name), *args, **kw)
        assert ga == gb, (name, args, kw)
        if ga[0] == "plan":
            evicted = ga[1][6]
            assert not [k for k, _ in evicted if tuple(k) in pinned], (evicted, pinned)
    assert observable(a) == observable(b)


@pytest.mark.parametrize("backend", ["pure", "compiled"])
def test_per_layer_pins_stay_resident_once_loaded(backend):
    """A pinned key of a layer, once loaded, hits for the rest of the run however the other
    keys churn; the same expert id in another layer is evicted like any key."""
    if backend == "compiled" and not compiled.available():
        pytest.skip(compiled.WHY)
    pol = mpl.loads("policy p { cache { capacity = 3  eviction = lru\n"
                    "  pin layers = 1 { experts = [5] } } }")
    rt = pol.runtime(2, 16, 2, backend=backend)
    assert rt.backend == backend
    r = random.Random(7)
    evicted = []
    rt.dispatch(1, [5, 0])
    for i in range(400):
        layer = i % 2
        ex = r.sample([e for e in range(16) if e != 5], 2)
        if r.random() < 0.3:
            ex[0] = 5
        p = rt.dispatch(layer, ex)
        evicted += [tuple(k) for k, _ in p.evicted]
        if layer == 1 and 5 in ex:
            assert p.hit[ex.index(5)]
    assert (1, 5) not in evicted and (0, 5) in evicted
