"""The per-layer budget split in C (mpl/runtime/c/budget.c, the compiled engine's) against
``mpl.runtime.budgets.allocate``, its reference: for random weights (zeros, negative zeros,
subnormals, huge and infinite ones, NaN, equal, sparse, ints), budgets and bounds (a minimum,
none, bounds crossed, budgets below layers x min) both give the same capacities or the same
error (type and message); math.fsum's exactly rounded sums in C equal math.fsum; the
regression examples of tests/test_runtime_budget_split.py and its hand-worked splits hold in C
too."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, strategies as st

from mpl.runtime.budgets import BudgetError, Signal, allocate
from property_profiles import prop

try:
    from mpl.runtime import _engine
except ImportError:          # no compiler at install time: the pure runtime only
    _engine = None

needs_engine = pytest.mark.skipif(_engine is None or not hasattr(_engine, "_allocate"),
                                  reason="the compiled engine (mpl.runtime._engine) is not built")


def outcome(f, *args):
    try:
        return "ok", f(*args)
    except Exception as e:                  # the same error: its type and message
        return type(e), str(e)


def same_split(weights, budget, lo, hi):
    want = outcome(allocate, list(weights), budget, lo, hi)
    got = outcome(_engine._allocate, list(weights), budget, lo, hi)
    assert got == want, (weights, budget, lo, hi)
    return want


WEIGHT = st.one_of(
    st.just(0.0), st.just(0.0), st.just(-0.0), st.just(1.0),
    st.sampled_from([0.1, 2 / 3, 5.0, 1e-3, 3.0000000000000004]),
    st.floats(0.0, 10.0, allow_nan=False),
    st.floats(0.0, 1e-300, allow_subnormal=True),             # subnormal and tiny
    st.sampled_from([5e-324, 2.2250738585e-313, 1e300, 8.98846567431158e307, 1.7976931348623157e308]),
    st.sampled_from([float("inf"), float("nan"), -1.0, -float("inf")]),
    st.integers(0, 6), st.sampled_from([2 ** 53 + 1, 2 ** 70]))


@st.composite
def splits(draw, max_layers=90, weight=WEIGHT):
    n = draw(st.integers(0, max_layers))
    kind = draw(st.sampled_from(["equal", "zero", "sparse", "any", "any"]))
    if kind == "equal":
        weights = [draw(weight)] * n
    elif kind == "zero":
        weights = [0.0] * n
    elif kind == "sparse":
        weights = [0.0] * n
        for i in draw(st.lists(st.integers(0, max(0, n - 1)), max_size=max(1, n // 3))):
            if n:
                weights[i] = draw(weight)
    else:
        weights = draw(st.lists(weight, min_size=n, max_size=n))
    lo = draw(st.integers(-2, 6))
    hi = lo + draw(st.integers(-3, 12))
    budget = lo * n + draw(st.integers(-6, 4 * n + 10))
    return weights, budget, lo, hi


@needs_engine
@prop(600, deadline=None)
@given(splits())
@example(([5e-324, 5e-324], 3, 0, 3))               # subnormal weights
@example(([2.2250738585e-313, 2.2250738585e-313], 3, 1, 3))
@example(([0.0, 3.0], 10, 3, 8))                    # the minimum raised first (was over budget)
@example(([3.0, 1.0, 0.0, 0.0], 10, 2, 4))
@example(([2.0, 0.0], 7, 2, 6))
@example(([5.0, 1.0, 1.0], 12, 1, 6))
@example(([1.0, 1.0, 2.0], 5, 0, 5))                # remainders, largest fraction first
@example(([float("inf"), 1.0], 5, 0, 5))            # a NaN share: ValueError
@example(([1e308, 1e308, 1.0], 5, 0, 5))            # an infinite share: OverflowError
@example(([1e308, 1e308, 0.0, 0.0, 0.0], 9, -3, -5))
@example(([1.0, 2.0], 50, 4, 2))                    # bounds crossed
@example(([1.0] * 4, 7, 2, 8))                      # below layers x min: BudgetError
# splits whose float sums (sum() of the free weights) differ between Python 3.11's additions
# and the compensated ones of 3.12 on: C adds as the running Python does
@example(([0.3, 0.01, 0.3, 1 / 3, 0.3, 0.1, 1 / 3, 0.01], 34, 0, 6))
@example(([1 / 3, 0.3, 1.0, 0.7, 0.7, 0.01, 1 / 3, 1 / 3, 0.7], 35, 2, 11))
@example(([1 / 3, 0.2, 1 / 3, 1.0, 1 / 3], 10, 1, 7))
@example(([0.01, 0.2, 0.7, 0.7, 0.3, 1 / 3, 0.01, 0.2, 0.7, 1 / 3, 0.2], 64, 2, 12))
@example(([0.7, 0.1, 1.0, 0.2, 0.2, 0.3], 5, 0, 10))
@example(([1.0, 0.1, 0.2, 0.2, 1.0, 0.3, 0.3, 0.1, 0.2], 51, 2, 8))
@example(([0.3, 0.7, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0], 24, 1, 7))     # sparse
@example(([0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.1, 0.0, 0.2], 15, 0, 10))
@example(([0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0, 0.1, 0.2, 0.0, 0.0, 0.0], 33, 2, 10))
def test_the_split_in_c_is_the_split(case):
    same_split(*case)


@needs_engine
@prop(300, deadline=None)
@given(splits(max_layers=12, weight=st.floats(0.0, 10.0, allow_nan=False) | st.just(0.0)))
def test_small_splits_of_plain_weights(case):
    """Small splits of ordinary weights, where the water-filling takes several rounds."""
    assert same_split(*case)[0] == "ok" or case[1] < case[2] * len(case[0])


@needs_engine
@pytest.mark.parametrize("weights, budget, lo, hi, want", [
    ([1.0, 2.0, 3.0], 12, 0, 10, [2, 4, 6]),
    ([1.0, 2.0, 3.0], 10, 0, 10, [2, 3, 5]),
    ([1.0, 2.0, 100.0], 10, 0, 4, [2, 4, 4]),
    ([0.1, 5.0, 5.0], 9, 2, 8, [2, 4, 3]),
    ([3.0, 3.0, 3.0, 3.0], 10, 1, 8, [3, 3, 2, 2]),
    ([0.0, 0.0, 0.0], 7, 0, 8, [3, 2, 2]),
    ([1.0, 2.0], 50, 1, 6, [6, 6]),
    ([0.0, 4.0, 0.0, 2.0], 12, 1, 8, [1, 7, 1, 3]),
    ([], 5, 1, 4, []),
])
def test_hand_worked_splits(weights, budget, lo, hi, want):
    assert _engine._allocate(weights, budget, lo, hi) == want


@needs_engine
def test_a_budget_below_the_minimum_is_budget_error():
    for weights in ([1.0] * 4, [0.0] * 4, [0.0, 0.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]):
        with pytest.raises(BudgetError, match="below layers x min_capacity") as e:
            _engine._allocate(weights, 7, 2, 8)
        with pytest.raises(BudgetError) as p:
            allocate(weights, 7, 2, 8)
        assert str(e.value) == str(p.value)
    # checked before the weights are read, as in Python
    with pytest.raises(BudgetError):
        _engine._allocate(["not a number"], 1, 2, 8)


@needs_engine
def test_many_layers_few_weighted():
    """65,536 layers, 30 of which a signal has seen (the zero block), and the same number all
    weighted (layer by layer)."""
    n = 65536
    sig = Signal(n, 50)
    for i in range(30):
        sig.observe(i * 2000 + 7, [i % 5, 1 + i % 7, 9])
    weights = sig.weights("entropy")
    for budget in (n * 4 + 17, n * 2, 100):
        same_split(weights, budget, 0 if budget == 100 else 2, 64)
    dense = [1.0 + (i % 13) / 7 for i in range(4096)]
    same_split(dense, 4096 * 5 + 3, 1, 9)


@needs_engine
@pytest.mark.parametrize("args, error", [
    (("x", 1, 0, 1), TypeError),
    (([1.0], 1.5, 0, 1), TypeError),
    (([1.0], 1, None, 1), TypeError),
    (([object()], 1, 0, 1), TypeError),
    (([10 ** 400], 1, 0, 1), OverflowError),                 # float() of it, as in Python
    (([1.0], 2 ** 31, 0, 1), ValueError),                    # beyond what C holds exactly
    (([1.0], 1, -(2 ** 40), 1), ValueError),
    (([1.0], 1, 0, 2 ** 64), ValueError),
])
def test_bad_calls_are_exceptions(args, error):
    with pytest.raises(error):
        _engine._allocate(*args)


# ------------------------------------------------------------------ math.fsum
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e300, 1e300),
                   st.sampled_from([1e308, -1e308, 1.7976931348623157e308, 1e-16, 1.0, 1e16,
                                    5e-324, -0.0, 0.0, float("inf"), -float("inf")]))


@needs_engine
@prop(500, deadline=None)
@given(st.lists(FLOATS, max_size=60))
@example([1e-16, 1.0, 1e16])                                  # the half-even fix-up
@example([1e308, 1e308, -1e308])                              # intermediate overflow
@example([float("inf"), -float("inf")])
@example([float("inf"), float("nan")])
@example([-0.0])
@example([0.1] * 10)
@example([2.0 ** -1074 * k for k in range(1, 40)] + [2.0 ** 1000, -(2.0 ** 1000)] * 20)   # many partials
def test_fsum_in_c_is_math_fsum(xs):
    want = outcome(math.fsum, xs)
    got = outcome(_engine._fsum, xs)
    if want[0] == "ok" and got[0] == "ok":
        assert got[1].hex() == want[1].hex(), xs
    else:
        assert got == want, xs
