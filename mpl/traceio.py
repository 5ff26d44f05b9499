"""Trace files: the native binary format (``.mpltrace``) and the original's JSONL.

The native format is specified in ``docs/traces.md``. In short (all integers little-endian)::

    file     := header record* end                # version 2 (version 1: no end)
    header   := "MPLTRACE" u16 version u16 flags u32 header_len header_json[header_len]
    record   := u8 rflags u32 step u16 layer u16 tokens u8 k
                ids[tokens*k]                     # u8 when num_experts <= 256, else u16
                [weights[tokens*k]]               # rflags bit 0-1: 0 none, 1 f16, 2 f32, 3 f64
                [u8 n_pred (u16 layer u8 n ids[n])*n_pred]   # rflags bit 2
    end      := "MPLTEND" 0x00 u64 records u32 crc32   # CRC-32 of every byte before it

Records are self-delimiting, so a reader streams dispatch by dispatch (``iter_dispatches``)
without holding the file in memory; ``load`` reads everything into a :class:`mpl.trace.Trace`.

JSONL (the original moe-policylang's trace format, as we read it): the first line is a JSON
object describing the model, then one JSON object per dispatch::

    {"t": STEP, "l": LAYER, "e": [ids...] | [[ids...], ...], "s": [weights...] | [[...], ...]}

``l`` is the model's decoder-layer id (mapped to a MoE-layer ordinal through the header's
``moe_layers``), ``e`` a flat list for one token or a list of per-token lists, ``s`` the router
weights in the same shape (optional), ``p`` our speculative predictions; no other row key is
accepted. Unless it is exactly the line we write, the header line is kept verbatim (its text) in
``header.extra["jsonl_header"]`` so that import then export reproduces it.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from math import isfinite
from typing import IO, Iterable, Iterator

from mpl.fileio import atomic_open
from mpl.trace import Dispatch, Trace, TraceHeader

MAGIC = b"MPLTRACE"
VERSION = 2                  # written; 1 (no end marker, no checksum) is still read
READ_VERSIONS = (1, 2)
END_MAGIC = b"MPLTEND\x00"   # its first byte has bits a record's flags never set
NATIVE_EXT = ".mpltrace"
JSONL_EXT = ".jsonl"

W_NONE, W_F16, W_F32, W_F64 = 0, 1, 2, 3
_WCODE = {"f16": W_F16, "float16": W_F16, "f32": W_F32, "float32": W_F32,
          "f64": W_F64, "float64": W_F64}
_WFMT = {W_F16: "e", W_F32: "f", W_F64: "d"}
_WSIZE = {W_F16: 2, W_F32: 4, W_F64: 8}
F_PRED = 0x04

_REC = struct.Struct("<BIHHB")          # rflags, step, layer, tokens, k
_PRE = struct.Struct("<HB")             # prediction target layer, count
_FIXED = struct.Struct("<8sHHI")        # magic, version, flags, header_len
_END = struct.Struct("<8sQI")           # end magic, record count, CRC-32

#: The longest header JSON a native file may have (real ones: a few hundred bytes, more
#: when ``extra`` keeps an imported JSONL header); a corrupted length cannot make a reader
#: allocate gigabytes.
MAX_HEADER_BYTES = 64 << 20
#: The longest line a JSONL trace may have (a prefill row of 32k tokens, top-8, with
#: weights, takes about 7 MB); an endless or binary file is refused, never read whole.
MAX_JSONL_LINE_BYTES = 64 << 20
_LINE_PIECE = 1 << 16
#: The largest model shape a trace header may declare (docs/traces.md, "Limits"): decoder
#: layers, MoE layers and experts per layer up to 65,536 each (the format's u16 layer and
#: expert ids; no model comes near), and an expert of at most 10^12 bytes (1,000 GB, the
#: schema's largest cache.expert_size_gb). A header beyond them is refused, naming the limit.
MAX_LAYERS = 65536
MAX_EXPERTS = 65536
#: The most steps a trace may have: steps are numbered 0 .. 2^32-1 (the native format's u32
#: step field; a JSONL row's ``t`` is held to the same range).
MAX_STEPS = 2 ** 32
MAX_EXPERT_BYTES = 10 ** 12
#: The widest stored expert weight a header may declare (``stored_bits``: float64).
MAX_STORED_BITS = 64
#: The keys of a JSONL dispatch row: the original's t, l, e, s and our p (predictions).
ROW_KEYS = ("t", "l", "e", "s", "p")
_ROW_KEYS = frozenset(ROW_KEYS)


class TraceFormatError(ValueError):
    """A trace file is malformed; the message names the file and the position."""


# ------------------------------------------------------------------ header
def _header_to_json(h: TraceHeader) -> dict:
    d = {"model": h.model, "num_layers": h.num_layers, "moe_layers": list(h.moe_layers),
         "num_experts": h.num_experts, "top_k": h.top_k, "expert_bytes": h.expert_bytes,
         "source": h.source, "extra": h.extra}
    if h.stored_bits:         # written only when known: files without it read as before
        d["stored_bits"] = h.stored_bits
    return d


def _int_field(value, name: str, where: str) -> int:
    """A header integer: a JSON integer (not a boolean, a string or a float)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceFormatError(f"{where}: header field '{name}' must be an integer, got "
                               f"{json.dumps(value)[:60]}")
    return value


def _int_list_field(value, name: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)):
        raise TraceFormatError(f"{where}: header field '{name}' must be a list of integers, "
                               f"got {value!r}")
    return tuple(_int_field(x, name, where) for x in value)


