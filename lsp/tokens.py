"""A forgiving tokenizer for editor features.

The language server needs to know what is around the cursor in files that do not parse
(half-typed words, unclosed braces, garbage pastes). This lexer never fails: every character
ends up in some token, and unknown characters become ``ERROR`` tokens. Offsets are code-point
offsets, like :class:`mpl.diagnostics.Span`.

A ';' is read as the parser reads it (:func:`mpl.syntax.recover.read_semicolons`): one that
separates two items is punctuation, one the parser reads as a ',' (``[1; 2]``) is an
``AS_COMMA`` token, and one it reads as if it were not there (``capacity = ; 8``) a ``STRAY``
token, which the roles of :mod:`lsp.context` skip as the parser does.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mpl.syntax.lexer import STRAY as LEX_STRAY
from mpl.syntax.lexer import tokenize as lex
from mpl.syntax.recover import read_semicolons

NAME, NUMBER, STRING, COMMENT, PUNCT, OP, ERROR = (
    "name", "number", "string", "comment", "punct", "op", "error")
#: a ';' the parser reads as a ',', and one it reads as if it were not there
AS_COMMA, STRAY = "as_comma", "stray"


class Token(NamedTuple):
    kind: str
    start: int
    end: int
    text: str
    line: int      # 0-based line of ``start``
    nl_before: bool  # a newline separates this token from the previous one


_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\f\v]+)
  | (?P<nl>\r\n?|\n)
  | (?P<comment>\#[^\r\n]*)
  | (?P<string>"(?:[^"\\\r\n]|\\.)*(?:"|(?=[\r\n])|$))
  | (?P<number>-?(?:\d+\.(?!\.)\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|!=|==|<|>)
  | (?P<punct>\.\.|->|[{}\[\],=|:;.()])
  | (?P<error>.)
""", re.VERBOSE | re.DOTALL)


def tokenize(text: str) -> list[Token]:
    """All tokens of ``text`` (whitespace and newlines dropped, comments kept)."""
    out: list[Token] = []
    line = 0
    nl = True
    append = out.append
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "nl":
            line += 1
            nl = True
            continue
        s, e = m.span()
        append(Token(kind, s, e, m.group(), line, nl))
        nl = False
    if ";" in text:
        _read_semicolons(text, out)
    return out


def _read_semicolons(text: str, tokens: list[Token]) -> None:
    """Give each ';' of ``tokens`` the kind that says how the parser reads it: the parser's
    own tokens of ``text`` (its lexer, less the stray characters it reads as if they were
    not there) through its rule, each ';' found here by its offset."""
    parsed = [t for t in lex(text).tokens if t.type != LEX_STRAY]
    at = {t.start: k for k, t in enumerate(tokens) if t.text == ";"}
    for j, reading in read_semicolons([t.type for t in parsed]).items():
        k = at.get(parsed[j].start_pos)
        if reading != "_SEMI" and k is not None:
            tokens[k] = tokens[k]._replace(kind=AS_COMMA if reading == "COMMA" else STRAY)


def token_at(tokens: list[Token], offset: int, *, prefer_left: bool = True) -> int | None:
    """Index of the token touching ``offset`` (a cursor just after a word touches it)."""
    lo, hi = 0, len(tokens)
    while lo < hi:
        mid = (lo + hi) // 2
        if tokens[mid].end < offset:
            lo = mid + 1
        else:
            hi = mid
    # tokens[lo] is the first token with end >= offset
    cands = []
    for i in (lo, lo + 1):
        if 0 <= i < len(tokens) and tokens[i].start <= offset <= tokens[i].end:
            cands.append(i)
    if not cands:
        return None
    if len(cands) == 2:
        # "a|b" boundary: prefer the word over punctuation
        a, b = cands
        if tokens[a].kind in (NAME, NUMBER, STRING) and (prefer_left or tokens[b].kind not in (NAME, NUMBER, STRING)):
            return a
        return b
    return cands[0]


def tokens_before(tokens: list[Token], offset: int) -> int:
    """Number of tokens that end at or before ``offset``."""
    lo, hi = 0, len(tokens)
    while lo < hi:
        mid = (lo + hi) // 2
        if tokens[mid].end <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo
