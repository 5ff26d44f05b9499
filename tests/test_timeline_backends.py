"""The simulated timeline in C (mpl/runtime/c/timeline.c, what the compiled engine's replay
plays each record on) against the Python Timeline (mpl.timemodel.timeline), its reference.

A compiled runtime replays records (``replay_records``: the dispatch and the timeline in C)
on one copy of a timeline; the reference dispatches the same records on a pure runtime and
plays each Plan with ``Timeline.dispatch`` on another copy. Random policies make every kind
of Plan (hits with and without transfers in flight, demand loads, streams, CPU computes,
background and prefetch loads, evictions of keys in flight); the records have one or several
tokens, with and without tokens_of (empty, partial, counts up to 2^40); timelines have overlap
on and off, int and float expert_bytes and cost numbers, clocks and counters that played
before (counters past 64 bits), prefilled arrival maps, more than 4096 transfers in flight so
the map is pruned; replays come in one call or several, with progress ticks that read,
change or replace the timeline between records. Every stall (the runtime's sum, and what
each tick sees), clock, counter and byte count and the arrival map (its order and whether
it is a new dict included) are the same, floats bit for bit.

Which timeline played is observed by counting the calls of ``Timeline.dispatch`` on the
compiled runtime's timeline: none for a timeline the C side holds; every record's for one it
does not (a subclass, an int clock, a cost it cannot compute exactly, ...), which therefore
plays the Python way with the same results. An exception in a tick leaves the timeline as
of the last record played."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import fractions
import random

import pytest
from hypothesis import example, given, strategies as st

import mpl
from mpl.api import from_ir
from mpl.runtime import compiled
from mpl.timemodel import hardware
from mpl.timemodel.timeline import Timeline
from property_profiles import prop
from runtime_helpers import make_ir, state_policy

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

FIELDS = ("now", "link_free", "stall_ms", "transfer_ms", "gpu_ms", "cpu_ms", "cpu_wait_ms",
          "transfers", "bytes", "late")

#: Timeline.dispatch itself: the reference plays with it while the class attribute counts
DISPATCH = Timeline.dispatch


def same(a, b) -> bool:
    """a and b equal, floats bit for bit (-0.0 is not 0.0; NaN is NaN), containers item by item."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def state(tl: Timeline):
    return [getattr(tl, f) for f in FIELDS] + [list(tl.arrival.items()),
                                              list(tl.late_layers.items())]


def assert_same(c: Timeline, p: Timeline):
    for f in FIELDS:
        assert same(getattr(c, f), getattr(p, f)), (f, getattr(c, f), getattr(p, f))
    assert same(list(c.arrival.items()), list(p.arrival.items()))
    assert same(list(c.late_layers.items()), list(p.late_layers.items()))


@contextlib.contextmanager
def python_dispatches(tl):
    """Counts the calls of Timeline.dispatch on ``tl`` meanwhile (a list of one count): the
    compiled replay calls it for a timeline the C side does not hold."""
    calls = [0]

    def counted(self, plan, tokens_of=None, tokens=1):
        if self is tl:
            calls[0] += 1
        return DISPATCH(self, plan, tokens_of, tokens)

    Timeline.dispatch = counted
    try:
        yield calls
    finally:
        Timeline.dispatch = DISPATCH


# ------------------------------------------------------------------ costs and timelines
def costs_of(kind: str, eb, flops, dense) -> hardware.Costs:
    if kind == "int_profile":      # a profile file's ints (JSON numbers without a point)
        prof = hardware.Profile("ints", 24, 1008, 165, link_gbps=32, link_efficiency=1,
                                transfer_latency_us=10, kernel_launch_us=5, cpu_mem_gbps=60,
                                cpu_gflops=500)
    elif kind == "slow_cpu":       # the CPU slower than the link: hybrid-like mixes
        prof = hardware.Profile("slow", 80, 2000.0, 300.0, cpu_mem_gbps=0.5, cpu_gflops=3.0)
    else:
        prof = hardware.resolve(kind)
    return hardware.Costs(prof, eb, flops, dense)


