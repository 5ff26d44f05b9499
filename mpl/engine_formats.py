"""Routing outputs of serving engines as mpl traces (``mplc trace convert --from FORMAT``),
and merging the traces of several engines (``mplc trace merge``).

Formats (layouts as the engines document them):

* ``vllm-npy``: a ``.npy`` file of one request's ``CompletionOutput.routed_experts``
  (``--enable-return-routed-experts``): shape ``[tokens, layers, top_k]``, dtype uint8 /
  uint16 / int32, ``tokens`` = prompt + generated - 1 (the last sampled token is never
  forwarded), ``layers`` = every decoder layer by its id (dense layers' rows are unused).
* ``vllm-response``: an OpenAI-API response of ``vllm serve`` (completion or chat) whose
  choices carry ``routed_experts``: the base64 of the ``.npy`` bytes of that array (and
  ``prompt_token_ids`` with ``return_token_ids``); one request per choice.
* ``sglang-response``: a ``/generate`` response of SGLang (an object or a list of them)
  with ``meta_info.routed_experts``: the base64 of raw int32 ``[tokens, layers, top_k]``
  (``return_routed_experts``), and ``meta_info.prompt_tokens``.
* ``sglang-distribution``: a ``torch.save`` dump of SGLang's expert-distribution recorder
  (``/dump_expert_distribution_record``). ``per_token`` mode: ``records`` (one per forward
  pass: ``topk_ids_of_layer [layers, tokens, 8]`` physical ids, -1 padded,
  ``extend_seq_lens``) and ``last_physical_to_logical_map [layers, physical]``: a real
  trace, ids mapped to logical experts. ``stat`` mode: ``logical_count [steps, layers,
  experts]`` only: each step becomes one dispatch per layer with the exact set of experts and
  per-expert token counts, tokens rebuilt from the counts (router order within a step is
  lost: by count, then id).

The response formats hold no batching: each request becomes its own steps (its prompt one
prefill step of ``prompt_tokens`` tokens, then one step per token), requests one after the
other. Router weights are not in any of them (``weights`` is None). The model's shape
(``--model``: a preset or a config.json) says which layers are MoE, the expert count and
top-k; every id is checked against it.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import os
import struct

from mpl.trace import Dispatch, Trace, TraceHeader

FORMATS = ("vllm-npy", "vllm-response", "sglang-response", "sglang-distribution")
#: the formats made of requests, each split into a prompt step and one step per generated
#: token: ``prompt_tokens`` applies to them (a distribution dump records its own steps)
PROMPT_FORMATS = ("vllm-npy", "vllm-response", "sglang-response")

#: The most bytes an engine output read here may have (responses are base64 in JSON).
MAX_INPUT_BYTES = 1 << 30


class EngineFormatError(ValueError):
    """The input is not the named engine format (the message names the file and where)."""


# ------------------------------------------------------------------ .npy (no numpy)
_NPY_TYPES = {"u1": ("B", 1), "i1": ("b", 1), "u2": ("H", 2), "i2": ("h", 2),
              "u4": ("I", 4), "i4": ("i", 4), "u8": ("Q", 8), "i8": ("q", 8)}


def read_npy(data: bytes, where: str) -> tuple[tuple[int, ...], list[int]]:
    """(shape, values in C order) of an integer ``.npy`` array (format versions 1-3)."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        raise EngineFormatError(f"{where}: not a .npy array (no \\x93NUMPY magic)")
    major = data[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", data[8:10]), 10
    elif major in (2, 3):
        (hlen,), start = struct.unpack("<I", data[8:12]), 12
    else:
        raise EngineFormatError(f"{where}: .npy format version {major} is not supported")
    try:
        meta = ast.literal_eval(data[start:start + hlen].decode("latin1"))
        descr, fortran, shape = meta["descr"], meta["fortran_order"], tuple(meta["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise EngineFormatError(f"{where}: bad .npy header") from None
    if not isinstance(descr, str) or descr[1:] not in _NPY_TYPES or descr[0] not in "<|>=":
        raise EngineFormatError(f"{where}: expert ids must be an integer array, the .npy has "
                                f"dtype {descr!r}")
    code, size = _NPY_TYPES[descr[1:]]
    order = ">" if descr[0] == ">" else "<"
    n = 1
    for d in shape:
        n *= int(d)
    body = data[start + hlen:]
    if len(body) < n * size:
        raise EngineFormatError(f"{where}: the .npy is truncated ({len(body)} bytes of data, "
                                f"shape {shape} needs {n * size})")
    values = list(struct.unpack(f"{order}{n}{code}", body[:n * size]))
    if fortran and len(shape) > 1:
        values = _c_order(values, shape)
    return shape, values


def _c_order(values: list[int], shape: tuple[int, ...]) -> list[int]:
    import itertools
    strides, s = [], 1
    for d in shape:                     # Fortran strides
        strides.append(s)
        s *= d
    return [values[sum(i * st for i, st in zip(idx, strides))]
            for idx in itertools.product(*(range(d) for d in shape))]


def _b64(text, where: str) -> bytes:
    if not isinstance(text, str):
        raise EngineFormatError(f"{where}: routed_experts must be a base64 string, got "
                                f"{type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EngineFormatError(f"{where}: routed_experts is not valid base64") from None


# ------------------------------------------------------------------ arrays -> dispatches
def _checked(row: list[int], s, where: str) -> list[int]:
    """One token's ids: top-k of them, each an expert the model has."""
    if len(row) != s.top_k:
        raise EngineFormatError(f"{where}: {len(row)} experts, the model routes top-{s.top_k}")
    for e in row:
        if not 0 <= e < s.num_experts:
            raise EngineFormatError(f"{where}: expert id {e} outside 0..{s.num_experts - 1} "
                                    f"({s.name} has {s.num_experts} experts)")
    return list(row)


class _Builder:
    """Dispatches from [tokens, layers, top_k] arrays, checked against the model shape."""

    def __init__(self, shape) -> None:
        self.shape = shape
        self.dispatches: list[Dispatch] = []
        self.step = 0
        self.requests: list[list] = []

    def request(self, dims: tuple[int, ...], flat: list[int], prompt_tokens: int | None,
                where: str, rid: str) -> None:
        s = self.shape
        if len(dims) != 3:
            raise EngineFormatError(f"{where}: routed experts must be [tokens, layers, top_k], "
                                    f"got shape {list(dims)}")
        tokens, layers, k = dims
        if layers != s.num_layers:
            raise EngineFormatError(f"{where}: the array has {layers} layers, the model "
                                    f"({s.name}) has {s.num_layers} decoder layers")
        if k != s.top_k:
            raise EngineFormatError(f"{where}: the array has top-{k}, the model ({s.name}) "
                                    f"routes top-{s.top_k}")
        if tokens == 0:
            return
        p = tokens if prompt_tokens is None else max(1, min(int(prompt_tokens), tokens))
        spans = [(0, p)] + [(t, t + 1) for t in range(p, tokens)]
        for a, b in spans:
            for ordinal, layer in enumerate(s.moe_layers):
                rows = []
                for t in range(a, b):
                    off = (t * layers + layer) * k
                    rows.append(_checked(flat[off:off + k], s, f"{where}: token {t}, layer {layer}"))
                self.dispatches.append(Dispatch(self.step, ordinal, rows, None))
            self.requests.append([[rid, b - a]])
            self.step += 1

    def trace(self, source: str, engine: str) -> Trace:
        return _trace(self.shape, self.dispatches, self.requests, source, engine)


def _read(path: str, binary: bool = True):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise EngineFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise EngineFormatError(f"{path}: larger than {MAX_INPUT_BYTES >> 20} MiB")
    if binary:
        return data
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise EngineFormatError(f"{path}: not a JSON response ({e})") from None


def from_vllm_npy(path: str, shape, *, prompt_tokens: int | None = None) -> Trace:
    b = _Builder(shape)
    dims, flat = read_npy(_read(path), path)
    b.request(dims, flat, prompt_tokens, path, "0")
    return b.trace(f"vllm routed_experts {os.path.basename(path)}", "vllm")


def from_vllm_response(path: str, shape, *, prompt_tokens: int | None = None) -> Trace:
    doc = _read(path, binary=False)
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices:
        raise EngineFormatError(f"{path}: a vLLM response has a 'choices' list")
    b = _Builder(shape)
    for i, c in enumerate(choices):
        where = f"{path}: choices[{i}]"
        if not isinstance(c, dict) or c.get("routed_experts") is None:
            raise EngineFormatError(f"{where}: no routed_experts (start vllm serve with "
                                    "--enable-return-routed-experts)")
        dims, flat = read_npy(_b64(c["routed_experts"], where), where)
        p = prompt_tokens
        if p is None and isinstance(c.get("prompt_token_ids"), list):
            p = len(c["prompt_token_ids"])
        if p is None and isinstance(doc.get("prompt_token_ids"), list):
            p = len(doc["prompt_token_ids"])
        b.request(dims, flat, p, where, f"{doc.get('id', 'response')}/{c.get('index', i)}")
    return b.trace(f"vllm response {os.path.basename(path)}", "vllm")


def from_sglang_response(path: str, shape, *, prompt_tokens: int | None = None) -> Trace:
    doc = _read(path, binary=False)
    items = doc if isinstance(doc, list) else [doc]
    b = _Builder(shape)
    for i, r in enumerate(items):
        where = f"{path}: [{i}]" if isinstance(doc, list) else path
        meta = r.get("meta_info") if isinstance(r, dict) else None
        if not isinstance(meta, dict) or meta.get("routed_experts") is None:
            raise EngineFormatError(f"{where}: no meta_info.routed_experts (start SGLang with "
                                    "--enable-return-routed-experts and send "
                                    "\"return_routed_experts\": true)")
        raw = _b64(meta["routed_experts"], where)
        per_token = shape.num_layers * shape.top_k * 4
        if len(raw) % per_token:
            raise EngineFormatError(
                f"{where}: routed_experts has {len(raw)} bytes, not a whole number of tokens of "
                f"int32 [{shape.num_layers} layers, top-{shape.top_k}] ({per_token} bytes each)")
        n = len(raw) // 4
        flat = list(struct.unpack(f"<{n}i", raw))
        p = prompt_tokens if prompt_tokens is not None else meta.get("prompt_tokens")
        if p is not None and (isinstance(p, bool) or not isinstance(p, int)):
            raise EngineFormatError(f"{where}: meta_info.prompt_tokens must be an integer")
        b.request((n * 4 // per_token, shape.num_layers, shape.top_k), flat, p, where,
                  str(meta.get("id", i)))
    return b.trace(f"sglang response {os.path.basename(path)}", "sglang")


def _tolist(x):
    return x.tolist() if hasattr(x, "tolist") else x


def from_sglang_distribution(path: str, shape, *, prompt_tokens: int | None = None) -> Trace:
    try:
        import torch
    except ImportError:
        raise EngineFormatError(f"{path}: an SGLang expert-distribution dump is a torch.save "
                                "file: reading it needs torch, which is not installed: "
                                "pip install 'mpl-policylang[hf]'") from None
    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:
        raise EngineFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    except Exception:    # torch raises many kinds, in its own words, for a file not its format
        raise EngineFormatError(f"{path}: not a readable SGLang expert-distribution file: not "
                                "a torch.save dump of tensors, lists and dicts (it is read "
                                "without running any code it holds)") from None
    if not isinstance(doc, dict):
        raise EngineFormatError(f"{path}: an expert-distribution dump is a dict")
    s = shape
    if "records" in doc:
        return _distribution_per_token(doc, s, path)
    if "logical_count" in doc:
        return _distribution_stat(doc, s, path)
    raise EngineFormatError(f"{path}: neither 'records' (per_token mode) nor 'logical_count' "
                            "(stat mode): not an SGLang expert-distribution dump")


def _distribution_per_token(doc: dict, s, path: str) -> Trace:
    p2l = _tolist(doc.get("last_physical_to_logical_map"))
    dispatches, batches = [], []
    for i, rec in enumerate(doc["records"]):
        where = f"{path}: records[{i}]"
        ids = _tolist(rec.get("topk_ids_of_layer")) if isinstance(rec, dict) else None
        if not isinstance(ids, list) or len(ids) != s.num_layers:
            raise EngineFormatError(f"{where}: topk_ids_of_layer must be [{s.num_layers} layers, "
                                    "tokens, k]")
        seq = rec.get("extend_seq_lens")
        step = len(batches)
        for ordinal, layer in enumerate(s.moe_layers):
            rows = []
            for t, row in enumerate(ids[layer]):
                chosen = [int(e) for e in row if int(e) >= 0]
                if p2l is not None:
                    chosen = [int(p2l[layer][e]) for e in chosen]
                rows.append(_checked(chosen, s, f"{where}: token {t}, layer {layer}"))
            if rows:
                dispatches.append(Dispatch(step, ordinal, rows, None))
        lens = _tolist(seq) if seq is not None else None
        batches.append([[f"{step}.{j}", int(n)] for j, n in enumerate(lens)] if lens
                       else [[str(step), len(ids[s.moe_layers[0]])]])
    return _trace(s, dispatches, batches, f"sglang expert distribution (per_token) "
                                          f"{os.path.basename(path)}")


def _distribution_stat(doc: dict, s, path: str) -> Trace:
    counts = _tolist(doc["logical_count"])
    dispatches, batches = [], []
    for i, per_layer in enumerate(counts):
        if len(per_layer) != s.num_layers:
            raise EngineFormatError(f"{path}: logical_count[{i}] has {len(per_layer)} layers, the "
                                    f"model has {s.num_layers}")
        if not any(any(c) for c in per_layer):
            continue                       # an unused slot of the circular buffer
        step = len(batches)
        tokens = 0
        for ordinal, layer in enumerate(s.moe_layers):
            c = [int(x) for x in per_layer[layer]]
            if len(c) != s.num_experts:
                raise EngineFormatError(f"{path}: logical_count[{i}] layer {layer} has {len(c)} "
                                        f"experts, the model has {s.num_experts}")
            rows = rows_from_counts(c, s.top_k, f"{path}: logical_count[{i}] layer {layer}")
            tokens = max(tokens, len(rows))
            if rows:
                dispatches.append(Dispatch(step, ordinal, rows, None))
        batches.append([[str(step), tokens]])
    return _trace(s, dispatches, batches, f"sglang expert distribution (stat: counts only) "
                                          f"{os.path.basename(path)}")


def rows_from_counts(counts: list[int], k: int, where: str) -> list[list[int]]:
    """Token rows of k distinct experts in which expert e appears counts[e] times: experts by
    count (then id) dealt round-robin over sum/k tokens. Exists iff the total is a multiple of
    k and no expert exceeds the token count."""
    total = sum(counts)
    if total == 0:
        return []
    if total % k or max(counts) > total // k or min(counts) < 0:
        raise EngineFormatError(f"{where}: counts {counts} are not top-{k} routing of whole "
                                "tokens")
    n = total // k
    order = sorted(range(len(counts)), key=lambda e: (-counts[e], e))
    seq = [e for e in order for _ in range(counts[e])]
    rows = [[] for _ in range(n)]
    for i, e in enumerate(seq):
        rows[i % n].append(e)
    return rows


def _trace(s, dispatches, batches, source: str, engine: str = "sglang") -> Trace:
    if not dispatches:
        raise EngineFormatError(f"{source}: no routed tokens in the input")
    h = TraceHeader(model=s.name, num_layers=s.num_layers, moe_layers=tuple(s.moe_layers),
                    num_experts=s.num_experts, top_k=s.top_k, expert_bytes=s.expert_bytes,
                    source=source, extra={"engine": engine, "batches": batches})
    return Trace(h, dispatches)


READERS = {"vllm-npy": from_vllm_npy, "vllm-response": from_vllm_response,
           "sglang-response": from_sglang_response, "sglang-distribution": from_sglang_distribution}


def load(path: str, fmt: str, shape, *, prompt_tokens: int | None = None) -> Trace:
    if fmt not in READERS:
        raise EngineFormatError(f"unknown engine format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return READERS[fmt](path, shape, prompt_tokens=prompt_tokens)


# ------------------------------------------------------------------ merge
def merge(traces: list[Trace], names: list[str] | None = None) -> Trace:
    """One trace of several (e.g. the data-parallel engines' traces): the same model shape
    required; steps renumbered one trace after the other; each step's batch mix kept with
    its request ids prefixed by the trace's name."""
    if not traces:
        raise ValueError("merge needs at least one trace")
    names = names or [str(i) for i in range(len(traces))]
    h0 = traces[0].header
    key = lambda h: (h.num_layers, tuple(h.moe_layers), h.num_experts, h.top_k)  # noqa: E731
    for t, n in zip(traces[1:], names[1:]):
        if key(t.header) != key(h0):
            a, b = key(h0), key(t.header)
            raise ValueError(f"{n}: a different model shape ({b[2]} experts, top-{b[3]}, MoE layers "
                             f"{list(b[1])}) than {names[0]} ({a[2]} experts, top-{a[3]}, MoE layers "
                             f"{list(a[1])}): traces of one model only")
    out: list[Dispatch] = []
    batches: list = []
    offset = 0
    for t, n in zip(traces, names):
        steps = sorted({d.step for d in t.dispatches})
        renum = {s: offset + i for i, s in enumerate(steps)}
        for d in t.dispatches:
            out.append(Dispatch(renum[d.step], d.layer, d.experts, d.weights, d.predictions))
        tb = t.header.extra.get("batches")
        if isinstance(tb, list) and len(tb) == len(steps):
            batches.extend([[f"{n}:{r}", c] for r, c in b] for b in tb)
        else:
            batches.extend([[f"{n}", 0]] for _ in steps)
        offset += len(steps)
    extra = {"merged_from": [{"name": n, "source": t.header.source,
                              "steps": len({d.step for d in t.dispatches})}
                             for t, n in zip(traces, names)], "batches": batches}
    eb = h0.expert_bytes if all(t.header.expert_bytes == h0.expert_bytes for t in traces) else 0
    h = TraceHeader(model=h0.model, num_layers=h0.num_layers, moe_layers=h0.moe_layers,
                    num_experts=h0.num_experts, top_k=h0.top_k, expert_bytes=eb,
                    source=f"merged from {len(traces)} traces", extra=extra)
    return Trace(h, out)
