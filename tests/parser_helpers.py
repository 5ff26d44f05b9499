"""Helpers shared by the parser tests."""

import dataclasses

from mpl.syntax import ast


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
