"""Lazy trace reading (mpl.tracecols): a native file of like records read straight into
columns gives the same trace, the same pack, the same step and token counts and the same
replay as the record reader; any other file takes the record reader, and a damaged file
gets the record reader's error, whatever the records are."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given, strategies as st

from mpl import tracecols, traceio
from mpl.runtime import compiled, packing
from mpl.sim import tracepack
from mpl.runtime.backend import forced
from mpl.sim.synth import synthesize
from mpl.trace import Dispatch, Trace, TraceHeader, steps_and_tokens
from mpl.tracecols import LazyDispatches, decode_uniform
from property_profiles import prop


def _write(tmp_path, trace, name="t.mpltrace", **kw):
    p = tmp_path / name
    traceio.save(trace, str(p), **kw)
    return str(p)


def _same_everywhere(path):
    """The lazy and the eager read of ``path`` agree on everything a consumer reads."""
    eager, lazy = traceio.load(path), tracecols.load(path)
    assert isinstance(lazy.dispatches, LazyDispatches)
    E = eager.header.num_experts
    assert len(lazy) == len(eager) and lazy.header == eager.header
    assert steps_and_tokens(lazy.dispatches) == steps_and_tokens(eager.dispatches)
    pl, pe = tracepack.pack_of(lazy.dispatches, E), tracepack.pack_dispatches(eager.dispatches, E)
    for name in packing.Packed.__slots__:
        assert getattr(pl, name) == getattr(pe, name), name
    assert list(lazy.dispatches) == eager.dispatches and lazy == eager
    assert lazy.dispatches[3] == eager.dispatches[3] and lazy.dispatches[-2:] == eager.dispatches[-2:]
    back = pickle.loads(pickle.dumps(lazy))
    assert back == eager and len(back.dispatches) == len(eager)
    return eager, lazy


@pytest.mark.parametrize("preset", ["mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b", "olmoe-1b-7b"])
@pytest.mark.parametrize("weights", ["f16", "f32", "f64"])
def test_like_records_read_as_columns_equal_the_record_reader(tmp_path, preset, weights):
    _same_everywhere(_write(tmp_path, synthesize(preset, steps=7, seed=4), weights=weights))


def _custom(num_experts, k, layers=3, steps=40, *, weights=True, seed=0, dup=False):
    r = random.Random(seed)
    h = TraceHeader("custom", layers, tuple(range(layers)), num_experts, k)
    ds = []
    for s in range(steps):
        for layer in range(layers):
            ex = r.sample(range(num_experts), k)
            if dup and s == steps // 2 and layer == 1:
                ex[-1] = ex[0]                 # a repeated id in one record
            ws = [r.random() for _ in range(k)] if weights else None
            ds.append(Dispatch(s, layer, [ex], [ws] if weights else None))
    return Trace(h, ds)


def test_two_byte_ids_and_no_weights(tmp_path):
    _same_everywhere(_write(tmp_path, _custom(300, 8), name="wide.mpltrace"))
    _same_everywhere(_write(tmp_path, _custom(300, 8, weights=False), name="wide_nw.mpltrace"))
    _same_everywhere(_write(tmp_path, _custom(16, 1, weights=False), name="k1.mpltrace"))


def test_version_1_files_read_as_columns(tmp_path):
    data = traceio.to_bytes(synthesize("olmoe", steps=5, seed=2))
    import struct
    p = tmp_path / "v1.mpltrace"
    p.write_bytes(data[:8] + struct.pack("<H", 1) + data[10:-traceio._END.size])
    _same_everywhere(str(p))


@pytest.mark.parametrize("kind", ["duplicate id", "two tokens", "predictions", "different k"])
def test_unlike_records_take_the_record_reader(tmp_path, kind):
    tr = _custom(64, 4, seed=1, dup=(kind == "duplicate id"))
    if kind == "two tokens":
        d = tr.dispatches[10]
        tr.dispatches[10] = Dispatch(d.step, d.layer, d.experts * 2, d.weights * 2)
    elif kind == "predictions":
        tr.dispatches[7].predictions = {2: [1, 5]}
    elif kind == "different k":
        d = tr.dispatches[5]
        tr.dispatches[5] = Dispatch(d.step, d.layer, [d.experts[0][:3]], [d.weights[0][:3]])
    path = _write(tmp_path, tr)
    lazy, eager = tracecols.load(path), traceio.load(path)
    assert isinstance(lazy.dispatches, list) and lazy == eager    # (the record reader: a list)
    E = eager.header.num_experts
    pl, pe = tracepack.pack_trace(lazy, E), tracepack.pack_dispatches(eager.dispatches, E)
    assert all(getattr(pl, n) == getattr(pe, n) for n in packing.Packed.__slots__)


def test_a_damaged_file_gets_the_record_readers_error(tmp_path):
    tr = synthesize("deepseek-v2-lite", steps=2, seed=1)
    data = traceio.to_bytes(tr)
    p = tmp_path / "bad.mpltrace"
    start = len(data) - traceio._END.size - 2 * 52 * 28     # inside the records
    cases = [data[:-3], data[:-30], data + b"\x00", data[:-4] + bytes(4)]
    for i in list(range(start, start + 60)) + [len(data) - 12, len(data) - 6]:
        for bit in (0, 3, 7):
            b = bytearray(data)
            b[i] ^= 1 << bit
            cases.append(bytes(b))
    for case in cases:
        p.write_bytes(case)
        with pytest.raises(traceio.TraceFormatError) as eager:
            traceio.load(str(p))
        with pytest.raises(traceio.TraceFormatError) as lazy:
            tracecols.load(str(p))
        assert str(lazy.value) == str(eager.value)


def test_columns_check_what_the_record_reader_checks():
    tr = _custom(64, 4, seed=3)
    data = traceio.to_bytes(tr, weights="f16")
    with open_start(data) as (header, version, crc, raw):
        assert decode_uniform(raw, header, version, crc) is not None
        # as version 1 (no end marker, no checksum) the records alone decode ...
        raw = raw[:-traceio._END.size]
        R = 10 + 4 * (1 + 2)                   # 4 one-byte ids, 4 f16 weights
        assert decode_uniform(raw, header, 1, crc).records == len(raw) // R == len(tr)
        # ... but not with a layer or an expert outside the header, or a non-finite weight
        for field, value in ((5, 3), (10, 64), (10, 200)):
            b = bytearray(raw)
            b[field + R * 3] = value
            assert decode_uniform(bytes(b), header, 1, crc) is None, (field, value)
        import struct
        for bad in (float("inf"), float("nan")):
            b = bytearray(raw)
            struct.pack_into("<e", b, 10 + 4 + 2 + R * 2, bad)
            assert decode_uniform(bytes(b), header, 1, crc) is None


class open_start:
    """(header, version, crc, the bytes after the header) of an in-memory native file."""

    def __init__(self, data):
        import io
        self.f = io.BytesIO(data)

    def __enter__(self):
        header, version, crc = traceio.read_native_start(self.f)
        return header, version, crc, self.f.read()

    def __exit__(self, *exc):
        return False


def replays_and_sweeps_agree(path, eager):
    """Replays and a sweep of the file ``path`` (read by the replay into columns) equal those
    of ``eager``, the same trace read by the record reader."""
    import mpl
    from mpl.sim import replay
    from mpl.sim.sweep import run_sweep

    for text in ("policy a { cache { capacity = 64 eviction = lru } }",
                 "policy b { cache { capacity = 40 eviction = lfu } prefetch { strategy = history budget = 2 } }"):
        r1 = replay(mpl.loads(text), path)                     # a path is read lazily
        r2 = replay(mpl.loads(text), eager)
        assert (r1.stats, r1.sim, r1.belady, r1.trace) == (r2.stats, r2.sim, r2.belady, r2.trace)
    text = "policy s { cache { capacity = 8 } }"
    a = run_sweep(text, path, [16, 64, 200], jobs=1)
    b = run_sweep(text, eager, [16, 64, 200], jobs=1)
    assert a == b and all(p.error is None and p.belady is not None for p in a)


def tunes_agree(eager, lazy):
    """``mplc tune``'s search on a trace read into columns (``lazy``) equals the one on the
    same trace read by the record reader, without building the lazy trace's records."""
    from mpl.tune import PREDICTOR_DISPATCHES, tune

    assert len(lazy) > PREDICTOR_DISPATCHES       # (the predictors read a head of that size)
    a = tune(eager, 16, jobs=1)
    b = tune(lazy, 16, jobs=1)
    assert lazy.dispatches._list is None          # the columns were enough
    assert a.text == b.text and a.evaluated == b.evaluated
    assert [(c.describe(), c.hit_rate, c.tokens_per_s) for c in a.leaderboard] == \
        [(c.describe(), c.hit_rate, c.tokens_per_s) for c in b.leaderboard]


