"""``mplc sweep POLICY [MORE ...] --trace T --capacity 8,16,32,64
[--param eviction=lru,lfu] [--total] [--plot out.png] [--heatmap out.png] [--json]
[--no-progress]``: a table
of hit rate, Belady's optimum, the gap and simulated tok/s per point, and paper-ready figures.
With several policies (e.g. a shared and a per-layer one) and ``--total``, capacities are
total slots: the matched-budget comparison.

Every --capacity and --param value is checked up front (as the checker checks a value of
that parameter) before any replay runs: a bad one is an error (exit 1), a parameter given
twice a usage error (exit 2). A point that fails anyway (e.g. a prefetch budget above one of
the swept capacities) shows ``error N`` in its row and its message in a list under the
table; the exit status is then 1.

``--plot`` and ``--heatmap`` are checked before the sweep too: matplotlib must be installed,
each file's extension must be a format it writes (a usage error naming the formats), the two
must be different files, and neither may be an input (the trace, a policy, the hardware
profile or the model's config: exit 1). The table (or the JSON, whose ``figures`` lists them)
is printed first, then the figures are written; one that cannot be written is an error
after the table (exit 1)."""

from __future__ import annotations

import json
import sys


def add_arguments(parser) -> None:
    from mpl.cli.cmd_replay import add_model_argument
    from mpl.timemodel import hardware

    from mpl.cli.options import (add_no_progress, add_policy, add_policy_name, assignment_list,
                                 comma_list)

    add_policy(parser, several=True)
    parser.add_argument("--trace", "-t", required=True, metavar="T", help="trace file")
    add_policy_name(parser, old_option=True)
    parser.add_argument("--capacity", metavar="N,N,...", type=comma_list,
                        help="capacities to sweep (default: the policy's own)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                        type=assignment_list,
                        help="a parameter to sweep, e.g. eviction=lru,lfu (repeatable, once per "
                             "parameter; every value is checked before any replay)")
    parser.add_argument("--total", action="store_true",
                        help="capacities are total slots: a per-layer policy gets N/layers "
                             "per layer and total_budget = N (matched budget)")
    parser.add_argument("--hardware", metavar="NAME|FILE",
                        help=f"hardware profile ({', '.join(hardware.names())}) or JSON file")
    add_model_argument(parser)
    parser.add_argument("--plot", metavar="OUT.png",
                        help="hit rate vs capacity with Belady; the extension chooses the format "
                             "(png, pdf, svg, ...; none: png)")
    parser.add_argument("--heatmap", metavar="OUT.png",
                        help="per-layer hit-rate heatmap (formats as --plot)")
    parser.add_argument("--title", help="figure title")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="parallel processes")
    parser.add_argument("--no-belady", action="store_true", help="skip Belady's optimum")
    parser.add_argument("--json", action="store_true", help="print the points as JSON")
    add_no_progress(parser)


PROG = "mplc sweep"


def _caps(text: str | None, total: bool = False) -> list:
    """The --capacity list (none: the policy's own), each value checked as cache.capacity
    (with --total, a slot count is a total budget: per_layer.total_budget's range)."""
    from mpl.cli.cmd_replay import capacity_value
    from mpl.sim.variants import VariantError, check_override

    if text is None:
        return []
    out = []
    for part in (p.strip() for p in text.split(",")):
        if total and part.isascii() and part.isdigit():
            try:
                check_override("per_layer.total_budget", int(part))
            except VariantError as e:
                raise ValueError(f"--capacity (--total): {e}") from None
            out.append(int(part))
        else:
            out.append(capacity_value(part))
    return out


