"""Callbacks that read the runtime: what a logging handler reading ``rt.stats()`` on every
monitor record costs on each backend, and two runtimes on two threads sharing one handler.

A policy with a monitor logging every ``--log-interval`` accesses replays a deterministic
synthetic trace (27 MoE layers, 64 experts, top-6) by ``rt.dispatch``; a handler on the
``mpl.runtime`` logger reads ``stats()`` of the runtime the record came from (and so runs
after the dispatch has released the runtime's lock, SPEC §5). The same run without the
handler gives the bare cost. Printed: CPU microseconds per dispatch, pure and compiled, with
and without the handler, and the ratio compiled / pure with the handler (the engine must stay
within 2x of the pure runtime running the same handler).

Then two runtimes dispatch on two threads while one handler reads both runtimes' stats on
each record: the run must finish (no deadlock; a watchdog fails it after ``--timeout`` s).

    python benchmarks/bench_callbacks.py [--steps 200] [--log-interval 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dispatch import EXPERTS, LAYERS, TOP_K, make_trace  # noqa: E402

CLOCK = time.process_time


def policy_text(interval: int) -> str:
    return f"""policy watched {{
        cache {{ capacity = 64 eviction = lfu }}
        prefetch {{ strategy = history budget = 2 }}
        monitor {{ metrics = [hit_rate, miss_rate] window = 100 log_interval = {interval} }}
    }}"""


class StatsReader(logging.Handler):
    """Reads stats() of every runtime it is given on each record (what a dashboard does)."""

    def __init__(self, runtimes):
        super().__init__(logging.DEBUG)
        self.runtimes = runtimes
        self.reads = 0

    def emit(self, record):
        for rt in self.runtimes:
            rt.stats()
            self.reads += 1


def one_run(pol, backend: str, trace, handler: bool) -> tuple[float, int]:
    rt = pol.runtime(LAYERS, EXPERTS, TOP_K, backend=backend)
    log = logging.getLogger("mpl.runtime")
    h = StatsReader([rt]) if handler else None
    level = log.level
    if h is not None:
        log.addHandler(h)
        log.setLevel(logging.DEBUG)
    try:
        d = rt.dispatch
        t0 = CLOCK()
        for layer, ex, w in trace:
            d(layer, ex, w)
        return CLOCK() - t0, (h.reads if h is not None else 0)
    finally:
        if h is not None:
            log.removeHandler(h)
        log.setLevel(level)


def two_threads(pol, backend: str, trace, timeout: float) -> tuple[bool, int]:
    """Two runtimes, each dispatched on its own thread; one handler reads both on every
    record. (finished, reads)."""
    a = pol.runtime(LAYERS, EXPERTS, TOP_K, backend=backend)
    b = pol.runtime(LAYERS, EXPERTS, TOP_K, backend=backend)
    log = logging.getLogger("mpl.runtime")
    h = StatsReader([a, b])
    level = log.level
    log.addHandler(h)
    log.setLevel(logging.DEBUG)
    try:
        def drive(rt):
            for layer, ex, w in trace:
                rt.dispatch(layer, ex, w)
        ts = [threading.Thread(target=drive, args=(rt,), daemon=True) for rt in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout)
        return not any(t.is_alive() for t in ts), h.reads
    finally:
        log.removeHandler(h)
        log.setLevel(level)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="decode steps (x 27 dispatches)")
    ap.add_argument("--log-interval", type=int, default=20, help="accesses between records")
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    ap.add_argument("--timeout", type=float, default=120.0, help="the two-thread watchdog, s")
    args = ap.parse_args(argv)
    import mpl
    from mpl.runtime import compiled

    if not compiled.available():
        print(f"the compiled engine is not available ({compiled.WHY}): nothing to compare")
        return 1
    pol = mpl.loads(policy_text(args.log_interval))
    trace = make_trace(args.steps)
    n = len(trace)
    best: dict = {}
    reads: dict = {}
    for _ in range(args.repeat):          # interleaved rounds: the best of each counts
        for backend in ("pure", "compiled"):
            for handler in (False, True):
                t, r = one_run(pol, backend, trace, handler)
                key = (backend, handler)
                best[key] = min(best.get(key, float("inf")), t)
                reads[key] = r
    print(f"{n:,} dispatches ({LAYERS} layers x {EXPERTS} experts, top-{TOP_K}), a record every "
          f"{args.log_interval} accesses; CPU us per dispatch (best of {args.repeat})")
    print(f"{'':10} {'bare':>8} {'handler':>9} {'stats() reads':>14}")
    for backend in ("pure", "compiled"):
        print(f"{backend:10} {best[(backend, False)] / n * 1e6:8.2f} "
              f"{best[(backend, True)] / n * 1e6:9.2f} {reads[(backend, True)]:14,}")
    ratio = best[("compiled", True)] / best[("pure", True)]
    print(f"with the handler, compiled / pure: {ratio:.2f}x (target: at most 2x)")
    ok = ratio <= 2.0
    for backend in ("pure", "compiled"):
        done, r = two_threads(pol, backend, trace, args.timeout)
        print(f"two runtimes on two threads, one handler reading both ({backend}): "
              f"{'finished' if done else 'DID NOT FINISH (deadlock?)'}, {r:,} stats() reads")
        ok = ok and done
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
