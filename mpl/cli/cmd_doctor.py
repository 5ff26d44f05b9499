"""``mplc doctor``: what this installation runs on — the mplc and Python versions, the
runtime backend new runtimes get (the compiled engine, or the pure-Python runtime and why)
with what the engine covers, and every optional dependency (:mod:`mpl.extras`): its version
or "not installed", the extra that installs it and what it enables. ``mplc --version`` prints
the first lines. ``--json`` prints the same as one object."""

from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def version_text() -> str:
    """``mplc VERSION`` and the runtime backend in use (``mplc --version``)."""
    from mpl import __version__
    from mpl.runtime.backend import info as backend_info

    info = backend_info()
    line = f"runtime backend: {info['backend']}"
    if info["reason"]:
        line += f" ({info['reason']})"
    return f"mplc {__version__}\n{line}"


def dependencies() -> list[dict]:
    """One row per optional dependency: module, version (None: not installed), extra,
    what it enables."""
    from mpl.extras import OPTIONAL, version_of

    return [{"module": o.module, "version": version_of(o.module), "extra": o.extra,
             "enables": o.enables} for o in OPTIONAL.values()]


def dependency_table(rows: list[dict]) -> str:
    head = ("dependency", "version", "extra", "enables")
    cells = [(r["module"], r["version"] or "not installed", f"[{r['extra']}]" if r["extra"] else "-",
              r["enables"]) for r in rows]
    w = [max(len(x[i]) for x in [head, *cells]) for i in range(3)]
    out = [f"{head[0]:<{w[0]}}  {head[1]:<{w[1]}}  {head[2]:<{w[2]}}  {head[3]}"]
    out += [f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}" for a, b, c, d in cells]
    return "\n".join(out)


def run(args) -> int:
    import os

    from mpl import __version__
    from mpl.runtime.backend import info as backend_info
    from mpl.runtime.compiled import COVERAGE

    info = backend_info()
    deps = dependencies()
    vllm_python = os.environ.get("MPL_VLLM_PYTHON") or None
    if args.json:
        print(json.dumps({"mplc": __version__, "python": sys.version.split()[0],
                          "executable": sys.executable, "backend": {**info, "covers": COVERAGE},
                          "dependencies": deps, "vllm_python": vllm_python}, indent=2))
        return 0
    print(version_text())
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    print(f"compiled engine covers: {COVERAGE}")
    if info["backend"] == "pure":
        print("to use the compiled engine: reinstall with a C compiler present "
              "(pip install -e .) and leave MPL_PURE unset")
    print()
    print(dependency_table(deps))
    if vllm_python:
        print(f"vllm for --engine vllm: the Python in MPL_VLLM_PYTHON ({vllm_python})")
    missing = sorted({d["extra"] for d in deps if d["version"] is None and d["extra"]})
    if missing:
        print(f"to install what is missing: pip install 'mpl-policylang[{','.join(missing)}]' "
              f"(or pip install -e '.[{','.join(missing)}]' in a clone)")
    return 0
