"""QA findings on values that go into policy text, checked as a user meets them (``mplc`` as
a subprocess, or the public replay API): ``mplc tune --name KEYWORD`` writes that policy
name (a keyword names a policy, as in the original);
``mplc sweep --param`` values are checked before any replay, a repeat is a usage error and
failed points are listed under the table; ``mplc run`` / ``mplc demo`` say why an empty
policy file fails; replay's ``capacity`` / ``params`` cannot smuggle text into the policy.
"""

from __future__ import annotations

import json

import pytest

from mpl import traceio
from mpl.syntax.lexer import KEYWORD_TYPES

from cli_helpers import GOOD, clean, mplc, trace_dir, work  # noqa: F401  (trace_dir, work: fixtures)


# ------------------------------------------------------------------ tune --name
@pytest.mark.parametrize("name", ["when", "policy"])
def test_tune_accepts_a_keyword_name(work, name):
    # a keyword names a policy (`policy when { ... }`), as in the original
    assert name in KEYWORD_TYPES
    r = mplc("tune", "--budget", "64", "--trace", "m.mpltrace", "--name", name, "-j", "1",
             "-o", "best.moe", cwd=work)
    assert r.returncode == 0, r.stderr
    assert f"policy {name} {{" in (work / "best.moe").read_text()
    r = mplc("check", "best.moe", cwd=work)
    assert r.returncode == 0, r.stdout
    clean(r)


@pytest.mark.parametrize("name", ["bad name", "é", "1a", "a.b", "x#y"])
def test_tune_refuses_a_name_the_parser_cannot_read(work, name):
    r = mplc("tune", "--budget", "64", "--trace", "missing.mpltrace", "--name", name, cwd=work)
    assert r.returncode == 1 and "is not a policy name" in r.stderr
    clean(r)


