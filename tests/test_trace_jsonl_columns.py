"""JSONL traces read into columns (mpl.tracecols.load_jsonl, the compiled row reader
``_engine.jsonl_rows``): a file of one-token rows alike gives the same trace, the same pack, the
same replay as the Python reader (mpl.traceio.load_jsonl), with every weight the same double
bit for bit; any other file -- and any file that is not a trace -- gets exactly the Python
reader's trace or its located error."""

from __future__ import annotations

import decimal
import json
import math
import pickle
import random
import struct

import pytest
from hypothesis import example, given, strategies as st

from mpl import tracecols, traceio
from mpl.runtime import compiled, packing
from mpl.sim import tracepack
from mpl.runtime.backend import forced
from mpl.sim.synth import synthesize
from mpl.tracecols import JsonlDispatches
from property_profiles import prop
from test_trace_columns import replays_and_sweeps_agree, tunes_agree

pytestmark = pytest.mark.skipif(compiled.kernel("jsonl_rows") is None,
                                reason="the compiled engine is not built or not in use")

HEADER = {"model": "m", "num_layers": 4, "moe_layers": [1, 2, 3], "num_experts": 16, "top_k": 3}


def _bits(ws):
    return None if ws is None else [[struct.pack("<d", w) for w in row] for row in ws]


def _outcome(load, path):
    try:
        t = load(path)
    except traceio.TraceFormatError as e:
        return "error", str(e)
    return "trace", (t.header, [(d.step, d.layer, d.experts, _bits(d.weights), d.predictions)
                                for d in t.dispatches])


def _same(path) -> bool:
    """The column read and the Python read of ``path`` agree; True when the columns were
    taken (the pack of the columns then equals the Python pack of the Python trace)."""
    got, want = _outcome(tracecols.load, path), _outcome(traceio.load_jsonl, path)
    assert got == want
    if got[0] == "error":
        return False
    lazy, eager = tracecols.load(path), traceio.load_jsonl(path)
    if not isinstance(lazy.dispatches, JsonlDispatches):
        return False
    E = eager.header.num_experts
    pl, pe = tracepack.pack_of(lazy.dispatches, E), tracepack.pack_dispatches(eager.dispatches, E)
    for name in packing.Packed.__slots__:
        if name == "weights" and pe.weights is not None:
            assert [struct.pack("<d", w) for w in pl.weights] == \
                [struct.pack("<d", w) for w in pe.weights]
        else:
            assert getattr(pl, name) == getattr(pe, name), name
    return True


def _write(tmp_path, lines, name="t.jsonl", *, raw=False):
    p = tmp_path / name
    if raw:
        p.write_bytes(lines)
    else:
        p.write_text("".join(line + "\n" for line in lines))
    return str(p)


def _rows(rows, header=HEADER):
    return [json.dumps(header)] + [json.dumps(r) for r in rows]


@pytest.mark.parametrize("preset", ["mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b", "olmoe-1b-7b"])
@pytest.mark.parametrize("weights", [True, False])
def test_converted_traces_read_as_columns_equal_the_python_reader(tmp_path, preset, weights):
    trace = synthesize(preset, steps=9, seed=3)
    if not weights:
        for d in trace.dispatches:
            d.weights = None
    path = str(tmp_path / "t.jsonl")
    traceio.save(trace, path)
    assert _same(path)
    lazy = tracecols.load(path)
    assert lazy == traceio.load_jsonl(path)
    assert lazy.dispatches[5] == trace.dispatches[5] and len(lazy) == len(trace)
    back = pickle.loads(pickle.dumps(lazy))
    assert isinstance(back.dispatches, JsonlDispatches) and back == lazy
    head = lazy.dispatches.head(40)
    assert list(head) == list(trace.dispatches[:40])


def test_replay_sweep_and_tune_of_a_column_trace_equal_those_of_the_python_read(tmp_path):
    path = str(tmp_path / "t.jsonl")
    traceio.save(synthesize("mixtral-8x7b", steps=150, seed=8), path)
    eager = traceio.load_jsonl(path)
    replays_and_sweeps_agree(path, eager)
    lazy = tracecols.load(path)
    assert isinstance(lazy.dispatches, JsonlDispatches)
    tunes_agree(eager, lazy)