def _header_from_json(d: dict, where: str) -> TraceHeader:
    missing = [k for k in ("model", "num_layers", "moe_layers", "num_experts", "top_k") if k not in d]
    if missing:
        raise TraceFormatError(f"{where}: bad trace header: no {', '.join(repr(k) for k in missing)} field")
    extra = d.get("extra") or {}
    if not isinstance(extra, dict):
        raise TraceFormatError(f"{where}: header field 'extra' must be a JSON object")
    h = TraceHeader(model=str(d["model"]), num_layers=_int_field(d["num_layers"], "num_layers", where),
                    moe_layers=_int_list_field(d["moe_layers"], "moe_layers", where),
                    num_experts=_int_field(d["num_experts"], "num_experts", where),
                    top_k=_int_field(d["top_k"], "top_k", where),
                    expert_bytes=_int_field(d.get("expert_bytes", 0), "expert_bytes", where),
                    source=str(d.get("source", "")), extra=dict(extra),
                    stored_bits=_int_field(d.get("stored_bits", 0), "stored_bits", where))
    validate_header(h, where)
    return h


def validate_header(h: TraceHeader, where: str = "trace") -> None:
    if h.num_experts < 1 or h.num_experts > MAX_EXPERTS:
        raise TraceFormatError(f"{where}: num_experts must be in 1..{MAX_EXPERTS}, got {h.num_experts}")
    if not h.moe_layers:
        raise TraceFormatError(f"{where}: the header lists no MoE layers")
    if h.num_moe_layers > MAX_LAYERS:
        raise TraceFormatError(f"{where}: at most {MAX_LAYERS} MoE layers, got {h.num_moe_layers}")
    if h.num_layers > MAX_LAYERS:
        raise TraceFormatError(f"{where}: num_layers must be in 1..{MAX_LAYERS} (decoder layers), "
                               f"got {h.num_layers}")
    if min(h.moe_layers) < 0:
        raise TraceFormatError(f"{where}: moe_layers must be non-negative layer ids, got {min(h.moe_layers)}")
    if len(set(h.moe_layers)) != len(h.moe_layers):
        dup = next(x for x in h.moe_layers if h.moe_layers.count(x) > 1)
        raise TraceFormatError(f"{where}: moe_layers lists layer {dup} twice")
    if h.num_layers < 1:
        raise TraceFormatError(f"{where}: num_layers must be >= 1, got {h.num_layers}")
    if max(h.moe_layers) >= h.num_layers:
        raise TraceFormatError(f"{where}: moe_layers lists layer {max(h.moe_layers)}, but the "
                               f"model has {h.num_layers} decoder layers (ids 0.."
                               f"{h.num_layers - 1})")
    if h.top_k < 1 or h.top_k > h.num_experts:
        raise TraceFormatError(f"{where}: top_k must be in 1..num_experts, got {h.top_k}")
    if not 0 <= h.stored_bits <= MAX_STORED_BITS:
        raise TraceFormatError(f"{where}: stored_bits must be in 0..{MAX_STORED_BITS} (bits per "
                               f"stored expert weight; 0: unknown), got {h.stored_bits}")
    if h.expert_bytes < 0:
        raise TraceFormatError(f"{where}: expert_bytes must be >= 0, got {h.expert_bytes}")
    if h.expert_bytes > MAX_EXPERT_BYTES:
        raise TraceFormatError(f"{where}: expert_bytes must be at most {MAX_EXPERT_BYTES:,} "
                               f"(1,000 GB; 0: unknown), got {h.expert_bytes}")


def id_width(num_experts: int) -> int:
    """Bytes per expert id: 1 when ids fit in a byte, else 2."""
    return 1 if num_experts <= 256 else 2


# ------------------------------------------------------------------ native writer
def weight_code(weights: str) -> int:
    """The record flag of a weight type name (f16, f32, f64 and their long names)."""
    if weights not in _WCODE:
        raise ValueError(f"weights must be one of f16, f32, f64, got {weights!r}")
    return _WCODE[weights]


class NativeWriter:
    """Append dispatches to a ``.mpltrace`` file one at a time (the recorder streams)."""

    def __init__(self, f: IO[bytes], header: TraceHeader, *, weights: str = "f32"):
        validate_header(header)
        self.f = f
        self.header = header
        self.wcode = weight_code(weights)
        self.idc = "B" if id_width(header.num_experts) == 1 else "H"
        self.nl = header.num_moe_layers
        blob = json.dumps(_header_to_json(header), sort_keys=True,
                          separators=(",", ":")).encode("utf-8")
        if len(blob) > MAX_HEADER_BYTES:
            raise ValueError(f"the trace header takes {len(blob):,} bytes as JSON, more than "
                             f"the {MAX_HEADER_BYTES >> 20} MiB a reader accepts")
        head = _FIXED.pack(MAGIC, VERSION, 0, len(blob)) + blob
        f.write(head)
        self.crc = zlib.crc32(head)
        self.count = 0
        self.closed = False

    def close(self) -> None:
        """Write the end marker (record count and CRC-32 of the file so far). A file
        without it is reported as cut; the file object itself is left open."""
        if not self.closed:
            self.f.write(_END.pack(END_MAGIC, self.count, self.crc))
            self.closed = True

    def __enter__(self) -> "NativeWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()

    def write_encoded(self, data: bytes, count: int) -> None:
        """Append ``count`` records already encoded as :meth:`write` encodes them (a trace's
        columns written at once: mpl.tracecols.LazyDispatches.native_records)."""
        if self.closed:
            raise ValueError("write_encoded() after close(): the end marker is written")
        self.f.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.count += count

    def write(self, d: Dispatch) -> None:
        if self.closed:
            raise ValueError("write() after close(): the end marker is written")
        h = self.header
        tokens = len(d.experts)
        k = len(d.experts[0]) if tokens else 0
        if not 0 <= d.layer < self.nl:
            raise ValueError(f"dispatch at step {d.step}: layer {d.layer} outside 0..{self.nl - 1}")
        if not 0 <= d.step < MAX_STEPS:
            raise ValueError(f"dispatch step {d.step} outside 0..2^32-1")
        if tokens >= 2 ** 16 or k > 255:
            raise ValueError(f"dispatch at step {d.step}: too many tokens ({tokens}) or experts per token ({k})")
        flat: list[int] = []
        for row in d.experts:
            if len(row) != k:
                raise ValueError(f"dispatch at step {d.step} layer {d.layer}: tokens select "
                                 f"different numbers of experts ({k} and {len(row)})")
            flat.extend(row)
        for e in flat:
            if not 0 <= e < h.num_experts:
                raise ValueError(f"dispatch at step {d.step} layer {d.layer}: expert id {e} "
                                 f"outside 0..{h.num_experts - 1}")
        rflags = 0
        wflat: list[float] = []
        if d.weights is not None:
            rflags |= self.wcode
            for row, wrow in zip(d.experts, d.weights):
                if len(wrow) != len(row):
                    raise ValueError(f"dispatch at step {d.step} layer {d.layer}: weights and "
                                     f"experts differ in shape")
                wflat.extend(wrow)
            if len(d.weights) != tokens:
                raise ValueError(f"dispatch at step {d.step} layer {d.layer}: weights and "
                                 f"experts differ in shape")
        if d.predictions:
            rflags |= F_PRED
        n = len(flat)
        parts = [_REC.pack(rflags, d.step, d.layer, tokens, k),
                 struct.pack(f"<{n}{self.idc}", *flat)]
        if wflat:
            parts.append(struct.pack(f"<{n}{_WFMT[self.wcode]}", *wflat))
        if d.predictions:
            if len(d.predictions) > 255:
                raise ValueError("at most 255 predicted layers per dispatch")
            parts.append(bytes((len(d.predictions),)))
            for layer, ids in d.predictions.items():
                ids = list(ids)[:255]
                parts.append(_PRE.pack(int(layer), len(ids)))
                parts.append(struct.pack(f"<{len(ids)}{self.idc}", *ids))
        data = b"".join(parts)
        self.f.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.count += 1


def weights_exact_in(trace_or_dispatches: Iterable[Dispatch], code: str) -> bool:
    """True when every weight survives a round trip through the float type ``code``."""
    fmt = "<" + _WFMT[_WCODE[code]]
    pack, unpack = struct.pack, struct.unpack
    for d in trace_or_dispatches:
        if d.weights is None:
            continue
        for row in d.weights:
            for w in row:
                try:
                    if unpack(fmt, pack(fmt, w))[0] != w:
                        return False
                except OverflowError:
                    return False
    return True


def _auto_weights(trace: Trace, weights: str) -> str:
    """The smallest float type that stores every weight of ``trace`` exactly."""
    if weights != "auto":
        return weights
    for code in ("f16", "f32"):
        if weights_exact_in(trace.dispatches, code):
            return code
    return "f64"


def save_native(trace: Trace, path: str, *, weights: str = "auto", progress=None) -> None:
    """Write ``trace`` as ``.mpltrace``. ``weights='auto'`` picks the smallest of float16,
    float32, float64 that holds every weight exactly, so import -> save -> load is exact.
    A trace read into columns (mpl.tracecols) is written from them, the same bytes, without
    a Dispatch object per record."""
    records = getattr(trace.dispatches, "native_records", None)
    body = records(weights) if records is not None else None
    if body is not None:
        code, data = body
        with atomic_open(path, "wb") as f:
            with NativeWriter(f, trace.header, weights=code) as w:
                w.write_encoded(data, len(trace.dispatches))
        return
    save_stream(trace.header, trace.dispatches, path, weights=_auto_weights(trace, weights),
                progress=progress, total=len(trace.dispatches))


# ------------------------------------------------------------------ native reader
def _read_exact(f: IO[bytes], n: int, path: str, what: str) -> bytes:
    """``n`` bytes, read 1 MiB at a time (a length from a damaged file cannot make one
    huge allocation); TraceFormatError when the file ends first."""
    parts = []
    got = 0
    while got < n:
        b = f.read(min(n - got, 1 << 20))
        if not b:
            break
        parts.append(b)
        got += len(b)
    if got != n:
        raise TraceFormatError(f"{path}: truncated {what} (wanted {n} bytes, got {got})")
    return b"".join(parts)


def read_native_header(f: IO[bytes], path: str = "trace") -> TraceHeader:
    return read_native_start(f, path)[0]


def read_native_start(f: IO[bytes], path: str = "trace") -> tuple[TraceHeader, int, int]:
    """The header, the format version and the CRC-32 of the bytes read so far (the
    arguments ``iter_native`` needs to verify a version 2 file's end marker)."""
    head = f.read(_FIXED.size)
    if not (head.startswith(MAGIC) or (head and MAGIC.startswith(head))):
        raise TraceFormatError(f"{path}: not an .mpltrace file (bad magic); "
                               f"JSONL traces need the .jsonl extension")
    if len(head) < _FIXED.size:
        raise TraceFormatError(f"{path}: truncated header: the file ends after {len(head)} "
                               f"bytes, inside the {_FIXED.size}-byte fixed header (magic, "
                               f"version, flags, length): the file was cut")
    _, version, _flags, hlen = _FIXED.unpack(head)
    if version not in READ_VERSIONS:
        raise TraceFormatError(f"{path}: unsupported .mpltrace version {version} (this reader "
                               f"knows versions {', '.join(map(str, READ_VERSIONS))})")
    if hlen > MAX_HEADER_BYTES:
        raise TraceFormatError(f"{path}: the header length field says {hlen:,} bytes, more than "
                               f"{MAX_HEADER_BYTES >> 20} MiB: the file is corrupted")
    blob = _read_exact(f, hlen, path, "header")
    try:
        d = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise TraceFormatError(f"{path}: header is not valid JSON ({e})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: header is not valid JSON (nested too deeply)") from None
    if not isinstance(d, dict):
        raise TraceFormatError(f"{path}: header is not a JSON object")
    return _header_from_json(d, path), version, zlib.crc32(head + blob)


