"""Semantic tokens (full document): every token's role from :mod:`lsp.context`, encoded
relative to the previous token in the negotiated position encoding."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema

from . import context
from .guard import guarded
from .positions import _units

TOKEN_TYPES = ["keyword", "class", "namespace", "property", "enumMember", "variable", "number",
               "string", "comment", "operator", "type", "event"]
TOKEN_MODIFIERS = ["declaration", "deprecated", "defaultLibrary"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)

_T = {n: i for i, n in enumerate(TOKEN_TYPES)}
_ROLE = {
    context.KEYWORD: "keyword", context.BOOL_R: "keyword",
    context.POLICY_DEF: "class", context.POLICY_REF: "class",
    context.BLOCK: "namespace", context.PARAM: "property", context.TARGET: "property",
    context.VALUE: "enumMember", context.METRIC: "variable", context.NUMBER_R: "number",
    context.STRING_R: "string", context.IMPORT_PATH: "string", context.COMMENT_R: "comment",
    context.UNIT: "type", context.TRIGGER: "event",
}
_OPERATORS = {"=", "|", ":", "<", ">", "<=", ">=", "!=", "=="}
_DECL, _DEPR, _LIB = 1, 2, 4


def _length(text: str, encoding: str) -> int:
    if text.isascii() or encoding == "utf-32":
        return len(text)
    return sum(_units(c, encoding) for c in text)


def encode(doc, encoding: str) -> list[int]:
    tokens = doc.tokens
    infos = context.classify(tokens)
    idx = doc.index(encoding)
    data: list[int] = []
    prev_line = prev_char = 0
    for tok, info in zip(tokens, infos):
        role = info.role
        if role == context.OPERATOR:
            if tok.text not in _OPERATORS:
                continue
            ttype = "operator"
        else:
            ttype = _ROLE.get(role)
            if ttype is None:
                continue
        mods = 0
        if role == context.POLICY_DEF:
            mods |= _DECL
        elif role == context.TARGET and info.param in schema.PARAMS and tok.text in schema.PARAMS[info.param].aliases:
            mods |= _DEPR
        elif role == context.METRIC and tok.text in schema.METRICS:
            mods |= _LIB
        pos = idx.position(tok.start)
        length = _length(tok.text, encoding)
        d_line = pos.line - prev_line
        d_char = pos.character - prev_char if d_line == 0 else pos.character
        data.extend((d_line, d_char, length, _T[ttype], mods))
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
