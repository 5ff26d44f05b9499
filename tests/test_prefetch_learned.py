"""The learned predictor (prefetch.strategy = learned): it reads several layers back, the
target layer's previous step and the caller's speculative predictions, learns online, keeps
its memory bounded, and drives the runtime's prefetch like the other strategies."""

from __future__ import annotations

import random

import pytest

import mpl
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.runtime.prefetch import Learned
from mpl.trace import Dispatch, Trace, TraceHeader
from mpl.tune_predict import evaluate


def _trace(rows, L, E, K=1, preds=None):
    h = TraceHeader(model="t", num_layers=L, moe_layers=tuple(range(L)), num_experts=E, top_k=K)
    out = []
    for i, ex in enumerate(rows):
        step, layer = divmod(i, L)
        out.append(Dispatch(step, layer, [list(ex)], None, preds[i] if preds else None))
    return Trace(h, out)


def _two_back(steps, L=6, E=12, seed=0):
    """Layer l's expert is a fixed function of layer l-2's (layer l-1's is noise)."""
    r = random.Random(seed)
    f = [r.sample(range(E), E) for _ in range(L)]
    rows = []
    for _ in range(steps):
        ex = [r.randrange(E), r.randrange(E)]
        for layer in range(2, L):
            ex.append(f[layer][ex[layer - 2]])
        rows.extend([[e] for e in ex])
    return _trace(rows, L, E)


def test_learned_reads_two_layers_back_where_affinity_cannot():
    tr = _two_back(300)
    learned = evaluate(tr, "learned", (1,), warmup=0.3)
    affinity = evaluate(tr, "affinity", (1,), warmup=0.3)
    # layers 2.. are determined two back: 4 of 6 targets predictable, 2 random
    assert learned.accuracy(1) > 0.6
    assert affinity.accuracy(1) < 0.3


def test_learned_uses_the_same_layers_previous_step():
    """Each layer repeats its expert of the previous step most of the time, unrelated to the
    layer before it: the recency feature carries the prediction."""
    r = random.Random(1)
    L, E = 4, 16
    cur = [r.randrange(E) for _ in range(L)]
    rows = []
    for _ in range(400):
        for layer in range(L):
            if r.random() < 0.2:
                cur[layer] = r.randrange(E)
            rows.append([cur[layer]])
    tr = _trace(rows, L, E)
    assert evaluate(tr, "learned", (1,), warmup=0.3).accuracy(1) > 0.7
    assert evaluate(tr, "affinity", (1,), warmup=0.3).accuracy(1) < 0.5


def test_learned_trusts_accurate_speculative_predictions():
    """Random routing, but the caller's predictions for the next layer are right 90% of the
    time: the model learns to follow them (history and affinity cannot know the target)."""
    r = random.Random(2)
    L, E = 4, 16
    rows = [[r.randrange(E)] for _ in range(L * 300)]
    preds = []
    for i in range(len(rows)):
        nxt = rows[i + 1][0] if i + 1 < len(rows) else 0
        guess = nxt if r.random() < 0.9 else r.randrange(E)
        preds.append({(i % L + 1) % L: [guess]})
    tr = _trace(rows, L, E, preds=preds)
    assert evaluate(tr, "learned", (1,), warmup=0.3).accuracy(1) > 0.8
    assert evaluate(tr, "history", (1,), warmup=0.3).accuracy(1) < 0.3


def test_memory_is_bounded_by_the_row_cap():
    lrn = Learned(4, 200, context=2, window=50, confidence=0.0, depth=1, row_cap=8)
    r = random.Random(3)
    for step in range(300):
        for layer in range(4):
            ex = r.sample(range(200), 4)
            lrn.observe(layer, step, ex, [r.random() for _ in ex])
            lrn.predict(layer, step, 1)
    assert lrn.rows
    assert max(len(row[1]) for tab in lrn.rows.values() for row in tab.values()) <= 2 * 8
    assert {d for d, _ in lrn.rows} <= {1, 2}          # context 2, depth 1
    assert all(row[0] < 2 * 50 for tab in lrn.rows.values() for row in tab.values())


