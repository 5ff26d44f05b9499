"""``mplc fmt FILE... [--check] [--diff]``: rewrite policy files in the canonical layout.

* default: rewrite each file that is not canonical, atomically (a temporary file in the same
  directory, then ``os.replace``; the file's permissions are kept);
* ``--check``: write nothing; list the files that would change; exit 1 if any would;
* ``--diff``: write nothing; print a unified diff of each change (with ``--check`` the exit
  status is 1 when there is a diff);
* ``-`` as the only FILE: format standard input to standard output (``--check`` prints
  ``would reformat <stdin>``). ``-`` with other files, or twice, is a usage error (exit 2):
  the standard input can be read only once and has no file to rewrite.

A file with syntax errors is never rewritten: its diagnostics are printed (as ``mplc check``
prints them) and the exit status is 1. So is a missing file or a directory. Exit 2 on usage
errors.
"""

from __future__ import annotations

import difflib
import sys

from mpl.fileio import write_atomic as write_atomic_file


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="policy files (.moe or .policy); '-' formats standard input to standard output")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 and list the files that would be reformatted")
    p.add_argument("--diff", action="store_true",
                   help="write nothing; print a unified diff of the changes")


def _read(path: str) -> tuple[str | None, str | None, str | None]:
    """(text as parsed, text as on disk, None) or (None, None, error message); one read.
    The two differ only by a byte-order mark, which the formatted text never has."""
    from mpl.checker import read_source

    raw, err = read_source(path, keep_bom=True)
    if err is not None:
        return None, None, err.message
    return (raw[1:] if raw.startswith("\ufeff") else raw), raw, None


def _print_diagnostics(diags, path: str, text: str) -> None:
    try:
        from mpl.cli.render import render_all, use_color
    except ImportError:  # the renderer is optional for this command
        for d in diags:
            print(f"{path}:{d.span.line}:{d.span.column}: {d.severity.value}[{d.code}]: {d.message}",
                  file=sys.stderr)
        return
    diags = [d if d.file is not None else _with_file(d, path) for d in diags]
    print(render_all(diags, {path: text}, color=use_color(sys.stderr)), file=sys.stderr)


def _with_file(d, path):
    from dataclasses import replace

    return replace(d, file=path)


def write_atomic(path: str, text: str) -> None:
    """Replace the contents of ``path`` by ``text`` in one step (keeps the file's mode)."""
    write_atomic_file(path, text, keep_mode=True)


def _stdin(args) -> int:
    from mpl.fmt import FormatError, format_text

    from mpl.fileio import ReadError, read_stdin_text

    try:
        text = read_stdin_text()
    except (ReadError, OSError) as e:
        print(f"mplc fmt: error: {e}", file=sys.stderr)
        return 1
    try:
        out = format_text(text)
    except FormatError as e:
        _print_diagnostics(e.diagnostics, "<stdin>", text)
        return 1
    if args.diff:
        sys.stdout.writelines(_diff(text, out, "<stdin>"))
    if args.check:
        if out != text:
            print("would reformat <stdin>")
            return 1
        return 0
    if not args.diff:
        sys.stdout.write(out)
    return 0


def _diff(old: str, new: str, path: str):
    """Unified diff lines; a last line without a line end is marked as diff(1) marks it, and
    a line ended by a lone '\r' (an old Mac file) is shown ended by '\n'."""
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), path,
                                     f"{path} (formatted)"):
        if line.endswith("\n"):
            yield line
        elif line.endswith("\r"):
            yield line[:-1] + "\n"
        else:
            yield line + "\n\\ No newline at end of file\n"


def run(args) -> int:
    from mpl.fmt import FormatError, format_text

    if args.files == ["-"]:
        return _stdin(args)
    if "-" in args.files:
        why = ("the standard input can be read only once: give '-' once"
               if args.files.count("-") > 1 else
               "'-' (the standard input, formatted to the standard output) must be the only FILE")
        print(f"mplc fmt: error: {why}", file=sys.stderr)
        return 2
    status = 0
    changed = unchanged = failed = 0
    for path in args.files:
        text, raw, err = _read(path)
        if err is not None:
            print(f"mplc fmt: error: {err}", file=sys.stderr)
            status, failed = 1, failed + 1
            continue
        try:
            out = format_text(text)
        except FormatError as e:
            print(f"mplc fmt: error: not formatting '{path}': it has syntax errors", file=sys.stderr)
            _print_diagnostics(e.diagnostics, path, text)
            status, failed = 1, failed + 1
            continue
        if out == raw:
            unchanged += 1
            continue
        changed += 1
        if args.diff:
            sys.stdout.writelines(_diff(raw, out, path))
        if args.check:
            print(f"would reformat {path}")
            status = 1
        elif not args.diff:
            try:
                write_atomic(path, out)
            except OSError as e:
                print(f"mplc fmt: error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
                status, failed, changed = 1, failed + 1, changed - 1
                continue
            print(f"reformatted {path}", file=sys.stderr)
    verb = "would be reformatted" if (args.check or args.diff) else "reformatted"
    parts = [f"{changed} file{'s' if changed != 1 else ''} {verb}",
             f"{unchanged} already formatted"]
    if failed:
        parts.append(f"{failed} failed")
    print(", ".join(parts), file=sys.stderr)
    return status
