"""Memory tiers on both backends: a tiered policy's replay of one trace on the compiled engine
(mpl/runtime/c/tiers.c) and on the pure runtime, timed in the same run, and the ratio.

Both replays run through the public ``mpl.replay`` (the runtime's replay loop and the
tiered timeline, which is Python on both backends: the engine hands it each dispatch's Plan),
and the live ``rt.dispatch`` loop over the same dispatches; the statistics are checked equal.

    python benchmarks/bench_tiers_backends.py [--steps N] [--repeat R]
"""

from __future__ import annotations

import argparse
import time

import mpl
from mpl.runtime.backend import forced
from mpl.sim import synthesize

POLICIES = {
    "gpu/host": """policy p { hierarchy { tier hot { location = gpu  capacity = 48 }
        tier ram { location = cpu  capacity = 400 }  eviction = lru }
        prefetch { strategy = history  budget = 2 } }""",
    "gpu/int4/host/disk": """policy p { hierarchy {
        tier hot  { location = gpu  capacity = 48 }
        tier warm { location = gpu  dtype = int4  capacity = 96  eviction = lfu }
        tier ram  { location = cpu  capacity = 300 }
        tier ssd  { location = disk }
        on demote(hot -> warm) { mechanism = in_place_requant }
        on promote(warm -> hot) { trigger_threshold = 0.05 }
        eviction = lru } }""",
    "gpu/host in 2 parts": """policy p { hierarchy { tier hot { location = gpu  capacity = 96 }
        tier ram { location = cpu  capacity = 800 }  eviction = lru  granularity_split = 2 }
        prefetch { strategy = history  budget = 2 } }""",
}


def best(fn, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trace = synthesize("mixtral-8x7b", steps=args.steps, seed=1)
    h = trace.header
    ds = [(d.layer, d.distinct()) for d in trace.dispatches]
    print(f"trace: mixtral-8x7b, {args.steps} steps, {len(ds)} dispatches; best of {args.repeat}")
    print(f"{'policy':22} {'replay pure s':>13} {'compiled s':>10} {'ratio':>6}   "
          f"{'dispatch pure s':>15} {'compiled s':>10} {'ratio':>6}")
    for name, text in POLICIES.items():
        pol = mpl.loads(text)
        with forced("pure"):
            ref = pol.replay(trace)
        rep = pol.replay(trace)
        assert rep.stats == ref.stats and rep.sim == ref.sim, name
        assert pol.runtime(h.num_moe_layers, h.num_experts, h.top_k).backend == "compiled", name

        def replay_on(backend):
            with forced(backend):
                pol.replay(trace)

        def dispatch_on(backend):
            rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, backend=backend)
            for layer, ex in ds:
                rt.dispatch(layer, ex)

        rp, rc = best(lambda: replay_on("pure"), args.repeat), best(lambda: replay_on("compiled"), args.repeat)
        dp, dc = best(lambda: dispatch_on("pure"), args.repeat), best(lambda: dispatch_on("compiled"), args.repeat)
        print(f"{name:22} {rp:13.3f} {rc:10.3f} {rp / rc:5.1f}x   {dp:15.3f} {dc:10.3f} {dp / dc:5.1f}x")


if __name__ == "__main__":
    main()
