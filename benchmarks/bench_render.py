"""Rendering diagnostics (``mplc check``'s text output, ``mpl.cli.render.render_all``) on one
long line vs the same diagnostics on short lines: time and output size.

    python benchmarks/bench_render.py [N_ERRORS] [LINE_KB]

N errors (MPL001 for '@') once on N short lines (about 100 columns each: a window's
width), once on a single line padded to LINE_KB KiB (default 8,000 errors on a 64 KiB line, a line as long as a minified policy file). Prints best-of-3
render times measured in this run, their ratio and the ratio of the output sizes (the
machines are shared: compare ratios, not absolute times). Each snippet shows a window of at
most ``mpl.diagnostics.SNIPPET_WIDTH`` columns, so both ratios stay near 1.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def texts(n: int, line_kb: int) -> tuple[str, str]:
    # each short line about as wide as a snippet's window, so that the outputs compare
    short = "policy p { cache { capacity = 8\n" + ("@ # " + "x" * 100 + "\n") * n + "} }\n"
    head = "policy p { cache { capacity = 8 " + "@ " * n + "} } # "
    long = head + "x" * max(0, line_kb * 1024 - len(head)) + "\n"
    return short, long


def best_render(text: str, repeat: int = 3) -> tuple[float, int, int]:
    from mpl.checker import analyze
    from mpl.cli.render import render_all

    diags = analyze(text, "bench.moe").diagnostics
    best, size = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = render_all(diags, {"bench.moe": text})
        best = min(best, time.perf_counter() - t0)
        size = len(out)
    return best, size, len(diags)


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 8000
    kb = int(argv[1]) if len(argv) > 1 else 64
    short, long = texts(n, kb)
    ts, ss, ds = best_render(short)
    tl, sl, dl = best_render(long)
    print(f"{ds} diagnostics on short lines: render {ts * 1e3:.1f} ms, {ss:,} chars")
    print(f"{dl} diagnostics on one {len(long) // 1024} KiB line: render {tl * 1e3:.1f} ms, "
          f"{sl:,} chars")
    print(f"long/short: time {tl / ts:.2f}x, output {sl / ss:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
