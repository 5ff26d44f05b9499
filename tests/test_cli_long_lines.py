"""Diagnostics on very long source lines: a snippet shows a window of the line around the
span (cut with ``...``, the underline still under the span), so ``mplc check`` costs the
same per diagnostic on a 64 KB line as on a short one and prints a bounded amount of text.

Costs are compared as ratios against a baseline measured in the same test (CPU time of the
``mplc`` child process; never a wall-clock limit)."""

from __future__ import annotations

import json

import random
import resource

import pytest

import mpl
from mpl import dsl
from mpl.api import PolicyError
from mpl.diagnostics import ELLIPSIS, MESSAGE_LIMIT, SNIPPET_WIDTH, clip_text, snippet_window

from cli_helpers import clean, mplc


def _cpu_run(*args, cwd):
    """``mplc`` as a subprocess, with the CPU seconds (user + system) it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = mplc(*args, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r, cpu


N_ERRORS = 2000
PAD = 30_000     # a comment making the one line about 34 KB long


def _many_errors(tmp_path):
    """The same N errors (MPL001 for '@'), once on N short lines (each about as wide as a
    snippet's window), once on one long line."""
    short = "policy p { cache { capacity = 8\n" + ("@ # " + "x" * 100 + "\n") * N_ERRORS + "} }\n"
    long = "policy p { cache { capacity = 8 " + "@ " * N_ERRORS + "} } # " + "x" * PAD + "\n"
    (tmp_path / "short.moe").write_text(short)
    (tmp_path / "long.moe").write_text(long)


def test_many_errors_on_one_long_line_cost_what_they_cost_on_short_lines(tmp_path):
    _many_errors(tmp_path)
    mplc("check", "short.moe", cwd=tmp_path)                  # warm the caches (bytecode)
    base, base_cpu = _cpu_run("check", "short.moe", cwd=tmp_path)
    longr, long_cpu = _cpu_run("check", "long.moe", cwd=tmp_path)
    for r in (base, longr):
        clean(r)
        assert r.returncode == 1
        assert r.stdout.rstrip().endswith(f"1 file checked: {N_ERRORS} errors")
    # every diagnostic prints a window of at most SNIPPET_WIDTH columns (plus the cut marks
    # and the gutter), not the line: the output is of the same order as the short lines'
    longest = max(len(line) for line in longr.stdout.splitlines() if " | " in line)
    assert longest <= SNIPPET_WIDTH + 2 * len(ELLIPSIS) + 10
    assert len(longr.stdout) < 2 * len(base.stdout)
    # and it costs about the same (the whole line per diagnostic took ~50x the baseline)
    assert long_cpu < 2 * base_cpu + 0.2, (long_cpu, base_cpu)


def _caret_under(out: str, lineno: int) -> tuple[str, str]:
    """The source text and the underline of the first snippet of line ``lineno``."""
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(f"{lineno} | "))
    src = lines[i][len(f"{lineno} | "):]
    under = lines[i + 1][len(" " * len(str(lineno)) + " | "):]
    return src, under


def _check(tmp_path, name: str, text: str):
    """``mplc check`` on ``text`` written to ``name`` (no traceback)."""
    (tmp_path / name).write_text(text)
    r = mplc("check", name, cwd=tmp_path)
    clean(r)
    return r


def test_one_error_on_a_megabyte_line_prints_a_window(tmp_path):
    pad = " " * 500_000
    r = _check(tmp_path, "big.moe", "policy p { cache { capacity = 8" + pad + "@" + pad + "} }\n")
    assert r.returncode == 1
    assert "error[MPL001]" in r.stdout
    assert len(r.stdout) < 2000, len(r.stdout)            # was the whole 1 MB line
    src, under = _caret_under(r.stdout, 1)
    assert src.startswith(ELLIPSIS) and src.endswith(ELLIPSIS)
    col = under.index("^")
    assert src[col] == "@" and under.strip() == "^"
    # the JSON output carries no snippet: it stays small too
    j = mplc("check", "--json", "big.moe", cwd=tmp_path)
    assert j.returncode == 1 and len(j.stdout) < 2000


def test_a_message_quoting_a_megabyte_token_is_cut_in_the_middle(tmp_path):
    big = "x" * 1_000_000
    for name, text, tail in (
            ("param.moe", f"policy p {{ cache {{ capacity = 8 {big} = 4 }} }}\n", "ttl"),
            ("enum.moe", f"policy p {{ cache {{ capacity = 8 eviction = {big} }} }}\n", "belady"),
            ("top.moe", f"policy p {{ cache {{ capacity = 8 }} }} {big}\n", "x'")):
        r = _check(tmp_path, name, text)
        assert r.returncode == 1
        assert len(r.stdout) < MESSAGE_LIMIT + 1000, (name, len(r.stdout))     # was 1 MB
        head = r.stdout.splitlines()[0]
        assert ELLIPSIS in head and head.endswith(tail), head[-80:]
        # the JSON output carries the cut message too (it carried the whole 1 MB token)
        j = mplc("check", "--json", name, cwd=tmp_path)
        assert j.returncode == 1 and len(j.stdout) < MESSAGE_LIMIT + 3000, (name, len(j.stdout))
        msgs = [d["message"] for d in json.loads(j.stdout)]
        assert msgs and all(len(m) <= MESSAGE_LIMIT for m in msgs)
        assert any(ELLIPSIS in m and m.endswith(tail) for m in msgs), [m[-80:] for m in msgs]


