"""Threads, callbacks and integers (SPEC §5): on both backends, every entry point holds the
runtime's lock; user code (a logging handler, a finalizer, an argument's __float__ or
__index__, a replay's tick) never runs while state it could change is half-updated, and no
runtime's lock is held while user code that could take another's runs; integers beyond the
runtime's counters are a clear error. The hostile programs of an audit of the compiled core
are kept here: each gives the same result, or the same documented error, on both backends
(and the sanitizer run, tests/run_sanitizers.sh, runs this file under ASan+UBSan)."""

from __future__ import annotations

import gc
import logging
import threading

import pytest

import mpl
from mpl.runtime import compiled
from mpl.runtime.core import DispatchError, RuntimeConfigError
from mpl.runtime.guard import RuntimeBusyError
from tier_helpers import four_in_parts

BACKENDS = ["pure"] + (["compiled"] if compiled.available() else [])

MONITORED = ("policy m { cache { capacity = 4 eviction = lfu } prefetch { strategy = history "
             "budget = 2 } monitor { metrics = [hit_rate, miss_rate] window = 20 log_interval = 5 "
             "warmup = none } adapt { when hit_rate < 0.3 for 10 accesses { eviction = lru } } }")
LEARNED = ("policy l { cache { capacity = 6 } prefetch { strategy = learned budget = 2 "
           "context_layers = 2 } }")
PER_LAYER = ("policy pl { cache { capacity = 3 eviction = lru } per_layer { allocation = entropy "
             "total_budget = 12 min_capacity = 1 max_capacity = 6 rebalance_interval = 4 } }")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def make(text, backend, L=4, E=8, K=2):
    return mpl.loads(text).runtime(L, E, K, backend=backend)


def feed(rt, n, L=4, E=8, K=2, seed=0):
    import random
    r = random.Random(seed)
    for i in range(n):
        rt.dispatch(i % L, r.sample(range(E), K))


class _Capture(logging.Handler):
    def __init__(self, fn):
        super().__init__(logging.DEBUG)
        self.fn = fn

    def emit(self, record):
        self.fn(record)


@pytest.fixture
def runtime_log():
    lg = logging.getLogger("mpl.runtime")
    old = lg.level
    lg.setLevel(logging.DEBUG)
    handlers = []

    def add(fn):
        h = _Capture(fn)
        lg.addHandler(h)
        handlers.append(h)
    yield add
    for h in handlers:
        lg.removeHandler(h)
    lg.setLevel(old)


# ------------------------------------------------------------------ callbacks
def test_a_logging_handler_reads_whole_states(backend, runtime_log):
    """A handler reading the runtime on each monitor record sees a whole state: the record's
    access count is at most the runtime's, and every read succeeds."""
    rt = make(MONITORED, backend)
    seen = []

    def read(record):
        s = rt.stats()
        seen.append((record.args["access"], s["accesses"], rt.metrics()["hit_rate"]))
    runtime_log(read)
    feed(rt, 60)
    assert len(seen) == 60 * 2 // 5
    assert all(acc <= total for acc, total, _ in seen)


def test_a_handler_may_dispatch_again(backend, runtime_log):
    """A handler's dispatch runs after the one that logged has finished (no lock is held)."""
    rt = make(MONITORED, backend)
    calls = []

    def again(record):
        if len(calls) < 3:
            calls.append(rt.dispatch(0, [1, 2]))
    runtime_log(again)
    feed(rt, 20)
    assert len(calls) == 3


