"""Render diagnostics for a terminal, rustc/ruff style (shared by ``mplc check`` and
``mplc fmt``)::

    policy.moe:6:9: error[MPL102]: unknown parameter 'capcity' in cache; did you mean 'capacity'?
      |
    6 |         capcity = 4
      |         ^~~~~~~
      = help: Replace 'capcity' with 'capacity'

Related locations follow as notes with their own snippet. A source line longer than
:data:`mpl.diagnostics.SNIPPET_WIDTH` columns is cut to a window around the span, each cut
marked with ``...``, and a message longer than :data:`mpl.diagnostics.MESSAGE_LIMIT` (one
quoting a huge token) is cut in the middle, so a diagnostic's output is bounded however long
its line. Colour only
when asked (the CLI asks when stdout is a terminal and ``NO_COLOR`` is unset).
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Iterable, Mapping

from mpl.diagnostics import Diagnostic, Span, clip_text, snippet_window, split_lines

_COLORS = {
    "error": "\x1b[1;31m", "warning": "\x1b[1;33m", "hint": "\x1b[1;36m", "info": "\x1b[1;36m",
    "note": "\x1b[1;34m", "help": "\x1b[1;32m", "gutter": "\x1b[1;34m", "bold": "\x1b[1m",
}
_RESET = "\x1b[0m"


def use_color(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, what: str, text: str) -> str:
        if not self.color or not text:
            return text
        return f"{_COLORS[what]}{text}{_RESET}"


def _display(path: str | None) -> str:
    return path if path else "<input>"


@functools.lru_cache(maxsize=8)
def _split_lines(text: str) -> tuple[str, ...]:
    """A source's lines, split once however many diagnostics it has (a str caches its hash,
    so finding it again costs nothing)."""
    return tuple(split_lines(text))


def snippet(text: str, span: Span, paint: _Paint, mark: str = "^", rest: str = "~",
            width: int | None = None, tone: str = "error") -> list[str]:
    """The source line of ``span`` with a gutter and an underline; a long line is cut to a
    window around the span (:func:`mpl.diagnostics.snippet_window`)."""
    lines = _split_lines(text)
    if not lines or span.line < 1 or span.line > len(lines):
        return []
    start = span.column - 1
    end = span.end_column - 1 if span.end_line == span.line else None
    win = snippet_window(lines[span.line - 1], start, end)
    num = str(span.line)
    w = width or len(num)
    g = paint("gutter", " " * w + " |")
    underline = " " * win.start + mark + rest * (win.end - win.start - 1)
    return [g, paint("gutter", num.rjust(w) + " |") + " " + win.text,
            g + " " + paint(tone, underline)]


def render(d: Diagnostic, source: str | None, *, color: bool = False,
           sources: Mapping[str | None, str] | None = None) -> str:
    """One diagnostic with its snippet, fixes and related locations."""
    paint = _Paint(color)
    sev = d.severity.value
    head = (f"{paint('bold', f'{_display(d.file)}:{d.span.line}:{d.span.column}:')} "
            f"{paint(sev, f'{sev}[{d.code}]')}: {clip_text(d.message)}")
    out = [head]
    width = len(str(max([d.span.line] + [r.span.line for r in d.related])))
    if source is not None:
        out += snippet(source, d.span, paint, width=width, tone=sev)
    pad = " " * width
    for f in d.fixes:
        out.append(f"{pad} {paint('gutter', '=')} {paint('help', 'help')}: {clip_text(f.title)}")
    for r in d.related:
        rfile = r.file if r.file is not None else d.file
        out.append(f"{pad} {paint('gutter', '=')} {paint('note', 'note')}: {clip_text(r.message)} "
                   f"({_display(rfile)}:{r.span.line}:{r.span.column})")
        rsrc = source if rfile == d.file else (sources or {}).get(rfile)
        if rsrc is not None:
            out += snippet(rsrc, r.span, paint, mark="-", rest="-", width=width, tone="note")
    return "\n".join(out)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(diags: Iterable[Diagnostic], files: int) -> str:
    """``2 files checked: 1 error, 2 warnings`` (or ``...: no problems``)."""
    counts = {s: 0 for s in ("error", "warning", "hint", "info")}
    for d in diags:
        counts[d.severity.value] = counts.get(d.severity.value, 0) + 1
    parts = [_plural(counts[k], k) for k in ("error", "warning", "hint", "info") if counts[k]]
    return f"{_plural(files, 'file')} checked: " + (", ".join(parts) if parts else "no problems")


def render_all(diags: Iterable[Diagnostic], sources: Mapping[str | None, str] | Callable, *,
               color: bool = False) -> str:
    """Every diagnostic, separated by blank lines. ``sources`` maps a file to its text (or is
    a function doing so; None when unknown)."""
    get = sources if callable(sources) else (lambda f: sources.get(f))
    table = {} if callable(sources) else sources
    blocks = [render(d, get(d.file), color=color, sources=table) for d in diags]
    return "\n\n".join(blocks)
