"""The pure runtime compiled by Cython against the hand-written C engine.

One implementation compiled twice would make the runtime's semantics one copy: the pure
runtime's modules (``mpl/runtime/*.py``) built as C extensions by Cython, with no second
engine to keep equal. This measures what that design gives: a copy of the checkout's
committed tree is made in a temporary folder, every module of ``mpl/runtime`` but the
package's ``__init__`` is compiled there by Cython (pure-Python mode, as written: no type
annotations added), and ``bench_dispatch.py``'s four policies run in three processes:
the pure runtime as Python, the same runtime compiled by Cython (both with ``MPL_PURE=1``),
and the compiled engine. It prints microseconds per dispatch and the ratios.

Needs Cython (``pip install cython``) and a C compiler; the compile takes about two minutes.

    python benchmarks/bench_cython_pure.py [--steps 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SETUP = """
import glob
from setuptools import setup
from Cython.Build import cythonize
mods = [f for f in glob.glob("mpl/runtime/*.py") if not f.endswith("__init__.py")]
setup(ext_modules=cythonize(mods, language_level=3, quiet=True),
      script_args=["build_ext", "--inplace"])
"""


def copy_tree(dst: str) -> None:
    """The committed tree of the checkout (no build outputs, no compiled engine)."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dst], input=archive, check=True)


def dispatch_table(tree: str, env_extra: dict, steps: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree, **env_extra)
    if not env_extra:
        env.pop("MPL_PURE", None)
    none = os.path.join(tree, "no-original-python")       # the original is not timed here
    run = subprocess.run([sys.executable, os.path.join(tree, "benchmarks", "bench_dispatch.py"),
                          "--steps", str(steps), "--original-python", none],
                         cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"bench_dispatch.py failed in {tree}:\n{run.stderr[-2000:]}")
    out = run.stdout
    table = {}
    for line in out.splitlines():
        m = re.match(r"(\w+)\s+([0-9.]+)\s+[0-9.]+\s", line)
        if m:
            table[m.group(1)] = float(m.group(2))
    if not table:
        raise SystemExit(f"bench_dispatch.py printed no table:\n{out}")
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="decode steps (x 27 dispatches)")
    ap.add_argument("--keep", help="build the Cython copy in this folder and keep it")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("Cython") is None:
        print("needs Cython: pip install cython", file=sys.stderr)
        return 2
    work = args.keep or tempfile.mkdtemp(prefix="mpl-cython-")
    try:
        os.makedirs(work, exist_ok=True)
        copy_tree(work)
        with open(os.path.join(work, "cy_setup.py"), "w") as f:
            f.write(SETUP)
        built = subprocess.run([sys.executable, "cy_setup.py"], cwd=work, capture_output=True, text=True)
        if built.returncode:
            print(built.stdout[-2000:] + built.stderr[-2000:], file=sys.stderr)
            return 1
        n = sum(1 for f in os.listdir(os.path.join(work, "mpl", "runtime")) if f.endswith(".so"))
        print(f"Cython compiled {n} modules of mpl/runtime")
        pure = dispatch_table(ROOT, {"MPL_PURE": "1"}, args.steps)
        cy = dispatch_table(work, {"MPL_PURE": "1"}, args.steps)
        engine = dispatch_table(ROOT, {}, args.steps)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'policy':16}{'pure us':>10}{'Cython us':>11}{'engine us':>11}"
          f"{'pure/Cython':>13}{'Cython/engine':>15}")
    for name in pure:
        print(f"{name:16}{pure[name]:10.2f}{cy[name]:11.2f}{engine[name]:11.2f}"
              f"{pure[name] / cy[name]:12.2f}x{cy[name] / engine[name]:14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
