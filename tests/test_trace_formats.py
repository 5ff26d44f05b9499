"""Trace file formats: native .mpltrace (binary, streamable) and the original's JSONL."""

import json
import os
import random
import subprocess
import sys

import pytest

from mpl import traceio
from mpl.sim.synth import synthesize
from mpl.trace import Dispatch, Trace, TraceHeader


def _original_jsonl(path, n_steps=20, layers=(1, 2, 3), experts=64, k=6, seed=3, compact=False):
    """A trace in the original moe-policylang's JSONL layout (as we read it)."""
    rng = random.Random(seed)
    sep = (",", ":") if compact else None
    lines = [json.dumps({"model": "deepseek-ai/DeepSeek-V2-Lite", "num_experts": experts,
                         "top_k": k, "num_layers": 27, "dtype": "bfloat16"}, separators=sep)]
    for t in range(n_steps):
        for l in layers:
            e = rng.sample(range(experts), k)
            s = [rng.random() for _ in range(k)]
            lines.append(json.dumps({"t": t, "l": l, "e": e, "s": s}, separators=sep))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def test_jsonl_import_export_is_byte_identical(tmp_path):
    src = tmp_path / "orig.jsonl"
    _original_jsonl(src)
    trace = traceio.load(str(src))
    assert trace.header.moe_layers == (1, 2, 3)          # inferred from the rows
    assert trace.header.top_k == 6 and trace.header.num_experts == 64
    assert [d.layer for d in trace.dispatches[:3]] == [0, 1, 2]   # MoE-layer ordinals
    out = tmp_path / "back.jsonl"
    traceio.save(trace, str(out))
    assert out.read_bytes() == src.read_bytes()


