"""Go to definition, find references and rename for policy names, across ``extends`` and
``import``. A file sees the policies it defines and those of the files it imports
(transitively); references are collected from the open buffers and the workspace's files
that see the definition."""

from __future__ import annotations

import os

from lsprotocol import types

from mpl.stdlib_path import stdlib_dir, stdlib_file
from mpl.syntax.lexer import policy_name_problem

from . import context
from .guard import Refusal, guarded
from .positions import LineIndex
from .tokens import STRING, token_at, tokenize
from .workspace import norm_path, path_to_uri



class _File:
    """One file as navigation sees it: text, tokens and roles (an open document's own
    tokens and line index, kept with its version)."""

    def __init__(self, path: str | None, uri: str, text: str, doc=None) -> None:
        self.path, self.uri, self.text = path, uri, text
        self.doc = doc
        self.tokens = doc.tokens if doc is not None else tokenize(text)
        self.infos = context.classify(self.tokens)
        self._indexes: dict[str, LineIndex] = {}

    def index(self, encoding) -> LineIndex:
        """The line index of the text, built once (a rename of many names converts many
        offsets)."""
        if self.doc is not None:
            return self.doc.index(encoding)
        idx = self._indexes.get(encoding)
        if idx is None:
            idx = self._indexes[encoding] = LineIndex(self.text, encoding)
        return idx

    def names(self, role: str, name: str | None = None):
        for t, i in zip(self.tokens, self.infos):
            if i.role == role and (name is None or t.text == name):
                yield t

    def imports(self) -> list[str]:
        out = []
        for t, i in zip(self.tokens, self.infos):
            if i.role == context.IMPORT_PATH and t.kind == STRING:
                raw = t.text[1:-1] if t.text.endswith('"') and len(t.text) > 1 else t.text[1:]
                p = resolve_import(raw, self.path)
                if p:
                    out.append(p)
        return out


def resolve_import(spec: str, importer: str | None) -> str | None:
    """Path of ``import "spec"`` seen from ``importer`` (std/NAME or a relative path)."""
    if not spec:
        return None
    if spec.startswith("std/"):
        return stdlib_file(spec)
    base = os.path.dirname(importer) if importer else os.getcwd()
    cand = spec if os.path.isabs(spec) else os.path.join(base, spec)
    for c in (cand, cand + ".moe"):
        if os.path.isfile(c):
            return norm_path(c)
    return None


def _load(ls, path: str) -> _File | None:
    d = ls.store.open_by_path(path)
    if d is not None:
        return _from_doc(d)
    text = ls.store.read_file(path)
    return None if text is None else _File(norm_path(path), path_to_uri(os.path.abspath(path)), text)


def _from_doc(doc) -> _File:
    return _File(doc.path, doc.uri, doc.text, doc)


def _closure(ls, f: _File, limit: int = 200) -> list[_File]:
    """``f`` and every file it imports, transitively (cycles tolerated)."""
    out, seen, todo = [f], {f.path}, list(f.imports())
    while todo and len(out) < limit:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        g = _load(ls, p)
        if g is not None:
            out.append(g)
            todo.extend(g.imports())
    return out


def definition_of(ls, f: _File, name: str) -> tuple[_File, object] | None:
    """Where ``name`` is defined as seen from ``f``: this file first, then its imports."""
    for g in _closure(ls, f):
        for t in g.names(context.POLICY_DEF, name):
            return g, t
    return None


def name_at(f: _File, offset: int):
    i = token_at(f.tokens, offset)
    if i is None:
        return None
    if f.infos[i].role in (context.POLICY_DEF, context.POLICY_REF):
        return f.tokens[i]
    return None


def import_at(f: _File, offset: int) -> str | None:
    """The resolved path of the import string under ``offset``, if any."""
    i = token_at(f.tokens, offset)
    if i is None or f.infos[i].role != context.IMPORT_PATH:
        return None
    t = f.tokens[i]
    raw = t.text[1:-1] if t.text.endswith('"') and len(t.text) > 1 else t.text[1:]
    return resolve_import(raw, f.path)


