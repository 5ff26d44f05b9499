"""Formatting: the same formatter as ``mplc fmt`` (:func:`mpl.fmt.format_text`). A file with
syntax errors gets no edit. The edit is the smallest single replacement that turns the
buffer into the formatted text (so the cursor and undo history move as little as possible)."""

from __future__ import annotations

from lsprotocol import types

from .guard import guarded, log


def minimal_edit(old: str, new: str) -> tuple[int, int, str] | None:
    """(start, end, replacement) in ``old`` code-point offsets, or None when equal."""
    if old == new:
        return None
    n = min(len(old), len(new))
    p = 0
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    return p, len(old) - s, new[p:len(new) - s]


def format_edits(ls, doc) -> list[types.TextEdit]:
    try:
        from mpl.fmt import FormatError, format_text
    except ImportError as e:
        log(ls, f"mpl-lsp: formatting unavailable: {e}", types.MessageType.Warning)
        return []
    try:
        new = format_text(doc.text)
    except FormatError:
        log(ls, f"mpl-lsp: not formatting {doc.uri}: it has syntax errors", types.MessageType.Info)
        return []
    edit = minimal_edit(doc.text, new)
    if edit is None:
        return []
    start, end, text = edit
    return [types.TextEdit(range=doc.index(ls.encoding).range(start, end), new_text=text)]


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    @guarded(default=list)
    def formatting(ls, params: types.DocumentFormattingParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else format_edits(ls, doc)
