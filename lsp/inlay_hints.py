"""Inlay hints: the defaults that apply to parameters a block leaves unset (only those with
an effect under this configuration), and the per-layer capacities a ``per_layer`` block
implies for the model shape from the settings."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema
from mpl.ir import Size
from mpl.syntax import ast

from . import analysis, render
from .guard import guarded
from .tokens import PUNCT, tokens_before


def _has_effect(p: schema.Param, values) -> bool:
    if p.only_with is None:
        return True
    other, allowed = p.only_with
    v = values.get(other)
    if allowed == (schema.SET,):
        return v is not None
    if isinstance(v, str) and "|" in v:      # segmented eviction: either side counts
        return any(x in allowed for x in v.split("|")) or "fallback" in allowed
    return v in allowed


def _brace_after(doc, offset: int) -> int | None:
    """End of the first '{' at or after ``offset`` (None when a '}' comes first)."""
    tokens = doc.tokens
    for j in range(tokens_before(tokens, offset), len(tokens)):
        t = tokens[j]
        if t.kind == PUNCT and t.text == "{":
            return t.end
        if t.kind == PUNCT and t.text == "}":
            return None
    return None


def per_layer_capacities(values, shape) -> list[int]:
    """Capacities of the MoE layers at the start (uniform split of the budget, clamped into
    [min_capacity, max_capacity]); entropy/frequency allocations rebalance from there."""
    layers = shape.num_moe_layers
    if layers <= 0:
        return []
    cap = values.get("cache.capacity")
    if isinstance(cap, Size):
        cap = max(1, cap.bytes // max(1, shape.expert_bytes))
    if not isinstance(cap, int):
        return []
    total = values.get("per_layer.total_budget") or layers * cap
    lo = values.get("per_layer.min_capacity") or 1
    hi = values.get("per_layer.max_capacity") or total
    base, rem = divmod(int(total), layers)
    return [max(lo, min(hi, base + (1 if i < rem else 0))) for i in range(layers)]


def inlay_hints(ls, doc, rng: types.Range) -> list[types.InlayHint]:
    st = ls.settings
    if not (st.hint_defaults or st.hint_per_layer):
        return []
    idx = doc.index(ls.encoding)
    lo, hi = idx.offset(rng.start), idx.offset(rng.end)
    tree = analysis.document(ls.store, doc)
    out: list[types.InlayHint] = []
    for pol in tree.policies:
        ps, pe = idx.span_offsets(pol.span)
        if pol.name is None or pe < lo or ps > hi:
            continue
        ir = analysis.policy_ir(ls.store, doc, pol.name.text)
        for b in pol.blocks:
            if not isinstance(b, ast.Block) or not (lo <= idx.span_offsets(b.span)[0] <= hi):
                continue
            sb = schema.block(b.name.text)
            at = _brace_after(doc, idx.span_offsets(b.name.span)[1])
            if sb is None or at is None:
                continue
            pos = idx.position(at)
            if st.hint_defaults and sb.params:
                written = {p.name.text for p in b.params}
                parts = []
                for p in sb.params:
                    if p.name in written or p.required:
                        continue
                    if ir is not None:
                        if not _has_effect(p, ir.values):
                            continue
                        val = render.ir_value(ir.values.get(p.key), p)
                    else:
                        if p.only_with is not None:
                            continue
                        val = p.default_text()
                    tip = types.MarkupContent(kind=types.MarkupKind.Markdown, value=render.param_markdown(p))
                    if parts:
                        parts.append(types.InlayHintLabelPart(value=", "))
                    parts.append(types.InlayHintLabelPart(value=f"{p.name} = {val}", tooltip=tip))
                if parts:
                    out.append(types.InlayHint(position=pos, label=parts, kind=types.InlayHintKind.Parameter,
                                               padding_left=True))
            if st.hint_per_layer and b.name.text == "per_layer" and ir is not None and ls.store.model is not None:
                shape = ls.store.model
                caps = per_layer_capacities(ir.values, shape)
                if caps:
                    alloc = ir.values.get("per_layer.allocation")
                    if min(caps) == max(caps):
                        label = f"{len(caps)} MoE layers × {caps[0]} slots = {sum(caps)} ({shape.name})"
                    else:
                        label = f"{len(caps)} MoE layers, {min(caps)}–{max(caps)} slots, {sum(caps)} total ({shape.name})"
                    how = "" if alloc == "uniform" else f"; `{alloc}` rebalances from this start"
                    tip = "\n".join(f"- layer {layer}: {c}" for layer, c in zip(shape.moe_layers, caps))
                    out.append(types.InlayHint(
                        position=pos, label=label, kind=types.InlayHintKind.Type, padding_left=True,
                        tooltip=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                    value=f"Per-layer capacities (uniform split{how}):\n\n{tip}")))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    @guarded(default=list)
    def hints(ls, params: types.InlayHintParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else inlay_hints(ls, doc, params.range)
