"""Hover text without the protocol: the markdown for the token under a code-point offset
(the schema's doc, type, range and default of a block, parameter, enum value, metric, unit
or trigger, and the effective value in this policy after ``extends`` and defaults).

Only :mod:`mpl` (schema, checker results) and the forgiving token stream are used, no pygls
or lsprotocol: the language server's hover (:mod:`lsp.hover`) and the browser playground
(Pyodide, ``playground/``) show the same text."""

from __future__ import annotations

from typing import Callable

from mpl import schema

from . import context, render
from .tokens import Token, token_at, tokenize

#: () -> the checker's Analysis of the document (or None when it cannot be had); called
#: only when the hover needs an effective value or a policy summary
AnalysisFn = Callable[[], object]


def _ir(analysis: AnalysisFn, name: str | None):
    if not name:
        return None
    try:
        a = analysis()
    except Exception:
        return None
    return (getattr(a, "ir", None) or {}).get(name)


def _resolved(analysis: AnalysisFn, name: str | None):
    if not name:
        return None
    try:
        a = analysis()
    except Exception:
        return None
    return (getattr(a, "policies", None) or {}).get(name)


def effective(analysis: AnalysisFn, policy: str | None, key: str) -> str:
    """The value ``key`` has in ``policy`` after extends and defaults, and where it comes
    from. From the IR when the policy has no errors; otherwise from the checker's resolved
    policy (what is written, after extends), when that value is itself valid."""
    if not policy:
        return ""
    from mpl.checker.common import INVALID

    p = schema.PARAMS.get(key)
    if p is None:
        return ""                  # a memory tier's parameter: see the tier's hover
    ir = _ir(analysis, policy)
    rp = _resolved(analysis, policy)
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


def policy_markdown(analysis: AnalysisFn, name: str) -> str:
    ir = _ir(analysis, name)
    if ir is None:
        return f"**policy {name}**"
    head = f"**policy {name}**" + (f" extends `{ir.parent}`" if ir.parent else "")
    blocks = ", ".join(b for b in schema.BLOCK_ORDER if b in ir.blocks)
    lines = [head, "", f"blocks: {blocks}" if blocks else "no blocks"]
    if ir.hierarchy is not None:
        lines.append("tiers: " + ", ".join(f"`{t.name}`" for t in ir.hierarchy.tiers))
    if ir.bands:
        lines.append("bands: " + ", ".join(f"`{b.layers}`" for b in ir.bands))
    cap = ir.values.get("cache.capacity")
    if cap is not None:
        lines.append(f"capacity: `{render.ir_value(cap, schema.PARAMS['cache.capacity'])}`, "
                     f"eviction: `{render.ir_value(ir.values.get('cache.eviction'))}`")
    if ir.adapt:
        lines.append(f"{len(ir.adapt)} adapt rule(s)")
    return "\n".join(lines)


def _band_at(tokens: list[Token], i: int) -> tuple[int, int] | None:
    """The layers ``a..b`` (or ``n``) of the band whose items hold token ``i`` (None: not in a
    band)."""
    depth = 0
    for j in range(i - 1, -1, -1):
        t = tokens[j]
        if t.text == "}":
            depth += 1
        elif t.text == "{":
            if depth:
                depth -= 1
                continue
            # the head of the item this brace opens: `band layers = a..b {`
            k = j - 1
            nums = []
            while k >= 0 and tokens[k].text not in ("{", "}", "=") and len(nums) < 3:
                if tokens[k].kind == "number":
                    nums.append(tokens[k].text)
                k -= 1
            if k >= 2 and tokens[k].text == "=" and tokens[k - 2].text == "band" and nums:
                try:
                    vals = [int(float(x)) for x in nums]
                except ValueError:
                    return None
                return min(vals), max(vals)
    return None


def tier_hover(analysis: AnalysisFn, policy: str | None, name: str, tokens, i) -> str | None:
    """A tier's name: the tier as it takes effect (in its band, when inside one), from the IR;
    the bare name when the policy does not lower."""
    ir = _ir(analysis, policy)
    if ir is None:
        return f"**tier {name}**"
    band = _band_at(tokens, i)
    levels = []
    if band is not None:
        levels += [(b.hierarchy, f"band {b.layers}") for b in ir.bands
                   if (b.layers.first, b.layers.last) == band]
    if ir.hierarchy is not None:
        levels.append((ir.hierarchy, "the hierarchy"))
    levels += [(b.hierarchy, f"band {b.layers}") for b in ir.bands]
    for h, where in levels:
        for k, t in enumerate(h.tiers):
            if t.name == name:
                return render.tier_markdown(t, k + 1, len(h.tiers), where)
    return f"**tier {name}**"


def hover_markdown(tokens: list[Token], offset: int, analysis: AnalysisFn,
                   checkpoints: list[int] | None = None) -> tuple[str, int, int] | None:
    """(markdown, start, end) for the token touching code-point ``offset``, or None."""
    i = token_at(tokens, offset)
    if i is None:
        return None
    tok = tokens[i]
    info = context.scanner_upto(tokens, i + 1, checkpoints).info(i)
    role, text = info.role, tok.text
    md = None
    if role == context.BLOCK:
        b = schema.block(text)
        md = render.block_markdown(b) if b else None
    elif role in (context.PARAM, context.TARGET):
        key = info.param if schema.find(info.param or "") is not None else None
        if key:
            p = schema.find(key)
            md = render.param_markdown(p)
            if role == context.TARGET and text in p.aliases:
                md = f"`{text}` is an alias of `{key}`.\n\n" + md
            md += effective(analysis, info.policy, key)
    elif role in (context.VALUE,):
        p = schema.find(info.param) if info.param else None
        e = p.enum_value(text) if p is not None else None
        if e is not None:
            md = render.enum_markdown(p, e)
        elif p is not None and p.weighted and text == schema.WEIGHTED_SUM:
            md = f"**{schema.WEIGHTED_SUM}(...)** — value of `{p.key}`\n\n{schema.WEIGHTED_SUM_DOC}."
        elif text in schema.METRICS:
            md = render.metric_markdown(schema.METRICS[text])
    elif role == context.SECTION_R:
        x = schema.SECTIONS.get(text)
        md = render.section_markdown(x) if x else None
    elif role == context.EVENT_R:
        x = schema.SECTIONS.get(info.param or "")
        e = x.event(text) if x is not None else None
        md = render.event_markdown(x, e) if e is not None else None
    elif role in (context.LABEL_R, context.LABEL_REF):
        md = tier_hover(analysis, info.policy, text, tokens, i)
    elif role == context.METRIC:
        m = schema.METRICS.get(text)
        md = render.metric_markdown(m) if m else None
    elif role == context.UNIT:
        u = schema.UNITS.get(text)
        md = render.unit_markdown(u) if u else None
    elif role == context.TRIGGER and text in schema.TRIGGERS:
        md = render.trigger_markdown(text)
    elif role in (context.POLICY_DEF, context.POLICY_REF):
        md = policy_markdown(analysis, text)
    if not md:
        return None
    return md, tok.start, tok.end


def hover_text(text: str, offset: int, analysis: AnalysisFn) -> tuple[str, int, int] | None:
    """:func:`hover_markdown` for a whole text (tokenized here)."""
    toks = tokenize(text)
    return hover_markdown(toks, offset, analysis, context.checkpoints(toks))
