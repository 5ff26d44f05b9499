"""``mplc tune --trace T (--budget SLOTS|SIZE | --device-memory SIZE [--host-memory SIZE]
[--disk NAME] [--kv-reserve SIZE]) [--hardware NAME] [--model PRESET|config.json]
[--objective tokens_per_s|hit_rate] [--search halving|grid] [-o best.moe [--force]]
[--jobs N] [--json]``: search policies for a trace and write the winner. With
``--device-memory`` the search also considers memory tiers (:mod:`mpl.tune_tiers`): where the
model's experts fit (the device, host memory, or only with a disk tier) and hierarchies with
a lower-precision gpu warm tier, ranked beside the plain cache. The default
objective is the simulated tokens/s on the hardware profile (``tok_s`` is accepted for
``tokens_per_s``); the leaderboard shows hit rate, the Belady optimum of each row's cache
structure and the gap to it, tok/s, and how much of the trace the row was replayed on.
``-o`` does not replace an existing file without ``--force``."""

from __future__ import annotations

import json
import os


def add_arguments(parser) -> None:
    from mpl.cli.cmd_replay import add_model_argument
    from mpl.timemodel import hardware
    from mpl.tune import DEFAULT_OBJECTIVE, OBJECTIVE_ALIASES, OBJECTIVES

    parser.add_argument("--trace", "-t", required=True, metavar="T", help="trace file")
    from mpl.timemodel.hardware import DISKS
    from mpl.tune_tiers import HOST_RESERVE

    parser.add_argument("--budget", "-b", metavar="SLOTS|SIZE",
                        help="total expert slots (e.g. 864) or device memory for experts (e.g. "
                             "12GiB); or give --device-memory")
    parser.add_argument("--device-memory", metavar="SIZE",
                        help="the device's memory (e.g. 24GiB), instead of --budget: the "
                             "skeleton, the KV-cache reserve and the slot pool's transient "
                             "entries come out of it, the rest holds experts; the search also "
                             "considers memory tiers (where the experts fit: the device, host "
                             "memory, or a disk tier below host memory; gpu warm tiers at "
                             "int8/int4 or a dtype_ladder; per-layer bands); needs the model "
                             "(--model, or a preset the trace names)")
    parser.add_argument("--kv-reserve", metavar="SIZE",
                        help="with --device-memory: device memory kept for the KV cache and "
                             "activations (default: 10%% of the device's memory, at least 1GiB)")
    parser.add_argument("--host-memory", metavar="SIZE",
                        help=f"host memory (e.g. 64GiB; with --device-memory; default: the "
                             f"hardware profile's); a host tier holds it less a "
                             f"{HOST_RESERVE * 100:.0f}%% reserve")
    parser.add_argument("--disk", choices=tuple(DISKS), metavar="|".join(DISKS),
                        help="the disk a disk tier reads from (with --device-memory; default: "
                             "the hardware profile's)")
    parser.add_argument("--hardware", metavar="NAME|FILE",
                        help=f"hardware profile ({', '.join(hardware.names())}) or JSON file")
    add_model_argument(parser)
    parser.add_argument("--objective", choices=OBJECTIVES + tuple(OBJECTIVE_ALIASES),
                        default=DEFAULT_OBJECTIVE, metavar="|".join(OBJECTIVES),
                        help=f"what to maximise: simulated tokens/s on the hardware profile "
                             f"(default {DEFAULT_OBJECTIVE}) or hit_rate; the other breaks ties")
    parser.add_argument("-o", "--output", metavar="best.moe",
                        help="write the winner here (an existing file only with --force; not -: the "
                             "standard output is the report)")
    parser.add_argument("--force", action="store_true",
                        help="let -o replace an existing file")
    parser.add_argument("--name", default="tuned", help="name of the written policy")
    parser.add_argument("--jobs", "-j", type=int, default=0,
                        help="parallel processes (default: every core)")
    parser.add_argument("--search", choices=("halving", "grid"), default="halving",
                        help="halving (default): successive halving on prefixes of the trace "
                             "over every rule, pins, prefetch and schedule; grid: the earlier "
                             "54-candidate staged grid")
    parser.add_argument("--top", type=int, default=10, help="leaderboard rows to print")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    from mpl.cli.options import add_no_progress
    add_no_progress(parser)


PROG = "mplc tune"