def test_tune_accepts_a_block_name_as_policy_name(work):
    r = mplc("tune", "--budget", "64", "--trace", "m.mpltrace", "--name", "cache", "-j", "1",
             "-o", "best.moe", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "policy cache {" in (work / "best.moe").read_text()


# ------------------------------------------------------------------ sweep --param
def test_sweep_bad_param_value_is_an_error_before_any_replay(work):
    r = mplc("sweep", "a.moe", "-t", "m.mpltrace", "--param", "eviction=lru,nope", cwd=work)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""                               # no table: nothing was replayed
    assert "--param 'eviction=lru,nope'" in r.stderr and "unknown eviction 'nope'" in r.stderr
    clean(r)


@pytest.mark.parametrize("value", ["lru } policy zz { cache { capacity = 2 }", "lru # x"])
def test_sweep_param_value_cannot_add_text(work, value):
    r = mplc("sweep", "a.moe", "-t", "m.mpltrace", "--param", f"eviction={value}", cwd=work)
    assert r.returncode == 1 and "not a single value" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("params", [
    ["--param", "eviction=lru", "--param", "eviction=lfu"],
    ["--param", "eviction=lru", "--param", "cache.eviction=lfu"],
    ["--param", "capacity=4", "--capacity", "8"],
])
def test_sweep_repeated_param_is_a_usage_error(work, params):
    r = mplc("sweep", "a.moe", "-t", "m.mpltrace", *params, cwd=work)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "mplc sweep: error:" in r.stderr and r.stdout == ""


def test_sweep_failed_points_are_listed_under_the_table(work):
    (work / "pf.moe").write_text(
        "policy pf {\n  cache { capacity = 8 }\n  prefetch { strategy = history  budget = 4 }\n}\n")
    r = mplc("sweep", "pf.moe", "-t", "m.mpltrace", "--capacity", "2,8", "--no-belady", cwd=work)
    assert r.returncode == 1, r.stderr                  # a point failed
    lines = r.stdout.splitlines()
    table = lines[1:lines.index("")]
    assert max(map(len, table)) < 100                   # no message crammed into a row
    assert any("error 1" in row for row in table)
    assert "1 of 2 points failed:" in lines
    assert any(x.startswith("  error 1: pf cap=2: prefetch budget 4") for x in lines)
    assert "<policy>" not in r.stdout
    r = mplc("sweep", "pf.moe", "-t", "m.mpltrace", "--capacity", "2,8", "--json", cwd=work)
    assert r.returncode == 1 and "1 of 2 sweep points failed" in r.stderr
    assert [p["error"] is None for p in json.loads(r.stdout)["points"]] == [False, True]


def test_sweep_capacity_values_are_checked(work):
    r = mplc("sweep", "a.moe", "-t", "m.mpltrace", "--capacity", "4,1 # GB", cwd=work)
    assert r.returncode == 1 and "--capacity" in r.stderr and r.stdout == ""
    r = mplc("sweep", "a.moe", "-t", "m.mpltrace", "--capacity", "99999", cwd=work)
    assert r.returncode == 1 and "65536" in r.stderr


# ------------------------------------------------------------------ empty policy file
@pytest.mark.parametrize("args", [["run", "empty.moe", "--model", "tiny-mixtral"],
                                  ["demo", "empty.moe"]])
def test_an_empty_policy_file_says_why(work, args):
    (work / "empty.moe").write_text("")
    r = mplc(*args, cwd=work)
    assert r.returncode == 1
    assert f"mplc {args[0]}: error: empty.moe defines no policy" in r.stderr
    clean(r)


def test_run_with_several_policies_names_its_option(work):
    (work / "two.moe").write_text(GOOD + "policy b {\n    cache {\n        capacity = 8\n    }\n}\n")
    r = mplc("run", "two.moe", "--model", "tiny-mixtral", cwd=work)
    assert r.returncode == 1 and "choose one with --policy-name NAME" in r.stderr
    r = mplc("demo", "two.moe", cwd=work)
    assert r.returncode == 1 and "choose one with --policy-name NAME" in r.stderr


# ------------------------------------------------------------------ replay overrides
@pytest.mark.parametrize("kw,what", [
    ({"capacity": "8 frequency_decay = 0.5"}, "cache.capacity"),
    ({"capacity": "4 # x"}, "cache.capacity"),
    ({"capacity": "4\npolicy b { cache { capacity = 1 } }"}, "cache.capacity"),
    ({"capacity": 0}, "cache.capacity"),
    ({"capacity": 70000}, "cache.capacity"),
    ({"capacity": "12XB"}, "cache.capacity"),
    ({"capacity": 2.5}, "cache.capacity"),
    ({"params": {"cache.eviction": "lru } policy zz { cache { capacity = 2 }"}}, "cache.eviction"),
    ({"params": {"cache.eviction": "nope"}}, "cache.eviction"),
    ({"params": {"cache.frequency_decay": "0.5 # x"}}, "cache.frequency_decay"),
    ({"params": {"cache.capacity": 4}, "capacity": 8}, "cache.capacity"),
])
def test_replay_overrides_are_checked_before_they_touch_the_text(trace_dir, kw, what):
    import mpl
    from mpl.sim import PolicyLoadError, ReplayError

    pol = mpl.loads(GOOD)
    with pytest.raises(ReplayError, match=what.replace(".", r"\.")) as e:
        pol.replay(str(trace_dir / "m.mpltrace"), belady=False, **kw)
    assert isinstance(e.value, PolicyLoadError)           # as a bad value in the file would be
    with pytest.raises(ReplayError, match=what.replace(".", r"\.")):
        mpl.sim.replay(GOOD, str(trace_dir / "m.mpltrace"), belady=False, **kw)


def test_replay_good_overrides_still_apply(trace_dir):
    import mpl

    pol = mpl.loads(GOOD)
    r = pol.replay(str(trace_dir / "m.mpltrace"), capacity=" 16 ",
                   params={"cache.eviction": "lfu | lru"})
    assert r.belady["capacities"] == 16 and r.capacity == " 16 "
    r = pol.replay(str(trace_dir / "m.mpltrace"), capacity="1GiB")
    assert r.capacity == "1GiB" and r.belady["capacities"] == 2 ** 30 // traceio.load(
        str(trace_dir / "m.mpltrace")).header.expert_bytes


def test_replay_cli_capacity_is_one_value(work):
    r = mplc("replay", "a.moe", "-t", "m.mpltrace", "--capacity", "4 # x", cwd=work)
    assert r.returncode == 2 and "'4 # x' is not a slot count" in r.stderr and r.stdout == ""
    r = mplc("replay", "a.moe", "-t", "m.mpltrace", "--capacity", "16", "--json", cwd=work)
    assert r.returncode == 0 and json.loads(r.stdout)["capacity"] == 16
