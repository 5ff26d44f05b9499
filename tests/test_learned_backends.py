"""The compiled engine's learned predictor (``_engine.Learned``, mpl/runtime/c/learned.c)
against its reference, mpl.runtime.prefetch.Learned: for random call sequences (several layers
back, wrapping into the next pass, router weights or none, speculative predictions, rows cut
back and halved, the window and the confidence changed on the way, a window of one pass) both
return the same predictions and hold the same state (their ``dump()``s) after every call; bad
calls are exceptions that change nothing; sizes from user values are checked (a depth of
2^63 - 1, steps and distances near 2^62); and ``dump()`` returns one consistent state while a
finalizer it triggers, or another thread, calls the predictor (the compiled predictor before
this one wrote past a row, or returned a tuple with empty slots, there)."""

from __future__ import annotations

import gc
import random
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, strategies as st

import mpl
from mpl.runtime.errors import DispatchError
from mpl.runtime.prefetch import Learned
from property_profiles import prop

try:
    from mpl.runtime import _engine
except ImportError:          # no compiler at install time: the pure runtime only
    _engine = None

needs_engine = pytest.mark.skipif(_engine is None or not hasattr(_engine, "Learned"),
                                  reason="the compiled engine (mpl.runtime._engine) is not built")


def _pair(L, E, context, window, confidence, depth, row_cap):
    return (_engine.Learned(L, E, context, window, confidence, depth, row_cap),
            Learned(L, E, context, window, confidence, depth, row_cap))


