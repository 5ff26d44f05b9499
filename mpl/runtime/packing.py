"""Trace records as arrays: what a compiled runtime's replay reads (mpl/runtime/c/engine_replay.c).

A :class:`Packed` holds per record its layer, step (-1: None), token count and the offset of
its distinct experts (router order, a repeat's weight the mean: mpl.runtime.routing) in
``experts``/``weights``; ``has_w`` says which records have weights when only some have;
``multi``: the records of several tokens with their tokens per expert (for the timeline's
costs); ``predictions``: the records that carry speculative predictions, with them.

:func:`hold` / :func:`release` / :func:`reusing` memoise what is derived from a trace (its
pack, its step count, its records) while a sweep or a tune replays it many times.
"""

from __future__ import annotations

from array import array
from contextlib import contextmanager

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


def pack_dispatches(dispatches, num_experts: int) -> Packed:
    """Pack trace Dispatches (mpl.trace) directly: the records ``records_of`` would give,
    without building them. The compiled packer takes the common shapes (exact ints, lists,
    float weights, no predictions); anything else, and the pure backend, packs here."""
    fast = _kernel("pack_dispatches")
    if fast is not None:
        got = fast(dispatches, num_experts)
        if got is not None:
            p = Packed()
            for name, code, raw in zip(("layers", "offs", "experts", "weights", "steps", "tokens"),
                                       "iiidqi", got):
                setattr(p, name, None if raw is None else array(code, raw))
            p.multi, p.weights_mixed = got[6], got[7]
            p.has_w = None if got[8] is None else array("b", got[8])
            p.records = len(p.layers)
            return p
    from mpl.trace import records_of
    return pack(records_of(dispatches), num_experts)


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


# ------------------------------------------------------------------ per-trace reuse
_HELD: dict = {}        # id(trace.dispatches) -> [dispatches, depth, {key: derived value}]


def hold(trace) -> None:
    """From now until :func:`release`, values derived from ``trace`` (its pack, its step
    count) are computed once: the caller promises not to change the trace meanwhile (a sweep
    or a tune replays one trace many times). Holding keeps the trace alive. The values
    depend only on the dispatches, so a copy of the trace with another header (a replay
    fills in the model: mpl.sim.tracemodel.with_model) that shares them shares them too."""
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is not None and ent[0] is d:
        ent[1] += 1
    else:
        _HELD[id(d)] = [d, 1, {}]


def release(trace) -> None:
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is not None and ent[0] is d:
        ent[1] -= 1
        if ent[1] <= 0:
            del _HELD[id(d)]


@contextmanager
def reusing(trace):
    """``hold(trace)`` for the enclosed block."""
    hold(trace)
    try:
        yield trace
    finally:
        release(trace)


def per_trace(trace, key, make):
    """``make()``, memoised under ``key`` while ``trace`` is held (computed afresh otherwise)."""
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is None or ent[0] is not d:
        return make()
    memo = ent[2]
    if key not in memo:
        memo[key] = make()
    return memo[key]


def pack_trace(trace, num_experts: int) -> Packed:
    """The pack of a Trace's dispatches, computed once per trace (:func:`derived`); a trace
    read lazily (mpl.tracecols) brings its columns: no Dispatch is built."""
    return derived(trace, ("pack", num_experts), lambda: pack_of(trace.dispatches, num_experts))


def cached_pack(trace, num_experts: int) -> "Packed | None":
    """The pack :func:`pack_trace` keeps for ``trace``, if it has made it (None: not made,
    or the dispatches changed since)."""
    store = getattr(trace, "derived", None)
    ident = _identity(trace.dispatches)
    if store is not None and ident is not None:
        got = store.get(("pack", num_experts))
        if got is not None and got[0] == ident:
            return got[1]
    ent = _HELD.get(id(trace.dispatches))
    if ent is not None and ent[0] is trace.dispatches:
        return ent[2].get(("pack", num_experts))
    return None


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


def derived(trace, key, make):
    """``make()``, kept in ``trace.derived`` (mpl.trace.Trace) for as long as the trace's
    dispatches are the same list, unchanged (``Dispatches.version``; a lazily read trace's
    never change); a trace without that record memoises only while held."""
    store = getattr(trace, "derived", None)
    ident = _identity(trace.dispatches)
    if store is None or ident is None:
        return per_trace(trace, key, make)
    got = store.get(key)
    if got is not None and got[0] == ident:
        return got[1]
    value = per_trace(trace, key, make)
    store[key] = (ident, value)
    return value


def _identity(dispatches):
    """What a value derived from ``dispatches`` is valid for (None: nothing tells)."""
    version = getattr(dispatches, "version", None)
    if version is not None:                      # mpl.trace.Dispatches
        return (id(dispatches), version)
    if hasattr(dispatches, "columns"):           # mpl.tracecols.LazyDispatches: immutable
        return (id(dispatches),)
    return None


def pack_of(dispatches, num_experts: int) -> Packed:
    """:func:`pack_dispatches`, or the columns of a lazily read trace's dispatches
    (mpl.tracecols) as they are."""
    cols = getattr(dispatches, "columns", None)
    if cols is None or cols.num_experts != num_experts:
        return pack_dispatches(dispatches, num_experts)
    p = Packed()
    for name in Packed.__slots__:
        setattr(p, name, getattr(cols, name, None))
    if p.multi is None:
        p.multi = []
    return p
