"""The README, as a new user follows it: its example policy is the standard-library policy
of that name and does not thrash on the README's own trace, and its first set-up command
installs what its examples use."""

from __future__ import annotations

import json
import os
import re

import pytest

import mpl
from cli_helpers import clean, mplc
from mpl.stdlib_path import stdlib_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def _example() -> str:
    return re.search(r"```\n(policy .*?)```", _readme(), re.S).group(1)


def test_the_example_is_the_stdlib_policy_of_its_name():
    text = _example()
    name = re.match(r"policy (\w+)", text).group(1)
    assert stdlib_file(f"std/{name}") is not None, f"no std/{name}"
    assert f"`std/{name}`" in _readme()
    assert mpl.loads(text).ir == mpl.load(f"std/{name}").ir


@pytest.fixture(scope="module")
def readme_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    line = next(x for x in _readme().splitlines() if x.startswith("mplc trace synth"))
    r = mplc(*line.split()[1:], cwd=d)          # the README's own command
    assert r.returncode == 0, r.stderr
    (d / "policy.moe").write_text(_example())
    return d


def test_the_example_does_not_thrash_on_the_readmes_trace(readme_trace):
    d = readme_trace
    r = mplc("check", "policy.moe", "--model", "deepseek-v2-lite", "--device-memory", "16GB", cwd=d)
    clean(r)
    assert r.returncode == 0 and r.stdout.strip() == "1 file checked: no problems", r.stdout
    r = mplc("replay", "policy.moe", "--trace", "ds.mpltrace", "--hardware", "rtx-5080", "--json",
             "--no-progress", cwd=d)
    clean(r)
    rep = json.loads(r.stdout)
    s = rep["stats"]
    assert s["hit_rate"] > 0.45 and s["prefetch_useful"] == 0       # its own hits, not prefetches
    r = mplc("sweep", "policy.moe", "--trace", "ds.mpltrace", "--capacity", "8,16,32", "--json",
             "--no-belady", "--no-progress", cwd=d)
    clean(r)
    rates = [p["hit_rate"] for p in json.loads(r.stdout)["points"]]
    assert rates == sorted(rates) and rates[0] < rates[-1] - 0.2    # capacity matters


def test_the_first_command_installs_what_the_examples_use():
    readme = _readme()
    first = re.search(r'pip install torch==[\d.]+ -e "\.\[([a-z,]+)\]" && mplc demo', readme)
    assert first, "the README's first command"
    extras = set(first.group(1).split(","))
    if "--plot" in readme or "--heatmap" in readme:
        assert "plot" in extras
    if re.search(r"mplc (run|demo|trace record)", readme):
        assert "hf" in extras
