"""The files a command writes, checked before any work is done: an output that is one of
the command's inputs (the same file, reached through a symbolic link or a hard link too) is
refused, so a command never writes its result over what it reads (``mplc trace merge -o
a.mpltrace a.mpltrace b.jsonl``, ``mplc compile x.moe -o x.moe``). The standard output
(``-``) is never an input."""

from __future__ import annotations

import os
import sys


def same_file(a: str, b: str) -> bool:
    """``a`` and ``b`` name one file: the same file once both exist (links and hard links
    followed), else the same path once links are resolved (e.g. two outputs not written
    yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def overwrite_problem(out: str | None, inputs, what: str, option: str = "-o") -> str | None:
    """Why writing ``what`` (e.g. "the module") to ``out`` is refused, or None. ``inputs``:
    ``(kind, path)`` pairs such as ``("trace", args.trace)``, a path None when not given; a
    policy named ``std/NAME`` is the shipped file."""
    from mpl.stdlib_path import resolve

    if out is None or out == "-":
        return None
    for kind, path in inputs:
        if path is not None and path != "-" and same_file(out, resolve(path)):
            return f"refusing to write {what} over the {kind} {path}; choose another {option}"
    return None


def is_standard_output(path: str) -> bool:
    """``path`` is the file the standard output already writes to (``/dev/stdout``, or the
    terminal or pipe it is): writing it as a file as well would interleave the two."""
    try:
        here, there = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):     # no descriptor, no such file
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
