"""Per-layer pins: the ``pin layers = FIRST..LAST { experts = [...] }`` items of the cache block.

``pin = [...]`` (a parameter, :data:`mpl.schema.PARAMS`) pins ids in every MoE layer; a
``pin`` item (:data:`mpl.schema.SECTIONS`) pins ids in the layers of its range, in addition.
Three steps, as for the other parts of a policy:

* :func:`check_item` checks one item a policy writes (its head, its parameters and values:
  MPL102, 104, 105, 113, 115, 2xx) into an :class:`OwnPins`, and :func:`finish_own` the items
  together (MPL330: two ranges that share a layer);
* :func:`inherit` applies ``extends``: the per-layer pins are one value of the policy, so a
  child that writes ``pin`` items replaces its parent's, and one that writes none keeps them
  (as a parameter);
* :func:`check_resolved` checks them against the capacity (MPL301, and MPL506 with a model)
  and the model's shape (MPL501, MPL521), and :func:`lower` gives the IR's
  :class:`mpl.ir.LayerPins`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpl import ir, schema
from mpl.checker import tiers as T
from mpl.checker import values as V
from mpl.checker.common import INVALID, Sink, did_you_mean, replace_fix
from mpl.diagnostics import Related, Span
from mpl.syntax import ast

SPEC = schema.SECTIONS["pin"]
_EXPERTS = SPEC.param_names()[0]           # the item's one parameter


@dataclass
class PinInfo:
    """One ``pin`` item as written: its layers (:class:`mpl.ir.Layers`, INVALID on errors)
    and expert ids (a tuple, INVALID on errors, None when missing)."""
    node: ast.Section
    file: str | None
    policy: str
    layers: Any = INVALID
    experts: Any = None

    @property
    def head_span(self) -> Span:
        return self.node.head.span if self.node.head is not None else self.node.kind.span

    def values_node(self) -> ast.ListValue | None:
        for item in self.node.items:
            if isinstance(item, ast.Param) and item.name.text == _EXPERTS and item.value is not None:
                v = item.value.value
                return v if isinstance(v, ast.ListValue) else None
        return None


@dataclass
class OwnPins:
    """The ``pin`` items of one policy (its own, or resolved through ``extends``)."""
    items: list[PinInfo] = field(default_factory=list)
    written: bool = False          # the policy writes pin items (they replace the parent's)
    damaged: bool = False          # an item could not be read (an error was reported)

    def broken(self) -> bool:
        """Whether an item cannot be lowered (its error was reported)."""
        return self.damaged or any(p.layers is INVALID or not isinstance(p.experts, tuple)
                                   for p in self.items)

    def valid(self) -> list[PinInfo]:
        return [p for p in self.items if p.layers is not INVALID and isinstance(p.experts, tuple)]


# ---------------------------------------------------------------- own text
def check_item(sink: Sink, sec: ast.Section, block: ast.Block, pname: str, own: OwnPins) -> None:
    """Check one ``pin`` item of ``block`` (the cache block of policy ``pname``) into ``own``."""
    own.written = True
    if not T._head_ok(sink, sec, SPEC):
        own.damaged = True
        return
    info = PinInfo(sec, sink.file, pname)
    info.layers = _layers(sink, sec.head)
    settings: dict = {}
    for item in sec.items:
        if isinstance(item, ast.Param):
            s = T._param(sink, SPEC, "a pin item", item, block, pname, settings)
            if s is not None:
                settings[item.name.text] = s
        elif isinstance(item, ast.Rule):
            when = sink.span(item.span.offset, min(item.span.offset + 4, item.span.end_offset))
            sink.emit("MPL113", "'when' rules belong in the adapt block, not in a pin item; "
                      "move this rule into 'adapt { ... }'", when)
        elif isinstance(item, ast.Section):
            T.misplaced(sink, item, "pin", ())
        else:
            own.damaged = True           # skipped text: reported by the parser
    s = settings.get(_EXPERTS)
    if s is not None:
        info.experts = s.base
    elif not T._syntax_damaged(sec):
        sink.emit("MPL105", f"this pin item has no '{_EXPERTS}'; add '{_EXPERTS} = [ID, ...]' "
                  f"(the experts pinned in its layers) or remove the item", info.head_span)
        info.experts = INVALID
    else:
        own.damaged = True
    if not sec.closed:
        own.damaged = True
    own.items.append(info)


def _layers(sink: Sink, head: ast.Param) -> Any:
    spec = SPEC.selector
    if head.name.text != spec.name:
        tail, s = did_you_mean(head.name.text, (spec.name,))
        fixes = (replace_fix(f"Replace '{head.name.text}' with '{s}'", head.name.span, s),) if s else ()
        sink.emit("MPL102", f"unknown parameter '{head.name.text}' in a pin item's head"
                  f"{tail or '; write pin ' + spec.name + ' = FIRST..LAST'}", head.name.span, fixes=fixes)
        return INVALID
    v = head.value.value if head.value is not None else None
    if isinstance(v, ast.Range) and v.end is None:
        return INVALID                    # `1..` alone: the parser reported it
    base, _, _ = V.check_expr(sink, spec, head.value)
    return base


def finish_own(sink: Sink, own: OwnPins) -> None:
    """MPL330: two items of one policy whose ranges share a layer."""
    items = sorted((p for p in own.items if isinstance(p.layers, ir.Layers)),
                   key=lambda p: (p.layers.first, p.layers.last, p.node.span.offset))
    widest = None            # the item reaching furthest so far
    bad = []
    for p in items:
        if widest is not None and p.layers.first <= widest.layers.last:
            a, b = widest.layers, p.layers
            lo, hi = b.first, min(a.last, b.last)
            both = f"layer {lo}" if lo == hi else f"layers {lo}..{hi}"
            first, later = sorted((widest, p), key=lambda x: x.node.span.offset)
            sink.emit("MPL330", f"pin layers = {later.layers} overlaps pin layers = {first.layers} "
                      f"({both} in both): give each layer's experts in one item",
                      later.head_span, related=(Related(f"pin layers = {first.layers} here",
                                                        first.head_span),))
            bad.append(later)
            if later is widest:
                widest = p
            continue
        if widest is None or p.layers.last > widest.layers.last:
            widest = p
    for p in bad:
        p.layers = INVALID


def inherit(parent: OwnPins | None, own: OwnPins) -> OwnPins:
    """The per-layer pins of a policy: its own items when it writes any, else its parent's."""
    if own.written or parent is None:
        return own
    return parent


