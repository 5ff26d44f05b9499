"""A native trace's records as columns, without a Python object per dispatch.

A replay, a sweep or a tune only needs a trace's records as arrays (the compiled engine's
replay input, :class:`mpl.runtime.packing.Packed`), its step and token counts, and its length; building
a :class:`mpl.trace.Dispatch` (and its lists) for each of a million records costs several
seconds, far more than the kernel's replay. :func:`decode_uniform` reads the records of a
``.mpltrace`` (docs/traces.md) straight into columns when they are all alike (one token each,
the same number of experts, the same weight encoding, no predictions: what the recorder and
the synthesiser write for decode steps), with C-speed byte slicing (a record has a fixed size,
so each field is every ``R``-th byte from its offset), and checks everything the record
reader checks (layers and expert ids in range, finite weights, the end marker's count and
checksum). Anything else (mixed records, a damaged file) returns None: the record reader
(:func:`mpl.traceio.iter_native`) then reads the file and reports any problem where it lies.

:class:`LazyDispatches` is a trace's dispatch sequence backed by the file's bytes and those
columns: its length, step and token counts, and pack come from the columns; the Dispatch
objects are built (by the record reader) only when something iterates or indexes them (the
Belady optimum, a pure-path replay). :func:`load` returns a Trace holding one (the replay,
sweep and tune commands read traces so); the format itself is mpl.traceio's.
"""

from __future__ import annotations

import gc
import io
import os
import stat
import struct
import sys
import zlib
from array import array
from collections.abc import Sequence
from itertools import islice
from math import isfinite

from mpl import traceio
from mpl.runtime import compiled
from mpl.trace import Trace

#: a record's fixed part (traceio._REC: u8 rflags, u32 step, u16 layer, u16 tokens, u8 k):
#: its size and each field's offset
_HEAD = traceio._REC.size
_OFF_STEP, _OFF_LAYER, _OFF_TOKENS, _OFF_K = (struct.calcsize(traceio._REC.format[:i])
                                              for i in (2, 3, 4, 5))
#: f64 weights above this magnitude take the record reader (its per-record finite-sum check)
_HUGE = 1e300


def load(path: str) -> Trace:
    """:func:`mpl.traceio.load` for a replay: the same trace (the same errors), a native file
    of like records held as its bytes and columns (:class:`LazyDispatches`)."""
    return load_versioned(path)[0]


def load_versioned(path: str) -> tuple[Trace, int | None]:
    """:func:`load`, plus the native format version of the file (None for JSONL), as
    :func:`mpl.traceio.load_versioned` gives it."""
    if traceio.kind_of(path) == "jsonl":
        return load_jsonl(path), None
    with traceio.open_native(path) as f:
        header, version, crc = traceio.read_native_start(f, path)
        start = f.tell()
        raw = f.read()
        cols = decode_uniform(raw, header, version, crc)
        if cols is None:         # mixed records or a damaged file: the record reader
            f.seek(start)
            return Trace(header, list(traceio.iter_native(f, header, path, version=version,
                                                          crc=crc))), version
    return Trace(header, LazyDispatches(raw, header, path, version, crc, cols, start)), version


def load_jsonl(path: str) -> Trace:
    """:func:`mpl.traceio.load_jsonl` for a replay: the same trace (the same errors), a file
    of one-token rows alike (what the original and ``mplc trace convert`` write for decode
    steps) read by the compiled row reader straight into columns (:class:`JsonlDispatches`:
    the Dispatch objects are built from the kept bytes only when something iterates them).
    Any other file, a row the compiled reader does not take, or any doubt -- a header it
    refuses, a layer or expert id out of range -- and the pure backend: the Python reader,
    which reports any problem where it lies."""
    rows = compiled.kernel("jsonl_rows")
    if rows is None:
        return traceio.load_jsonl(path)
    with traceio.open_jsonl(path) as f:
        try:
            regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
        except OSError:
            regular = False
        raw = _read_text_file(f, path) if regular else None
        if raw is None:        # a pipe, a device, a binary file, an endless line: the Python
            if regular:        # reader's bounded line reads and its errors
                f.seek(0)
            return traceio.read_jsonl(f, path)
    got = _jsonl_columns(raw, path, rows)
    if got is None:
        return traceio.read_jsonl(io.BytesIO(raw), path)
    header, cols = got
    return Trace(header, JsonlDispatches(raw, header, path, cols))


