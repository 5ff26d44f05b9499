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
    pass


def render(value: Any) -> str:
    """A Python value as .moe text (``"lfu|lru"`` -> ``lfu | lru``)."""
    if isinstance(value, str):
        if "|" in value:
            a, b = (x.strip() for x in value.split("|", 1))
            return f"{a} | {b}"
        return value
    return schema.format_value(value)


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


def set_params(text: str, overrides: Mapping[str, Any], policy: str | None = None) -> str:
    """``text`` with ``overrides`` ("block.param" -> value; None removes the parameter)
    applied to ``policy`` (default: the last policy of the file)."""
    doc = parse(text).document
    pol = _find_policy(doc, policy)
    edits: list[tuple[int, int, str]] = []
    new_blocks: dict[str, list[str]] = {}
    for key, value in overrides.items():
        if key not in schema.PARAMS:
            raise VariantError(f"unknown parameter '{key}' (write block.name, e.g. cache.eviction)")
        bname, pname = key.split(".", 1)
        blk = pol.block(bname)
        if blk is None:
            if value is not None:
                new_blocks.setdefault(bname, []).append(f"{pname} = {render(value)}")
            continue
        param = next((p for p in blk.params if p.name.text == pname), None)
        if param is not None:
            if value is None:
                edits.append((param.span.offset, param.span.end_offset, ""))
            else:
                start = param.value.span.offset if param.value is not None else param.span.end_offset
                edits.append((start, param.span.end_offset, render(value)))
        elif value is not None:
            close = blk.span.end_offset - 1
            if not text[close:close + 1] == "}":
                raise VariantError(f"block '{bname}' is not closed")
            edits.append((close, close, f"  {pname} = {render(value)}\n  "))
    if new_blocks:
        close = pol.span.end_offset - 1
        if text[close:close + 1] != "}":
            raise VariantError("the policy is not closed")
        body = "".join(f"  {b} {{ {'  '.join(ps)} }}\n" for b, ps in new_blocks.items())
        edits.append((close, close, "\n" + body))
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