def run(args) -> int:
    from mpl import tracecols
    from mpl.sim import PolicyLoadError, TraceFormatError
    from mpl.timemodel.hardware import HardwareError, resolve
    from mpl.api import load_for_replay as load_policy
    from mpl.cli.errors import error, usage
    from mpl.cli.options import bar as progress_bar
    from mpl.sim.sweep import RepeatedParam, format_errors, format_table, parse_params, run_sweep
    from mpl.cli.cmd_replay import model_of
    from mpl.sim.tracemodel import TraceModelError, with_model

    model, status = model_of(args, "sweep")
    if status is not None:
        return status
    status = _check_figures(args)           # before the sweep, not after it
    if status is not None:
        return status
    try:
        params = parse_params(args.param)
        if "cache.capacity" in params and args.capacity is not None:
            raise RepeatedParam("--param capacity=... and --capacity both set cache.capacity; "
                                "give the capacities once, with --capacity")
    except RepeatedParam as e:
        return usage(PROG, str(e))
    except ValueError as e:
        return error(PROG, str(e))
    try:
        caps = _caps(args.capacity, args.total)
        resolve(args.hardware)
        if args.jobs < 1:
            raise ValueError("--jobs must be >= 1")
        policies = [load_policy(p, name=args.policy_name) for p in args.policy]
        trace = with_model(tracecols.load(args.trace), model)
    except (ValueError, PolicyLoadError, TraceFormatError, HardwareError, TraceModelError) as e:
        return error(PROG, str(e))
    per = len(caps or [None]) * max(1, _count(params))
    bar = progress_bar(args, per * len(policies), "sweep")
    from mpl.sim.sweep import SweepError
    points = []
    for k, policy in enumerate(policies):
        try:
            points += run_sweep(policy.text(), trace, caps or [None], params, policy=policy.name,
                                hardware=args.hardware, jobs=args.jobs, belady=not args.no_belady,
                                total=args.total,
                                progress=lambda i, n, k=k: bar.update(k * per + i))
        except SweepError as e:
            bar.close()
            return error(PROG, f"{policy.name}: {e}")
    bar.close()
    names = ", ".join(p.name for p in policies)
    figures = [f for f in (args.plot, args.heatmap) if f]
    from mpl.timemodel.hardware import DEFAULT as hw_default
    from mpl.sim.tracemodel import describe_expert_size, trace_expert_size
    eb, eb_source = trace_expert_size(trace.header)     # unless a policy sets expert_size_gb
    if args.json:
        print(json.dumps({"policies": [p.name for p in policies], "trace": args.trace,
                          "hardware": args.hardware, "expert_bytes": eb,
                          "expert_bytes_source": eb_source,
                          "points": [p.to_dict() for p in points],
                          "figures": figures}, indent=2))
    else:
        print(f"sweep of {names} on {trace.header.model} "
              f"({len(trace)} dispatches), hardware {args.hardware or hw_default + ' (default)'}")
        print(f"expert size {describe_expert_size(eb, eb_source)}")
        print(format_table(points))
        errors = format_errors(points)
        if errors:
            print()
            print(errors)
    sys.stdout.flush()                      # the table is out before a figure can fail
    title = args.title or f"{names} on {trace.header.model} ({len(trace)} dispatches)"
    status = _write_figures(args, points, title)
    failed = sum(1 for p in points if p.error)
    if failed and args.json:                # the messages are in the JSON's "error" fields
        error(PROG, f"{failed} of {len(points)} sweep points failed")
    return 1 if failed or status else 0


def _format_problem(option: str, path: str) -> str | None:
    """Why matplotlib cannot write the figure ``path`` (its extension is no format of its),
    or None. matplotlib's own list (imported here only when a figure is asked for: the
    figure imports it anyway)."""
    from matplotlib.backend_bases import FigureCanvasBase

    from mpl.sim.plots import figure_format

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if figure_format(path) in formats:
        return None
    return (f"{option} {path}: matplotlib writes no '{figure_format(path)}' figures; end the "
            f"file name in one of {', '.join('.' + f for f in formats)} (no extension: png)")


def _check_figures(args) -> int | None:
    """None when --plot and --heatmap can be written once the sweep is done, else the exit
    status after saying why: matplotlib is installed, each file's extension is a format it
    writes, the two are different files and neither is an input of the sweep."""
    from mpl.cli.errors import error, usage
    from mpl.cli.outputs import overwrite_problem, same_file

    given = [(o, f) for o, f in (("--plot", args.plot), ("--heatmap", args.heatmap)) if f]
    if not given:
        return None
    from mpl.extras import unavailable
    why = unavailable("matplotlib")
    if why is not None:
        return error(PROG, f"{given[0][0]}: {why}")
    for option, path in given:
        why = _format_problem(option, path)
        if why is not None:
            return usage(PROG, why)
    if len(given) == 2 and same_file(args.plot, args.heatmap):
        return usage(PROG, f"--plot and --heatmap name one file ({args.plot}): give each figure "
                           f"its own")
    inputs = [("trace", args.trace), ("model", args.model), ("hardware profile", args.hardware)]
    inputs += [("policy file", p) for p in args.policy]
    for option, path in given:
        why = overwrite_problem(path, inputs, "the figure", option=option)
        if why is not None:
            return error(PROG, why)
    return None


def _write_figures(args, points, title: str) -> int:
    """Write --plot and --heatmap (after the table is out); 0, or 1 after saying which
    figure could not be written."""
    from mpl.cli.errors import error
    from mpl.sim.plots import heatmap, hit_rate_plot

    for path, draw in ((args.plot, hit_rate_plot), (args.heatmap, heatmap)):
        if not path:
            continue
        try:
            draw(points, path, title=title)
        except OSError as e:
            return error(PROG, f"cannot write {e.filename or path}: {e.strerror or e}")
        except (RuntimeError, ValueError) as e:
            return error(PROG, f"{path}: {e}")
        if not args.json:
            print(f"wrote {path}")
    return 0


def _count(params: dict) -> int:
    n = 1
    for v in params.values():
        n *= len(v)
    return n
