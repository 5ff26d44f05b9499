"""The workbench commands as a user runs them: subprocesses, --json, exit codes."""

import json
import subprocess
import sys

import pytest

from mpl.checker import check


def mplc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    r = mplc("trace", "synth", "--preset", "olmoe", "--steps", "40", "--seed", "1",
             "-o", d / "ol.mpltrace")
    assert r.returncode == 0, r.stderr
    (d / "lfu.moe").write_text("policy lfu16 {\n  cache { capacity = 64  eviction = lfu }\n}\n")
    (d / "pl.moe").write_text("policy pl {\n  cache { capacity = 8 }\n  per_layer { allocation = uniform }\n}\n")
    return d


def test_replay_json(work):
    r = mplc("replay", work / "lfu.moe", "--trace", work / "ol.mpltrace", "--hardware", "h100", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["policy"] == "lfu16" and d["hardware"]["name"] == "h100"
    assert 0 <= d["stats"]["hit_rate"] <= d["belady"]["hit_rate"] <= 1
    assert d["sim"]["tokens_per_s"] > 0 and d["gap"] >= 0


def test_replay_text_capacity_and_no_belady(work):
    r = mplc("replay", work / "pl.moe", "--trace", work / "ol.mpltrace", "--capacity", "16", "--no-belady")
    assert r.returncode == 0, r.stderr
    assert "hit rate" in r.stdout and "Belady" not in r.stdout and "[16]" in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["replay", "missing.moe", "--trace", "ol.mpltrace"], "no such file"),
    (["replay", "lfu.moe", "--trace", "missing.mpltrace"], "cannot read"),
    (["replay", "lfu.moe", "--trace", "ol.mpltrace", "--hardware", "tpu"], "unknown hardware"),
    (["sweep", "lfu.moe", "--trace", "ol.mpltrace", "--param", "evction=lru"], "unknown parameter"),
    (["sweep", "lfu.moe", "--trace", "ol.mpltrace", "--capacity", "8,x"], "not a slot count"),
    (["tune", "--trace", "ol.mpltrace", "--budget", "lots"], "give slots"),
    (["trace", "convert", "ol.mpltrace", "out.csv"], "unknown trace format"),
])
def test_bad_input_is_a_clear_error(work, args, msg):
    r = mplc(*args, cwd=work)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert msg in r.stderr and "Traceback" not in r.stderr


def test_usage_errors_exit_2(work):
    assert mplc("replay", work / "lfu.moe").returncode == 2          # --trace missing
    assert mplc("trace").returncode == 2


def test_sweep_json_and_plots(work):
    plot, heat = work / "p.png", work / "h.png"
    r = mplc("sweep", work / "lfu.moe", "--trace", work / "ol.mpltrace", "--capacity", "16,64,256",
             "--param", "eviction=lru,lfu", "--plot", plot, "--heatmap", heat, "--json", "-j", "2")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    pts = d["points"]
    assert len(pts) == 6 and {p["params"]["cache.eviction"] for p in pts} == {"lru", "lfu"}
    for p in pts:
        assert p["error"] is None and p["hit_rate"] <= p["belady"] + 1e-12
        assert len(p["per_layer_hit_rate"]) == 16
    bel = {p["capacity"]: p["belady"] for p in pts}
    assert bel[16] <= bel[64] <= bel[256]
    assert plot.read_bytes()[:4] == b"\x89PNG" and heat.read_bytes()[:4] == b"\x89PNG"


def test_sweep_text_reports_bad_points(work):
    (work / "pf.moe").write_text("policy pf {\n  cache { capacity = 8 }\n  prefetch { strategy = history  budget = 4 }\n}\n")
    r = mplc("sweep", work / "pf.moe", "--trace", work / "ol.mpltrace", "--capacity", "2,8")
    assert r.returncode == 1, r.stderr                          # a point failed
    # capacity 2 < budget 4: that point fails; its row says so, the message is listed below
    assert "error 1" in r.stdout and "error 1: pf cap=2: prefetch budget" in r.stdout


def test_tune_writes_a_checked_per_layer_winner(work):
    out = work / "best.moe"
    r = mplc("tune", "--trace", work / "ol.mpltrace", "--budget", "256", "-o", out, "--json", "-j", "2")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["evaluated"] > 20 and d["best"]["error"] is None
    text = out.read_text()
    assert "per_layer" in text                      # a shared 256-slot cache thrashes on 16 layers
    assert f"hit rate {d['best']['hit_rate']:.4f}" in text and "command: mplc tune" in text
    assert [x for x in check(str(out)) if x.is_error] == []
    from mpl import fmt
    body = text[text.index("version"):]
    assert fmt.format_text(text) == text or fmt.format_text(body) == body
    r2 = mplc("replay", out, "--trace", work / "ol.mpltrace", "--json")
    assert json.loads(r2.stdout)["stats"]["hit_rate"] == pytest.approx(d["best"]["hit_rate"])


def test_tune_size_budget_and_tok_s_objective(work):
    r = mplc("tune", "--trace", work / "ol.mpltrace", "--budget", "1GiB", "--objective", "tok_s",
             "--hardware", "rtx-5080", "-j", "1", "--top", "3")
    assert r.returncode == 0, r.stderr
    from mpl import shapes
    slots = 2 ** 30 // shapes.PRESETS["olmoe-1b-7b"].expert_bytes       # 85 experts of 12.6 MB
    assert "policy tuned" in r.stdout and f"budget {slots} slots" in r.stdout