def _loc(f: _File, tok, encoding) -> types.Location:
    return types.Location(f.uri, f.index(encoding).range(tok.start, tok.end))


def _candidates(ls, here: _File) -> list[_File]:
    files = {here.path: here} if here.path else {}
    for d in ls.store.docs.values():
        if d.path and d.path not in files:
            files[d.path] = _from_doc(d)
    for p in ls.store.workspace_files():
        np_ = norm_path(p)
        if np_ not in files:
            g = _load(ls, p)
            if g is not None:
                files[np_] = g
    out = list(files.values())
    if here.path is None:
        out.insert(0, here)
    return out


def references(ls, f: _File, tok, include_declaration: bool = True) -> list[tuple[_File, object]]:
    name = tok.text
    found = definition_of(ls, f, name)
    if found is None:   # an unknown parent: its occurrences in this file only
        return [(f, t) for t, info in zip(f.tokens, f.infos) if t.text == name and
                info.role in (context.POLICY_DEF, context.POLICY_REF)]
    def_file, def_tok = found
    out = []
    for g in _candidates(ls, f):
        sees = g.path == def_file.path or def_file.path in {x.path for x in _closure(ls, g)}
        if not sees:
            continue
        # a file that defines its own policy of that name shadows the imported one
        if g.path != def_file.path and any(True for _ in g.names(context.POLICY_DEF, name)):
            continue
        for t in g.names(context.POLICY_REF, name):
            out.append((g, t))
    if include_declaration:
        out.insert(0, (def_file, def_tok))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @guarded(default=list)
    def definition(ls, params: types.DefinitionParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return []
        f = _from_doc(doc)
        offset = doc.index(ls.encoding).offset(params.position)
        target = import_at(f, offset)
        if target is not None:       # on an import path: the imported file
            return [types.Location(path_to_uri(target), types.Range(types.Position(0, 0), types.Position(0, 0)))]
        tok = name_at(f, offset)
        if tok is None:
            return []
        found = definition_of(ls, f, tok.text)
        return [] if found is None else [_loc(found[0], found[1], ls.encoding)]

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    @guarded(default=list)
    def refs(ls, params: types.ReferenceParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return []
        f = _from_doc(doc)
        tok = name_at(f, doc.index(ls.encoding).offset(params.position))
        if tok is None:
            return []
        return [_loc(g, t, ls.encoding) for g, t in
                references(ls, f, tok, params.context.include_declaration)]

    @server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
    @guarded()
    def prepare_rename(ls, params: types.PrepareRenameParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return None
        f = _from_doc(doc)
        tok = name_at(f, doc.index(ls.encoding).offset(params.position))
        if tok is None:
            return None
        return types.PrepareRenamePlaceholder(range=doc.index(ls.encoding).range(tok.start, tok.end),
                                              placeholder=tok.text)

    @server.feature(types.TEXT_DOCUMENT_RENAME, types.RenameOptions(prepare_provider=True))
    @guarded()
    def rename(ls, params: types.RenameParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return None
        new = params.new_name
        problem = policy_name_problem(new or "")     # the tokenizer's notion (keywords name policies too)
        if problem is not None:
            raise Refusal(problem)
        f = _from_doc(doc)
        tok = name_at(f, doc.index(ls.encoding).offset(params.position))
        if tok is None:
            return None
        refs_ = references(ls, f, tok)
        std = norm_path(stdlib_dir())
        changes: dict[str, list[types.TextEdit]] = {}
        for g, t in refs_:
            if g.path and g.path.startswith(std + os.sep):
                raise Refusal(f"policy '{tok.text}' is defined in the standard library; it cannot be renamed")
            rng = g.index(ls.encoding).range(t.start, t.end)
            changes.setdefault(g.uri, []).append(types.TextEdit(range=rng, new_text=new))
        return types.WorkspaceEdit(changes=changes)