def test_jsonl_through_native_is_lossless(tmp_path):
    src = tmp_path / "orig.jsonl"
    lines = _original_jsonl(src, compact=True)
    nat = tmp_path / "t.mpltrace"
    back = tmp_path / "back.jsonl"
    for cmd in (["convert", str(src), str(nat)], ["convert", str(nat), str(back)]):
        r = subprocess.run([sys.executable, "-m", "mpl.cli.main", "trace", *cmd],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    got = back.read_text().splitlines()
    assert [json.loads(x) for x in got] == [json.loads(x) for x in lines]   # semantically identical
    # random doubles need float64 in the native file to stay exact
    assert traceio.load(str(nat)).dispatches[0].weights == traceio.load(str(src)).dispatches[0].weights


def test_jsonl_multi_token_rows_and_no_weights(tmp_path):
    src = tmp_path / "m.jsonl"
    rows = [{"model": "m", "num_experts": 8, "top_k": 2, "moe_layers": [0, 1]},
            {"t": 0, "l": 0, "e": [[1, 2], [3, 1], [0, 7]]},
            {"t": 0, "l": 1, "e": [[4, 5]], "s": [[0.5, 0.5]]},
            {"t": 1, "l": 0, "e": [6, 2]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tr = traceio.load(str(src))
    assert tr.dispatches[0].tokens == 3 and tr.dispatches[0].distinct() == [1, 2, 3, 0, 7]
    assert tr.dispatches[0].weights is None
    out = tmp_path / "o.jsonl"
    traceio.save(tr, str(out))
    assert out.read_text() == src.read_text()   # nested single-token row kept nested


@pytest.mark.parametrize("content,msg", [
    ("", "empty file"),
    ('{"t": 0, "l": 0, "e": [1]}\n', "first line must be the header"),
    ('{"model": "m", "num_experts": 8, "top_k": 2}\n{"t": 0, "l": 0, "e": [9, 1]}\n', ":2: expert id 9"),
    ('{"model": "m", "num_experts": 8, "top_k": 2}\n{"t": 0, "l": 0}\n', ":2: dispatch row has no 'e'"),
    ('{"model": "m", "num_experts": 8, "top_k": 2}\nnot json\n', ":2: not JSON"),
    ('{"model": "m", "top_k": 2}\n', "no num_experts"),
    ('{"model": "m", "num_experts": 8, "top_k": 2}\n{"t": 0, "l": 0, "e": [1, 2], "s": [1]}\n', "differ in shape"),
])
def test_jsonl_errors_are_located(tmp_path, content, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(traceio.TraceFormatError) as e:
        traceio.load(str(p))
    assert msg in str(e.value) and "bad.jsonl" in str(e.value)


def test_native_roundtrip_all_features():
    h = TraceHeader("tiny", 4, (1, 3), 300, 2, 1234, "unit", {"k": [1, 2]})
    ds = [Dispatch(0, 0, [[299, 1], [5, 6]], [[0.25, 0.75], [0.5, 0.5]], {1: [7, 8, 9]}),
          Dispatch(0, 1, [[2, 3]]),
          Dispatch(7, 0, [[4, 0]], [[1.0, 0.0]]),
          Dispatch(8, 1, [[9, 8]], None, {0: []})]
    tr = Trace(h, ds)
    data = traceio.to_bytes(tr)
    back = traceio.from_bytes(data)
    assert back.header == h
    for a, b in zip(back.dispatches, ds):
        assert (a.step, a.layer, a.experts, a.weights) == (b.step, b.layer, b.experts, b.weights)
        assert (a.predictions or None) == (b.predictions or None) or a.predictions == {0: []}
    assert traceio.id_width(300) == 2 and traceio.id_width(256) == 1


def test_native_is_compact_and_weights_choose_smallest_exact_type():
    tr = synthesize("deepseek-v2-lite", steps=20, seed=1)
    data = traceio.to_bytes(tr)
    per = (len(data) - 200) / len(tr)
    # 10 bytes fixed + 6 one-byte ids + 6 float16 weights = 28 bytes per decode dispatch
    assert per < 30, per
    assert traceio.from_bytes(data).dispatches[5].weights == tr.dispatches[5].weights


def test_native_streams_dispatch_by_dispatch(tmp_path):
    tr = synthesize("mixtral-8x7b", steps=400, seed=2)
    p = tmp_path / "s.mpltrace"
    traceio.save(tr, str(p))
    with open(p, "rb") as f:
        h, version, crc = traceio.read_native_start(f, str(p))
        it = traceio.iter_native(f, h, str(p), chunk=64, version=version, crc=crc)   # tiny chunks
        first = [next(it) for _ in range(3)]
        assert f.tell() < os.path.getsize(p) / 10         # did not read the whole file
        rest = list(it)
    got = first + rest
    assert [(d.step, d.layer, d.experts) for d in got] == [(d.step, d.layer, d.experts) for d in tr]


def test_native_errors_are_clear(tmp_path):
    p = tmp_path / "x.mpltrace"
    p.write_bytes(b"hello")
    with pytest.raises(traceio.TraceFormatError, match="bad magic"):
        traceio.load(str(p))
    tr = synthesize("mixtral-8x7b", steps=3, seed=0)
    data = traceio.to_bytes(tr)
    p.write_bytes(data[:-3])
    with pytest.raises(traceio.TraceFormatError, match="truncated end marker"):
        traceio.load(str(p))
    p.write_bytes(data[:-25])
    with pytest.raises(traceio.TraceFormatError, match="truncated record"):
        traceio.load(str(p))
    with pytest.raises(traceio.TraceFormatError, match="unknown trace format"):
        traceio.load(str(tmp_path / "x.csv"))
    with pytest.raises(traceio.TraceFormatError, match="cannot read"):
        traceio.load(str(tmp_path / "missing.mpltrace"))


def _v1(data: bytes) -> bytes:
    """The same trace in format version 1 (no end marker)."""
    import struct
    return data[:8] + struct.pack("<H", 1) + data[10:-traceio._END.size]


def test_every_flipped_bit_and_every_cut_is_detected():
    """Version 2 ends with the record count and a CRC-32 of every byte before it: a flipped
    bit anywhere, a cut anywhere (at a record boundary too) and bytes appended are errors."""
    tr = synthesize("deepseek-v2-lite", steps=2, seed=1)
    data = traceio.to_bytes(tr)
    assert data[8:10] == b"\x02\x00" and data[-traceio._END.size:].startswith(traceio.END_MAGIC)
    for i in range(len(data)):
        for bit in (0, 5):
            b = bytearray(data)
            b[i] ^= 1 << bit
            with pytest.raises(traceio.TraceFormatError):
                traceio.from_bytes(bytes(b))
    for n in range(1, len(data) - 20):
        with pytest.raises(traceio.TraceFormatError):
            traceio.from_bytes(data[:n])
    with pytest.raises(traceio.TraceFormatError, match="data after the end marker"):
        traceio.from_bytes(data + b"\x00")
    with pytest.raises(traceio.TraceFormatError, match="checksum mismatch"):
        traceio.from_bytes(data[:-4] + bytes(4))
    assert traceio.from_bytes(data).dispatches == tr.dispatches


def test_version_1_files_are_still_read(tmp_path):
    tr = synthesize("olmoe", steps=3, seed=2)
    old = _v1(traceio.to_bytes(tr))
    assert traceio.from_bytes(old).dispatches == tr.dispatches
    p = tmp_path / "old.mpltrace"
    p.write_bytes(old)
    assert traceio.load(str(p)).dispatches == tr.dispatches
    header, it = traceio.open_stream(str(p))
    assert list(it) == tr.dispatches
    traceio.save(traceio.load(str(p)), str(tmp_path / "new.mpltrace"))   # rewritten as v2
    assert (tmp_path / "new.mpltrace").read_bytes() == traceio.to_bytes(tr)


def test_streaming_writer_needs_close_for_the_end_marker():
    import io
    tr = synthesize("olmoe", steps=2, seed=2)
    b = io.BytesIO()
    w = traceio.NativeWriter(b, tr.header)
    for d in tr.dispatches:
        w.write(d)
    with pytest.raises(traceio.TraceFormatError, match="no end marker"):
        traceio.from_bytes(b.getvalue())
    w.close()
    w.close()                                   # idempotent
    assert traceio.from_bytes(b.getvalue()).dispatches == tr.dispatches
    with pytest.raises(ValueError, match="after close"):
        w.write(tr.dispatches[0])


def test_header_only_streaming_still_reads_a_version_2_file(tmp_path):
    tr = synthesize("olmoe", steps=30, seed=2)
    p = tmp_path / "s.mpltrace"
    traceio.save(tr, str(p))
    with open(p, "rb") as f:
        h = traceio.read_native_header(f, str(p))
        assert list(traceio.iter_native(f, h, str(p), chunk=50)) == tr.dispatches