COSTS = st.builds(
    costs_of,
    st.sampled_from(["rtx-4090", "h100", "int_profile", "slow_cpu"]),
    st.sampled_from([200_000_000, 1, 12_345_677, 2 ** 62 - 1, 2.0e8, 1.5e7, 3.0]),
    st.sampled_from([4.0e8, 1.0, 3.3e11, 400_000_000, 3 ** 37, 2 ** 63 - 1, -(2 ** 60)]),
    st.sampled_from([0.0, 5.0e7, 50_000_000, 0, 1e12, 7]))


@st.composite
def timelines(draw, L, E):
    tl = Timeline(draw(COSTS), overlap=draw(st.sampled_from([True, False, 1, 0])))
    if draw(st.integers(0, 4)) == 0:    # unit costs equal: the ties of demand()'s formula
        tl._t_xfer = tl._gpu1
    if draw(st.booleans()):        # a timeline that played before
        tl.set_clocks(*[draw(st.sampled_from([0.0, 1.5, 1e3, 123.456789, 1e-300, -2.5]))
                        for _ in range(5)], 0)
        tl.cpu_ms = draw(st.sampled_from([0.0, 3.25]))
        tl.transfers = draw(st.sampled_from([0, 7, 2 ** 70]))
        tl.bytes = draw(st.sampled_from([0, 5, 2 ** 80, 0.0, 1.5e9]))
        for _ in range(draw(st.integers(0, 6))):
            tl.arrival[(draw(st.integers(0, L - 1)), draw(st.integers(0, E - 1)))] = \
                draw(st.sampled_from([0.0, 0.5, 10.0, 1e4, 31.75]))
    return tl


# ------------------------------------------------------------------ records
def random_tokens(r: random.Random, experts, big=(2 ** 40,)):
    """(tokens, tokens_of): one token (tokens_of None, as a trace's records have it); an
    empty tokens_of; a tokens_of naming some of the experts, counts up to 2^40."""
    x = r.random()
    if x < 0.6:
        return 1, None
    if x < 0.65:
        return r.choice([1, 3]), {}
    tok = {e: r.choice([1, 1, 2, 3, 16, *big]) for e in experts if r.random() < 0.8}
    return r.choice([1, min(max(tok.values(), default=1), 2 ** 31 - 1), 5]), tok


def random_records(r: random.Random, n: int, L: int, E: int, K: int, *, steps=True,
                   big=(2 ** 40,)):
    """Records (layer, experts, weights, tokens, step, predictions, tokens_of) in layer order
    mostly, some repeated ids, predictions on some, steps given or counted by the runtime."""
    out, step = [], 0
    for i in range(n):
        layer = i % L if r.random() < 0.9 else r.randrange(L)
        if layer == 0 and i:
            step += 1
        ex = r.sample(range(E), r.randint(1, min(E, 2 * K)))
        if r.random() < 0.05:
            ex.append(ex[0])
        tokens, tok = random_tokens(r, ex, big)
        preds = None
        if r.random() < 0.3:
            preds = {(layer + 1) % L: r.sample(range(E), r.randint(1, min(E, 4)))}
        out.append((layer, ex, None, tokens, step if steps else None, preds, tok))
    return out


