"""Trace records as arrays: what a compiled runtime's replay reads (mpl/runtime/c/engine_replay.c).

A :class:`Packed` holds per record its layer, step (-1: None), token count and the offset of
its distinct experts (router order, a repeat's weight the mean: mpl.runtime.routing) in
``experts``/``weights``; ``has_w`` says which records have weights when only some have;
``multi``: the records of several tokens with their tokens per expert (for the timeline's
costs); ``predictions``: the records that carry speculative predictions, with them.

Packing a trace's dispatches (and keeping the pack while the trace is replayed many times) is
the replayer's: mpl.sim.tracepack.
"""

from __future__ import annotations

from array import array

from mpl.runtime.routing import distinct


def _kernel(name: str):
    """A function of the compiled extension (None when it is not in use)."""
    from mpl.runtime import compiled
    return compiled.kernel(name)


class Packed:
    """See the module docstring."""

    __slots__ = ("layers", "offs", "experts", "weights", "steps", "tokens", "multi",
                 "weights_mixed", "has_w", "predictions", "records")

    def __init__(self):
        self.layers = array("i")
        self.offs = array("i", [0])
        self.experts = array("i")
        self.weights = array("d")
        self.steps = array("q")
        self.tokens = array("i")
        self.multi: list = []           # (record index, {expert: tokens})
        self.weights_mixed = False      # some records with weights, some without
        self.has_w = None               # with weights_mixed: per record 1 when it has them
        self.predictions = None         # [(record index, {layer: [ids]})], records in order
        self.records = 0

    def __len__(self):
        return self.records


def pack(records, num_experts: int) -> Packed:
    """Pack ``(layer, experts, weights, tokens, step, predictions, tokens_of)`` records
    (mpl.trace.records_of). Expert ids out of range raise ValueError."""
    p = Packed()
    layers, offs, exps, ws, steps, toks = p.layers, p.offs, p.experts, p.weights, p.steps, p.tokens
    flags = array("b")
    preds = []
    off = 0
    for i, (layer, experts, weights, tokens, step, pred, tokens_of) in enumerate(records):
        n = len(experts)
        if n > 1 and len(set(experts)) != n:
            experts, weights = distinct(experts, weights)
            n = len(experts)
        layers.append(layer)
        exps.extend(experts)
        off += n
        offs.append(off)
        if weights is None:
            flags.append(0)
        else:
            flags.append(1)
            ws.extend(weights)
        steps.append(-1 if step is None else step)
        toks.append(tokens if tokens_of is not None else 1)
        if tokens_of is not None:
            p.multi.append((i, tokens_of))
        if pred:
            preds.append((i, {int(k): list(v) for k, v in pred.items()}))
    _finish(p, flags, preds, num_experts)
    return p


def _finish(p: Packed, flags, preds, num_experts: int) -> None:
    p.records = len(p.layers)
    with_w = flags.count(1)
    p.weights_mixed = bool(with_w and with_w != len(flags))
    p.has_w = flags if p.weights_mixed else None
    if not with_w:
        p.weights = None
    p.predictions = preds or None
    exps = p.experts
    if exps and (min(exps) < 0 or max(exps) >= num_experts):
        raise ValueError("an expert id out of range in the records")


def records_of(p: Packed) -> list:
    """The records a pack was made from (its distinct experts and mean weights)."""
    multi = dict(p.multi)
    preds = dict(p.predictions or ())
    out = []
    wo = 0
    for i in range(p.records):
        a, b = p.offs[i], p.offs[i + 1]
        ex = list(p.experts[a:b])
        w = None
        if p.weights is not None and (p.has_w is None or p.has_w[i]):
            w = list(p.weights[wo:wo + (b - a)])
            wo += b - a
        s = p.steps[i]
        out.append((p.layers[i], ex, w, p.tokens[i], None if s < 0 else s, preds.get(i),
                    multi.get(i)))
    return out


def steps_and_tokens_of(p: Packed) -> tuple[int, int]:
    """mpl.trace.steps_and_tokens of the dispatches ``p`` packs, from its step and token
    arrays (a step of None is packed as -1)."""
    fast = _kernel("steps_tokens")
    if fast is not None:
        return fast(p.steps, p.tokens)
    per: dict = {}
    for s, t in zip(p.steps, p.tokens):
        if per.get(s, 0) < t:
            per[s] = t
    return len(per), sum(per.values())
