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

from mpl import schema
from mpl.diagnostics import Diagnostic, Fix, Span, TextEdit, line_starts
from mpl.rules import make
from mpl.syntax import ast

#: token type of each keyword (mpl.schema.KEYWORDS)
KEYWORD_TYPES: dict[str, str] = {k: k.upper() for k in schema.KEYWORDS}

PUNCT_TYPES: dict[str, str] = {
    "{": "LBRACE", "}": "RBRACE", "[": "LBRACK", "]": "RBRACK", "=": "EQ", ",": "COMMA",
    "|": "PIPE", ":": "COLON", ";": "_SEMI", ".": "DOT", "(": "LPAREN", ")": "RPAREN",
    "..": "DOTDOT", "->": "ARROW",
}

#: every token type the grammar declares (grammar.lark's %declare line must match)
TOKEN_TYPES: tuple[str, ...] = (*KEYWORD_TYPES.values(), "NAME", "NUMBER", "UNIT", "STRING",
                                "INDEXED", *PUNCT_TYPES.values(), "OP")

#: lexer-only token type: text already reported by the lexer (never reaches the LALR parser)
ERROR = "ERROR"
#: lexer-only token type: characters that cannot start any token, already reported; the
#: recovering parser reads the text as if they were not there (no cascade after them)
STRAY = "STRAY"


def name_text(value: str) -> str:
    """The name a NAME token stands for: a hyphenated spelling (``cpu-fallback``, reported
    by the lexer) is read with underscores."""
    return value.replace("-", "_") if "-" in value else value

MAX_LIST_DEPTH = 32
#: the deepest nesting of braces (policy, block, nested items): deeper is a syntax error, so
#: no later pass can run out of stack
MAX_ITEM_DEPTH = 32

# `0..7` is a range: a number's '.' is never the first of two
_NUM_BODY = r"(?:[0-9]+(?:\.(?!\.)[0-9]*)?|\.[0-9]+)"
_NUM = rf"-?{_NUM_BODY}(?:[eE][+-]?[0-9]+)?"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: every character of a line is matched by one alternative (so a scan never skips text)
_TOKEN_RE = re.compile(rf"""
    [ \t\r\f\v]*+                  # spaces before the token (possessive: no backtracking)
    (?:
      (?P<name>{_NAME})(?:(?P<hyphen>(?:-{_NAME})+)    # `cpu-fallback`: hyphen is the last group
                          |(?P<index>:[0-9]+(?![0-9A-Za-z_.])))?  # `gpu:1`: a device index
    | (?P<num>{_NUM})(?:(?P<badnum>(?!\.\.)[.0-9][0-9A-Za-z_.]*)|(?P<unit>{_NAME}))?
    | (?P<op><=|>=|!=|==|<|>)
    | (?P<punct>\.\.|->|[{{}}\[\]=,|:;.()])
    | (?P<comment>\#.*)
    | (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<ustr>"(?:[^"\\]|\\.)*\\?)
    | (?P<bad>(?:[^ \t\r\f\v\#A-Za-z_0-9"<>=!{{}}\[\],|:;.()\-]|-(?!{_NUM_BODY}|>)|!(?!=))+)
    )
""", re.X)


_KNOWN_WORDS: frozenset | None = None


def _known_words() -> frozenset:
    """Every name the schema knows (blocks, parameters, enum values, metrics, triggers,
    units): a hyphenated spelling of one of them gets a did-you-mean."""
    global _KNOWN_WORDS
    if _KNOWN_WORDS is None:
        words = set(schema.BLOCKS) | set(schema.METRICS) | set(schema.TRIGGERS) | set(schema.UNITS)
        for p in schema.PARAMS.values():
            words.add(p.name)
            words.update(p.aliases)
            words.update(p.enum_names())
        _KNOWN_WORDS = frozenset(words)
    return _KNOWN_WORDS


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


