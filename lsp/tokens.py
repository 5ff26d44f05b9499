"""A forgiving tokenizer for editor features.

The language server needs to know what is around the cursor in files that do not parse
(half-typed words, unclosed braces, garbage pastes). This lexer never fails: every character
ends up in some token, and unknown characters become ``ERROR`` tokens. Offsets are code-point
offsets, like :class:`mpl.diagnostics.Span`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

NAME, NUMBER, STRING, COMMENT, PUNCT, OP, ERROR = (
    "name", "number", "string", "comment", "punct", "op", "error")


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
    return out


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