@st.composite
def sessions(draw):
    L = draw(st.integers(1, 5))
    E = draw(st.integers(1, 12))
    shape = dict(L=L, E=E, context=draw(st.integers(1, 3)), window=draw(st.integers(1, 6)),
                 confidence=draw(st.sampled_from([0.0, 0.05, 0.3, 0.9])),
                 depth=draw(st.sampled_from([1, 2, 3, 2 ** 63 - 1])),
                 row_cap=draw(st.integers(1, 4)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    steps = draw(st.integers(1, 12))
    return shape, seed, steps


@needs_engine
@prop(150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
@example((dict(L=2, E=2, context=3, window=10, confidence=0.5, depth=2 ** 63 - 1, row_cap=2), 7, 6))
def test_the_compiled_predictor_equals_its_reference_call_by_call(sc):
    shape, seed, steps = sc
    L, E = shape["L"], shape["E"]
    c, p = _pair(**shape)
    r = random.Random(seed)
    for step in range(steps):
        for layer in range(L):
            if r.random() < 0.1:            # a pass that skips a layer
                continue
            ex = r.sample(range(E), r.randint(0, E))
            ws = None
            if r.random() < 0.7:
                ws = [r.choice([0.0, r.random(), 1.0, 2]) for _ in ex]
            preds = None
            if r.random() < 0.4:
                preds = {r.randrange(L): [r.randrange(E) for _ in range(r.randint(0, 4))]
                         for _ in range(r.randint(1, 2))}
            c.observe(layer, step, ex, ws, preds)
            p.observe(layer, step, ex, ws, preds)
            assert c.dump() == p.dump()
            for d in range(1, r.randint(1, 3) + 1):
                top = r.choice([None, 0, 1, 2, 3, E, E + 5, 2 ** 70])   # the first top only
                got = c.predict(layer, step, d, top)
                assert got == p.predict(layer, step, d, top)
                assert c.dump() == p.dump()
                if top is not None and r.random() < 0.3:      # (the same state predicts alike)
                    assert got == c.predict(layer, step, d)[:top]
                    p.predict(layer, step, d)
            if r.random() < 0.05:           # an adapt action: prefetch.history_window
                w = r.randint(1, 8)
                c.window = p.window = w
            if r.random() < 0.05:           # ... prefetch.confidence
                c.confidence = p.confidence = r.random()
    assert c.theta == p.theta


@needs_engine
def test_long_streams_cut_back_and_halve_the_same_way():
    """Hundreds of passes over 64 experts: rows cut back at twice the cap, halved every two
    windows, frequencies renormalised (the scale passes 1e12 after about 1,400 passes at
    window 50)."""
    L, E = 3, 64
    c, p = _pair(L, E, 2, 50, 0.1, 2, 8)
    r = random.Random(11)
    hot = [r.sample(range(E), 8) for _ in range(L)]
    for step in range(1500):
        for layer in range(L):
            ex = r.sample(hot[layer], 3) + r.sample(range(E), 2)
            ex = list(dict.fromkeys(ex))
            ws = [r.random() for _ in ex]
            c.observe(layer, step, ex, ws)
            p.observe(layer, step, ex, ws)
            assert c.predict(layer, step, 1) == p.predict(layer, step, 1)
    assert c.dump() == p.dump()
    assert max(s for s in p.fscale) < 1e12


@needs_engine
@pytest.mark.parametrize("call, error", [
    (lambda o: o.observe(0, 0, [0, 0]), ValueError),                 # not distinct
    (lambda o: o.observe(0, 0, [8]), ValueError),                    # out of range
    (lambda o: o.observe(0, 0, [-1]), ValueError),
    (lambda o: o.observe(0, 0, [1.0]), TypeError),
    (lambda o: o.observe(0, 0, ["1"]), TypeError),
    (lambda o: o.observe(0, 0, list(range(9))), ValueError),         # more than E
    (lambda o: o.observe(4, 0, [1]), ValueError),                    # no such layer
    (lambda o: o.observe(0, 0, [1, 2], [0.5]), ValueError),          # one weight per expert
    (lambda o: o.observe(0, 0, [1], ["x"]), TypeError),
    (lambda o: o.observe(0, 0, [1], [2 ** 1100]), OverflowError),
    (lambda o: o.observe(0, 0, [1], None, {9: [1]}), ValueError),    # no such layer
    (lambda o: o.observe(0, 0, [1], None, {1: [99]}), ValueError),
    (lambda o: o.observe(0, 0, [1], None, {1: [2, 99]}), ValueError),
    (lambda o: o.observe(0, 0, [1], None, {1: 5}), TypeError),
    (lambda o: o.observe(0, 0, [1], None, {"1": [1]}), TypeError),
    (lambda o: o.observe(0, 2 ** 63 - 1, [1]), ValueError),          # step - 1 / + 1 must not overflow
    (lambda o: o.observe(0, 2 ** 62 + 1, [1]), ValueError),
    (lambda o: o.observe(0, 2 ** 64, [1]), OverflowError),
    (lambda o: o.predict(0, 0, -1), ValueError),
    (lambda o: o.predict(4, 0, 1), ValueError),
    (lambda o: o.predict(0, 2 ** 63 - 1, 1), ValueError),
    (lambda o: o.predict(0, 0, 2 ** 63 - 1), ValueError),
    (lambda o: o.predict(0, 2 ** 62, 2 ** 62), ValueError),          # the target's step overflowed
    (lambda o: o.predict(3, 2 ** 62, 5), ValueError),                # two passes on: 2^62 + 2
    (lambda o: o.predict(0, 0, 1, -1), ValueError),                  # top: at least 0
    (lambda o: o.predict(0, 0, 1, -2 ** 70), ValueError),
    (lambda o: o.predict(0, 0, 1, 1.5), TypeError),
    (lambda o: o.predict(0, 0, 1, "2"), TypeError),
    (lambda o: setattr(o, "theta", [1.0]), ValueError),
    (lambda o: setattr(o, "theta", [1.0, "x", 0, 0, 0, 0]), TypeError),
    (lambda o: setattr(o, "window", "x"), TypeError),
    (lambda o: setattr(o, "confidence", None), TypeError),
    (lambda o: delattr(o, "rate"), TypeError),
    (lambda o: o.observe(0, 0, None), TypeError),
    (lambda o: o.observe(0, 0, [1], None, {t: [1] for t in range(-3, 9)}), ValueError),
])
def test_bad_calls_are_exceptions_and_change_nothing(call, error):
    o = _engine.Learned(4, 8, 2, 10, 0.0, 1)
    o.observe(0, 0, [1, 2], [0.25, 0.75])
    o.predict(0, 0, 1)
    before = o.dump()
    with pytest.raises(error):
        call(o)
    assert o.dump() == before


@needs_engine
@pytest.mark.parametrize("row_cap", [1, 5, 64, 65, 90])
def test_rows_are_cut_back_alike_small_and_large_caps(row_cap):
    """A row past twice its cap keeps its cap largest counts in order (a selection for a cap
    up to 64, a sort above): the same rows, predictions and weights as the reference."""
    L, E = 2, 400
    c, p = _pair(L, E, 1, 1000, 0.0, 1, row_cap)
    r = random.Random(row_cap)
    for step in range(60):
        for layer in range(L):
            ex = r.sample(range(E), 40)
            c.observe(layer, step, ex)
            p.observe(layer, step, ex)
            assert c.predict(layer, step, 1, 10) == p.predict(layer, step, 1, 10)
    assert c.dump() == p.dump()
    rows = p.dump()["rows"]       # cut back: at most twice the cap, after more targets than that
    assert all(len(row) <= 2 * row_cap for _, _, row in rows)
    assert max(n for _, n, _ in rows) * 40 > 2 * row_cap


@needs_engine
@pytest.mark.parametrize("top, error", [(-1, ValueError), (-2 ** 70, ValueError),
                                        (1.5, TypeError), ("2", TypeError)])
def test_a_bad_top_is_refused_alike_and_changes_nothing(top, error):
    """predict's ``top`` is checked before anything changes, with the same error on both."""
    for o in _pair(4, 8, 2, 10, 0.0, 1, 16):
        o.observe(0, 0, [1, 2], [0.25, 0.75])
        before = o.dump()
        with pytest.raises(error):
            o.predict(0, 0, 1, top)
        assert o.dump() == before


@needs_engine
def test_steps_and_distances_up_to_2_62_are_taken():
    """|step| and d up to 2^62: the target step computed without overflow (2^62 in 2^62
    passes of one layer ahead), as the reference's for the distances it can walk."""
    o = _engine.Learned(1, 4, 1, 3, 0.0, 1)
    o.observe(0, -(2 ** 62), [1])
    assert o.predict(0, -(2 ** 62), 2 ** 62) == [1]       # (its frequency: confidence 0)
    assert o.dump()["pending"][0][0] == 0
    c, p = _pair(3, 4, 1, 3, 0.0, 2, 4)
    for o in (c, p):
        o.observe(2, 2 ** 62 - 1, [1, 2])
        o.observe(0, 2 ** 62, [3])
    assert c.predict(2, 2 ** 62 - 1, 1) == p.predict(2, 2 ** 62 - 1, 1)
    assert c.predict(0, 2 ** 62, 2) == p.predict(0, 2 ** 62, 2)
    # the next pass of the last step: what a dispatch at step 2^62 predicts for it
    assert c.predict(2, 2 ** 62, 1) == p.predict(2, 2 ** 62, 1)
    assert c.dump() == p.dump()


@needs_engine
def test_a_learned_runtime_dispatches_at_the_last_step_on_both_backends():
    """A dispatch at step 2^62 predicts for the next pass (step 2^62 + 1): both backends
    propose and prefetch alike (the engine once took the refused target for a lack of memory
    and broke)."""
    pol = mpl.loads("policy t { cache { capacity = 4 } prefetch { strategy = learned  budget = 3 "
                    "lookahead = 3  history_window = 1  context_layers = 1  confidence = 0 } }")
    plans = []
    for backend in ("pure", "compiled"):
        rt = pol.runtime(3, 6, 2, backend=backend)
        plans.append([rt.dispatch(2, [1, 2], step=2 ** 62 - 1), rt.dispatch(0, [1, 3]),
                      rt.dispatch(1, [2, 4]), rt.dispatch(2, [])])
        with pytest.raises(DispatchError, match="2"):
            rt.dispatch(0, [1])           # the step counter would pass 2^62
    assert plans[0] == plans[1]


@needs_engine
@pytest.mark.parametrize("args", [(0, 8, 1, 1, 0.0, 1), (4, 0, 1, 1, 0.0, 1), (1 << 12, 1 << 11, 1, 1, 0.0, 1),
                                  (2 ** 62, 2, 1, 1, 0.0, 1), (2, 2 ** 62, 1, 1, 0.0, 1),
                                  (4, 8, 2000, 1, 0.0, 1), (4, 8, 2 ** 70, 1, 0.0, 1),
                                  (4, 8, 1, 1, 0.0, 1, 1 << 30), (4, 8, 1, 1, 0.0, 1, 2 ** 80),
                                  (4096, 1024, 2, 1, 0.0, 2)])     # 2 x 4096 x 1024 rows
def test_shapes_beyond_the_tables_are_refused(args):
    with pytest.raises((ValueError, OverflowError)):
        _engine.Learned(*args)


@needs_engine
@pytest.mark.parametrize("depth", [2 ** 63 - 1, 2 ** 80, 10 ** 30])
def test_a_depth_beyond_the_layers_keeps_every_distance(depth):
    """learned(2, 2, 1024, 10, 0.5, 2 ** 63 - 1) (the factory's depth): the distances the rows
    keep are min(layers, depth + context - 1), computed without overflow (the compiled
    predictor before this one overflowed there, and observe() read before its arrays)."""
    c, p = _pair(2, 2, 1024, 10, 0.5, depth, 16)
    assert c.maxd == p.maxd == 2
    for step in range(4):
        for layer in range(2):
            c.observe(layer, step, [step % 2], [1.0])
            p.observe(layer, step, [step % 2], [1.0])
            assert c.predict(layer, step, 1) == p.predict(layer, step, 1)
    assert c.dump() == p.dump()


@needs_engine
def test_windows_of_2_62_and_beyond_are_taken():
    """A window too long to halve a row within any stream (2 x window would overflow C's
    64 bits): rows never halve; the same predictions as the reference."""
    c, p = _pair(2, 4, 1, 2 ** 62, 0.0, 1, 16)
    c.window = p.window = 2 ** 70
    for step in range(3):
        for o in (c, p):
            o.observe(0, step, [1])
            o.observe(1, step, [2])
        assert c.predict(1, step, 1) == p.predict(1, step, 1)
    assert c.window == 2 ** 63 - 1
    assert c.dump()["rows"] == p.dump()["rows"]
    assert _engine.Learned(2, 4, 1, 2 ** 80, 0.0, 1).window == 2 ** 63 - 1


@needs_engine
def test_the_predictions_mapping_is_read_before_anything_changes():
    """A mapping whose items() raises midway leaves the state as it was."""
    class Bad(dict):
        def items(self):
            raise RuntimeError("no")

    o = _engine.Learned(4, 8, 2, 10, 0.0, 1)
    o.observe(0, 0, [1])
    before = o.dump()
    with pytest.raises(RuntimeError):
        o.observe(1, 0, [2], None, Bad({2: [1]}))
    assert o.dump() == before


# ------------------------------------------------------------------ callbacks and threads
def well_formed(d: dict, L: int, E: int, nf: int) -> None:
    """Every part of a dump() is there and of its type (a NULL slot in a tuple would crash
    the walk)."""
    assert list(d) == ["theta", "window", "confidence", "rate", "rows", "cur", "prev", "freq",
                       "fscale", "pending", "gate"]
    assert len(d["theta"]) == nf and all(type(x) is float for x in d["theta"])
    keys = [k for k, _, _ in d["rows"]]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for (dist, src, x), n, ents in d["rows"]:
        assert n >= 1 and 0 <= src < L and 0 <= x < E
        ids = [e for e, _ in ents]
        assert len(set(ids)) == len(ids) and all(0 <= e < E for e in ids)
        assert all(type(c) is float and c >= 0.5 for _, c in ents)
    assert len(d["cur"]) == len(d["prev"]) == len(d["freq"]) == len(d["fscale"]) == L
    for c in d["cur"]:
        if c is not None:
            step, ex, ws = c
            assert all(0 <= e < E for e in ex) and (ws is None or len(ws) == len(ex))
    for t, (st_, cands) in d["pending"].items():
        assert 0 <= t < L and all(len(f) == nf and 0 <= e < E for e, f, _ in cands)
    for t, (st_, ids) in d["gate"].items():
        assert 0 <= t < L and all(0 <= e < E for e in ids)


class _GcHooks:
    """gc thresholds of one allocation and a collection callback, restored on exit: every
    container a dump() makes can run a collection, which runs Python code (finalizers, the
    callback) and lets another thread take the interpreter."""

    def __init__(self, callback=None):
        self.callback = callback

    def __enter__(self):
        self.threshold = gc.get_threshold()
        self.interval = sys.getswitchinterval()
        if self.callback:
            gc.callbacks.append(self.callback)
        gc.set_threshold(1, 1, 1)
        sys.setswitchinterval(1e-6)
        return self

    def __exit__(self, *exc):
        gc.set_threshold(*self.threshold)
        sys.setswitchinterval(self.interval)
        if self.callback:
            gc.callbacks.remove(self.callback)


def _grow(o, r: random.Random, L: int, E: int, step: int):
    """Calls that grow rows (new targets), add rows, cut rows back and replace pending
    predictions: what the dump in progress is reading."""
    layer = r.randrange(L)
    o.observe(layer, step, r.sample(range(E), r.randint(1, E)), None,
              {r.randrange(L): [r.randrange(E) for _ in range(3)]})
    o.predict(layer, step, r.randint(1, 2))


@needs_engine
def test_a_finalizer_calling_the_predictor_during_dump_changes_nothing_it_returns():
    """Cyclic garbage whose __del__ observes and predicts (and leaves new such garbage) is
    collected at the allocations dump() makes: the dump is the state at the call, whole; the
    calls the finalizers made are all in the state afterwards."""
    L, E = 3, 12
    c, p = _pair(L, E, 2, 50, 0.0, 2, 2)
    r = random.Random(5)
    for step in range(6):
        for layer in range(L):
            ex = r.sample(range(E), 6)
            c.observe(layer, step, ex)
            p.observe(layer, step, ex)
            c.predict(layer, step, 1)
            p.predict(layer, step, 1)
    before = p.dump()
    calls = []
    armed = [True]
    fr = random.Random(9)

    class Hook:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            if not armed[0]:
                return
            seed = fr.randrange(2 ** 30)
            calls.append(seed)
            _grow(c, random.Random(seed), L, E, 6 + len(calls) // 4)
            Hook()          # the next collection's garbage

    gc.collect()
    with _GcHooks():
        Hook()
        got = c.dump()
        armed[0] = False
    gc.collect()
    if sys.version_info < (3, 12):      # (from 3.12 on a collection waits for the next bytecode)
        assert len(calls) > 10, "the finalizers did not run during dump()"
    well_formed(got, L, E, c.context + 4)
    assert got == before
    for i, seed in enumerate(calls):
        _grow(p, random.Random(seed), L, E, 6 + (i + 1) // 4)
    assert c.dump() == p.dump()


@needs_engine
def test_dump_while_another_thread_observes():
    """A thread observing and predicting without pause while this one dumps, with a
    collection (and a Python callback: a switch point) at every allocation: every dump is a
    whole state (the compiled predictor before this one wrote past a row's tuple, or left
    empty slots in it)."""
    L, E = 2, 64
    o = _engine.Learned(L, E, 1, 1000, 0.0, 1, 16)      # rows of up to 32 targets, cut to 16
    stop = threading.Event()
    errors = []
    calls = [0]

    def hammer():
        r = random.Random(1)
        try:
            while not stop.is_set():
                step, layer = divmod(calls[0], L)
                o.observe(layer, step, r.sample(range(E), r.randint(4, 40)), None,
                          {(layer + 1) % L: [r.randrange(E) for _ in range(3)]})
                o.predict(layer, step, 1)
                calls[0] += 1
        except Exception as e:          # (reported below)
            errors.append(e)

    t = threading.Thread(target=hammer)
    dumps = 0
    with _GcHooks(lambda phase, info: None):
        t.start()
        try:
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline or dumps < 20:
                well_formed(o.dump(), L, E, o.context + 4)
                dumps += 1
        finally:
            stop.set()
            t.join()
    assert not errors, errors
    assert calls[0] > 0 and dumps >= 20