class Token:
    """One token. Attribute names follow Lark's Token (``type``, ``value``, ``start_pos``,
    ``end_pos``, ``line``, ``column``, ``end_line``, ``end_column``); lines and columns are
    1-based, positions 0-based code-point offsets, ends exclusive."""

    __slots__ = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __init__(self, type: str, value: str, start_pos: int, line: int, column: int,
                 end_line: int, end_column: int, end_pos: int) -> None:
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.end_pos = end_pos

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, {self.line}:{self.column})"


class LineIndex:
    """Offsets -> Spans without rescanning the text."""

    __slots__ = ("text", "starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = line_starts(text)

    def span(self, start: int, end: int) -> Span:
        n = len(self.text)
        start = max(0, min(start, n))
        end = max(start, min(end, n))
        li = bisect_right(self.starts, start) - 1
        le = bisect_right(self.starts, end) - 1
        return Span(li + 1, start - self.starts[li] + 1, le + 1, end - self.starts[le] + 1, start, end)


_SPAN_SETTERS = tuple(Span.__dict__[f].__set__ for f in
                      ("line", "column", "end_line", "end_column", "offset", "end_offset"))


def new_span(line: int, column: int, end_line: int, end_column: int, offset: int,
             end_offset: int, _new=object.__new__, _span=Span, _s0=_SPAN_SETTERS[0],
             _s1=_SPAN_SETTERS[1], _s2=_SPAN_SETTERS[2], _s3=_SPAN_SETTERS[3],
             _s4=_SPAN_SETTERS[4], _s5=_SPAN_SETTERS[5]) -> Span:
    """``Span(...)`` without the frozen dataclass's slow ``__init__`` (same object)."""
    s = _new(_span)
    _s0(s, line)
    _s1(s, column)
    _s2(s, end_line)
    _s3(s, end_column)
    _s4(s, offset)
    _s5(s, end_offset)
    return s


def tok_span(a: Token, b: Token | None = None) -> Span:
    """The span from the start of token ``a`` to the end of token ``b`` (default: ``a``)."""
    if b is None:
        b = a
    return new_span(a.line, a.column, b.end_line, b.end_column, a.start_pos, b.end_pos)


def cover(a: Span, b: Span) -> Span:
    """The span from the start of ``a`` to the end of ``b``."""
    return new_span(a.line, a.column, b.end_line, b.end_column, a.offset, b.end_offset)


class Lexed:
    """The tokens of a text. ``balanced``: every ``{``, ``[`` and ``(`` is closed, in order of
    kind-blind depth (no closer without an opener, none left open); when False the text
    cannot be valid and the LALR attempt is skipped."""

    __slots__ = ("tokens", "comments", "diagnostics", "index", "balanced")

    def __init__(self, tokens, comments, diagnostics, index, balanced=True):
        self.tokens: list[Token] = tokens
        self.comments: list[ast.Comment] = comments
        self.diagnostics: list[Diagnostic] = diagnostics
        self.index: LineIndex = index
        self.balanced: bool = balanced


def tokenize(text: str, path: str | None = None) -> Lexed:
    """Split ``text`` into tokens; never raises."""
    tokens: list[Token] = []
    comments: list[ast.Comment] = []
    diags: list[Diagnostic] = []
    index = LineIndex(text)
    append = tokens.append
    finditer = _TOKEN_RE.finditer
    keywords = KEYWORD_TYPES
    punct_types = PUNCT_TYPES
    units = schema.UNITS
    depth = 0              # '[' and '(' nesting
    braces = 0             # '{' nesting
    balanced = True
    depth_reported = False
    starts = index.starts
    n = len(text)
    first = 1 if text.startswith("\ufeff") else 0   # a byte-order mark is not content

    def err(code: str, msg: str, start: int, end: int, fixes=()) -> None:
        diags.append(make(code, msg, index.span(start, end), file=path, fixes=fixes))

    for line, line_start in enumerate(starts, 1):
        line_end = starts[line] - 1 if line < len(starts) else n
        # trailing spaces: a scan would retry the pattern at each of them (quadratic)
        while line_end > line_start and text[line_end - 1] in " \t\r\f\v":
            line_end -= 1
        if line_start == line_end:
            continue
        for m in finditer(text, line_start + first if line == 1 else line_start, line_end):
            kind = m.lastgroup
            end = m.end()
            if kind == "name":
                start = m.start(kind)
                word = m.group(kind)
                ktype = keywords.get(word)
                if ktype is None:
                    ktype = "NAME"
                    if word in units and tokens:
                        prev = tokens[-1]
                        if prev.type == "NUMBER" and (
                                (prev.line == line and text[prev.end_pos:start].strip(" \t") == "")
                                # `for 100` + newline or comment + `accesses`: after `for N`
                                # only a unit can follow, wherever it is
                                or (len(tokens) > 1 and tokens[-2].type == "FOR")):
                            ktype = "UNIT"
                append(Token(ktype, word, start, line, start - line_start + 1, line,
                             end - line_start + 1, end))
            elif kind == "hyphen":
                # `cpu-fallback`, `my-policy`: '-' cannot be part of a name; one diagnostic
                # with the underscore spelling as its fix, and the parser reads the name that
                # way (name_text), so nothing else complains about it
                start = m.start("name")
                word = text[start:end]
                fixed = word.replace("-", "_")
                if fixed in _known_words():
                    msg = f"'{word}' is not a name: names use '_', not '-'; did you mean '{fixed}'?"
                else:
                    msg = f"'{word}' is not a name: names use '_', not '-'; write '{fixed}'"
                span = index.span(start, end)
                err("MPL001", msg, start, end,
                    (Fix(f"Replace '{word}' with '{fixed}'", (TextEdit(span, fixed),)),))
                append(Token("NAME", word, start, line, start - line_start + 1, line,
                             end - line_start + 1, end))
            elif kind == "index":
                # `gpu:1`: a name glued to ':' and an integer is one value (a device); a
                # keyword stays a keyword, followed by ':' and the number (`true:1`)
                start = m.start("name")
                word = m.group("name")
                col = start - line_start + 1
                ktype = keywords.get(word)
                if ktype is None:
                    append(Token("INDEXED", text[start:end], start, line, col, line,
                                 end - line_start + 1, end))
                else:
                    colon = m.start(kind)
                    append(Token(ktype, word, start, line, col, line, colon - line_start + 1, colon))
                    append(Token("COLON", ":", colon, line, colon - line_start + 1, line,
                                 colon - line_start + 2, colon + 1))
                    append(Token("NUMBER", text[colon + 1:end], colon + 1, line,
                                 colon - line_start + 2, line, end - line_start + 1, end))
            elif kind == "punct":
                start = m.start(kind)
                c = m.group(kind)
                if c == "{":
                    braces += 1
                    if braces > MAX_ITEM_DEPTH and not depth_reported:
                        depth_reported = True
                        err("MPL002", f"items nested deeper than {MAX_ITEM_DEPTH} levels", start, end)
                elif c == "}":
                    braces -= 1
                    if braces < 0:
                        balanced, braces = False, 0
                elif c == "[" or c == "(":
                    depth += 1
                    if depth > MAX_LIST_DEPTH and not depth_reported:
                        depth_reported = True
                        err("MPL002", f"lists and calls nested deeper than {MAX_LIST_DEPTH} levels",
                            start, end)
                elif c == "]" or c == ")":
                    depth -= 1
                    if depth < 0:
                        balanced, depth = False, 0
                col = start - line_start + 1
                append(Token(punct_types[c], c, start, line, col, line, col + len(c), end))
            elif kind == "num" or kind == "unit":
                start = m.start("num")
                num_end = m.end("num")
                literal = m.group("num")
                col = start - line_start + 1
                if number_value(literal) is None:
                    err("MPL004", f"number {literal[:30]!r} is too large to represent", start, num_end)
                    append(Token(ERROR, literal, start, line, col, line, num_end - line_start + 1,
                                 num_end))
                else:
                    append(Token("NUMBER", literal, start, line, col, line,
                                 num_end - line_start + 1, num_end))
                if kind == "unit" and m.group(kind) not in units and _next_item(text, end, line_end):
                    # `capacity = 8eviction = lru`: a missing space, not a unit (the original
                    # split there); one error with the fix, then read as two items
                    word = m.group(kind)
                    span = index.span(num_end, num_end)
                    err("MPL002", f"missing space between {literal} and '{word}': write "
                        f"'{literal} {word}'", num_end, end,
                        (Fix("Insert a space", (TextEdit(span, " "),)),))
                    append(Token("NAME", word, num_end, line, num_end - line_start + 1,
                                 line, end - line_start + 1, end))
                elif kind == "unit":  # glued unit, known or not
                    append(Token("UNIT", m.group(kind), num_end, line, num_end - line_start + 1,
                                 line, end - line_start + 1, end))
            elif kind == "badnum":
                start = m.start("num")
                err("MPL004", f"malformed number {text[start:end]!r}", start, end)
                append(Token(ERROR, text[start:end], start, line, start - line_start + 1, line,
                             end - line_start + 1, end))
            elif kind == "comment":
                start = m.start(kind)
                comments.append(ast.Comment(
                    new_span(line, start - line_start + 1, line, end - line_start + 1, start, end),
                    m.group(kind)))
            elif kind == "str" or kind == "op":
                start = m.start(kind)
                append(Token("STRING" if kind == "str" else "OP", m.group(kind), start, line,
                             start - line_start + 1, line, end - line_start + 1, end))
            elif kind == "ustr":  # unterminated string: up to the end of the line
                start = m.start(kind)
                append(Token("STRING", m.group(kind), start, line, start - line_start + 1, line,
                             end - line_start + 1, end))
                err("MPL004", "unterminated string: add the closing '\"' on the same line", start, end)
            elif kind == "bad":
                start = m.start(kind)
                bad = m.group(kind)
                shown = bad if len(bad) <= 20 else bad[:20] + "..."
                if bad == "-":
                    msg = "unexpected '-': a minus sign must be followed directly by a number, e.g. -1"
                elif bad == "!":
                    msg = "unexpected '!': did you mean '!='?"
                elif len(bad) == 1:
                    msg = f"unexpected character {shown!r}"
                else:
                    msg = f"unexpected characters {shown!r}"
                err("MPL001", msg, start, end)
                append(Token(STRAY, bad, start, line, start - line_start + 1, line,
                             end - line_start + 1, end))
    return Lexed(tokens, comments, diags, index, balanced and braces == 0 and depth == 0)


def _next_item(text: str, pos: int, line_end: int) -> bool:
    """Whether ``text[pos:]`` continues, on this line, with ``=`` (not ``==``), ``{`` or
    ``.``: the name before ``pos`` starts the next item, it is not a unit."""
    i = pos
    while i < line_end and text[i] in " \t":
        i += 1
    if i >= line_end:
        return False
    c = text[i]
    return c in "{." or (c == "=" and text[i + 1:i + 2] != "=")


def policy_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a policy in a .moe file, or None when it can. The tokenizer
    decides (one NAME token: letters, digits and '_', not starting with a digit, and not one
    of the language's keywords, or one keyword: after ``policy`` and ``extends`` the grammar
    reads any keyword as a name), so this is the parser's own notion of a policy name."""
    if not isinstance(name, str):
        return f"a policy name is text, not {type(name).__name__}"
    lexed = tokenize(name)
    toks = lexed.tokens
    if len(toks) == 1 and toks[0].value == name and not lexed.diagnostics and not lexed.comments:
        # a keyword names a policy too: after 'policy' and 'extends' only a name can come
        return None
    return (f"'{name}' is not a policy name: use letters, digits and '_', not starting "
            f"with a digit")
