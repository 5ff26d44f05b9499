#!/usr/bin/env python3
"""Vendor the language server and its pure-Python dependencies into ``server/libs``.

The extension's ``useBundled`` import strategy runs ``python -m lsp.server`` with this folder
on ``PYTHONPATH``, so a user only needs a Python 3.11+ interpreter, not a pip install.

What goes in: the repository's ``mpl`` and ``lsp`` packages (``pip install --no-deps -t``
from the checkout), and the closure of the ``mpl-policylang[lsp]`` requirements at the
versions installed in the running environment (lark, pygls, lsprotocol, cattrs, attrs, ...),
each as a universal (``py3-none-any``) wheel, so the result runs on every platform. Those
versions are read from the environment, so it needs the repository installed with its
``lsp`` extra; ``--check`` says whether it is (``ci.sh`` asks first), without a traceback.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

EXT = Path(__file__).resolve().parent.parent
ROOT = EXT.parent
DIST = "mpl-policylang"
EXTRA = "lsp"
INSTALL = f'pip install -e "{ROOT}[{EXTRA}]"'

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
except ImportError:  # pip always carries a copy
    try:
        from pip._vendor.packaging.markers import default_environment
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        raise SystemExit(f"bundle-server: {sys.executable} has no pip (it installs the bundle): "
                         f"`{sys.executable} -m ensurepip`, then `{INSTALL}`")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(dist: str, extras: tuple[str, ...]) -> dict[str, str]:
    """name -> installed version for every requirement reachable from ``dist[extras]``."""
    env = default_environment()
    todo: list[tuple[str, tuple[str, ...]]] = [(dist, extras)]
    seen: dict[str, str] = {}
    while todo:
        name, want = todo.pop()
        try:
            md = metadata.metadata(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"bundle-server: {name} is not installed in {sys.executable}; "
                             f"run `{INSTALL}` first")
        for raw in md.get_all("Requires-Dist") or []:
            req = Requirement(raw)
            ok = req.marker is None or any(
                req.marker.evaluate({**env, "extra": e}) for e in (want or ("",)))
            if not ok:
                continue
            key = _norm(req.name)
            if key in seen:
                continue
            try:
                seen[key] = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                via = f"{name}[{','.join(want)}]" if want else name
                raise SystemExit(
                    f"bundle-server: {req.name} (required by {via}) is not installed in {sys.executable}. "
                    f"The language server's dependencies come with the `{EXTRA}` extra: `{INSTALL}`")
            todo.append((req.name, tuple(req.extras)))
    seen.pop(_norm(dist), None)
    return seen


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=Path, default=EXT / "server" / "libs")
    ap.add_argument("--check", action="store_true",
                    help=f"only check that {DIST}[{EXTRA}] and its dependencies are installed")
    args = ap.parse_args(argv)
    if args.check:
        deps = closure(DIST, (EXTRA,))
        print(f"{DIST}[{EXTRA}] is installed in {sys.executable} "
              f"({', '.join(f'{n} {v}' for n, v in sorted(deps.items()))})")
        return 0
    target: Path = args.target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)

    deps = closure(DIST, (EXTRA,))
    # torch & co. are never needed by the server: fail loudly if the closure grew them.
    heavy = {"torch", "transformers", "accelerate"} & set(deps)
    if heavy:
        raise SystemExit(f"bundle-server: the lsp extra pulls in {sorted(heavy)}; refusing to vendor")
    # the repository is built in an isolated environment (setuptools from PyPI), like pip install .
    pip("--no-deps", "--no-compile", "--quiet", "--target", str(target), str(ROOT))
    pins = [f"{name}=={version}" for name, version in sorted(deps.items())]
    pip("--no-deps", "--no-compile", "--quiet", "--only-binary=:all:", "--platform", "any",
        "--implementation", "py", "--python-version", "3.11", "--target", str(target), *pins)
    # metadata of the build (egg-info, dist-info RECORDs) stays: it is small and lets
    # importlib.metadata find versions. Drop scripts the server never runs.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for cache in target.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    for pkg in ("mpl", "lsp", "lark", "pygls", "lsprotocol", "cattrs", "attrs"):
        if not (target / pkg).is_dir():
            raise SystemExit(f"bundle-server: {pkg} is missing from {target}")
    print(f"bundled: mpl, lsp + {', '.join(pins)} -> {target.relative_to(EXT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