def iter_native(f: IO[bytes], header: TraceHeader, path: str = "trace",
                chunk: int = 1 << 20, *, version: int | None = None,
                crc: int | None = None) -> Iterator[Dispatch]:
    """Yield the dispatches of an open ``.mpltrace`` (positioned after the header), reading
    ``chunk`` bytes at a time. For a version 2 file (``version``, ``crc`` from
    :func:`read_native_start`) the end marker must follow the last record, with its record
    count and the CRC-32 of every byte before it: a cut or corrupted file raises
    TraceFormatError after the last good record (a streaming consumer has seen the records
    by then; ``load`` raises before returning anything). Without ``version`` and ``crc``
    (a header from :func:`read_native_header`) an end marker is still recognised and its
    record count checked, but the checksum is not and a missing marker is not an error."""
    w = id_width(header.num_experts)
    idc = "B" if w == 1 else "H"
    nl, ne, topk = header.num_moe_layers, header.num_experts, header.top_k
    buf = b""
    pos = 0
    offset = f.tell()        # file offset of buf[0]
    rec_unpack = _REC.unpack_from
    rsize = _REC.size
    eof = False
    index = 0

    def need(n: int) -> bool:
        nonlocal buf, pos, offset, eof
        while len(buf) - pos < n and not eof:
            more = f.read(max(chunk, n))
            if not more:
                eof = True
                break
            offset += pos
            buf = buf[pos:] + more
            pos = 0
        return len(buf) - pos >= n

    checked = version is not None and version >= 2 and crc is not None
    crc32 = zlib.crc32
    while True:
        if not need(1):
            if checked:
                raise TraceFormatError(f"{path}: no end marker after record {index - 1} at byte "
                                       f"{offset + pos}: the file was cut")
            return
        if buf[pos] == END_MAGIC[0] and version != 1:
            at = offset + pos
            if not need(_END.size):
                raise TraceFormatError(f"{path}: truncated end marker at byte {at}: the file "
                                       f"was cut")
            magic, count, stored = _END.unpack_from(buf, pos)
            if magic != END_MAGIC:
                raise TraceFormatError(f"{path}: record {index} at byte {at}: unknown flags "
                                       f"{buf[pos]:#x}")
            if count != index:
                raise TraceFormatError(f"{path}: the end marker at byte {at} counts {count} "
                                       f"records, the file holds {index}: it is corrupted")
            if checked and stored != crc:
                raise TraceFormatError(f"{path}: checksum mismatch (CRC-32 {crc:#010x} computed, "
                                       f"{stored:#010x} stored in the end marker at byte {at}): "
                                       f"the file is corrupted")
            pos += _END.size
            if need(1):
                raise TraceFormatError(f"{path}: data after the end marker at byte {at + _END.size}")
            return
        if not need(rsize):
            raise TraceFormatError(f"{path}: truncated record {index} at byte {offset + pos}")
        start = offset + pos
        rflags, step, layer, tokens, k = rec_unpack(buf, pos)
        n = tokens * k
        wcode = rflags & 3
        body = n * w + (n * _WSIZE[wcode] if wcode else 0)
        if rflags & ~0x07:
            raise TraceFormatError(f"{path}: record {index} at byte {start}: unknown flags {rflags:#x}")
        if not need(rsize + body + (1 if rflags & F_PRED else 0)):
            raise TraceFormatError(f"{path}: truncated record {index} at byte {start}")
        p = pos + rsize
        ids = struct.unpack_from(f"<{n}{idc}", buf, p)
        p += n * w
        if layer >= nl:
            raise TraceFormatError(f"{path}: record {index} at byte {start}: layer {layer} "
                                   f"outside 0..{nl - 1}")
        if ids and max(ids) >= ne:
            raise TraceFormatError(f"{path}: record {index} at byte {start}: expert id "
                                   f"{max(ids)} outside 0..{ne - 1}")
        if k > topk:
            raise TraceFormatError(f"{path}: record {index} at byte {start}: {k} experts per "
                                   f"token, more than the header's top_k {topk}")
        experts = [list(ids[i:i + k]) for i in range(0, n, k)] if k else [[] for _ in range(tokens)]
        weights = None
        if wcode:
            ws = struct.unpack_from(f"<{n}{_WFMT[wcode]}", buf, p)
            if not isfinite(sum(ws)) and not all(map(isfinite, ws)):   # (a sum may overflow)
                raise TraceFormatError(f"{path}: record {index} at byte {start}: a router weight "
                                       f"is not a finite number")
            p += n * _WSIZE[wcode]
            weights = [list(ws[i:i + k]) for i in range(0, n, k)] if k else [[] for _ in range(tokens)]
        preds = None
        if rflags & F_PRED:
            npred = buf[p]
            p += 1
            preds = {}
            for _ in range(npred):
                pos_rel = p - pos
                if not need(pos_rel + _PRE.size):
                    raise TraceFormatError(f"{path}: truncated predictions in record {index}")
                p = pos + pos_rel
                tl, cnt = _PRE.unpack_from(buf, p)
                p += _PRE.size
                pos_rel = p - pos
                if not need(pos_rel + cnt * w):
                    raise TraceFormatError(f"{path}: truncated predictions in record {index}")
                p = pos + pos_rel
                pids = list(struct.unpack_from(f"<{cnt}{idc}", buf, p))
                if tl >= nl:
                    raise TraceFormatError(f"{path}: record {index} at byte {start}: a prediction "
                                           f"names layer {tl}, outside the header's layers "
                                           f"0..{nl - 1}")
                if pids and max(pids) >= ne:
                    raise TraceFormatError(f"{path}: record {index} at byte {start}: a prediction "
                                           f"for layer {tl} names expert id {max(pids)}, outside "
                                           f"0..{ne - 1}")
                preds[tl] = pids
                p += cnt * w
        if checked:
            crc = crc32(memoryview(buf)[pos:p], crc)
        pos = p
        index += 1
        yield Dispatch(step, layer, experts, weights, preds)