def test_a_tick_reads_but_cannot_change_its_replay(backend):
    from mpl.sim import synthesize
    from mpl.runtime.backend import forced
    tr = synthesize("mixtral-8x7b", steps=20, seed=1)
    pol = mpl.loads("policy t { cache { capacity = 32 } }")
    got = []
    with forced(backend):
        rt = pol.runtime(tr.header.num_moe_layers, tr.header.num_experts, tr.header.top_k)
    from mpl.timemodel import hardware as hw
    from mpl.timemodel.timeline import Timeline
    _eb, costs = hw.costs_for_trace(hw.resolve(None), pol.ir, tr.header)
    tl = Timeline(costs)

    def tick(n):
        got.append((n, rt.stats()["accesses"], tl.now))
        with pytest.raises(RuntimeBusyError):
            rt.dispatch(0, [1])
        with pytest.raises(RuntimeBusyError):
            rt.add_stall(1.0)
    from mpl.sim.tracepack import replay_trace
    replay_trace(rt, tr, tl, tick, 100)
    assert [n for n, _, _ in got] == list(range(100, len(tr) + 1, 100))
    assert all(acc == n * 2 for n, acc, _ in got)            # top-2, one token: whole dispatches
    assert all(b > a for (_, _, a), (_, _, b) in zip(got, got[1:]))   # the clocks were handed over


def test_a_float_that_rewrites_the_experts(backend):
    """A weight's __float__ that rewrites the experts list mid-call: the dispatch decides on
    the ids as they were when it was called (both backends)."""
    rt = make("policy f { cache { capacity = 4 eviction = score } }", backend, E=8)

    class Evil:
        def __init__(self, ex):
            self.ex = ex

        def __float__(self):
            self.ex[:] = list(range(1000, 2000))
            return 0.5
    ex = [1, 2]
    plan = rt.dispatch(0, ex, [Evil(ex), 0.5])
    assert list(plan.experts) == [1, 2] and plan.where[0] >= 0
    assert rt.stats()["accesses"] == 2


def test_a_finalizer_reading_the_runtime_during_a_dispatch(backend):
    """A collection a dispatch's allocations run calls a finalizer that reads the runtime:
    the read sees a whole state (or the collection waits until the dispatch is done)."""
    rt = make(MONITORED, backend)
    reads = []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            reads.append(rt.stats()["accesses"])
    old = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for i in range(200):
            Cycle()
            rt.dispatch(i % 4, [i % 8, (i + 3) % 8])
    finally:
        gc.set_threshold(*old)
    gc.collect()
    assert reads and all(a % 2 == 0 for a in reads)    # whole dispatches of two accesses


# ------------------------------------------------------------------ threads
def test_two_threads_dispatch_whole_dispatches(backend):
    rt = make(PER_LAYER, backend, E=16)
    errors = []

    def work(seed):
        try:
            feed(rt, 400, E=16, seed=seed)
        except Exception as e:          # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in ts)
    s = rt.stats()
    assert s["accesses"] == 3 * 400 * 2
    assert sum(rt.capacities()) <= 12


