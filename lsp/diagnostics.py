"""Diagnostics: the checker's :class:`mpl.diagnostics.Diagnostic` objects, published as LSP
diagnostics without rewording (code, source "mpl", severity, range, codeDescription link,
related information, tags). Publishing is debounced on change and immediate on open/save;
a change re-diagnoses the open documents that import the changed one.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types

from mpl.diagnostics import Severity, Span, docs_url

from . import analysis
from .analysis import adopt, compute
from .guard import EXCEPTION_MARK, log, log_exception
from .positions import LineIndex
from .workspace import Doc, Store, norm_path, path_to_uri

SOURCE = "mpl"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.HINT: types.DiagnosticSeverity.Hint,
    Severity.INFO: types.DiagnosticSeverity.Information,
}

#: codes whose range is code that does nothing / a deprecated spelling (editors grey/strike it)
_TAGS = {
    "MPL401": [types.DiagnosticTag.Unnecessary],
    "MPL404": [types.DiagnosticTag.Deprecated],
}


def range_in(store: Store, doc: Doc, file: str | None, span: Span, encoding,
             closed: dict | None = None) -> tuple[str, types.Range]:
    """(uri, range) of ``span`` in ``file`` (None: this document). ``closed`` keeps, for each
    file that is not open, its uri and line index (None when it cannot be read) across the
    calls of one publish: many locations in one such file read and index it once."""
    if file is None or (doc.path is not None and norm_path(file) == doc.path):
        return doc.uri, doc.index(encoding).span_range(span)
    other = store.open_by_path(file)
    if other is not None:
        return other.uri, other.index(encoding).span_range(span)
    got = closed.get(file) if closed is not None else None
    if got is None:
        text = store.read_file(file)
        got = (path_to_uri(os.path.abspath(file)), None if text is None else LineIndex(text, encoding))
        if closed is not None:
            closed[file] = got
    uri, index = got
    if index is not None:
        return uri, index.span_range(span)
    return uri, types.Range(types.Position(max(0, span.line - 1), max(0, span.column - 1)),
                            types.Position(max(0, span.end_line - 1), max(0, span.end_column - 1)))


def belongs_to(doc: Doc, d) -> bool:
    return d.file is None or doc.path is None or norm_path(d.file) == doc.path


def to_lsp(store: Store, doc: Doc, d, encoding, closed: dict | None = None) -> types.Diagnostic:
    """The LSP diagnostic of ``d``; ``closed`` as for :func:`range_in` (one per publish)."""
    closed = {} if closed is None else closed
    related = []
    for r in d.related:
        uri, rng = range_in(store, doc, r.file or d.file, r.span, encoding, closed)
        related.append(types.DiagnosticRelatedInformation(types.Location(uri, rng), r.message))
    return types.Diagnostic(
        range=doc.index(encoding).span_range(d.span),
        message=d.message,
        severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Error),
        code=d.code,
        code_description=types.CodeDescription(href=docs_url(d.code)),
        source=SOURCE,
        related_information=related or None,
        tags=_TAGS.get(d.code),
        data={"fixes": len(d.fixes)} if d.fixes else None,
    )


def lsp_diagnostics(store: Store, doc: Doc, encoding) -> list[types.Diagnostic]:
    a = analysis.analyze(store, doc)
    closed: dict = {}                   # the files not open, read and indexed once
    return [to_lsp(store, doc, d, encoding, closed) for d in a.diagnostics if belongs_to(doc, d)]


class Publisher:
    """Debounced publishing, one pending timer per document. The analysis runs on a worker
    thread, so requests (completion, hover on an analysed version, ...) are answered while
    a document is being checked; a result is published only if the document has not changed
    meanwhile (otherwise a newer check is already scheduled)."""

    def __init__(self, server) -> None:
        self.server = server
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mpl-analysis")
        #: set by :meth:`close` (shutdown, exit, lost connection): no check is started or
        #: handed back to the event loop after it
        self.closed = False

    def close(self) -> None:
        """Stop checking: cancel the debounce timers and the queued checks. A check already
        running on the worker finishes, and its result is dropped (the event loop may be
        closed by then: handing it back would raise "Event loop is closed" in the worker)."""
        self.closed = True
        for uri in list(self.pending):
            self.cancel(uri)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def cancel(self, uri: str) -> None:
        h = self.pending.pop(uri, None)
        if h is not None:
            h.cancel()

    def schedule(self, uri: str, delay_ms: int | None = None, *, cascade: bool = True) -> None:
        if self.closed:
            return
        delay = self.server.settings.debounce_ms if delay_ms is None else delay_ms
        self.cancel(uri)
        if delay <= 0:
            self.publish(uri, cascade=cascade)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.publish(uri, cascade=cascade)
            return
        self.pending[uri] = loop.call_later(delay / 1000.0, self.publish, uri, cascade)

    def publish(self, uri: str, cascade: bool = True) -> None:
        """Check ``uri`` (on the worker thread) and publish its diagnostics."""
        self.pending.pop(uri, None)
        if self.closed:
            return
        store = self.server.store
        doc = store.get(uri)
        if doc is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if doc.analysis is not None or loop is None:
            self._send(uri, doc, cascade)
            return
        gen, text, path, model = doc.gen, doc.text, doc.path, store.model

        def work():
            if doc.gen != gen:          # changed while queued: a newer check will run
                return None
            return compute(store, text, path, model)

        try:
            fut = self.executor.submit(work)
        except RuntimeError:            # the executor was shut down (the server is stopping)
            return

        def done(f) -> None:            # runs on the worker thread
            if self.closed or f.cancelled() or loop.is_closed():
                return
            try:
                loop.call_soon_threadsafe(self._finish, uri, doc, gen, f, cascade)
            except RuntimeError:        # the loop closed between the check and the call
                pass

        fut.add_done_callback(done)

    def _finish(self, uri: str, doc: Doc, gen: int, fut, cascade: bool) -> None:
        if self.closed:
            return
        exc = fut.exception()
        if exc is not None:
            tb = "".join(traceback.format_exception(exc))
            log(self.server, f"{EXCEPTION_MARK} in diagnostics of {uri}:\n{tb}", types.MessageType.Error)
            return
        result = fut.result()
        if result is None or not adopt(self.server.store, doc, gen, result):
            return                      # stale: the document changed while it was checked
        self._send(uri, doc, cascade)

    def _send(self, uri: str, doc: Doc, cascade: bool) -> None:
        server = self.server
        try:
            diags = lsp_diagnostics(server.store, doc, server.encoding)
        except Exception:
            log_exception(server, f"diagnostics of {uri}")
            return
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=doc.version))
        if cascade:
            for dep in server.store.dependents(uri):
                dep_doc = server.store.get(dep)
                if dep_doc is not None:
                    dep_doc.invalidate(text=False)
                    self.publish(dep, cascade=False)

    def clear(self, uri: str) -> None:
        self.cancel(uri)
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
