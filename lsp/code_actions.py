"""Code actions: each diagnostic's fix edits (did-you-mean, remove the duplicate, clamp into
range, ...) offered as quick fixes. The fixes are the checker's, as ``mplc check`` prints them."""

from __future__ import annotations

from lsprotocol import types

from . import analysis
from .diagnostics import belongs_to, range_in, to_lsp
from .guard import guarded


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p):
        return (p.line, p.character)
    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _same(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character, a.end.line, a.end.character) == (
        b.start.line, b.start.character, b.end.line, b.end.character)


def code_actions(ls, doc, params: types.CodeActionParams) -> list[types.CodeAction]:
    only = params.context.only
    if only and not any(str(k.value if hasattr(k, "value") else k).startswith("quickfix") for k in only):
        return []
    enc = ls.encoding
    result = analysis.analyze(ls.store, doc)
    wanted = [d for d in params.context.diagnostics if d.source in (None, "mpl")]
    out: list[types.CodeAction] = []
    closed: dict = {}                   # the files not open, read and indexed once
    for d in result.diagnostics:
        if not d.fixes or not belongs_to(doc, d):
            continue
        lsp_d = to_lsp(ls.store, doc, d, enc, closed)
        matches = [w for w in wanted if str(w.code) == d.code and _same(w.range, lsp_d.range)]
        if wanted and not matches:
            continue
        if not wanted and not _overlaps(lsp_d.range, params.range):
            continue
        for n, fix in enumerate(d.fixes):
            changes: dict[str, list[types.TextEdit]] = {}
            for e in fix.edits:
                uri, rng = range_in(ls.store, doc, e.file or d.file, e.span, enc, closed)
                changes.setdefault(uri, []).append(types.TextEdit(range=rng, new_text=e.new_text))
            out.append(types.CodeAction(
                title=fix.title, kind=types.CodeActionKind.QuickFix,
                diagnostics=matches or [lsp_d], is_preferred=(n == 0 and len(d.fixes) == 1),
                edit=types.WorkspaceEdit(changes=changes)))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    @guarded(default=list)
    def code_action(ls, params: types.CodeActionParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else code_actions(ls, doc, params)
