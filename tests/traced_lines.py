"""Work measured by the Python lines a call runs, which, unlike a clock, is the same on every
run and machine: the scaling tests compare it between sizes of input."""

from __future__ import annotations

import sys


def traced_lines(fn, *args, under: str | None = None):
    """``(fn(*args), the number of Python lines it ran)``, comprehension bodies once per
    item; ``under``: only the lines of the files under that folder (a path ending in the
    separator). The tracer in force before the call is put back after it."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if under is None or frame.f_code.co_filename.startswith(under) else None

    old = sys.gettrace()
    sys.settrace(calls)
    try:
        result = fn(*args)
    finally:
        sys.settrace(old)
    return result, count
