"""The tokenizer shared by the LALR parser and the recovering parser.

One pass over the text with one compiled regular expression. It never fails: characters it
cannot use become ``ERROR`` tokens with an ``MPL001`` diagnostic, malformed literals become
``ERROR`` (numbers) or best-effort ``STRING`` tokens with an ``MPL004`` diagnostic. Comments
are collected separately; whitespace and newlines are dropped (the grammar is
whitespace-insensitive; the recovering parser uses token line numbers to resynchronise).

Units. A name glued to a number (``12GiB``, ``12GiG``) is always a ``UNIT`` token, known or
not, so the checker can report "unknown unit". A name separated from a number by spaces (on
the same line) is a ``UNIT`` only when it is one of :data:`mpl.schema.UNITS`; otherwise it is
the next token (``capacity = 8  eviction = lru`` on one line).
"""

from __future__ import annotations

import re
from bisect import bisect_right

from lark import Token

from mpl import schema
from mpl.diagnostics import Diagnostic, Span, make
from mpl.syntax import ast

#: token type of each keyword (mpl.schema.KEYWORDS)
KEYWORD_TYPES: dict[str, str] = {k: k.upper() for k in schema.KEYWORDS}

PUNCT_TYPES: dict[str, str] = {
    "{": "LBRACE", "}": "RBRACE", "[": "LBRACK", "]": "RBRACK", "=": "EQ", ",": "COMMA",
    "|": "PIPE", ":": "COLON", ";": "_SEMI", ".": "DOT",
}

#: every token type the grammar declares (grammar.lark's %declare line must match)
TOKEN_TYPES: tuple[str, ...] = (*KEYWORD_TYPES.values(), "NAME", "NUMBER", "UNIT", "STRING",
                                *PUNCT_TYPES.values(), "OP")

#: lexer-only token type: text already reported by the lexer (never reaches the LALR parser)
ERROR = "ERROR"

MAX_LIST_DEPTH = 32

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<num>-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>"(?:[^"\\\n]|\\[^\n])*")
  | (?P<op><=|>=|!=|==|<|>)
  | (?P<punct>[{}\[\]=,|:;.])
