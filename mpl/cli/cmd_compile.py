"""``mplc compile POLICY [-o x_policy.py] [--policy-name NAME]``: write the compiled policy
module.

FILE may be ``std/NAME`` (a standard-library policy); its default output is then
``NAME_policy.py`` in the current folder. The output is written through
:func:`mpl.fileio.write_atomic` (a temporary file in the target's folder, then
``os.replace``; a symbolic link is followed, a FIFO or device is written through): on any
failure no file, or the previous file, is left. On check errors the diagnostics are printed
and nothing is written (exit 1). An output named like a policy file (``-o b.moe``,
``-o x.policy``) is a usage error (exit 2): the module would replace a policy with Python;
an output that is the policy file itself (a link to it too) is an error (exit 1); an output
that is the standard output (``-o /dev/stdout``) is written as ``-o -`` writes it.
``--json`` prints a summary as one JSON document; with ``-o -`` the module is in it.
"""

from __future__ import annotations

import json
import os
import sys

from mpl.cli.outputs import is_standard_output, overwrite_problem
from mpl.fileio import write_atomic as write_atomic_file


def add_arguments(p) -> None:
    from mpl.cli.options import add_policy, add_policy_name

    add_policy(p)
    p.add_argument("-o", "--output", metavar="PATH",
                   help="output module path (default: FILE's stem + '_policy.py' next to it, "
                        "NAME_policy.py in the current folder for std/NAME; '-' for stdout); "
                        "a .moe or .policy name is refused")
    add_policy_name(p, old_option=True)
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary instead of text (with -o -, the module is in it, "
                        "under \"module\")")


def default_output(path: str, policy: str | None) -> str:
    """FILE's stem + ``_policy.py`` next to it (``_NAME_policy.py`` with ``--policy-name NAME``);
    for a standard-library policy ``std/NAME`` (no local file of that name), ``NAME_policy.py``
    in the current folder: the shipped file is not the user's to write beside."""
    from mpl.stdlib_path import resolve

    if path.startswith("std/") and resolve(path) != path:
        stem = os.path.splitext(os.path.basename(path))[0]
    else:
        stem = os.path.splitext(path)[0]
    return f"{stem}_{policy}_policy.py" if policy else f"{stem}_policy.py"


def write_atomic(path: str, text: str) -> None:
    write_atomic_file(path, text, fsync=True)


def _reader():
    from mpl.fileio import read_text_or_none
    cache: dict = {}

    def read(path):
        if path not in cache:
            cache[path] = read_text_or_none(path) if isinstance(path, str) else None
        return cache[path]
    return read


#: policy-file extensions: ``-o`` naming one would replace a policy with Python
POLICY_EXTENSIONS = (".moe", ".policy")


def output_problem(out: str | None) -> str | None:
    """Why ``-o OUT`` is refused (a usage error), or None: the output is a Python module, so
    a name ending in a policy extension (``b.moe``, ``x.policy``) is a policy file in the
    making or being replaced."""
    if out is None or out == "-":
        return None
    ext = next((e for e in POLICY_EXTENSIONS if os.path.basename(out).lower().endswith(e)), None)
    if ext is None:
        return None
    stem = out[: -len(ext)] or "policy"
    return (f"-o {out}: the output is a Python module, not a policy file ({ext}); "
            f"write it to a .py file, e.g. -o {stem}_policy.py")


def run(args) -> int:
    from mpl.api import PolicyError, load

    args.file = args.policy             # the policy file (the positional POLICY)
    why = output_problem(args.output)
    if why is not None:                 # before anything is read or compiled
        print(f"mplc compile: error: {why}", file=sys.stderr)
        return 2
    from mpl.cli.render import render_all, use_color

    def show(diags) -> None:
        if diags:
            print(render_all(diags, _reader(), color=use_color(sys.stderr)), file=sys.stderr)

    try:
        pol = load(args.file, args.policy_name)
    except PolicyError as e:
        errors = [d for d in e.diagnostics if d.is_error]
        if errors:
            show(e.diagnostics)
            print(f"mplc compile: error: {args.file}: not compiled ({len(errors)} error"
                  f"{'s' if len(errors) > 1 else ''})", file=sys.stderr)
        else:
            msg = str(e).replace("policy='NAME'", "--policy-name NAME")
            print(f"mplc compile: error: {msg}", file=sys.stderr)
        return 1
    show(pol.diagnostics)
    out = args.output or default_output(args.file, args.policy_name)
    if is_standard_output(out):         # -o /dev/stdout: as -o -, without a line after it
        out = "-"
    if out != "-":
        why = overwrite_problem(out, [("policy file", args.file)], "the module")
        if why is not None:
            print(f"mplc compile: error: {why}", file=sys.stderr)
            return 1
        try:
            write_atomic(out, pol.source)
        except OSError as e:
            print(f"mplc compile: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(_summary(pol, out)))
    elif out == "-":
        sys.stdout.write(pol.source)
    else:
        print(f"compiled policy {pol.name!r} -> {out}")
    return 0


def _summary(pol, out: str) -> dict:
    """What ``--json`` prints: the policy, where the module went and its hashes; the module
    itself when it goes to the standard output (``-o -``), so the output stays one JSON
    document."""
    info = {"policy": pol.name, "output": out, "source_hash": pol.module.SOURCE_HASH,
            "mpl_version": pol.module.MPL_VERSION}
    if out == "-":
        info["module"] = pol.source
    return info
