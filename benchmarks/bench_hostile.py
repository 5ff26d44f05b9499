"""The compiled backend against the pure one on the shapes the hostile corpus found hard.

Each case is replayed in its own process on both backends (``MPL_PURE=1`` for the pure one),
so that the peak RSS is the case's own; the process reports its replay's CPU time and its
peak RSS, and the hit rates must agree:

* ``topk_lfu`` / ``topk_score``: per-layer caches just below top-k (capacity 200 of top-255
  over 300 experts, 16 layers, 20 steps): every eviction searches past the many residents
  the current dispatch uses;
* ``topk_lru``: the same with lru (the list's scan, for comparison);
* ``affinity_wide``: an affinity table of 48 layers x 300 experts (capacity 4000, budget 8,
  top-255, 30 steps): the table the live state holds and hands back when the runtime is read.

    python benchmarks/bench_hostile.py [--cases topk_lfu,affinity_wide]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES = {
    "topk_lfu": (dict(steps=20, layers=16),
                 "policy p { cache { capacity = 200 eviction = lfu } per_layer { max_capacity = 300 } }"),
    "topk_score": (dict(steps=20, layers=16),
                   "policy p { cache { capacity = 200 eviction = score } per_layer { max_capacity = 300 } }"),
    "topk_lru": (dict(steps=20, layers=16),
                 "policy p { cache { capacity = 200 eviction = lru } per_layer { max_capacity = 300 } }"),
    "affinity_wide": (dict(steps=30, layers=48),
                      "policy p { cache { capacity = 4000 } prefetch { strategy = affinity budget = 8 } }"),
}

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {hostile!r})
import make_corpus, mpl
t = make_corpus.topk_trace({steps}, layers={layers})
pol = mpl.loads({text!r})
t0 = time.process_time()
r = pol.replay(t)
cpu = time.process_time() - t0
print(json.dumps({{"cpu": cpu, "hit_rate": r.stats["hit_rate"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run(case: str, pure: bool) -> dict:
    shape, text = CASES[case]
    env = dict(os.environ)
    env.pop("MPL_PURE", None)
    if pure:
        env["MPL_PURE"] = "1"
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    code = CHILD.format(hostile=os.path.join(ROOT, "tests", "hostile"), text=text, **shape)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args(argv)
    print(f"{'case':<15}{'compiled CPU s':>16}{'pure CPU s':>12}{'ratio':>8}"
          f"{'compiled MB':>13}{'pure MB':>9}  hit rate")
    for case in args.cases.split(","):
        c, p = run(case, False), run(case, True)
        assert c["hit_rate"] == p["hit_rate"], (case, c, p)
        print(f"{case:<15}{c['cpu']:>16.3f}{p['cpu']:>12.3f}{c['cpu'] / p['cpu']:>7.2f}x"
              f"{c['rss_mb']:>13.0f}{p['rss_mb']:>9.0f}  {c['hit_rate']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
