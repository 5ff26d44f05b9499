"""Helpers shared by the parser tests."""

import dataclasses
import re

from mpl.syntax import ast


def line_starts(text: str) -> list[int]:
    """Offset of every line of ``text``; lines end at '\n', '\r\n' and a lone '\r', as the
    LSP specification says (an implementation of the tests' own, to check the product's)."""
    return [0, *(m.end() for m in re.finditer(r"\r\n?|\n", text))]


def dump(n, spans=True):
    """A node as nested plain data (for equality), optionally without spans."""
    if isinstance(n, list):
        return [dump(x, spans) for x in n]
    if isinstance(n, ast.Node):
        return (type(n).__name__, {f.name: dump(getattr(n, f.name), spans)
                                   for f in dataclasses.fields(n)
                                   if f.name not in ("text", "path") or not isinstance(n, ast.Document)
                                   if spans or f.name != "span"})
    return n