def test_two_runtimes_two_threads_one_handler_no_deadlock(backend, runtime_log):
    """One handler that reads both runtimes, each dispatched by its own thread: no deadlock
    (no runtime's lock is held while a handler runs)."""
    a = make(MONITORED, backend)
    b = make(MONITORED, backend)
    runtime_log(lambda record: (a.stats(), b.stats()))
    done = []

    def work(rt, seed):
        feed(rt, 300, seed=seed)
        done.append(rt)
    ts = [threading.Thread(target=work, args=(a, 1)), threading.Thread(target=work, args=(b, 2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "deadlock"
    assert len(done) == 2


def test_learned_dump_while_another_thread_dispatches(backend):
    rt = make(LEARNED, backend, L=6, E=16, K=4)
    stop = threading.Event()
    errors = []

    def work():
        try:
            i = 0
            while not stop.is_set():
                rt.dispatch(i % 6, [(i * 3 + j) % 16 for j in range(4)])
                i += 1
        except Exception as e:          # pragma: no cover
            errors.append(e)
    t = threading.Thread(target=work)
    t.start()
    try:
        for _ in range(200):
            d = rt.learned.dump()
            assert d is not None
    finally:
        stop.set()
        t.join(60)
    assert not errors


def tiered(split: int) -> str:
    """A four-tier policy with its experts in ``split`` parts, monitored (a log record every
    three dispatches)."""
    return four_in_parts(split).replace(
        "prefetch {", "monitor { metrics = [hit_rate] window = 10 log_interval = 3 "
                      "warmup = none }\n    prefetch {")


@pytest.mark.parametrize("split", [1, 3])
def test_tiered_runtimes_under_threads_handlers_and_finalizers(backend, runtime_log, split):
    """A tiered policy (its experts whole or in parts): two threads dispatch into one runtime
    and a third into another, while a fourth reads the first, a logging handler reads both and
    a finalizer run by the collector reads both: every read sees whole dispatches, no
    deadlock, every access counted."""
    a = make(tiered(split), backend, L=3, E=16)
    b = make(tiered(split), backend, L=3, E=16)
    runtime_log(lambda record: (a.stats(), b.resident(), a.store_keys(), b.capacities()))
    errors, sent = [], []

    def work(rt, seed):
        import random
        r = random.Random(seed)
        try:
            for i in range(400):
                ex = r.sample(range(16), r.randint(1, 6))
                rt.dispatch(i % 3, ex, tokens=r.randint(1, 4))
                sent.append((rt, len(ex)))          # (list.append is atomic)
                if i % 97 == 0:
                    rt.set("prefetch.budget", r.randint(1, 3))
        except Exception as e:          # pragma: no cover - reported below
            errors.append(e)

    def read():
        try:
            for _ in range(400):
                s = a.stats()
                hot = s["tiers"][0]
                assert [r["tier"] for r in s["tiers"]] == ["hot", "warm", "ram", "ssd"]
                assert hot["resident"] <= hot["capacity"]
                assert s["hits"] + s["misses"] == s["accesses"]
                a.resident(), a.metrics(), a.values()
        except Exception as e:          # pragma: no cover
            errors.append(e)

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            a.stats(), b.resident()
    ts = [threading.Thread(target=work, args=(a, 1)), threading.Thread(target=work, args=(a, 2)),
          threading.Thread(target=work, args=(b, 3)), threading.Thread(target=read)]
    old = gc.get_threshold()
    gc.set_threshold(5)
    try:
        for t in ts:
            t.start()
        for _ in range(500):
            Cycle()
        for t in ts:
            t.join(120)
    finally:
        gc.set_threshold(*old)
    assert not any(t.is_alive() for t in ts), "deadlock"
    assert not errors, errors
    for rt in (a, b):
        assert rt.stats()["accesses"] == sum(n for r, n in sent if r is rt) > 0


# ------------------------------------------------------------------ integers
def test_steps_beyond_the_counter(backend):
    rt = make("policy s { cache { capacity = 4 } }", backend)
    for bad in (2**62 + 1, 2**63 - 1, 2**64):
        with pytest.raises(DispatchError, match="2\\*\\*62"):
            rt.dispatch(0, [1], step=bad)
    rt.dispatch(0, [1], step=2**62)
    assert rt.step == 2**62
    with pytest.raises(DispatchError, match="step counter would pass"):
        rt.dispatch(0, [2])                  # the next step would be 2**62 + 1
    assert rt.stats()["accesses"] == 1
    rt.dispatch(1, [2])                      # the same step: fine
    assert rt.step == 2**62


def test_tokens_beyond_the_counter(backend):
    rt = make("policy s { cache { capacity = 4 } schedule { mode = hybrid } }", backend)
    with pytest.raises(DispatchError, match="2\\*\\*53"):
        rt.dispatch(0, [1], None, 2**53 + 1)
    rt.dispatch(0, [1], None, 2**53)
    assert rt.stats()["accesses"] == 1


# ------------------------------------------------------------------ writes
def test_attribute_writes_are_refused_alike(backend):
    rt = make(PER_LAYER, backend)
    for name, value in (("lookahead", 0), ("rebalance_interval", 0), ("step", 0), ("stall", 1.0)):
        with pytest.raises(AttributeError, match="rt.set"):
            setattr(rt, name, value)
    with pytest.raises(RuntimeConfigError, match="prefetch.lookahead"):
        rt.set("prefetch.lookahead", 0)
    rt.set("per_layer.rebalance_interval", 0)       # "never": the dispatches go on
    feed(rt, 50)
    assert rt.values()["per_layer.rebalance_interval"] == 0


def test_set_applies_an_adapt_action(backend):
    rt = make("policy s { cache { capacity = 6 eviction = lru } adapt { when hit_rate < 0 "
              "{ eviction = lfu } } }", backend)
    feed(rt, 40)
    before = rt.resident()
    evicted = rt.set("cache.capacity", 2)
    assert len(evicted) == len(before) - 2
    assert len(rt.resident()) == 2 and rt.capacities() == [2]
    rt.set("cache.eviction", "lfu")                  # a value the policy reaches
    with pytest.raises(RuntimeConfigError, match="not a value this policy reaches"):
        rt.set("cache.eviction", "arc")
    with pytest.raises(RuntimeConfigError, match="not a parameter"):
        rt.set("cache.pin", [1])


def _multi_token_pack():
    from mpl.sim.tracepack import pack_trace
    from mpl.trace import Dispatch, Trace, TraceHeader
    h = TraceHeader(model="t", num_layers=2, moe_layers=(0, 1), num_experts=8, top_k=2)
    ds = [Dispatch(s, layer, [[(s + layer) % 8, (s + 3) % 8], [(s + 3) % 8, (s + 5) % 8]])
          for s in range(30) for layer in range(2)]
    return h, pack_trace(Trace(h, ds), 8)


def test_a_packed_traces_token_lookup_that_rewrites_its_lists():
    """A key whose __eq__ (run by the engine's lookup of a record's tokens per expert) empties
    the packed trace's lists: the replay reads the entries as they were when it started."""
    from mpl.timemodel import hardware as hw
    from mpl.timemodel.timeline import Timeline

    pol = mpl.loads("policy t { cache { capacity = 4 } }")
    header, clean_pack = _multi_token_pack()
    _eb, costs = hw.costs_for_trace(hw.resolve(None), pol.ir, header)

    def replayed(p):
        rt = pol.runtime(2, 8, 2, backend="compiled")
        rt.replay_packed(p, Timeline(costs))
        return rt.stats()

    clean = replayed(clean_pack)
    p = _multi_token_pack()[1]
    assert p.multi

    class Evil:
        armed = False

        def __hash__(self):
            return hash(p.experts[p.offs[p.multi[0][0]]])

        def __eq__(self, other):
            if Evil.armed:
                Evil.ran = True
                p.multi.clear()
            return False

    idx, tokens = p.multi[0]
    p.multi[0] = (idx, {Evil(): 5, **tokens})      # first in the probe order
    Evil.armed = True
    assert replayed(p) == clean and Evil.ran

    p = _multi_token_pack()[1]

    class Index:
        def __index__(self):
            p.multi.clear()
            return 0
    p.multi[0] = (Index(), p.multi[0][1])
    with pytest.raises(TypeError, match="entries are"):
        replayed(p)


def test_a_tick_that_rewrites_the_packed_offsets():
    """A progress tick (Python code between records) that makes the next record's first
    offset negative: the replay refuses that record (ValueError) instead of reading before
    the experts array."""
    from mpl.timemodel import hardware as hw
    from mpl.timemodel.timeline import Timeline

    pol = mpl.loads("policy t { cache { capacity = 4 } }")
    header, p = _multi_token_pack()
    _eb, costs = hw.costs_for_trace(hw.resolve(None), pol.ir, header)
    rt = pol.runtime(2, 8, 2, backend="compiled")

    def tick(count):
        if count == 3:               # record 3 would read experts [-1, 2): 3 ids, one before
            p.offs[3] = -1           # the array
            p.offs[4] = 2

    with pytest.raises(ValueError, match="record 3: bad offsets"):
        rt.replay_packed(p, Timeline(costs), tick, 1)
