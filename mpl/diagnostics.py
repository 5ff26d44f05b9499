"""Diagnostics as data: spans, severities, related locations and fix edits.

The checker and the parser produce :class:`Diagnostic` objects; the CLI renders them, the
language server publishes them. Neither invents messages. The codes (severity, title,
explanation, and the cross-field checks) are in :mod:`mpl.rules`, which also builds a
diagnostic of a code (:func:`mpl.rules.make`).

Positions: ``line`` and ``column`` are 1-based (column counts code points), ``offset`` and
``end_offset`` are 0-based code-point offsets into the text, ``end`` is exclusive.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum


#: texts at least this long get a line-start index in Span.from_offsets (shorter ones are
#: counted directly: cheaper than building the index)
_INDEX_MIN = 4096
_LAST_INDEX: tuple[str, list[int]] = ("", [0])


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line (``\n`` ends a line)."""
    starts = [0]
    find = text.find
    i = find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = find("\n", i + 1)
    return starts


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
        if n >= _INDEX_MIN:
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


@dataclass(frozen=True, slots=True)
class Fix:
    title: str                    # "Replace 'capcity' with 'capacity'"
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True, slots=True)
class Related:
    message: str                  # "first defined here"
    span: Span
    file: str | None = None       # None: the diagnostic's file


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str                     # "MPL102"
    severity: Severity
    message: str
    span: Span
    file: str | None = None
    related: tuple[Related, ...] = ()
    fixes: tuple[Fix, ...] = ()

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


def has_errors(diags) -> bool:
    return any(d.severity is Severity.ERROR for d in diags)


def sort_key(d: Diagnostic):
    return (d.file or "", d.span.offset, d.span.end_offset, d.code)


def docs_url(code: str) -> str:
    """Link to the code's section in docs/diagnostics.md (used by the LSP's codeDescription)."""
    return f"https://github.com/moe-policylang/moe-policylang/blob/main/docs/diagnostics.md#{code.lower()}"
