"""The affinity predictor (candidate sets under a watermark) gives the same predictions as a
recount from scratch (the plain transition table of the original implementation: every
target of every source scanned), after every observation, for any threshold (an adapt rule
may change it) and any lookahead depth."""

from __future__ import annotations

import random

import pytest

from mpl.runtime.prefetch import Affinity


class PlainAffinity:
    """The reference: ``(d, src) -> {e: [n, {e2: count}]}``, every target scanned."""

    def __init__(self, num_layers, depth, threshold):
        self.L, self.depth, self.threshold = num_layers, depth, threshold
        self.last = [None] * num_layers
        self.table = {}

    def observe(self, layer, step, experts):
        for d in range(1, min(self.depth, self.L) + 1):
            src, src_step = layer - d, step
            if src < 0:
                src, src_step = src + self.L, step - 1
            prev = self.last[src]
            if prev is None or prev[0] != src_step:
                continue
            tab = self.table.setdefault((d, src), {})
            for e in prev[1]:
                row = tab.setdefault(e, [0, {}])
                row[0] += 1
                for e2 in experts:
                    row[1][e2] = row[1].get(e2, 0) + 1
        self.last[layer] = (step, tuple(experts))

    def probabilities(self, layer, experts, d):
        best = {}
        for e in experts:
            row = self.table.get((d, layer), {}).get(e)
            if row is None:
                continue
            for e2, c in row[1].items():
                p = c / row[0]
                if p > best.get(e2, -1.0):
                    best[e2] = p
        return best

    def predict(self, layer, experts, d):
        good = sorted((-p, e) for e, p in self.probabilities(layer, experts, d).items() if p >= self.threshold)
        return [e for _, e in good]


@pytest.mark.parametrize("seed", range(10))
def test_predictions_equal_the_plain_table(seed):
    r = random.Random(seed)
    L, E = r.choice([(2, 8), (4, 16), (3, 64)])
    depth = r.choice([1, 2, 3])
    thr = r.choice([0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
    fast, ref = Affinity(L, depth, thr), PlainAffinity(L, depth, thr)
    hot = [r.sample(range(E), min(E, 6)) for _ in range(L)]
    for step in range(400):
        for layer in range(L):
            if r.random() < 0.05:
                continue                     # a skipped layer: no transition into the next
            k = r.choice([1, 2, 6]) if r.random() < 0.95 else min(E, 20)
            chosen = list(dict.fromkeys(r.choice(hot[layer]) if r.random() < 0.75 else r.randrange(E)
                                        for _ in range(k)))
            for d in range(1, depth + 1):
                assert fast.predict(layer, chosen, d) == ref.predict(layer, chosen, d), (step, layer, d)
            fast.observe(layer, step, chosen)
            ref.observe(layer, step, chosen)
        if r.random() < 0.02:                # an adapt rule moves the threshold
            fast.threshold = ref.threshold = r.choice([0.0, 0.2, 0.4, 0.7, 1.0])
    for layer in range(L):
        for d in range(1, depth + 1):
            ex = r.sample(range(E), 3)
            assert fast.probabilities(layer, ex, d) == ref.probabilities(layer, ex, d)


def test_a_deterministic_transition_is_predicted_and_a_rare_one_is_not():
    a = Affinity(2, 1, 0.5)
    for step in range(10):
        a.observe(0, step, [1])
        a.observe(1, step, [7] if step else [3])     # 1 -> 7 nine times in ten, 1 -> 3 once
    assert a.predict(0, [1], 1) == [7]
    assert a.probabilities(0, [1], 1) == {7: 0.9, 3: 0.1}
    a.threshold = 0.05
    assert a.predict(0, [1], 1) == [7, 3]
    assert a.predict(0, [2], 1) == []
    assert a.predict(1, [7], 1) == [1]          # layer 1 -> layer 0 of the next step
