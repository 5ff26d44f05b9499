"""The ``ci`` Hypothesis profile draws the same examples for a test whatever ran before it:
two fresh interpreters draw a property test's examples, one with nothing else imported, one
after importing every module of the package and the suite's helpers (Hypothesis collects
literals from imported project modules into its draws unless the profile fixes that pool)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

DRAW = r"""
import json, sys
sys.path.insert(0, {here!r})
import property_profiles
from property_profiles import prop
from hypothesis import given, strategies as st
if {preload}:
    import pkgutil, importlib, mpl
    for m in pkgutil.walk_packages(mpl.__path__, "mpl."):
        if m.name.startswith(("mpl.vllm", "mpl.offload", "mpl.cli")) or m.name.endswith("__main__"):
            continue
        importlib.import_module(m.name)
    import runtime_helpers, found_cases, parser_helpers  # noqa: F401
seen = []
@prop(60)
@given(st.integers(0, 2 ** 62), st.lists(st.integers(-5, 70000), max_size=4),
       st.floats(0.0, 1e300), st.text(max_size=6))
def draw(a, b, c, d):
    seen.append([a, b, c, d])
draw()
print(json.dumps(seen))
"""


def _draws(preload: bool) -> list:
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci")
    out = subprocess.run([sys.executable, "-c", DRAW.format(here=HERE, preload=preload)],
                         capture_output=True, text=True, env=env, cwd=HERE, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_ci_profile_draws_the_same_examples_whatever_is_imported():
    alone = _draws(False)
    after = _draws(True)
    assert len(alone) == 60
    assert alone == after
