"""Routing traces: the data the live recorder (offload/), the vLLM integration (vllm/) and
the replayer (sim/) share; none of them imports another.

A trace is a header plus a sequence of dispatches in execution order. Layers in a dispatch
are MoE-layer ordinals (``0 .. len(header.moe_layers)-1``); ``header.moe_layers`` maps them
back to the model's decoder-layer ids. ``records_of`` turns dispatches into the records a
compiled module's ``replay_records`` takes (the replayer and vLLM's shadow feed the runtime
the same way). File formats (native binary, the original's JSONL) are read and written by
``mpl.traceio``; serving engines' routing outputs are converted by ``mpl.engine_formats``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class TraceHeader:
    model: str
    num_layers: int                   # decoder layers of the model
    moe_layers: tuple[int, ...]       # decoder-layer id of each MoE-layer ordinal
    num_experts: int
    top_k: int
    expert_bytes: int = 0             # bytes of one expert's weights (0: unknown)
    source: str = ""                  # "synthetic preset=... seed=...", "recorded ...", "jsonl ..."
    extra: dict[str, Any] = field(default_factory=dict)
    #: bits per stored expert weight: the recorded model's precision, which sizes a
    #: low-precision tier's copies in a replay (SPEC §12); 0: unknown (a replay takes the
    #: model's shape when given, else 16)
    stored_bits: int = 0
    #: the model's shape (mpl.shapes.ModelShape) when known; not stored in trace files:
    #: mpl.sim.tracemodel.with_model fills it from the preset the header names or --model
    shape: Any = field(default=None, compare=False, repr=False)

    @property
    def num_moe_layers(self) -> int:
        return len(self.moe_layers)


@dataclass(slots=True)
class Dispatch:
    step: int
    layer: int                                  # MoE-layer ordinal
    experts: list[list[int]]                    # per token: the router's top-k ids, in order
    weights: list[list[float]] | None = None    # per token: the router weights, same shape
    predictions: dict[int, list[int]] | None = None
    # ^ speculative predictions made at this dispatch for later layers (lookahead):
    #   MoE-layer ordinal -> predicted expert ids, best first

    @property
    def tokens(self) -> int:
        return len(self.experts)

    def distinct(self) -> list[int]:
        """The distinct experts in router order (token by token, rank by rank)."""
        seen: dict[int, None] = {}
        for row in self.experts:
            for e in row:
                seen.setdefault(e, None)
        return list(seen)

    def mean_weights(self) -> list[float] | None:
        """Per distinct expert, its mean router weight over the tokens that selected it."""
        return self.distinct_weights()[1]

    def distinct_weights(self) -> tuple[list[int], list[float] | None]:
        """:meth:`distinct` and :meth:`mean_weights` in one pass over the tokens."""
        from mpl.runtime.routing import distinct
        return distinct(*_flat(self))


class Dispatches(list):
    """A trace's list of dispatches, counting its changes (``version``): what a replay
    derives from a trace (the compiled engine's pack, the step count: ``Trace.derived``) is
    made again after any change of the list. A Dispatch object changed in place is not
    counted: replace it with a new one."""

    version = 0          # (a class default: an unpickled or copied list counts from 0)


def _counted(name):
    base = getattr(list, name)

    def method(self, *args):
        self.version += 1
        return base(self, *args)
    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert",
              "pop", "remove", "clear", "sort", "reverse"):
    setattr(Dispatches, _name, _counted(_name))
del _name


@dataclass
class Trace:
    header: TraceHeader
    dispatches: list[Dispatch] = field(default_factory=Dispatches)
    #: what replays derive from the dispatches (the compiled engine's pack per expert
    #: count, the step count), each with the identity of the dispatches it was made from
    #: (the list object and its ``Dispatches.version``): made again when the list is
    #: replaced or changed. A copy of the trace with another header
    #: (mpl.sim.tracemodel.with_model) shares it.
    derived: dict = field(default_factory=dict, compare=False, repr=False)

    def __setattr__(self, name, value):
        if name == "dispatches" and type(value) is list:    # a plain list: counted from now on
            value = Dispatches(value)
        object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.dispatches)

    def __iter__(self):
        return iter(self.dispatches)

    @property
    def num_steps(self) -> int:
        return steps_and_tokens(self.dispatches)[0]


def steps_and_tokens(dispatches: Iterable[Dispatch]) -> tuple[int, int]:
    """Distinct steps, and tokens decoded (per step: its widest dispatch)."""
    counted = getattr(dispatches, "steps_and_tokens", None)   # mpl.tracecols.LazyDispatches
    if counted is not None:
        return counted()
    per: dict[int, int] = {}
    get = per.get
    for d in dispatches:
        t = len(d.experts)
        s = d.step
        if t == 1:          # most dispatches decode one token: a step seen is enough
            if s not in per:
                per[s] = 1
        elif get(s, 0) < t:
            per[s] = t
    return len(per), sum(per.values())


def _flat(d: Dispatch):
    if d.tokens == 1:
        return d.experts[0], (d.weights[0] if d.weights is not None else None)
    ex = [e for row in d.experts for e in row]
    ws = [w for row in d.weights for w in row] if d.weights is not None else None
    return ex, ws


def records_of(dispatches: Iterable[Dispatch]):
    """The records a compiled module's ``replay_records`` takes, one per dispatch:
    (layer, experts, weights, tokens, step, predictions, tokens_of)."""
    for d in dispatches:
        ex = d.experts
        if len(ex) == 1:
            ws = d.weights
            yield (d.layer, ex[0], ws[0] if ws is not None else None, 1, d.step,
                   d.predictions, None)
        else:
            fe, fw = _flat(d)
            yield (d.layer, fe, fw, d.tokens, d.step, d.predictions, tokens_of(d))


def record_list(dispatches) -> list:
    """``list(records_of(dispatches))``; a lazily read trace's dispatches (mpl.tracecols)
    build them from their columns, without a Dispatch object each."""
    make = getattr(dispatches, "records", None)
    return make() if make is not None else list(records_of(dispatches))


def has_predictions(dispatches) -> bool:
    """Whether any dispatch carries speculative predictions (a lazily read trace's columns
    tell without building its dispatches)."""
    ask = getattr(dispatches, "has_predictions", None)
    return ask() if ask is not None else any(d.predictions for d in dispatches)


def has_weights(dispatches) -> bool:
    """Whether any dispatch carries router weights (a lazily read trace's columns tell)."""
    ask = getattr(dispatches, "has_weights", None)
    return ask() if ask is not None else any(d.weights is not None for d in dispatches)


def tokens_of(d: Dispatch) -> dict | None:
    """Per expert, how many of the dispatch's tokens selected it (None for one token)."""
    if d.tokens == 1:
        return None
    c: dict[int, int] = {}
    for row in d.experts:
        for e in set(row):
            c[e] = c.get(e, 0) + 1
    return c