""", re.X)

_SUFFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MALFORMED_NUM_RE = re.compile(r"[0-9A-Za-z_.]+")
_BAD_RUN_RE = re.compile(r"""[^ \t\r\f\v\n#A-Za-z_0-9"<>=!{}\[\],|:;.\-]+|[-!]""")
_STR_OPEN_RE = re.compile(r'"(?:[^"\\\n]|\\[^\n])*\\?')
_SPACES_RE = re.compile(r"[ \t]+")

_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def unescape(body: str) -> str:
    """The value of a string literal's body (without the quotes)."""
    if "\\" not in body:
        return body
    out, i, n = [], 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            out.append(_ESCAPES.get(body[i + 1], body[i:i + 2]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def number_value(text: str) -> int | float | None:
    """The value of a number literal; None when it cannot be represented."""
    try:
        if "." in text or "e" in text or "E" in text:
            v = float(text)
            if v != v or v in (float("inf"), float("-inf")):
                return None
            return v
        return int(text)
    except (ValueError, OverflowError):
        return None


class LineIndex:
    """Offsets -> Spans without rescanning the text."""

    __slots__ = ("text", "starts")

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self.starts = starts

    def span(self, start: int, end: int) -> Span:
        n = len(self.text)
        start = max(0, min(start, n))
        end = max(start, min(end, n))
        li = bisect_right(self.starts, start) - 1
        le = bisect_right(self.starts, end) - 1
        return Span(li + 1, start - self.starts[li] + 1, le + 1, end - self.starts[le] + 1, start, end)


def tok_span(a: Token, b: Token | None = None) -> Span:
    """The span from the start of token ``a`` to the end of token ``b`` (default: ``a``)."""
    b = a if b is None else b
    return Span(a.line, a.column, b.end_line, b.end_column, a.start_pos, b.end_pos)


class Lexed:
    __slots__ = ("tokens", "comments", "diagnostics", "index")

    def __init__(self, tokens, comments, diagnostics, index):
        self.tokens: list[Token] = tokens
        self.comments: list[ast.Comment] = comments
        self.diagnostics: list[Diagnostic] = diagnostics
        self.index: LineIndex = index


def tokenize(text: str, path: str | None = None) -> Lexed:
    """Split ``text`` into tokens; never raises."""
    tokens: list[Token] = []
    comments: list[ast.Comment] = []
    diags: list[Diagnostic] = []
    index = LineIndex(text)
    append = tokens.append
    match = _TOKEN_RE.match
    n = len(text)
    pos = 0
    line = 1
    line_start = 0
    depth = 0
    depth_reported = False

    def tok(type_: str, start: int, end: int) -> Token:
        col = start - line_start + 1
        return Token(type_, text[start:end], start, line, col, line, end - line_start + 1, end)

    def err(code: str, msg: str, start: int, end: int) -> None:
        diags.append(make(code, msg, index.span(start, end), file=path))

    while pos < n:
        m = match(text, pos)
        if m is None:
            c = text[pos]
            if c == '"':  # unterminated string: up to the end of the line
                m2 = _STR_OPEN_RE.match(text, pos)
                end = m2.end()
                t = tok("STRING", pos, end)
                append(t)
                err("MPL004", "unterminated string: add the closing '\"' on the same line", pos, end)
                pos = end
                continue
            m2 = _BAD_RUN_RE.match(text, pos)
            end = m2.end() if m2 else pos + 1
            bad = text[pos:end]
            shown = bad if len(bad) <= 20 else bad[:20] + "..."
            if c == "-":
                msg = "unexpected '-': a minus sign must be followed directly by a number, e.g. -1"
            elif c == "!":
                msg = "unexpected '!': did you mean '!='?"
            elif len(bad) == 1:
                msg = f"unexpected character {shown!r}"
            else:
                msg = f"unexpected characters {shown!r}"
            err("MPL001", msg, pos, end)
            append(tok(ERROR, pos, end))
            pos = end
            continue
        kind = m.lastgroup
        end = m.end()
        if kind == "ws":
            pos = end
            continue
        if kind == "nl":
            line += 1
            line_start = end
            pos = end
            continue
        if kind == "comment":
            comments.append(ast.Comment(index.span(pos, end), text[pos:end]))
            pos = end
            continue
        if kind == "num":
            nxt = text[end] if end < n else ""
            if nxt == "." or (nxt.isdigit()):
                m2 = _MALFORMED_NUM_RE.match(text, end)
                bad_end = m2.end() if m2 else end
                err("MPL004", f"malformed number {text[pos:bad_end]!r}", pos, bad_end)
                append(tok(ERROR, pos, bad_end))
                pos = bad_end
                continue
            if number_value(text[pos:end]) is None:
                err("MPL004", f"number {text[pos:end][:30]!r} is too large to represent", pos, end)
                append(tok(ERROR, pos, end))
                pos = end
                continue
            append(tok("NUMBER", pos, end))
            pos = end
            m2 = _SUFFIX_RE.match(text, pos)
            if m2:  # glued unit, known or not
                append(tok("UNIT", pos, m2.end()))
                pos = m2.end()
            continue
        if kind == "name":
            word = text[pos:end]
            ktype = KEYWORD_TYPES.get(word)
            if ktype is not None:
                append(tok(ktype, pos, end))
            elif (word in schema.UNITS and tokens and tokens[-1].type == "NUMBER"
                  and _SPACES_RE.fullmatch(text, tokens[-1].end_pos, pos)):
                append(tok("UNIT", pos, end))
            else:
                append(tok("NAME", pos, end))
            pos = end
            continue
        if kind == "str":
            append(tok("STRING", pos, end))
            pos = end
            continue
        if kind == "op":
            append(tok("OP", pos, end))
            pos = end
            continue
        # punctuation
        c = text[pos]
        if c == "[":
            depth += 1
            if depth > MAX_LIST_DEPTH and not depth_reported:
                depth_reported = True
                err("MPL002", f"lists nested deeper than {MAX_LIST_DEPTH} levels", pos, end)
        elif c == "]":
            depth = max(0, depth - 1)
        append(tok(PUNCT_TYPES[c], pos, end))
        pos = end
    return Lexed(tokens, comments, diags, index)
