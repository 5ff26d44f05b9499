"""Applying the checker's fixes to a policy's text (``mplc check --fix`` / ``--diff``).

A diagnostic's fix is *machine-applicable* when it is the diagnostic's only fix (a
did-you-mean with one candidate, remove a duplicate or a parameter with no effect, clamp
into range, write the current name of an alias, ...); a diagnostic with several alternative
fixes is left to the user. Edits are applied by offset, from the end of the text; a fix
whose edits overlap an edit already taken waits for the next round, when the text has been
checked again (as ``ruff check --fix`` does). Only edits in the file being fixed are applied
(a fix of an imported file is that file's).
"""

from __future__ import annotations

from typing import Callable, Iterable

from mpl.diagnostics import Diagnostic, Fix

#: the most rounds of fixing one text (each round checks the text again)
MAX_ROUNDS = 10


def applicable(d: Diagnostic, path: str | None) -> Fix | None:
    """The fix ``mplc check --fix`` applies for ``d`` in the file ``path`` (None: none)."""
    if len(d.fixes) != 1 or d.file != path:
        return None
    fix = d.fixes[0]
    if not fix.edits or any(e.file not in (None, path) for e in fix.edits):
        return None
    return fix


def apply_round(text: str, diags: Iterable[Diagnostic], path: str | None) -> tuple[str, int]:
    """``text`` with the applicable fixes of ``diags`` that do not overlap each other
    applied, and how many fixes were applied."""
    taken: list[tuple[int, int, str]] = []
    count = 0
    for d in diags:
        fix = applicable(d, path)
        if fix is None:
            continue
        edits = sorted((e.span.offset, e.span.end_offset, e.new_text) for e in fix.edits)
        if any(not 0 <= a <= b <= len(text) for a, b, _ in edits):
            continue
        if any(_overlaps(a, b, x, y) for a, b, _ in edits for x, y, _ in taken):
            continue             # the next round, once the text is checked again
        if any(_overlaps(a, b, x, y) for i, (a, b, _) in enumerate(edits)
               for x, y, _ in edits[i + 1:]):
            continue
        taken.extend(edits)
        count += 1
    for a, b, new in sorted(taken, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:a] + new + text[b:]
    return text, count


def _overlaps(a: int, b: int, x: int, y: int) -> bool:
    """Whether [a, b) and [x, y) touch the same characters; two insertions at one offset
    also count (their order would be arbitrary)."""
    if a == b and x == y:
        return a == x
    return a < y and x < b


def fix_text(text: str, path: str | None,
             diagnose: Callable[[str], list[Diagnostic]]) -> tuple[str, int]:
    """``text`` after rounds of :func:`apply_round` (``diagnose(text)`` checks a text) until
    no fix applies or :data:`MAX_ROUNDS`; and the number of fixes applied."""
    total = 0
    for _ in range(MAX_ROUNDS):
        new, n = apply_round(text, diagnose(text), path)
        if n == 0 or new == text:
            break
        text, total = new, total + n
    return text, total
