"""Per-layer frequency placement from a trace: the hottest experts of each MoE layer.

What KTransformers and Fiddler place from a profile: per layer, the experts the routing used
most, fixed on the device. :func:`place` counts the accesses of each key ``(layer, expert)``
(one per distinct expert of a dispatch, as the runtime counts them) and keeps, per MoE layer,
the ``slots`` most accessed experts (ties: the lower id; an expert never accessed is never
placed). :func:`to_moe` writes the result as the cache block's ``pin layers = a..b
{ experts = [...] }`` items, in the formatter's canonical layout, consecutive layers with the
same experts sharing one item. ``mplc trace place TRACE --slots N`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpl import schema

_PIN = schema.SECTIONS["pin"]
_LAYERS = _PIN.selector.name
_EXPERTS = _PIN.param_names()[0]


@dataclass(frozen=True)
class LayerPlacement:
    """The experts placed in one MoE layer (``layer``: its decoder-layer id, as pins and
    traces name it), hottest first, with their access counts."""
    layer: int
    experts: tuple[int, ...]
    accesses: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    slots: int
    layers: tuple[LayerPlacement, ...] = field(default_factory=tuple)
    dispatches: int = 0

    def by_layer(self) -> dict[int, tuple[int, ...]]:
        """Decoder-layer id -> the placed expert ids, in ascending order."""
        return {lp.layer: tuple(sorted(lp.experts)) for lp in self.layers}

    def to_dict(self) -> dict:
        return {"slots": self.slots, "dispatches": self.dispatches,
                "layers": [{"layer": lp.layer, "experts": list(lp.experts),
                            "accesses": list(lp.accesses)} for lp in self.layers]}


def place(trace, slots: int) -> Placement:
    """The ``slots`` most accessed experts of each MoE layer of ``trace`` (a
    :class:`mpl.trace.Trace`). ValueError for a ``slots`` below 1 or above the trace's
    experts per layer."""
    h = trace.header
    E, L = h.num_experts, h.num_moe_layers
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise ValueError(f"slots must be an integer, got {slots!r}")
    if not 1 <= slots <= E:
        raise ValueError(f"slots must be 1..{E} (the trace's experts per layer), got {slots}")
    from collections import Counter
    from itertools import chain, repeat
    from operator import add, mul, sub

    from mpl.sim.tracepack import pack_trace

    # the trace packed as a runtime replays it (each dispatch's distinct experts, made once
    # per trace and shared with its replays; a lazily read trace builds no Dispatch)
    pk = pack_trace(trace, E)
    n = len(pk)
    layers, offs, experts = pk.layers, pk.offs, pk.experts
    # every access's key layer * E + expert, counted in one pass (the iteration in C: each
    # dispatch's layer base repeated once per expert it names)
    sizes = map(sub, offs[1:n + 1], offs[:n])
    bases = chain.from_iterable(map(repeat, map(mul, layers[:n], repeat(E)), sizes))
    per = Counter(map(add, bases, experts[:offs[n]] if n else ()))
    counts = [[per.get(i * E + e, 0) for e in range(E)] for i in range(L)]
    out = []
    for i in range(L):
        row = counts[i]
        hot = sorted((e for e in range(E) if row[e] > 0), key=lambda e: (-row[e], e))[:slots]
        if hot:
            out.append(LayerPlacement(int(h.moe_layers[i]), tuple(hot), tuple(row[e] for e in hot)))
    return Placement(slots, tuple(out), n)


def to_moe(placement: Placement, indent: str = "") -> str:
    """The placement as ``pin layers = ...`` items of a cache block (canonical layout, each
    line prefixed by ``indent``); consecutive layers that place the same experts share one
    item."""
    groups: list[list] = []          # [first, last, experts]
    for layer, experts in sorted(placement.by_layer().items()):
        if groups and groups[-1][1] == layer - 1 and groups[-1][2] == experts:
            groups[-1][1] = layer
        else:
            groups.append([layer, layer, experts])
    lines = []
    for first, last, experts in groups:
        layers = str(first) if first == last else f"{first}..{last}"
        lines += [f"{indent}pin {_LAYERS} = {layers} {{",
                  f"{indent}    {_EXPERTS} = {schema.format_value(list(experts))}",
                  f"{indent}}}"]
    return "\n".join(lines) + ("\n" if lines else "")
