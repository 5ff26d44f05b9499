"""Shared scaffolding of the tests/test_cli_*.py files that run ``mplc`` on files they write:
``mplc`` as a subprocess, the policy texts they write, and a work folder holding ``a.moe``
and a small trace."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mpl import traceio
from mpl.sim import synth

GOOD = "policy a {\n    cache {\n        capacity = 8\n    }\n}\n"
UGLY = "policy   a { cache { capacity = 8 } }\n"
BAD = "policy p { cache { capcity = 4 } }\n"


def mplc(*args, cwd, stdin=None, stdout=subprocess.PIPE, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *map(str, args)],
                          input=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          cwd=cwd, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def clean(r) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("qa")
    traceio.save(synth.synthesize("olmoe", steps=6, seed=3), str(d / "m.mpltrace"))
    return d


@pytest.fixture
def work(tmp_path, trace_dir):
    (tmp_path / "a.moe").write_text(GOOD)
    os.symlink(trace_dir / "m.mpltrace", tmp_path / "m.mpltrace")
    return tmp_path
