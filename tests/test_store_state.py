"""Each eviction store owns its state: ``dump(key)`` gives it as plain data and ``load(data,
key, capacity)`` on a fresh store of the same rule rebuilds it exactly, so a runtime whose
stores are replaced by their reloaded copies in the middle of a run goes on making the same
decisions (the compiled core moves a store's state through these two, mpl.runtime.fast)."""

from __future__ import annotations

import random

import pytest

import mpl
from mpl.runtime import fast
from mpl.runtime.eviction import make_store
from runtime_helpers import STATE_EVICTIONS, full_state, store_state

RULES = STATE_EVICTIONS + ["score|frequency_threshold", "lfu|score"]


def run(rt, calls):
    for layer, experts, tokens in calls:
        rt.dispatch(layer, experts, None, tokens)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("per_layer", [False, True], ids=["shared", "per_layer"])
def test_a_reloaded_store_goes_on_exactly(rule, per_layer):
    text = (f"policy p {{ cache {{ capacity = 4 eviction = {rule} frequency_decay = 0.5 "
            f"decay_interval = 3 freq_window = 6 freq_threshold = 0.1 }} "
            f"prefetch {{ strategy = history budget = 2 }} "
            + ("per_layer { allocation = uniform } " if per_layer else "") + "}")
    pol = mpl.loads(text)
    with fast.pure():
        a, b = pol.runtime(3, 7, 2), pol.runtime(3, 7, 2)
    r = random.Random(rule)
    calls = [(i % 3, r.sample(range(7), 2), r.choice([1, 1, 4])) for i in range(240)]
    run(a, calls[:120])
    run(b, calls[:120])
    ident = (lambda k: k)
    for c in (b.caches if per_layer else b.caches[:1]):
        copy = make_store(rule, c.capacity, b.p)
        copy.load(c.store.dump(ident), ident, c.capacity)
        assert store_state(copy) == store_state(c.store)
        c.store = copy
    if not per_layer:
        b.caches = [b.caches[0]] * b.num_layers
    run(a, calls[120:])
    run(b, calls[120:])
    assert full_state(a) == full_state(b)


@pytest.mark.parametrize("rule", RULES)
def test_a_store_state_is_plain_data(rule):
    """What dump gives is made of lists, tuples, numbers and the keys themselves (what the
    compiled core reads), and maps keys through the function it is given."""
    with fast.pure():
        rt = mpl.loads(f"policy p {{ cache {{ capacity = 3 eviction = {rule} }} }}").runtime(2, 5, 2)
        for i in range(40):
            rt.dispatch(i % 2, [(i * 3) % 5, (i * 3 + 1) % 5])
    seen = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            assert isinstance(x, (int, float)) and not isinstance(x, bool) or x is None, x
            seen.append(x)
    walk(rt.caches[0].store.dump(lambda k: k[0] * 5 + k[1]))
    assert seen
