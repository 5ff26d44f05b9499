"""Hover: the schema's doc, type, range and default of the block, parameter, enum value,
metric or unit under the cursor, and the effective value in this policy (after ``extends``
and defaults, from the lowered IR). The text is :mod:`lsp.hover_text`'s (protocol-free, so
the browser playground shows the same); this module serves it over LSP."""

from __future__ import annotations

from lsprotocol import types

from . import analysis
from .guard import guarded
from .hover_text import hover_markdown as _markdown


def hover_markdown(ls, doc, offset: int) -> tuple[str, int, int] | None:
    """(markdown, start, end) of the token at ``offset`` in an open document."""
    return _markdown(doc.tokens, offset, lambda: analysis.analyze(ls.store, doc), doc.checkpoints)


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
