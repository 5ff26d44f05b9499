"""Formatting: the same formatter as ``mplc fmt`` (:func:`mpl.fmt.format_text`). A file with
syntax errors gets no edit, and the user is told why (window/showMessage, once per error:
format-on-save does not repeat it on every save). The edit is the smallest single replacement that turns the
buffer into the formatted text (so the cursor and undo history move as little as possible)."""

from __future__ import annotations

import os

from lsprotocol import types

from .guard import guarded, log


def minimal_edit(old: str, new: str) -> tuple[int, int, str] | None:
    """(start, end, replacement) in ``old`` code-point offsets, or None when equal. Neither
    end lies inside a CRLF of ``old``: no LSP position can (a client reads one there as the end
    of the line, before the '\r')."""
    if old == new:
        return None
    n = min(len(old), len(new))
    p = 0
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    if _inside_crlf(old, p):
        p -= 1
    if _inside_crlf(old, len(old) - s):
        s -= 1
    return p, len(old) - s, new[p:len(new) - s]


def _inside_crlf(text: str, i: int) -> bool:
    return 0 < i < len(text) and text[i - 1] == "\r" and text[i] == "\n"


def format_edits(ls, doc) -> list[types.TextEdit]:
    try:
        from mpl.fmt import FormatError, format_text
    except ImportError as e:
        log(ls, f"mpl-lsp: formatting unavailable: {e}", types.MessageType.Warning)
        return []
    try:
        new = format_text(doc.text)
    except FormatError as e:
        log(ls, f"mpl-lsp: not formatting {doc.uri}: {e}", types.MessageType.Info)
        _notify_refused(ls, doc, e)
        return []
    ls.format_notices.pop(doc.uri, None)
    edit = minimal_edit(doc.text, new)
    if edit is None:
        return []
    start, end, text = edit
    return [types.TextEdit(range=doc.index(ls.encoding).range(start, end), new_text=text)]


def refused_message(doc, error) -> str:
    """What the user reads when Format Document is refused."""
    name = os.path.basename(doc.path) if doc.path else doc.uri
    errors = [d for d in error.diagnostics if d.is_error]
    first = errors[0] if errors else None
    where = f" (line {first.span.line}: {first.message})" if first is not None else ""
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return (f"MoE-PolicyLang: {name} was not formatted: it has syntax errors{where}{more}. "
            "Fix them (see the Problems panel), then format again.")


def _notify_refused(ls, doc, error) -> None:
    message = refused_message(doc, error)
    if ls.format_notices.get(doc.uri) == message:
        return
    ls.format_notices[doc.uri] = message
    try:
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
    except Exception:   # the transport is gone
        pass


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    @guarded(default=list)
    def formatting(ls, params: types.DocumentFormattingParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else format_edits(ls, doc)
