"""Diagnostics as data: spans, severities, related locations and fix edits.

The checker and the parser produce :class:`Diagnostic` objects; the CLI renders them, the
language server publishes them. Neither invents messages. The codes (severity, title,
explanation, and the cross-field checks) are in :mod:`mpl.rules`, which also builds a
diagnostic of a code (:func:`mpl.rules.make`).

Positions: ``line`` and ``column`` are 1-based (column counts code points), ``offset`` and
``end_offset`` are 0-based code-point offsets into the text, ``end`` is exclusive.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from enum import Enum


#: texts at least this long get a line-start index in Span.from_offsets (shorter ones are
#: counted directly: cheaper than building the index)
_INDEX_MIN = 4096
_LAST_INDEX: tuple[str, list[int]] = ("", [0])


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line. ``\n``, ``\r\n`` and a lone ``\r`` (old
    Mac files) end a line, as in editors and the LSP specification."""
    if "\r" in text:
        return [0, *(m.end() for m in _LINE_END_RE.finditer(text))]
    starts = [0]
    find = text.find
    i = find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = find("\n", i + 1)
    return starts


_LINE_END_RE = re.compile(r"\r\n?|\n")


def line_end(text: str, i: int) -> tuple[int, int]:
    """``(end of the content, start of the next line)`` of the line holding offset ``i``
    (``(len(text), len(text))`` on the last line)."""
    m = _LINE_END_RE.search(text, i)
    return (m.start(), m.end()) if m else (len(text), len(text))


def line_start(text: str, i: int) -> int:
    """Offset of the first character of the line holding offset ``i``."""
    return max(text.rfind("\n", 0, i), text.rfind("\r", 0, i)) + 1


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their ends, the lines :func:`line_starts` counts."""
    return _LINE_END_RE.split(text) if "\r" in text else text.split("\n")


def _line_starts(text: str) -> list[int]:
    """:func:`line_starts` of ``text``, cached for the last text asked about (the checker asks
    about one file many times in a row)."""
    global _LAST_INDEX
    last = _LAST_INDEX            # one read: another thread may swap it meanwhile
    if last[0] is text:
        return last[1]
    starts = line_starts(text)
    _LAST_INDEX = (text, starts)
    return starts


@dataclass(frozen=True, slots=True)
class Span:
    line: int          # 1-based
    column: int        # 1-based
    end_line: int      # 1-based
    end_column: int    # 1-based, exclusive
    offset: int        # 0-based, inclusive
    end_offset: int    # 0-based, exclusive

    @classmethod
    def from_offsets(cls, text: str, start: int, end: int) -> "Span":
        """Compute line/column from offsets (clamped into the text). In a long text the
        lines are found by bisection in the text's line starts (built once per text), so
        a file with many diagnostics costs O(log n) per span, not O(n)."""
        n = len(text)
        start = max(0, min(start, n))
        end = max(start, min(end, n))
        if n >= _INDEX_MIN or "\r" in text:    # a lone '\r' ends a line too: line_starts knows
            starts = _line_starts(text)
            line = bisect_right(starts, start)
            eline = bisect_right(starts, end, line - 1)
            return cls(line, start - starts[line - 1] + 1, eline, end - starts[eline - 1] + 1, start, end)
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        eline = line + text.count("\n", start, end)
        ecol = end - (text.rfind("\n", 0, end) + 1) + 1
        return cls(line, col, eline, ecol, start, end)

    @classmethod
    def point(cls, text: str, offset: int) -> "Span":
        return cls.from_offsets(text, offset, offset)

    def cover(self, other: "Span") -> "Span":
        a, b = (self, other) if self.offset <= other.offset else (other, self)
        end = self if self.end_offset >= other.end_offset else other
        return Span(a.line, a.column, end.end_line, end.end_column, a.offset, end.end_offset)

    def contains(self, offset: int) -> bool:
        return self.offset <= offset <= self.end_offset


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    HINT = "hint"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class TextEdit:
    span: Span
    new_text: str
    file: str | None = None       # None: the diagnostic's file


#: the most characters of a diagnostic's message (or fix title, related note): a message
#: quoting a huge token (a 1 MB name) is cut in the middle, where the quote is, when the
#: diagnostic is made
MESSAGE_LIMIT = 1000


def clip_text(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` when it has at most ``limit`` characters; else its start and end (two thirds
    and one third of ``limit``) around :data:`ELLIPSIS`."""
    if len(text) <= limit:
        return text
    head = (2 * limit) // 3
    tail = limit - head - len(ELLIPSIS)
    return text[:head] + ELLIPSIS + text[len(text) - tail:]


def _clip_field(obj, name: str) -> None:
    text = getattr(obj, name)
    if isinstance(text, str) and len(text) > MESSAGE_LIMIT:
        object.__setattr__(obj, name, clip_text(text))


@dataclass(frozen=True, slots=True)
class Fix:
    title: str                    # "Replace 'capcity' with 'capacity'" (clipped: clip_text)
    edits: tuple[TextEdit, ...]   # whole: an edit's new_text is never cut

    def __post_init__(self):
        _clip_field(self, "title")


