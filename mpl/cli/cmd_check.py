"""``mplc check FILE...``: check policy files and print their diagnostics.

Exit status: 0 when no file has an error (warnings and hints allowed), 1 when any has one
(including a file that cannot be read), 2 on usage errors (an unknown ``--model``, a bad
``--device-memory``, ``-`` given more than once: the standard input can be read only once).
"""

from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="policy files (.moe or .policy); '-' reads the standard input, "
                        "at most once (imports are then resolved from the current folder)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default, rustc-style with source snippets) or json "
                        "(a list of diagnostics)")
    p.add_argument("--json", dest="format", action="store_const", const="json",
                   help="same as --format json")
    p.add_argument("--model", metavar="SHAPE",
                   help="enable model-aware checks: a preset name (e.g. deepseek-v2-lite) or the "
                        "path of a HuggingFace config.json")
    p.add_argument("--device-memory", metavar="SIZE",
                   help="device memory for the model-aware memory checks, e.g. 16GiB or 80GB")
    p.add_argument("--purpose", choices=("live", "replay"), default="live",
                   help="live (attach/compile; default) or replay: replay-only values such as "
                        "eviction = belady are errors only for live use")
    p.add_argument("--no-warnings", action="store_true", help="show errors only")


def parse_size(text: str) -> int | None:
    """``16GiB`` / ``80 GB`` / ``512MiB`` -> bytes, or None."""
    from mpl import schema

    t = text.strip()
    for name in sorted(schema.SIZE_UNITS, key=len, reverse=True):
        if t.endswith(name):
            num = t[: -len(name)].strip()
            try:
                v = float(num)
            except ValueError:
                return None
            if not 0 < v < float("inf"):       # also rejects nan, inf and 1e400
                return None
            b = v * schema.UNITS[name].factor
            return int(b) if b < float("inf") else None
    return None


def _usage(msg: str) -> int:
    print(f"mplc check: error: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    from mpl.checker import LIVE, analyze, read_source, read_stdin_source
    from mpl.stdlib_path import resolve as resolve_std
    from mpl.cli.render import render_all, summary, use_color
    from mpl.diagnostics import Severity, has_errors

    if args.files.count("-") > 1:
        return _usage("the standard input can be read only once: give '-' once")
    model = None
    if args.model:
        from mpl.shapes import ShapeError, resolve
        try:
            model = resolve(args.model)
        except ShapeError as e:
            return _usage(str(e))
    if args.device_memory:
        nbytes = parse_size(args.device_memory)
        if nbytes is None:
            return _usage(f"--device-memory: cannot read '{args.device_memory}'; write a size such "
                          f"as 16GiB or 80GB")
        if model is None:
            return _usage("--device-memory needs --model")
        model = model.with_device_memory(nbytes)

    all_diags = []
    sources: dict = {}
    for path in args.files:
        if path == "-":
            path = "<stdin>"
            text, err = read_stdin_source(path)
        else:
            path = resolve_std(path)          # std/NAME: the shipped policy's file
            text, err = read_source(path)
        if err is not None:
            all_diags.append(err)
            continue
        a = analyze(text, path, model=model, purpose=args.purpose or LIVE)
        sources[path] = text
        for p, doc in a.imports.items():
            sources.setdefault(p, doc.text)
        all_diags.extend(a.diagnostics)
    shown = [d for d in all_diags if not args.no_warnings or d.severity is Severity.ERROR]
    if args.format == "json":
        sys.stdout.write(json.dumps([d.to_dict() for d in shown], indent=2))   # one write
        sys.stdout.write("\n")
    else:
        color = use_color(sys.stdout)
        if shown:
            print(render_all(shown, sources, color=color))
            print()
        print(summary(shown, len(args.files)))
    return 1 if has_errors(all_diags) else 0