def test_the_column_path_is_the_one_taken_for_the_usual_rows(tmp_path):
    rows = [{"t": s, "l": 1 + s % 3, "e": [s % 16, (s + 5) % 16], "s": [0.5, 0.25]}
            for s in range(30)]
    assert _same(_write(tmp_path, _rows(rows)))
    # keys in another order, spaces, tabs, CRLF line ends, blank lines between rows, a BOM,
    # weights written as integers, exponents and negative zero
    text = (b"\xef\xbb\xbf" + json.dumps(HEADER).encode() + b"\r\n"
            + b'{ "e" :[3 ,\t4], "l":1,"t":0 ,"s":[1, 2.5e-1]}\r\n\r\n   \n'
            + b'{"t":0,"l":2,"e":[0,15],"s":[-0.0,0]}\n'
            + b'{"s":[1E2,-0],"t":1,"l":3,"e":[1,2]}')
    assert _same(_write(tmp_path, text, raw=True))
    # null weights in every row
    rows = [{"t": s, "l": 2, "e": [s % 16], "s": None} for s in range(5)]
    assert _same(_write(tmp_path, _rows(rows)))
    # header fields inferred from the rows
    assert _same(_write(tmp_path, _rows(rows, {"num_experts": 16})))
    assert _same(_write(tmp_path, _rows(rows, {"num_experts": 16, "num_layers": 9})))


NOT_TAKEN = {
    "several tokens": {"t": 0, "l": 1, "e": [[1, 2], [3, 4]]},
    "one nested token": {"t": 0, "l": 1, "e": [[1, 2]]},
    "predictions": {"t": 0, "l": 1, "e": [1, 2], "p": {"2": [3]}},
    "a repeated id": {"t": 0, "l": 1, "e": [1, 1]},
    "fewer ids": {"t": 0, "l": 1, "e": [1]},
    "weights in one row only": {"t": 0, "l": 1, "e": [1, 2], "s": [0.5, 0.5]},
    "a long integer weight": {"t": 0, "l": 1, "e": [1, 2], "s": [12345678901234567890, 1]},
}


@pytest.mark.parametrize("what", sorted(NOT_TAKEN))
def test_rows_the_columns_do_not_hold_take_the_python_reader(tmp_path, what):
    rows = [{"t": 0, "l": 1, "e": [5, 6]}, NOT_TAKEN[what], {"t": 1, "l": 2, "e": [7, 8]}]
    assert not _same(_write(tmp_path, _rows(rows)))


BAD_ROWS = [
    '{"t": -1, "l": 1, "e": [1, 2]}', '{"t": 1.0, "l": 1, "e": [1, 2]}',
    '{"t": 4294967296, "l": 1, "e": [1, 2]}', '{"t": 01, "l": 1, "e": [1, 2]}',
    '{"t": true, "l": 1, "e": [1, 2]}', '{"t": 0, "l": 65536, "e": [1, 2]}',
    '{"t": 0, "l": 0, "e": [1, 2]}', '{"t": 0, "l": 7, "e": [1, 2]}',
    '{"t": 0, "l": 1, "e": [1, 16]}', '{"t": 0, "l": 1, "e": [1, 2, 3, 4]}',
    '{"t": 0, "l": 1, "e": []}', '{"t": 0, "l": 1, "e": [1, "2"]}',
    '{"t": 0, "l": 1, "e": [1, 2], "s": [0.5]}', '{"t": 0, "l": 1, "e": [1, 2], "s": [1e400, 1]}',
    '{"t": 0, "l": 1, "e": [1, 2], "s": [NaN, 1]}', '{"t": 0, "l": 1, "e": [1, 2], "s": [true, 1]}',
    '{"t": 0, "l": 1, "e": [1, 2], "x": 1}', '{"t": 0, "l": 1}', '{"t": 0, "l": 1, "e": [1, 2]} x',
    '{"t": 0, "l": 1, "e": [1, 2],}', '{"t": 0, "l": 1, "e": [1, 2,]}', '[1, 2]',
    '{"t": 0, "t": 1, "l": 1, "e": [1, 2]}', '{"\\u0074": 0, "l": 1, "e": [1, 2]}',
    '{"t": 0, "l": 1, "e": [1, 2], "s": [.5, 1]}', '{"t": 0, "l": 1, "e": [1, 2], "s": [+1, 1]}',
    '{"t": 0, "l": 1, "e": [1, 2], "s": [1., 1]}', '{"t": 0, "l": 1, "e": [1, 2], "s": [1e, 1]}',
    '{"t": 0, "l": 1, "e": [1, 2]}\x00', '{"t": 0, "l": 1, "e": [1, 2], "s": ["\u00e9", 1]}',
    '{"t": 0, "l": 1, "e": [1, 2], "s": [-, 1]}', '\x0c',
]