def run(args) -> int:
    from mpl import tracecols
    from mpl.sim import TraceFormatError
    from mpl.timemodel.hardware import HardwareError
    from mpl import tune as T
    from mpl.cli.errors import error, usage
    from mpl.cli.options import bar as progress_bar
    from mpl.cli.outputs import overwrite_problem
    from mpl.cli.cmd_replay import model_of
    from mpl.sim.tracemodel import TraceModelError, describe_expert_size, with_model

    model, status = model_of(args, "tune")
    if status is not None:
        return status
    tiered = args.device_memory is not None
    if args.budget is None and not tiered:
        return usage(PROG, "give --budget SLOTS|SIZE or --device-memory SIZE")
    if args.budget is not None and tiered:
        return usage(PROG, "give --budget or --device-memory, not both (--device-memory is the "
                           "device's memory: the budget is what it leaves for experts)")
    if not tiered and (args.host_memory is not None or args.disk is not None
                       or args.kv_reserve is not None):
        return usage(PROG, "--host-memory, --disk and --kv-reserve go with --device-memory")
    if tiered and args.search != "halving":
        return usage(PROG, "--device-memory (the memory-tier search) runs with --search halving")
    if args.jobs < 0:
        return error(PROG, "--jobs must be >= 0")
    if args.output == "-":
        return usage(PROG, "-o -: the report is what tune writes on the standard output; write "
                           "the tuned policy to a file, or read it from --json's policy_text")
    why = overwrite_problem(args.output, [("trace", args.trace), ("model", args.model),
                                          ("hardware profile", args.hardware)],
                            "the tuned policy")
    if why is not None:
        return error(PROG, why)
    if args.output and not args.force and os.path.isfile(args.output):
        # checked before the search: a hand-written policy is not replaced by accident
        return usage(PROG, f"-o {args.output}: the file exists; give --force to replace it, or "
                           f"choose another -o")
    if args.top < 0:
        return error(PROG, "--top must be >= 0")
    why = T.policy_name_problem(args.name)
    if why is not None:
        return error(PROG, f"--name: {why}")
    try:
        trace = with_model(tracecols.load(args.trace), model)
        bar = progress_bar(args, 100, "tune")
        state = {"n": 0}

        def progress(stage, i, n):
            state["n"] += 1
            bar.label = f"tune stage {stage}"
            bar.total = n
            bar.update(i)

        result = T.tune(trace, args.budget, hardware=args.hardware, objective=args.objective,
                        jobs=args.jobs or None, name=args.name, progress=progress,
                        search=args.search, device_memory=args.device_memory,
                        host_memory=args.host_memory, disk=args.disk,
                        kv_reserve=args.kv_reserve)
        bar.close()
    except (TraceFormatError, HardwareError, TraceModelError, ValueError) as e:
        return error(PROG, str(e))
    b = result.best
    desc = f"{trace.header.model} trace {os.path.basename(args.trace)} ({len(trace)} dispatches)"
    text = T.winner_text(result, desc, T.command_line(), name=args.name)
    if args.output:
        try:
            from mpl.fileio import write_atomic

            write_atomic(args.output, text)
        except OSError as e:
            return error(PROG, f"cannot write {args.output}: {e.strerror or e}")
    if args.json:
        d = result.to_dict()
        d["output"] = args.output
        print(json.dumps(d, indent=2))
        return 0
    from mpl.timemodel.hardware import DEFAULT as hw_default
    print(f"tuned for {desc}, budget {result.budget} slots, objective {result.objective} "
          f"(hardware {args.hardware or hw_default + ' (default)'}); {result.evaluated} candidates, "
          f"{result.search} search ({result.replayed:.1f} whole-trace replays)")
    print(f"expert size {describe_expert_size(result.expert_bytes, result.expert_bytes_source)}")
    if result.budget_note():
        print(f"note: {result.budget_note()}")
    head = (f"{'hit rate':>8}  {'demand':>7}  {'Belady':>7}  {'of opt':>6}  {'tok/s':>8}  "
            f"{'trace':>5}  policy")

    def line(c, lead):
        note = f"  [{c.role}]" if c.role else ""
        if c.error:
            return (f"{lead}{'-':>8}  {'-':>7}  {'-':>7}  {'-':>6}  {'-':>8}  {c.fraction:5.0%}  "
                    f"{c.describe()}  (error: {c.error})")
        bel = f"{c.belady:7.2%}" if c.belady is not None else f"{'-':>7}"
        of = f"{c.of_belady:6.1%}" if c.of_belady is not None else f"{'-':>6}"
        return (f"{lead}{c.hit_rate:8.2%}  {c.demand_hit_rate:7.2%}  {bel}  {of}  "
                f"{c.tokens_per_s:8.2f}  {c.fraction:5.0%}  {c.describe()}{note}")

    print(f"{'#':>3}  {head}")
    for i, c in enumerate(result.leaderboard[: args.top], 1):
        print(line(c, f"{i:>3}  "))
    refs = T.reference_rows(result)
    if refs:
        # every reference rule at its best schedule beside the winner: the fair comparison
        print("the winner and each reference rule at its best schedule (hit rate: arrived keys; "
              "of opt: the demand hit rate's share of the structure's Belady optimum):")
        print(f"     {head}")
        print(line(b, "  *  "))
        for c in refs:
            print(line(c, "     "))
    print(f"Belady (demand-only) optimum for the winner's cache structure: {result.belady:.2%}")
    if result.lru is not None:
        print(f"plain LRU at this budget: {result.lru.hit_rate:.2%}, {result.lru.tokens_per_s:.2f} "
              f"tok/s ({result.lru.describe()}); the winner: "
              f"{result.best.tokens_per_s / result.lru.tokens_per_s:.2f}x its tok/s")
    if result.dominates is not None:
        print("the winner is at least as fast and hits at least as often (demand hit rate) as "
              "every reference rule at its best schedule"
              if result.dominates else
              "no candidate is at least as fast with at least the demand hit rate of every "
              "reference rule: the winner is the objective's best")
    if result.set_aside is not None:
        print(f"set aside for the winner (the objective's best, behind a reference rule in "
              f"demand hit rate or slower than plain LRU): {result.set_aside.describe()} "
              f"{result.set_aside.hit_rate:.2%} (demand {result.set_aside.demand_hit_rate:.2%}), "
              f"{result.set_aside.tokens_per_s:.2f} tok/s")
    if result.predictors:
        from mpl.tune_predict import format_scores
        print("next-layer prediction on this trace (accuracy and coverage per prefetch budget):")
        for text_line in format_scores(result.predictors).splitlines():
            print("  " + text_line)
    if result.tiers is not None:
        _print_tiers(result, head, line)
    if args.output:
        print(f"wrote {args.output}")
    else:
        print()
        print(text, end="")
    return 0


