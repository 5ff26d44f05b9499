"""The browser playground's Python side (playground/py/mpl_playground.py) under CPython: it
answers what the CLI answers for the same input (diagnostics with their fixes, formatting,
replay and sweep numbers), converts the checker's code-point spans to the editor's UTF-16
units, refuses bad input with a message, and runs on what Pyodide has: mpl and lark, without
pygls, lsprotocol or torch. playground/test/browser.test.mjs checks the same in a browser."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLUE_DIR = os.path.join(REPO, "playground", "py")
sys.path.insert(0, GLUE_DIR)
import mpl_playground as pg  # noqa: E402

POLICY = "policy p {\n    cache {\n        capacity = 6\n        eviction = lru\n    }\n}\n"


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_check_is_mplc_check_in_utf16_units(tmp_path):
    # an astral character before the error: code points and UTF-16 units differ by one
    text = "# \U0001F600 emoji\npolicy p { cache { capcity = 8 } }\n"
    (tmp_path / "e.moe").write_text(text, encoding="utf-8")
    cli = json.loads(_cli("check", "e.moe", "--format", "json", cwd=tmp_path).stdout)
    got = json.loads(pg.check(text))["diagnostics"]
    assert [(d["code"], d["message"]) for d in got] == [(d["code"], d["message"]) for d in cli]
    d, c = got[0], cli[0]
    assert text.encode("utf-16-le")[2 * d["from"]:2 * d["to"]].decode("utf-16-le") == "capcity"
    assert (d["line"], d["column"]) == (c["span"]["line"], c["span"]["column"])
    assert [f["title"] for f in d["fixes"]] == [f["title"] for f in c["fixes"]]
    edit = d["fixes"][0]["edits"][0]
    assert (edit["from"], edit["to"], edit["insert"]) == (d["from"], d["to"], "capacity")
    assert d["url"].endswith("#mpl102")


def test_units_round_trip():
    u = pg.Units("a\U0001F600b\U0001F600")
    assert [u.to16(i) for i in range(5)] == [0, 1, 3, 4, 6]
    assert [u.from16(x) for x in (0, 1, 3, 4, 6)] == [0, 1, 2, 3, 4]


def test_hover_is_the_language_servers_text():
    from mpl import schema

    text = POLICY
    at = text.index("eviction") + 2
    h = json.loads(pg.hover(text, at))
    assert schema.PARAMS["cache.eviction"].doc in h["markdown"]
    assert "Effective value in `p`" in h["markdown"] and "`lru`" in h["markdown"]
    assert text[h["from"]:h["to"]] == "eviction"
    assert json.loads(pg.hover(text, text.index("p {")))["markdown"].startswith("**policy p**")
    assert json.loads(pg.hover("   ", 1)) is None


def test_format_is_mplc_fmt(tmp_path):
    messy = "# c\npolicy   p{cache{capacity=8 ; eviction=lru}}\n"
    cli = subprocess.run([sys.executable, "-m", "mpl.cli.main", "fmt", "-"], input=messy, text=True,
                         capture_output=True, cwd=tmp_path, timeout=120,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert json.loads(pg.format_policy(messy)) == {"text": cli.stdout}
    err = json.loads(pg.format_policy("policy p { cache { capacity = = 8 } }"))["error"]
    assert "syntax errors (line 1:" in err


def test_replay_and_sweep_are_mplc_replay_and_sweep(tmp_path):
    (tmp_path / "p.moe").write_text(POLICY)
    assert _cli("trace", "synth", "--preset", "mixtral-8x7b", "--steps", "24", "--seed", "5",
                "-o", "t.mpltrace", cwd=tmp_path).returncode == 0
    cli = json.loads(_cli("replay", "p.moe", "--trace", "t.mpltrace", "--hardware", "h100", "--json",
                          "--no-progress", cwd=tmp_path).stdout)
    summary = json.loads(pg.synth("mixtral-8x7b", 24, 5))
    assert summary["dispatches"] == cli["trace"]["dispatches"]
    got = json.loads(pg.replay(POLICY, "h100"))
    for key in ("stats", "belady", "gap", "sim", "costs", "hardware"):
        assert got[key] == cli[key], key
    sw = json.loads(pg.sweep(POLICY, "h100"))
    caps = [p["capacity"] for p in sw["points"]]
    assert caps[0] == 2 and caps[-1] == 32 * 8 and 6 in caps and sw["own"] == 6
    cli_sw = json.loads(_cli("sweep", "p.moe", "--trace", "t.mpltrace", "--hardware", "h100", "--capacity",
                             ",".join(map(str, caps)), "--json", cwd=tmp_path).stdout)
    cli_points = cli_sw["points"] if isinstance(cli_sw, dict) else cli_sw
    assert [(p["capacity"], p["hit_rate"], p["belady"]) for p in sw["points"]] == \
           [(p["capacity"], p["hit_rate"], p["belady"]) for p in cli_points]
    # the same trace dropped as a file
    data = (tmp_path / "t.mpltrace").read_bytes()
    assert json.loads(pg.load_trace("t.mpltrace", data))["dispatches"] == summary["dispatches"]
    assert json.loads(pg.replay(POLICY, "h100"))["stats"] == cli["stats"]


def test_a_tiered_policy_replays_and_sweeps_its_top_tier(tmp_path):
    text = ("policy t {\n    hierarchy {\n        tier hot { location = gpu  capacity = 12 }\n"
            "        tier ram { location = cpu  capacity = 40 }\n        tier ssd { location = disk }\n"
            "    }\n}\n")
    (tmp_path / "t.moe").write_text(text)
    assert _cli("trace", "synth", "--preset", "mixtral-8x7b", "--steps", "12", "--seed", "5",
                "-o", "t.mpltrace", cwd=tmp_path).returncode == 0
    cli = json.loads(_cli("replay", "t.moe", "--trace", "t.mpltrace", "--json", "--no-progress",
                          cwd=tmp_path).stdout)
    pg.synth("mixtral-8x7b", 12, 5)
    got = json.loads(pg.replay(text))
    assert got["stats"] == cli["stats"] and [r["tier"] for r in got["stats"]["tiers"]] == ["hot", "ram", "ssd"]
    sw = json.loads(pg.sweep(text))
    assert sw["own"] == 12 and 12 in [p["capacity"] for p in sw["points"]]
    assert all(p["error"] is None for p in sw["points"])


@pytest.mark.parametrize("call, needle", [
    (lambda: pg.load_trace("x.txt", b"abc"), "not a trace file"),
    (lambda: pg.load_trace("x.jsonl", b"not json\n"), "x.jsonl"),
    (lambda: pg.load_trace("x.mpltrace", b"\x00" * 64), "x.mpltrace"),
    (lambda: pg.synth("no-such-model", 10, 0), "unknown preset"),
    (lambda: pg.synth("mixtral-8x7b", 0, 0), "steps"),
    (lambda: (pg.synth("mixtral-8x7b", 4, 0), pg.replay("policy p { cache { capacity = 0 } }"))[1], "MPL203"),
    (lambda: (pg.synth("mixtral-8x7b", 4, 0), pg.replay(POLICY, "no-such-gpu"))[1], "no-such-gpu"),
    (lambda: (pg.synth("mixtral-8x7b", 4, 0), pg.sweep("policy {"))[1], "MPL002"),
])
def test_bad_input_is_a_message_not_a_traceback(call, needle):
    out = json.loads(call())
    assert set(out) == {"error"} and needle in out["error"], out


def test_runs_on_what_pyodide_has():
    """No pygls, lsprotocol or torch: the glue's functions work with those imports blocked,
    and importing it loads none of them (Pyodide has mpl and lark only)."""
    code = f"""
import sys, json
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pygls', 'lsprotocol', 'torch', 'numpy', 'matplotlib'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, {GLUE_DIR!r})
import mpl_playground as pg
assert json.loads(pg.check('policy p {{ cache {{ capcity = 8 }} }}'))['diagnostics'][0]['code'] == 'MPL102'
assert 'capacity' in json.loads(pg.hover('policy p {{ cache {{ capacity = 8 }} }}', 20))['markdown']
pg.synth('olmoe-1b-7b', 4, 0)
assert json.loads(pg.replay('policy p {{ cache {{ capacity = 32 }} }}'))['stats']['accesses'] > 0
assert json.loads(pg.examples())
info = json.loads(pg.info())
assert info['backend'] == 'pure' and info['backend_why'], info
assert info['presets'] and info['default_hardware'] in info['hardware'], info
print('ok', sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'torch')))
"""
    env = dict(os.environ, PYTHONPATH=REPO, MPL_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok []"