# ------------------------------------------------------------------ JSONL
def _jsonl_header(d: dict, path: str, where: str, text: str) -> tuple[TraceHeader, frozenset]:
    """Read the original's header line ``text`` (parsed: ``d``; ``where`` is its
    ``path:line``). Keys read (the first present and not null wins): model/model_name/name,
    num_layers/num_hidden_layers/n_layers, moe_layers/moe_layer_ids/layers_moe,
    num_experts/n_experts/experts (required), top_k/k/num_experts_per_tok,
    expert_bytes/expert_size_bytes, source, extra. Numbers must be JSON integers, and a
    given top_k / num_layers / moe_layers must be usable. Any other key is kept: unless the
    line is exactly the one we would write, ``text`` is kept verbatim in
    ``extra["jsonl_header"]`` and written back by ``dump_jsonl``. Returns the header and the
    names of the fields the line gave (``load_jsonl`` infers the others from the rows)."""
    def first(*keys):
        for k in keys:
            if d.get(k) is not None:
                return k, d[k]
        return keys[0], None

    _, model = first("model", "model_name", "name")
    k_exp, experts = first("num_experts", "n_experts", "experts")
    k_top, top_k = first("top_k", "k", "num_experts_per_tok")
    k_moe, moe = first("moe_layers", "moe_layer_ids", "layers_moe")
    k_lay, layers = first("num_layers", "num_hidden_layers", "n_layers")
    k_eb, expert_bytes = first("expert_bytes", "expert_size_bytes")
    k_sb, stored_bits = first("stored_bits")
    if experts is None:
        raise TraceFormatError(f"{where}: header line has no num_experts")
    given = frozenset(name for name, v in (("num_layers", layers), ("moe_layers", moe),
                                           ("top_k", top_k)) if v is not None)
    top_k = _int_field(top_k, k_top, where) if top_k is not None else 0
    if "top_k" in given and top_k < 1:
        raise TraceFormatError(f"{where}: header field '{k_top}' must be >= 1, got {top_k} "
                               f"(leave it out to take the widest row)")
    layers = _int_field(layers, k_lay, where) if layers is not None else 0
    if "num_layers" in given and layers < 1:
        raise TraceFormatError(f"{where}: header field '{k_lay}' must be >= 1, got {layers} "
                               f"(leave it out to take the highest MoE layer id + 1)")
    moe = _int_list_field(moe, k_moe, where) if moe is not None else ()
    if "moe_layers" in given and not moe:
        raise TraceFormatError(f"{where}: header field '{k_moe}' is empty (leave it out to "
                               f"take the layers of the rows)")
    extra = d.get("extra")
    if extra is not None and not isinstance(extra, dict):
        raise TraceFormatError(f"{where}: header field 'extra' must be a JSON object")
    h = TraceHeader(model=str(model if model is not None else "unknown"),
                    num_layers=layers, moe_layers=moe,
                    num_experts=_int_field(experts, k_exp, where), top_k=top_k,
                    expert_bytes=(_int_field(expert_bytes, k_eb, where)
                                  if expert_bytes is not None else 0),
                    source=str(d.get("source") or f"jsonl {os.path.basename(path)}"),
                    extra=dict(extra or {}),
                    stored_bits=(_int_field(stored_bits, k_sb, where)
                                 if stored_bits is not None else 0))
    if text != json.dumps(_jsonl_header_of(h)):     # not ours, byte for byte:
        h.extra["jsonl_header"] = text               # kept verbatim for export
    return h, given


def _jsonl_header_of(h: TraceHeader) -> dict:
    """The header line we write for a trace that did not come from JSONL. ``extra`` has its
    keys sorted at every level, as in the native header, so that JSONL -> .mpltrace -> JSONL
    writes the same line."""
    head = {"model": h.model, "num_layers": h.num_layers, "moe_layers": list(h.moe_layers),
            "num_experts": h.num_experts, "top_k": h.top_k, "expert_bytes": h.expert_bytes,
            "source": h.source}
    if h.stored_bits:
        head["stored_bits"] = h.stored_bits
    if h.extra:
        head["extra"] = json.loads(json.dumps(h.extra, sort_keys=True))
    return head


def _rows(value, path: str, lineno: int, what: str) -> tuple[list[list], bool]:
    """A flat list (one token) or a list of lists -> (rows, was_flat)."""
    if not isinstance(value, list):
        raise TraceFormatError(f"{path}:{lineno}: '{what}' must be a list")
    types = set(map(type, value))          # (JSON's values: exact types; one pass in C)
    if list in types:
        if len(types) > 1:
            raise TraceFormatError(f"{path}:{lineno}: '{what}' mixes numbers and lists")
        return [list(r) for r in value], False
    return [list(value)], True


_INT_TYPE = frozenset((int,))              # a JSON integer (bool is its own type)
_NUMBER_TYPES = frozenset((int, float))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


