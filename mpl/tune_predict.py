"""How well a prefetch predictor predicts a trace: accuracy and coverage per budget.

For each dispatch of layer ``l`` the predictor, having observed everything before it, names
the experts it expects at the next layer (``l + 1``, the next pass's first layer after the
last), best first; when that layer's dispatch arrives its first ``b`` names are scored:

* **accuracy@b** = predicted experts that the target dispatch selected / experts predicted
  (what a prefetch of ``b`` keys would waste: 1 - accuracy);
* **coverage@b** = predicted experts that it selected / experts it selected (how many of the
  target's accesses a prefetch of ``b`` keys could have covered).

The predictors are the runtime's own (:mod:`mpl.runtime.prefetch`): ``history`` (the target
layer's most frequent experts over ``window`` steps), ``affinity`` (the transition table,
every target ranked, no threshold), ``learned`` (every candidate ranked by its probability),
and ``recorded`` (the trace's speculative predictions: a pre-gate lookahead recorded by
``mplc trace record``, or the synthetic ``--pred-accuracy``). The first dispatches of a trace
teach the online predictors; ``warmup`` (a fraction of the dispatches) are not scored.

Used by ``mplc tune`` (its report) and ``benchmarks/bench_policies.py`` (the table in
docs/choosing-a-policy.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpl.trace import Trace, has_predictions

STRATEGIES = ("history", "affinity", "learned", "recorded")
BUDGETS = (1, 2, 4, 8)


@dataclass
class Score:
    strategy: str
    budgets: tuple
    hits: dict = field(default_factory=dict)       # b -> predicted and selected
    predicted: dict = field(default_factory=dict)  # b -> predicted
    actual: dict = field(default_factory=dict)     # b -> selected (of the scored targets)
    scored: int = 0                                # target dispatches scored

    def accuracy(self, b: int) -> float | None:
        return self.hits[b] / self.predicted[b] if self.predicted.get(b) else None

    def coverage(self, b: int) -> float | None:
        return self.hits[b] / self.actual[b] if self.actual.get(b) else None

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "scored": self.scored,
                "accuracy": {b: self.accuracy(b) for b in self.budgets},
                "coverage": {b: self.coverage(b) for b in self.budgets}}


#: the policies whose compiled runtime holds exactly the predictor a report scores
#: (prefetch.History(L, window, E); prefetch.Affinity(L, 1, 0.0))
_ENGINE_POLICIES = {
    "history": "policy r { cache { capacity = 1 } prefetch { strategy = history budget = 1 "
               "history_window = WINDOW } }",
    "affinity": "policy r { cache { capacity = 1 } prefetch { strategy = affinity budget = 1 "
                "lookahead = 1 affinity_threshold = 0 } }",
}


def _engine_rank(strategy: str, h, window: int):
    """The compiled engine's own ``strategy`` predictor as ``rank(layer, step, experts,
    top)`` (the same rankings as the Python one: ``Engine._rank``), or None when runtimes
    are pure or the engine cannot hold it (the report then ranks in Python)."""
    from functools import partial

    from mpl.api import load_for_replay
    from mpl.runtime.backend import COMPILED, default

    if default() != COMPILED:
        return None
    try:                         # (a window outside the schema's range, a shape the runtime
        pol = load_for_replay(_ENGINE_POLICIES[strategy].replace("WINDOW", str(window)))
        rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k)
    except Exception:            # refuses: the Python predictor ranks)
        return None
    if rt.backend != COMPILED:
        return None
    return partial(rt._impl._rank, 0 if strategy == "history" else 1)


def evaluate(trace: Trace, strategy: str, budgets=BUDGETS, *, window: int = 50,
             context: int = 3, warmup: float = 0.1) -> Score:
    """Score ``strategy``'s next-layer predictions over ``trace`` (see the module doc)."""
    return evaluate_many(trace, (strategy,), budgets, window=window, context=context,
                         warmup=warmup)[0]


