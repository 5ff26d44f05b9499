"""A runtime used from callbacks and from several threads (SPEC §11, "Threads and
callbacks"; docs/runtime.md): a logging handler, a garbage-collection finalizer or another
thread that reads the runtime while it dispatches sees the state as it is (a snapshot while
the compiled live dispatch holds it in C) and never frees or moves it; a dispatch, a replay or
a change from inside a dispatch raises RuntimeBusyError; a write while C holds the state is
obeyed by the next dispatch; sizes computed from user values never overflow; the private
entry points of the compiled core refuse bad arguments with an exception. Every case runs on
the compiled live dispatch and on the pure runtime, and where the case works the results
equal the pure runtime's."""

from __future__ import annotations

import gc
import logging
import random
import sys
import threading
from array import array

import pytest

import mpl
from mpl.runtime import fast
from mpl.runtime.guard import RuntimeBusyError
from runtime_helpers import full_state

needs_live = pytest.mark.skipif(fast._kernel is None or not hasattr(fast._kernel, "LiveState"),
                                reason=f"the compiled live dispatch is not available: {fast._WHY}")

MONITOR = ("policy m { cache { capacity = 4 eviction = lfu } prefetch { strategy = history "
           "budget = 2 } monitor { metrics = [hit_rate, eviction_rate] window = 6 "
           "log_interval = 2 } adapt { when hit_rate < 0.3 for 9 accesses { eviction = lru } } }")
SHAPE = (3, 8, 2)


def runtimes(text, shape=SHAPE):
    """(the compiled runtime, or None where the extension is not built; the pure one)."""
    pol = mpl.loads(text)
    live = pol.runtime(*shape) if fast.available() else None
    with fast.pure():
        pure = pol.runtime(*shape)
    if live is not None:
        assert fast.live_backend(live) == "compiled"
    return [rt for rt in (live, pure) if rt is not None]


def calls(n, seed=5, shape=SHAPE):
    r = random.Random(seed)
    L, E, K = shape
    return [(i % L, r.sample(range(E), K)) for i in range(n)]


class Handler(logging.Handler):
    """A handler on mpl.runtime that calls ``act(record)`` and keeps what it returned or
    raised."""

    def __init__(self, act):
        super().__init__(logging.DEBUG)
        self.act = act
        self.seen = []

    def emit(self, record):
        try:
            self.seen.append(("ok", self.act(record)))
        except Exception as e:            # noqa: BLE001 - the test looks at it
            self.seen.append((type(e).__name__, str(e)))


def with_handler(act, fn):
    h = Handler(act)
    log = logging.getLogger("mpl.runtime")
    old = log.level
    log.addHandler(h)
    log.setLevel(logging.DEBUG)
    try:
        fn()
    finally:
        log.removeHandler(h)
        log.setLevel(old)
    return h.seen


def test_a_logging_handler_reads_the_runtime_while_the_monitor_logs():
    """The monitor logs from inside the dispatch; a handler reading counters, stats() and
    the caches there gets the values as they are at that access, equal on both backends, and
    the runs end in the same state."""
    seen, ends = [], []
    for rt in runtimes(MONITOR):
        def act(record, rt=rt):
            return (rt.evictions, rt.demand_loads, rt.stats()["hits"], sorted(rt.resident()),
                    len(rt.caches[0].resident))
        seen.append(with_handler(act, lambda rt=rt: [rt.dispatch(l, e) for l, e in calls(150)]))
        ends.append(full_state(rt))
    assert all(kind == "ok" for kind, _ in seen[0]) and len(seen[0]) > 50
    assert seen[0] == seen[-1]
    assert ends[0] == ends[-1]


def test_a_dispatch_from_inside_a_dispatch_is_refused():
    """A handler that dispatches again on the runtime it is logging for gets
    RuntimeBusyError (both backends); the outer dispatches go on and end as without it."""
    for rt in runtimes(MONITOR):
        seen = with_handler(lambda record, rt=rt: rt.dispatch(0, [1, 2]),
                            lambda rt=rt: [rt.dispatch(l, e) for l, e in calls(40)])
        assert seen and all(kind == "RuntimeBusyError" for kind, _ in seen)
        assert "inside a dispatch of the same runtime" in seen[0][1]
        ref = runtimes(MONITOR)[-1]
        for l, e in calls(40):
            ref.dispatch(l, e)
        assert full_state(rt) == full_state(ref)


