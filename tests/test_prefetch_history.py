"""The history predictor's incremental ranking equals a count over its window, recomputed
from scratch, after every observation (including windows shrunk by an adapt rule and wide
prefill dispatches)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mpl.runtime.prefetch import History


def brute_top(window_rows, b):
    c = Counter(e for row in window_rows for e in row)
    return [e for e, _ in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))][:b]


@pytest.mark.parametrize("seed", range(12))
def test_history_top_equals_a_recount_of_the_window(seed):
    r = random.Random(seed)
    layers, experts = 3, r.choice([8, 64, 160])
    window = r.choice([1, 3, 10, 50])
    h = History(layers, window, experts)
    rows = [[] for _ in range(layers)]
    for i in range(1500):
        layer = r.randrange(layers)
        k = r.choice([1, 2, 6]) if r.random() < 0.9 else r.randint(min(17, experts), min(experts, 40))
        hot = r.sample(range(experts), min(experts, 8))
        chosen = list(dict.fromkeys(r.choice(hot) if r.random() < 0.7 else r.randrange(experts)
                                    for _ in range(k)))
        h.observe(layer, chosen)
        # the window of a layer is trimmed when that layer is observed
        rows[layer] = (rows[layer] + [chosen])[-h.window:]
        if r.random() < 0.01:            # an adapt rule changes the window
            h.window = r.choice([1, 2, 5, 20, 60])
        b = r.choice([1, 4, 9])
        for l in range(layers):
            assert h.top(l, b) == brute_top(rows[l], b), (i, l)
            e = r.randrange(experts)
            assert h.count(l, e) == sum(row.count(e) for row in rows[l])


def test_top_of_an_unseen_layer_is_empty():
    h = History(2, 5, 8)
    assert h.top(1, 4) == []
    h.observe(0, [3, 1])
    assert h.top(0, 0) == []
    assert h.top(0, 4) == [1, 3]
