"""Every found case (tests/found_cases.py) as a user meets it: ``mplc check`` exits 1 with
located errors (never 3, an internal error), ``mpl.loads`` raises PolicyError, and the
checker's invariant holds: IR exactly for the policies reported clean."""

import json
import os
import subprocess
import sys

import pytest

import mpl
from mpl.checker import analyze

from found_cases import FOUND

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    return e


@pytest.mark.parametrize("name,text", FOUND, ids=[n for n, _ in FOUND])
def test_check_exits_1_with_located_errors(name, text, tmp_path):
    p = tmp_path / f"{name}.moe"
    p.write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", "--format", "json", str(p)],
                         capture_output=True, text=True, env=_env(), cwd=tmp_path)
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "internal error" not in out.stderr
    errors = [d for d in json.loads(out.stdout) if d["severity"] == "error"]
    assert errors
    for d in errors:
        assert d["file"] == str(p) and d["span"]["line"] >= 1 and d["span"]["column"] >= 1
    human = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", str(p)],
                           capture_output=True, text=True, env=_env(), cwd=tmp_path)
    assert human.returncode == 1 and f"{p}:" in human.stdout


@pytest.mark.parametrize("name,text", FOUND, ids=[n for n, _ in FOUND])
def test_load_raises_policy_error(name, text, tmp_path):
    with pytest.raises(mpl.PolicyError) as e:
        mpl.loads(text)
    assert e.value.diagnostics and all(d.is_error for d in e.value.diagnostics)
    p = tmp_path / f"{name}.moe"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(mpl.PolicyError):
        mpl.load(p)


@pytest.mark.parametrize("name,text", FOUND, ids=[n for n, _ in FOUND])
def test_no_ir_for_a_policy_with_errors(name, text):
    a = analyze(text)
    assert not a.ok
    for pname, rp in a.policies.items():
        assert (pname in a.ir) == (not rp.has_errors)
