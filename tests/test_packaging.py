"""The package layout: every mpl sub-package is listed in pyproject, import mpl stays light."""

import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_subpackage_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for top in ("mpl", "lsp"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" in filenames:
                found.add(os.path.relpath(dirpath, ROOT).replace(os.sep, "."))
    assert found - listed == set(), "add these packages to pyproject.toml"
    assert "mpl.stdlib" in listed


def test_import_mpl_is_light():
    code = ("import sys, mpl; heavy = [m for m in ('torch', 'numpy', 'pygls', 'lsprotocol', "
            "'transformers', 'matplotlib') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