@dataclass(frozen=True, slots=True)
class Related:
    message: str                  # "first defined here" (clipped: clip_text)
    span: Span
    file: str | None = None       # None: the diagnostic's file

    def __post_init__(self):
        _clip_field(self, "message")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str                     # "MPL102"
    severity: Severity
    message: str
    span: Span
    file: str | None = None
    related: tuple[Related, ...] = ()
    fixes: tuple[Fix, ...] = ()

    def __post_init__(self):
        # a message quoting a huge token (a 1 MB name) is cut where it is made, so every
        # consumer (text, JSON, LSP, PolicyError) carries a bounded message
        _clip_field(self, "message")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_dict(self) -> dict:
        def sp(s: Span) -> dict:
            return {"line": s.line, "column": s.column, "end_line": s.end_line,
                    "end_column": s.end_column, "offset": s.offset, "end_offset": s.end_offset}
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "span": sp(self.span),
            "related": [{"message": r.message, "file": r.file, "span": sp(r.span)} for r in self.related],
            "fixes": [{"title": f.title, "edits": [{"file": e.file, "span": sp(e.span), "new_text": e.new_text}
                                                   for e in f.edits]} for f in self.fixes],
        }


#: the most display columns of a source line a rendered snippet shows: a longer line is cut
#: to a window around the span, each cut marked with ``...`` (as rustc does), so rendering a
#: diagnostic costs the same on a 1 MB line as on a short one
SNIPPET_WIDTH = 120
#: columns of context kept left of the span in a cut line (more when the span ends the line)
SNIPPET_CONTEXT = 40
#: marks a cut in a snippet
ELLIPSIS = "..."
TAB_WIDTH = 4      # a tab shows as this many spaces


@dataclass(frozen=True, slots=True)
class SnippetLine:
    """The part of a source line a snippet shows: ``text`` (tabs expanded, cuts marked with
    :data:`ELLIPSIS`) and the display columns ``start`` .. ``end`` (0-based, exclusive, at
    least one column) that the underline covers."""
    text: str
    start: int
    end: int
    cut_left: bool = False
    cut_right: bool = False


def _cols(line: str, a: int, b: int) -> int:
    """Display columns of ``line[a:b]`` (a tab is TAB_WIDTH)."""
    return (b - a) + (TAB_WIDTH - 1) * line.count("\t", a, b) if b > a else 0


def snippet_window(line: str, start: int, end: int | None,
                   width: int = SNIPPET_WIDTH) -> SnippetLine:
    """The window of ``line`` a snippet shows for the code-point columns ``start`` .. ``end``
    (0-based, end exclusive; either may lie past the line's end: the underline then extends
    past it; ``end=None``: to the line's end, for a span that goes on to later lines). A line
    of at most ``width`` display columns is shown whole; a longer one is cut around the span,
    keeping :data:`SNIPPET_CONTEXT` columns before it (more when the span is near the line's
    end) and at most ``width`` columns in all; a span wider than the window is underlined up
    to the cut. Costs O(width), however long the line (a trailing ``\r`` is not shown)."""
    n = len(line)
    if n and line[n - 1] == "\r":
        n -= 1
    start = max(0, start)
    end = max(n if end is None else end, start + 1)
    if n <= width and _cols(line, 0, n) <= width:
        lo, hi = 0, n
    else:
        s, e = min(start, n), min(end, n)
        span_w = _cols(line, s, min(e, s + width))
        right_w = _cols(line, e, min(n, e + width))
        left = min(width - 1, max(SNIPPET_CONTEXT, width - min(span_w, width) - right_w))
        lo = max(0, s - left)
        if "\t" in line[lo:s]:             # tabs are wider: walk back column by column
            lo, used = s, 0
            while lo > 0:
                w = TAB_WIDTH if line[lo - 1] == "\t" else 1
                if used + w > left:
                    break
                lo -= 1
                used += w
        hi = min(n, lo + width)
        if "\t" in line[lo:hi]:
            hi, used = lo, 0
            while hi < n:
                w = TAB_WIDTH if line[hi] == "\t" else 1
                if used + w > width:
                    break
                hi += 1
                used += w
        mark = len(ELLIPSIS)                # a cut hiding no more than its mark: show all
        if lo <= mark and _cols(line, 0, lo) <= mark:
            lo = 0
        if n - hi <= mark and _cols(line, hi, n) <= mark:
            hi = n
    pre = len(ELLIPSIS) if lo > 0 else 0
    shown = line[lo:hi].replace("\t", " " * TAB_WIDTH)
    text = (ELLIPSIS if lo > 0 else "") + shown + (ELLIPSIS if hi < n else "")
    ds = pre + _cols(line, lo, min(start, n)) + max(0, start - n)
    if end <= hi or hi < n:
        de = pre + _cols(line, lo, min(end, hi))
    else:                                   # past the end of a line shown to its end
        de = pre + _cols(line, lo, n) + (end - n)
    return SnippetLine(text, ds, max(de, ds + 1), lo > 0, hi < n)


class PolicyError(Exception):
    """The policy has errors; ``.diagnostics`` holds them (each with code, span, message).

    Public as ``mpl.PolicyError`` (and ``mpl.api.PolicyError``); defined here, beside the
    diagnostics it carries, so that the engine-neutral mechanism (``mpl.mechanism.preflight``)
    can raise one without importing the API."""

    def __init__(self, message: str, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


def has_errors(diags) -> bool:
    return any(d.severity is Severity.ERROR for d in diags)


def sort_key(d: Diagnostic):
    return (d.file or "", d.span.offset, d.span.end_offset, d.code)


def docs_url(code: str) -> str:
    """Link to the code's section in docs/diagnostics.md (used by the LSP's codeDescription)."""
    return f"https://github.com/moe-policylang/moe-policylang/blob/main/docs/diagnostics.md#{code.lower()}"
