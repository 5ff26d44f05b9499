"""Small helpers shared by the checker passes: a diagnostic sink bound to one file,
did-you-mean suggestions, and the spans of mechanical fixes."""

from __future__ import annotations

import difflib
from typing import Iterable

from mpl.diagnostics import Diagnostic, Fix, Related, Span, TextEdit, line_end, line_start
from mpl.rules import make
from mpl.rules.base import INVALID, fmt_num  # noqa: F401  (the checker passes use them from here)


class Sink:
    """Collects the diagnostics of one file (``file`` is stamped on each of them)."""

    def __init__(self, file: str | None, text: str) -> None:
        self.file = file
        self.text = text
        self.diags: list[Diagnostic] = []

    def emit(self, code: str, message: str, span: Span, *, related: Iterable[Related] = (),
             fixes: Iterable[Fix] = ()) -> Diagnostic:
        d = make(code, message, span, file=self.file, related=tuple(related), fixes=tuple(fixes))
        self.diags.append(d)
        return d

    def span(self, start: int, end: int) -> Span:
        return Span.from_offsets(self.text, start, end)


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``name`` (case-insensitive first), or None."""
    cands = list(dict.fromkeys(candidates))
    low = name.lower()
    for c in cands:
        if c.lower() == low:
            return c
    got = difflib.get_close_matches(name, cands, n=1, cutoff=0.6)
    if not got:
        got = difflib.get_close_matches(low, cands, n=1, cutoff=0.6)
    return got[0] if got else None


def did_you_mean(name: str, candidates: Iterable[str]) -> tuple[str, str | None]:
    """(`"; did you mean 'x'?"` or `""`, the suggestion)."""
    s = suggest(name, candidates)
    return (f"; did you mean '{s}'?" if s else ""), s


def replace_fix(title: str, span: Span, new_text: str) -> Fix:
    return Fix(title, (TextEdit(span, new_text),))


def removal_span(text: str, span: Span) -> Span:
    """The span to delete to remove ``span`` cleanly: its whole line(s) when nothing else is
    on them, else the span plus the blanks and one ``;`` that follow it."""
    start, end = span.offset, span.end_offset
    first = line_start(text, start)
    content_end, next_line = line_end(text, end)
    before = text[first:start]
    after = text[end:content_end]
    after_code = after.split("#", 1)[0] if "#" in after else after
    if not before.strip() and not after_code.strip().strip(";").strip():
        if "#" in after:       # keep a trailing comment on its own
            return Span.from_offsets(text, start, end + len(after) - len(after.lstrip(" \t;")))
        return Span.from_offsets(text, first, next_line)
    stop = end
    while stop < len(text) and text[stop] in " \t":
        stop += 1
    if stop < len(text) and text[stop] == ";":
        stop += 1
        while stop < len(text) and text[stop] in " \t":
            stop += 1
    return Span.from_offsets(text, start, stop)


def remove_fix(title: str, text: str, span: Span) -> Fix:
    return Fix(title, (TextEdit(removal_span(text, span), ""),))


def quote_list(names: Iterable[str]) -> str:
    """``a, b or c``"""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
