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

from mpl.syntax.lexer import KEYWORD_TYPES, PUNCT_TYPES
from mpl.syntax.recover import read_semicolons

NAME, NUMBER, STRING, COMMENT, PUNCT, OP, ERROR = (
    "name", "number", "string", "comment", "punct", "op", "error")
#: a ';' the parser reads as a ',', and one it reads as if it were not there
AS_COMMA, STRAY = "as_comma", "stray"
#: characters that, glued after ``gpu:1``, make the parser's tokenizer read it otherwise
_GLUED = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.")


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
        _read_semicolons(out)
    return out


def _read_semicolons(tokens: list[Token]) -> None:
    """Give each ';' of ``tokens`` the kind that says how the parser reads it. The parser's
    tokens are these without comments and unknown characters (the parser never sees them),
    with a name glued to ':' and an integer (``gpu:1``) as one token."""
    types: list[str] = []
    where: list[int] = []          # index in ``tokens`` of each entry of ``types``
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        kind = t.kind
        if kind == COMMENT or kind == ERROR:
            i += 1
            continue
        where.append(i)
        if kind == NAME:
            ty = KEYWORD_TYPES.get(t.text, "NAME")
            if ty == "NAME" and _indexed(tokens, i):
                types.append("INDEXED")
                i += 3
                continue
        elif kind == PUNCT:
            ty = PUNCT_TYPES[t.text]
        else:
            ty = kind.upper()
        types.append(ty)
        i += 1
    for j, reading in read_semicolons(types).items():
        if reading != "_SEMI":
            k = where[j]
            tokens[k] = tokens[k]._replace(kind=AS_COMMA if reading == "COMMA" else STRAY)


def _indexed(tokens: list[Token], i: int) -> bool:
    """Whether the name at ``i`` is glued to ':' and an integer that ends there: one value
    (a device, ``gpu:1``) for the parser's tokenizer."""
    if i + 2 >= len(tokens):
        return False
    name, colon, num = tokens[i], tokens[i + 1], tokens[i + 2]
    if not (colon.text == ":" and colon.start == name.end and num.kind == NUMBER
            and num.start == colon.end and num.text.isdigit()):
        return False
    after = tokens[i + 3] if i + 3 < len(tokens) else None
    return after is None or after.start > num.end or after.text[0] not in _GLUED


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