# one decoder for every line (json.loads with keyword arguments builds a decoder per call)
_JSON_DECODE = json.JSONDecoder(parse_constant=_no_constant).decode


def _jsonl_lines(f: IO[bytes], path: str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line, read in bounded pieces: a line longer than
    MAX_JSONL_LINE_BYTES is an error, and a long line stops being read at its first piece
    (64 KiB) holding a NUL byte, which the caller then reports (so ``/dev/zero`` or an
    endless line stops at once / at the cap, never exhausting memory). A UTF-8 byte-order
    mark at the start of the file is dropped."""
    readline = f.readline
    piece = _LINE_PIECE
    lineno = 0
    while True:
        try:
            line = readline(piece)
            lineno += 1
            if len(line) == piece and not line.endswith(b"\n"):    # a long line: in pieces
                parts = [line]
                total = len(line)
                while True:
                    if b"\x00" in parts[-1]:
                        break                   # binary: the caller reports it (no more reads)
                    more = readline(piece)
                    if not more:
                        break
                    total += len(more)
                    if total > MAX_JSONL_LINE_BYTES:
                        raise TraceFormatError(
                            f"{path}:{lineno}: line {lineno} is longer than "
                            f"{MAX_JSONL_LINE_BYTES:,} bytes ({MAX_JSONL_LINE_BYTES >> 20} MiB): "
                            f"not a JSONL trace")
                    parts.append(more)
                    if more.endswith(b"\n") or len(more) < piece:
                        break
                line = b"".join(parts)
        except OSError as e:
            raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
        if not line:
            return
        if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        yield lineno, line


def _pred_layer(key: str, path: str, lineno: int) -> int:
    """A key of 'p': a decoder-layer id written as a decimal integer ("3", not "03" or " 3",
    so that export writes back the same key)."""
    if not (key.isdigit() and key.isascii() and str(int(key)) == key):
        raise TraceFormatError(f"{path}:{lineno}: bad predictions 'p': key {json.dumps(key)} is "
                               f'not a decoder-layer id (write {{"LAYER": [expert ids...]}})')
    return int(key)


def open_jsonl(path: str) -> IO[bytes]:
    """``path`` opened for reading as a JSONL trace; TraceFormatError when it cannot be."""
    try:
        return open(path, "rb")    # lines are decoded one by one, so an error names its line
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    except ValueError as e:        # open() refuses the path (a NUL character)
        raise TraceFormatError(f"{path!r}: cannot read (not a usable file path: {e})") from None


def _jsonl_object(line: bytes, path: str, lineno: int):
    """Line ``lineno`` of a JSONL trace decoded: a JSON object, or None for a blank line."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}:{lineno}: not UTF-8 text ({e.reason} at column "
                               f"{e.start + 1}): is it a binary file? Native traces need "
                               f"the {NATIVE_EXT} extension") from None
    if "\x00" in text:
        raise TraceFormatError(f"{path}:{lineno}: a NUL byte: this is a binary file, not "
                               f"a JSONL trace (native traces need the {NATIVE_EXT} "
                               f"extension)")
    if not text.strip():
        return None, text
    try:
        obj = _JSON_DECODE(text)
    except (ValueError, RecursionError) as e:
        what = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise TraceFormatError(f"{path}:{lineno}: not JSON ({what})") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{path}:{lineno}: expected a JSON object")
    return obj, text


def jsonl_header_line(obj: dict, text: str, path: str, lineno: int) -> tuple[TraceHeader, frozenset, str]:
    """The header of a JSONL trace from its first non-blank line (decoded: ``obj``, its
    text ``text``): (header, the fields the line gave, where it is)."""
    if "e" in obj and "l" in obj:
        raise TraceFormatError(f"{path}:{lineno}: the first line must be the header "
                               f"(model, num_experts, top_k, ...), not a dispatch")
    where = f"{path}:{lineno}"
    header, given = _jsonl_header(obj, path, where, text.rstrip("\r\n"))
    return header, given, where


def load_jsonl(path: str) -> Trace:
    """Import the original's JSONL. Missing header fields are inferred from the rows: the MoE
    layer ids are the distinct ``l`` values, ``num_layers`` the highest of them + 1,
    ``top_k`` the widest row. (:func:`mpl.tracecols.load` reads the same trace for a
    replay, into columns where it can.)"""
    with open_jsonl(path) as f:
        return read_jsonl(f, path)


