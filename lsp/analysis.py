"""The front end, as the server calls it: parse and analyze a document once per version.

Everything goes through :func:`mpl.syntax.parse` and :func:`mpl.checker.analyze`, the same
functions ``mplc check`` uses, so the editor shows exactly the CLI's diagnostics.
"""

from __future__ import annotations

import threading

from .workspace import Doc, Store

#: the front end is never run by two threads at once (diagnostics are computed on a worker
#: thread; hover and friends analyze on the event loop when they need it first)
_LOCK = threading.Lock()


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


def compute(store: Store, text: str, path: str | None, model):
    """Run the checker (any thread). Imports are read through the store: open buffers win."""
    from mpl.checker import analyze as _analyze
    from .settings import Settings, import_roots_for
    refused = unreadable(text, path)
    if refused is not None:
        return refused
    roots = import_roots_for(store.settings or Settings(), store.roots, path)
    with _LOCK:
        return _analyze(text, path, model=model, read_file=store.read_file, import_roots=roots)


def unreadable(text: str, path: str | None):
    """What ``mplc check`` says of the file this buffer saves to when it refuses to read it
    (a binary file: one MPL100, nothing else), as an Analysis; None when it reads it. The
    CLI's own rule decides (:func:`mpl.fileio.decode_text`, which
    :func:`mpl.checker.read_source` applies to the file's bytes). A lone surrogate, which no
    saved file holds, is left to the checker (its own located MPL100)."""
    from mpl.checker import Analysis
    from mpl.diagnostics import Span
    from mpl.fileio import ReadError, decode_text
    from mpl.rules import make
    from mpl.syntax import parse as _parse

    try:
        decode_text(text.encode("utf-8", "replace"), f"'{path}'" if path else "the document")
        return None
    except ReadError as e:
        diag = make("MPL100", str(e), Span(1, 1, 1, 1, 0, 0), file=path)
    # the outline, folding and hints still read the text as far as the parser can
    return Analysis(text, path, _parse(text, path).document, [diag])


def adopt(store: Store, doc: Doc, gen: int, result) -> bool:
    """Cache ``result`` as ``doc``'s analysis if it was computed for the document's current
    generation (same text, imports and model). Event-loop thread only."""
    if store.get(doc.uri) is not doc or doc.gen != gen:
        return False
    if doc.analysis is None:
        doc.analysis = result
        doc.last_analysis = result
        store.set_deps(doc.uri, (getattr(result, "imports", None) or {}).keys())
    return True


def analyze(store: Store, doc: Doc):
    """``mpl.checker.analyze`` for this version (cached until the text, an import or the
    model changes), computed here and now. Event-loop thread only."""
    if doc.analysis is None:
        adopt(store, doc, doc.gen, compute(store, doc.text, doc.path, store.model))
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
