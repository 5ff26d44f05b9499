"""Reading a trace for a replay: the JSONL file read into columns by the compiled row reader
against the Python reader (a Dispatch object per row), and the native file for comparison.

The same trace is written as ``.mpltrace`` and as JSONL (``mplc trace convert``'s layout:
one-token rows with weights), then each read is timed (CPU time, the best of ``--repeat``)
and the public replay of the file path (``mpl.sim.replay``, lru, no Belady) is timed end to
end, reading included. The reads must give the same trace: the columns' pack is checked
against the Python reader's.

    python benchmarks/bench_trace_read.py [--steps 3847] [--preset deepseek-v2-lite]
    python benchmarks/bench_trace_read.py --trace my.jsonl
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import mpl  # noqa: E402
from mpl import tracecols, traceio  # noqa: E402
from mpl.runtime import compiled, packing  # noqa: E402
from mpl.sim import tracepack  # noqa: E402
from mpl.sim.replay import replay  # noqa: E402
from mpl.sim.synth import synthesize  # noqa: E402


def best(fn, repeat):
    out, times = None, []
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="deepseek-v2-lite")
    ap.add_argument("--steps", type=int, default=3847, help="decode steps (3847: about 100k dispatches)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", help="a JSONL trace to read instead of a synthetic one")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    if compiled.kernel("jsonl_rows") is None:
        print("the compiled engine is not in use: nothing to compare", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as d:
        if a.trace:
            jl = a.trace
            native = os.path.join(d, "t.mpltrace")
            traceio.save(traceio.load_jsonl(jl), native)
        else:
            trace = synthesize(a.preset, steps=a.steps, seed=a.seed)
            jl, native = os.path.join(d, "t.jsonl"), os.path.join(d, "t.mpltrace")
            traceio.save(trace, jl)
            traceio.save(trace, native)
        t_cols, lazy = best(lambda: tracecols.load(jl), a.repeat)
        t_py, eager = best(lambda: traceio.load_jsonl(jl), a.repeat)
        t_nat, _ = best(lambda: tracecols.load(native), a.repeat)
        if not isinstance(lazy.dispatches, tracecols.JsonlDispatches):
            print("the file's rows are not all alike: the column reader did not take it")
            return 1
        E = eager.header.num_experts
        pl, pe = tracepack.pack_of(lazy.dispatches, E), tracepack.pack_dispatches(eager.dispatches, E)
        assert all(getattr(pl, n) == getattr(pe, n) for n in packing.Packed.__slots__), "packs differ"
        pol = mpl.loads("policy p { cache { capacity = 64 eviction = lru } }")
        t_rj, r1 = best(lambda: replay(pol, jl, belady=False), a.repeat)
        t_rn, r2 = best(lambda: replay(pol, native, belady=False), a.repeat)
        assert r1.stats == r2.stats
        size = os.path.getsize(jl)
        print(f"{len(eager):,} dispatches, JSONL {size / 1e6:.1f} MB, native "
              f"{os.path.getsize(native) / 1e6:.1f} MB (CPU seconds, best of {a.repeat})")
        print(f"  read JSONL, Python reader      {t_py:8.3f} s")
        print(f"  read JSONL, into columns       {t_cols:8.3f} s   {t_py / t_cols:6.1f}x faster "
              f"({size / 1e6 / t_cols:.0f} MB/s)")
        print(f"  read native, into columns      {t_nat:8.3f} s")
        print(f"  replay(lru) of the JSONL path  {t_rj:8.3f} s   "
              f"{t_rj / t_rn:6.2f}x the native path's {t_rn:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