# ------------------------------------------------------------------ the two replays
def replay_both(policy, shape, tl0: Timeline, records, *, chunks=1, every=0, ticks=None,
                held=True, warm=(), look=True):
    """The compiled runtime's replay of ``records`` on a copy of tl0 (in ``chunks`` calls;
    a tick every ``every`` records, which applies ``ticks[i]`` after record i and reads the
    timeline and the runtime's stall) against the reference on another copy: the pure
    runtime's dispatch of each record, its Plan played by Timeline.dispatch, its stall added
    to the runtime as the replay adds it. Asserts every tick's view and the end states
    equal; ``held``: the C side played every record (no call of Timeline.dispatch) but
    after a tick that made the timeline one it does not hold; ``held=False``: the first call
    played every record in Python (Timeline.dispatch). ``warm``: (layer, experts)
    dispatched on both runtimes first, off the timeline. ``look=False``: the ticks compare
    the stalls only (a long replay's cost). Returns the two timelines."""
    view = state if look else (lambda tl: None)
    L, E, K = shape
    ticks = ticks or {}
    c, p = copy.deepcopy(tl0), copy.deepcopy(tl0)
    ref = policy.runtime(L, E, K, backend="pure")
    rt = policy.runtime(L, E, K, backend="compiled")
    for layer, ex in warm:
        assert rt.dispatch(layer, ex) == ref.dispatch(layer, ex)
    bounds = [round(len(records) * j / chunks) for j in range(chunks + 1)]
    seen_at = {a + n - 1 for a, b in zip(bounds, bounds[1:]) if every
               for n in range(every, b - a + 1, every)}      # where the ticks will look
    want = []
    for i, (layer, ex, ws, tokens, step, preds, tok) in enumerate(records):
        plan = ref.dispatch(layer, ex, ws, tokens, step=step, predictions=preds)
        s = DISPATCH(p, plan, tok, tokens)
        if s > 0:
            ref.add_stall(s)
        if i in ticks:
            ticks[i](p)
        want.append((view(p), ref.stall) if i in seen_at else None)
    for a, b in zip(bounds, bounds[1:]):
        seen, broken = [], [type(c.now) is int]     # (a tick of the last call left it so)

        def tick(n, a=a):
            i = a + n - 1
            if i in ticks:
                ticks[i](c)
                broken[0] |= type(c.now) is int
            seen.append((i, view(c), rt.stall))

        with python_dispatches(c) as calls:
            assert rt.replay_records(records[a:b], c, tick if every else None, every) == b - a
        for i, st_, stall in seen:
            assert same([st_, stall], list(want[i])), (i, st_, stall, want[i])
        assert len(seen) == ((b - a) // every if every else 0)
        if held:
            assert calls[0] == 0 or broken[0], "a timeline the C side holds played in Python"
        elif a == 0:        # (after Python's dispatch it may be one the C side holds)
            assert calls[0] == b - a, "a timeline the C side does not hold was played in C"
    assert_same(c, p)
    assert same(rt.stall, ref.stall)
    assert rt.stats() == ref.stats()
    return c, p


# ------------------------------------------------------------------ policies
def simple_policy(r: random.Random):
    """Few features, the Plan kinds often: small caches (streams), every schedule mode,
    prefetchers (loads in flight, late hits, their keys evicted)."""
    vals = {"cache.capacity": r.choice([1, 2, 3, 6, 12]),
            "cache.eviction": r.choice(["lru", "lfu", "frequency_threshold", "s3fifo"]),
            "cache.freq_threshold": r.choice([0.0, 0.2]),
            "schedule.mode": r.choice(["gpu_only", "cpu_fallback", "hybrid"]),
            "prefetch.strategy": r.choice(["none", "history", "lookahead", "affinity"]),
            "prefetch.budget": r.choice([1, 3, 6]),
            "prefetch.lookahead": r.choice([1, 2])}
    return from_ir(make_ir(vals, blocks=("cache", "prefetch", "schedule")))


@st.composite
def cases(draw):
    L = draw(st.integers(1, 4))
    E = draw(st.integers(2, 12))
    K = draw(st.integers(1, min(4, E)))
    tl = draw(timelines(L, E))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    count = draw(st.integers(1, 60))
    chunks = draw(st.sampled_from([1, 1, 3]))
    every = draw(st.sampled_from([0, 0, 1, 7]))
    ticks = None
    if every == 1 and draw(st.booleans()):
        kinds = ["read", "set_clocks", "clear_arrival", "new_arrival", "overlap", "int_clock",
                 "late_layers"]
        ticks = {i: draw(st.sampled_from(kinds)) for i in
                 draw(st.lists(st.integers(0, count - 1), max_size=4, unique=True))}
    return tl, (L, E, K), seed, count, chunks, every, ticks


# ------------------------------------------------------------------ ticks
L_EDIT = 0      # the layer whose late count a tick changes


def tick_action(kind: str):
    """What a tick does to a timeline after a record (the same on both)."""
    def act(tl: Timeline):
        if kind == "read":
            tl.to_dict()
        elif kind == "set_clocks":
            now, link, st_, gpu, xfer = tl.clocks()
            tl.set_clocks(now + 0.125, link, st_, gpu, xfer, 2)
        elif kind == "clear_arrival":
            tl.arrival.clear()
        elif kind == "new_arrival":
            tl.arrival = dict(list(tl.arrival.items())[::-1])
            tl.arrival[(0, 0)] = tl.now + 1.0
        elif kind == "overlap":
            tl.overlap = not tl.overlap
        elif kind == "late_layers":          # a count changed in place, a new dict
            tl.late_layers[L_EDIT] = tl.late_layers.get(L_EDIT, 0) + 3
            tl.late_layers = dict(list(tl.late_layers.items())[::-1])
            tl.late += 1
        elif kind == "int_clock":          # a timeline the C side no longer holds
            tl.now = int(tl.now)
    return act


# ------------------------------------------------------------------ the property
@needs_engine
@prop(150, deadline=None)
@given(cases(), st.booleans())
@example((Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0)), (2, 8, 2), 1, 30, 1, 0,
          None), False)