def evaluate_many(trace: Trace, strategies, budgets=BUDGETS, *, window: int = 50,
                  context: int = 3, warmup: float = 0.1) -> list[Score]:
    """:func:`evaluate` of each of ``strategies``, in one pass over the trace (each
    dispatch's distinct experts and weights read once for all of them); each predictor
    sees what it would see alone, so each score is the one :func:`evaluate` gives."""
    from mpl.runtime.prefetch import Affinity, History, learned

    for strategy in strategies:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    h = trace.header
    L, E = h.num_moe_layers, h.num_experts
    budgets = tuple(sorted(set(int(b) for b in budgets)))
    top = max(budgets)
    scores = [Score(s, budgets, {b: 0 for b in budgets}, {b: 0 for b in budgets},
                    {b: 0 for b in budgets}) for s in strategies]
    preds = []                      # (score, rank(layer, step, d, experts, ws), pending)
    for sc in scores:
        engine = (_engine_rank(sc.strategy, h, window) if sc.strategy in _ENGINE_POLICIES
                  else None)
        if engine is not None:
            def rank(layer, step, d, experts, ws, target, engine=engine):
                return engine(layer, step, experts, top)
        elif sc.strategy == "history":
            hist = History(L, window, E)

            def rank(layer, step, d, experts, ws, target, hist=hist):
                hist.observe(layer, experts)
                return hist.top(target, top)
        elif sc.strategy == "affinity":
            aff = Affinity(L, 1, 0.0)

            def rank(layer, step, d, experts, ws, target, aff=aff):
                aff.observe(layer, step, experts)
                return aff.predict(layer, experts, 1)[:top]
        elif sc.strategy == "learned":
            lrn = learned(L, E, context, window, 0.0, 1)

            def rank(layer, step, d, experts, ws, target, lrn=lrn):
                lrn.observe(layer, step, experts, ws, d.predictions)
                return lrn.predict(layer, step, 1, top)
        else:
            def rank(layer, step, d, experts, ws, target):
                return list(dict.fromkeys((d.predictions or {}).get(target, ())))[:top]
        preds.append((sc, rank, {}))     # pending: target layer -> (step, ranked predictions)
    dispatches = trace.dispatches
    skip = int(len(dispatches) * warmup)
    prev_layer = None
    step = -1
    for i, d in enumerate(dispatches):
        layer = d.layer
        step = d.step if d.step is not None else (step + 1 if prev_layer is None or
                                                  layer <= prev_layer else step)
        prev_layer = layer
        experts, ws = d.distinct_weights()
        target = layer + 1
        tstep = step
        if target == L:
            target, tstep = 0, step + 1
        got = None
        for sc, rank, pending in preds:
            p = pending.pop(layer, None)
            if p is not None and p[0] == step and i >= skip:
                if got is None:
                    got = set(experts)
                    actual = len(got)
                sc.scored += 1
                ranked = p[1]
                n = len(ranked)
                hit = j = 0             # hits among the first j ranked (budgets ascending)
                for b in budgets:
                    end = b if b < n else n
                    while j < end:
                        hit += ranked[j] in got
                        j += 1
                    sc.hits[b] += hit
                    sc.predicted[b] += end
                    sc.actual[b] += actual
            pending[target] = (tstep, rank(layer, step, d, experts, ws, target))
    return scores


def evaluate_all(trace: Trace, budgets=BUDGETS, **kw) -> list[Score]:
    """Every strategy that applies to the trace (``recorded`` only when it has predictions),
    in one pass (:func:`evaluate_many`)."""
    has = has_predictions(trace.dispatches)
    return evaluate_many(trace, [s for s in STRATEGIES if s != "recorded" or has], budgets, **kw)


def format_scores(scores: list[Score]) -> str:
    budgets = scores[0].budgets if scores else BUDGETS
    head = ["predictor"] + [f"acc@{b}" for b in budgets] + [f"cov@{b}" for b in budgets]
    rows = []
    for s in scores:
        def pct(x):
            return "-" if x is None else f"{x:.1%}"
        rows.append([s.strategy] + [pct(s.accuracy(b)) for b in budgets]
                    + [pct(s.coverage(b)) for b in budgets])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*r) for r in rows])