def test_replay_and_sweep_of_a_lazy_trace_equal_the_eager_ones(tmp_path):
    path = _write(tmp_path, synthesize("deepseek-v2-lite", steps=30, seed=6))
    replays_and_sweeps_agree(path, traceio.load(path))


def test_a_trace_is_packed_once_even_through_the_models_copy(monkeypatch):
    # replay() fills the model in (with_model copies the Trace, sharing its dispatches and
    # what is derived from them): a trace is packed once, not once per replay, held by a
    # sweep or not; a change of its dispatches packs it afresh
    import mpl
    from mpl.sim import replay

    calls = []
    real = tracepack.pack_dispatches
    monkeypatch.setattr(tracepack, "pack_dispatches", lambda d, E: calls.append(1) or real(d, E))
    tr = synthesize("deepseek-v2-lite", steps=4, seed=1)
    assert tr.header.shape is None            # each replay makes its own copy with the shape
    pol = mpl.loads("policy a { cache { capacity = 64 } }")
    with tracepack.reusing(tr):
        reports = [replay(pol, tr, belady=False).stats for _ in range(3)]
    assert len(calls) == 1 and reports[0] == reports[1] == reports[2]
    assert replay(pol, tr, belady=False).stats == reports[0] and len(calls) == 1
    tr.dispatches.append(tr.dispatches[0])    # changed: packed afresh, and the result follows
    grown = replay(pol, tr, belady=False).stats
    assert len(calls) == 2 and grown["accesses"] == reports[0]["accesses"] + 6
    tr.dispatches = list(tr.dispatches[:-1])  # replaced: packed afresh
    assert replay(pol, tr, belady=False).stats == reports[0] and len(calls) == 3
    tr.dispatches[0] = tr.dispatches[1]       # an element replaced
    replay(pol, tr, belady=False)
    assert len(calls) == 4


@pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")
@prop(60)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40),
                          st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=4), min_size=1, max_size=3),
                          st.booleans()), max_size=40),
       st.sampled_from(["plain", "int weight", "tuple row", "id out of range"]))
def test_the_compiled_packer_equals_the_python_one(rows, odd):
    """tracepack.pack_dispatches in C (the common shapes) gives the Python packer's arrays, multi
    records and weights; what it does not take (an int weight, a tuple row) falls back with
    the same result; an id out of range is the same ValueError."""
    r = random.Random(len(rows))
    ds = [Dispatch(step, layer, ex, [[round(r.random(), 3) for _ in row] for row in ex] if w else None)
          for layer, step, ex, w in rows]
    if ds and odd == "int weight" and ds[0].weights is not None:
        ds[0].weights[0][0] = 1
    if ds and odd == "tuple row":
        ds[-1].experts[0] = tuple(ds[-1].experts[0])
    if ds and odd == "id out of range":
        ds[len(ds) // 2].experts[0][0] = 16

    def packed(pure):
        try:
            if pure:
                with forced("pure"):
                    p = tracepack.pack_dispatches(ds, 16)
            else:
                p = tracepack.pack_dispatches(ds, 16)
        except ValueError as e:
            return ("error", str(e))
        return [getattr(p, n) for n in packing.Packed.__slots__]
    assert packed(False) == packed(True)


def test_a_pickled_or_copied_trace_keeps_counting_its_changes():
    import copy
    tr = synthesize("mixtral-8x7b", steps=3, seed=1)
    for other in (pickle.loads(pickle.dumps(tr)), copy.deepcopy(tr)):
        assert other == tr
        v = other.dispatches.version
        other.dispatches.append(other.dispatches[0])
        assert other.dispatches.version == v + 1
        p = tracepack.pack_trace(other, other.header.num_experts)
        assert len(p) == len(tr) + 1


@pytest.mark.parametrize("n", [0, 1, 25, 26, 27, 130, 10_000])
def test_a_lazy_head_equals_the_eager_prefix(tmp_path, n):
    """tune's trace prefixes of a lazily read trace are heads of its columns: the same
    dispatches, records and pack as the eager prefix (cut at the end of a step), read without
    building the whole trace's dispatches."""
    from mpl.trace import has_predictions, has_weights, record_list, records_of
    from mpl.tune import prefix

    path = _write(tmp_path, synthesize("deepseek-v2-lite", steps=20, seed=3))
    eager, lazy = traceio.load(path), tracecols.load(path)
    pe, pl = prefix(eager, n), prefix(lazy, n)
    assert isinstance(pl.dispatches, LazyDispatches) or pl is lazy
    assert pl.dispatches._list is None or pl is lazy        # nothing read record by record
    assert record_list(pl.dispatches) == list(records_of(pe.dispatches))
    assert len(pl) == len(pe) and list(pl.dispatches) == pe.dispatches
    E = eager.header.num_experts
    a, b = tracepack.pack_of(pl.dispatches, E), tracepack.pack_dispatches(pe.dispatches, E)
    for name in packing.Packed.__slots__:
        assert getattr(a, name) == getattr(b, name), name
    assert has_predictions(pl.dispatches) is has_predictions(pe.dispatches) is False
    assert has_weights(pl.dispatches) is has_weights(pe.dispatches) is (n > 0)
    back = pickle.loads(pickle.dumps(pl))           # a process pool's worker gets the head
    assert list(back.dispatches) == pe.dispatches


def test_tune_of_a_lazy_trace_equals_the_eager_one_without_reading_its_records(tmp_path):
    path = _write(tmp_path, synthesize("mixtral-8x7b", steps=150, seed=8))
    tunes_agree(traceio.load(path), tracecols.load(path))


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4)), max_size=60), st.booleans())
@prop(100)
def test_steps_and_tokens_from_a_pack_equal_those_of_the_dispatches(rows, shuffle):
    """A replay counts a trace's steps and tokens from the pack it made (in C when compiled):
    the same as mpl.trace.steps_and_tokens, in order or not, with several-token records."""
    r = random.Random(len(rows))
    ds = [Dispatch(s, r.randrange(3), [r.sample(range(8), 2) for _ in range(t)]) for s, t in rows]
    if not shuffle:
        ds.sort(key=lambda d: d.step)
    p = tracepack.pack_dispatches(ds, 8)
    assert packing.steps_and_tokens_of(p) == steps_and_tokens(ds)
    if compiled.available():          # the pure fallback too
        kernel, compiled.engine = compiled.engine, None
        try:
            assert packing.steps_and_tokens_of(p) == steps_and_tokens(ds)
        finally:
            compiled.engine = kernel
