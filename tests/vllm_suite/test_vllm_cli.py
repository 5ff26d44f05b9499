"""The command line with ``--engine vllm``, as a user runs it (``mplc`` subprocesses):
``mplc trace record`` on a tiny Mixtral (routing, and with ``--lookahead`` the pre-gating
predictions, equal to transformers'), ``mplc run`` on a
tiny Qwen3-MoE (the shadow statistics equal ``mplc replay`` of the trace it wrote)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from routing import assert_same_routing, hf_predictions, hf_routing, split_by_request

pytestmark = pytest.mark.needs_vllm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mplc(*args, timeout=420):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def test_trace_record_engine_vllm_mixtral_matches_transformers(tiny, tmp_path):
    from mpl import traceio

    path = tiny("mixtral")
    out = tmp_path / "mixtral.mpltrace"
    r = mplc("trace", "record", "--engine", "vllm", "--model", path, "--prompt",
             "the quick brown fox jumps over the lazy dog", "--max-new-tokens", "5",
             "-o", str(out), "--json", "--dtype", "float32")
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout)
    tr = traceio.load(str(out))
    assert tr.header.model == "mixtral" and tr.header.num_experts == 8 and tr.header.top_k == 2
    assert tr.header.extra["engine"] == "vllm" and len(tr) == rep["dispatches"] > 0
    (req,) = rep["requests"]
    assert len(req["token_ids"]) == 5 and len(req["prompt_token_ids"]) > 3
    mine = split_by_request(tr)[req["request_id"]]
    n = assert_same_routing(mine, hf_routing(path, req["prompt_token_ids"], req["token_ids"]),
                            "mixtral")
    assert n == 3 * (len(req["prompt_token_ids"]) + 4)


def test_trace_record_engine_vllm_pregates_as_transformers_does(tiny, tmp_path):
    """``--lookahead 2``: every dispatch carries the next two layers' pre-gating picks (the
    last layers' fewer), the same as mpl's HuggingFace recorder makes on the same tokens."""
    from mpl import traceio

    path = tiny("mixtral")
    out = tmp_path / "pregate.mpltrace"
    r = mplc("trace", "record", "--engine", "vllm", "--model", path, "--prompt",
             "the quick brown fox jumps over the lazy dog", "--max-new-tokens", "5",
             "--lookahead", "2", "-o", str(out), "--json", "--dtype", "float32")
    assert r.returncode == 0, r.stderr[-3000:]
    (req,) = json.loads(r.stdout)["requests"]
    tr = traceio.load(str(out))
    mine = [(d.layer, d.predictions) for d in tr.dispatches]
    assert mine == hf_predictions(path, req["prompt_token_ids"], req["token_ids"], 2)
    assert all(sorted(p or {}) == list(range(layer + 1, min(layer + 3, 3))) for layer, p in mine)


def test_run_engine_vllm_stats_equal_mplc_replay(tiny, tmp_path):
    path = tiny("qwen3-moe")
    out = tmp_path / "run.mpltrace"
    r = mplc("run", "std/generous", "--engine", "vllm", "--model", path, "--prompt",
             "hello world", "--max-new-tokens", "8", "--hardware", "a100-80gb",
             "--trace", str(out), "--json", "--dtype", "float32")
    assert r.returncode == 0, r.stderr[-3000:]
    live = json.loads(r.stdout)
    assert live["policy"] == "generous" and live["hardware"] == "a100-80gb"
    r2 = mplc("replay", "std/generous", "--trace", str(out), "--hardware", "a100-80gb", "--json")
    assert r2.returncode == 0, r2.stderr[-2000:]
    replayed = json.loads(r2.stdout)
    assert live["stats"]["accesses"] > 0 and live["dispatches"] == replayed["trace"]["dispatches"]
    assert live["stats"] == replayed["stats"]
    assert live["sim"] == replayed["sim"]


def test_run_engine_vllm_offload_reports_the_mechanism(tiny, tmp_path):
    """``mplc run --engine vllm --offload``: the policy runs live; the text is the engine's
    without offload (the shadow run above is the same engine unchanged), and --json has the
    mechanism under ``offload``; the live statistics equal ``mplc replay`` of the trace."""
    path = tiny("qwen3-moe")
    pol = tmp_path / "half.moe"
    pol.write_text("policy half { cache { capacity = 12  eviction = lru } }\n")
    base = ["--engine", "vllm", "--model", path, "--prompt", "hello world", "--max-new-tokens",
            "8", "--json", "--dtype", "float32"]
    out = tmp_path / "live.mpltrace"
    r = mplc("run", str(pol), *base, "--offload", "--stream-slots", "3", "--trace", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    live = json.loads(r.stdout)
    assert live["mode"] == "offload" and live["policy"] == "half"
    m = live["offload"]
    for key in ("copies", "bytes_copied", "pool_slots", "pool_bytes", "expert_bytes_total"):
        assert key in m
    assert m["copies"] == live["stats"]["loads"] > 0
    assert m["pool_slots"] == 12 + 3 + 1 and m["stream_slots"] == 3
    assert m["pool_bytes"] == m["pool_slots"] * m["expert_bytes"] < m["expert_bytes_total"]
    r0 = mplc("run", str(pol), *base)
    assert r0.returncode == 0, r0.stderr[-3000:]
    shadow = json.loads(r0.stdout)
    assert shadow["mode"] == "shadow"
    assert [q["token_ids"] for q in live["requests"]] == [q["token_ids"] for q in shadow["requests"]]
    r2 = mplc("replay", str(pol), "--trace", str(out), "--json")
    assert r2.returncode == 0, r2.stderr[-2000:]
    replayed = json.loads(r2.stdout)
    drop = ("stall_ms",)
    assert ({k: v for k, v in live["stats"].items() if k not in drop}
            == {k: v for k, v in replayed["stats"].items() if k not in drop})



def test_run_engine_vllm_tensor_parallel_size(tiny, tmp_path):
    """``mplc run --engine vllm --offload --tensor-parallel-size 2``: the engine runs on two
    ranks (CPU build: two workers, threads bound one core each), the report names the size,
    the tokens equal the same two-rank engine without offload, and the live statistics equal
    ``mplc replay`` of the trace it wrote."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("tensor parallelism 2 needs two cores to bind the workers to")
    path = tiny("qwen3-moe")
    pol = tmp_path / "half.moe"
    pol.write_text("policy half { cache { capacity = 12  eviction = lru } }\n")
    base = ["--engine", "vllm", "--model", path, "--prompt", "hello world", "--max-new-tokens",
            "6", "--json", "--dtype", "float32", "--tensor-parallel-size", "2"]
    out = tmp_path / "tp.mpltrace"
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        r = mplc("run", str(pol), *base, "--offload", "--trace", str(out))
        r0 = mplc("run", str(pol), *base)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert r.returncode == 0, r.stderr[-3000:]
    assert r0.returncode == 0, r0.stderr[-3000:]
    live, shadow = json.loads(r.stdout), json.loads(r0.stdout)
    assert live["tensor_parallel_size"] == 2 and live["mode"] == "offload" and live["ranks"] == 2
    assert [q["token_ids"] for q in live["requests"]] == [q["token_ids"] for q in shadow["requests"]]
    r2 = mplc("replay", str(pol), "--trace", str(out), "--json")
    assert r2.returncode == 0, r2.stderr[-2000:]
    replayed = json.loads(r2.stdout)
    drop = ("stall_ms",)
    assert ({k: v for k, v in live["stats"].items() if k not in drop}
            == {k: v for k, v in replayed["stats"].items() if k not in drop})