def test_a_change_from_inside_a_dispatch_is_refused_and_a_change_between_is_obeyed():
    """A handler setting a runtime attribute while the compiled dispatch holds the state is
    refused (the state is in use); the same write between two dispatches is obeyed by the
    next one, as on the pure runtime (it used to be ignored by the C dispatch)."""
    text = ("policy w { cache { capacity = 4 eviction = lru } prefetch { strategy = history "
            "budget = 3 } monitor { window = 4 log_interval = 3 } }")
    rts = runtimes(text)
    if len(rts) == 2:
        seen = with_handler(lambda record: setattr(rts[0], "budget", 1),
                            lambda: rts[0].dispatch(0, [1, 2]) and rts[0].dispatch(1, [3, 4]))
        assert seen and all(kind == "RuntimeBusyError" for kind, _ in seen)
    fresh = runtimes(text)
    for rt in fresh:
        for l, e in calls(20):
            rt.dispatch(l, e)
        rt.budget = 1                     # an attribute the C dispatch had taken a copy of
        for l, e in calls(30, seed=9):
            rt.dispatch(l, e)
    assert all(rt.budget == 1 for rt in fresh)
    assert full_state(fresh[0]) == full_state(fresh[-1])


class _Reader:
    """Cyclic garbage whose finalizer reads the runtime (run by a collection that an
    allocation inside the dispatch triggers)."""
    seen: list = []

    def __init__(self, rt):
        self.rt = rt
        self.me = self

    def __del__(self):
        rt = self.rt
        _Reader.seen.append((rt.evictions, rt.stats()["accesses"], len(rt.resident())))


def test_a_finalizer_reads_the_runtime_inside_a_dispatch():
    """With the collector run by almost every allocation, finalizers that read the runtime
    run inside the compiled dispatch; the runs end as on the pure runtime."""
    ends = []
    old = gc.get_threshold()
    for rt in runtimes(MONITOR):
        _Reader.seen = []
        gc.set_threshold(1, 1, 1)
        try:
            for l, e in calls(200):
                _Reader(rt)
                rt.dispatch(l, e)
        finally:
            gc.set_threshold(*old)
            gc.collect()
        assert _Reader.seen
        ends.append(full_state(rt))
    assert ends[0] == ends[-1]


def test_weights_changed_by_a_callback_during_the_dispatch_do_not_reach_it():
    """The router weights a dispatch was given are its own: a handler that empties the
    caller's list while the dispatch runs changes nothing (score eviction reads them)."""
    text = ("policy s { cache { capacity = 3 eviction = score } monitor { window = 3 "
            "log_interval = 1 } }")
    ends = []
    for rt in runtimes(text):
        current = []
        with_handler(lambda record: current[-1].clear() if current else None,
                     lambda rt=rt: [rt.dispatch(l, e, current.append([0.7, 0.3]) or current[-1])
                                    for l, e in calls(60)])
        ends.append(full_state(rt))
    ref = runtimes(text)[-1]
    for l, e in calls(60):
        ref.dispatch(l, e, [0.7, 0.3])
    assert ends[0] == ends[-1] == full_state(ref)