# ---------------------------------------------------------------- the resolved policy
def layer_sets(pins: OwnPins, every: tuple) -> list[tuple[PinInfo, int]]:
    """Per valid item, the number of experts pinned in each of its layers (the item's ids
    with ``every``, the ids of ``pin``)."""
    return [(p, len(set(p.experts) | set(every))) for p in pins.valid()]


def check_resolved(rp, sink: Sink, *, model=None, values=None) -> None:
    """MPL301, MPL501, MPL506 and MPL521 for the per-layer pins of ``rp``."""
    pins: OwnPins | None = rp.pins
    if pins is None or not pins.items:
        return
    values = values or {}
    every = values.get("cache.pin")
    every = every if isinstance(every, tuple) else ()
    counted = layer_sets(pins, every)
    per_layer = schema.PER_LAYER_BLOCK in rp.blocks

    def place(p: PinInfo, code: str, message: str, span: Span | None = None) -> None:
        if p.policy == rp.name and p.file == rp.file:
            sink.emit(code, message, span or p.head_span)
        elif _own_changes(rp):       # inherited: wrong because of what this policy changes
            sink.emit(code, message, rp.node.name.span if rp.node.name is not None else rp.node.span,
                      related=(Related(f"inherited from '{p.policy}'", p.head_span,
                                       file=p.file if p.file != sink.file else None),))

    cap = values.get("cache.capacity")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) else None
    if per_layer:
        mn = values.get("per_layer.min_capacity")
        for p, n in counted:
            for limit, what in ((cap, "a layer's capacity"), (mn if isinstance(mn, int) else None,
                                                              "per_layer.min_capacity")):
                if limit is not None and n > limit:
                    place(p, "MPL301", f"{n} pinned experts in each of layers {p.layers} do not fit "
                          f"in {what} of {limit}; raise it to at least {n} or pin fewer experts")
                    break
    elif cap is not None and model is None:
        need = sum((p.layers.last - p.layers.first + 1) * n for p, n in counted)
        if need > cap:
            p = counted[-1][0]
            place(p, "MPL301", f"the pin items pin {need} experts over their layers, more than the "
                  f"shared cache's capacity {cap}; raise capacity to at least {need} or pin fewer experts")
    if model is None:
        return
    moe = set(model.moe_layers)
    for p in pins.valid():
        bad = [e for e in p.experts if e >= model.num_experts]
        if bad:
            lst = p.values_node()
            at = None
            if lst is not None:
                at = next((i.span for i in lst.items if isinstance(i, ast.Number) and i.value == bad[0]), None)
            place(p, "MPL501", f"expert {bad[0]} does not exist: {model.name} has {model.num_experts} "
                  f"experts per layer (ids 0..{model.num_experts - 1}); remove it from experts", at)
        outside = [x for x in range(p.layers.first, p.layers.last + 1) if x not in moe]
        if outside:
            dense = [x for x in outside if x < model.num_layers]
            what = (f"layer {outside[0]} is not one of {model.name}'s MoE layers"
                    + (" (it is a dense layer)" if outside[0] in dense else
                       f" (it has {model.num_layers} layers)"))
            place(p, "MPL521", f"pin layers = {p.layers}: {what}; its MoE layers are "
                  f"{_runs(sorted(moe))}")
    if not per_layer and cap is not None:
        by_layer = {x: len(every) for x in moe}
        for p, n in counted:
            for x in range(p.layers.first, p.layers.last + 1):
                if x in by_layer:
                    by_layer[x] = n
        need = sum(by_layer.values())
        if need > cap:
            place(counted[-1][0] if counted else pins.items[-1], "MPL506",
                  f"the experts pinned in {model.name}'s {len(moe)} MoE layers need {need} slots of "
                  f"the shared cache of {cap}; raise capacity to {need} or pin fewer experts")


def _own_changes(rp) -> bool:
    """Whether the policy sets cache or per_layer parameters itself (an inherited item may
    stop fitting because of them)."""
    return any(k.startswith(("cache.", "per_layer.")) for k in rp.own_keys)


def _runs(xs: list[int]) -> str:
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}..{xs[j]}")
        i = j + 1
    return ", ".join(out)


def lower(pins: OwnPins | None) -> tuple[ir.LayerPins, ...]:
    """The IR's per-layer pins, by first layer."""
    if pins is None:
        return ()
    out = [ir.LayerPins(p.layers, tuple(p.experts), source_line=p.node.span.line)
           for p in pins.valid()]
    return tuple(sorted(out, key=lambda x: x.layers.first))
