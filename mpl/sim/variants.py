"""Variants of a policy's text: set, add or remove parameters by editing the source through
its AST spans (comments and layout elsewhere are kept). Used by ``replay --capacity``, sweeps
and the tuner; the result is checked again by the checker when it is loaded.
"""

from __future__ import annotations

from typing import Any, Mapping

from mpl import schema
from mpl.syntax import parse
from mpl.syntax import ast


class VariantError(ValueError):
    """A variant cannot be made; for a bad value (:func:`check_override`), ``key``, ``reason``
    (the message without the parameter) and ``code`` (the checker's diagnostic code, None
    when the text is not one value at all) say why."""

    def __init__(self, message: str, *, key: str | None = None, reason: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.key, self.reason, self.code = key, reason or message, code


def render(value: Any) -> str:
    """A Python value as .moe text (``"lfu|lru"`` -> ``lfu | lru``)."""
    if isinstance(value, str):
        if "|" in value:
            a, b = (x.strip() for x in value.split("|", 1))
            return f"{a} | {b}"
        return value
    return schema.format_value(value)


#: a memory tier's parameter as an override names it: ``tier.NAME.PARAM`` (``tier.hot.capacity``)
TIER_PREFIX = "tier."


def tier_key(key: str) -> tuple[str, str] | None:
    """``(tier name, parameter)`` of a ``tier.NAME.PARAM`` key, None for another key."""
    if not key.startswith(TIER_PREFIX) or key.count(".") != 2:
        return None
    _, name, param = key.split(".")
    return name, param


def _check_tier_override(key: str, name: str, param: str, value: Any) -> str:
    """:func:`check_override` of a tier's parameter (``tier.NAME.PARAM``)."""
    p = schema.NESTED_PARAMS.get(f"tier.{param}")
    if p is None or not name.isidentifier() or name.startswith("<"):
        known = ", ".join(k.split(".", 1)[1] for k in schema.NESTED_PARAMS if k.startswith("tier."))
        raise VariantError(f"'{key}': write tier.NAME.PARAM with a tier's name and one of its "
                           f"parameters ({known})", key=key)
    head = f"policy _ {{\n  hierarchy {{\n    tier {name} {{ {param} = "

    def value_of(blk):
        sec = blk.items[0] if isinstance(blk, ast.Block) and len(blk.items) == 1 else None
        item = sec.items[0] if isinstance(sec, ast.Section) and len(sec.items) == 1 else None
        ok = isinstance(item, ast.Param) and item.name.text == param and sec.label == name
        return item.value if ok else None
    return _one_value(key, p, value, head, " }\n  }\n}\n", value_of)


def check_override(key: str, value: Any) -> str:
    """The .moe text of ``value`` for parameter ``key`` ("block.name"), once the parser and
    the checker agree that it is exactly one value of that parameter: the text is parsed as
    ``key``'s value in a policy of its own (it must be one value expression spanning all of
    it: no second parameter, no comment, no brace; a string cannot smuggle anything in) and
    the value is checked against the schema (type, range, unit, enum) by the checker's own
    value rules. VariantError, naming the parameter, otherwise."""
    tk = tier_key(key)
    if tk is not None:
        return _check_tier_override(key, *tk, value)
    if key not in schema.PARAMS:
        raise VariantError(f"unknown parameter '{key}' (write block.name, e.g. cache.eviction, "
                           f"or tier.NAME.PARAM for a memory tier's)")
    p = schema.PARAMS[key]
    head = f"policy _ {{\n  {p.block} {{\n    {p.name} = "

    def value_of(blk):
        item = blk.items[0] if isinstance(blk, ast.Block) and len(blk.items) == 1 else None
        ok = isinstance(item, ast.Param) and item.name.text == p.name and blk.name.text == p.block
        return item.value if ok else None
    return _one_value(key, p, value, head, "\n  }\n}\n", value_of)


def _one_value(key: str, p, value: Any, head: str, tail: str, value_of) -> str:
    """``value`` rendered, parsed between ``head`` and ``tail`` (a policy of one block), and
    accepted only when ``value_of(block)`` finds it as one value expression spanning all of
    the text and the checker's value rules pass it (:func:`check_override`)."""
    from mpl.checker.common import Sink
    from mpl.checker.values import check_expr

    text = render(value).strip(" \t")
    src = f"{head}{text}{tail}"
    res = parse(src)
    doc = res.document
    pol = doc.items[0] if len(doc.items) == 1 else None
    blk = pol.blocks[0] if isinstance(pol, ast.Policy) and len(pol.blocks) == 1 else None
    expr = value_of(blk) if blk is not None else None
    if (not text or res.diagnostics or doc.comments or expr is None
            or expr.span.offset != len(head) or expr.span.end_offset != len(head) + len(text)):
        reason = (f"not a single value of this parameter; expected "
                  f"{schema.TYPE_DOCS.get(p.type, p.type)}"
                  + (f" ({', '.join(p.enum_names())})" if p.enum else ""))
        raise VariantError(f"{key} = {_shown(text)}: {reason}", key=key, reason=reason)
    sink = Sink(None, src)
    check_expr(sink, p, expr)
    errors = [d for d in sink.diags if d.is_error]
    if errors:
        raise VariantError(f"{key} = {_shown(text)}: {errors[0].message}", key=key,
                           reason=errors[0].message, code=errors[0].code)
    return text


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _find_policy(doc: ast.Document, name: str | None) -> ast.Policy:
    pols = [p for p in doc.policies if p.name is not None]
    if name is not None:
        for p in pols:
            if p.name.text == name:
                return p
        raise VariantError(f"no policy named '{name}'")
    if not pols:
        raise VariantError("the text defines no policy")
    return pols[-1]


def _set_tier(text: str, pol: ast.Policy, name: str, params: dict, edits: list,
              new_blocks: dict) -> None:
    """Set ``params`` (param -> value text; None removes it) of every tier item named
    ``name`` the policy writes (in its hierarchy and its bands); a policy that writes none
    (it inherits the tier) gets one in its hierarchy block, which overrides the parent's by
    name."""
    found = False
    for bname in ("hierarchy", "per_layer_hierarchy"):
        blk = pol.block(bname)
        if blk is None:
            continue
        sections = [x for x in blk.items if isinstance(x, ast.Section)]
        if bname == "per_layer_hierarchy":
            sections = [x for band in sections for x in band.items if isinstance(x, ast.Section)]
        for sec in sections:
            if sec.kind.text != "tier" or sec.label != name:
                continue
            found = True
            added = []
            for param, value in params.items():
                item = next((x for x in sec.items
                             if isinstance(x, ast.Param) and x.name.text == param), None)
                if item is not None:
                    if value is None:
                        edits.append((item.span.offset, item.span.end_offset, ""))
                    else:
                        start = item.value.span.offset if item.value is not None else item.span.end_offset
                        edits.append((start, item.span.end_offset, value))
                elif value is not None:
                    added.append(f"{param} = {value}")
            if added:
                close = sec.span.end_offset - 1
                if text[close:close + 1] != "}":
                    raise VariantError(f"tier '{name}' is not closed")
                edits.append((close, close, f" {'  '.join(added)} "))
    given = [f"{k} = {v}" for k, v in params.items() if v is not None]
    if found or not given:
        return
    blk = pol.block("hierarchy")
    item = f"tier {name} {{ {'  '.join(given)} }}"
    if blk is None:
        new_blocks.setdefault("hierarchy", []).append(item)
        return
    close = blk.span.end_offset - 1
    if text[close:close + 1] != "}":
        raise VariantError("block 'hierarchy' is not closed")
    edits.append((close, close, f"  {item}\n  "))


def _alternatives(key: str) -> list[str]:
    """The parameters that stand instead of ``key`` (``Param.instead``), or that ``key``
    stands instead of."""
    p = schema.PARAMS[key]
    out = [p.instead] if p.instead else []
    out += [k for k, q in schema.PARAMS.items() if q.instead == key]
    return out


def set_params(text: str, overrides: Mapping[str, Any], policy: str | None = None) -> str:
    """``text`` with ``overrides`` ("block.param" -> value; None removes the parameter)
    applied to ``policy`` (default: the last policy of the file). Every value is checked by
    :func:`check_override` before the text is touched."""
    doc = parse(text).document
    pol = _find_policy(doc, policy)
    edits: list[tuple[int, int, str]] = []
    new_blocks: dict[str, list[str]] = {}
    values = {key: None if value is None else check_override(key, value)
              for key, value in overrides.items()}
    for key, value in list(values.items()):
        # two parameters that give one thing (cache.capacity, or capacity_factor instead of
        # it: MPL329): setting one removes the other the policy writes
        if value is not None and tier_key(key) is None:
            for other in _alternatives(key):
                values.setdefault(other, None)
    by_tier: dict[str, dict] = {}
    for key in [k for k in values if tier_key(k) is not None]:
        name, param = tier_key(key)
        by_tier.setdefault(name, {})[param] = values.pop(key)
    for name, params in by_tier.items():
        _set_tier(text, pol, name, params, edits, new_blocks)
    for key, value in values.items():
        bname, pname = key.split(".", 1)
        blk = pol.block(bname)
        if blk is None:
            if value is not None:
                new_blocks.setdefault(bname, []).append(f"{pname} = {value}")
            continue
        param = next((p for p in blk.params if p.name.text == pname), None)
        if param is not None:
            if value is None:
                edits.append((param.span.offset, param.span.end_offset, ""))
            else:
                start = param.value.span.offset if param.value is not None else param.span.end_offset
                edits.append((start, param.span.end_offset, value))
        elif value is not None:
            close = blk.span.end_offset - 1
            if not text[close:close + 1] == "}":
                raise VariantError(f"block '{bname}' is not closed")
            edits.append((close, close, f"  {pname} = {value}\n  "))
    if new_blocks:
        close = pol.span.end_offset - 1
        if text[close:close + 1] != "}":
            raise VariantError("the policy is not closed")
        body = "".join(f"  {b} {{ {'  '.join(ps)} }}\n" for b, ps in new_blocks.items())
        edits.append((close, close, "\n" + body))
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
