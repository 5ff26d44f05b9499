"""Hover: the schema's doc, type, range and default of the block, parameter, enum value,
metric or unit under the cursor, and the effective value in this policy (after ``extends``
and defaults, from the lowered IR)."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema

from . import analysis, context, render
from .guard import guarded
from .tokens import token_at


def _effective(ls, doc, policy: str | None, key: str) -> str:
    """The value ``key`` has in ``policy`` after extends and defaults, and where it comes
    from. From the IR when the policy has no errors; otherwise from the checker's resolved
    policy (what is written, after extends), when that value is itself valid."""
    if not policy:
        return ""
    from mpl.checker.common import INVALID

    p = schema.PARAMS.get(key)
    ir = analysis.policy_ir(ls.store, doc, policy)
    rp = analysis.resolved_policy(ls.store, doc, policy)
    setting = getattr(rp, "settings", {}).get(key) if rp is not None else None
    if setting is None:
        origin = "default"
    elif setting.policy != policy:
        origin = f"inherited from `{setting.policy}`"
    else:
        origin = "set in this policy"
    if setting is not None and setting.conditional:
        origin += "; conditional (adapts at runtime)"
    if ir is not None and key in ir.values:
        value = render.ir_value(ir.values[key], p)
    elif rp is None:
        return f"\n\n_Effective value in `{policy}`: not available (the policy could not be resolved)._"
    elif setting is None:
        value = p.default_text() if p is not None else "?"
    elif setting.base is INVALID or setting.base is None:
        return (f"\n\n_Effective value in `{policy}`: not available while the value has errors "
                f"({origin})._")
    else:
        value = render.ir_value(setting.base, p)
        origin += "; the policy has errors elsewhere"
    return f"\n\n**Effective value in `{policy}`**: `{value}` ({origin})"


def hover_markdown(ls, doc, offset: int) -> tuple[str, int, int] | None:
    tokens = doc.tokens
    i = token_at(tokens, offset)
    if i is None:
        return None
    tok = tokens[i]
    info = context.scanner_upto(tokens, i + 1, doc.checkpoints).info(i)
    role, text = info.role, tok.text
    md = None
    if role == context.BLOCK:
        b = schema.block(text)
        md = render.block_markdown(b) if b else None
    elif role in (context.PARAM, context.TARGET):
        key = info.param if info.param in schema.PARAMS else None
        if key:
            p = schema.PARAMS[key]
            md = render.param_markdown(p)
            if role == context.TARGET and text in p.aliases:
                md = f"`{text}` is an alias of `{key}`.\n\n" + md
            md += _effective(ls, doc, info.policy, key)
    elif role in (context.VALUE,):
        p = schema.PARAMS.get(info.param) if info.param else None
        e = p.enum_value(text) if p is not None else None
        if e is not None:
            md = render.enum_markdown(p, e)
        elif text in schema.METRICS:
            md = render.metric_markdown(schema.METRICS[text])
    elif role == context.METRIC:
        m = schema.METRICS.get(text)
        md = render.metric_markdown(m) if m else None
    elif role == context.UNIT:
        u = schema.UNITS.get(text)
        md = render.unit_markdown(u) if u else None
    elif role == context.TRIGGER and text in schema.TRIGGERS:
        md = render.trigger_markdown(text)
    elif role in (context.POLICY_DEF, context.POLICY_REF):
        md = _policy_markdown(ls, doc, text)
    if not md:
        return None
    return md, tok.start, tok.end


def _policy_markdown(ls, doc, name: str) -> str | None:
    ir = analysis.policy_ir(ls.store, doc, name)
    if ir is None:
        return f"**policy {name}**"
    head = f"**policy {name}**" + (f" extends `{ir.parent}`" if ir.parent else "")
    blocks = ", ".join(b for b in schema.BLOCK_ORDER if b in ir.blocks)
    lines = [head, "", f"blocks: {blocks}" if blocks else "no blocks"]
    cap = ir.values.get("cache.capacity")
    if cap is not None:
        lines.append(f"capacity: `{render.ir_value(cap, schema.PARAMS['cache.capacity'])}`, "
                     f"eviction: `{render.ir_value(ir.values.get('cache.eviction'))}`")
    if ir.adapt:
        lines.append(f"{len(ir.adapt)} adapt rule(s)")
    return "\n".join(lines)


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @guarded()
    def hover(ls, params: types.HoverParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return None
        idx = doc.index(ls.encoding)
        found = hover_markdown(ls, doc, idx.offset(params.position))
        if found is None:
            return None
        md, start, end = found
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=md),
                           range=idx.range(start, end))
