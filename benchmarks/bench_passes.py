"""What a bounded transient area costs a prefill, against one entry per expert.

A Mixtral-shaped random model with many experts per layer (default 64, top-2) and a small
cache, so that a prefill streams most of a layer's experts: its prefill time with
``stream_slots`` = E (one kernel call per dispatch) against a bounded transient area
(``stream_slots`` = N) two ways: the policy as it is, where on the CPU a dispatch that
streams more than N experts is computed from the host store's own tensors in one call
("host window"; eager runs its passes), and the same policy as a hierarchy of a gpu tier
over a cpu tier (the same decisions; the host store then does not serve computes, so the
dispatch is computed in passes, as on a GPU); per experts implementation, each ratio measured
in one run with the three attachments alternating; and whether the logits are the same bits
(they must be: docs/offload.md, "Passes").

    python benchmarks/bench_passes.py [--experts 64] [--slots 16,8] [--tokens 64] [--reps 5]

Times are the process's CPU time (torch on ``--threads`` threads, default 1), medians over
``--reps``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import mpl
from mpl.offload.hf import attach
from mpl.offload.models import build_model

CLOCK = time.process_time


def prefill(model, ids):
    with torch.no_grad():
        return model(ids).logits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--slots", default="16,8", help="bounded transient areas to compare")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--capacity", type=int, default=4, help="the policy's cache capacity")
    ap.add_argument("--impls", default="eager,batched_mm,grouped_mm")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    policy = mpl.loads("policy p {\n cache { capacity = %d }\n}" % args.capacity)
    tiered = mpl.loads("policy p {\n hierarchy {\n  tier gpu { location = gpu  capacity = %d }\n"
                       "  tier host { location = cpu }\n }\n}" % args.capacity)
    print(f"{args.experts} experts per layer, top-2, {args.tokens}-token prefill, cache "
          f"capacity {args.capacity}, {args.threads} thread(s); CPU time, median of {args.reps}")
    print(f"{'impl':<11} {'slots':>5} {'one call ms':>12} {'host window ms':>25} {'ratio':>6} "
          f"{'passes ms':>10} {'ratio':>6}  same bits")
    for impl in args.impls.split(","):
        model = build_model("tiny-mixtral", experts_implementation=impl, layers=4,
                            num_local_experts=args.experts, hidden_size=128,
                            intermediate_size=256)
        ids = torch.randint(0, model.config.vocab_size, (1, args.tokens), generator=gen)
        ref = prefill(model, ids)
        for n in (int(x) for x in args.slots.split(",")):
            runs = {"one": (policy, args.experts), "window": (policy, n), "passes": (tiered, n)}
            times = {k: [] for k in runs}
            outs, counts = {}, {}
            for _ in range(args.reps):
                for k, (pol, slots) in runs.items():
                    h = attach(pol, model, stream_slots=slots)
                    try:
                        t0 = CLOCK()
                        outs[k] = prefill(model, ids)
                        times[k].append(CLOCK() - t0)
                        m = h.get_stats()["mechanism"]
                        counts[k] = (m["host_window_dispatches"], m["multi_pass_dispatches"])
                    finally:
                        h.detach()
            ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            differ = [k for k in runs if not torch.equal(outs[k], ref)]
            if differ:
                print("  differs from the unmodified model:", ", ".join(differ))
            win = "(passes)" if impl == "eager" else f"({counts['window'][0]} dispatches)"
            print(f"{impl:<11} {n:>5} {ms['one']:>12.1f} {win:>17} {ms['window']:>7.1f} "
                  f"{ms['window'] / ms['one']:>5.2f}x {ms['passes']:>10.1f} "
                  f"{ms['passes'] / ms['one']:>5.2f}x  {'NO' if differ else 'yes'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
