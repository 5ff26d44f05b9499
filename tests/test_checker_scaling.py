"""Checking cost grows linearly with the number of diagnostics and policies (it was
quadratic: 40k error lines took 25 s). Measured by operation counts, not wall-clock time:
the Python calls made by ``analyze`` for n and 2n policies with an error each, and how
often a file's line index is built."""

from __future__ import annotations

import random
import sys

import pytest

import mpl.diagnostics as D
from mpl.checker import analyze
from mpl.diagnostics import Span
from parser_helpers import line_starts


def _calls(text: str) -> int:
    n = 0

    def prof(frame, event, arg):
        nonlocal n
        if event == "call" or event == "c_call":
            n += 1

    old = sys.getprofile()
    sys.setprofile(prof)
    try:
        analyze(text)
    finally:
        sys.setprofile(old)
    return n


SHAPES = {
    # one policy each, each with an out-of-range capacity (an error inside every policy)
    "policies": lambda n: "".join(f"policy p{i} {{ cache {{ capacity = 0 }} }}\n" for i in range(n)),
    # one good policy, then junk lines: errors outside every policy
    "junk": lambda n: "policy p { cache { capacity = 8 } }\n" + "".join(f"junk{i} $ = [\n" for i in range(n)),
    # many bad assignments in one block
    "assignments": lambda n: ("policy p {\n  cache { capacity = 8\n"
                              + "".join(f"    eviction = lruu{i}\n" for i in range(n)) + "  }\n}\n"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_work_is_linear_in_the_number_of_errors(shape):
    make = SHAPES[shape]
    small, large = _calls(make(600)), _calls(make(1200))
    # linear: ~2x the work for 2x the errors (quadratic steps made it 3.5x and more)
    assert large / small < 2.4, (shape, small, large)


def test_the_line_index_is_built_once_per_file(monkeypatch):
    built = []
    real = D.line_starts
    monkeypatch.setattr(D, "line_starts", lambda text: built.append(len(text)) or real(text))
    text = SHAPES["policies"](3000)
    a = analyze(text)
    assert len(a.diagnostics) == 3000
    assert built == [len(text)]
    # and the positions are the ones counted naively
    last = a.diagnostics[-1].span
    assert last.line == 3000 and text.count("\n", 0, last.offset) + 1 == 3000


def test_indexed_spans_equal_counted_spans():
    rnd = random.Random(7)
    for n in (50, D._INDEX_MIN, D._INDEX_MIN * 3):
        text = "".join(rnd.choice("ab \n\r\t") for _ in range(n))
        for _ in range(300):
            a, b = rnd.randint(-5, n + 5), rnd.randint(-5, n + 5)
            got = Span.from_offsets(text, a, b)
            s = max(0, min(a, n))
            e = max(s, min(b, n))
            # lines end at '\n', '\r\n' and a lone '\r'
            starts = line_starts(text)
            sl = [x for x in starts if x <= s]
            el = [x for x in starts if x <= e]
            want = Span(len(sl), s - sl[-1] + 1, len(el), e - el[-1] + 1, s, e)
            assert got == want, (n, a, b)
