"""The memory-tier search's time (``mplc tune --device-memory``; mpl/tune_tiers.py): the
whole tune with the hierarchies of the hot / warm splits only (the families the search had
before ``dtype_ladder`` warm tiers and per-layer bands) against every family, on synthetic
traces, in one run, alternating, in this process (``--jobs 1``; CPU seconds: the machine
is shared). Prints per case the hierarchies searched, the CPU time of each search, their
ratio, the per-layer miss curves' time alone, and each search's winner (tok/s), and the
sums.

    python benchmarks/bench_tune_tiers.py [--steps 600] [--repeat 1]
"""

from __future__ import annotations

import argparse
import time

from mpl import tune as T, tune_tiers as TT
from mpl.sim import synthesize
from mpl.sim.tracemodel import with_model

#: (preset, device memory, host memory): the host case and the disk case
CASES = (("mixtral-8x7b", "24GiB", "128GiB"), ("mixtral-8x7b", "24GiB", "64GiB"),
         ("deepseek-v2-lite", "12GiB", "64GiB"), ("qwen3-30b-a3b", "16GiB", "64GiB"),
         ("qwen3-30b-a3b", "16GiB", "48GiB"))


def cpu(fn):
    c = time.process_time()
    out = fn()
    return out, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=1, help="searches per case and variant (the least CPU time counts)")
    args = ap.parse_args()
    # a warm-up search: imports and the compiled engine's first load are not timed
    warm = with_model(synthesize("mixtral-8x7b", steps=20, seed=1), None)
    T.tune(warm, device_memory="24GiB", host_memory="64GiB", jobs=1)
    print(f"{'case':<44} {'disp':>7} {'hier':>9} {'splits':>8} {'all':>8} {'ratio':>6} "
          f"{'curves':>7}  winner tok/s (splits -> all)")
    tot = {"splits": 0.0, "all": 0.0}
    for preset, dev, host in CASES:
        tr = with_model(synthesize(preset, steps=args.steps, seed=0), None)
        secs = {"splits": [], "all": []}
        res = {}
        for _ in range(args.repeat):
            for name, fams in (("splits", ("split",)), ("all", TT.FAMILIES)):
                r, s = cpu(lambda: T.tune(tr, device_memory=dev, host_memory=host, jobs=1,
                                          tier_families=fams))
                secs[name].append(s)
                res[name] = r
        _c, curve_s = cpu(lambda: TT.layer_curves(tr))
        a, b = min(secs["splits"]), min(secs["all"])
        tot["splits"] += a
        tot["all"] += b
        p = res["all"].tiers.plan
        hier = f"{res['splits'].tiers.plan.candidates}->{p.candidates}"
        win = (f"{res['splits'].best.tokens_per_s:.3f} -> {res['all'].best.tokens_per_s:.3f} "
               f"({res['all'].tiers.winner_family or 'no tiers'})")
        print(f"{preset + ' ' + dev + ' / ' + host + ' (' + p.case + ')':<44} {len(tr):>7,} "
              f"{hier:>9} {a:>7.2f}s {b:>7.2f}s {b / a:>5.2f}x {curve_s:>6.2f}s  {win}")
    print(f"{'in all':<44} {'':>7} {'':>9} {tot['splits']:>7.2f}s {tot['all']:>7.2f}s "
          f"{tot['all'] / tot['splits']:>5.2f}x")


if __name__ == "__main__":
    main()
