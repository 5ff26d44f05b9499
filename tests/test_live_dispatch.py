"""The compiled live dispatch (``mpl.runtime._fast.LiveState``, installed by
``mpl.runtime.fast.install_live``; it holds the dispatch state in C) against the pure
generated dispatch, the reference: for random policies (lru demand-only ones with shared or
per-layer caches and rebalancing; then every feature LiveState holds, with adapt rules that
fire and some that take a policy off it) and random call sequences, good and bad arguments
mixed, the state read in the middle, every call returns an equal Plan (every field) or raises
the same DispatchError with the same message, and the end state (stats, residents, store
internals, slot pool, counters, history, monitor, rules) is the same. Derandomized
(property_profiles.prop)."""

from __future__ import annotations

import gc
import os
import weakref

import pytest
from hypothesis import HealthCheck, given, strategies as st

import mpl
from mpl.runtime import fast
from mpl.runtime.core import DispatchError, RuntimeConfigError
from property_profiles import prop
from runtime_helpers import full_state, state_policy

needs_live = pytest.mark.skipif(fast._kernel is None or not hasattr(fast._kernel, "LiveState"),
                                reason=f"the compiled live dispatch is not available: {fast._WHY}")

SETTINGS = prop(int(os.environ.get("MPL_LIVE_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def pair(text, L, E, K):
    """(live runtime, pure runtime) of one policy."""
    pol = mpl.loads(text)
    a = pol.runtime(L, E, K)
    with fast.pure():
        b = pol.runtime(L, E, K)
    return a, b


def fields(p):
    return (p.step, p.layer, list(p.experts), p.where, p.hit, p.raw_loads, p.evicted,
            [tuple(x) for x in p.loads])


def call(rt, args, kw):
    try:
        return ("plan", fields(rt.dispatch(*args, **kw)))
    except DispatchError as e:
        return ("error", str(e))


def end_state(rt):
    caches = rt.caches if rt.per_layer else rt.caches[:1]
    return (rt.stats(), rt.resident(), rt.capacities(), [c.store.keys() for c in caches],
            sorted(rt.pool.free), rt.step, rt._last_layer, rt.dispatches)


@st.composite
def policies(draw):
    L = draw(st.integers(1, 4))
    E = draw(st.integers(2, 12))
    K = draw(st.integers(1, min(6, E)))
    cap = draw(st.integers(1, 10))
    if draw(st.booleans()):
        lo = 1
        hi = cap + draw(st.integers(0, 3))
        budget = draw(st.integers(L * lo, L * hi))
        text = (f"policy p {{ cache {{ capacity = {cap} eviction = lru }} per_layer {{ "
                f"allocation = uniform total_budget = {budget} min_capacity = {lo} "
                f"max_capacity = {hi} rebalance_interval = {draw(st.integers(1, 7))} }} }}")
    else:
        text = f"policy p {{ cache {{ capacity = {cap} eviction = lru }} }}"
    return text, L, E, K


def calls(L, E, K):
    """One dispatch call: mostly good, some of every kind of bad argument."""
    ids = st.integers(0, E - 1)
    good = st.tuples(st.integers(0, L - 1), st.lists(ids, min_size=0, max_size=K, unique=True))

    def weights_for(n):
        return st.one_of(st.none(), st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n))

    @st.composite
    def one(draw):
        layer, ex = draw(good)
        args = [layer, ex]
        kw = {}
        kind = draw(st.sampled_from(["plain"] * 6 + ["weights", "tokens", "bad_layer", "bad_id",
                                                     "float_id", "bool_id", "dup", "bad_w",
                                                     "nan_w", "int_w", "step", "tuple", "kw",
                                                     "tokens0", "predictions"]))
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
            args.append([0.5] * len(args[1]) if draw(st.booleans()) else None)
        elif kind == "bad_w":
            args.append([0.5] * (len(ex) + 1))
        elif kind == "nan_w" and ex:
            args.append([float("nan")] + [0.5] * (len(ex) - 1))
        elif kind == "int_w" and ex:
            args.append([1] * len(ex))
        elif kind == "step":
            kw["step"] = draw(st.sampled_from([0, 3, 10, -1]))
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
        return tuple(args), kw
    return one()


@needs_live
@given(st.data())
@SETTINGS
def test_live_dispatch_equals_pure_call_by_call(data):
    text, L, E, K = data.draw(policies())
    try:
        a, b = pair(text, L, E, K)
    except RuntimeConfigError:
        return
    assert fast.live_backend(a) == "compiled", fast.live_unsupported(a)
    assert fast.live_backend(b) == "pure"
    seq = data.draw(st.lists(calls(L, E, K), min_size=1, max_size=60))
    for args, kw in seq:
        assert call(a, args, kw) == call(b, args, kw), (args, kw)
    assert end_state(a) == end_state(b)


BENCH = {
    "lru16": ("policy lru16 { cache { capacity = 16 eviction = lru } }", "LiveState"),
    "per_layer_864": ("policy per_layer_864 { cache { capacity = 32 } per_layer { allocation = "
                      "uniform total_budget = 864 } }", "LiveState"),
    "lfu_history": ("policy lfu_history { cache { capacity = 16 eviction = lfu frequency_decay "
                    "= 0.9 } prefetch { strategy = history budget = 4 } }", "LiveState"),
    "pins": ("policy pins { cache { capacity = 8 eviction = lru pin = [0] } }", "LiveState"),
    "composed": ("policy composed { cache { capacity = 32 eviction = lfu frequency_decay = 0.9 "
                 "pin = [0, 1] memory_threshold = 0.9 memory_headroom = 0.7 memory_budget_gb = 40 "
                 "ttl = 2000 } prefetch { strategy = lookahead budget = 4 lookahead = 1 } schedule "
                 "{ mode = hybrid } monitor { metrics = [hit_rate, miss_rate] window = 100 } adapt "
                 "{ when hit_rate < 0.3 for 200 accesses { eviction = lru } } }", "LiveState"),
    "arc": ("policy arc { cache { capacity = 8 eviction = arc } }", "LiveState"),
    "s3fifo": ("policy s3 { cache { capacity = 8 eviction = s3fifo } prefetch { strategy = history } }",
               "LiveState"),
    "lfru": ("policy lf { cache { capacity = 8 eviction = lfru } }", "LiveState"),
    "segmented": ("policy sg { cache { capacity = 8 eviction = lfu | lru } }", "LiveState"),
    "affinity": ("policy aff { cache { capacity = 8 } prefetch { strategy = affinity budget = 2 } }",
                 "LiveState"),
    "filter": ("policy ft { cache { capacity = 8 eviction = frequency_threshold } }", "LiveState"),
    "filter_segment": ("policy fs { cache { capacity = 8 eviction = frequency_threshold | lru } }",
                       "LiveState"),
    "priority": ("policy pr { cache { capacity = 8 } schedule { priority_routing = true } }",
                 "LiveState"),
    "modes": ("policy md { cache { capacity = 8 } monitor { metrics = [hit_rate] } adapt { when "
              "hit_rate < 0.5 { schedule.mode = cpu_fallback } } }", None),
    "rebalancing": ("policy rb { cache { capacity = 8 eviction = lfu } per_layer { allocation = "
                    "uniform total_budget = 100 } }", "LiveState"),
    "entropy": ("policy en { cache { capacity = 8 eviction = lfu } per_layer { allocation = "
                "entropy total_budget = 100 } }", "LiveState"),
}


@needs_live
@pytest.mark.parametrize("name", sorted(BENCH))
def test_coverage_is_reported(name):
    text, kind = BENCH[name]
    rt = mpl.loads(text).runtime(27, 64, 6)
    assert (fast.live_backend(rt) == "compiled") == (kind is not None)
    assert (fast.live_unsupported(rt) is None) == (kind is not None)
    if kind is not None:
        assert type(rt.dispatch).__name__ == kind
    with fast.pure():
        rt2 = mpl.loads(text).runtime(27, 64, 6)
        assert fast.live_unsupported(rt2) == "the compiled backend is not in use"
    assert fast.live_backend(rt2) == "pure"
    # the reason names what takes it off the live path
    assert kind is not None or "live C dispatch" in fast.live_unsupported(rt)


@needs_live
@pytest.mark.parametrize("name", ["per_layer_864", "lfu_history"])
def test_switching_back_to_pure_continues_exactly(name):
    """Dropping the live dispatch mid-run (the pure dispatch takes over, reading the state,
    which syncs it) gives the same Plans and the same full state as a pure runtime all along."""
    text = BENCH[name][0].replace("864", "60")
    a, b = pair(text, 6, 16, 4)
    import random
    r = random.Random(5)
    for i in range(600):
        layer = i % 6
        ex = r.sample(range(16), 4)
        if i == 300:
            del a.dispatch
            assert fast.live_backend(a) == "pure"
        assert fields(a.dispatch(layer, ex)) == fields(b.dispatch(layer, ex))
    assert end_state(a) == end_state(b) and full_state(a) == full_state(b)


@needs_live
def test_a_live_runtime_is_collected():
    """The live dispatch and its runtime reference each other: the cycle is collectable."""
    rt = mpl.loads(BENCH["lru16"][0]).runtime(4, 8, 2)
    rt.dispatch(0, [1, 2])
    ref = weakref.ref(rt)
    del rt
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------ LiveState (state in C)
def call_hits(rt, args, kw):
    """LiveState.hits: True (checked below against the pure Plan) or the Plan's fields."""
    try:
        r = rt._live.hits(*args, **kw)
    except DispatchError as e:
        return ("error", str(e))
    return ("hits", None) if r is True else ("plan", fields(r))


def _all_hits(plan_fields) -> bool:
    _step, _layer, _experts, where, hit, raw_loads, evicted, _loads = plan_fields
    return all(hit) and not raw_loads and not evicted and all(w >= 0 for w in where)


def same_call(a, b, args, kw, via):
    """One call into a (live) and b (pure): the same Plan or error. ``via="hits"``: a's call
    is LiveState.hits while it has one, whose True must be a pure Plan that hit every access
    and moved nothing."""
    if via == "hits" and "_live" in a.__dict__:
        got, want = call_hits(a, args, kw), call(b, args, kw)
        if got[0] == "hits":
            assert want[0] == "plan" and _all_hits(want[1]), (args, kw, want)
            return
    else:
        got, want = call(a, args, kw), call(b, args, kw)
    assert got == want, (args, kw)      # (unusual arguments: hits gives the pure path's Plan)


@needs_live
@pytest.mark.parametrize("via", ["dispatch", "hits"])
@given(st.integers(0, 2 ** 32 - 1), st.data())
@SETTINGS
def test_live_state_equals_pure_call_by_call(via, seed, data):
    """LiveState against the pure dispatch: random policies over what it holds (and adapt
    rules that take a policy off it mid-run), random calls (good and bad arguments,
    predictions, several tokens, explicit steps), the state read in the middle (which syncs
    it back) and reported stalls; every Plan or error is the same, and so is the full state.
    ``hits`` (the offload engine's call on a pool that holds the model) answers True exactly
    where the pure Plan hit every access and moved nothing, else the same Plan."""
    a, b, (L, E, K) = _random_pair(seed)
    seq = data.draw(st.lists(st.one_of(calls(L, E, K), st.sampled_from(["read", "stall"])),
                             min_size=1, max_size=80))
    _run(a, b, seq, via)


def _random_pair(seed, **kind):
    """(live runtime, pure runtime, shape) of a random policy (state_policy's ``kind``)."""
    import random as _random
    from mpl.api import from_ir
    r = _random.Random(seed)
    pol = from_ir(state_policy(r, **kind))
    L, E, K = r.choice([(1, 4, 2), (2, 8, 2), (3, 10, 3), (4, 6, 1), (3, 12, 6)])
    a = pol.runtime(L, E, K, expert_bytes=2e8)
    with fast.pure():
        b = pol.runtime(L, E, K, expert_bytes=2e8)
    assert fast.live_backend(b) == "pure"
    if fast.live_backend(a) == "pure":      # a rule it does not hold: said why
        assert fast.live_unsupported(a)
    return a, b, (L, E, K)


def _run(a, b, seq, via):
    """The calls of ``seq`` on both runtimes, compared call by call ("read": the full state
    read in the middle, which syncs it; "stall": a reported stall), then the full state."""
    for item in seq:
        if item == "read":
            assert full_state(a) == full_state(b)
        elif item == "stall":
            a.add_stall(1.5)
            b.add_stall(1.5)
        else:
            args, kw = item
            same_call(a, b, args, kw, via)
    assert full_state(a) == full_state(b)


@needs_live
@pytest.mark.parametrize("via", ["dispatch", "hits"])
@given(st.integers(0, 2 ** 32 - 1), st.data())
@prop(int(os.environ.get("MPL_LIVE_EXAMPLES", "120")) // 2, deadline=None,
      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_live_state_with_priority_routing_equals_pure_call_by_call(via, seed, data):
    """Priority routing in LiveState (the heaviest experts served first, equal weights in
    router order): random policies with it mostly on and adapt rules that switch it, random
    calls with and without weights (ties among them too); every Plan, its loads' and
    evictions' order included, and the full state are the pure dispatch's."""
    a, b, (L, E, K) = _random_pair(seed, priority=True)
    kinds = [calls(L, E, K), st.sampled_from(["read", "stall"])]
    if K >= 2:                 # weights with ties: the stable order decides
        kinds.append(st.integers(0, L - 1).flatmap(lambda layer: st.lists(
            st.integers(0, E - 1), min_size=2, max_size=K, unique=True).flatmap(
            lambda ex: st.lists(st.sampled_from([0.25, 0.5, 0.75]), min_size=len(ex),
                                max_size=len(ex)).map(lambda w: ((layer, ex, w), {})))))
    _run(a, b, data.draw(st.lists(st.one_of(*kinds), min_size=1, max_size=80)), via)


@needs_live
def test_live_state_holds_the_bench_policies_and_an_adapt_firing():
    """The bench's lfu_history and composed take LiveState; composed's rule fires after 200
    accesses (the pure monitor phase), switches to lru and LiveState takes the state again."""
    import random as _random
    for name in ("lfu_history", "composed"):
        a, b = pair(BENCH[name][0], 27, 64, 6)
        assert type(a.dispatch).__name__ == "LiveState"
        r = _random.Random(3)
        for i in range(27 * 30):
            ex = r.sample(range(64), 6)
            w = [r.random() + 0.01 for _ in ex]
            assert fields(a.dispatch(i % 27, ex, w)) == fields(b.dispatch(i % 27, ex, w))
            if i == 27 * 15:
                assert full_state(a) == full_state(b)     # a sync in the middle
        assert a.__dict__["_live"].owns            # the state is in C again
        assert full_state(a) == full_state(b)
        assert not a.__dict__["_live"].owns        # ... and back after a read
    assert a.stats()["adapt_log"] and a.p["cache.eviction"] == "lru"
    assert type(a.dispatch).__name__ == "LiveState"


@needs_live
def test_replays_go_through_the_live_dispatch_or_turn_it_off():
    """A replay_records the kernel does not take runs through the live dispatch; one with
    records it would hand back (a repeated id) runs the pure loop and turns LiveState off."""
    text = BENCH["lfu_history"][0]
    from mpl.timemodel.timeline import Timeline
    from test_fast_equivalence import costs
    c = mpl.loads(text).runtime(6, 16, 4)
    c.dispatch(0, [1, 2, 3, 4])
    c.replay_records([(1, [1, 2], None, 1, None, None, None)], Timeline(costs()))
    assert fast.live_backend(c) == "compiled"          # replayed through the live dispatch
    c.replay_records([(2, [1, 2], None, 1, None, {3: [1]}, None)], Timeline(costs()))
    assert fast.live_backend(c) == "compiled"          # predictions are taken in C too
    c.replay_records([(3, [1, 2, 1], None, 1, None, None, None)], Timeline(costs()))
    assert fast.live_backend(c) == "pure" and "replay_records" in c._live_why


@needs_live
def test_an_attribute_set_while_the_state_is_in_c_is_kept():
    """Setting a counter the C state holds (here the step) while LiveState owns the state:
    the next call sees the runtime's __dict__ changed, syncs, keeps the value set and goes on
    from it, as the pure runtime does."""
    a, b = pair(BENCH["lfu_history"][0], 4, 16, 2)
    for rt in (a, b):
        rt.dispatch(0, [1, 2])
        rt.dispatch(1, [3, 4])
        rt.step = 7
        rt.dispatch(2, [1, 5])
    assert a.step == b.step == 7
    assert full_state(a) == full_state(b)


@needs_live
def test_monitor_log_records_are_logged_once_each(caplog):
    """The monitor's log records (every log_interval accesses) reach the runtime's logger the
    same from both dispatches, an adapt rule firing in the same phase included (LiveState
    runs such a phase on the pure path: no record is logged twice)."""
    import logging
    import random as _random
    text = ("policy m { cache { capacity = 4 eviction = lfu } prefetch { strategy = history "
            "budget = 2 } monitor { metrics = [hit_rate, prefetch_accuracy] window = 5 "
            "log_interval = 3 } adapt { when hit_rate < 0.5 for 7 accesses { eviction = lru } "
            "when miss_rate < 0.9 { prefetch.budget = 1 } } }")
    a, b = pair(text, 3, 8, 2)
    logs = []
    for rt in (a, b):
        r = _random.Random(11)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="mpl.runtime"):
            for i in range(120):
                rt.dispatch(i % 3, r.sample(range(8), 2))
        logs.append([rec.getMessage() for rec in caplog.records if rec.name == "mpl.runtime"])
    assert logs[0] == logs[1] and len(logs[0]) == 240 // 3
    assert full_state(a) == full_state(b) and a.stats()["adapt_log"]


@needs_live
def test_hits_on_a_cache_holding_every_expert():
    """The engine's case: every key resident, every later dispatch True, counters as the
    pure dispatch's."""
    pol = mpl.loads("policy p { cache { capacity = 24 } }")
    a = pol.runtime(3, 8, 2)
    with fast.pure():
        b = pol.runtime(3, 8, 2)
    for layer in range(3):
        for e in range(0, 8, 2):
            for rt in (a, b):
                rt.dispatch(layer, [e, e + 1])
    for step in range(3):
        for layer in range(3):
            assert a._live.hits(layer, [7 - layer, layer], None, 1, step=step + 1) is True
            b.dispatch(layer, [7 - layer, layer], None, 1, step=step + 1)
    assert full_state(a) == full_state(b)
    assert a.stats()["hits"] == 18
