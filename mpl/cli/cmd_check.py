"""``mplc check FILE... [--fix | --diff]``: check policy files and print their diagnostics.

Exit status: 0 when no file has an error (warnings and hints allowed), 1 when any has one
(including a file that cannot be read), 2 on usage errors (an unknown ``--model``, a bad
``--device-memory``, ``-`` given more than once: the standard input can be read only once).

``--fix`` applies the machine-applicable fixes (the edits the diagnostics carry, which the
language server offers as quick fixes; a diagnostic with several alternative fixes is left
to the user) to the files named, as ``ruff check --fix`` does: fixes whose edits overlap are
applied over several rounds, each file checked again after each round, then the remaining
diagnostics are printed. A standard-library policy (``std/NAME``) and the standard input are
never written. ``--diff`` writes nothing and prints the unified diff ``--fix`` would apply
(exit 1 when there is one, 0 otherwise).
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
    p.add_argument("--kv-reserve", metavar="SIZE",
                   help="with --device-memory: device memory kept for the KV cache and activations "
                        "(default: 10%% of the device's memory, at least 1GiB)")
    fix = p.add_mutually_exclusive_group()
    fix.add_argument("--fix", action="store_true",
                     help="apply the machine-applicable fixes to the files (not std/NAME, not '-'), "
                          "then print what remains")
    fix.add_argument("--diff", action="store_true",
                     help="write nothing; print the unified diff that --fix would apply "
                          "(exit 1 when there is one)")


def parse_size(text: str) -> int | None:
    """``16GiB`` / ``80 GB`` / ``512MiB`` -> bytes, or None (:func:`mpl.schema.parse_size`)."""
    from mpl.schema import parse_size as parse
    return parse(text)


def _usage(msg: str) -> int:
    from mpl.cli.errors import usage
    return usage("mplc check", msg)


def run(args) -> int:
    from mpl.checker import LIVE, analyze, read_source, read_stdin_source
    from mpl.stdlib_path import resolve as resolve_std
    from mpl.cli.render import render_all, summary, use_color
    from mpl.diagnostics import Severity, has_errors
    from mpl.schema import SIZE_RULE

    if args.files.count("-") > 1:
        return _usage("the standard input can be read only once: give '-' once")
    if args.fix and "-" in args.files:
        return _usage("--fix cannot write the standard input back; use --diff to see the fixes")
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
            return _usage(f"--device-memory: cannot read '{args.device_memory}' as a size "
                          f"({SIZE_RULE}); write a size such as 16GiB or 80GB")
        if model is None:
            return _usage("--device-memory needs --model")
        reserve = None
        if args.kv_reserve:
            reserve = parse_size(args.kv_reserve)
            if reserve is None or reserve >= nbytes:
                return _usage(f"--kv-reserve: cannot read '{args.kv_reserve}' as a size below the "
                              f"device memory ({SIZE_RULE}); write a size such as 2GiB")
        model = model.with_device_memory(nbytes, kv_reserve=reserve)
    elif args.kv_reserve:
        return _usage("--kv-reserve needs --device-memory")

    purpose = args.purpose or LIVE
    all_diags = []
    sources: dict = {}
    changed = 0
    failed = False          # a fix that could not be written
    for spec in args.files:
        if spec == "-":
            path = "<stdin>"
            text, err = read_stdin_source(path)
        else:
            path = resolve_std(spec)          # std/NAME: the shipped policy's file
            text, err = read_source(path)
        if err is not None:
            all_diags.append(err)
            continue
        if args.fix or args.diff:
            fixed, n = _fixed(text, path, model, purpose)
            if fixed != text:
                changed += 1
                if args.diff:
                    sys.stdout.writelines(_diff(text, fixed, path))
                    continue
                if path != spec and spec.startswith("std/"):
                    print(f"mplc check: error: {spec} is a standard-library policy: --fix does not "
                          f"write it; copy it to a file of yours and fix that", file=sys.stderr)
                    failed = True
                    all_diags.extend(analyze(text, path, model=model, purpose=purpose).diagnostics)
                    sources[path] = text
                    continue
                from mpl.fileio import write_atomic
                try:
                    write_atomic(path, fixed)
                except OSError as e:
                    print(f"mplc check: error: cannot write {path}: {e.strerror or e}",
                          file=sys.stderr)
                    failed = True
                    all_diags.extend(analyze(text, path, model=model, purpose=purpose).diagnostics)
                    sources[path] = text
                    continue
                print(f"fixed {n} problem{'s' if n != 1 else ''} in {path}", file=sys.stderr)
                text = fixed
            elif args.diff:
                continue
        a = analyze(text, path, model=model, purpose=purpose)
        sources[path] = text
        for p, doc in a.imports.items():
            sources.setdefault(p, doc.text)
        all_diags.extend(a.diagnostics)
    if args.diff:
        if changed == 0:
            print(f"no fixes to apply in {len(args.files)} file{'s' if len(args.files) != 1 else ''}",
                  file=sys.stderr)
        return 1 if changed else 0
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
    return 1 if has_errors(all_diags) or failed else 0


def _fixed(text: str, path: str, model, purpose) -> tuple[str, int]:
    """``text`` with the machine-applicable fixes applied (mpl.fixes), and how many."""
    from mpl.checker import analyze
    from mpl.fixes import fix_text

    return fix_text(text, path, lambda t: analyze(t, path, model=model, purpose=purpose).diagnostics)


def _diff(old: str, new: str, path: str):
    """Unified diff lines (as ``mplc fmt --diff`` prints them)."""
    from mpl.cli.cmd_fmt import _diff as diff_lines

    for line in diff_lines(old, new, path):
        yield line.replace(f"+++ {path} (formatted)", f"+++ {path} (fixed)", 1)
