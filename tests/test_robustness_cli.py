"""Bad input to every ``mplc`` subcommand, as a user would give it: each case must exit with 1
(bad input) or 2 (usage error), name the problem in its message, print no traceback, and
leave no partial output file.

The subprocesses run concurrently once per module (a fixture), and each parametrized test
checks one result, so the whole file stays fast.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from mpl import traceio
from mpl.sim import synth


def _mplc(args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "mpl.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300, env=env)


# ------------------------------------------------------------------ input files
def _write_inputs(d) -> None:
    tr = synth.synthesize("olmoe", steps=6, seed=3)
    data = traceio.to_bytes(tr)
    (d / "ok.mpltrace").write_bytes(data)
    traceio.save(tr, str(d / "ok.jsonl"))
    hlen = struct.unpack_from("<I", data, 12)[0]
    body = 16 + hlen
    (d / "cut10.mpltrace").write_bytes(data[:10])
    (d / "cut_header.mpltrace").write_bytes(data[:body - 5])
    (d / "cut_record.mpltrace").write_bytes(data[:body + 7])
    (d / "cut_end.mpltrace").write_bytes(data[:-1])
    (d / "magic.mpltrace").write_bytes(b"NOTTRACE" + data[8:])
    (d / "version.mpltrace").write_bytes(data[:8] + b"\x07\x00" + data[10:])
    flags = bytearray(data)
    flags[body] = 0x80
    (d / "flags.mpltrace").write_bytes(bytes(flags))
    layer = bytearray(data)
    layer[body + 5] = 0xEE          # the first record's layer (low byte)
    (d / "layer.mpltrace").write_bytes(bytes(layer))
    (d / "empty.mpltrace").write_bytes(b"")
    (d / "garbage.mpltrace").write_bytes(bytes(range(256)) * 3)

    header = json.loads(data[16:body])

    def with_header(name, **change):
        h = dict(header, **change)
        blob = json.dumps(h).encode()
        (d / name).write_bytes(data[:12] + struct.pack("<I", len(blob)) + blob + data[body:])

    with_header("h_negmoe.mpltrace", moe_layers=[-1] + header["moe_layers"][1:])
    with_header("h_dupmoe.mpltrace", moe_layers=[0] * len(header["moe_layers"]))
    with_header("h_extra.mpltrace", extra=[1, 2])
    with_header("h_moeint.mpltrace", moe_layers=3)
    with_header("h_ebytes.mpltrace", expert_bytes=-1)
    with_header("h_experts.mpltrace", num_experts="many")

    lines = (d / "ok.jsonl").read_text().splitlines()
    head, l0 = lines[0], json.loads(lines[1])["l"]

    def jsonl(name, *rows):
        (d / name).write_text("\n".join(rows) + "\n")

    row = lambda **kw: json.dumps({"t": 0, "l": l0, "e": [1, 2], **kw})  # noqa: E731
    jsonl("j_badjson.jsonl", head, "{not json")
    jsonl("j_nokey.jsonl", head, json.dumps({"t": 0, "e": [1]}))
    jsonl("j_negl.jsonl", head, row(l=-1))
    jsonl("j_oor.jsonl", head, row(e=[1, 999]))
    jsonl("j_float.jsonl", head, row(e=[1.5]))
    jsonl("j_ragged.jsonl", head, row(e=[[1, 2], [3]]))
    jsonl("j_nan.jsonl", head, '{"t": 0, "l": %d, "e": [1, 2], "s": [NaN, 0.5]}' % l0)
    jsonl("j_pred.jsonl", head, row(p={str(l0): [999]}))
    jsonl("j_wide.jsonl", json.dumps({"model": "x", "num_experts": 8, "top_k": 1, "moe_layers": [0]}),
          json.dumps({"t": 0, "l": 0, "e": [1, 2, 3]}))
    jsonl("j_dupmoe.jsonl", json.dumps({"model": "x", "num_experts": 8, "top_k": 1, "moe_layers": [0, 0]}),
          json.dumps({"t": 0, "l": 0, "e": [1]}))
    jsonl("j_inf.jsonl", '{"model": "x", "num_experts": Infinity, "top_k": 1}', json.dumps({"t": 0, "l": 0, "e": [1]}))
    jsonl("j_deep.jsonl", head, "[" * 50000 + "]" * 50000)
    (d / "j_binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    (d / "empty.jsonl").write_text("")

    (d / "lfu.moe").write_text("policy lfu16 {\n  cache { capacity = 16  eviction = lfu }\n}\n")
    (d / "pl.moe").write_text("policy pl {\n  cache { capacity = 8 }\n"
                              "  per_layer { allocation = uniform  min_capacity = 4 }\n}\n")
    (d / "pin.moe").write_text("policy pin {\n  cache { capacity = 8  pin = [200] }\n}\n")
    (d / "garbage.moe").write_bytes(b"\xc0\x00\xff binary \x00")
    (d / "adir.moe").mkdir()
    (d / "afile").write_text("not a folder\n")

    (d / "badjson.json").write_text("{\n")
    (d / "neg_hw.json").write_text(json.dumps({"gpu_memory_gb": -1, "hbm_gbps": 1, "gpu_tflops": 1}))
    (d / "list_hw.json").write_text("[1, 2]")
    (d / "str_hw.json").write_text(json.dumps({"base": "h100", "link_gbps": "fast"}))
    (d / "cfg_str.json").write_text(json.dumps({"num_hidden_layers": "x", "num_local_experts": 8,
                                                "hidden_size": 8, "intermediate_size": 16}))
    (d / "cfg_zero.json").write_text(json.dumps({"num_hidden_layers": 2, "num_local_experts": 0,
                                                 "hidden_size": 8, "intermediate_size": 16}))
    (d / "cfg_dense.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                                  "hidden_size": 8, "intermediate_size": 16}))
    (d / "cfg_heads.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                                  "hidden_size": 8, "intermediate_size": 16,
                                                  "num_attention_heads": 32}))


# ------------------------------------------------------------------ cases
# (id, argv, exit status, text the message must contain, files that must not exist after)
T = ["--trace", "ok.mpltrace"]
CASES = [
    ("check-missing", ["check", "missing.moe"], 1, "no such file", []),
    ("check-dir", ["check", "adir.moe"], 1, "directory", []),
    ("check-binary", ["check", "garbage.moe"], 1, "binary", []),
    ("check-model-unknown", ["check", "lfu.moe", "--model", "nope"], 2, "unknown model 'nope'", []),
    ("check-model-badjson", ["check", "lfu.moe", "--model", "badjson.json"], 2, "cannot read badjson.json", []),
    ("check-model-str", ["check", "lfu.moe", "--model", "cfg_str.json"], 2, "num_hidden_layers must be an integer", []),
    ("check-model-zero", ["check", "lfu.moe", "--model", "cfg_zero.json"], 2, "number of experts must be >= 1", []),
    ("check-model-dense", ["check", "lfu.moe", "--model", "cfg_dense.json"], 2, "Mixture-of-Experts", []),
    ("check-devmem-inf", ["check", "lfu.moe", "--model", "olmoe", "--device-memory", "infGB"], 2, "cannot read 'infGB'", []),
    ("check-devmem-huge", ["check", "lfu.moe", "--model", "olmoe", "--device-memory", "1e400GB"], 2, "cannot read", []),
    ("fmt-missing", ["fmt", "missing.moe"], 1, "missing.moe", []),
    ("fmt-binary", ["fmt", "garbage.moe"], 1, "binary", []),
    ("explain-unknown", ["explain", "MPL99999"], 2, "unknown code", []),
    ("compile-missing", ["compile", "missing.moe"], 1, "cannot read missing.moe", []),
    ("compile-no-dir", ["compile", "lfu.moe", "-o", "nodir/x.py"], 1, "cannot write nodir/x.py", ["nodir"]),
    ("compile-under-file", ["compile", "lfu.moe", "-o", "afile/x.py"], 1, "cannot write afile/x.py", []),
    ("compile-to-dir", ["compile", "lfu.moe", "-o", "adir.moe.jsonl"], 1, "cannot write adir.moe.jsonl", []),
    ("compile-to-moe-dir", ["compile", "lfu.moe", "-o", "adir.moe"], 2, "not a policy file", []),
    ("compile-policy-name", ["compile", "lfu.moe", "--policy", "zz"], 1, "no policy named 'zz'", []),
    ("compile-to-moe", ["compile", "lfu.moe", "-o", "lfu2.moe"], 2, "not a policy file", ["lfu2.moe"]),
    ("compile-to-policy", ["compile", "lfu.moe", "-o", "pin.policy"], 2, "not a policy file", ["pin.policy"]),
    # native traces: truncated, corrupted, wrong magic and version, bad headers
    ("info-missing", ["trace", "info", "missing.mpltrace"], 1, "missing.mpltrace: cannot read", []),
    ("info-ext", ["trace", "info", "x.csv"], 1, "unknown trace format", []),
    ("info-empty", ["trace", "info", "empty.mpltrace"], 1, "bad magic", []),
    ("info-garbage", ["trace", "info", "garbage.mpltrace"], 1, "bad magic", []),
    ("info-cut10", ["trace", "info", "cut10.mpltrace"], 1, "truncated header", []),
    ("info-cut-header", ["trace", "info", "cut_header.mpltrace"], 1, "truncated header", []),
    ("info-cut-record", ["trace", "info", "cut_record.mpltrace"], 1, "truncated record 0", []),
    ("info-cut-end", ["trace", "info", "cut_end.mpltrace"], 1, "truncated end marker", []),
    ("info-magic", ["trace", "info", "magic.mpltrace"], 1, "bad magic", []),
    ("info-version", ["trace", "info", "version.mpltrace"], 1, "unsupported .mpltrace version 7", []),
    ("info-flags", ["trace", "info", "flags.mpltrace"], 1, "unknown flags", []),
    ("info-layer", ["trace", "info", "layer.mpltrace"], 1, "record 0 at byte", []),
    ("info-h-negmoe", ["trace", "info", "h_negmoe.mpltrace"], 1, "moe_layers must be non-negative", []),
    ("info-h-dupmoe", ["trace", "info", "h_dupmoe.mpltrace"], 1, "moe_layers lists layer 0 twice", []),
    ("info-h-extra", ["trace", "info", "h_extra.mpltrace"], 1, "'extra' must be a JSON object", []),
    ("info-h-moeint", ["trace", "info", "h_moeint.mpltrace"], 1, "'moe_layers' must be a list", []),
    ("info-h-ebytes", ["trace", "info", "h_ebytes.mpltrace"], 1, "expert_bytes must be >= 0", []),
    ("info-h-experts", ["trace", "info", "h_experts.mpltrace"], 1, "'num_experts' must be an integer", []),
    # JSONL traces
    ("info-j-empty", ["trace", "info", "empty.jsonl"], 1, "empty file", []),
    ("info-j-binary", ["trace", "info", "j_binary.jsonl"], 1, "j_binary.jsonl:1: not UTF-8", []),
    ("info-j-badjson", ["trace", "info", "j_badjson.jsonl"], 1, "j_badjson.jsonl:2: not JSON", []),
    ("info-j-deep", ["trace", "info", "j_deep.jsonl"], 1, "j_deep.jsonl:2: not JSON (nested too deeply)", []),
    ("info-j-nokey", ["trace", "info", "j_nokey.jsonl"], 1, "j_nokey.jsonl:2: dispatch row has no 'l'", []),
    ("info-j-negl", ["trace", "info", "j_negl.jsonl"], 1, "j_negl.jsonl:2: 't' and 'l' must be", []),
    ("info-j-oor", ["trace", "info", "j_oor.jsonl"], 1, "j_oor.jsonl:2: expert id 999 outside", []),
    ("info-j-float", ["trace", "info", "j_float.jsonl"], 1, "expert ids must be integers", []),
    ("info-j-ragged", ["trace", "info", "j_ragged.jsonl"], 1, "select different numbers of experts", []),
    ("info-j-nan", ["trace", "info", "j_nan.jsonl"], 1, "j_nan.jsonl:2: not JSON (NaN", []),
    ("info-j-pred", ["trace", "info", "j_pred.jsonl"], 1, "predicted expert id 999", []),
    ("info-j-wide", ["trace", "info", "j_wide.jsonl"], 1, "more than the header's top_k 1", []),
    ("info-j-dupmoe", ["trace", "info", "j_dupmoe.jsonl"], 1, "moe_layers lists layer 0 twice", []),
    ("info-j-inf", ["trace", "info", "j_inf.jsonl"], 1, "j_inf.jsonl:1: not JSON (Infinity", []),
    ("convert-bad-in", ["trace", "convert", "j_ragged.jsonl", "out1.mpltrace"], 1, "j_ragged.jsonl:2", ["out1.mpltrace"]),
    ("convert-no-dir", ["trace", "convert", "ok.mpltrace", "nodir/x.jsonl"], 1, "nodir/x.jsonl", ["nodir"]),
    ("convert-to-dir", ["trace", "convert", "ok.mpltrace", "adir.moe.jsonl"], 1, "adir.moe.jsonl", []),
    ("convert-ext", ["trace", "convert", "ok.mpltrace", "out.csv"], 1, "unknown trace format", ["out.csv"]),
    ("synth-preset", ["trace", "synth", "--preset", "nope"], 1, "unknown preset 'nope'", []),
    ("synth-steps", ["trace", "synth", "--preset", "olmoe", "--steps", "0", "-o", "s.mpltrace"], 2, "--steps must be in 1..4294967296", ["s.mpltrace"]),
    ("synth-skew-nan", ["trace", "synth", "--preset", "olmoe", "--steps", "2", "--skew", "nan", "-o", "s1.mpltrace"], 1, "skew must be a finite number", ["s1.mpltrace"]),
    ("synth-prompt", ["trace", "synth", "--preset", "olmoe", "--steps", "2", "--prompt-tokens", "100000", "-o", "s2.mpltrace"], 1, "prompt_tokens must be at most 65535", ["s2.mpltrace"]),
    ("synth-no-dir", ["trace", "synth", "--preset", "olmoe", "--steps", "2", "-o", "nodir/s.mpltrace"], 1, "nodir/s.mpltrace", ["nodir"]),
    ("synth-steps-word", ["trace", "synth", "--preset", "olmoe", "--steps", "many"], 2, "invalid int value", []),
    # replay
    ("replay-policy-missing", ["replay", "missing.moe", *T], 1, "no such file", []),
    ("replay-policy-dir", ["replay", "adir.moe", *T], 1, "is a directory", []),
    ("replay-policy-binary", ["replay", "garbage.moe", *T], 1, "binary file", []),
    ("replay-trace-cut", ["replay", "lfu.moe", "--trace", "cut_record.mpltrace"], 1, "truncated record", []),
    ("replay-trace-jsonl", ["replay", "lfu.moe", "--trace", "j_oor.jsonl"], 1, "j_oor.jsonl:2", []),
    ("replay-hw-unknown", ["replay", "lfu.moe", *T, "--hardware", "tpu-v9"], 1, "unknown hardware 'tpu-v9'", []),
    ("replay-hw-badjson", ["replay", "lfu.moe", *T, "--hardware", "badjson.json"], 1, "badjson.json: not valid JSON", []),
    ("replay-hw-negative", ["replay", "lfu.moe", *T, "--hardware", "neg_hw.json"], 1, "'gpu_memory_gb' must be a positive", []),
    ("replay-hw-list", ["replay", "lfu.moe", *T, "--hardware", "list_hw.json"], 1, "must be a JSON object", []),
    ("replay-hw-string", ["replay", "lfu.moe", *T, "--hardware", "str_hw.json"], 1, "'link_gbps' must be a positive", []),
    ("replay-hw-dir", ["replay", "lfu.moe", *T, "--hardware", "adir.moe"], 1, "adir.moe: cannot read", []),
    ("replay-cap-zero", ["replay", "lfu.moe", *T, "--capacity", "0"], 2, "not a slot count", []),
    ("replay-cap-word", ["replay", "lfu.moe", *T, "--capacity", "lots"], 2, "not a slot count", []),
    ("replay-cap-huge", ["replay", "lfu.moe", *T, "--capacity", "99999999999999999999"], 2, "must be in [1, 65536]", []),
    ("replay-cap-size-zero", ["replay", "lfu.moe", *T, "--capacity", "0GiB"], 2, "must be a positive size", []),
    ("replay-pin-beyond", ["replay", "pin.moe", *T], 1, "expert 200 does not exist", []),
    ("replay-budget-small", ["replay", "pl.moe", *T, "--capacity", "1"], 1, "below layers x min_capacity", []),
    ("replay-policy-name", ["replay", "lfu.moe", *T, "--policy", "zz"], 1, "no policy named 'zz'", []),
    ("replay-model-unknown", ["replay", "lfu.moe", *T, "--model", "nope"], 2, "unknown model 'nope'", []),
    ("replay-model-misfit", ["replay", "lfu.moe", *T, "--model", "mixtral-8x7b"], 1, "does not fit the trace", []),
    ("replay-model-badjson", ["replay", "lfu.moe", *T, "--model", "badjson.json"], 2, "cannot read badjson.json", []),
    ("replay-model-dense", ["replay", "lfu.moe", *T, "--model", "cfg_dense.json"], 2, "Mixture-of-Experts", []),
    ("replay-model-binary", ["replay", "lfu.moe", *T, "--model", "garbage.mpltrace"], 2, "garbage.mpltrace", []),
    # sweep
    ("sweep-cap-word", ["sweep", "lfu.moe", *T, "--capacity", "8,x"], 1, "'x' is not a slot count", []),
    ("sweep-cap-zero", ["sweep", "lfu.moe", *T, "--capacity", "0"], 1, "'0' is not a slot count", []),
    ("sweep-param-unknown", ["sweep", "lfu.moe", *T, "--param", "evction=lru"], 1, "unknown parameter", []),
    ("sweep-param-syntax", ["sweep", "lfu.moe", *T, "--param", "eviction"], 1, "write NAME=V1,V2", []),
    ("sweep-param-value", ["sweep", "lfu.moe", *T, "--param", "eviction=foo"], 1, "foo", []),
    ("sweep-jobs", ["sweep", "lfu.moe", *T, "-j", "0"], 1, "--jobs must be >= 1", []),
    ("sweep-plot-no-dir", ["sweep", "lfu.moe", *T, "--plot", "nodir/x.png"], 1, "cannot write nodir/x.png", ["nodir"]),
    ("sweep-plot-format", ["sweep", "lfu.moe", *T, "--plot", "x.xyz"], 2, "--plot x.xyz: matplotlib writes no 'xyz' figures", ["x.xyz"]),
    ("sweep-model-unknown", ["sweep", "lfu.moe", *T, "--model", "nope"], 2, "unknown model 'nope'", []),
    ("sweep-model-misfit", ["sweep", "lfu.moe", *T, "--model", "mixtral"], 1, "does not fit the trace", []),
    # tune
    ("tune-budget-word", ["tune", *T, "--budget", "lots", "-j", "1"], 1, "give slots", []),
    ("tune-budget-zero", ["tune", *T, "--budget", "0", "-j", "1"], 1, "must hold at least one", []),
    ("tune-budget-nan", ["tune", *T, "--budget", "nanGiB", "-j", "1"], 1, "not a size (a finite number of bytes, at least one)", []),
    ("tune-budget-inf", ["tune", *T, "--budget", "1e400GiB", "-j", "1"], 1, "not a size (a finite number of bytes, at least one)", []),
    ("tune-hw", ["tune", *T, "--budget", "64", "--hardware", "tpu-v9", "-j", "1"], 1, "unknown hardware", []),
    ("tune-trace", ["tune", "--trace", "flags.mpltrace", "--budget", "64"], 1, "unknown flags", []),
    ("tune-jobs", ["tune", *T, "--budget", "64", "-j", "-1"], 1, "--jobs must be >= 0", []),
    ("tune-top", ["tune", *T, "--budget", "64", "--top", "-3"], 1, "--top must be >= 0", []),
    ("tune-name", ["tune", *T, "--budget", "64", "--name", "bad name!"], 1, "not a policy name", []),
    ("tune-out-over-trace", ["tune", "--trace", "cut_end.mpltrace", "--budget", "16", "-o", "cut_end.mpltrace"], 1, "refusing to write the tuned policy over the trace", []),
    ("tune-out-no-dir", ["tune", *T, "--budget", "16", "-j", "1", "-o", "nodir/best.moe"], 1, "cannot write nodir/best.moe", ["nodir"]),
    ("tune-out-exists", ["tune", *T, "--budget", "16", "-j", "1", "-o", "lfu.moe"], 2, "give --force", []),
    ("tune-model-unknown", ["tune", *T, "--budget", "16", "--model", "nope"], 2, "unknown model 'nope'", []),
    ("tune-model-zero", ["tune", *T, "--budget", "16", "--model", "cfg_zero.json"], 2, "number of experts must be >= 1", []),
    ("tune-model-misfit", ["tune", *T, "--budget", "16", "-j", "1", "--model", "deepseek-v2-lite"], 1, "does not fit the trace", []),
    # torch-based commands: only cheap failures (the model is never built or is rejected early)
    ("run-config-heads", ["run", "lfu.moe", "--model", "cfg_heads.json"], 1, "cannot load a model from cfg_heads.json", []),
    ("record-ext", ["trace", "record", "--model", "tiny-mixtral", "-o", "r.csv"], 1, "unknown trace format", ["r.csv"]),
    ("record-tokens", ["trace", "record", "--model", "tiny-mixtral", "-o", "r.mpltrace", "--max-new-tokens", "0"], 2, "--max-new-tokens must be >= 1", ["r.mpltrace"]),
    ("demo-tokens", ["demo", "--max-new-tokens", "0"], 2, "--max-new-tokens must be >= 1", []),
    ("demo-policy", ["demo", "--policy", "missing.moe"], 1, "no such policy file", []),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("robust")
    _write_inputs(d)
    (d / "adir.moe.jsonl").mkdir()
    with ThreadPoolExecutor(max_workers=min(16, (os.cpu_count() or 2) * 2)) as ex:
        futures = {cid: ex.submit(_mplc, argv, d) for cid, argv, *_ in CASES}
        out = {cid: f.result() for cid, f in futures.items()}
    return d, out


@pytest.mark.parametrize("cid,argv,status,message,absent", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_error(results, cid, argv, status, message, absent):
    d, out = results
    r = out[cid]
    assert r.returncode == status, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    # check prints its diagnostics and sweep its per-point errors on stdout (their report)
    assert message in r.stderr + r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
    for name in absent:
        assert not (d / name).exists(), f"{name} was left behind"
    leftovers = [p.name for p in d.rglob(".mpl-*.tmp")]
    assert not leftovers, leftovers


def test_a_failed_convert_keeps_the_previous_file(tmp_path):
    """Overwriting an existing trace with a conversion that fails part-way keeps the old file."""
    tr = synth.synthesize("olmoe", steps=2, seed=0)
    traceio.save(tr, str(tmp_path / "keep.mpltrace"))
    before = (tmp_path / "keep.mpltrace").read_bytes()
    (tmp_path / "big.jsonl").write_text(
        json.dumps({"model": "x", "num_experts": 4, "top_k": 1, "moe_layers": [0]}) + "\n"
        + json.dumps({"t": 2 ** 32 - 1, "l": 0, "e": [1]}) + "\n")
    r = _mplc(["trace", "convert", "big.jsonl", "keep.mpltrace"], tmp_path)
    assert r.returncode == 0, r.stderr          # the largest step fits
    assert (tmp_path / "keep.mpltrace").read_bytes() != before
    (tmp_path / "keep2.mpltrace").write_bytes(before)
    bad = synth.synthesize("olmoe", steps=2, seed=0)
    bad.dispatches[-1].experts = [[1, 2], [3]]          # fails at the last dispatch
    with pytest.raises(ValueError):
        traceio.save(bad, str(tmp_path / "keep2.mpltrace"))
    assert (tmp_path / "keep2.mpltrace").read_bytes() == before
    assert not list(tmp_path.glob(".mpl-*.tmp"))


# ------------------------------------------------------------------ the last-resort handler
def test_internal_error_is_one_line_unless_debugging(monkeypatch, capsys):
    from mpl.cli import cmd_explain, main

    def boom(args):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(cmd_explain, "run", boom)
    monkeypatch.delenv("MPL_DEBUG", raising=False)
    assert main.main(["explain", "MPL102"]) == main.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "mplc explain: internal error: RuntimeError: simulated bug" in err
    assert "MPL_DEBUG=1" in err and "Traceback" not in err
    monkeypatch.setenv("MPL_DEBUG", "1")
    assert main.main(["explain", "MPL102"]) == main.INTERNAL_ERROR
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["check", "-"], "the standard input is not UTF-8 text"),
    (["check", "-", "--json"], "the standard input is not UTF-8 text"),
    (["fmt", "-"], "the standard input is not UTF-8 text"),
])
def test_binary_standard_input(tmp_path, argv, message):
    r = subprocess.run([sys.executable, "-m", "mpl.cli.main", *argv], input=b"\xc5lRU\xa1\xff\n",
                       capture_output=True, cwd=tmp_path, timeout=120)
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8")
    assert r.returncode == 1, (out, err)
    assert message in out + err and "Traceback" not in err and "internal error" not in err


def test_compile_never_overwrites_its_input(tmp_path):
    text = "policy lfu16 {\n  cache { capacity = 16  eviction = lfu }\n}\n"
    (tmp_path / "p.moe").write_text(text)
    r = _mplc(["compile", "p.moe", "-o", "./p.moe"], tmp_path)
    assert r.returncode == 2 and "not a policy file" in r.stderr       # a .moe output: usage
    assert (tmp_path / "p.moe").read_text() == text
    (tmp_path / "p.txt").write_text(text)                  # a policy under another name
    r = _mplc(["compile", "p.txt", "-o", "./p.txt"], tmp_path)
    assert r.returncode == 1 and "refusing to write the module over the policy file" in r.stderr
    assert (tmp_path / "p.txt").read_text() == text


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("cmd", ["check", "fmt", "compile"])
def test_endless_devices_and_streams_end_with_an_error(tmp_path, cmd):
    """A read always ends: /dev/zero is binary at once, an endless text stream passes the
    size limit (the limit is 16 MiB; the stream is killed long before the timeout)."""
    r = _mplc([cmd, "/dev/zero"], tmp_path)
    assert r.returncode == 1 and "is a binary file" in r.stdout + r.stderr, (r.stdout, r.stderr)
    if cmd == "compile":
        return
    p = subprocess.Popen([sys.executable, "-m", "mpl.cli.main", cmd, "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    line = b"policy p { cache { capacity = 4 } }   # an endless stream\n" * 1024
    try:
        while p.poll() is None:
            p.stdin.write(line)
    except (BrokenPipeError, OSError):
        pass
    out, err = p.communicate(timeout=120)
    text = (out + err).decode("utf-8")
    assert p.returncode == 1 and "larger than 16 MiB" in text and "Traceback" not in text, text
