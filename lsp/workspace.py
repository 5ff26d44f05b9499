"""The document store: open buffers (the server's own mirror, with incremental edits applied
in code-point offsets), per-version caches (tokens, line index, parse, analysis), the
import/extends dependency graph, and the workspace's ``.moe`` files.

``read_file`` is the hook handed to :func:`mpl.checker.analyze`: an open buffer wins over the
file on disk, so an unsaved parent is what its children are checked against.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from pygls import uris

from mpl import schema

from .positions import LineIndex, UTF16
from .tokens import Token, tokenize

_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
              ".tox", ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs"}
_MAX_WORKSPACE_FILES = 5000
_MAX_WORKSPACE_DIRS = 3000     # bound the walk (a workspace rooted at $HOME must not stall)


def norm_path(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(path)))


def uri_to_path(uri: str) -> str | None:
    try:
        p = uris.to_fs_path(uri)
    except Exception:
        return None
    return p


def path_to_uri(path: str) -> str:
    return uris.from_fs_path(path) or ("file://" + path)


@dataclass
class Doc:
    uri: str
    text: str
    version: int | None
    path: str | None
    _tokens: list[Token] | None = None
    _checkpoints: list[int] | None = None
    _index: dict = field(default_factory=dict)
    parse: object | None = None
    analysis: object | None = None
    analysis_error: str | None = None
    last_analysis: object | None = None   # survives edits: for completion on half-typed text
    gen: int = 0                          # bumped by every invalidation (text, imports, model)

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = tokenize(self.text)
        return self._tokens

    @property
    def checkpoints(self) -> list[int]:
        if self._checkpoints is None:
            from .context import checkpoints
            self._checkpoints = checkpoints(self.tokens)
        return self._checkpoints

    def index(self, encoding=UTF16) -> LineIndex:
        idx = self._index.get(encoding)
        if idx is None:
            idx = self._index[encoding] = LineIndex(self.text, encoding)
        return idx

    def invalidate(self, *, text: bool) -> None:
        self.gen += 1
        self.analysis = None
        self.analysis_error = None
        if text:
            self._tokens = None
            self._checkpoints = None
            self._index = {}
            self.parse = None


class Store:
    def __init__(self) -> None:
        self.docs: dict[str, Doc] = {}
        self.roots: list[str] = []
        self.model = None                     # mpl.shapes.ModelShape | None
        self.settings = None                  # lsp.settings.Settings (import roots)
        self.deps: dict[str, set[str]] = {}   # uri -> normalized paths it imports (transitively)
        self._ws_files: tuple[float, list[str]] | None = None

    # ------------------------------------------------------------ buffers
    def open(self, uri: str, text: str, version: int | None) -> Doc:
        path = uri_to_path(uri)
        doc = Doc(uri, text, version, norm_path(path) if path else None)
        self.docs[uri] = doc
        return doc

    def get(self, uri: str) -> Doc | None:
        return self.docs.get(uri)

    def close(self, uri: str) -> None:
        self.docs.pop(uri, None)
        self.deps.pop(uri, None)

    def change(self, uri: str, changes, version: int | None, encoding=UTF16) -> Doc | None:
        """Apply LSP content changes (incremental ranges or whole text) in order."""
        doc = self.docs.get(uri)
        if doc is None:
            return None
        text = doc.text
        for ch in changes:
            rng = getattr(ch, "range", None)
            if rng is None:
                text = ch.text
                continue
            idx = LineIndex(text, encoding)
            start = idx.offset(rng.start)
            end = idx.offset(rng.end)
            if end < start:
                start, end = end, start
            text = text[:start] + ch.text + text[end:]
        doc.text = text
        doc.version = version
        doc.invalidate(text=True)
        return doc

    def set_text(self, uri: str, text: str, version: int | None = None) -> None:
        """Replace an open document's text (a save that carries it); a document that is not
        open stays closed: its file on disk is what the server reads."""
        doc = self.docs.get(uri)
        if doc is not None and doc.text != text:
            doc.text = text
            doc.version = version if version is not None else doc.version
            doc.invalidate(text=True)

    # ------------------------------------------------------------ files
    def open_by_path(self, path: str) -> Doc | None:
        p = norm_path(path)
        for d in list(self.docs.values()):    # also called from the analysis thread
            if d.path == p:
                return d
        return None

    def read_file(self, path: str) -> str | None:
        """An open buffer's text, else the file on disk; None when it cannot be read."""
        d = self.open_by_path(path)
        if d is not None:
            return d.text
        from mpl.fileio import read_text_or_none
        return read_text_or_none(path)     # bounded: an import of /dev/zero cannot hang the server

    def text_of(self, uri_or_path: str) -> str | None:
        if "://" in uri_or_path:
            d = self.docs.get(uri_or_path)
            if d is not None:
                return d.text
            p = uri_to_path(uri_or_path)
            return self.read_file(p) if p else None
        return self.read_file(uri_or_path)

    def workspace_files(self) -> list[str]:
        """``.moe``/``.policy`` files under the workspace roots (cached for two seconds, and
        forgotten on save and on workspace/didChangeWatchedFiles)."""
        now = time.monotonic()
        if self._ws_files is not None and now - self._ws_files[0] < 2.0:
            return self._ws_files[1]
        out: list[str] = []
        dirs = 0
        for root in self.roots:
            for dirpath, dirnames, filenames in os.walk(root):
                dirs += 1
                dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
                for f in filenames:
                    if f.endswith(schema.FILE_EXTENSIONS):
                        out.append(norm_path(os.path.join(dirpath, f)))
                if len(out) >= _MAX_WORKSPACE_FILES or dirs >= _MAX_WORKSPACE_DIRS:
                    break
        out.extend(d.path for d in self.docs.values() if d.path)
        out = sorted(set(out))
        self._ws_files = (now, out)
        return out

    def forget_workspace_files(self) -> None:
        self._ws_files = None

    # ------------------------------------------------------------ dependency graph
    def set_deps(self, uri: str, paths) -> None:
        self.deps[uri] = {norm_path(p) for p in paths if p}

    def dependents(self, uri: str) -> list[str]:
        """Open documents that import ``uri``'s file (directly or through other imports)."""
        doc = self.docs.get(uri)
        if doc is None or doc.path is None:
            return []
        return [u for u, paths in list(self.deps.items()) if u != uri and doc.path in paths and u in self.docs]

    def invalidate_all(self) -> None:
        for d in self.docs.values():
            d.invalidate(text=False)