def read_jsonl(f: IO[bytes], path: str) -> Trace:
    """:func:`load_jsonl` from an open binary file (``path`` names it in messages)."""
    raw: list[tuple[int, int, list, list | None, bool, dict | None, int]] = []
    header = None
    given: frozenset = frozenset()
    hwhere = path
    for lineno, line in _jsonl_lines(f, path):
        obj, text = _jsonl_object(line, path, lineno)
        if obj is None:
            continue
        if header is None:
            header, given, hwhere = jsonl_header_line(obj, text, path, lineno)
            continue
        if not _ROW_KEYS.issuperset(obj):
            bad = next(k for k in obj if k not in _ROW_KEYS)
            raise TraceFormatError(f"{path}:{lineno}: unknown field {json.dumps(bad)} in a "
                                   f"dispatch row (the fields are "
                                   f"{', '.join(ROW_KEYS)}: step, layer, experts, scores, "
                                   f"predictions)")
        try:
            t, l, e = obj["t"], obj["l"], obj["e"]
        except KeyError as k:
            raise TraceFormatError(f"{path}:{lineno}: dispatch row has no {k} field") from None
        if (not isinstance(t, int) or not isinstance(l, int) or isinstance(t, bool)
                or isinstance(l, bool) or t < 0 or l < 0):
            raise TraceFormatError(f"{path}:{lineno}: 't' and 'l' must be non-negative integers")
        if t >= MAX_STEPS:
            raise TraceFormatError(f"{path}:{lineno}: step 't' = {t} is too large (at most 2^32-1)")
        if l >= MAX_LAYERS:
            raise TraceFormatError(f"{path}:{lineno}: layer 'l' = {l} is too large (decoder-layer "
                                   f"ids are below {MAX_LAYERS})")
        rows, flat = _rows(e, path, lineno, "e")
        for r in rows:
            if not _INT_TYPE.issuperset(map(type, r)):
                raise TraceFormatError(f"{path}:{lineno}: expert ids must be integers")
        if len({len(r) for r in rows}) > 1:
            raise TraceFormatError(f"{path}:{lineno}: the tokens of a dispatch select different "
                                   f"numbers of experts ({', '.join(str(len(r)) for r in rows)})")
        ws = None
        if obj.get("s") is not None:
            ws, _ = _rows(obj["s"], path, lineno, "s")
            if [len(r) for r in ws] != [len(r) for r in rows]:
                raise TraceFormatError(f"{path}:{lineno}: 's' and 'e' differ in shape")
            for r in ws:
                if not _NUMBER_TYPES.issuperset(map(type, r)):
                    raise TraceFormatError(f"{path}:{lineno}: weights must be numbers")
            ws = [list(map(float, r)) for r in ws]
            if not all(all(map(isfinite, r)) for r in ws):
                raise TraceFormatError(f"{path}:{lineno}: weights must be finite numbers")
        preds = None
        if obj.get("p") is not None:
            if not isinstance(obj["p"], dict):
                raise TraceFormatError(f"{path}:{lineno}: 'p' must be an object")
            preds = {}
            for k, v in obj["p"].items():
                if not (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                                    for x in v)):
                    raise TraceFormatError(f"{path}:{lineno}: bad predictions 'p' (write "
                                           f'{{"LAYER": [expert ids...]}})')
                preds[_pred_layer(k, path, lineno)] = v
        raw.append((t, l, rows, ws, flat, preds, lineno))
    if header is None:
        raise TraceFormatError(f"{path}: empty file (expected a header line)")
    if "moe_layers" not in given and "num_layers" in given:
        for x in raw:             # 'l' is a decoder-layer id: it must exist in the model
            if x[1] >= header.num_layers:
                raise TraceFormatError(f"{path}:{x[6]}: layer {x[1]} outside the header's "
                                       f"{header.num_layers} decoder layers (0.."
                                       f"{header.num_layers - 1}); 'l' is a decoder-layer id")
    complete_jsonl_header(header, given, hwhere, {r[1] for r in raw},
                          max((len(r) for x in raw for r in x[2]), default=1))
    ordinal = {lid: i for i, lid in enumerate(header.moe_layers)}
    moe_list = list(header.moe_layers)
    trace = Trace(header)
    flat_flags = []
    for t, l, rows, ws, flat, preds, lineno in raw:
        if l not in ordinal:
            raise TraceFormatError(f"{path}:{lineno}: layer {l} is not among the header's "
                                   f"moe_layers {moe_list}")
        for r in rows:
            if len(r) > header.top_k:
                raise TraceFormatError(f"{path}:{lineno}: {len(r)} experts per token, more than "
                                       f"the header's top_k {header.top_k}")
            if r and (min(r) < 0 or max(r) >= header.num_experts):
                x = next(x for x in r if not 0 <= x < header.num_experts)
                raise TraceFormatError(f"{path}:{lineno}: expert id {x} outside "
                                       f"0..{header.num_experts - 1}")
        if preds:
            for k, v in preds.items():
                if k not in ordinal:
                    raise TraceFormatError(f"{path}:{lineno}: a prediction for layer {k}, which "
                                           f"is not among the header's moe_layers {moe_list}")
                for x in v:
                    if not 0 <= x < header.num_experts:
                        raise TraceFormatError(f"{path}:{lineno}: predicted expert id {x} outside "
                                               f"0..{header.num_experts - 1}")
            preds = {ordinal[k]: v for k, v in preds.items()}
        trace.dispatches.append(Dispatch(t, ordinal[l], rows, ws, preds or None))
        flat_flags.append(flat)
    # Remember rows written as a 2-D list for a single token, so export reproduces them.
    nested_single = [i for i, (d, flat) in enumerate(zip(trace.dispatches, flat_flags))
                     if not flat and d.tokens == 1]
    if nested_single:
        header.extra["jsonl_nested_single"] = nested_single
    return trace


def complete_jsonl_header(header: TraceHeader, given: frozenset, where: str,
                          layer_ids, widest: int) -> None:
    """Fill in the header fields the JSONL header line did not give (``given``) from the
    rows -- the MoE layers are the rows' distinct ``layer_ids``, ``num_layers`` the highest
    of them + 1, ``top_k`` the ``widest`` row -- and validate the header (``where``: the
    header line)."""
    if "moe_layers" not in given:
        header.moe_layers = tuple(sorted(layer_ids))
    if "num_layers" not in given:
        header.num_layers = (max(header.moe_layers) + 1) if header.moe_layers else 0
    if "top_k" not in given:
        header.top_k = widest or 1
    validate_header(header, where)


def dump_jsonl(trace: Trace, f: IO[str], progress=None) -> None:
    """Write the original's JSONL: a header line, then one ``{"t","l","e","s"}`` row per
    dispatch (``p`` holds speculative predictions, an extension of ours). ``progress(i, n)``
    is called every :data:`PROGRESS_EVERY` rows (a progress bar)."""
    write_jsonl(trace.header, trace.dispatches, f, progress, len(trace.dispatches))