def test_trace_info_and_convert_json(work):
    r = mplc("trace", "convert", work / "ol.mpltrace", work / "ol.jsonl", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["dispatches"] == 640
    r = mplc("trace", "info", work / "ol.jsonl", "--json")
    d = json.loads(r.stdout)
    assert d["model"] == "olmoe-1b-7b" and d["format"] == "jsonl" and d["checksum"] == "none (JSONL)"
    r = mplc("trace", "info", work / "ol.mpltrace")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "native .mpltrace version 2" in out and "checksum     verified" in out
    assert "16 MoE (ids 0..15)" in out and "64 per layer, top-8" in out
    assert "640 in 40 steps, 40 tokens" in out


def test_sweep_matched_total_budget_shared_vs_per_layer(work):
    r = mplc("sweep", work / "lfu.moe", work / "pl.moe", "--trace", work / "ol.mpltrace",
             "--capacity", "32,128", "--total", "--json", "--plot", work / "m.png")
    assert r.returncode == 0, r.stderr
    pts = json.loads(r.stdout)["points"]
    assert [(p["policy"], p["total_slots"]) for p in pts] == [
        ("lfu16", 32), ("lfu16", 128), ("pl", 32), ("pl", 128)]
    pl = [p for p in pts if p["policy"] == "pl"]
    assert [p["capacities"] for p in pl] == [[2] * 16, [8] * 16]
    assert (work / "m.png").stat().st_size > 10_000


@pytest.mark.torch
def test_recorded_trace_replays_the_same_through_jsonl(work):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    rec, js = work / "rec.mpltrace", work / "rec.jsonl"
    r = mplc("trace", "record", "--model", "tiny-olmoe", "--max-new-tokens", "6", "-o", rec)
    assert r.returncode == 0, r.stderr
    assert mplc("trace", "convert", rec, js).returncode == 0
    (work / "small.moe").write_text("policy small {\n  cache { capacity = 4  eviction = lfu }\n}\n")
    a = json.loads(mplc("replay", work / "small.moe", "--trace", rec, "--json").stdout)
    b = json.loads(mplc("replay", work / "small.moe", "--trace", js, "--json").stdout)
    assert a["stats"] == b["stats"] and a["belady"] == b["belady"]
    assert a["stats"]["accesses"] > 0


def test_choosing_one_policy_of_several(work):
    (work / "two.moe").write_text("policy a { cache { capacity = 8 } }\n"
                                  "policy b { cache { capacity = 16  eviction = lfu } }\n")
    r = mplc("replay", work / "two.moe", "--trace", work / "ol.mpltrace")
    assert r.returncode == 1 and "choose one with --policy" in r.stderr
    r = mplc("replay", work / "two.moe", "--trace", work / "ol.mpltrace", "--policy", "b", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["policy"] == "b"


def test_standard_policies_by_name_in_every_command(work, tmp_path):
    """std/NAME works wherever a policy file does (a local std/ folder would win)."""
    r = mplc("check", "std/generous", cwd=tmp_path)
    assert r.returncode == 0 and "no problems" in r.stdout, r.stdout + r.stderr
    r = mplc("replay", "std/generous", "--trace", work / "ol.mpltrace", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["policy"] == "generous"
    r = mplc("sweep", "std/lru_basic", "--trace", work / "ol.mpltrace", "--capacity", "8,16",
             "--no-belady", cwd=tmp_path)
    assert r.returncode == 0 and "16" in r.stdout, r.stderr
    r = mplc("check", "std/nope", cwd=tmp_path)
    assert r.returncode == 1 and "no standard policy 'std/nope'" in r.stdout and "std/generous" in r.stdout
    r = mplc("replay", "std/nope", "--trace", work / "ol.mpltrace", cwd=tmp_path)
    assert r.returncode == 1 and "no standard policy 'std/nope'" in r.stderr + r.stdout
    assert check("std/generous") == []


def test_trace_synth_writes_a_step_at_a_time(tmp_path):
    # `mplc trace synth` makes and writes its trace a step at a time: the memory it holds
    # does not grow with --steps (a trace of any length fits), and the file is the one the
    # in-memory synthesizer and writer make, byte for byte
    import tracemalloc

    from mpl import traceio
    from mpl.cli.main import main
    from mpl.sim import synth

    def peak(steps, out):
        tracemalloc.start()
        try:
            assert main(["trace", "synth", "--preset", "mixtral-8x7b", "--steps", str(steps),
                         "--pred-accuracy", "0.5", "--no-progress", "-o", str(out)]) == 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    short, long = peak(300, tmp_path / "a.mpltrace"), peak(3000, tmp_path / "b.mpltrace")
    assert long < 1.5 * short, (short, long)
    made = synth.synthesize("mixtral-8x7b", steps=300, pred_accuracy=0.5)
    assert (tmp_path / "a.mpltrace").read_bytes() == traceio.to_bytes(made)
    back = traceio.load(str(tmp_path / "b.mpltrace"))
    assert len(back.dispatches) == 3000 * 32 and back.num_steps == 3000