def _print_tiers(result, head: str, line) -> None:
    """The memory-tier search: where the experts fit, the hierarchies beside the plain
    cache's best, and the winner's tiers (mpl.sim.tierreport)."""
    from mpl.sim.tierreport import tier_lines

    t = result.tiers
    print(f"memory tiers: {t.plan.message()}")
    if t.plan.case == "device":
        return
    rows = result.tier_rows()
    plain = result.plain_best()
    fams = ", ".join(f"{n} {f}" for f, n in t.plan.families.items())
    print(f"{t.plan.candidates} hierarchies searched ({fams}); on the whole trace (approx: "
          f"accesses computed from a lower-precision copy):")
    print(f"     {head}  approx")
    for c in rows:
        mark = "  *  " if c is result.best else "     "
        ap = (c.counts or {}).get("approximate", 0)
        acc = (c.counts or {}).get("accesses") or 1
        print(f"{line(c, mark)}  {ap / acc:.1%}")
    if plain is not None:
        note = ("" if t.plain_feasible else
                "  (needs host memory for every expert: not this machine's)")
        print(line(plain, "  *  " if plain is result.best else "     ") + "  [no tiers]" + note)
    if t.winner_tiered:
        need = t.winner_device.get("total", 0)
        print(f"the winner ({t.winner_family}) needs {need / 2 ** 30:,.1f} GiB of the device's "
              f"{t.plan.device_bytes / 2 ** 30:,.1f} GiB: " +
              "; ".join(f"{k} {v / 2 ** 30:,.2f} GiB" for k, v in t.winner_device.items()
                        if k != "total"))
        if t.winner_live:
            print(f"not live yet: {t.winner_live}")
        print("the winner's tiers on the whole trace:")
        for x in tier_lines({"tiers": t.winner_rows, "accesses": t.accesses,
                             "approximate_computes": t.approximate}):
            print(x)
