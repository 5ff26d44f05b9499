"""JSONL import is lossless and its header and rows are validated like the native format's:
round trips through ``mplc trace convert`` are byte-identical, and every bad input is a
located error (file:line) from ``mplc trace info`` / ``convert`` / ``replay`` (exit status 1,
no traceback)."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
import zlib

import pytest

from mpl import traceio


def mplc(args, cwd, status=0):
    r = subprocess.run([sys.executable, "-m", "mpl.cli.main", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == status, (r.returncode, r.stdout[-1000:], r.stderr[-1000:])
    return r.stderr + r.stdout


def _original(path, *, compact=False, nested_every=0, seed=5):
    """A trace in the original moe-policylang's layout: header line with keys of its own,
    then {"t","l","e","s"} rows (json.dumps), some single-token rows written nested."""
    rng = random.Random(seed)
    sep = (",", ":") if compact else None
    lines = [json.dumps({"model": "deepseek-ai/DeepSeek-V2-Lite", "num_experts": 64, "top_k": 6,
                         "num_layers": 27, "dtype": "bfloat16", "prompt": "héllo"}, separators=sep)]
    i = 0
    for t in range(12):
        for l in (1, 2, 3):
            e = rng.sample(range(64), 6)
            s = [rng.random() for _ in range(6)]
            nested = nested_every and i % nested_every == 0
            lines.append(json.dumps({"t": t, "l": l, "e": [e] if nested else e,
                                     "s": [s] if nested else s}, separators=sep))
            i += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("synth_args", [
    ["--preset", "deepseek-v2-lite", "--steps", "12"],
    ["--preset", "qwen3-30b-a3b", "--steps", "6", "--pred-accuracy", "0.7", "--prompt-tokens", "5"],
])
def test_files_this_project_writes_round_trip_byte_identical(tmp_path, synth_args):
    mplc(["trace", "synth", *synth_args, "-o", "a.jsonl"], tmp_path)
    mplc(["trace", "synth", *synth_args, "-o", "a.mpltrace"], tmp_path)
    mplc(["trace", "convert", "a.jsonl", "b.jsonl"], tmp_path)                  # JSONL -> JSONL
    mplc(["trace", "convert", "a.jsonl", "b.mpltrace"], tmp_path)               # JSONL -> native
    mplc(["trace", "convert", "b.mpltrace", "c.jsonl"], tmp_path)               #   -> JSONL
    mplc(["trace", "convert", "a.mpltrace", "d.jsonl"], tmp_path)               # native -> JSONL
    mplc(["trace", "convert", "d.jsonl", "d.mpltrace"], tmp_path)               #   -> native
    a = (tmp_path / "a.jsonl").read_bytes()
    assert (tmp_path / "b.jsonl").read_bytes() == a
    assert (tmp_path / "c.jsonl").read_bytes() == a
    assert (tmp_path / "d.jsonl").read_bytes() == a
    assert (tmp_path / "b.mpltrace").read_bytes() == (tmp_path / "a.mpltrace").read_bytes()
    assert (tmp_path / "d.mpltrace").read_bytes() == (tmp_path / "a.mpltrace").read_bytes()


@pytest.mark.parametrize("nested_every", [0, 4])
def test_original_format_round_trips_byte_identical(tmp_path, nested_every):
    _original(tmp_path / "o.jsonl", nested_every=nested_every)
    mplc(["trace", "convert", "o.jsonl", "b.jsonl"], tmp_path)
    mplc(["trace", "convert", "o.jsonl", "o.mpltrace"], tmp_path)
    mplc(["trace", "convert", "o.mpltrace", "c.jsonl"], tmp_path)
    o = (tmp_path / "o.jsonl").read_bytes()
    assert (tmp_path / "b.jsonl").read_bytes() == o
    assert (tmp_path / "c.jsonl").read_bytes() == o     # header key order kept through native


def test_compact_file_keeps_its_header_line_and_every_value(tmp_path):
    """Rows are written in the canonical layout (json.dumps); the header line verbatim."""
    _original(tmp_path / "o.jsonl", compact=True)
    mplc(["trace", "convert", "o.jsonl", "o.mpltrace"], tmp_path)
    mplc(["trace", "convert", "o.mpltrace", "c.jsonl"], tmp_path)
    src = (tmp_path / "o.jsonl").read_text().splitlines()
    got = (tmp_path / "c.jsonl").read_text().splitlines()
    assert got[0] == src[0]
    assert [json.loads(x) for x in got] == [json.loads(x) for x in src]


def test_byte_order_mark_is_accepted(tmp_path):
    p = tmp_path / "bom.jsonl"
    body = '{"num_experts": 8, "top_k": 2, "moe_layers": [0, 1]}\n{"t": 0, "l": 1, "e": [1, 2]}\n'
    p.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert "1 in 1 steps" in mplc(["trace", "info", "bom.jsonl"], tmp_path)
    mplc(["trace", "convert", "bom.jsonl", "out.jsonl"], tmp_path)
    assert (tmp_path / "out.jsonl").read_text() == body      # written back without the mark


def test_missing_header_fields_are_inferred(tmp_path):
    p = tmp_path / "inf.jsonl"
    p.write_text('{"num_experts": 8}\n{"t": 0, "l": 3, "e": [[1, 2, 3], [4, 5, 6]]}\n'
                 '{"t": 0, "l": 5, "e": [1]}\n')
    info = json.loads(mplc(["trace", "info", "inf.jsonl", "--json"], tmp_path))
    assert (info["top_k"], info["num_layers"], info["moe_layers"]) == (3, 6, 2)
    mplc(["trace", "convert", "inf.jsonl", "inf2.jsonl"], tmp_path)
    assert (tmp_path / "inf2.jsonl").read_text() == p.read_text()


# ------------------------------------------------------------------ located errors
HEAD = '{"num_experts": 8, "top_k": 2, "moe_layers": [0, 1]}'

BAD = [
    # predictions for a layer that is not a MoE layer of the header (was dropped silently)
    ("pred_layer", [HEAD, '{"t":0,"l":0,"e":[1,2],"p":{"1":[1]}}', '{"t":0,"l":1,"e":[1,2],"p":{"5":[3]}}'],
     "pred_layer.jsonl:3: a prediction for layer 5, which is not among the header's moe_layers [0, 1]"),
    ("pred_key", [HEAD, '{"t":0,"l":0,"e":[1,2],"p":{"01":[1]}}'],
     'pred_key.jsonl:2: bad predictions \'p\': key "01" is not a decoder-layer id'),
    ("pred_ids", [HEAD, '{"t":0,"l":0,"e":[1,2],"p":{"1":[true]}}'], "pred_ids.jsonl:2: bad predictions 'p'"),
    # unknown row fields (were dropped silently)
    ("row_key", [HEAD, '{"t":0,"l":0,"e":[1,2],"x":5}'],
     'row_key.jsonl:2: unknown field "x" in a dispatch row (the fields are t, l, e, s, p'),
    ("row_key2", [HEAD, '{"t":0,"l":0,"e":[1,2]}', '{"t":1,"l":0,"e":[1,2],"w":[0.5,0.5]}'],
     'row_key2.jsonl:3: unknown field "w"'),
    # header integers: JSON integers only (a string, a float, a boolean are errors)
    ("h_str", ['{"num_experts": "8", "top_k": 2}'], "h_str.jsonl:1: header field 'num_experts' must be an integer, got \"8\""),
    ("h_layers", ['{"num_experts": 8, "num_layers": "x"}'], "h_layers.jsonl:1: header field 'num_layers' must be an integer"),
    ("h_float", ['{"num_experts": 8, "top_k": 2.0}'], "h_float.jsonl:1: header field 'top_k' must be an integer, got 2.0"),
    ("h_bool", ['{"num_experts": 8, "top_k": true}'], "h_bool.jsonl:1: header field 'top_k' must be an integer, got true"),
    ("h_moe", ['{"num_experts": 8, "moe_layers": [0, "1"]}'], "h_moe.jsonl:1: header field 'moe_layers' must be an integer"),
    ("h_alias", ['{"n_experts": "8"}'], "h_alias.jsonl:1: header field 'n_experts' must be an integer"),
    ("h_ebytes", ['{"num_experts": 8, "expert_bytes": "1"}'], "h_ebytes.jsonl:1: header field 'expert_bytes' must be an integer"),
    ("h_extra", ['{"num_experts": 8, "extra": [1]}'], "h_extra.jsonl:1: header field 'extra' must be a JSON object"),
    # given values must make sense (absent ones are inferred; top_k 0 was replaced silently)
    ("h_topk0", ['{"num_experts": 8, "top_k": 0}', '{"t":0,"l":0,"e":[1,2,3]}'],
     "h_topk0.jsonl:1: header field 'top_k' must be >= 1, got 0"),
    ("h_topk_neg", ['{"num_experts": 8, "k": -2}'], "h_topk_neg.jsonl:1: header field 'k' must be >= 1, got -2"),
    ("h_topk_big", ['{"num_experts": 8, "top_k": 9, "moe_layers": [0]}'], "h_topk_big.jsonl:1: top_k must be in 1..num_experts, got 9"),
    ("h_layers0", ['{"num_experts": 8, "num_layers": 0}'], "h_layers0.jsonl:1: header field 'num_layers' must be >= 1, got 0"),
    ("h_moe_empty", ['{"num_experts": 8, "moe_layers": []}'], "h_moe_empty.jsonl:1: header field 'moe_layers' is empty"),
    ("h_moe_beyond", ['{"num_experts": 8, "num_layers": 4, "moe_layers": [1, 5]}'],
     "h_moe_beyond.jsonl:1: moe_layers lists layer 5, but the model has 4 decoder layers (ids 0..3)"),
    # 'l' is a decoder-layer id: it must exist in the model the header describes
    ("l_beyond", ['{"num_experts": 8, "top_k": 2, "num_layers": 4}', '{"t":0,"l":1,"e":[1,2]}', '{"t":0,"l":7,"e":[1,2]}'],
     "l_beyond.jsonl:3: layer 7 outside the header's 4 decoder layers (0..3); 'l' is a decoder-layer id"),
    ("l_not_moe", [HEAD, '{"t":0,"l":3,"e":[1,2]}'], "l_not_moe.jsonl:2: layer 3 is not among the header's moe_layers [0, 1]"),
    # the header's line number counts blank lines before it
    ("h_line", ["", '{"num_experts": "8"}'], "h_line.jsonl:2: header field 'num_experts' must be an integer"),
]


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    for name, lines, _ in BAD:
        (d / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    traceio.save(traceio.load(str(_ok(d))), str(d / "ok.mpltrace"))
    (d / "lfu.moe").write_text("policy p { cache { capacity = 4\n eviction = lfu } }\n")
    return d


def _ok(d):
    p = d / "ok.jsonl"
    p.write_text(HEAD + '\n{"t":0,"l":0,"e":[1,2]}\n{"t":0,"l":1,"e":[3,2]}\n')
    return p


@pytest.mark.parametrize("name,lines,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_jsonl_is_a_located_error(bad_dir, name, lines, msg):
    out = mplc(["trace", "info", f"{name}.jsonl"], bad_dir, status=1)
    assert msg in out, out
    out = mplc(["trace", "convert", f"{name}.jsonl", f"{name}.out.jsonl"], bad_dir, status=1)
    assert msg in out and not (bad_dir / f"{name}.out.jsonl").exists()


@pytest.mark.parametrize("name", ["pred_layer", "row_key", "h_str", "h_topk0", "l_beyond"])
def test_replay_reports_the_same_located_error(bad_dir, name):
    msg = next(m for n, _, m in BAD if n == name)
    assert msg in mplc(["replay", "lfu.moe", "--trace", f"{name}.jsonl"], bad_dir, status=1)


# ------------------------------------------------------------------ the native reader
@pytest.mark.parametrize("n", range(9, 16))
def test_native_file_cut_inside_the_fixed_header(bad_dir, n):
    data = (bad_dir / "ok.mpltrace").read_bytes()
    (bad_dir / f"cut{n}.mpltrace").write_bytes(data[:n])
    out = mplc(["trace", "info", f"cut{n}.mpltrace"], bad_dir, status=1)
    assert f"cut{n}.mpltrace: truncated header: the file ends after {n} bytes, inside the 16-byte" in out
    assert "bad magic" not in out
    out = mplc(["replay", "lfu.moe", "--trace", f"cut{n}.mpltrace"], bad_dir, status=1)
    assert "truncated header" in out


def test_native_magic_prefix_is_truncated_and_other_bytes_are_bad_magic(bad_dir):
    (bad_dir / "mpl5.mpltrace").write_bytes(b"MPLTR")
    assert "truncated header: the file ends after 5 bytes" in mplc(["trace", "info", "mpl5.mpltrace"], bad_dir, status=1)
    (bad_dir / "nope.mpltrace").write_bytes(b"NOPE")
    assert "not an .mpltrace file (bad magic)" in mplc(["trace", "info", "nope.mpltrace"], bad_dir, status=1)


def _native_with_header(header: dict) -> bytes:
    blob = json.dumps(header).encode()
    head = struct.pack("<8sHHI", b"MPLTRACE", 2, 0, len(blob)) + blob
    return head + struct.pack("<8sQI", b"MPLTEND\x00", 0, zlib.crc32(head))


GOOD_HEADER = {"model": "m", "num_layers": 4, "moe_layers": [1, 3], "num_experts": 8, "top_k": 2,
               "expert_bytes": 0, "source": "", "extra": {}}


@pytest.mark.parametrize("change,msg", [
    ({"num_experts": "8"}, "header field 'num_experts' must be an integer"),
    ({"top_k": 2.0}, "header field 'top_k' must be an integer"),
    ({"num_layers": 0}, "num_layers must be >= 1, got 0"),
    ({"moe_layers": [1, 4]}, "moe_layers lists layer 4, but the model has 4 decoder layers"),
    ({"top_k": 0}, "top_k must be in 1..num_experts, got 0"),
])
def test_native_header_is_validated_like_jsonl(bad_dir, change, msg):
    (bad_dir / "good.mpltrace").write_bytes(_native_with_header(GOOD_HEADER))
    assert "0 in 0 steps" in mplc(["trace", "info", "good.mpltrace"], bad_dir)
    (bad_dir / "h.mpltrace").write_bytes(_native_with_header({**GOOD_HEADER, **change}))
    assert f"h.mpltrace: {msg}" in mplc(["trace", "info", "h.mpltrace"], bad_dir, status=1)