#: the pieces a JSONL file is read in for the column reader
_JSONL_PIECE = 1 << 22


def _read_text_file(f, path: str) -> bytearray | None:
    """The whole of a regular file opened for the column reader, or None as soon as it holds
    a NUL byte or a line of MAX_JSONL_LINE_BYTES or more (a binary file, ``/dev/zero``'s
    like, a line that never ends: the Python reader then stops at the line, with its error,
    instead of reading the whole file)."""
    limit = traceio.MAX_JSONL_LINE_BYTES
    raw = bytearray()
    last_nl = -1
    try:
        while True:
            piece = f.read(_JSONL_PIECE)
            if not piece:
                return raw
            if b"\x00" in piece:
                return None
            at = piece.rfind(b"\n")
            if at >= 0:
                last_nl = len(raw) + at
            raw += piece
            if len(raw) - 1 - last_nl >= limit:
                return None
    except OSError as e:
        raise traceio.TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None


def _jsonl_columns(raw: bytes | bytearray, path: str, rows):
    """(header, Columns) of a JSONL trace's bytes by the compiled row reader ``rows``, or
    None where the Python reader must read it (it then raises any error)."""
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    nl = raw.find(b"\n", bom)
    first = raw[bom:] if nl < 0 else raw[bom:nl + 1]
    if nl < 0 or len(first) >= traceio.MAX_JSONL_LINE_BYTES:
        return None
    try:
        obj, text = traceio._jsonl_object(first, path, 1)
        if obj is None:                    # blank lines before the header: rare, the reader's
            return None
        header, given, hwhere = traceio.jsonl_header_line(obj, text, path, 1)
    except traceio.TraceFormatError:
        return None
    got = rows(raw, nl + 1, traceio.MAX_JSONL_LINE_BYTES)
    if got is None:
        return None
    b_layers, b_experts, b_weights, b_steps, k = got
    layers = _le("i", b_layers)
    if "moe_layers" not in given and "num_layers" in given and max(layers) >= header.num_layers:
        return None
    try:
        traceio.complete_jsonl_header(header, given, hwhere, set(layers), k)
    except traceio.TraceFormatError:
        return None
    moe = header.moe_layers
    if k > header.top_k or max(layers) > max(moe):
        return None
    ordinal = [-1] * (max(moe) + 1)
    for i, lid in enumerate(moe):
        ordinal[lid] = i
    layers = array("i", map(ordinal.__getitem__, layers))
    experts = _le("i", b_experts)
    if min(layers) < 0 or max(experts) >= header.num_experts:
        return None
    weights = _le("d", b_weights) if b_weights is not None else None
    return header, Columns(layers, k, experts, weights, _le("q", b_steps), header.num_experts)


class Columns:
    """The arrays :class:`mpl.runtime.packing.Packed` holds (the same names), for one-token
    records: ``offs`` every ``k``, ``tokens`` all 1, no ``multi``."""

    __slots__ = ("layers", "offs", "experts", "weights", "steps", "tokens", "multi",
                 "weights_mixed", "records", "num_experts")

    def __init__(self, layers, k, experts, weights, steps, num_experts):
        n = len(layers)
        self.layers = layers
        self.offs = array("i", range(0, k * n + 1, k)) if k else array("i", bytes(4 * (n + 1)))
        self.experts = experts
        self.weights = weights
        self.steps = steps
        self.tokens = array("i", [1]) * n
        self.multi: list = []
        self.weights_mixed = False
        self.records = n
        self.num_experts = num_experts

    @property
    def k(self) -> int:
        """Experts per record (all alike; 0 without records)."""
        return self.offs[1] - self.offs[0] if self.records else 0


