"""Folding ranges: policies, blocks, nested items (tiers, bands, transitions) and adapt rules
(from the AST), runs of comment lines and runs of imports."""

from __future__ import annotations

from lsprotocol import types

from mpl.syntax import ast

from . import analysis
from .guard import guarded


def folding_ranges(store, doc) -> list[types.FoldingRange]:
    tree = analysis.document(store, doc)
    out: list[types.FoldingRange] = []
    seen: set[tuple[int, int]] = set()

    def add(start_line: int, end_line: int, kind=None) -> None:
        if end_line > start_line and (start_line, end_line) not in seen:
            seen.add((start_line, end_line))
            out.append(types.FoldingRange(start_line=start_line, end_line=end_line, kind=kind))

    def node(n, closed: bool) -> None:
        s, e = n.span.line - 1, n.span.end_line - 1
        # keep the closing brace visible: fold up to the line before it
        add(s, e - 1 if closed and e > s + 1 else e)

    for pol in tree.policies:
        node(pol, pol.closed)
        todo = [b for b in pol.blocks if isinstance(b, ast.Block)]
        while todo:                      # blocks, nested items (tiers, bands, ...), rules
            b = todo.pop()
            node(b, b.closed)
            for r in b.rules:
                node(r, r.closed)
            todo.extend(b.sections)
    for group, kind in ((tree.comments, types.FoldingRangeKind.Comment),
                        (tree.imports, types.FoldingRangeKind.Imports)):
        run_start = prev = None
        for c in group:
            line = c.span.line - 1
            if prev is not None and line == prev + 1:
                prev = line
                continue
            if run_start is not None:
                add(run_start, prev, kind)
            run_start = prev = line
        if run_start is not None:
            add(run_start, prev, kind)
    out.sort(key=lambda r: (r.start_line, -r.end_line))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
    @guarded(default=list)
    def folding(ls, params: types.FoldingRangeParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else folding_ranges(ls.store, doc)
