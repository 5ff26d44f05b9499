"""Semantic tokens (full document): every token's role from :mod:`lsp.context`, encoded
relative to the previous token in the negotiated position encoding."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema

from . import context
from .guard import guarded
from .positions import _units

#: Standard LSP token types and modifiers only (Neovim >= 0.9 colours them out of the box). The
#: VS Code extension maps every (type, modifiers) pair used here to the TextMate scope its grammar
#: gives the same text (package.json ``semanticTokenScopes``), so the colours do not change when
#: the server starts; tests/test_vscode_grammar.py checks that in VS Code's default themes.
TOKEN_TYPES = ["keyword", "class", "namespace", "parameter", "enumMember", "variable", "number",
               "string", "comment", "operator", "type", "event", "modifier"]
TOKEN_MODIFIERS = ["declaration", "deprecated", "defaultLibrary", "readonly", "documentation"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)

_T = {n: i for i, n in enumerate(TOKEN_TYPES)}
_M = {n: 1 << i for i, n in enumerate(TOKEN_MODIFIERS)}
_ROLE = {
    context.KEYWORD: "keyword", context.BOOL_R: "keyword",
    context.POLICY_DEF: "class", context.POLICY_REF: "class",
    context.BLOCK: "namespace", context.PARAM: "parameter", context.TARGET: "parameter",
    context.VALUE: "enumMember", context.METRIC: "variable", context.NUMBER_R: "number",
    context.STRING_R: "string", context.IMPORT_PATH: "string", context.COMMENT_R: "comment",
    context.UNIT: "type", context.TRIGGER: "event",
    # memory tiers: `tier`/`band`/`on` are keywords, a tier's name a variable, promote/demote
    # the values of a transition's event
    context.SECTION_R: "keyword", context.LABEL_R: "variable", context.LABEL_REF: "variable",
    context.EVENT_R: "enumMember",
}
#: keywords the grammar scopes apart from the control keywords (import, when, for, trigger, ...)
_KEYWORD_KIND = {"policy": ("keyword", "declaration"), "extends": ("modifier", None),
                 "version": ("keyword", "documentation")}
_OPERATORS = {"=", "|", ":", "<", ">", "<=", ">=", "!=", "==", "..", "->"}


def classify(tok, info, nxt) -> tuple[str, int] | None:
    """(token type, modifier bits) for one token, or None when it gets no semantic token."""
    role = info.role
    if role == context.OPERATOR:
        return ("operator", 0) if tok.text in _OPERATORS else None
    ttype = _ROLE.get(role)
    if ttype is None:
        return None
    mods = 0
    if role == context.KEYWORD and tok.text in _KEYWORD_KIND:
        ttype, mod = _KEYWORD_KIND[tok.text]
        mods |= _M.get(mod, 0)
    elif role == context.BOOL_R:
        mods |= _M["readonly"]
    elif role == context.POLICY_DEF:
        mods |= _M["declaration"]
    elif role == context.BLOCK and tok.text not in schema.BLOCKS:
        ttype = "variable"                             # an unknown block name, as the grammar shows it
    elif role == context.SECTION_R and tok.text not in schema.SECTIONS:
        ttype = "variable"                             # an unknown item kind, as the grammar shows it
    elif role in (context.PARAM, context.TARGET):
        if nxt is not None and nxt.text == ".":        # `cache.capacity`: the block's name
            return "namespace", 0
        if role == context.TARGET and info.param in schema.PARAMS and tok.text in schema.PARAMS[info.param].aliases:
            mods |= _M["deprecated"]
        elif schema.find(info.param or "") is None:     # an unknown name: as the grammar shows it
            ttype = "variable"
    elif role == context.METRIC and tok.text in schema.METRICS:
        mods |= _M["defaultLibrary"]
    return ttype, mods


def _length(text: str, encoding: str) -> int:
    if text.isascii() or encoding == "utf-32":
        return len(text)
    return sum(_units(c, encoding) for c in text)


def _pieces(tok, ttype: str):
    """(offset, text) of the parts of a token that get a semantic token: a string leaves its
    escape sequences out, so they keep the grammar's escape colour."""
    if ttype != "string" or "\\" not in tok.text:
        yield tok.start, tok.text
        return
    text, start, i = tok.text, 0, 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            if i > start:
                yield tok.start + start, text[start:i]
            i += 2
            start = i
        else:
            i += 1
    if start < len(text):
        yield tok.start + start, text[start:]


def encode(doc, encoding: str) -> list[int]:
    tokens = doc.tokens
    infos = context.classify(tokens)
    idx = doc.index(encoding)
    data: list[int] = []
    prev_line = prev_char = 0
    for i, (tok, info) in enumerate(zip(tokens, infos)):
        got = classify(tok, info, tokens[i + 1] if i + 1 < len(tokens) else None)
        if got is None:
            continue
        ttype, mods = got
        for start, text in _pieces(tok, ttype):
            pos = idx.position(start)
            d_line = pos.line - prev_line
            d_char = pos.character - prev_char if d_line == 0 else pos.character
            data.extend((d_line, d_char, _length(text, encoding), _T[ttype], mods))
            prev_line, prev_char = pos.line, pos.character
    return data


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    @guarded(default=lambda: types.SemanticTokens(data=[]))
    def semantic_tokens(ls, params: types.SemanticTokensParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return types.SemanticTokens(data=[])
        return types.SemanticTokens(data=encode(doc, ls.encoding))