@example((Timeline(costs_of("int_profile", 2 ** 62 - 1, 3 ** 37, 7), overlap=False), (3, 5, 2),
          7, 40, 3, 7, None), True)
@example((Timeline(costs_of("slow_cpu", 1.5e7, 2 ** 63 - 1, 50_000_000)), (1, 12, 3), 11, 40, 1,
          1, {3: "int_clock", 1: "new_arrival"}), False)
@example((Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0)), (3, 6, 2), 5, 40, 3, 1,
          {2: "late_layers", 9: "new_arrival", 20: "late_layers"}), True)
@example((Timeline(costs_of("h100", 2.0e8, 4.0e8, 0.0)), (2, 8, 2), 3, 30, 3, 1,
          {9: "int_clock"}), False)      # the first call's last tick: the next one refuses it
def test_random_replays_play_the_same_in_c(case, rich):
    tl, shape, seed, count, chunks, every, ticks = case
    r = random.Random(seed)
    if rich:                       # (its pins name experts up to 3)
        shape = (shape[0], max(shape[1], 4), shape[2])
    policy = from_ir(state_policy(r)) if rich else simple_policy(r)
    records = random_records(r, count, *shape, steps=r.random() < 0.7)
    if ticks:
        ticks = {i: tick_action(k) for i, k in ticks.items()}
    replay_both(policy, shape, tl, records, chunks=chunks, every=every, ticks=ticks)


