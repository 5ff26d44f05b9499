"""Markdown and value rendering shared by hover, completion and inlay hints. All text comes
from :mod:`mpl.schema`; nothing here spells a parameter name, default or range."""

from __future__ import annotations

from mpl import schema
from mpl.ir import Count, Size


def _num(x) -> str:
    return schema.format_value(float(x)) if isinstance(x, float) else str(x)


def format_size(nbytes: int) -> str:
    for unit, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if nbytes >= f and nbytes % f == 0:
            return f"{nbytes // f}{unit}"
    if nbytes >= 2 ** 30:
        return f"{nbytes / 2 ** 30:.3g}GiB"
    return f"{nbytes}B"


def ir_value(v, param: schema.Param | None = None) -> str:
    """A lowered IR value written the way a .moe file would write it."""
    if v is None:
        if param is not None and param.default in (schema.OFF, schema.DERIVED):
            return param.default_text()
        return "off"
    if isinstance(v, Size):
        return format_size(v.bytes)
    if isinstance(v, Count):
        unit = "" if param is not None and param.unit == v.unit and len(param.units) <= 1 else f" {v.unit}"
        return f"{v.n}{unit}"
    if isinstance(v, str) and "|" in v:
        return " | ".join(v.split("|"))
    weights = getattr(v, "weights", None)            # mpl.ir.WeightedSum
    if weights is not None:
        return (f"{schema.WEIGHTED_SUM}("
                + ", ".join(f"{r} = {schema.format_value(w)}" for r, w in weights) + ")")
    return schema.format_value(v)


def param_markdown(p: schema.Param, *, header: bool = True) -> str:
    lines = []
    if header:
        lines.append(f"**{p.key}** — parameter of `{p.block}`")
        lines.append("")
    lines.append(p.doc)
    lines.append("")
    lines.append(f"- type: {schema.TYPE_DOCS.get(p.type, p.type)}")
    rng = p.range_text()
    if rng and not p.enum:
        lines.append(f"- range: {rng}")
    if p.min_ref:
        lines.append(f"- at least: `{p.min_ref}`")
    if p.max_ref:
        lines.append(f"- at most: `{p.max_ref}`")
    lines.append(f"- default: `{p.default_text()}`")
    if p.unit:
        lines.append(f"- unit: {p.unit}")
    if p.units:
        lines.append(f"- units accepted: {', '.join(p.units)}")
    if p.enum:
        lines.append("- values:")
        for e in p.enum:
            extra = " (replay only)" if e.replay_only else ""
            lines.append(f"  - `{e.name}`{extra}: {e.doc}")
    if p.fallback:
        lines.append("- accepts a segmented form `a | b`")
    if p.conditional:
        lines.append("- may be conditional (`a : b when METRIC OP N`) and set by adapt rules")
    if p.aliases:
        lines.append(f"- adapt-action aliases: {', '.join(p.aliases)}")
    if p.only_with:
        other, vals = p.only_with
        what = "is set" if vals == (schema.SET,) else "is " + " or ".join(vals)
        lines.append(f"- only has an effect when `{other}` {what}")
    return "\n".join(lines)


def block_markdown(b: schema.Block) -> str:
    lines = [f"**{b.name}** block", "", b.doc, ""]
    if b.required:
        lines.append("Required in every policy (directly or through `extends`), unless the "
                     "policy has memory tiers instead.")
    if b.dependency:
        lines.append(f"Needs a `{b.dependency}` block.")
    if b.instead_of:
        lines.append(f"Instead of the `{b.instead_of}` block; not with "
                     + " or ".join(f"`{x}`" for x in b.excludes) + ".")
    if b.sections:
        lines.append("Holds: " + ", ".join(f"`{schema.SECTIONS[k].syntax}`" for k in b.sections))
    if b.params:
        lines.append("Parameters:")
        for p in b.params:
            lines.append(f"- `{p.name}` = `{p.default_text()}` — {p.doc}")
    if b.rules:
        lines.append("Rules: `when METRIC OP NUMBER [for N accesses] { NAME = value | trigger NAME | rebalance NAME }`")
        lines.append("Metrics: " + ", ".join(f"`{m}`" for m in schema.METRICS))
    return "\n".join(lines)


def metric_markdown(m: schema.Metric) -> str:
    hi = "unbounded" if m.max is None else _num(m.max)
    unit = f" ({m.unit})" if m.unit else ""
    return f"**{m.name}** — metric{unit}\n\n{m.doc}\n\n- range: {_num(m.min)} .. {hi}"


def unit_markdown(u: schema.Unit) -> str:
    return f"**{u.name}** — {u.kind} unit\n\n{u.doc}"


def enum_markdown(p: schema.Param, e: schema.EnumValue) -> str:
    extra = "\n\nAllowed in trace replay only (refused when attached to a live model)." if e.replay_only else ""
    return f"**{e.name}** — value of `{p.key}`\n\n{e.doc}{extra}"


def trigger_markdown(name: str) -> str:
    return f"**trigger {name}**\n\n{schema.TRIGGERS[name]}"


def section_markdown(x: schema.Section) -> str:
    """A nested item kind (``tier``, ``on``, ``band``)."""
    lines = [f"**{x.kind}** — `{x.syntax}`", "", x.doc, ""]
    lines.append("In " + " or ".join(f"`{p}`" for p in x.parents) + ".")
    if x.selector is not None:
        lines.append(f"Head: `{x.selector.name}` — {x.selector.doc}")
    if x.events:
        lines.append("Events:")
        lines += [f"- `{e.name}`: {e.doc}" for e in x.events]
    if x.params:
        lines.append("Parameters:")
        lines += [f"- `{p.name}` = `{p.default_text()}` — {p.doc}" for p in x.params]
    if x.sections:
        lines.append("Holds: " + ", ".join(f"`{schema.SECTIONS[k].syntax}`" for k in x.sections))
    return "\n".join(lines)


def event_markdown(x: schema.Section, e: schema.EnumValue) -> str:
    return f"**{e.name}** — transition\n\n{e.doc}"


def tier_markdown(tier, position: int, count: int, where: str) -> str:
    """A resolved tier (:class:`mpl.ir.Tier`): where it is and what it holds."""
    from mpl.ir import Size
    cap = tier.capacity
    if cap is None:
        held = "every expert"
    elif isinstance(cap, Size):
        held = format_size(cap.bytes)
    else:
        held = f"{cap} slots"
    precision = tier.dtype or "the checkpoint's precision"
    if tier.dtype_ladder:
        precision = " > ".join(tier.dtype_ladder)
    lines = [f"**tier {tier.name}** — tier {position} of {count} in {where}", "",
             f"- location: `{tier.location}`", f"- precision: {precision}", f"- holds: {held}",
             f"- residency: `{tier.residency}`"]
    if tier.eviction is not None:
        lines.append(f"- eviction: `{ir_value(tier.eviction)}`")
    if tier.path is not None:
        lines.append(f"- path: `{tier.path}`")
    return "\n".join(lines)