@pytest.mark.parametrize("row", BAD_ROWS)
def test_a_row_the_columns_refuse_gets_the_python_readers_answer(tmp_path, row):
    lines = _rows([{"t": 0, "l": 1, "e": [5, 6]}]) + [row, '{"t": 2, "l": 3, "e": [9, 10]}']
    assert not _same(_write(tmp_path, lines))


@pytest.mark.parametrize("header", [
    {"num_experts": 16, "top_k": 1}, {"num_experts": 4}, {"num_experts": 16, "num_layers": 2},
    {"num_experts": 16, "moe_layers": [1]}, {"num_experts": 16, "moe_layers": []},
    {"top_k": 2}, {"num_experts": 0}, {"num_experts": 16, "top_k": 0},
])
def test_a_header_the_rows_do_not_fit_gets_the_python_readers_answer(tmp_path, header):
    rows = [{"t": s, "l": 1 + s % 3, "e": [s % 16, (s + 1) % 16]} for s in range(6)]
    assert not _same(_write(tmp_path, _rows(rows, header)))


@pytest.mark.parametrize("text", [
    b"", b"\n\n", b'{"num_experts": 16}', b'{"num_experts": 16}\n',
    b'\n{"num_experts": 16}\n{"t": 0, "l": 1, "e": [1]}\n', b"\xff\xfe\n{}\n",
    b'{"t": 0, "l": 1, "e": [1]}\n{"t": 0, "l": 1, "e": [1]}\n',
])
def test_files_that_are_no_usual_trace_get_the_python_readers_answer(tmp_path, text):
    _same(_write(tmp_path, text, raw=True))


def test_a_line_at_the_length_limit_takes_the_python_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(traceio, "MAX_JSONL_LINE_BYTES", 64)
    rows = [{"t": 0, "l": 1, "e": [1, 2]}, {"t": 1, "l": 1, "e": [1, 2], "s": [0.25, 0.5]}]
    short = _write(tmp_path, _rows([rows[0]], {"num_experts": 16}))
    assert _same(short)
    assert not _same(_write(tmp_path, _rows(rows, {"num_experts": 16})))


def test_a_nul_byte_or_an_endless_line_after_many_rows_gets_the_python_readers_error(
        tmp_path, monkeypatch):
    monkeypatch.setattr(tracecols, "_JSONL_PIECE", 4096)       # the file is read in many pieces
    good = _rows([{"t": s, "l": 1 + s % 3, "e": [s % 16, (s + 7) % 16], "s": [0.5, 0.25]}
                  for s in range(2000)])
    path = _write(tmp_path, good + ["\x00" * 100] + good[1:])
    assert not _same(path)
    with open(path, "rb") as f:           # the whole file is not read: it stops at the piece
        assert tracecols._read_text_file(f, path) is None and f.tell() < len(open(path, "rb").read())
    with pytest.raises(traceio.TraceFormatError, match=r":2002: a NUL byte"):
        tracecols.load(path)
    monkeypatch.setattr(traceio, "MAX_JSONL_LINE_BYTES", 5000)
    for long in (" " * 10000, " " * 5001):                      # a line past the limit
        path = _write(tmp_path, good + [long] + good[1:], raw=False)
        assert not _same(path)
        with open(path, "rb") as f:    # (reading stops where a piece ends in the long line)
            assert (tracecols._read_text_file(f, path) is None) == (len(long) > 4096 + 5000)
    with open(_write(tmp_path, good), "rb") as f:
        assert tracecols._read_text_file(f, "t.jsonl") == "".join(x + "\n" for x in good).encode()


