"""docs/dsl.md is executable: every ```python block runs, in order, in one namespace, and the
printed text shown after the first example is what the builder prints."""

from __future__ import annotations

import contextlib
import io
import linecache
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "dsl.md")

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    linecache.cache[DOC] = (len(text), None, text.splitlines(True), DOC)   # spans of the examples
    for m in FENCE.finditer(text):
        first_line = text.count("\n", 0, m.start(2))
        yield m.group(1), m.group(2), first_line


def test_every_python_block_runs():
    namespace: dict = {"__name__": "dsl_docs"}
    ran = 0
    shown_after_first = None
    printed_first = None
    for lang, code, first_line in blocks():
        if lang == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile("\n" * first_line + code, DOC, "exec"), namespace)
            if ran == 0:
                printed_first = out.getvalue()
            ran += 1
        elif lang == "" and ran == 1 and shown_after_first is None:
            shown_after_first = code
    assert ran >= 5
    assert printed_first is not None and shown_after_first is not None
    assert printed_first.rstrip("\n") == shown_after_first.rstrip("\n")