def test_the_random_replays_make_every_kind_of_plan():
    """The property's policies, records and timelines (a prefilled arrival map) reach every
    case of Timeline.dispatch: hits in flight (late), misses in flight, demand loads, streams, CPU computes, background and
    prefetch loads, evictions of keys in flight, several tokens with and without tokens_of."""
    from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, PREFETCH, STREAM
    seen = set()
    for seed in range(40):
        r = random.Random(seed)
        policy = simple_policy(r)
        L, E, K = 2, 8, 3
        rt, tl = policy.runtime(L, E, K, backend="pure"), Timeline(costs_of("rtx-4090", 2e8, 4e8, 0.0))
        tl.arrival = {(r.randrange(L), r.randrange(E)): 1e3 for _ in range(3)}   # (timelines())
        for layer, ex, ws, tokens, step, preds, tok in random_records(r, 60, L, E, K):
            plan = rt.dispatch(layer, ex, ws, tokens, step=step, predictions=preds)
            before = dict(tl.arrival)
            late = tl.late
            tl.dispatch(plan, tok, tokens)
            seen |= {("load", ld[3]) for ld in plan.raw_loads}
            seen |= {("where", w) for w in plan.where if w in (CPU, STREAM)}
            seen |= {"evicted in flight" for k, _ in plan.evicted if k in before}
            seen |= {"miss in flight" for e, h in zip(plan.experts, plan.hit)
                     if not h and (layer, e) in before}
            seen |= {"late hit"} if tl.late > late else set()
            seen |= {("tokens", tokens > 1, tok is None, bool(tok))}
    assert seen >= {("load", DEMAND), ("load", BACKGROUND), ("load", PREFETCH), ("where", CPU),
                    ("where", STREAM), "evicted in flight", "miss in flight", "late hit",
                    ("tokens", False, True, False), ("tokens", True, False, True),
                    ("tokens", True, False, False), ("tokens", False, False, True)}


def prune_policy(mode):
    return from_ir(make_ir({"cache.capacity": 7000, "cache.eviction": "lru", "schedule.mode": mode,
                            "prefetch.strategy": "history", "prefetch.budget": 12,
                            "prefetch.history_window": 3}, blocks=("cache", "prefetch", "schedule")))