def test_a_pipe_takes_the_python_readers_bounded_reads(tmp_path):
    import os
    import threading

    fifo = str(tmp_path / "p.jsonl")
    os.mkfifo(fifo)
    text = "".join(line + "\n" for line in _rows([{"t": 0, "l": 1, "e": [1, 2]}]))

    def feed():
        with open(fifo, "w") as f:
            f.write(text)
    th = threading.Thread(target=feed)
    th.start()
    t = tracecols.load(fifo)
    th.join()
    assert not isinstance(t.dispatches, JsonlDispatches) and len(t) == 1


# ------------------------------------------------------------------ property
_WS = st.sampled_from(["", " ", "  ", "\t", "\r", " \t"])
_NUM = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda x: f"{x:.9e}"),
    st.integers(-10 ** 6, 10 ** 6).map(str))
_EDGE = st.one_of(st.integers(-10 ** 18, 10 ** 18).map(str), st.sampled_from(["-0", "0", "-0.0", "1E5", "1e-400", "1e400", "2.5E+3", "01", "1.", ".5",
                         "NaN", "Infinity", "-Infinity", "true", "null", '"1"', "0e0", "-1e-0"]))
_INT = st.one_of(st.integers(0, 20).map(str),
                 st.sampled_from(["-1", "01", "1.0", "1e1", "4294967295", "4294967296",
                                  "65535", "65536", "true", "null", '"3"', "99999999999"]))


def _row(rnd, draw, k, weights):
    """A dispatch row's text: mostly one the column reader takes, sometimes not (``rnd``
    decides which, ``draw`` draws the values)."""
    def num():
        return draw(_EDGE if rnd.random() < 0.05 else _NUM)
    if rnd.random() < 0.95:
        ids = rnd.sample(range(16), k)
    else:
        ids = [rnd.randrange(18) for _ in range(rnd.randrange(k + 2))]
    ws = lambda: rnd.choice(["", " ", "  ", "\t", "\r", " \t"])      # noqa: E731
    e = "[" + ",".join(ws() + str(x) for x in ids) + ws() + "]"
    if rnd.random() < 0.05:
        e = "[" + e + "]"
    members = [('"t"', draw(_INT) if rnd.random() < 0.02 else str(rnd.randrange(10))),
               ('"l"', draw(_INT) if rnd.random() < 0.02 else str(rnd.randrange(1, 4))),
               ('"e"', e)]
    sw = weights if rnd.random() < 0.99 else rnd.randrange(3)
    if sw == 1:
        members.append(('"s"', "null"))
    elif sw == 2:
        n = len(ids) if rnd.random() < 0.98 else rnd.randrange(5)
        members.append(('"s"', "[" + ",".join(ws() + num() for _ in range(n)) + "]"))
    extra = rnd.random()
    if extra < 0.02:
        members.append(('"p"', '{"2": [1]}'))
    elif extra < 0.04:
        members.append(('"x"', "1"))
    elif extra < 0.06:
        members.append(members[0])
    rnd.shuffle(members)
    body = ",".join(ws() + key + ws() + ":" + ws() + value + ws() for key, value in members)
    return "{" + body + "}" + ws()


@st.composite
def _file(draw):
    rnd = draw(st.randoms(use_true_random=True))
    k = rnd.randrange(1, 4)
    header = dict(num_experts=16)
    for name, value in (("top_k", k), ("num_layers", 4), ("moe_layers", [1, 2, 3])):
        if rnd.random() < 0.5:
            header[name] = value
    weights = rnd.randrange(3)          # absent, null, a list: mostly one kind per file
    lines = [json.dumps(header)] + [_row(rnd, draw, k, weights) for _ in range(rnd.choice((0, 1, 2, 3, 5, 8, 8, 8)))]
    ends = [rnd.choice(["\n", "\n", "\r\n", "\n\n", "\n \n"]) for _ in lines]
    text = "".join(a + b for a, b in zip(lines, ends)).encode()
    if rnd.random() < 0.2:              # one byte changed
        at = rnd.randrange(len(text))
        text = text[:at] + bytes([rnd.choice(b'0 -.e,[]{}":\x00\xc3\n')]) + text[at + 1:]
    return text


