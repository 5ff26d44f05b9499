"""``mplc replay POLICY.moe --trace T [--capacity N] [--hardware NAME|FILE] [--json]
[--no-belady]``: replay a trace through a policy; stats, Belady's optimum, simulated tok/s."""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from mpl.sim import hardware

    parser.add_argument("policy", metavar="POLICY.moe", help="policy file")
    parser.add_argument("--trace", "-t", required=True, metavar="T",
                        help="trace file (.mpltrace or .jsonl)")
    parser.add_argument("--policy", dest="policy_name", metavar="NAME",
                        help="which policy of the file (when it defines several)")
    parser.add_argument("--capacity", type=_capacity, metavar="N",
                        help="override cache.capacity (slots, or a size like 12GiB)")
    parser.add_argument("--hardware", metavar="NAME|FILE", default=None,
                        help=f"hardware profile: {', '.join(hardware.names())} or a JSON file "
                             f"(default {hardware.DEFAULT})")
    parser.add_argument("--no-belady", action="store_true", help="skip Belady's optimum")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _capacity(text: str):
    import argparse
    from mpl import schema

    t = text.strip()
    if t.isdigit() and int(t) >= 1:
        return int(t)
    for unit in schema.SIZE_UNITS:
        if t.endswith(unit):
            num = t[: -len(unit)].strip()
            try:
                float(num)
            except ValueError:
                break
            return f"{num}{unit}"
    raise argparse.ArgumentTypeError(f"'{text}' is not a slot count (>= 1) or a size like 12GiB")


def run(args) -> int:
    from mpl.sim import PolicyLoadError, ReplayError, TraceFormatError, replay
    from mpl.sim.hardware import HardwareError
    from mpl.sim.replay import load_policy

    try:
        policy = load_policy(args.policy, name=args.policy_name)
        report = replay(policy, args.trace, hardware=args.hardware, capacity=args.capacity,
                        belady=not args.no_belady,
                        progress=None if not args.no_progress else False)
    except (PolicyLoadError, ReplayError, TraceFormatError, HardwareError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a runtime refusal (e.g. a budget too small for the trace's shape)
        from mpl.runtime.core import RuntimeConfigError
        if isinstance(e, (RuntimeConfigError, ValueError)):
            print(f"error: {e}", file=sys.stderr)
            return 1
        raise
    print(report.to_json() if args.json else report.format_text())
    return 0
