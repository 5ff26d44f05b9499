"""``mplc doctor``: what this installation runs on — the mplc and Python versions and the
runtime backend new runtimes get (the compiled engine, or the pure-Python runtime and why),
with what the engine covers. ``mplc --version`` prints the first lines."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    pass


def version_text() -> str:
    """``mplc VERSION`` and the runtime backend in use (``mplc --version``)."""
    from mpl import __version__
    from mpl.runtime.backend import info as backend_info

    info = backend_info()
    line = f"runtime backend: {info['backend']}"
    if info["reason"]:
        line += f" ({info['reason']})"
    return f"mplc {__version__}\n{line}"


def run(args) -> int:
    from mpl.runtime.backend import info as backend_info
    from mpl.runtime.compiled import COVERAGE

    print(version_text())
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    info = backend_info()
    print(f"compiled engine covers: {COVERAGE}")
    if info["backend"] == "pure":
        print("to use the compiled engine: reinstall with a C compiler present "
              "(pip install -e .) and leave MPL_PURE unset")
    return 0