@prop(300)
@given(_file())
@example(b'{"num_experts": 16}\n{"t": 0, "l": 1, "e": [1, 2], "s": [-0, 1]}\n')
@example(b'{"num_experts": 16}\n{"t": 0, "l": 1, "e": [1, 2], "s": [1e-400, 5e-324]}\n')
@example(b'{"num_experts": 16}\n{"t": 0, "l": 1, "e": [1, 2], "s": [999999999999999, 0.1]}\n')
def test_any_file_reads_the_same_by_columns_and_by_the_python_reader(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("j") / "t.jsonl"
    path.write_bytes(text)
    _same(str(path))


def test_the_pure_backend_reads_jsonl_with_the_python_reader(tmp_path):
    path = _write(tmp_path, _rows([{"t": 0, "l": 1, "e": [1, 2]}]))
    with forced("pure"):
        t = tracecols.load(path)
    assert not isinstance(t.dispatches, JsonlDispatches) and t == traceio.load_jsonl(path)


def test_bad_calls_of_the_row_reader_are_exceptions():
    rows = compiled.kernel("jsonl_rows")
    data = b'{"t": 0, "l": 1, "e": [1]}\n'
    assert rows(data, 0, 1 << 20) is not None
    with pytest.raises(ValueError):
        rows(data, -1, 100)
    with pytest.raises(ValueError):
        rows(data, len(data) + 1, 100)
    with pytest.raises(ValueError):
        rows(data, 0, 0)
    with pytest.raises(TypeError):
        rows("text", 0, 100)
    assert rows(data, len(data), 100) is None          # no rows: not taken
    assert rows(data, 0, len(data)) is None             # a line at the limit: not taken
    rnd = random.Random(5)
    for _ in range(300):                                # random bytes never crash it
        blob = bytes(rnd.randrange(256) for _ in range(rnd.randrange(60)))
        got = rows(blob, 0, 1 << 20)
        assert got is None or isinstance(got, tuple)


def _literals(rnd, n):
    """Decimal literals of every kind the conversion meets: few and many digits, leading and
    trailing zeros, exponents around the exact fast path's limits, subnormals, halfway cases."""
    out = []
    for _ in range(n):
        kind = rnd.randrange(6)
        if kind == 0:
            out.append(repr(rnd.uniform(-1, 1) * 10 ** rnd.randrange(-30, 30)))
        elif kind == 1:                 # float16 / float32 weights as written by repr
            out.append(repr(float(struct.unpack("<e", struct.pack("<e", rnd.random()))[0])))
        elif kind == 2:
            digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randrange(1, 22)))
            point = rnd.randrange(len(digits) + 1)
            lit = (digits[:point] or "0").lstrip("0") or "0"
            out.append(lit + "." + (digits[point:] or "0") + rnd.choice(["", f"e{rnd.randrange(-30, 30)}",
                                                                         f"E+{rnd.randrange(25)}"]))
        elif kind == 3:                 # m * 10^e at the edges of the exact range
            m = rnd.choice([1, 9, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 1, 9007199254740993,
                            rnd.randrange(1, 2 ** 60)])
            out.append(f"{m}e{rnd.choice([-23, -22, -21, 0, 21, 22, 23, rnd.randrange(-40, 40)])}")
        elif kind == 4:                 # subnormals and the smallest normals
            out.append(repr(rnd.choice([5e-324, 2.2250738585072014e-308, 1e-310]) * rnd.randrange(1, 9)))
        else:                           # halfway between two doubles, written exactly
            b = rnd.uniform(0.5, 1)
            with decimal.localcontext() as ctx:
                ctx.prec = 200
                mid = (decimal.Decimal(b) + decimal.Decimal(math.nextafter(b, 2))) / 2
            out.append(format(mid, "f"))
    return out


def test_weights_convert_to_the_doubles_float_gives(tmp_path):
    rnd = random.Random(11)
    lits = _literals(rnd, 8000)
    lines = [json.dumps({"num_experts": 16, "top_k": 4})]
    for i in range(0, len(lits) - 3, 4):
        lines.append('{"t": %d, "l": 1, "e": [0, 1, 2, 3], "s": [%s]}' % (i, ", ".join(lits[i:i + 4])))
    path = _write(tmp_path, lines)
    assert _same(path)
    cols = tracecols.load(path).dispatches.columns
    want = [float(json.loads(x)) for x in lits[:len(cols.weights)]]
    assert [struct.pack("<d", w) for w in cols.weights] == [struct.pack("<d", w) for w in want]


