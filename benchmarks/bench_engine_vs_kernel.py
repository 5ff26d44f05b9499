"""The compiled engine's replay in several checkouts, alternated in one run.

Times the packed replay (a fresh runtime, in-use protection, the simulated timeline in C) of
one synthetic DeepSeek-V2-Lite trace (26 MoE layers x 64 experts, top-6) under plain rules
over a shared cache of 256 slots, in each checkout given (each built in place: ``python
setup.py build_ext --inplace`` there), one process per checkout and round, the checkouts
alternated, best of ``--repeat`` per process and of ``--rounds`` rounds; CPU time of the
measuring process. A checkout of a commit before 469350f (which removed the specialised
replay kernel, ``mpl/runtime/_fast.c``) is timed through that kernel
(``mpl.runtime.fast.replay_packed`` on a pure runtime, as its benchmarks did); a later one
through ``Runtime.replay_packed`` (the engine). The hit rates printed must agree.

    python benchmarks/bench_engine_vs_kernel.py --trees /work/old /work/base . [--steps 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

RULES = "lru,lfu,arc,s3fifo,frequency_threshold"


def child(steps: int, repeat: int, rules: list[str]) -> dict:
    import importlib

    import mpl
    from mpl.sim import synthesize
    from mpl.timemodel import hardware
    from mpl.timemodel.timeline import Timeline

    trace = synthesize("deepseek-v2-lite", steps=steps, seed=0)
    h = trace.header
    L, E, K = h.num_moe_layers, h.num_experts, h.top_k
    costs = hardware.costs_for(hardware.resolve(None), model=h.model, expert_bytes=h.expert_bytes)
    cm = hardware.runtime_cost_model(costs)
    try:
        fast = importlib.import_module("mpl.runtime.fast")      # the removed kernel's glue
    except ImportError:
        fast = None
    if fast is not None:
        backend = importlib.import_module("mpl.runtime.backend")
        p = fast.pack_trace(trace, E)

        def make(pol):
            with backend.forced("pure"):
                return pol.runtime(L, E, K, expert_bytes=h.expert_bytes, cost=cm)._impl

        def run(rt, tl):
            return fast.replay_packed(rt, p, tl)
    else:
        from mpl.sim import tracepack
        p = tracepack.pack_trace(trace, E)

        def make(pol):
            return pol.runtime(L, E, K, expert_bytes=h.expert_bytes, cost=cm)

        def run(rt, tl):
            return rt.replay_packed(p, tl)
    out = {}
    for rule in rules:
        pol = mpl.loads(f"policy p {{ cache {{ capacity = 256 eviction = {rule} }} }}")
        best = float("inf")
        for _ in range(repeat):
            rt = make(pol)
            tl = Timeline(costs)
            t0 = time.process_time()
            n = run(rt, tl)
            best = min(best, time.process_time() - t0)
            assert n == len(trace), n
        out[rule] = [best, rt.stats()["hit_rate"], len(trace)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", default=["."], help="checkouts, each built in place")
    ap.add_argument("--steps", type=int, default=10000, help="decode steps (x 26 dispatches)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rules", default=RULES)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    rules = args.rules.split(",")
    if args.child:
        print(json.dumps(child(args.steps, args.repeat, rules)))
        return 0
    best: dict = {}
    hits: dict = {}
    n = 0
    for _ in range(args.rounds):
        for tree in args.trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--steps",
                                  str(args.steps), "--repeat", str(args.repeat), "--rules", args.rules],
                                 env=env, cwd="/", capture_output=True, text=True, check=True)
            for rule, (t, hit, n) in json.loads(res.stdout.strip().splitlines()[-1]).items():
                best[tree, rule] = min(best.get((tree, rule), float("inf")), t)
                hits.setdefault(rule, set()).add(round(hit, 9))
    print(f"{n} dispatches ({args.steps} steps), shared cache of 256 slots; best of {args.repeat} "
          f"x {args.rounds} rounds, CPU seconds; ratios to the first checkout")
    print(f"{'rule':<22}" + "".join(f"{os.path.basename(os.path.abspath(t)):>22}" for t in args.trees)
          + f"{'hit rate':>10}")
    for rule in rules:
        t0 = best[args.trees[0], rule]
        cells = "".join(f"{best[t, rule]:>14.4f} ({best[t, rule] / t0:.2f}x)" for t in args.trees)
        agree = f"{next(iter(hits[rule])):.4f}" if len(hits[rule]) == 1 else "DIFFER"
        print(f"{rule:<22}{cells}{agree:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