@needs_engine
@pytest.mark.parametrize("overlap, eb", [(True, 200_000_000), (False, 2.0e8)])
def test_more_than_4096_transfers_in_flight_are_pruned_alike(overlap, eb):
    """64 x 128 keys, a cache of 7000, background and history prefetch loads: the map passes
    4096 entries and is pruned (a new dict) at the same records, which changes which later
    misses count as in flight; evictions of keys in flight pop them."""
    L, E, K = 64, 128, 8
    tl = Timeline(costs_of("rtx-4090", eb, 4.0e8, 5.0e7), overlap=overlap)
    r = random.Random(7)
    records = []
    for i in range(2100):        # (prunes at records 488 and 1993)
        t = 1 if r.random() < 0.8 else 3
        ids = r.sample(range(E), K * t)
        tok = None if t == 1 else {e: 1 for e in ids}
        records.append((i % L, ids, None, t, i // L, None, tok))
    maps = []          # per tick, the arrival dict (the reference's ticks run first, then C's)

    def watch(tl):
        maps.append(tl.arrival)
    policy = prune_policy("cpu_fallback")
    replay_both(policy, (L, E, K), tl, records, every=1, ticks=dict.fromkeys(range(len(records)), watch),
                look=False)
    n = len(records)
    assert len(maps) == 2 * n
    prunes = [sum(x is not y for x, y in zip(seq, seq[1:])) for seq in (maps[:n], maps[n:])]
    assert max(len(m) for m in maps[:n]) > 3000
    assert prunes[0] >= 2 and prunes[1] == prunes[0]
    replay_both(policy, (L, E, K), tl, records)            # the same in one call, no ticks
    replay_both(prune_policy("hybrid"), (L, E, K), tl, records, chunks=2)


@needs_engine
def test_counters_beyond_64_bits_add_exactly():
    """transfers and an int bytes count on as Python ints past 2^64 (an expert of 2^62 - 1
    bytes); a float bytes with an int expert_bytes adds the exact product, rounded once."""
    L, E, K = 2, 6, 3
    r = random.Random(3)
    policy = simple_policy(random.Random(4))
    records = random_records(r, 200, L, E, K)
    tl = Timeline(costs_of("rtx-4090", 2 ** 62 - 1, 4.0e8, 0.0))
    tl.transfers = 2 ** 64 - 3
    c, _ = replay_both(policy, (L, E, K), tl, records, chunks=4)
    assert c.transfers > 2 ** 64
    tl.bytes = 0.1
    replay_both(policy, (L, E, K), tl, records, chunks=2)
    tl = Timeline(costs_of("rtx-4090", 2.5e8, 4.0e8, 0.0))
    tl.bytes = 2 ** 70 + 1                   # an int bytes + a float: the int converted
    replay_both(policy, (L, E, K), tl, records)


@needs_engine
def test_several_tokens_use_the_costs_numbers():
    """Records of several tokens price each expert and the dense part from the Costs object
    (gpu_expert_ms, cpu_expert_ms, dense_ms with those tokens): int and float numbers, and
    products of tokens and an int number beyond 64 bits."""
    L, E, K = 2, 8, 3
    for flops in (4.0e8, 400_000_001, 3 ** 39, 2 ** 63 - 1, -(2 ** 62)):
        for dense in (0.0, 123_456_789, 9.5e7):
            tl = Timeline(costs_of("int_profile", 123_456_789, flops, dense))
            r = random.Random(hash((flops, dense)) & 0xffff)
            records = []
            for i in range(30):
                ex = r.sample(range(E), r.randint(1, 5))
                tok = {e: r.choice([1, 2, 7, 2 ** 33, 2 ** 50]) for e in ex}
                records.append((i % L, ex, None, r.choice([1, 3, 2 ** 31 - 1]), i // L, None, tok))
            for mode in ("gpu_only", "cpu_fallback"):
                policy = mpl.loads("policy p { cache { capacity = 3 } prefetch { strategy = "
                                   f"history budget = 2 }} schedule {{ mode = {mode} }} }}")
                replay_both(policy, (L, E, K), tl, records)


@needs_engine
def test_an_int_product_beyond_64_bits_rounds_once():
    """tokens x an int expert_flops_per_token is an exact product that Python rounds once to a
    float; these two make a product whose top 64 bits end in an exact half, with ones below
    them (rounding the top bits alone would round to even; multiplying the two as floats
    rounds twice)."""
    policy = mpl.loads("policy p { cache { capacity = 1 } schedule { mode = cpu_fallback } }")
    for t, flops in ((1549980723786, 10206728800673380), (1298117165243, 9839729411985009),
                     (1907069648686, -10199082975663617)):      # tokens of an expert
        assert float(t * flops) != float(t) * float(flops) or t == 1549980723786
        records = [(0, [1, 2], None, 1, 0, None, {1: t, 2: t}), (0, [1, 3], None, 5, 1, None, {3: t})]
        replay_both(policy, (1, 4, 2), Timeline(costs_of("rtx-4090", 200_000_000, flops, 0.0)),
                    records)
    for t, dense in ((1416942269, 2937978159514037782), (1568057435, 8051077931126234388),
                     (1445773751, -4731308760321426795)):       # a record's tokens
        assert float(t * dense) != float(t) * float(dense)
        records = [(0, [1, 2], None, t, 0, None, {1: t}), (0, [3], None, t, 1, None, {})]
        replay_both(policy, (1, 4, 2), Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, dense)),
                    records)


@needs_engine
def test_late_transfers_sort_on_ready_then_compute():
    """Transfers in flight landing at the same time with different compute times (several
    tokens), after a later one: late.sort() orders them by (ready, compute)."""
    policy = mpl.loads("policy p { cache { capacity = 8 } }")
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e11, 0.0))     # compute-bound experts
    tl.arrival = {(0, 1): 50.0, (0, 2): 40.0, (0, 3): 40.0, (0, 4): 40.0}
    for tok in ({2: 9, 3: 1, 4: 4}, {2: 1, 3: 3, 4: 1}, {2: 1, 3: 9, 4: 2 ** 30}, {1: 3}):
        c, _ = replay_both(policy, (1, 8, 4), tl, [(0, [1, 2, 3, 4], None, 2, 1, None, tok)],
                           warm=[(0, [1, 2, 3])])       # resident: hits in flight
        assert c.late == 3


