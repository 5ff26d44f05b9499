"""The simulated timeline in C (mpl/runtime/c/timeline.c, the compiled engine's) against the
Python Timeline (mpl.timemodel.timeline), its reference: random plans of every kind (hits with
and without transfers in flight, demand loads, streams, CPU computes, background and prefetch
loads, evictions of keys in flight, several tokens with and without tokens_of, overlap on and
off, int and float expert_bytes, int and float cost numbers, more than 4096 transfers in flight
so the map is pruned, ticks that read, change or replace the timeline between dispatches)
played by both through ``_engine._timeline_play``: every stall, clock, counter and byte count
and the arrival map (its order and whether it is a new dict included) the same, floats bit for
bit. A timeline the C side does not hold is refused (None) and left as it was; bad plays are
exceptions that change nothing."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest
from hypothesis import example, given, strategies as st

from mpl.runtime.plan import CPU, STREAM, Plan
from mpl.timemodel import hardware
from mpl.timemodel.timeline import Timeline
from property_profiles import prop

try:
    from mpl.runtime import _engine
except ImportError:          # no compiler at install time: the pure runtime only
    _engine = None

needs_engine = pytest.mark.skipif(_engine is None or not hasattr(_engine, "_timeline_play"),
                                  reason="the compiled engine (mpl.runtime._engine) is not built")

FIELDS = ("now", "link_free", "stall_ms", "transfer_ms", "gpu_ms", "cpu_ms", "cpu_wait_ms",
          "transfers", "bytes", "late")


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


# ------------------------------------------------------------------ plans
def random_plan(r: random.Random, L: int, E: int, *, consistent: bool, loads_max: int = 6) -> Plan:
    layer = r.randrange(L)
    n = r.randint(0, min(E, 8))
    experts = r.sample(range(E), n)
    where, hit, loads, evicted = [], [], [], []
    slots = iter(range(10 ** 6))
    for e in experts:
        x = r.random()
        if consistent:
            if x < 0.45:
                where.append(next(slots)); hit.append(True)
            elif x < 0.7:
                s = next(slots)
                where.append(s); hit.append(False)
                if r.random() < 0.85:          # else a late prefetch: in flight, no load
                    victim = (r.randrange(L), r.randrange(E)) if r.random() < 0.5 else None
                    loads.append(((layer, e), s, victim, "demand"))
                    if victim is not None:
                        evicted.append((victim, s))
            elif x < 0.85:
                where.append(STREAM); hit.append(False)
            else:
                where.append(CPU); hit.append(False)
                if r.random() < 0.7:
                    loads.append(((layer, e), next(slots), None, "background"))
        else:
            where.append(r.choice([CPU, STREAM, 0, 1, 5]))
            hit.append(r.random() < 0.5)
    for _ in range(r.randint(0, loads_max)):
        key = (r.randrange(L), r.randrange(E))
        kind = r.choice(["prefetch", "prefetch", "background", "demand", "other"])
        loads.append((key, next(slots), None, kind))
    if not consistent:
        r.shuffle(loads)
    for _ in range(r.randint(0, 3)):
        evicted.append(((r.randrange(L), r.randrange(E)), r.randrange(20)))
    return Plan(r.randrange(5), layer, experts, where, hit, loads, evicted)


def random_tokens(r: random.Random, plan: Plan):
    x = r.random()
    if x < 0.55:
        return None, 1
    if x < 0.65:
        return None, r.randint(2, 9)
    if x < 0.7:
        return {}, r.choice([1, 3])
    tok = {e: r.choice([1, 1, 2, 3, 16, 2 ** 40]) for e in plan.experts if r.random() < 0.8}
    return tok, r.choice([1, max(tok.values(), default=1), 5])


def plays(seed: int, L: int, E: int, count: int, consistent: float, loads_max: int = 6):
    r = random.Random(seed)
    out = []
    for _ in range(count):
        plan = random_plan(r, L, E, consistent=r.random() < consistent, loads_max=loads_max)
        tok, tokens = random_tokens(r, plan)
        out.append((plan, tok, tokens))
    return out


# ------------------------------------------------------------------ ticks
L_EDIT = 0      # the layer whose late count a tick changes

def tick_action(kind: str, i: int):
    """What a tick callback does to a timeline after the i-th play (the same on both)."""
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


def play_both(tl0: Timeline, ps, L: int, E: int, chunks: int = 1, ticks=None):
    """Plays ps on a copy of tl0 in C (in `chunks` calls, each loading and storing it; with
    ticks, {index: action} applied after that play inside the call) and on another copy with
    Timeline.dispatch; asserts every stall and the end states equal."""
    c, p = copy.deepcopy(tl0), copy.deepcopy(tl0)
    want = []
    for i, (plan, tok, tokens) in enumerate(ps):
        want.append(p.dispatch(plan, tok, tokens))
        if ticks and i in ticks:
            ticks[i](p)
    got = []
    broken = False                 # a tick made the timeline one C does not hold
    bounds = [round(len(ps) * j / chunks) for j in range(chunks + 1)]
    for a, b in zip(bounds, bounds[1:]):
        part = ps[a:b]
        if ticks:
            def tick(i, a=a):
                nonlocal broken
                if a + i in ticks:
                    ticks[a + i](c)
                    broken |= type(c.now) is int
            out = _engine._timeline_play(c, part, L, E, tick)
        else:
            out = _engine._timeline_play(c, part, L, E)
        if out is None:
            assert broken, "a timeline the C side should hold was refused"
            out = []
            for j, x in enumerate(part):
                out.append(c.dispatch(*x))
                if a + j in ticks:
                    ticks[a + j](c)
        got.extend(out)
    assert same(got, want), [(i, x, y) for i, (x, y) in enumerate(zip(got, want)) if not same(x, y)][:3]
    assert_same(c, p)


# ------------------------------------------------------------------ the property
@st.composite
def cases(draw):
    L = draw(st.integers(1, 4))
    E = draw(st.integers(1, 12))
    tl = draw(timelines(L, E))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    count = draw(st.integers(1, 40))
    consistent = draw(st.sampled_from([1.0, 0.8, 0.0]))
    chunks = draw(st.sampled_from([1, 1, 3]))
    ticks = None
    if draw(st.integers(0, 3)) == 0:
        kinds = ["read", "set_clocks", "clear_arrival", "new_arrival", "overlap", "int_clock",
                 "late_layers"]
        ticks = {i: draw(st.sampled_from(kinds)) for i in
                 draw(st.lists(st.integers(0, count - 1), max_size=4, unique=True))}
    return tl, L, E, seed, count, consistent, chunks, ticks


@needs_engine
@prop(200, deadline=None)
@given(cases())
@example((Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0)), 2, 8, 1, 30, 1.0, 1, None))
@example((Timeline(costs_of("int_profile", 2 ** 62 - 1, 3 ** 37, 7), overlap=False), 3, 5, 7, 40,
          0.8, 3, None))
@example((Timeline(costs_of("slow_cpu", 1.5e7, 2 ** 63 - 1, 50_000_000)), 1, 12, 11, 40, 0.0, 1,
          {3: "int_clock", 1: "new_arrival"}))
@example((Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0)), 3, 6, 5, 40, 0.8, 3,
          {2: "late_layers", 9: "new_arrival", 20: "late_layers"}))
def test_random_plans_play_the_same_in_c(case):
    tl, L, E, seed, count, consistent, chunks, ticks = case
    ps = plays(seed, L, E, count, consistent)
    if ticks:
        ticks = {i: tick_action(k, i) for i, k in ticks.items()}
    play_both(tl, ps, L, E, chunks, ticks)


@needs_engine
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("eb", [200_000_000, 2.0e8])
def test_more_than_4096_transfers_in_flight_are_pruned_alike(overlap, eb):
    """8192 keys, hundreds of prefetch and background loads per dispatch: the map passes 4096
    entries and is pruned (a new dict) at the same dispatches, which changes which later
    misses count as in flight; evictions of keys in flight pop them."""
    L, E = 8, 1024
    tl = Timeline(costs_of("rtx-4090", eb, 4.0e8, 5.0e7), overlap=overlap)
    ps = plays(5, L, E, 80, 0.9, loads_max=900)
    c, p = copy.deepcopy(tl), copy.deepcopy(tl)
    prunes_c = prunes_p = 0
    peak = 0
    for plan, tok, tokens in ps:
        bc, bp = c.arrival, p.arrival
        sc = _engine._timeline_play(c, [(plan, tok, tokens)], L, E)
        sp = p.dispatch(plan, tok, tokens)
        assert same(sc, [sp])
        prunes_c += c.arrival is not bc
        prunes_p += p.arrival is not bp
        peak = max(peak, len(p.arrival))
        assert_same(c, p)
    assert peak > 3000 and prunes_p >= 2
    assert prunes_c == prunes_p
    # the same in one call
    play_both(tl, ps, L, E)


@needs_engine
def test_counters_beyond_64_bits_add_exactly():
    """transfers and an int bytes count on as Python ints past 2^64 (an expert of 2^62 - 1
    bytes); a float bytes with an int expert_bytes adds the exact product, rounded once."""
    L, E = 2, 6
    ps = plays(3, L, E, 200, 1.0, loads_max=12)
    tl = Timeline(costs_of("rtx-4090", 2 ** 62 - 1, 4.0e8, 0.0))
    tl.transfers = 2 ** 64 - 3
    play_both(tl, ps, L, E, chunks=4)
    tl.bytes = 0.1
    play_both(tl, ps, L, E, chunks=2)
    tl = Timeline(costs_of("rtx-4090", 2.5e8, 4.0e8, 0.0))
    tl.bytes = 2 ** 70 + 1                   # an int bytes + a float: the int converted
    play_both(tl, ps, L, E)


@needs_engine
def test_several_tokens_use_the_costs_numbers():
    """Records of several tokens price each expert and the dense part from the Costs object
    (gpu_expert_ms, cpu_expert_ms, dense_ms with those tokens): int and float numbers, and
    products of tokens and an int number beyond 64 bits."""
    L, E = 2, 8
    for flops in (4.0e8, 400_000_001, 3 ** 39, 2 ** 63 - 1, -(2 ** 62)):
        for dense in (0.0, 123_456_789, 9.5e7):
            tl = Timeline(costs_of("int_profile", 123_456_789, flops, dense))
            ps = []
            r = random.Random(hash((flops, dense)) & 0xffff)
            for _ in range(30):
                plan = random_plan(r, L, E, consistent=True)
                tok = {e: r.choice([1, 2, 7, 2 ** 33, 2 ** 62]) for e in plan.experts}
                ps.append((plan, tok, r.choice([1, 3, 2 ** 61])))
            play_both(tl, ps, L, E)


@needs_engine
def test_an_int_product_beyond_64_bits_rounds_once():
    """tokens x an int expert_flops_per_token is an exact product that Python rounds once to a
    float; these two make a product whose top 64 bits end in an exact half, with ones below
    them (rounding the top bits alone would round to even; multiplying the two as floats
    rounds twice)."""
    for t, flops in ((1549980723786, 10206728800673380), (1298117165243, 9839729411985009),
                     (1907069648686, -10199082975663617)):
        assert float(t * flops) != float(t) * float(flops) or t == 1549980723786
        tl = Timeline(costs_of("rtx-4090", 200_000_000, flops, 0.0))
        plan = Plan(0, 0, [1, 2], [0, CPU], [False, False], [((0, 1), 0, None, "demand")])
        play_both(tl, [(plan, {1: t, 2: t}, 1), (plan, {1: -t}, t)], 1, 4)
        tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, flops))
        play_both(tl, [(plan, None, t), (plan, None, -t)], 1, 4)


@needs_engine
def test_late_transfers_sort_on_ready_then_compute():
    """Transfers in flight landing at the same time with different compute times (several
    tokens), after a later one: late.sort() orders them by (ready, compute)."""
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e11, 0.0))     # compute-bound experts
    tl.arrival = {(0, 1): 50.0, (0, 2): 40.0, (0, 3): 40.0, (0, 4): 40.0}
    plan = Plan(0, 0, [1, 2, 3, 4], [0, 1, 2, 3], [True, True, True, False])
    for tok in ({2: 9, 3: 1, 4: 4}, {2: 1, 3: 3, 4: 1}, {2: 1, 3: 9, 4: 2 ** 30}, {1: 3}):
        play_both(tl, [(plan, tok, 1)], 1, 8)


@needs_engine
def test_a_transfer_landing_as_the_dispatch_ends_is_forgotten_by_the_prune():
    """The prune keeps the transfers landing after the dispatch's end: a background load
    landing exactly at the end (its CPU compute as long as the transfer) is forgotten."""
    L, E = 8, 1024
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0))
    tl._cpu1 = tl._t_xfer
    tl.arrival = {(k // E, k % E): 0.0 for k in range(4100)}
    tl.set_clocks(1.0, 0.0, 0.0, 0.0, 0.0, 0)
    plan = Plan(0, 7, [5], [CPU], [False], [((7, 5), 3, None, "background")])
    c, p = copy.deepcopy(tl), copy.deepcopy(tl)
    _engine._timeline_play(c, [(plan, None, 1)], L, E)
    p.dispatch(plan, None, 1)
    assert p.arrival == {} and p.now == 1.0 + tl._t_xfer
    assert_same(c, p)


@needs_engine
@pytest.mark.parametrize("overlap", [True, False])
def test_demand_loads_when_a_transfer_takes_as_long_as_an_expert(overlap):
    """Timeline.demand's formula where transfer and compute times are equal (its branch
    `txf >= gpu1`), from clocks that make its sums round."""
    L, E = 2, 12
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 5.0e7), overlap=overlap)
    tl._t_xfer = tl._gpu1 = 1 / 3
    tl.set_clocks(0.3, 0.7, 0.0, 0.0, 0.0, 0)
    r = random.Random(17)
    ps = []
    for i in range(600):        # every access a demand load or a stream (the compute waits)
        ex = r.sample(range(E), r.randint(1, 8))
        wh = [STREAM if r.random() < 0.3 else j for j in range(len(ex))]
        loads = [((i % L, e), w, None, "demand") for e, w in zip(ex, wh) if w != STREAM]
        ps.append((Plan(i, i % L, ex, wh, [False] * len(ex), loads), None, 1))
    play_both(tl, ps, L, E)


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

    def replaced_dispatch():
        t = Timeline(c)
        t.dispatch = lambda *a: 0.0
        return t

    return {
        "subclass": SubTimeline(c),
        "int clock": tl(now=3),
        "nan clock": tl(link_free=float("nan")),
        "inf clock": tl(gpu_ms=float("inf")),
        "float transfers": tl(transfers=1.0),
        "str bytes": tl(bytes="0"),
        "overlap None": tl(overlap=None),
        "int unit cost": tl(_gpu1=1),
        "arrival list": tl(arrival=[]),
        "arrival key out of range": tl(arrival={(2, 0): 1.0}),
        "arrival key of bools": tl(arrival={(True, 1): 1.0}),
        "arrival key a list": tl(arrival={"x": 1.0}),
        "arrival int value": tl(arrival={(0, 1): 1}),
        "arrival nan value": tl(arrival={(0, 1): float("nan")}),
        "negative expert_bytes": costs_with(expert_bytes=-5),
        "str expert_bytes": costs_with(expert_bytes="5"),
        "huge int flops": costs_with(expert_flops_per_token=2 ** 64),
        "bool dense": costs_with(dense_bytes_per_layer=True),
        "zero hbm": profile_with(hbm_gbps=0),
        "inf cpu": profile_with(cpu_gflops=float("inf")),
        "memory term not finite": profile_with(hbm_gbps=1e-310),
        "Costs subclass": sub_costs(),
        "dispatch replaced": replaced_dispatch(),
        "float expert_bytes, int bytes beyond a float": (lambda t: (setattr(t, "bytes", 10 ** 400), t)[1])(
            Timeline(costs_of("rtx-4090", 2.0e8, 4.0e8, 0.0))),
    }


@needs_engine
@pytest.mark.parametrize("name", sorted(_refusals()))
def test_timelines_c_does_not_hold_are_refused_untouched(name):
    tl = _refusals()[name]
    before = copy.copy(vars(tl))
    plan = Plan(0, 0, [1], [0], [False], [((0, 1), 0, None, "demand")], [])
    assert _engine._timeline_play(tl, [(plan, None, 1)], 2, 8) is None
    assert vars(tl).keys() == before.keys()
    assert all(vars(tl)[k] is before[k] for k in before)


@needs_engine
@pytest.mark.parametrize("play, error", [
    ((Plan(0, 2, [1], [0], [False]), None, 1), ValueError),               # no such layer
    ((Plan(0, 0, [8], [0], [False]), None, 1), ValueError),               # no such expert
    ((Plan(0, 0, [1, 2], [0], [False, True]), None, 1), ValueError),      # lengths differ
    ((Plan(0, 0, list(range(8)) + [0], [0] * 9, [False] * 9), None, 1), ValueError),  # n > E
    ((Plan(0, 0, [1], [0], [1]), None, 1), TypeError),                    # hit not a bool
    ((Plan(0, 0, [1], [-3], [False]), None, 1), ValueError),              # where
    ((Plan(0, 0, [1], [0], [False], [((0, 9), 0, None, "demand")]), None, 1), ValueError),
    ((Plan(0, 0, [1], [0], [False], [((0, 1), 0, None)]), None, 1), TypeError),
    ((Plan(0, 0, [1], [0], [False], [((0, 1), 0, None, b"demand")]), None, 1), TypeError),
    ((Plan(0, 0, [1], [0], [False], [], [(0, 1)]), None, 1), TypeError),
    ((Plan(0, 0, [1], [0], [False]), {1: 2.0}, 1), TypeError),            # tokens_of values
    ((Plan(0, 0, [1], [0], [False]), [1], 1), TypeError),
    ((Plan(0, 0, [1], [0], [False]), None, 2 ** 64), ValueError),
    ((Plan(0, 0, [1], [0], [False]), None, "1"), TypeError),
    (("not a plan", None, 1), AttributeError),
    ((Plan(0, 0, [1], [0], [False]), None), TypeError),
])
def test_bad_plays_are_exceptions_and_change_nothing(play, error):
    tl = Timeline(costs_of("rtx-4090", 200_000_000, 4.0e8, 0.0))
    good = (Plan(0, 1, [3], [0], [False], [((1, 3), 0, None, "demand")]), None, 1)
    before = state(tl)
    with pytest.raises(error):
        _engine._timeline_play(tl, [good, play], 2, 8)
    assert same(state(tl), before)
    with pytest.raises(ValueError):
        _engine._timeline_play(tl, [good], 0, 8)
    with pytest.raises(ValueError):
        _engine._timeline_play(tl, [good], 2 ** 20, 2 ** 20)


@needs_engine
def test_an_error_in_a_tick_leaves_the_timeline_as_of_the_last_play():
    L, E = 2, 8
    ps = plays(9, L, E, 10, 1.0)
    c, p = Timeline(costs_of("h100", 2.0e8, 4.0e8, 0.0)), None
    p = copy.deepcopy(c)

    def tick(i):
        if i == 4:
            raise KeyError("stop")

    with pytest.raises(KeyError):
        _engine._timeline_play(c, ps, L, E, tick)
    for plan, tok, tokens in ps[:5]:
        p.dispatch(plan, tok, tokens)
    assert_same(c, p)