def test_confidence_filters_the_proposals():
    lrn = Learned(2, 8, context=1, window=20, confidence=0.99, depth=1)
    for step in range(50):
        lrn.observe(0, step, [step % 8])
        lrn.observe(1, step, [(step + 3) % 8])
    assert lrn.predict(1, 49, 1) == [] or all(
        lrn.probability(f) >= 0.99 for f in lrn.pending[0][1].values())
    lrn.confidence = 0.0
    assert len(lrn.predict(1, 49, 1)) >= 1


POLICY = """
policy p {
    cache { capacity = 3 eviction = lru }
    per_layer { min_capacity = 1 }
    prefetch { strategy = learned budget = 2 confidence = 0.3 lookahead = 2 }
}
"""


def test_a_learned_policy_prefetches_and_replays_the_same_on_both_backends():
    from mpl.sim import synthesize
    from mpl.sim.replay import replay

    pol = mpl.loads(POLICY)
    tr = synthesize("olmoe-1b-7b", steps=30, seed=0, pred_accuracy=0.8)
    a = replay(pol, tr, belady=False)
    with forced("pure"):
        b = replay(pol, tr, belady=False)
    assert a.stats == b.stats and a.sim == b.sim
    s = a.stats
    assert s["prefetch_loads"] > 0 and s["prefetch_accuracy"] > 0.3
    rt = pol.runtime(16, 64, 8)
    assert rt.learned is not None
    assert rt.backend == ("compiled" if compiled.available() else "pure")


def test_dispatch_and_the_replay_loop_make_the_same_decisions():
    """The generated dispatch and replay_records both feed the predictor (weights and the
    speculative predictions included): plan by plan the same loads."""
    from mpl.sim import synthesize
    from mpl.trace import records_of
    from mpl.timemodel.timeline import Timeline
    from mpl.timemodel import hardware as hw

    pol = mpl.loads(POLICY)
    tr = synthesize("mixtral-8x7b", steps=20, seed=3, pred_accuracy=0.6)
    h = tr.header
    one = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k)
    loads = []
    for d in tr.dispatches:
        plan = one.dispatch(d.layer, d.experts[0], d.weights[0], step=d.step,
                            predictions=d.predictions)
        loads.append([(ld.key, ld.kind) for ld in plan.loads])
    two = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k)
    profile = hw.resolve(None)
    _, costs = hw.costs_for_trace(profile, pol.ir, h)
    two.replay_records(records_of(tr.dispatches), Timeline(costs))
    a, b = one.stats(), two.stats()
    for k in ("hits", "prefetch_loads", "prefetch_useful", "evictions", "demand_loads"):
        assert a[k] == b[k], k
    assert sum(len(x) for x in loads) == a["loads"]
    assert one.learned.dump()["theta"] == two.learned.dump()["theta"]


def test_adapt_can_change_the_confidence():
    pol = mpl.loads("""
policy p {
    cache { capacity = 4 }
    prefetch { strategy = learned budget = 2 confidence = 0.9 }
    adapt { when hit_rate < 0.99 { confidence = 0.1 } }
}
""")
    rt = pol.runtime(4, 8, 2)
    r = random.Random(0)
    for step in range(10):
        for layer in range(4):
            rt.dispatch(layer, r.sample(range(8), 2))
    assert rt.learned.dump()["confidence"] == pytest.approx(0.1)
    assert any(e["key"] == "prefetch.confidence" for e in rt.stats()["adapt_log"])


def test_the_predictor_report_scores_every_strategy_in_one_pass_as_alone():
    """mplc tune's report (evaluate_all: one pass over the trace for every strategy) gives
    each strategy the score it gets scored alone."""
    from mpl.sim import synthesize
    from mpl.tune_predict import STRATEGIES, evaluate_all

    tr = synthesize("mixtral-8x7b", steps=30, seed=5, pred_accuracy=0.8)
    together = evaluate_all(tr, budgets=(1, 2, 4))
    assert [s.strategy for s in together] == list(STRATEGIES)
    for s in together:
        alone = evaluate(tr, s.strategy, (1, 2, 4))
        assert s.to_dict() == alone.to_dict() and s.scored > 0