@needs_engine
def test_a_transfer_landing_as_the_dispatch_ends_is_forgotten_by_the_prune():
    """The prune keeps the transfers landing after the dispatch's end: a background load
    landing exactly at the end (its CPU compute as long as the transfer) is forgotten."""
    L, E = 8, 1024
    policy = mpl.loads("policy p { cache { capacity = 4 } schedule { mode = cpu_fallback } }")
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0))
    tl._cpu1 = tl._t_xfer
    tl.arrival = {(k // E, k % E): 0.0 for k in range(4100)}
    tl.set_clocks(1.0, 0.0, 0.0, 0.0, 0.0, 0)
    c, p = replay_both(policy, (L, E, 1), tl, [(7, [5], None, 1, 0, None, None)])
    assert p.arrival == {} and p.now == 1.0 + tl._t_xfer and p.transfers == 1


@needs_engine
@pytest.mark.parametrize("overlap", [True, False])
def test_demand_loads_when_a_transfer_takes_as_long_as_an_expert(overlap):
    """Timeline.demand's formula where transfer and compute times are equal (its branch
    `txf >= gpu1`), from clocks that make its sums round: every access a demand load or a
    stream (a cache of 2 for up to 8 experts)."""
    L, E, K = 2, 12, 4
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 5.0e7), overlap=overlap)
    tl._t_xfer = tl._gpu1 = 1 / 3
    tl.set_clocks(0.3, 0.7, 0.0, 0.0, 0.0, 0)
    r = random.Random(17)
    records = [(i % L, r.sample(range(E), r.randint(1, 8)), None, 1, i // L, None, None)
               for i in range(600)]
    policy = mpl.loads("policy p { cache { capacity = 2 } }")
    c, _ = replay_both(policy, (L, E, K), tl, records)
    assert c.transfers > 600


# ------------------------------------------------------------------ what C does not hold
class SubTimeline(Timeline):
    pass


def _refusals():
    c = costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0)

    def tl(**kw):
        t = Timeline(c)
        for k, v in kw.items():
            setattr(t, k, v)
        return t

    def costs_with(**kw):
        t = Timeline(c)
        t.c = dataclasses.replace(c, **kw)
        return t

    def profile_with(**kw):
        t = Timeline(c)
        t.c = dataclasses.replace(c, profile=dataclasses.replace(c.profile, **kw))
        return t

    class SubCosts(hardware.Costs):
        pass

    def sub_costs():
        t = Timeline(c)
        t.c = SubCosts(c.profile, c.expert_bytes, c.expert_flops_per_token, c.dense_bytes_per_layer)
        return t

    return {
        "subclass": SubTimeline(c),
        "int clock": tl(now=3),
        "nan clock": tl(link_free=float("nan")),
        "inf clock": tl(gpu_ms=float("inf")),
        "float transfers": tl(transfers=1.0),
        "Fraction bytes": tl(bytes=fractions.Fraction(0)),
        "overlap None": tl(overlap=None),
        "int unit cost": tl(_gpu1=1),
        "arrival key out of range": tl(arrival={(2, 0): 1.0}),
        "arrival key of bools": tl(arrival={(True, 1): 1.0}),
        "arrival key not a tuple": tl(arrival={"x": 1.0}),
        "arrival int value": tl(arrival={(0, 1): 1}),
        "arrival nan value": tl(arrival={(0, 1): float("nan")}),
        "arrival a dict subclass": tl(arrival=type("D", (dict,), {})({(0, 1): 1.0})),
        "negative expert_bytes": costs_with(expert_bytes=-5),
        "expert_bytes beyond 2^63": costs_with(expert_bytes=2 ** 63),
        "huge int flops": costs_with(expert_flops_per_token=2 ** 64),
        "bool dense": costs_with(dense_bytes_per_layer=True),
        "zero hbm": profile_with(hbm_gbps=0),
        "inf cpu": profile_with(cpu_gflops=float("inf")),
        "memory term not finite": profile_with(hbm_gbps=1e-310),
        "Costs subclass": sub_costs(),
    }