def write_jsonl(h: TraceHeader, dispatches: Iterable[Dispatch], f: IO[str], progress=None,
                total: int | None = None) -> None:
    """:func:`dump_jsonl` of a header and its dispatches, read once as they come
    (``progress(i, total)``)."""
    head = h.extra.get("jsonl_header")     # the imported header line, verbatim
    if isinstance(head, dict):             # (files of an earlier version kept the object)
        head = json.dumps(head)
    if not isinstance(head, str) or "\n" in head or "\r" in head:
        extra = {k: v for k, v in h.extra.items() if k != "jsonl_nested_single"}
        head = json.dumps(_jsonl_header_of(TraceHeader(h.model, h.num_layers, h.moe_layers,
                                                       h.num_experts, h.top_k, h.expert_bytes,
                                                       h.source, extra, h.stored_bits)))
    f.write(head + "\n")
    nested = set(h.extra.get("jsonl_nested_single") or ())
    moe = h.moe_layers
    dumps = json.dumps
    for i, d in enumerate(dispatches):
        one = d.tokens == 1 and i not in nested
        if not 0 <= d.layer < len(moe):
            raise ValueError(f"dispatch at step {d.step}: layer {d.layer} outside 0..{len(moe) - 1}")
        row = {"t": d.step, "l": moe[d.layer], "e": d.experts[0] if one else d.experts}
        if d.weights is not None:
            row["s"] = d.weights[0] if one else d.weights
        if d.predictions:
            row["p"] = {str(moe[k]): v for k, v in d.predictions.items() if 0 <= k < len(moe)}
        f.write(dumps(row) + "\n")
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress(i, total)


#: the records a writer writes between two calls of its progress callback
PROGRESS_EVERY = 4096


# ------------------------------------------------------------------ by extension
def kind_of(path: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"a trace path must be a str or os.PathLike, not {type(path).__name__}")
    low = path.lower()
    if low.endswith(NATIVE_EXT):
        return "native"
    if low.endswith(JSONL_EXT) or low.endswith(".json"):
        return "jsonl"
    raise TraceFormatError(f"{path}: unknown trace format; use the {NATIVE_EXT} (native) "
                           f"or {JSONL_EXT} extension")


def load(path: str) -> Trace:
    """Read a trace file (by extension). Raises TraceFormatError with a located message.
    (:func:`mpl.tracecols.load` reads the same trace for a replay, without a Dispatch per
    record where it can.)"""
    return load_versioned(path)[0]


def open_native(path: str) -> IO[bytes]:
    """``path`` opened for reading as a native trace; TraceFormatError when it cannot be."""
    try:
        return open(path, "rb")
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None


def load_versioned(path: str) -> tuple[Trace, int | None]:
    """``load``, plus the native format version the file has (None for JSONL)."""
    if kind_of(path) == "jsonl":
        return load_jsonl(path), None
    with open_native(path) as f:
        return _read_native(f, path)


def _read_native(f: IO[bytes], path: str) -> tuple[Trace, int]:
    """A whole native trace from ``f`` (checked against its end marker) and its version."""
    header, version, crc = read_native_start(f, path)
    return Trace(header, list(iter_native(f, header, path, version=version, crc=crc))), version


def open_stream(path: str) -> tuple[TraceHeader, Iterator[Dispatch]]:
    """Header plus a lazy iterator over the dispatches (native files are streamed; a JSONL
    file is parsed whole, since its header may need the rows)."""
    if kind_of(path) == "jsonl":
        t = load_jsonl(path)
        return t.header, iter(t.dispatches)
    f = open_native(path)
    try:
        header, version, crc = read_native_start(f, path)
    except BaseException:
        f.close()
        raise

    def gen():
        with f:
            yield from iter_native(f, header, path, version=version, crc=crc)
    return header, gen()


def save(trace: Trace, path: str, *, progress=None, **kw) -> None:
    """Write a trace file (by extension). ``progress(i, n)``: called as records are written
    (a progress bar)."""
    if kind_of(path) == "jsonl":
        save_stream(trace.header, trace.dispatches, path, progress=progress,
                    total=len(trace.dispatches))
    else:
        save_native(trace, path, progress=progress, **kw)
    if progress is not None:
        progress(len(trace.dispatches), len(trace.dispatches))


def save_stream(header: TraceHeader, dispatches: Iterable[Dispatch], path: str, *,
                weights: str = "f32", progress=None, total: int | None = None) -> None:
    """Write a trace file (by extension) from a header and its dispatches, read once as they
    come: a trace of any length is written without holding it. ``weights``: the native
    format's float type for router weights (it must hold every weight exactly: a writer
    rounds to it). ``progress(i, total)`` every :data:`PROGRESS_EVERY` records. A failure
    part-way leaves no partial file."""
    if kind_of(path) == "jsonl":
        with atomic_open(path, "w") as f:
            write_jsonl(header, dispatches, f, progress, total)
        return
    with atomic_open(path, "wb") as f:
        with NativeWriter(f, header, weights=weights) as w:
            for i, d in enumerate(dispatches):
                w.write(d)
                if progress is not None and i % PROGRESS_EVERY == 0:
                    progress(i, total)


def to_bytes(trace: Trace, *, weights: str = "auto") -> bytes:
    """The native encoding of ``trace`` in memory (tests, size reports)."""
    weights = _auto_weights(trace, weights)
    b = io.BytesIO()
    with NativeWriter(b, trace.header, weights=weights) as w:
        for d in trace.dispatches:
            w.write(d)
    return b.getvalue()


def from_bytes(data: bytes, path: str = "<bytes>") -> Trace:
    return _read_native(io.BytesIO(data), path)[0]
