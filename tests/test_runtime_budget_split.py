"""The per-layer budget split (``mpl.runtime.budgets.allocate``): its blocks of equal and of
zero weights (the uniform split; the layers a signal has not seen, on a trace header that
declares many) give exactly the capacities of the water-filling done layer by layer, and a
split over 65,536 layers with a few weighted ones costs what those few cost."""

from __future__ import annotations

import math
import time

from hypothesis import given, strategies as st

from mpl.runtime.budgets import BudgetError, Signal, allocate
from property_profiles import prop


def reference(weights, budget, lo, hi):
    """The split layer by layer, as the runtime computed it before the blocks (kept here as
    the reference: water-filling, then the remainders largest fraction first)."""
    n = len(weights)
    if n == 0:
        return []
    if lo * n > budget:
        raise BudgetError("budget below layers x min")
    w = [max(0.0, float(x)) for x in weights]
    if sum(w) <= 0:
        w = [1.0] * n
    fixed = {}
    while True:
        free = [i for i in range(n) if i not in fixed]
        rest = budget - sum(fixed.values())
        tw = sum(w[i] for i in free)
        share = {i: (rest * w[i] / tw if tw > 0 else rest / max(1, len(free))) for i in free}
        over = [i for i in free if share[i] > hi]
        under = [] if over else [i for i in free if share[i] < lo]
        for i in over:
            fixed[i] = hi
        for i in under:
            fixed[i] = lo
        if not over and not under:
            break
    exact = [fixed[i] if i in fixed else share[i] for i in range(n)]
    caps = [min(hi, max(lo, int(math.floor(x)))) for x in exact]
    left = budget - sum(caps)
    for i in sorted(range(n), key=lambda i: (-(exact[i] - math.floor(exact[i])), i)):
        if left <= 0:
            break
        if caps[i] < hi and i not in fixed:
            caps[i] += 1
            left -= 1
    return caps


WEIGHT = st.one_of(st.just(0.0), st.just(0.0), st.just(1.0), st.sampled_from([0.1, 2 / 3, 5.0]),
                   st.floats(0.0, 10.0, allow_nan=False), st.integers(0, 6))


@st.composite
def splits(draw):
    n = draw(st.integers(1, 90))
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
    hi = draw(st.integers(0, 12)) if draw(st.integers(0, 9)) == 0 else lo + draw(st.integers(0, 12))
    budget = lo * n + draw(st.integers(0, 4 * n + 10))
    return weights, budget, lo, hi


@prop(400, deadline=None)
@given(splits())
def test_the_split_equals_the_layer_by_layer_one(case):
    weights, budget, lo, hi = case
    assert allocate(weights, budget, lo, hi) == reference(weights, budget, lo, hi)


def test_a_budget_below_the_minimum_is_refused():
    for weights in ([1.0] * 4, [0.0] * 4, [0.0, 0.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0]):
        try:
            allocate(weights, 7, 2, 8)
        except BudgetError as e:
            assert "below layers x min_capacity" in str(e)
        else:
            raise AssertionError("no BudgetError")


def test_many_layers_few_weighted_cost_the_weighted_ones():
    """65,536 layers, 30 of which a signal has seen: the split is the reference's and takes
    a small fraction of the layer-by-layer time (measured against it, on this machine)."""
    n = 65536
    sig = Signal(n, 50)
    for i in range(30):
        sig.observe(i * 2000 + 7, [i % 5, 1 + i % 7, 9])
    weights = sig.weights("entropy")
    assert sum(1 for x in weights if x) == 30
    t0 = time.perf_counter()
    fast = allocate(weights, n * 4 + 17, 2, 64)
    t1 = time.perf_counter()
    ref = reference(weights, n * 4 + 17, 2, 64)
    t2 = time.perf_counter()
    assert fast == ref
    assert t1 - t0 < (t2 - t1) / 5, (t1 - t0, t2 - t1)