@needs_engine
@pytest.mark.parametrize("name", sorted(_refusals()))
def test_timelines_c_does_not_hold_play_in_python_alike(name):
    """Each such timeline is played by Timeline.dispatch (every record), and the replay gives
    what the reference does: reading it changed nothing. (One-token records: the Python
    dispatch of some of them could not price several tokens.)"""
    policy = mpl.loads("policy p { cache { capacity = 2 } prefetch { strategy = history "
                       "budget = 1 } schedule { mode = hybrid } }")
    records = [(layer, ex, None, 1, step, preds, None) for layer, ex, _w, _t, step, preds, _tok
               in random_records(random.Random(name), 40, 2, 8, 2)]
    replay_both(policy, (2, 8, 2), _refusals()[name], records, held=False)
    replay_both(policy, (2, 8, 2), _refusals()[name], records, chunks=2, every=5, held=False)


@needs_engine
def test_an_int_bytes_beyond_a_float_with_a_float_expert_bytes_raises_as_in_python():
    """bytes + transfers x a float expert_bytes is a float sum Python cannot make of an int
    beyond a float: the C side leaves it to Timeline.dispatch, whose OverflowError ends the
    replay, the counters as they were."""
    policy = mpl.loads("policy p { cache { capacity = 2 } }")
    tl = Timeline(costs_of("rtx-4090", 2.0e8, 4.0e8, 0.0))
    tl.bytes = 10 ** 400
    with python_dispatches(tl) as calls, pytest.raises(OverflowError):
        policy.runtime(2, 8, 2, backend="compiled").replay_records([(0, [1], None, 1, 0, None, None)], tl)
    assert calls[0] == 1 and tl.bytes == 10 ** 400


@needs_engine
def test_a_timeline_whose_dispatch_is_replaced_plays_through_it():
    policy = mpl.loads("policy p { cache { capacity = 2 } prefetch { strategy = history budget = 1 } }")
    records = random_records(random.Random(2), 40, 2, 8, 2)
    c = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0))
    p = copy.deepcopy(c)
    calls = []
    c.dispatch = lambda plan, tok, tokens: (calls.append(1), DISPATCH(c, plan, tok, tokens))[1]
    rt = policy.runtime(2, 8, 2, backend="compiled")
    assert rt.replay_records(records, c) == len(records) == len(calls)
    ref = policy.runtime(2, 8, 2, backend="pure")
    for layer, ex, ws, tokens, step, preds, tok in records:
        s = DISPATCH(p, ref.dispatch(layer, ex, ws, tokens, step=step, predictions=preds), tok, tokens)
        if s > 0:
            ref.add_stall(s)
    assert_same(c, p)
    assert same(rt.stall, ref.stall) and rt.stats() == ref.stats()


@needs_engine
def test_an_error_in_a_tick_leaves_the_timeline_as_of_the_last_record():
    L, E, K = 2, 8, 3
    r = random.Random(9)
    records = random_records(r, 10, L, E, K)
    policy = simple_policy(r)
    c = Timeline(costs_of("h100", 2.0e8, 4.0e8, 0.0))
    p = copy.deepcopy(c)

    def tick(n):
        if n == 5:
            raise KeyError("stop")

    with pytest.raises(KeyError):
        policy.runtime(L, E, K, backend="compiled").replay_records(records, c, tick, 1)
    ref = policy.runtime(L, E, K, backend="pure")
    for layer, ex, ws, tokens, step, preds, tok in records[:5]:
        DISPATCH(p, ref.dispatch(layer, ex, ws, tokens, step=step, predictions=preds), tok, tokens)
    assert_same(c, p)
