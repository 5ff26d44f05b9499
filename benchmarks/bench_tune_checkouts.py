"""``mplc tune``'s default search in several checkouts, alternated in one run.

Each (preset, share of the experts) is tuned once per checkout and round, each search in its
own process with that checkout first on ``sys.path`` (each built in place: ``python setup.py
build_ext --inplace`` there), the checkouts alternated case by case; the figure is the CPU time
of ``tune(trace, slots, jobs=1)`` in that process (imports and the trace's synthesis outside
it), the median of ``--rounds`` rounds. Beside it a digest of the whole result (every
leaderboard row's description, hit rate, tok/s and counts, the written policy, the candidate
and replay counts): two checkouts whose search is meant to be the same must print the same
digest. The ratio line compares each checkout's total with the first one's.

    python benchmarks/bench_tune_checkouts.py --trees /work/earlier . [--rounds 3] [--steps 600]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PRESETS = "deepseek-v2-lite,mixtral-8x7b,qwen3-30b-a3b"


def child(preset: str, share: int, steps: int) -> dict:
    import hashlib
    import time

    import mpl
    from mpl import tune as T
    from mpl.sim import synthesize

    trace = synthesize(preset, steps=steps, seed=0)
    h = trace.header
    slots = max(1, round(share / 100 * h.num_moe_layers * h.num_experts))
    t0 = time.process_time()
    res = T.tune(trace, slots, hardware=None, jobs=1, search="halving")
    cpu = time.process_time() - t0
    board = [(c.describe(), c.hit_rate, c.tokens_per_s, getattr(c, "counts", None))
             for c in res.leaderboard]
    digest = hashlib.sha256(repr((board, res.text, res.evaluated, res.replayed)).encode())
    return {"cpu_s": cpu, "best": res.best.describe(), "tokens_per_s": res.best.tokens_per_s,
            "candidates": res.evaluated, "digest": digest.hexdigest()[:16],
            "mpl": os.path.dirname(os.path.dirname(mpl.__file__))}


def child_in(tree: str, script: str, *args) -> dict:
    """The JSON object ``script --child ARGS`` prints last, run in checkout ``tree`` with it
    first on ``sys.path``; SystemExit when the child's ``mpl`` (its "mpl" key) came from
    elsewhere."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, os.path.abspath(script), "--child",
                          *(str(a) for a in args)], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.abspath(tree))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if os.path.realpath(got["mpl"]) != os.path.realpath(tree):
        raise SystemExit(f"{tree}: {os.path.basename(script)} imported mpl from {got['mpl']}")
    return got


def run_in(tree: str, preset: str, share: int, steps: int) -> dict:
    return child_in(tree, __file__, preset, share, steps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", help="checkouts, each built in place")
    ap.add_argument("--presets", default=PRESETS)
    ap.add_argument("--shares", default="25,50,75", help="percent of the model's experts")
    ap.add_argument("--steps", type=int, default=600, help="decode steps per synthetic trace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]), int(a.child[2]))))
        return 0
    if not a.trees:
        ap.error("--trees: at least one checkout")
    cases = [(p, int(s)) for p in a.presets.split(",") if p for s in a.shares.split(",") if s]
    got: dict = {}
    for _ in range(a.rounds):
        for case in cases:
            for tree in a.trees:
                got.setdefault((case, tree), []).append(run_in(tree, *case, a.steps))
    totals = dict.fromkeys(a.trees, 0.0)
    print("# mplc tune (halving, jobs=1), CPU seconds, median of", a.rounds, "rounds")
    for case in cases:
        cells = []
        for tree in a.trees:
            runs = got[(case, tree)]
            med = statistics.median(r["cpu_s"] for r in runs)
            totals[tree] += med
            digests = {r["digest"] for r in runs}
            cells.append(f"{tree}: {med:.2f} s {'/'.join(sorted(digests))} "
                         f"({runs[0]['candidates']} candidates, {runs[0]['tokens_per_s']:.3f} tok/s)")
        print(f"  {case[0]} {case[1]}%: " + " | ".join(cells))
    first = a.trees[0]
    print("  in all: " + ", ".join(f"{t} {v:.2f} s ({v / totals[first]:.2f}x {first})"
                                   for t, v in totals.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
