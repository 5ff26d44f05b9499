"""Sizes as capacity, as a user meets them: once the expert size is known (``--model``, the
trace in replay, or ``cache.expert_size_gb``) the slots a size gives are checked like a slot
count (MPL507, located); a size above every expert is capped and says so (MPL503); no size,
however large, crashes check or replay."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DS = "deepseek-v2-lite"          # 26 MoE layers x 64 experts of 16.5 MiB


def mplc(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def check_json(tmp_path, text, *extra):
    (tmp_path / "p.moe").write_text(text)
    out = mplc("check", "--format", "json", *extra, "p.moe", cwd=tmp_path)
    assert "internal error" not in out.stderr, out.stderr
    return out.returncode, json.loads(out.stdout)


def test_a_size_below_one_expert_is_a_located_error(tmp_path):
    rc, diags = check_json(tmp_path, "policy p {\n    cache { capacity = 1MiB }\n}\n", "--model", DS)
    assert rc == 1
    d = next(d for d in diags if d["code"] == "MPL507")
    assert d["severity"] == "error" and (d["span"]["line"], d["span"]["column"]) == (2, 24)
    assert "smaller than one expert of deepseek-v2-lite (16.5 MiB): it gives no slot" in d["message"]
    assert not [x for x in diags if x["code"] in ("MPL502", "MPL301", "MPL302")]   # no cascade
    # without a model the expert size is unknown: nothing to check yet
    assert check_json(tmp_path, "policy p {\n    cache { capacity = 1MiB }\n}\n") == (0, [])


def test_a_written_expert_size_is_enough(tmp_path):
    rc, diags = check_json(tmp_path, "policy p {\n    cache { capacity = 100MB  expert_size_gb = 1 }\n}\n")
    assert rc == 1 and [d["code"] for d in diags] == ["MPL507"]
    assert "(cache.expert_size_gb)" in diags[0]["message"]


def test_an_adapt_rule_to_a_size_below_one_expert(tmp_path):
    text = ("policy p {\n    cache { capacity = 64 }\n"
            "    adapt { when hit_rate < 0.5 { capacity = 1MiB } }\n}\n")
    rc, diags = check_json(tmp_path, text, "--model", DS)
    assert rc == 1
    d = next(d for d in diags if d["code"] == "MPL306")
    assert "smaller than one expert" in d["message"] and d["span"]["line"] == 3


def test_a_size_above_every_expert_is_capped_and_says_so(tmp_path):
    rc, diags = check_json(tmp_path, "policy p {\n    cache { capacity = 999999999999999999 GiB }\n}\n",
                           "--model", DS)
    assert rc == 0 and [d["code"] for d in diags] == ["MPL503"]
    assert "capacity 999999999999999999 GiB = " in diags[0]["message"]
    assert "the slot pool is capped at 1664 slots" in diags[0]["message"]


@pytest.mark.parametrize("model", [(), ("--model", DS)])
def test_a_size_too_large_for_any_number_is_an_error_not_a_crash(tmp_path, model):
    rc, diags = check_json(tmp_path, "policy p {\n    cache { capacity = " + "9" * 400 + " GiB }\n}\n", *model)
    assert rc == 1 and [d["code"] for d in diags] == ["MPL203"]
    assert "must be a finite size" in diags[0]["message"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("tr")
    out = mplc("trace", "synth", "--preset", DS, "--steps", "6", "-o", "ds.mpltrace", cwd=d)
    assert out.returncode == 0, out.stderr
    return d / "ds.mpltrace"


def test_replay_refuses_a_size_below_one_expert(tmp_path, trace):
    (tmp_path / "p.moe").write_text("policy p { cache { capacity = 1MiB } }\n")
    out = mplc("replay", "p.moe", "--trace", str(trace), cwd=tmp_path)
    assert out.returncode == 1 and "internal error" not in out.stderr
    assert "MPL507" in out.stderr and "smaller than one expert" in out.stderr


@pytest.mark.parametrize("extra", ["", " eviction = belady"])
def test_replay_of_an_enormous_size_is_the_whole_model(tmp_path, trace, extra):
    (tmp_path / "p.moe").write_text(f"policy p {{ cache {{ capacity = 999999999999999999 GiB{extra} }} }}\n")
    out = mplc("replay", "p.moe", "--trace", str(trace), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["stats"]["evictions"] == 0
    if not extra:
        assert rep["stats"]["num_slots"] == 26 * 64
        assert rep["stats"]["requested_slots"] > 26 * 64
    assert rep["belady"]["capacities"] == 26 * 64


def test_more_slots_than_a_cache_can_have_is_an_error():
    """A model with more experts than a cache's 65536 slots: a size that would use more of
    them than that is MPL507 (a slot count above the range is the range error already)."""
    from mpl import shapes
    from mpl.checker import check_text

    big = shapes.ModelShape("wide", 2, (0, 1), 40000, 2, hidden_size=1, intermediate_size=512,
                            bytes_per_param=1, has_gate=False)          # 1 KiB experts, 80000 of them
    text = "policy p {\n    cache { capacity = 1GiB }\n}\n"
    d = next(d for d in check_text(text, model=big) if d.code == "MPL507")
    assert d.is_error and (d.span.line, d.span.column) == (2, 24)
    assert "gives 80000 slots of wide's experts, more than the 65536 a cache can have" in d.message
    assert not [d for d in check_text("policy p {\n    cache { capacity = 32MiB }\n}\n", model=big)
                if d.code == "MPL507"]                                   # 32768 slots: fine