def test_policy_error_message_of_the_api_is_bounded_too():
    with pytest.raises(PolicyError) as e:
        mpl.loads(f"policy p {{ cache {{ capacity = 8 eviction = {'x' * 1_000_000} }} }}")
    msg = str(e.value)
    assert "MPL202" in msg and ELLIPSIS in msg and len(msg) < MESSAGE_LIMIT + 200


def test_clip_text_keeps_short_texts_and_both_ends():
    assert clip_text("short") == "short"
    t = "a" * 600 + "MIDDLE" + "b" * 600
    c = clip_text(t, 300)
    assert len(c) == 300 and c.startswith("a" * 200) and c.endswith("b" * 97) and ELLIPSIS in c


def test_underline_of_a_long_span_stops_at_the_cut(tmp_path):
    name = "x" * 5000
    r = _check(tmp_path, "wide.moe", f"policy p {{ cache {{ {name} = 4 capacity = 8 }} }}\n")
    src, under = _caret_under(r.stdout, 1)
    assert src.endswith(ELLIPSIS) and not src.startswith(ELLIPSIS)   # the span starts early
    start = under.index("^")
    assert src[start] == "x" and src[start - 1] == " "
    assert under.rstrip().endswith("~") and len(under.rstrip()) <= len(src) - len(ELLIPSIS)


def test_related_note_on_a_long_line_is_cut_too(tmp_path):
    pad = " " * 20_000
    r = _check(tmp_path, "dup.moe", f"policy p {{ cache {{ capacity = 8{pad}capacity = 4 }} }}\n")
    assert "MPL104" in r.stdout
    assert len(r.stdout) < 3000
    assert all(len(line) < SNIPPET_WIDTH + 20 for line in r.stdout.splitlines() if " | " in line)


def test_dsl_error_message_shows_a_window_of_a_long_generated_line():
    b = dsl.policy("p").block("cache", capacity=8, pin=list(range(3000)))
    with pytest.raises(PolicyError) as e:
        b.check()
    msg = str(e.value)
    assert "MPL301" in msg and len(msg) < 1000         # the pin line is ~15 KB
    shown = msg.splitlines()[-1]
    assert shown.strip().startswith("| pin = [0, 1, 2") and shown.endswith(ELLIPSIS)


# ------------------------------------------------------------------ the window itself
def test_a_line_that_fits_is_shown_whole():
    line = "        capcity = 4"
    w = snippet_window(line, 8, 15)
    assert (w.text, w.start, w.end, w.cut_left, w.cut_right) == (line, 8, 15, False, False)
    # tabs show as four columns; the underline follows them
    w = snippet_window("\tcapcity = 4\r", 1, 8)
    assert (w.text, w.start, w.end) == ("    capcity = 4", 4, 11)
    # a point past the end of the line (end of file) sits after it
    w = snippet_window("abc", 5, 5)
    assert (w.text, w.start, w.end) == ("abc", 5, 6)
    # a span running on to later lines is underlined to the line's end
    w = snippet_window("cache {", 6, None)
    assert (w.start, w.end) == (6, 7)


def test_window_keeps_the_underline_under_the_span():
    rng = random.Random(13)
    for _ in range(300):
        n = rng.randrange(1, 3000)
        line = "".join(rng.choice("ab c\t") for _ in range(n))
        s = rng.randrange(0, n)
        e = min(n, s + rng.randrange(1, 200))
        w = snippet_window(line, s, e)
        assert len(w.text) <= SNIPPET_WIDTH + 2 * len(ELLIPSIS)
        assert w.text.startswith(ELLIPSIS) == w.cut_left
        assert w.text.endswith(ELLIPSIS) == w.cut_right
        # the underline's first column shows the span's first character
        ch = line[s]
        shown = w.text[w.start: w.start + (4 if ch == "\t" else 1)]
        assert shown == ("    " if ch == "\t" else ch)
        # and the window holds the whole span when it fits in it
        if e - s <= 40 and not w.cut_right:
            assert w.text[w.start:w.end] == line[s:e].replace("\t", "    ")
        if w.cut_right:                 # the underline stops at the cut, before the '...'
            assert w.end <= len(w.text) - len(ELLIPSIS)


def test_window_near_the_end_shows_more_context_to_the_left():
    line = "x" * 10_000 + "END"
    w = snippet_window(line, 10_000, 10_003)
    assert w.cut_left and not w.cut_right
    assert w.text.endswith("END") and len(w.text) == len(ELLIPSIS) + SNIPPET_WIDTH
    assert w.text[w.start:w.end] == "END"


class _ReadCounter(str):
    """A line that counts the characters each index, slice and ``count`` of it reads."""
    read = 0

    def __getitem__(self, key):
        if isinstance(key, slice):
            a, b, _ = key.indices(len(self))
            type(self).read += max(0, b - a)
        else:
            type(self).read += 1
        return str.__getitem__(self, key)

    def count(self, sub, a=0, b=None):
        a, b, _ = slice(a, b).indices(len(self))
        type(self).read += max(0, b - a)
        return str.count(self, sub, a, b)


def test_window_cost_does_not_grow_with_the_line():
    """Each call reads O(width) characters of the line: a 4 MB line as few as a 4 KB one
    (counted, with tabs in both, at the start, middle and end of each)."""
    for size in (1024, 1024 * 1024):
        plain = "a\tb " * size
        for at in (0, len(plain) // 2, len(plain) - 3):
            _ReadCounter.read = 0
            w = snippet_window(_ReadCounter(plain), at, at + 3)
            assert w == snippet_window(plain, at, at + 3)
            assert _ReadCounter.read <= 8 * SNIPPET_WIDTH, (size, at, _ReadCounter.read)

