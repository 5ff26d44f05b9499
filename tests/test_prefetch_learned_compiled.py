"""The compiled learned predictor (``_fast.Learned``, mpl/runtime/_learned.c) against its
reference, mpl.runtime.prefetch.Learned: for random call sequences (several layers back,
wrapping into the next pass, router weights or none, speculative predictions, rows cut back
and halved, the window and the confidence changed on the way, a window of one pass) both
return the same predictions and hold the same state (their ``dump()``s) after every call;
bad calls are exceptions."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, strategies as st

from mpl.runtime import fast
from mpl.runtime.prefetch import Learned, learned
from property_profiles import prop

needs_kernel = pytest.mark.skipif(fast._kernel is None,
                                  reason=f"the compiled kernel is not available: {fast._WHY}")


def _pair(L, E, context, window, confidence, depth, row_cap):
    return (fast._kernel.Learned(L, E, context, window, confidence, depth, row_cap),
            Learned(L, E, context, window, confidence, depth, row_cap))


@st.composite
def sessions(draw):
    L = draw(st.integers(1, 5))
    E = draw(st.integers(1, 12))
    shape = dict(L=L, E=E, context=draw(st.integers(1, 3)), window=draw(st.integers(1, 6)),
                 confidence=draw(st.sampled_from([0.0, 0.05, 0.3, 0.9])),
                 depth=draw(st.integers(1, 3)), row_cap=draw(st.integers(1, 4)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    steps = draw(st.integers(1, 12))
    return shape, seed, steps


@needs_kernel
@prop(150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
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
                ws = [r.choice([0.0, r.random(), 1.0]) for _ in ex]
            preds = None
            if r.random() < 0.4:
                preds = {r.randrange(L): [r.randrange(E) for _ in range(r.randint(0, 4))]
                         for _ in range(r.randint(1, 2))}
            c.observe(layer, step, ex, ws, preds)
            p.observe(layer, step, ex, ws, preds)
            assert c.dump() == p.dump()
            for d in range(1, r.randint(1, 3) + 1):
                assert c.predict(layer, step, d) == p.predict(layer, step, d)
                assert c.dump() == p.dump()
            if r.random() < 0.05:           # an adapt action: prefetch.history_window
                w = r.randint(1, 8)
                c.window = p.window = w
            if r.random() < 0.05:           # ... prefetch.confidence
                c.confidence = p.confidence = r.random()
    assert c.theta == p.theta


@needs_kernel
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


def test_a_window_of_one_pass_predicts_from_the_pass_itself():
    """history_window's least value (1): the frequency is the last pass (the reference once
    divided by zero there)."""
    lrn = Learned(2, 8, 1, 1, 0.0, 1)
    lrn.observe(0, 0, [1, 2])
    lrn.observe(0, 1, [3])
    assert lrn.freq[0] == {3: 1.0} and lrn.fscale[0] == 1.0
    assert lrn.predict(1, 1, 1) is not None


@needs_kernel
def test_the_factory_takes_the_compiled_predictor_where_it_can():
    assert isinstance(learned(4, 8, 2, 10, 0.5, 1), fast._kernel.Learned)
    with fast.pure():
        assert isinstance(learned(4, 8, 2, 10, 0.5, 1), Learned)
    # a shape beyond the compiled tables: the reference (its memory grows with use)
    wide = learned(4096, 4096, 2, 10, 0.5, 1)
    assert isinstance(wide, Learned)


@needs_kernel
@pytest.mark.parametrize("call, error", [
    (lambda o: o.observe(0, 0, [0, 0]), ValueError),                 # not distinct
    (lambda o: o.observe(0, 0, [8]), ValueError),                    # out of range
    (lambda o: o.observe(0, 0, [-1]), ValueError),
    (lambda o: o.observe(0, 0, [1.0]), TypeError),
    (lambda o: o.observe(0, 0, ["1"]), TypeError),
    (lambda o: o.observe(4, 0, [1]), ValueError),                    # no such layer
    (lambda o: o.observe(0, 0, [1, 2], [0.5]), ValueError),          # one weight per expert
    (lambda o: o.observe(0, 0, [1], ["x"]), TypeError),
    (lambda o: o.observe(0, 0, [1], None, {9: [1]}), ValueError),    # no such layer
    (lambda o: o.observe(0, 0, [1], None, {1: [99]}), ValueError),
    (lambda o: o.observe(0, 0, [1], None, {1: 5}), TypeError),
    (lambda o: o.observe(0, 2 ** 63 - 1, [1]), ValueError),          # step - 1 / + 1 must not overflow
    (lambda o: o.observe(0, 2 ** 64, [1]), OverflowError),
    (lambda o: o.predict(0, 0, -1), ValueError),
    (lambda o: o.predict(0, 2 ** 63 - 1, 1), ValueError),
    (lambda o: o.predict(0, 0, 2 ** 63 - 1), ValueError),
    (lambda o: setattr(o, "theta", [1.0]), ValueError),
    (lambda o: setattr(o, "window", "x"), TypeError),
    (lambda o: setattr(o, "confidence", None), TypeError),
    (lambda o: o.observe(0, 0, None), TypeError),
    (lambda o: o.observe(0, 0, [1], None, {t: [1] for t in range(-3, 9)}), ValueError),
])
def test_bad_calls_are_exceptions_and_change_nothing(call, error):
    o = fast._kernel.Learned(4, 8, 2, 10, 0.0, 1)
    o.observe(0, 0, [1, 2], [0.25, 0.75])
    o.predict(0, 0, 1)
    before = o.dump()
    with pytest.raises(error):
        call(o)
    assert o.dump() == before


@needs_kernel
@pytest.mark.parametrize("args", [(0, 8, 1, 1, 0.0, 1), (4, 0, 1, 1, 0.0, 1), (1 << 12, 1 << 11, 1, 1, 0.0, 1),
                                  (2 ** 62, 2, 1, 1, 0.0, 1), (4, 8, 2000, 1, 0.0, 1),
                                  (4, 8, 1, 1, 0.0, 1, 1 << 30)])
def test_shapes_beyond_the_tables_are_refused(args):
    with pytest.raises((ValueError, OverflowError)):
        fast._kernel.Learned(*args)


@needs_kernel
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


@needs_kernel
def test_the_predictions_mapping_is_read_before_anything_changes():
    """A mapping whose items() raises midway leaves the state as it was."""
    class Bad(dict):
        def items(self):
            raise RuntimeError("no")

    o = fast._kernel.Learned(4, 8, 2, 10, 0.0, 1)
    o.observe(0, 0, [1])
    before = o.dump()
    with pytest.raises(RuntimeError):
        o.observe(1, 0, [2], None, Bad({2: [1]}))
    assert o.dump() == before