def _threads(rt, text, reader, n=400):
    """Thread A dispatches ``n`` calls while thread B keeps calling ``reader(rt)``; the
    switch interval is tiny so that B runs inside A's calls into Python (logging,
    allocations). Returns what B saw and any exception either thread raised."""
    errors, seen = [], []
    done, reading = threading.Event(), threading.Event()

    def dispatcher():
        try:
            reading.wait(60)             # the reader runs from the first dispatch on
            for l, e in calls(n):
                rt.dispatch(l, e)
        except BaseException as e:       # noqa: BLE001
            errors.append(e)
        finally:
            done.set()

    def read():
        try:
            while not done.is_set():
                seen.append(reader(rt))
                reading.set()
        except BaseException as e:       # noqa: BLE001
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        ts = [threading.Thread(target=dispatcher), threading.Thread(target=read)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
    finally:
        sys.setswitchinterval(old)
    return seen, errors


@pytest.mark.parametrize("reader", [lambda rt: rt.evictions, lambda rt: rt.stats()["hits"],
                                    lambda rt: dict(rt.resident())],
                         ids=["counter", "stats", "resident"])
def test_a_second_thread_reads_while_the_first_dispatches(reader):
    """A metrics thread reading counters, stats() or the residents while another thread
    dispatches a monitor policy: no crash, no error, and the dispatches end exactly as the
    same dispatches alone on the pure runtime (every read waited for a dispatch to end)."""
    ref = runtimes(MONITOR)[-1]
    for l, e in calls(400):
        ref.dispatch(l, e)
    for rt in runtimes(MONITOR):
        log = logging.getLogger("mpl.runtime")
        h = Handler(lambda record: None)      # the monitor's logging: calls into Python
        log.addHandler(h)
        log.setLevel(logging.DEBUG)
        try:
            seen, errors = _threads(rt, MONITOR, reader)
        finally:
            log.removeHandler(h)
            log.setLevel(logging.NOTSET)
        assert not errors, errors
        assert seen
        assert full_state(rt) == full_state(ref)


def test_a_rebalancing_policy_with_a_second_thread_reading():
    """The per-layer rebalance of std/epcb_entropy calls Python (the split) in the middle of
    the compiled dispatch; a second thread reading stats meanwhile waits for the dispatch."""
    text = 'import "std/epcb_entropy"\npolicy e extends epcb_entropy { per_layer { rebalance_interval = 5 } }'
    shape = (4, 16, 2)
    pol = mpl.loads(text, policy="e")
    rts = []
    if fast.available():
        rts.append(pol.runtime(*shape))
    with fast.pure():
        rts.append(pol.runtime(*shape))
    ends = []
    for rt in rts:
        errors, done = [], threading.Event()

        def dispatcher(rt=rt):
            try:
                for l, e in calls(600, shape=shape):
                    rt.dispatch(l, e)
            except BaseException as x:   # noqa: BLE001
                errors.append(x)
            finally:
                done.set()

        def read(rt=rt):
            while not done.is_set():
                rt.stats()
                rt.capacities()

        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            ts = [threading.Thread(target=dispatcher), threading.Thread(target=read)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
        finally:
            sys.setswitchinterval(old)
        assert not errors, errors
        ends.append(full_state(rt))
    assert ends[0] == ends[-1]


def test_two_threads_dispatching_on_one_runtime_take_turns():
    """Two threads dispatching on one runtime are serialised by its lock: every dispatch is
    whole (the counters add up), and no state is corrupted."""
    for rt in runtimes(MONITOR):
        errors = []

        def work(seed, rt=rt):
            try:
                for l, e in calls(200, seed=seed):
                    rt.dispatch(l, e)
            except BaseException as x:   # noqa: BLE001
                errors.append(x)

        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            ts = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
        finally:
            sys.setswitchinterval(old)
        assert not errors, errors
        st = rt.stats()
        assert st["accesses"] == 2 * 200 * SHAPE[2]
        assert st["hits"] + st["misses"] == st["accesses"]
        assert len(rt.resident()) <= 4


def test_a_huge_prefetch_budget_is_taken_exactly():
    """``rt.budget = 2**62`` with lookahead 4: the proposals are bounded by what the target
    layers hold (the C dispatch's buffers were sized budget x lookahead), and the runs equal
    the pure runtime's."""
    text = ("policy b { cache { capacity = 6 eviction = lru } prefetch { strategy = history "
            "lookahead = 4 budget = 2 } }")
    ends = []
    for rt in runtimes(text, (5, 8, 2)):
        rt.budget = 2 ** 62
        for l, e in calls(80, shape=(5, 8, 2)):
            rt.dispatch(l, e)
        ends.append(full_state(rt))
    assert ends[0] == ends[-1]


def test_belady_with_a_capacity_beyond_every_key():
    """A capacity of 2**62 slots: the optimum is the one of a cache that holds every key
    (no overflow in the kernel's sizes), on both backends."""
    from mpl.sim.belady import simulate, simulate_pure
    reqs = [[1, 2], [3], [1, 4], [2, 3]] * 5
    want = simulate_pure(reqs, 10)
    for cap in (10, 2 ** 62):
        got = simulate(reqs, cap)
        assert (got.hits, got.loads, got.evictions) == (want.hits, want.loads, want.evictions)
    from mpl.sim.belady import belady
    trace = mpl.sim.synthesize("mixtral-8x7b", steps=20, seed=3)
    E = trace.header.num_experts
    a = belady(trace.dispatches, E, capacity=2 ** 62)
    with fast.pure():
        b = belady(trace.dispatches, E, capacity=2 ** 62)
    assert (a.hits, a.loads, a.evictions) == (b.hits, b.loads, b.evictions)
    assert a.evictions == 0


@pytest.mark.skipif(fast._kernel is None, reason="the compiled kernel is not built")
def test_belady_numbers_sparse_keys_densely():
    """Keys spread over a huge declared expert count (header-sized tables would take
    gigabytes) are numbered by what occurs: the same optimum as the reference, pins and
    ties included."""
    from mpl.sim.belady import simulate_pure
    E = 1 << 28
    r = random.Random(2)
    pool = {0: [3, 77, 12], 1: [5, E - 1], 9: [1, 2, 3], 39: [E - 2, 0]}
    reqs = []
    for _ in range(80):
        layer = r.choice(list(pool))
        reqs.append([layer * E + x for x in r.sample(pool[layer], r.randint(1, len(pool[layer])))])
    offs, layers, experts = array("q", [0]), array("i"), array("i")
    for ks in reqs:
        layers.append(ks[0] // E)
        experts.extend(k % E for k in ks)
        offs.append(len(experts))
    for cap in (1, 3, 6):
        got = fast._kernel.belady(offs, layers, experts, E, cap, array("q", [77, 9 * E + 2]), -1, None)
        want = simulate_pure(reqs, cap + 2, frozenset({77, 9 * E + 2}))
        assert got[:5] == (want.accesses, want.hits, want.loads, want.streamed, want.evictions)


@pytest.mark.skipif(fast._kernel is None, reason="the compiled kernel is not built")
def test_the_private_entry_points_refuse_bad_arguments():
    """None for a buffer, a capacity that is not an int, records out of range: a Python
    exception, never a crash."""
    k = fast._kernel
    with pytest.raises(TypeError):
        k.belady(None, None, None, 4, 2, None, -1, None)
    with pytest.raises(ValueError):
        k.belady(array("q", [0, 1]), array("i", [0]), array("i", [9]), 4, 2, None, -1, None)
    with pytest.raises(ValueError):
        k.belady(array("q", [0, 1]), array("i", [0]), array("i", [1]), 4, -1, None, -1, None)
    rt = mpl.loads("policy p { cache { capacity = 2 } }").runtime(2, 4, 1)
    p = fast.pack([(0, [1], None, 1, None, None, None)], 4)
    cfg_rt = (0, False, False, 2, 4, 8, 0.9, 10, 0.3, 1.0, -1, 1 << 60, 0.0, True, 0, 0, -1,
              False, 0, -1.0, 0.7, 1e9, 1.0, 0, 0, 0.05, 100, 0, 0.0, 128.0)
    clocks = (1.0, 1.0, 1.0, False) + (0.0,) * 5 + (1.0, 0.0, 0.0)
    with pytest.raises(TypeError):
        k.replay(cfg_rt, [2], bytes(4), None, None, None, None, None, None, None, None, clocks)
    with pytest.raises(TypeError):
        k.replay(cfg_rt, ["2"], bytes(4), p.layers, p.offs, p.experts, None, p.steps, p.tokens,
                 None, None, clocks)
    bad = array("i", [7])
    with pytest.raises(ValueError):
        k.replay(cfg_rt, [2], bytes(4), p.layers, p.offs, bad, None, p.steps, p.tokens, None,
                 None, clocks)
    assert rt.stats()["accesses"] == 0


@needs_live
def test_the_live_state_refuses_to_move_during_a_call_and_validates_a_load():
    """LiveState.dump() and load() from inside a dispatch (a handler calling the private
    glue) are refused; a load() naming keys or slots out of place is a ValueError."""
    rt = runtimes(MONITOR)[0]
    live = rt._live
    seen = with_handler(lambda record: live.dump(), lambda: [rt.dispatch(l, e) for l, e in calls(30)])
    # (records the pure tail logs, where an adapt rule fires, find the state out of C)
    assert all(kind == "RuntimeError" and ("inside a dispatch" in msg or "without the state" in msg)
               for kind, msg in seen)
    assert any("inside a dispatch" in msg for _, msg in seen)
    snap = with_handler(lambda record: live.dump(True)["counters"][3], lambda: rt.dispatch(0, [5, 6]))
    assert all(kind == "ok" for kind, _ in snap)
    ref = runtimes(MONITOR)[-1]
    for l, e in calls(30) + [(0, [5, 6])]:
        ref.dispatch(l, e)
    assert full_state(rt) == full_state(ref)
    fresh = mpl.loads("policy p { cache { capacity = 2 } }").runtime(2, 4, 1)
    fresh.dispatch(0, [1])
    live = fresh._live
    args = list(live_load_args(fresh))
    args[1] = [(0, 0, 0, 2, [(99, 0)], [99])]     # a resident key beyond the 8 keys
    with pytest.raises(ValueError):
        live.load(*args)
    args[1] = [(0, 0, 0, 2, [(1, 0)], [1, 1])]    # a store key twice
    with pytest.raises(ValueError):
        live.load(*args)
    args = list(live_load_args(fresh))
    args[2] = [5, 5]                               # a free slot out of the pool, twice
    with pytest.raises(ValueError):
        live.load(*args)
    fresh.dispatch(1, [2])                         # the runtime goes on (taken again)
    assert fresh.stats()["accesses"] == 2


def live_load_args(rt):
    """The arguments fast._live_take gives LiveState.load, recorded from a real take."""
    got = {}
    live = rt._live
    real = type(live).load

    class Spy:
        def load(self, *a):
            got["a"] = a
            raise RuntimeError("recorded")

    fast.live_sync(rt)
    d = rt.__dict__
    d["_live"] = Spy()
    try:
        with pytest.raises(RuntimeError, match="recorded"):
            fast._live_take(rt)
    finally:
        d["_live"] = live
    assert real is not None
    return got["a"]
