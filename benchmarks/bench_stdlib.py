"""How the standard-library policies compare: each std/NAME replayed over the same synthetic
traces (SPEC §8 presets), with hit rate, the Belady optimum's hit rate for the same cache
structure, transfers and simulated tokens/s, and the ratio of tokens/s to std/lru_basic's
measured in the same run.

    python benchmarks/bench_stdlib.py [--steps 200] [--seed 0] [--json]

Simulated time comes from the hardware cost model (mpl.timemodel.hardware), not a wall clock, so
the figures are deterministic for a seed; they rank policies, they do not promise tok/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import mpl
from mpl.api import from_ir
from mpl.sim import replay, synthesize
from mpl.stdlib_path import stdlib_file, stdlib_names

# (preset, hardware) pairs: the seed's consumer case and its A100 DeepSeek case
SETUPS = (("qwen1.5-moe-a2.7b", "rtx-5080"), ("deepseek-v2-lite", "a100-80gb"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="decode steps per trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", default="", help="comma-separated stdlib names (default: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    names = [n for n in args.policies.split(",") if n] or stdlib_names()
    policies = {n: mpl.load(stdlib_file(n)) for n in names}
    if "lru_basic" not in policies:
        policies["lru_basic"] = mpl.load(stdlib_file("lru_basic"))
    results = []
    t0 = time.perf_counter()
    for preset, hw in SETUPS:
        trace = synthesize(preset, steps=args.steps, seed=args.seed)
        rows = {}
        for name, policy in policies.items():
            rep = replay(policy, trace, hardware=hw, belady=True)
            s = rep.stats
            rows[name] = {"policy": name, "model": preset, "hardware": hw,
                          "hit_rate": s["hit_rate"], "belady_hit_rate": rep.belady_hit_rate,
                          "loads": s["loads"], "cpu_computes": s["cpu_computes"],
                          "streamed": s["streamed"], "tokens_per_s": rep.tokens_per_s}
        if "adaptive" in policies:          # what its adapt rules are worth, same trace
            fixed = from_ir(dataclasses.replace(policies["adaptive"].ir, adapt=()))
            rep = replay(fixed, trace, hardware=hw, belady=False)
            rows["adaptive"]["vs_without_rules"] = rows["adaptive"]["tokens_per_s"] / rep.tokens_per_s
        base = rows["lru_basic"]["tokens_per_s"]
        for r in rows.values():
            r["vs_lru_basic"] = r["tokens_per_s"] / base if base else float("nan")
        results.extend(rows.values())
        if not args.json:
            print(f"\n{preset} on {hw}: {args.steps} steps, seed {args.seed}")
            print(f"{'policy':20s} {'hit':>6s} {'belady':>7s} {'loads':>7s} {'cpu':>6s} "
                  f"{'stream':>7s} {'tok/s':>8s} {'x lru_basic':>11s}")
            for r in sorted(rows.values(), key=lambda r: -r["tokens_per_s"]):
                bel = "-" if r["belady_hit_rate"] is None else f"{r['belady_hit_rate']:.3f}"
                print(f"{r['policy']:20s} {r['hit_rate']:6.3f} {bel:>7s} {r['loads']:7d} "
                      f"{r['cpu_computes']:6d} {r['streamed']:7d} {r['tokens_per_s']:8.2f} "
                      f"{r['vs_lru_basic']:11.2f}")
            if "vs_without_rules" in rows.get("adaptive", {}):
                print(f"adaptive: {rows['adaptive']['vs_without_rules']:.2f}x the tok/s of the same "
                      f"policy without its adapt rules")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"\n(replays took {time.perf_counter() - t0:.1f} s of wall time)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
