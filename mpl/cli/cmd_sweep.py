"""``mplc sweep POLICY.moe [MORE.moe ...] --trace T --capacity 8,16,32,64
[--param eviction=lru,lfu] [--total] [--plot out.png] [--heatmap out.png] [--json]``: a table
of hit rate, Belady's optimum, the gap and simulated tok/s per point, and paper-ready figures.
With several policies (e.g. a shared and a per-layer one) and ``--total``, capacities are
total slots: the matched-budget comparison."""

from __future__ import annotations

import json
import os
import sys


def add_arguments(parser) -> None:
    from mpl.sim import hardware

    parser.add_argument("policy", metavar="POLICY.moe", nargs="+", help="policy file(s)")
    parser.add_argument("--trace", "-t", required=True, metavar="T", help="trace file")
    parser.add_argument("--policy", dest="policy_name", metavar="NAME",
                        help="which policy of the file (when it defines several)")
    parser.add_argument("--capacity", metavar="N,N,...", default="",
                        help="capacities to sweep (default: the policy's own)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                        help="a parameter to sweep, e.g. eviction=lru,lfu (repeatable)")
    parser.add_argument("--total", action="store_true",
                        help="capacities are total slots: a per-layer policy gets N/layers "
                             "per layer and total_budget = N (matched budget)")
    parser.add_argument("--hardware", metavar="NAME|FILE",
                        help=f"hardware profile ({', '.join(hardware.names())}) or JSON file")
    parser.add_argument("--plot", metavar="OUT.png", help="hit rate vs capacity with Belady")
    parser.add_argument("--heatmap", metavar="OUT.png", help="per-layer hit-rate heatmap")
    parser.add_argument("--title", default="", help="figure title")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="parallel processes")
    parser.add_argument("--no-belady", action="store_true", help="skip Belady's optimum")
    parser.add_argument("--json", action="store_true", help="print the points as JSON")


def _caps(text: str) -> list:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.isdigit() and int(part) >= 1:
            out.append(int(part))
        elif any(part.endswith(u) for u in ("GB", "GiB", "MB", "MiB")):
            out.append(part)
        else:
            raise ValueError(f"--capacity: '{part}' is not a slot count (>= 1) or a size like 12GiB")
    return out


def run(args) -> int:
    from mpl.sim import PolicyLoadError, TraceFormatError, traceio
    from mpl.sim.hardware import HardwareError, resolve
    from mpl.sim.replay import Progress, load_policy
    from mpl.sim.sweep import format_table, parse_param, run_sweep

    try:
        caps = _caps(args.capacity)
        params = dict(parse_param(s) for s in args.param)
        resolve(args.hardware)
        if args.jobs < 1:
            raise ValueError("--jobs must be >= 1")
        policies = [load_policy(p, name=args.policy_name) for p in args.policy]
        trace = traceio.load(args.trace)
    except (ValueError, PolicyLoadError, TraceFormatError, HardwareError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    per = len(caps or [None]) * max(1, _count(params))
    bar = Progress(per * len(policies), "sweep")
    points = []
    for k, policy in enumerate(policies):
        points += run_sweep(policy.text(), trace, caps or [None], params, policy=policy.name,
                            hardware=args.hardware, jobs=args.jobs, belady=not args.no_belady,
                            total=args.total, progress=lambda i, n, k=k: bar.update(k * per + i))
    bar.close()
    names = ", ".join(p.name for p in policies)
    title = args.title or f"{names} on {trace.header.model} ({len(trace)} dispatches)"
    written = []
    try:
        if args.plot:
            from mpl.sim.plots import hit_rate_plot
            written.append(hit_rate_plot(points, args.plot, title=title))
        if args.heatmap:
            from mpl.sim.plots import heatmap
            written.append(heatmap(points, args.heatmap, title=title))
    except OSError as e:
        print(f"error: cannot write {e.filename or 'the figure'}: {e.strerror or e}", file=sys.stderr)
        return 1
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    from mpl.sim.hardware import DEFAULT as hw_default
    if args.json:
        print(json.dumps({"policies": [p.name for p in policies], "trace": args.trace,
                          "hardware": args.hardware, "points": [p.to_dict() for p in points],
                          "figures": written}, indent=2))
    else:
        print(f"sweep of {names} on {trace.header.model} "
              f"({len(trace)} dispatches), hardware {args.hardware or hw_default + ' (default)'}")
        print(format_table(points))
        for w in written:
            print(f"wrote {w}")
    return 1 if all(p.error for p in points) else 0


def _count(params: dict) -> int:
    n = 1
    for v in params.values():
        n *= len(v)
    return n
