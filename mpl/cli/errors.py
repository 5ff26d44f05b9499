"""How ``mplc`` reports a problem: one prefix for every command, ``mplc COMMAND: error:
MESSAGE`` (argparse's own usage errors read the same), on the standard error. Diagnostics of
a policy keep their own located form (``file:line:col: error[MPL102]: ...``)."""

from __future__ import annotations

import sys

#: the exit status of a wrong input, and of a usage error (argparse's convention)
INPUT, USAGE = 1, 2


def error(prog: str, message: str, status: int = INPUT) -> int:
    """Print ``PROG: error: MESSAGE`` on the standard error; returns ``status``."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status


def usage(prog: str, message: str) -> int:
    """A usage error (exit 2)."""
    return error(prog, message, USAGE)


def warn(prog: str, message: str) -> None:
    """``PROG: warning: MESSAGE`` (a deprecated option, a note that changes nothing)."""
    print(f"{prog}: warning: {message}", file=sys.stderr)


def note(prog: str, message: str) -> None:
    """``PROG: note: MESSAGE`` on the standard error (what an option was taken to mean)."""
    print(f"{prog}: note: {message}", file=sys.stderr)
