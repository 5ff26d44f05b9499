"""Replay throughput: dispatches per second of ``mpl.sim.replay`` for the four policies of
``bench_dispatch.py`` (imported from there), and Belady's optimum, on a synthetic
DeepSeek-V2-Lite trace (26 MoE layers x 64 experts, top-6).

For each policy it prints the full replay (compiled replay loop + hardware timeline + report),
the runtime's ``dispatch`` loop alone (what a live mechanism calls), both in wall and CPU time
of this process (the machine is shared: CPU time is the honest figure), and the compiled
replay loop (``replay_records``, timeline included) on records decoded beforehand, and a
floor for the LRU target (bare bookkeeping plus the timeline's closed form on local
clocks). Targets: >= 200k dispatches/s for LRU, >= 50k/s for the composed policy, Belady on
100k dispatches in < 2 s.

    python benchmarks/bench_replay.py [--steps 3847] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_dispatch import POLICIES  # noqa: E402  (the four policy texts)

import mpl  # noqa: E402
import mpl.runtime.backend  # noqa: E402
_backend = sys.modules["mpl.runtime.backend"]   # (mpl.runtime.backend is also a function)
from mpl.timemodel import hardware  # noqa: E402
from mpl.sim import replay, synthesize  # noqa: E402
from mpl.trace import records_of  # noqa: E402
from mpl.timemodel.timeline import Timeline  # noqa: E402
from mpl.sim.belady import belady  # noqa: E402


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def floor_lru(records, num_experts: int, costs, capacity: int = 16) -> float:
    """CPU seconds of the least work an LRU replay of policy (i) must do on these records:
    per access one dict lookup, per miss one OrderedDict popitem and one insert, and the
    timeline's closed form per dispatch on local clocks (as the compiled loop does). No
    in-use protection, no victim records, no statistics, no stall or busy sums: a lower
    bound, printed to show where the 200k/s target lies."""
    from collections import OrderedDict

    od: OrderedDict = OrderedDict((-1 - i, i) for i in range(capacity))   # full from the start
    dense1, gpu1, txf = Timeline(costs).unit_costs()
    link_bound = txf >= gpu1
    now = link = 0.0
    get, popitem, move = od.get, od.popitem, od.move_to_end
    t0 = time.process_time()
    for layer, experts, _w, _t, _s, _p, _o in records:
        base = layer * num_experts
        m = 0
        for e in experts:
            key = base + e
            if get(key) is None:
                od[key] = popitem(False)[1]
                m += 1
            else:
                move(key)
        start = now + dense1
        t = start + len(experts) * gpu1
        if m:
            s0 = start if start > link else link
            link = s0 + m * txf
            last = link + gpu1 if link_bound else s0 + txf + m * gpu1
            if last > t:
                t = last
        now = t
    return time.process_time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3847, help="decode steps (3847 -> 100,022 dispatches)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    trace, w, c = timed(lambda: synthesize("deepseek-v2-lite", steps=args.steps, seed=args.seed))
    n = len(trace)
    h = trace.header
    print(f"trace: deepseek-v2-lite preset, {n} dispatches ({args.steps} steps), synthesized in "
          f"{w:.2f} s wall / {c:.2f} s CPU; runtime backend {_backend.default()}")
    print()
    print(f"{'policy':<16}{'replay disp/s (wall / CPU)':>30}{'runtime only disp/s (wall / CPU)':>36}"
          f"{'compiled loop, CPU':>20}{'pure loop, CPU':>16}{'hit rate':>10}")
    records = list(records_of(trace.dispatches))
    costs = hardware.costs_for(hardware.resolve(None), model=h.model, expert_bytes=h.expert_bytes)
    results = {}
    for name, text in POLICIES.items():
        pol = mpl.loads(text)
        rep, w, c = timed(lambda: replay(pol, trace, belady=False))

        def loop():
            rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=h.expert_bytes)
            disp = rt.dispatch
            for d in trace.dispatches:
                disp(d.layer, d.experts[0], d.weights[0], 1, step=d.step, predictions=d.predictions)
            return rt
        _, w2, c2 = timed(loop)

        def kernel():
            rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=h.expert_bytes)
            rt.replay_records(records, Timeline(costs, overlap=bool(pol.ir["schedule.overlap"])))
        _, _, c3 = timed(kernel)      # the compiled engine's replay
        with _backend.forced("pure"):
            _, _, c4 = timed(kernel)  # the generated Python loop
        results[name] = (n / w, n / c, n / w2, n / c2)
        print(f"{name:<16}{n / w:>14,.0f} / {n / c:>11,.0f}{n / w2:>20,.0f} / {n / c2:>11,.0f}"
              f"{n / c3:>20,.0f}{n / c4:>16,.0f}{rep.hit_rate:>10.2%}")
    print()
    for label, kw in (("shared 128 slots", {"capacity": 128}),
                      ("per-layer 26 x 32", {"capacities": [32] * h.num_moe_layers})):
        r, w, c = timed(lambda: belady(trace.dispatches, h.num_experts, **kw))
        print(f"Belady {label:<20} {n} dispatches: {w:.2f} s wall / {c:.2f} s CPU "
              f"({n / c:,.0f} disp/s CPU), hit rate {r.hit_rate:.2%}")
    print()
    lru = results["lru16"][1]
    comp = results["composed"][1]
    print(f"LRU replay vs target 200k/s (CPU): {lru / 200e3:.2f}x;  "
          f"composed vs target 50k/s (CPU): {comp / 50e3:.2f}x")
    fl = min(floor_lru(records, h.num_experts, costs) for _ in range(3))
    print(f"floor: bare OrderedDict LRU bookkeeping + the timeline's closed form for policy (i), "
          f"on pre-decoded records: {fl / n * 1e6:.2f} us/dispatch ({n / fl:,.0f} disp/s); "
          f"200k/s allows 5.00 us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