# ------------------------------------------------------------------ written from columns
def _written(trace, path, **kw):
    traceio.save_native(trace, path, **kw)
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("weights", ["auto", "f16", "f32", "f64"])
@pytest.mark.parametrize("source", ["jsonl", "native"])
def test_a_column_trace_is_written_as_the_record_writer_writes_it(tmp_path, weights, source):
    for preset, kind in (("deepseek-v2-lite", "f16"), ("qwen3-30b-a3b", "f32"), ("mixtral-8x7b", "f64"),
                         ("olmoe-1b-7b", None)):
        trace = synthesize(preset, steps=6, seed=2)
        r = random.Random(1)
        for d in trace.dispatches:      # weights that need f16, f32 or f64 to be exact
            if kind is None:
                d.weights = None
            elif kind != "f16":
                d.weights = [[float(struct.unpack("<f", struct.pack("<f", r.random()))[0])
                              if kind == "f32" else r.random() for _ in row] for row in d.weights]
        path = str(tmp_path / ("t.jsonl" if source == "jsonl" else "t.mpltrace"))
        traceio.save(trace, path, **({} if source == "jsonl" else {"weights": "f64"}))
        lazy, eager = tracecols.load(path), traceio.load(path)
        assert hasattr(lazy.dispatches, "columns")
        got = _written(lazy, str(tmp_path / "a.mpltrace"), weights=weights)
        want = _written(eager, str(tmp_path / "b.mpltrace"), weights=weights)
        assert got == want, (preset, weights)
        assert lazy.dispatches._list is None               # written without Dispatch objects
        if weights in ("auto", "f64"):   # a type that holds every weight: the same trace back
            assert traceio.load(str(tmp_path / "a.mpltrace")).dispatches == eager.dispatches


def test_two_byte_ids_and_wide_records_write_as_the_record_writer(tmp_path):
    h = {"num_experts": 300, "top_k": 3}
    path = _write(tmp_path, _rows([{"t": s, "l": 1, "e": [s, 299 - s, 150]} for s in range(20)], h))
    lazy, eager = tracecols.load(path), traceio.load(path)
    assert _written(lazy, str(tmp_path / "a.mpltrace")) == _written(eager, str(tmp_path / "b.mpltrace"))
    wide = _write(tmp_path, _rows([{"t": 0, "l": 1, "e": list(range(256))}], {"num_experts": 300}))
    lazy, eager = tracecols.load(wide), traceio.load(wide)
    assert isinstance(lazy.dispatches, JsonlDispatches)
    for t in (lazy, eager):             # more experts per record than the format holds
        with pytest.raises(ValueError, match="too many tokens"):
            traceio.save_native(t, str(tmp_path / "w.mpltrace"))
    with pytest.raises(ValueError, match="weights must be one of"):
        traceio.save_native(lazy, str(tmp_path / "w.mpltrace"), weights="f8")


def test_mplc_trace_convert_writes_the_same_file_from_columns(tmp_path):
    import subprocess
    import sys
    path = str(tmp_path / "t.jsonl")
    traceio.save(synthesize("deepseek-v2-lite", steps=12, seed=5), path)
    out = str(tmp_path / "c.mpltrace")
    p = subprocess.run([sys.executable, "-m", "mpl", "trace", "convert", path, out],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "converted" in p.stdout and "12 steps" in p.stdout
    assert open(out, "rb").read() == _written(traceio.load(path), str(tmp_path / "b.mpltrace"))


@pytest.mark.parametrize("prompt", [0, 5])
@pytest.mark.parametrize("ext", ["jsonl", "mpltrace"])
def test_mplc_trace_info_from_columns_equals_the_record_readers(tmp_path, prompt, ext):
    from mpl.cli.cmd_trace import details
    path = str(tmp_path / f"t.{ext}")
    traceio.save(synthesize("qwen3-30b-a3b", steps=8, seed=3, prompt_tokens=prompt), path)
    lazy, version = tracecols.load_versioned(path)
    assert hasattr(lazy.dispatches, "columns") == (prompt == 0)     # prefill rows: the reader
    eager, want_version = traceio.load_versioned(path)
    assert version == want_version
    got, want = details(lazy, path, version), details(eager, path, want_version)
    assert got == want and (got["prefill_dispatches"] > 0) == (prompt > 0)
