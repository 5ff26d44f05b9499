"""The front end, as the server calls it: parse and analyze a document once per version.

Everything goes through :func:`mpl.syntax.parse` and :func:`mpl.checker.analyze`, the same
functions ``mplc check`` uses, so the editor shows exactly the CLI's diagnostics.
"""

from __future__ import annotations

from .workspace import Doc, Store


def parse(doc: Doc):
    """``mpl.syntax.parse`` result for this version of the document (cached)."""
    if doc.parse is None:
        from mpl.syntax import parse as _parse
        doc.parse = _parse(doc.text, doc.path)
    return doc.parse


def document(store: Store, doc: Doc):
    """The AST of this version. It comes from the analysis (one front-end pass per version
    serves diagnostics, outline, folding and hints); the parser alone is the fallback.
    Its spans are in the checker's text (CRLF normalized): convert them by line/column
    (:meth:`lsp.positions.LineIndex.span_offsets`), never by offset."""
    if doc.analysis is None and doc.parse is None:
        try:
            analyze(store, doc)
        except Exception:
            pass
    if doc.analysis is not None and getattr(doc.analysis, "document", None) is not None:
        return doc.analysis.document
    return parse(doc).document


def analyze(store: Store, doc: Doc):
    """``mpl.checker.analyze`` for this version (cached until the text, an import or the
    model changes). Imports are read through the store, so open buffers win."""
    if doc.analysis is None:
        from mpl.checker import analyze as _analyze
        doc.analysis = _analyze(doc.text, doc.path, model=store.model, read_file=store.read_file)
        doc.last_analysis = doc.analysis
        store.set_deps(doc.uri, (getattr(doc.analysis, "imports", None) or {}).keys())
    return doc.analysis


def policy_ir(store: Store, doc: Doc, name: str | None):
    """The IR of policy ``name`` when it has no errors, else None."""
    if not name:
        return None
    try:
        a = analyze(store, doc)
    except Exception:
        return None
    return (getattr(a, "ir", None) or {}).get(name)


def resolved_policy(store: Store, doc: Doc, name: str | None):
    if not name:
        return None
    try:
        a = analyze(store, doc)
    except Exception:
        return None
    return (getattr(a, "policies", None) or {}).get(name)
