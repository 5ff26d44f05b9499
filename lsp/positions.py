"""Positions: code-point offsets (what :class:`mpl.diagnostics.Span` uses) <-> LSP positions.

LSP positions are ``(line, character)`` with ``character`` counted in the negotiated position
encoding: UTF-16 code units (the default), UTF-8 bytes or UTF-32 code points. A
:class:`LineIndex` is built once per document version and converts both ways.
"""

from __future__ import annotations

import bisect

from lsprotocol import types

from mpl.syntax.lexer import line_starts

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"


def _units(ch: str, encoding: str) -> int:
    """Length of one code point in ``encoding`` units."""
    o = ord(ch)
    if encoding == UTF16:
        return 2 if o > 0xFFFF else 1
    if encoding == UTF8:
        return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return 1


def normalize_encoding(encoding) -> str:
    value = getattr(encoding, "value", encoding) or UTF16
    value = str(value).lower()
    return value if value in (UTF8, UTF16, UTF32) else UTF16


class LineIndex:
    """Line starts of one text, for conversions in a given position encoding. A conversion
    costs O(log n), also on a long line with characters wider than one unit: such a line's
    wide characters are listed once, when a conversion first needs them."""

    def __init__(self, text: str, encoding=UTF16) -> None:
        self.text = text
        self.encoding = normalize_encoding(encoding)
        self.line_starts = line_starts(text)
        #: every character is one unit: a column is a code-point count
        self._narrow = self.encoding == UTF32 or text.isascii()
        self._wide: dict[int, tuple[list[int], list[int]]] = {}

    def _wide_chars(self, line: int) -> tuple[list[int], list[int]]:
        """(offsets of the characters of 0-based ``line`` that take more than one unit, the
        extra units taken by each of them and those before it on the line)."""
        got = self._wide.get(line)
        if got is None:
            starts = self.line_starts
            start = starts[line]
            seg = self.text[start:starts[line + 1] if line + 1 < len(starts) else len(self.text)]
            offsets: list[int] = []
            extra: list[int] = []
            if not seg.isascii():
                enc, total = self.encoding, 0
                for k, ch in enumerate(seg):
                    u = _units(ch, enc)
                    if u > 1:
                        total += u - 1
                        offsets.append(start + k)
                        extra.append(total)
            got = self._wide[line] = (offsets, extra)
        return got

    def _column(self, line: int, offset: int) -> int:
        """Units from the start of 0-based ``line`` to the code-point ``offset`` on it."""
        column = offset - self.line_starts[line]
        if self._narrow:
            return column
        offsets, extra = self._wide_chars(line)
        k = bisect.bisect_left(offsets, offset)     # wide characters before ``offset``
        return column + (extra[k - 1] if k else 0)

    # ------------------------------------------------------------ offset -> position
    def line_of(self, offset: int) -> int:
        """0-based line holding the code-point ``offset``."""
        return bisect.bisect_right(self.line_starts, offset) - 1

    def position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        line = self.line_of(offset)
        return types.Position(line=line, character=self._column(line, offset))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(max(start, end)))

    def offset_lc(self, line: int, column: int) -> int:
        """Code-point offset of a 1-based (line, column), clamped into that line."""
        if line < 1:
            return 0
        if line > len(self.line_starts):
            return len(self.text)
        start = self.line_starts[line - 1]
        return min(start + max(0, column - 1), self.content_end(line - 1))

    def span_offsets(self, span) -> tuple[int, int]:
        """Code-point (start, end) of a span in *this* text, by its line/column."""
        start = self.offset_lc(span.line, span.column)
        return start, max(start, self.offset_lc(span.end_line, span.end_column))

    def span_range(self, span) -> types.Range:
        """LSP range of an :class:`mpl.diagnostics.Span`. Uses its line/column (not its
        offsets): the checker normalizes CRLF line ends, which shifts offsets but not
        columns."""
        start = self.offset_lc(span.line, span.column)
        end = self.offset_lc(span.end_line, span.end_column)
        return self.range(start, max(start, end))

    def content_end(self, line: int) -> int:
        """Code-point offset where 0-based ``line``'s content ends: before its '\n', '\r\n'
        or lone '\r' (a position past it means it, and an edit there never splits a CRLF)."""
        starts = self.line_starts
        if line + 1 >= len(starts):
            return len(self.text)
        end = starts[line + 1] - 1
        if end > starts[line] and self.text[end] == "\n" and self.text[end - 1] == "\r":
            end -= 1
        return end

    # ------------------------------------------------------------ position -> offset
    def offset(self, position: types.Position) -> int:
        """Code-point offset of an LSP position, clamped into the text (a character past
        the end of a line means the end of that line, as the LSP specification says)."""
        line = position.line
        if line < 0:
            return 0
        if line >= len(self.line_starts):
            return len(self.text)
        start = self.line_starts[line]
        end = self.content_end(line)
        want = max(0, position.character)
        if self._narrow:
            return min(start + want, end)
        # the first offset at least ``want`` units into the line (inside a character wider
        # than one unit: the one after it), else the end of the line
        lo, hi = start, end
        while lo < hi:
            mid = (lo + hi) // 2
            if self._column(line, mid) >= want:
                hi = mid
            else:
                lo = mid + 1
        return lo

    @property
    def end_position(self) -> types.Position:
        return self.position(len(self.text))