def _le(fmt: str, data: bytes | bytearray) -> array:
    a = array(fmt)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _widen(data: bytes | bytearray, width: int, fmt: str) -> array:
    """Little-endian unsigned ints of ``width`` bytes as an array of the wider signed
    ``fmt`` ("i" or "q"), by placing the bytes into zeroed wider lanes (C-speed slicing)."""
    to = array(fmt).itemsize
    out = bytearray(len(data) // width * to)
    for b in range(width):
        out[b::to] = data[b::width]
    return _le(fmt, out)


def _field(raw, n: int, R: int, off: int, width: int, count: int = 1) -> bytearray:
    """``count`` consecutive little-endian fields of ``width`` bytes at ``off`` in each of
    ``n`` records of ``R`` bytes, as one buffer (record-major)."""
    span = width * count
    out = bytearray(n * span)
    for b in range(span):
        out[b::span] = raw[off + b: off + b + (n - 1) * R + 1: R]
    return out


def _bytes_le(a: array) -> bytes:
    """An array's items as little-endian bytes."""
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _narrow(data: bytes, width: int, to: int) -> bytes:
    """The low ``to`` bytes of each little-endian ``width``-byte item of ``data``."""
    if to == width:
        return data
    out = bytearray(len(data) // width * to)
    for b in range(to):
        out[b::to] = data[b::width]
    return bytes(out)


def _put(out: bytearray, R: int, off: int, span: int, data: bytes, stride: int) -> None:
    """Into each of the records of ``R`` bytes in ``out``, at ``off``, the first ``span``
    bytes of each ``stride``-byte item of ``data`` (one item per record): the inverse of
    :func:`_field`."""
    n = len(out) // R
    for b in range(span):
        out[off + b: off + b + (n - 1) * R + 1: R] = data[b::stride]


def _exact_in(weights: array, code: str) -> bool:
    """traceio.weights_exact_in for the columns' weights: every weight the same after a
    round trip through the float type ``code`` (out of its range: not exact)."""
    fmt = traceio._WFMT[traceio._WCODE[code]]
    try:
        packed = struct.pack(f"<{len(weights)}{fmt}", *weights)
    except OverflowError:
        return False
    return array("d", struct.unpack(f"<{len(weights)}{fmt}", packed)) == weights


def _distinct_rows(ids, n: int, k: int, w: int) -> bool:
    """Whether every record's ``k`` ids (``w`` bytes each, ``ids`` record-major) are
    distinct. Compares id columns pairwise as big integers: a lane of ``a ^ b`` is zero
    exactly where two ids are equal, and ``(x - ONES) & ~x & HIGHS`` is non-zero exactly
    when some lane of ``x`` is zero (the classic zero-byte test, exact for "any")."""
    if k < 2:
        return True
    span = k * w
    cols = []
    for j in range(k):
        col = bytearray(n * w)
        for b in range(w):
            col[b::w] = ids[j * w + b::span]
        cols.append(int.from_bytes(col, "little"))
    one = (1).to_bytes(w, "little")
    ones = int.from_bytes(one * n, "little")
    highs = ones << (8 * w - 1)
    for j in range(k):
        a = cols[j]
        for j2 in range(j + 1, k):
            x = a ^ cols[j2]
            if (x - ones) & ~x & highs:
                return False
    return True


def decode_uniform(raw: bytes, header, version: int, crc: int) -> Columns | None:
    """The columns of the records in ``raw`` (the file's bytes after the header; ``crc``
    the CRC-32 of the header bytes, ``version`` the format version), or None when the
    records are not all alike or anything does not check (the record reader decides)."""
    size = len(raw)
    if size < _HEAD:
        return None
    rflags, k = raw[0], raw[_OFF_K]
    if rflags & ~0x03 or k < 1 or k > header.top_k:      # predictions, unknown flags, no ids
        return None
    w = traceio.id_width(header.num_experts)
    wcode = rflags & 3
    wsize = traceio._WSIZE[wcode] if wcode else 0
    R = _HEAD + k * (w + wsize)
    body = size - traceio._END.size if version >= 2 else size
    if body < R or body % R:
        return None
    n = body // R
    rec = memoryview(raw)[:body]
    if version >= 2:
        magic, count, stored = traceio._END.unpack_from(raw, body)
        if magic != traceio.END_MAGIC or count != n or zlib.crc32(rec, crc) != stored:
            return None
    # every record alike: same flags, one token, k experts
    if (raw[0:body:R].count(rflags) != n or raw[_OFF_TOKENS:body:R].count(1) != n
            or raw[_OFF_TOKENS + 1:body:R].count(0) != n or raw[_OFF_K:body:R].count(k) != n):
        return None
    layers = _widen(_field(raw, n, R, _OFF_LAYER, 2), 2, "i")
    if max(layers) >= header.num_moe_layers:
        return None
    steps = _widen(_field(raw, n, R, _OFF_STEP, 4), 4, "q")
    ids = _field(raw, n, R, _HEAD, w, k)
    if (max(ids) if w == 1 else max(_le("H", ids))) >= header.num_experts \
            or not _distinct_rows(ids, n, k, w):
        return None
    experts = _widen(ids, w, "i")
    weights = None
    if wcode:
        code = traceio._WFMT[wcode]
        buf = _field(raw, n, R, _HEAD + k * w, wsize, k)
        if code == "e":
            weights = array("d", struct.unpack(f"<{n * k}e", buf))
        else:
            weights = array("d", _le(code, buf))
        if not isfinite(sum(weights)):
            return None
        # a record's own sum (the record reader's check) can overflow only for f64 weights
        # (k * the f32 maximum is finite)
        if code == "d" and (max(weights) > _HUGE or min(weights) < -_HUGE):
            return None
    return Columns(layers, k, experts, weights, steps, header.num_experts)


class _At(io.BytesIO):
    """The records' bytes read as the file at their offset ``start`` (byte offsets in the
    record reader's messages are the file's)."""

    def __init__(self, raw: bytes, start: int):
        super().__init__(raw)
        self._base = start

    def tell(self) -> int:
        return self._base + super().tell()


class LazyDispatches(Sequence):
    """A trace's dispatches, read from the file's bytes only when iterated or indexed
    (``limit``: only the first so many records, a :meth:`head`)."""

    def __init__(self, raw: bytes, header, path: str, version: int, crc: int, columns: Columns,
                 start: int, limit: int | None = None):
        self._raw, self._header, self._path = raw, header, path
        self._version, self._crc, self._start = version, crc, start
        self._limit = limit
        self.columns = columns
        self._list = None

    def _materialise(self) -> list:
        if self._list is None:
            it = traceio.iter_native(_At(self._raw, self._start), self._header, self._path,
                                     version=self._version, crc=self._crc)
            # (a head stops before the end marker: decode_uniform checked the whole file)
            self._list = list(it if self._limit is None else islice(it, self._limit))
        return self._list

    def head(self, n: int) -> "LazyDispatches":
        """The first ``n`` records, as columns sliced from these (no record is read)."""
        c = self.columns
        n = max(0, min(int(n), c.records))
        k = c.k
        cols = Columns(c.layers[:n], k, c.experts[:n * k],
                       None if c.weights is None or n == 0 else c.weights[:n * k], c.steps[:n], c.num_experts)
        return self._head(cols, n)

    def _head(self, cols: Columns, n: int) -> "LazyDispatches":
        return LazyDispatches(self._raw, self._header, self._path, self._version, self._crc,
                              cols, self._start, n)

    def step_cut(self, n: int) -> int:
        """The length of the shortest head of at least ``n`` records that ends with a step
        (the records of one step are never split)."""
        steps = self.columns.steps
        total = len(steps)
        i = max(0, min(int(n), total))
        while 0 < i < total and steps[i] == steps[i - 1]:
            i += 1
        return i

    def has_predictions(self) -> bool:
        """False: like records carry no predictions (decode_uniform takes none)."""
        return False

    def has_weights(self) -> bool:
        """Whether the records carry router weights (like records: all or none)."""
        return self.columns.weights is not None and self.columns.records > 0

    def records(self) -> list:
        """mpl.trace.records_of over these dispatches, from the columns."""
        c = self.columns
        ex = c.experts.tolist()
        ws = c.weights.tolist() if c.weights is not None else None
        offs = c.offs
        # millions of small acyclic containers: the cycle collector would walk them again
        # and again while they are made (5x the building time); it runs after
        was = gc.isenabled()
        gc.disable()
        try:
            if ws is None:
                return [(layer, ex[a:b], None, 1, step, None, None)
                        for layer, a, b, step in zip(c.layers, offs, offs[1:], c.steps)]
            return [(layer, ex[a:b], ws[a:b], 1, step, None, None)
                    for layer, a, b, step in zip(c.layers, offs, offs[1:], c.steps)]
        finally:
            if was:
                gc.enable()

    def native_records(self, weights: str):
        """The records of these dispatches as mpl.traceio.NativeWriter writes them, from the
        columns: (the weight type, the bytes), with ``weights`` "auto" the smallest type that
        holds every weight exactly (traceio.weights_exact_in's test); None where the record
        writer must write them (more experts per record than the format holds: its error)."""
        c = self.columns
        n, k = c.records, c.k
        if k > 255 or n == 0:
            return None
        code = weights
        if weights == "auto":         # (no weights: every type holds them, as for the writer)
            code = next((x for x in ("f16", "f32") if c.weights is None or _exact_in(c.weights, x)),
                        "f64")
        w = traceio.id_width(self._header.num_experts)
        wcode = traceio.weight_code(code) if c.weights is not None else 0
        wsize = traceio._WSIZE[wcode] if wcode else 0
        R = _HEAD + k * (w + wsize)
        out = bytearray(n * R)
        out[0::R] = bytes((wcode,)) * n
        _put(out, R, _OFF_STEP, 4, _bytes_le(c.steps), 8)
        _put(out, R, _OFF_LAYER, 2, _bytes_le(c.layers), 4)
        out[_OFF_TOKENS::R] = b"\x01" * n
        out[_OFF_K::R] = bytes((k,)) * n
        _put(out, R, _HEAD, w * k, _narrow(_bytes_le(c.experts), 4, w), w * k)
        if wcode:
            fmt = traceio._WFMT[wcode]
            data = (struct.pack(f"<{len(c.weights)}e", *c.weights) if fmt == "e"
                    else _bytes_le(array(fmt, c.weights)))
            _put(out, R, _HEAD + k * w, wsize * k, data, wsize * k)
        return code, bytes(out)

    def __len__(self) -> int:
        return self.columns.records

    def __getitem__(self, i):
        return self._materialise()[i]

    def __iter__(self):
        return iter(self._materialise())

    def __eq__(self, other):
        if isinstance(other, (list, tuple, LazyDispatches)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)

    def __reduce__(self):      # pickled as the bytes (a process pool's workers get those)
        return (LazyDispatches, (self._raw, self._header, self._path, self._version,
                                 self._crc, self.columns, self._start, self._limit))

    def steps_and_tokens(self) -> tuple[int, int]:
        """mpl.trace.steps_and_tokens: one token per record, so steps and tokens are the
        distinct steps."""
        n = len(set(self.columns.steps))
        return n, n

    def __repr__(self) -> str:
        return f"LazyDispatches({len(self)} records of {self._path})"


class JsonlDispatches(LazyDispatches):
    """A JSONL trace's dispatches read into columns (:func:`load_jsonl`): the Dispatch
    objects are read from the file's bytes (kept: the file may change or go) by
    mpl.traceio's reader only when something iterates or indexes them."""

    def __init__(self, raw: bytes | bytearray, header, path: str, columns: Columns,
                 limit: int | None = None):
        self._raw, self._header, self._path = raw, header, path
        self._limit = limit
        self.columns = columns
        self._list = None

    def _materialise(self) -> list:
        if self._list is None:
            got = traceio.read_jsonl(io.BytesIO(self._raw), self._path).dispatches
            self._list = list(got if self._limit is None else got[:self._limit])
        return self._list

    def _head(self, cols: Columns, n: int) -> "JsonlDispatches":
        return JsonlDispatches(self._raw, self._header, self._path, cols, n)

    def __reduce__(self):
        return (JsonlDispatches, (self._raw, self._header, self._path, self.columns, self._limit))
