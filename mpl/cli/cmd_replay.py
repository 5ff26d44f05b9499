"""``mplc replay POLICY --trace T [--policy-name NAME] [--capacity N] [--hardware NAME|FILE]
[--model PRESET|config.json] [--json] [--no-belady] [--no-progress]``: replay a trace through
a policy; stats, Belady's optimum, simulated tok/s.

``--model`` (here, in ``mplc sweep`` and ``mplc tune``) names the trace's model when its
header names no preset: the expert size and shape for the cost model (mpl.sim.tracemodel).
An unknown model or an unreadable config is a usage error (exit 2), a model that does not
fit the trace an error (exit 1)."""

from __future__ import annotations


def add_arguments(parser) -> None:
    from mpl.timemodel import hardware

    from mpl.cli.options import add_no_progress, add_policy, add_policy_name

    add_policy(parser)
    parser.add_argument("--trace", "-t", required=True, metavar="T",
                        help="trace file (.mpltrace or .jsonl)")
    add_policy_name(parser, old_option=True)
    parser.add_argument("--capacity", type=_capacity, metavar="N",
                        help="override cache.capacity (slots, or a size like 12GiB); on a per-layer "
                             "policy that sets total_budget, N is each layer's capacity and replaces "
                             "total_budget (layers x N)")
    parser.add_argument("--hardware", metavar="NAME|FILE", default=None,
                        help=f"hardware profile: {', '.join(hardware.names())} or a JSON file "
                             f"(default {hardware.DEFAULT})")
    add_model_argument(parser)
    parser.add_argument("--no-belady", action="store_true", help="skip Belady's optimum")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_no_progress(parser)


def add_model_argument(parser) -> None:
    """``--model PRESET|config.json`` of replay, sweep and tune."""
    parser.add_argument("--model", metavar="PRESET|config.json",
                        help="the trace's model, when its header names no preset: a preset "
                             "(e.g. mixtral-8x7b) or a HuggingFace config.json; gives the "
                             "expert size and shape for the cost model")


def model_of(args, command: str):
    """``(shape or None, exit status or None)``: --model resolved, or the usage error
    printed (exit 2)."""
    if not getattr(args, "model", None):
        return None, None
    from mpl.shapes import ShapeError
    from mpl.sim.tracemodel import model_shape

    try:
        return model_shape(args.model), None
    except ShapeError as e:
        from mpl.cli.errors import usage
        return None, usage(f"mplc {command}", f"--model: {e}")


def _capacity(text: str):
    """``--capacity``: a slot count or a size, checked as a value of cache.capacity (the
    schema's range and size units) before it goes into the policy text."""
    import argparse

    try:
        return capacity_value(text)
    except ValueError as e:                   # argparse adds "argument --capacity: "
        raise argparse.ArgumentTypeError(str(e).removeprefix("--capacity: ")) from None


def capacity_value(text: str):
    """``"8"`` -> 8, ``"12GiB"`` -> ``"12GiB"``; ValueError (naming the value) when the text
    is not exactly one value of cache.capacity (a slot count in the schema's range, or a
    size)."""
    from mpl.sim.variants import VariantError, check_override

    t = text.strip()
    try:
        check_override("cache.capacity", t)
    except VariantError as e:
        why = f"--capacity: '{t}' is not a slot count (1..65536) or a size such as 12GiB"
        if e.code not in (None, "MPL201"):          # not just the wrong kind: say what is wrong
            why += f": {e.reason}"
        raise ValueError(why) from None
    return int(t) if t.isascii() and t.isdigit() else t


def run(args) -> int:
    from mpl.sim import PolicyLoadError, ReplayError, TraceFormatError, replay
    from mpl.timemodel.hardware import HardwareError
    from mpl.api import load_for_replay as load_policy
    from mpl.sim.tracemodel import TraceModelError
    from mpl.cli.errors import error
    from mpl.cli.options import progress_flag

    model, status = model_of(args, "replay")
    if status is not None:
        return status
    try:
        policy = load_policy(args.policy, name=args.policy_name)
        report = replay(policy, args.trace, hardware=args.hardware, capacity=args.capacity,
                        belady=not args.no_belady, model=model,
                        progress=progress_flag(args))
    except (PolicyLoadError, ReplayError, TraceFormatError, HardwareError, TraceModelError) as e:
        return error("mplc replay", str(e))
    except Exception as e:  # a runtime refusal (e.g. a budget too small for the trace's shape)
        from mpl.runtime.core import RuntimeConfigError
        if isinstance(e, (RuntimeConfigError, ValueError)):
            return error("mplc replay", str(e))
        raise
    print(report.to_json() if args.json else report.format_text())
    return 0
