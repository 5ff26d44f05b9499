"""Replays of a few policies in several checkouts, alternated in one run.

Each policy is replayed on a synthetic preset trace in each checkout, in its own process with
that checkout first on ``sys.path`` (each built in place: ``python setup.py build_ext
--inplace`` there), the checkouts alternated policy by policy; the figure is the CPU time of
one ``mpl.sim.replay`` (compiled backend where it holds the policy; the trace synthesized and
one warm-up replay outside it), the median of ``--rounds`` rounds. Beside it the replay's hit
rate and prefetch loads: checkouts meant to decide alike print the same. The ratio line
compares each checkout's total with the first one's.

    python benchmarks/bench_replay_checkouts.py --trees BEFORE . [--preset qwen3-30b-a3b]
        [--rounds 5] [--policies affinity1,affinity2,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_tune_checkouts import child_in  # noqa: E402  (the child run in a checkout)

#: name -> policy text (per layer, 24 slots a layer: on Qwen3-30B-A3B a fifth of the experts)
POLICIES = {
    "affinity1": "policy p { cache { capacity = 24 eviction = lru } per_layer { } "
                 "prefetch { strategy = affinity budget = 2 lookahead = 1 } }",
    "affinity2": "policy p { cache { capacity = 24 eviction = lru } per_layer { } "
                 "prefetch { strategy = affinity budget = 2 lookahead = 2 } }",
    "affinity_b8": "policy p { cache { capacity = 24 eviction = crf } per_layer { } "
                   "prefetch { strategy = affinity budget = 8 lookahead = 1 } }",
    "learned": "policy p { cache { capacity = 24 eviction = lru } per_layer { } "
               "prefetch { strategy = learned budget = 2 } }",
    "lru": "policy p { cache { capacity = 24 eviction = lru } per_layer { } }",
}


def child(preset: str, name: str, steps: int, reps: int) -> dict:
    import time

    import mpl
    from mpl.sim import replay, synthesize

    trace = synthesize(preset, steps=steps, seed=0)
    pol = mpl.loads(POLICIES[name])
    r = replay(pol, trace, belady=False)
    t0 = time.process_time()
    for _ in range(reps):
        r = replay(pol, trace, belady=False)
    return {"cpu_s": (time.process_time() - t0) / reps, "hit_rate": r.stats["hit_rate"],
            "prefetch_loads": r.stats["prefetch_loads"], "backend": r.runtime["backend"],
            "mpl": os.path.dirname(os.path.dirname(mpl.__file__))}


def run_in(tree: str, preset: str, name: str, steps: int, reps: int) -> dict:
    return child_in(tree, __file__, preset, name, steps, reps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", help="checkouts, each built in place")
    ap.add_argument("--preset", default="qwen3-30b-a3b")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--steps", type=int, default=600, help="decode steps of the synthetic trace")
    ap.add_argument("--reps", type=int, default=3, help="replays timed per process")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], int(a.child[2]), int(a.child[3]))))
        return 0
    if not a.trees:
        ap.error("--trees: at least one checkout")
    names = [n for n in a.policies.split(",") if n]
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        ap.error(f"--policies: unknown {', '.join(unknown)} (known: {', '.join(POLICIES)})")
    got: dict = {}
    for _ in range(a.rounds):
        for name in names:
            for tree in a.trees:
                got.setdefault((name, tree), []).append(run_in(tree, a.preset, name, a.steps,
                                                               a.reps))
    print(f"# one replay of a {a.preset} trace ({a.steps} steps), CPU ms, median of "
          f"{a.rounds} rounds")
    totals = dict.fromkeys(a.trees, 0.0)
    for name in names:
        cells = []
        for tree in a.trees:
            runs = got[(name, tree)]
            ms = statistics.median(x["cpu_s"] for x in runs) * 1e3
            totals[tree] += ms
            last = runs[-1]
            cells.append(f"{tree}: {ms:.1f} ms ({last['backend']}, hit rate "
                         f"{last['hit_rate']:.4%}, {last['prefetch_loads']} prefetch loads)")
        print(f"  {name}: " + " | ".join(cells))
    first = totals[a.trees[0]]
    print("  in all: " + ", ".join(f"{t} {v:.1f} ms ({v / first:.2f}x {a.trees[0]})"
                                   for t, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
