"""The per-layer budget split (``mpl.runtime.budgets.allocate``), checked by what defines it
(SPEC §5, the docstring) rather than by a second copy of its algorithm: every capacity
within [min, max]; the shares summing to the budget, or to layers x max when the budget is
more than the layers can hold; shares proportional to the signal where no bound holds them,
up to rounding; the remainders of that rounding handed out largest fraction first, ties to
the lower layer; equal weights (and no signal at all) giving the uniform split; only the
ratios of the weights mattering; the same answer every time. Its blocks of equal and of
zero weights give exactly the split done layer by layer (``_allocate_each``), and a split
over 65,536 layers with a few weighted ones costs what those few cost."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from mpl.runtime.budgets import BudgetError, Signal, _allocate_each, allocate
from property_profiles import prop
from traced_lines import traced_lines

WEIGHT = st.one_of(st.just(0.0), st.just(0.0), st.just(1.0), st.sampled_from([0.1, 2 / 3, 5.0]),
                   st.floats(0.0, 10.0, allow_nan=False), st.integers(0, 6))


@st.composite
def splits(draw, max_layers=90):
    """(weights, budget, lo, hi) with layers x lo <= budget and lo <= hi (the runtime calls
    it with hi = max(min_capacity, max_capacity))."""
    n = draw(st.integers(1, max_layers))
    kind = draw(st.sampled_from(["equal", "zero", "sparse", "any"]))
    if kind == "equal":
        weights = [draw(WEIGHT)] * n
    elif kind == "zero":
        weights = [0.0] * n
    elif kind == "sparse":
        weights = [0.0] * n
        for i in draw(st.lists(st.integers(0, n - 1), max_size=max(1, n // 3))):
            weights[i] = draw(WEIGHT)
    else:
        weights = draw(st.lists(WEIGHT, min_size=n, max_size=n))
    lo = draw(st.integers(0, 5))
    hi = lo + draw(st.integers(0, 12))
    budget = lo * n + draw(st.integers(0, 4 * n + 10))
    return weights, budget, lo, hi


def _weighted(weights):
    """The weights as allocate reads them: negatives are zero; no weight at all (every one
    zero) is the uniform split."""
    w = [max(0.0, float(x)) for x in weights]
    return w if any(w) else [1.0] * len(w)


def check_split(weights, budget, lo, hi, caps):
    """Every property of a split except its sum (see test_the_split_never_exceeds_the_budget)."""
    n = len(weights)
    w = _weighted(weights)
    assert len(caps) == n and all(type(c) is int for c in caps)
    assert all(lo <= c <= hi for c in caps), "a capacity outside [min, max]"
    for i in range(n):
        for j in range(n):
            if w[i] > w[j]:
                assert caps[i] >= caps[j], f"layer {i} weighs more than {j} but gets less"
            elif w[i] == w[j] and i < j:
                # the same exact share: the same floor, the remainder to the lower layer first
                assert 0 <= caps[i] - caps[j] <= 1, f"equal weights {i}, {j}: {caps[i]}, {caps[j]}"
    # the layers the signal has not seen get more than the minimum only when every layer it
    # has seen is full
    if any(x == 0 for x in w) and any(c > lo for c, x in zip(caps, w) if x == 0):
        assert all(c == hi for c, x in zip(caps, w) if x > 0)
    # the layers no bound holds are proportional up to rounding: one factor lam with
    # cap - 1 < lam * weight < cap + 1 for each; a weighted layer at the minimum is one whose
    # share under that factor is not above min + 1
    inside = [i for i in range(n) if lo < caps[i] < hi and w[i] > 0]
    if inside:
        # (in rationals: a subnormal weight would overflow the quotient to inf)
        low = max(Fraction(caps[i] - 1) / Fraction(w[i]) for i in inside)
        high = min(Fraction(caps[i] + 1) / Fraction(w[i]) for i in inside)
        assert low < high, f"no common factor for the free layers {inside}"
        for i in range(n):
            if w[i] > 0 and caps[i] == lo:
                assert low * Fraction(w[i]) < lo + 1, f"layer {i} held at min, its share above min + 1"


@prop(400, deadline=None)
@given(splits())
@example(([5e-324, 5e-324], 3, 0, 3))          # subnormal weights (the check's own arithmetic)
@example(([2.2250738585e-313, 2.2250738585e-313], 3, 1, 3))
def test_the_split_keeps_its_defining_properties(case):
    weights, budget, lo, hi = case
    caps = allocate(weights, budget, lo, hi)
    check_split(weights, budget, lo, hi, caps)
    assert allocate(list(weights), budget, lo, hi) == caps                  # deterministic
    assert allocate([x * 4 for x in weights], budget, lo, hi) == caps        # only ratios matter
    if all(float(x) == float(weights[0]) for x in weights) or not any(x > 0 for x in weights):
        assert caps == _uniform(len(weights), budget, lo, hi)


def _uniform(n, budget, lo, hi):
    """The uniform split: budget // n each, one more for the lowest budget % n layers,
    everything clamped to [lo, hi] (then the sum is min(budget, n x hi))."""
    q, r = divmod(budget, n)
    if q >= hi:
        return [hi] * n
    return [q + 1] * r + [q] * (n - r)


@prop(300, deadline=None)
@given(splits())
def test_the_shares_sum_to_the_budget_without_a_minimum(case):
    """Without a minimum (or with one weight for all) the split uses the whole budget, or
    fills every layer when the budget is more than layers x max."""
    weights, budget, lo, hi = case
    if lo and not (all(float(x) == float(weights[0]) for x in weights) or not any(weights)):
        budget, lo = budget - lo * len(weights), 0
    caps = allocate(weights, budget, lo, hi)
    assert sum(caps) == min(budget, len(weights) * hi)


@prop(300, deadline=None)
@example(([0.0, 3.0], 10, 3, 8))               # [3, 7] (fixing max first gave [3, 8])
@example(([3.0, 1.0, 0.0, 0.0], 10, 2, 4))     # [4, 2, 2, 2] (was [4, 4, 2, 2])
@example(([2.0, 0.0], 7, 2, 6))                # [5, 2] (was [6, 2])
@given(splits(max_layers=12))
def test_the_split_never_exceeds_the_budget(case):
    weights, budget, lo, hi = case
    caps = allocate(weights, budget, lo, hi)
    assert sum(caps) == min(budget, len(weights) * hi)


@st.composite
def exact_splits(draw):
    """Splits whose exact shares are known: weighted layers of integer weights summing to a
    power of two (every share rest x w / total is exact in floating point, so equal fractions
    are equal), a few layers of a weight so large that they are fixed at max, and without a
    minimum some layers of weight zero. Returns the case and the exact share of every layer
    not fixed at a bound (None for the others)."""
    m = draw(st.integers(0, 6))
    total = 2 ** m
    cuts = sorted(draw(st.sets(st.integers(1, total - 1), max_size=min(11, total - 1)))) if total > 1 else []
    free = [b - a for a, b in zip([0] + cuts, cuts + [total])]
    rest = draw(st.integers(0, 6 * len(free) + 8))
    shares = [Fraction(rest * x, total) for x in free]
    lo = draw(st.integers(0, min(3, math.floor(min(shares)))))
    hi = max(lo, math.ceil(max(shares))) + draw(st.integers(0, 3))
    big = draw(st.integers(0, 3)) if rest else 0
    zeros = draw(st.integers(0, 5)) if lo == 0 else 0
    kinds = ["free"] * len(free) + ["big"] * big + ["zero"] * zeros
    at = draw(st.permutations(kinds))                   # which layer is of which kind
    weights = [2.0 ** 20 if k == "big" else 0.0 for k in at]
    exact = [None] * len(at)
    free_at = [i for i, k in enumerate(at) if k == "free"]
    for i, x, s in zip(free_at, free, shares):
        weights[i], exact[i] = float(x), s
    budget = rest + big * hi + zeros * lo
    return (weights, budget, lo, hi), exact


@prop(400, deadline=None)
@example((([1.0, 1.0, 2.0], 5, 0, 5), [Fraction(5, 4), Fraction(5, 4), Fraction(5, 2)]))
@given(exact_splits())
def test_the_remainders_go_largest_fraction_first(drawn):
    """Floors of the exact shares, then one more slot for each of the layers with the largest
    fractions (ties: the lower layer) until the budget is used; the layers of weight zero get
    the minimum, the ones fixed at max get it."""
    (weights, budget, lo, hi), exact = drawn
    caps = allocate(weights, budget, lo, hi)
    free = [i for i, x in enumerate(exact) if x is not None]
    floors = {i: math.floor(exact[i]) for i in free}
    left = sum(exact[i] for i in free) - sum(floors.values())
    assert left == int(left)
    up = sorted(free, key=lambda i: (-(exact[i] - floors[i]), i))[:int(left)]
    for i, x in enumerate(weights):
        if i in floors:
            assert caps[i] == floors[i] + (i in up), (i, exact[i], caps)
        elif x > 0:
            assert caps[i] == hi
        else:
            assert caps[i] == lo
    check_split(weights, budget, lo, hi, caps)
    assert sum(caps) == budget


@pytest.mark.parametrize("weights, budget, lo, hi, want", [
    # proportional, no bound reached: 12 x (1, 2, 3) / 6
    ([1.0, 2.0, 3.0], 12, 0, 10, [2, 4, 6]),
    # 10 x (1, 2, 3) / 6 = 1.67, 3.33, 5: the one slot left to the largest fraction
    ([1.0, 2.0, 3.0], 10, 0, 10, [2, 3, 5]),
    # the heavy layer fixed at max, the rest re-split proportionally: 6 x (1, 2) / 3
    ([1.0, 2.0, 100.0], 10, 0, 4, [2, 4, 4]),
    # a layer below min raised to it, the rest from what is left: 9 - 2 = 7 x (1, 1) / 2
    ([0.1, 5.0, 5.0], 9, 2, 8, [2, 4, 3]),
    # equal weights and no signal: the uniform split, the extra slots to the lowest layers
    ([3.0, 3.0, 3.0, 3.0], 10, 1, 8, [3, 3, 2, 2]),
    ([0.0, 0.0, 0.0], 7, 0, 8, [3, 2, 2]),
    # more budget than the layers hold: every layer full
    ([1.0, 2.0], 50, 1, 6, [6, 6]),
    # the layers the signal has not seen, at min while the seen ones have room
    ([0.0, 4.0, 0.0, 2.0], 12, 1, 8, [1, 7, 1, 3]),
    ([], 5, 1, 4, []),
])
def test_hand_worked_splits(weights, budget, lo, hi, want):
    assert allocate(weights, budget, lo, hi) == want
    if weights:
        check_split(weights, budget, lo, hi, want)


@prop(400, deadline=None)
@given(splits())
def test_the_blocks_equal_the_layer_by_layer_split(case):
    """The equal and zero-weight blocks are a cost, not a decision: allocate gives what its
    layer-by-layer form does."""
    weights, budget, lo, hi = case
    w = [max(0.0, float(x)) for x in weights]
    assert allocate(weights, budget, lo, hi) == _allocate_each(w if any(w) else [1.0] * len(w),
                                                                budget, lo, hi)


def test_a_budget_below_the_minimum_is_refused():
    for weights in ([1.0] * 4, [0.0] * 4, [0.0, 0.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]):
        try:
            allocate(weights, 7, 2, 8)
        except BudgetError as e:
            assert "below layers x min_capacity" in str(e)
        else:
            raise AssertionError("no BudgetError")


def test_many_layers_few_weighted_cost_the_weighted_ones():
    """16,384 layers, 30 of which a signal has seen: the split is the layer-by-layer one, and
    its work is a few passes over the layers (the rounds of the water-filling touch only the
    weighted ones), where the layer-by-layer split passes over every layer in every round."""
    n = 16384
    sig = Signal(n, 50)
    for i in range(30):
        sig.observe(i * 500 + 7, [i % 5, 1 + i % 7, 9])
    weights = sig.weights("entropy")
    assert sum(1 for x in weights if x) == 30
    fast, fast_lines = traced_lines(allocate, weights, n * 4 + 17, 2, 64)
    each, each_lines = traced_lines(_allocate_each, weights, n * 4 + 17, 2, 64)
    assert fast == each
    assert all(2 <= c <= 64 for c in fast) and sum(fast) == n * 4 + 17
    # more than the 30 weighted layers can take: they are full, the unseen ones share the rest
    assert all(fast[i] == 64 for i, x in enumerate(weights) if x)
    unseen = [c for c, x in zip(fast, weights) if not x]
    assert max(unseen) - min(unseen) <= 1
    assert fast_lines <= 8 * n, fast_lines
    assert each_lines >= 2 * fast_lines, (fast_lines, each_lines)


def _exact_split(weights, budget, lo, hi):
    """The exact water-filling in rationals: every weighted layer clamp(x * w, lo, hi) at the
    scale x where the split meets the budget (found on the piecewise-linear sum's
    breakpoints), the layers of weight zero at lo, or sharing what the weighted layers at hi
    leave, equally, up to hi."""
    w = [Fraction(v) for v in weights]
    if all(v == 0 for v in w) or len(set(w)) == 1:
        w = [Fraction(1)] * len(w)
    pos = [i for i, v in enumerate(w) if v > 0]
    zero = len(w) - len(pos)

    def total(x):
        return sum(min(hi, max(lo, x * w[i])) for i in pos) + zero * lo

    points = sorted({Fraction(b) / w[i] for i in pos for b in (lo, hi)})
    out = [Fraction(lo)] * len(w)
    if total(points[-1]) <= budget:              # every weighted layer at hi
        for i in pos:
            out[i] = Fraction(hi)
        if zero:
            each = min(Fraction(hi), max(Fraction(lo), Fraction(budget - hi * len(pos), zero)))
            out = [v if w[i] > 0 else each for i, v in enumerate(out)]
        return out
    a = next(p for p in points if total(p) >= budget)
    below = [p for p in points if p < a]
    b = below[-1] if below else Fraction(0)
    ta, tb = total(a), total(b)
    x = a if ta == tb else b + (a - b) * (budget - tb) / (ta - tb)
    for i in pos:
        out[i] = min(Fraction(hi), max(Fraction(lo), x * w[i]))
    return out


@prop(300, deadline=None)
@example(([0.0, 3.0], 10, 3, 8))
@example(([3.0, 1.0, 0.0, 0.0], 10, 2, 4))
@example(([5.0, 1.0, 1.0], 12, 1, 6))
@given(splits(max_layers=12))
def test_the_split_is_within_one_slot_of_the_exact_water_filling(case):
    weights, budget, lo, hi = case
    caps = allocate(weights, budget, lo, hi)
    exact = _exact_split(weights, budget, lo, hi)
    assert all(abs(c - e) < 1 + Fraction(1, 10 ** 9) for c, e in zip(caps, exact)), (caps, exact)
    assert sum(caps) == (budget if sum(exact) == budget else math.floor(sum(exact)))
