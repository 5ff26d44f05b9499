"""Microseconds per dispatch of a learned-prefetch policy: the compiled engine (which owns its
compiled predictor, ``_engine.Learned``, and calls it from C) against the pure runtime (the
Python predictor), on bench_dispatch.py's trace (27 MoE layers x 64 experts, top-6, router
weights). CPU time, best of ``--repeat``; the two runs must end with equal stats and an
equal predictor state (``dump()``).

    python benchmarks/bench_live_learned.py [--steps 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_dispatch as bd  # noqa: E402
import mpl  # noqa: E402

TEXT = """policy learned_lfu {
    cache { capacity = 16 eviction = lfu frequency_decay = 0.9 }
    prefetch { strategy = learned budget = 4 lookahead = 2 confidence = 0.3 }
}"""


def run(policy, trace, live: bool):
    want = "compiled" if live else "pure"
    rt = policy.runtime(bd.LAYERS, bd.EXPERTS, bd.TOP_K, backend=want)
    d = rt.dispatch
    t0 = time.process_time()
    for layer, ex, w in trace:
        d(layer, ex, w)
    return time.process_time() - t0, rt.stats(), rt.learned.dump()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    trace = bd.make_trace(a.steps)
    policy = mpl.loads(TEXT)
    out = {}
    for live in (True, False):
        runs = [run(policy, trace, live) for _ in range(a.repeat)]
        out[live] = (min(r[0] for r in runs) / len(trace) * 1e6, runs[0][1], runs[0][2])
    if out[True][1] != out[False][1] or out[True][2] != out[False][2]:
        print("the live and the pure dispatch differ", file=sys.stderr)
        return 1
    s = out[True][1]
    print(f"{len(trace):,} dispatches: live C {out[True][0]:.2f} us, pure {out[False][0]:.2f} us "
          f"per dispatch: {out[False][0] / out[True][0]:.2f}x (hit rate {s['hit_rate']:.3f}, "
          f"prefetch loads {s['prefetch_loads']}; stats and predictor state equal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
