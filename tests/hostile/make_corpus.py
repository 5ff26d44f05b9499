"""The hostile-input corpus: policy files with extreme values and trace files that are damaged,
wide or crafted, generated deterministically (no binary file is kept in the repository).

    python tests/hostile/make_corpus.py DIR        # writes DIR/*.moe, DIR/*.mpltrace, ...
                                                   # and DIR/manifest.json

Each :class:`Case` is one file and the ``mplc`` commands to run on it (``tests/hostile/run_all.py``
runs them on both backends under a memory and a time limit; ``tests/test_hostile_inputs.py``
runs the cases marked ``fast``). What the corpus covers:

* **policies**: every integer and real parameter of the schema (read from ``mpl.schema``,
  so a new parameter is covered without an edit here) at 0, -1, 1, 10^9, 2^31, 2^62, 2^63,
  2^64, a 401-digit integer, 1e300, -1e300, 1e-300, 1e400 (an infinity once read), ``inf``
  and ``nan`` (names), each allowed unit with 2^64 and 1e300, and the range's bounds and
  just past them, each in the context that makes the parameter take effect (``history_window``
  with ``strategy = history``, ...); the same values set by an adapt action and as a
  conditional value; ``for N accesses|steps|tokens`` durations up to 2^64 and 1e400;
* **native traces**: a small valid trace with every record kind (decode, prefill, predictions,
  weights) with one bit flipped in every byte of the fixed header, the first records and the
  end marker and in a sample of the header JSON; record fields rewritten to their extremes
  with the checksum recomputed (so the record checks, not the CRC, must catch them);
  truncations at every boundary; headers with extreme fields (valid checksum); wide headers
  (4,096 x 65,536, 1,024 x 65,536, 65,536 x 65,536 layers x experts ... with one dispatch, and
  with scattered dispatches); huge top-k (top-255 of 300 experts);
* **JSONL traces** with hostile headers and rows (huge integers, infinities, deep nesting,
  wide rows, huge layer ids).
"""

from __future__ import annotations

import json
import random
import struct
import sys
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mpl import schema, traceio  # noqa: E402
from mpl.trace import Dispatch, Trace, TraceHeader  # noqa: E402


@dataclass
class Case:
    """One file of the corpus and what to run on it."""
    name: str                   # file name inside the corpus folder
    kind: str                   # "policy" or "trace"
    group: str                  # what it exercises (for the summary)
    #: the commands (argument lists of ``mplc``; "{f}" is this file, other names are corpus files)
    runs: list[list[str]] = field(default_factory=list)
    #: "error": every command must exit 1; "ok": exit 0; "any": 0 or 1; "fits": exit 0, or
    #: 1 for a relation with another value or the model (an MPL3xx or MPL5xx diagnostic)
    expect: str = "any"
    #: text the output of an "error" case must contain (the value, the limit), lower-cased
    mention: list[str] = field(default_factory=list)
    fast: bool = False          # in the pytest subset


# ------------------------------------------------------------------ values
BIG = {
    "0": 0, "-1": -1, "1": 1, "1000000000": 10 ** 9, "2147483648": 2 ** 31,
    "4611686018427387904": 2 ** 62, "9223372036854775808": 2 ** 63,
    "18446744073709551616": 2 ** 64,
}
HUGE_INT = "1" + "0" * 400            # a 401-digit integer
REALS = ("1e300", "-1e300", "1e-300", "1e400")
NAMES = ("inf", "nan")

#: the blocks and parameters that make a parameter take effect (its only_with)
CONTEXT = {
    "cache.frequency_decay": {"cache": {"eviction": "lfu"}},
    "cache.decay_interval": {"cache": {"eviction": "lfu"}},
    "cache.freq_threshold": {"cache": {"eviction": "frequency_threshold"}},
    "cache.freq_window": {"cache": {"eviction": "frequency_threshold"}},
    "cache.score_ema_alpha": {"cache": {"eviction": "score"}},
    "cache.memory_headroom": {"cache": {"memory_threshold": "0.9"}},
    "cache.memory_budget_gb": {"cache": {"memory_threshold": "0.9"}},
    "cache.memory_threshold": {"cache": {"memory_headroom": "0.01"}},
    "prefetch.budget": {"prefetch": {"strategy": "history"}},
    "prefetch.lookahead": {"prefetch": {"strategy": "affinity"}},
    "prefetch.affinity_threshold": {"prefetch": {"strategy": "affinity"}},
    "prefetch.history_window": {"prefetch": {"strategy": "history"}},
    "schedule.offload_threshold_ms": {"schedule": {"mode": "hybrid"}},
    "monitor.window": {"monitor": {"metrics": "[hit_rate]"},
                       "adapt": "when hit_rate < 0.2 { eviction = lfu }"},
    "monitor.log_interval": {"monitor": {"metrics": "[hit_rate]"}},
    "per_layer.entropy_window": {"per_layer": {"allocation": "entropy", "rebalance_interval": "7"}},
    "per_layer.rebalance_interval": {"per_layer": {"allocation": "frequency"}},
    "per_layer.total_budget": {"per_layer": {"min_capacity": "1"}},
    "per_layer.min_capacity": {"per_layer": {}},
    "per_layer.max_capacity": {"per_layer": {"min_capacity": "1"}},
}

NUMERIC = (schema.INT, schema.NUMBER, schema.COUNT, schema.SLOTS_OR_SIZE, schema.INT_LIST)


def numeric_params() -> list[schema.Param]:
    return [p for p in schema.PARAMS.values() if p.type in NUMERIC]


def _lit(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e18:
        return str(int(x))
    return repr(float(x))


def bound_values(p: schema.Param) -> list[tuple[str, bool]]:
    """(literal, inside the range) at and just past each closed bound of ``p``'s range."""
    out = []
    integral = p.type in (schema.INT, schema.COUNT, schema.SLOTS_OR_SIZE, schema.INT_LIST)
    step = 1 if integral else None
    if p.min is not None:
        out.append((_lit(p.min), not p.min_open))
        below = p.min - 1 if step else (p.min - abs(p.min) * 0.5 - 0.5)
        out.append((_lit(below), False))
    if p.max is not None:
        out.append((_lit(p.max), not p.max_open))
        above = p.max + 1 if step else p.max * 1.5 + 0.5
        out.append((_lit(above), False))
    return out


def in_range(p: schema.Param, x: float) -> bool:
    if p.min is not None and (x <= p.min if p.min_open else x < p.min):
        return False
    if p.max is not None and (x >= p.max if p.max_open else x > p.max):
        return False
    return True


def policy_text(key: str, literal: str, *, how: str = "param") -> str:
    """A policy where ``key`` is ``literal`` (``how``: "param", "adapt" — set by an adapt
    action —, "conditional" — ``a : literal when ...``), in ``key``'s context."""
    p = schema.PARAMS[key]
    blocks: dict[str, dict[str, str]] = {"cache": {"capacity": "8"}}
    adapt_rules = []
    ctx = CONTEXT.get(key, {})
    for b, params in ctx.items():
        if b == "adapt":
            adapt_rules.append(params)
            continue
        blocks.setdefault(b, {}).update(params)
    value = f"[{literal}]" if p.type == schema.INT_LIST else literal
    if how == "param":
        blocks.setdefault(p.block, {})[p.name] = value
    elif how == "adapt":
        adapt_rules.append(f"when hit_rate < 0.99 {{ {p.name} = {value} }}")
    else:
        base = blocks.get(p.block, {}).get(p.name) or _default_literal(p)
        blocks.setdefault(p.block, {})[p.name] = f"{base} : {value} when hit_rate < 0.99"
    lines = ["policy hostile {"]
    for b, params in blocks.items():
        lines.append(f"    {b} {{")
        lines += [f"        {n} = {v}" for n, v in params.items()]
        lines.append("    }")
    if adapt_rules:
        lines.append("    adapt {")
        lines += [f"        {r}" for r in adapt_rules]
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _default_literal(p: schema.Param) -> str:
    d = p.default
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return _lit(d)
    return {"cache.capacity": "8", "cache.memory_threshold": "0.9", "cache.ttl": "100",
            "per_layer.total_budget": "64", "cache.expert_size_gb": "1"}.get(p.key, "1")


def _verdict(p: schema.Param, literal: str) -> str:
    """"ok" (in range), "range" (a number of the right kind outside the range) or "type"
    (a name, a fraction where an integer is expected, an infinity) for ``literal`` without a
    unit."""
    if literal in NAMES:
        return "type"
    try:
        x = int(literal)
    except ValueError:
        x = float(literal)
        if x != x or abs(x) == float("inf"):
            return "type"
        if p.type != schema.NUMBER and not x.is_integer():
            return "type"
    return "ok" if in_range(p, x) else "range"


def policy_cases() -> list[tuple[str, str, str, str | None, list[str]]]:
    """(file stem, text, group, expected outcome, what an error names)."""
    out = []
    for p in numeric_params():
        stem = p.key.replace(".", "_")
        values = list(BIG) + [HUGE_INT, *REALS, *NAMES] + [b for b, _ in bound_values(p)]
        values += [f"{lit} {u}" for u in p.units for lit in ("18446744073709551616", "1e300")]
        seen = set()
        for lit in values:
            if lit in seen:
                continue
            seen.add(lit)
            number = lit.split()[0]
            v = _verdict(p, number) if " " not in lit else "range"
            if " " in lit and p.type == schema.SLOTS_OR_SIZE:
                # a size is as many experts as fit (at most every expert: the slot pool stops
                # there); one beyond any float is an error
                nbytes = float(number) * schema.UNITS[lit.split()[1]].factor
                v = "ok" if nbytes != float("inf") else "type"
            # a value in the range may still break a relation with another parameter or
            # the trace's model (MPL3xx, MPL5xx: headroom above threshold, pin 65535 of 8)
            expect = "fits" if v == "ok" else "error"
            mention = [p.name]
            if len(number) < 40:
                mention.append(number.lower())
            if v == "range" and p.range_text():
                mention.append(p.range_text().lower())
            tag = (lit.replace(" ", "_").replace("-", "m").replace(".", "p").replace("+", "")[:24])
            name = f"{stem}__{tag}"
            out.append((name, policy_text(p.key, lit), "policy value", expect, mention))
            if p.conditional and lit in ("18446744073709551616", "1e300", "-1", "0",
                                         *(b for b, _ in bound_values(p))):
                out.append((f"{name}__adapt", policy_text(p.key, lit, how="adapt"), "adapt value",
                            expect, mention[:2]))
            if p.conditional and lit in ("18446744073709551616", "1e300"):
                out.append((f"{name}__cond", policy_text(p.key, lit, how="conditional"),
                            "conditional value", expect, mention[:2]))
    for unit in schema.RULE_DURATION_UNITS:
        for lit in ("0", "1", "1000000000", "2147483648", "4611686018427387904",
                    "9223372036854775808", "18446744073709551616", HUGE_INT, "1e300", "1e400", "-1"):
            tag = lit[:24].replace("-", "m").replace(".", "p").replace("+", "")
            text = ("policy hostile {\n    cache { capacity = 8 }\n    monitor { metrics = [hit_rate] }\n"
                    f"    adapt {{\n        when hit_rate < 0.99 for {lit} {unit} {{ eviction = lfu }}\n"
                    "    }\n}\n")
            x = float(lit)
            bad = x < 0 or x > DURATION_MAX
            mention = ["for"] + ([lit] if len(lit) < 40 else [])
            out.append((f"adapt_for__{unit}__{tag}", text, "adapt duration", "error" if bad else "ok",
                        mention))
    return out


#: the longest adapt-rule duration the checker accepts (mpl.checker.values.check_duration)
DURATION_MAX = getattr(schema, "RULE_DURATION_MAX", 10 ** 9)


# ------------------------------------------------------------------ native traces (raw)
_FIXED = struct.Struct("<8sHHI")
_REC = struct.Struct("<BIHHB")
_END = struct.Struct("<8sQI")


def native_bytes(header: dict, records: list[bytes], *, version: int = 2, end: bool = True) -> bytes:
    """A native file with any header JSON (no validation) and raw records, with the end
    marker's record count and CRC-32 computed."""
    blob = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    data = _FIXED.pack(b"MPLTRACE", version, 0, len(blob)) + blob + b"".join(records)
    if end and version >= 2:
        data += _END.pack(b"MPLTEND\x00", len(records), zlib.crc32(data))
    return data


def record(step: int, layer: int, ids: list[list[int]], *, wide: bool, weights=None,
           wcode: int = 0, preds: dict | None = None, k: int | None = None,
           tokens: int | None = None) -> bytes:
    """One raw record (fields may be given out of their usual relation: ``k``, ``tokens``)."""
    flat = [e for row in ids for e in row]
    k = len(ids[0]) if (k is None and ids) else (k or 0)
    tokens = len(ids) if tokens is None else tokens
    idc = "H" if wide else "B"
    rflags = wcode | (0x04 if preds else 0)
    parts = [_REC.pack(rflags, step, layer, tokens, k), struct.pack(f"<{len(flat)}{idc}", *flat)]
    if wcode:
        fmt = {1: "e", 2: "f", 3: "d"}[wcode]
        parts.append(struct.pack(f"<{len(flat)}{fmt}", *[w for row in weights for w in row]))
    if preds:
        parts.append(bytes((len(preds),)))
        for layer_id, pids in preds.items():
            parts.append(struct.pack("<HB", layer_id, len(pids)))
            parts.append(struct.pack(f"<{len(pids)}{idc}", *pids))
    return b"".join(parts)


def header(num_layers: int, num_experts: int, top_k: int, *, moe=None, expert_bytes=1 << 20,
           model="hostile", **change) -> dict:
    """A header dict; ``change`` replaces fields after the fact (``num_layers=2**64``)."""
    h = {"model": model, "num_layers": num_layers,
         "moe_layers": list(range(num_layers)) if moe is None else moe,
         "num_experts": num_experts, "top_k": top_k, "expert_bytes": expert_bytes,
         "source": "tests/hostile/make_corpus.py", "extra": {}}
    h.update(change)
    return h


def small_trace() -> tuple[dict, list[bytes]]:
    """4 MoE layers x 16 experts, top-2, float16 weights; a prefill record, decode records and
    a record with predictions (every record kind the format has)."""
    rng = random.Random(11)
    h = header(4, 16, 2)
    recs = [record(0, 0, [[1, 2], [3, 1], [2, 5]], wide=False,
                   weights=[[0.5, 0.25], [0.5, 0.5], [0.75, 0.25]], wcode=1)]
    for step in range(1, 6):
        for layer in range(4):
            ids = rng.sample(range(16), 2)
            preds = {(layer + 1) % 4: [ids[0], 7]} if step == 3 else None
            recs.append(record(step, layer, [ids], wide=False, weights=[[0.5, 0.5]], wcode=1,
                               preds=preds))
    return h, recs


def one_dispatch(L: int, E: int, k: int = 8, *, layer: int | None = None, dispatches: int = 1,
                 seed: int = 5) -> bytes:
    """A header of ``L`` layers x ``E`` experts with a few dispatches (the last layer, the
    highest expert ids, unless ``dispatches`` > 1: then random layers and experts)."""
    rng = random.Random(seed)
    wide = E > 256
    recs = []
    for i in range(dispatches):
        if dispatches == 1:
            lay = L - 1 if layer is None else layer
            ids = list(range(E - 1, E - 1 - k, -1))
        else:
            lay = rng.randrange(L)
            ids = rng.sample(range(E), k)
        recs.append(record(i // max(1, min(L, 64)), lay, [ids], wide=wide))
    moe = list(range(L))
    return native_bytes(header(L, E, k, moe=moe), recs)


def topk_trace(steps: int, layers: int = 8, experts: int = 300, k: int = 255, seed: int = 3) -> Trace:
    """Top-``k`` of ``experts`` routing (router order random, weights float16-exact)."""
    rng = random.Random(seed)
    h = TraceHeader("topk-hostile", layers, tuple(range(layers)), experts, k, 1 << 20,
                    "tests/hostile/make_corpus.py")
    t = Trace(h)
    for s in range(steps):
        for layer in range(layers):
            ids = rng.sample(range(experts), k)
            t.dispatches.append(Dispatch(s, layer, [ids], [[0.5] * k]))
    return t


# ------------------------------------------------------------------ the corpus
BASE_POLICIES = {
    "base_lru.moe": "policy base_lru {\n    cache { capacity = 8 }\n}\n",
    "base_history.moe": ("policy base_history {\n    cache {\n        capacity = 16\n        eviction = lfu\n"
                         "    }\n    prefetch {\n        strategy = history\n        budget = 4\n    }\n}\n"),
    "base_layers.moe": ("policy base_layers {\n    cache { capacity = 4 }\n    per_layer {\n"
                        "        allocation = entropy\n        rebalance_interval = 10\n    }\n"
                        "    monitor { metrics = [hit_rate] }\n"
                        "    adapt {\n        when hit_rate < 0.3 { trigger flush }\n    }\n}\n"),
    "base_belady.moe": "policy base_belady {\n    cache {\n        capacity = 8\n        eviction = belady\n    }\n}\n",
    "base_ft.moe": ("policy base_ft {\n    cache {\n        capacity = 8\n        eviction = frequency_threshold\n"
                    "        ttl = 50\n    }\n    schedule { mode = cpu_fallback }\n}\n"),
}
ALL_BASES = tuple(BASE_POLICIES)
BASE_TRACE = "base.mpltrace"


def _replays(trace: str, bases=ALL_BASES) -> list[list[str]]:
    return [["replay", b, "--trace", trace, "--no-progress"] for b in bases]


#: the policy files of the fast subset (the values of the sanitizer's findings)
FAST_POLICIES = {
    "prefetch_history_window__4611686018427387904", "prefetch_history_window__1000000000",
    "prefetch_history_window__18446744073709551616__adapt",
    "per_layer_entropy_window__4611686018427387904", "monitor_window__4611686018427387904",
    "cache_ttl__18446744073709551616_ste", "cache_decay_interval__18446744073709551616__cond",
    "monitor_log_interval__18446744073709551616", "per_layer_rebalance_interval__18446744073709551616",
    "cache_expert_size_gb__1e300", "cache_memory_budget_gb__1e300_GiB",
    "adapt_for__accesses__18446744073709551616", "adapt_for__steps__18446744073709551616",
}


def build(dest: Path | None) -> list[Case]:
    """The corpus's cases, their files written into ``dest`` (None: the cases only)."""
    cases: list[Case] = []
    if dest is not None:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)

    def write(name: str, data: bytes | str) -> None:
        if dest is None:
            return
        p = dest / name
        if isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)

    def save(trace, name: str) -> None:
        if dest is not None:
            traceio.save(trace, str(dest / name))

    # the base files the cases run against
    for name, text in BASE_POLICIES.items():
        write(name, text)
    from mpl.sim import synth
    save(synth.synthesize("mixtral-8x7b", steps=40, seed=1), BASE_TRACE)
    cases.append(Case(BASE_TRACE, "trace", "sanity", _replays("{f}"), "ok", fast=True))

    # ---- policies
    for stem, text, group, expect, mention in policy_cases():
        name = stem + ".moe"
        write(name, text)
        fast = stem in FAST_POLICIES
        cases.append(Case(name, "policy", group,
                          [["check", "{f}"], ["replay", "{f}", "--trace", BASE_TRACE, "--no-progress"]],
                          expect, [m.lower() for m in mention] if expect == "error" else [], fast))
    # the schema's largest values together, on a wide trace as well as the base one
    maxed = ("policy maxed {\n    cache {\n        capacity = 65536\n        eviction = lfu\n"
             f"        decay_interval = {_lit(schema.PARAMS['cache.decay_interval'].max or 10**9)}\n"
             f"        ttl = {_lit(schema.PARAMS['cache.ttl'].max or 10**9)} steps\n    }}\n"
             f"    prefetch {{\n        strategy = history\n        budget = 64\n"
             f"        history_window = {_lit(schema.PARAMS['prefetch.history_window'].max or 10**9)}\n    }}\n"
             f"    monitor {{\n        metrics = [hit_rate]\n"
             f"        window = {_lit(schema.PARAMS['monitor.window'].max or 10**9)}\n"
             f"        log_interval = {_lit(schema.PARAMS['monitor.log_interval'].max or 10**9)}\n    }}\n"
             "    adapt {\n        when hit_rate < 0.99 for 1000 accesses { budget = 32 }\n    }\n}\n")
    write("maxed.moe", maxed)
    maxed_layers = ("policy maxed_layers {\n    cache { capacity = 64 }\n    per_layer {\n"
                    "        allocation = entropy\n"
                    f"        entropy_window = {_lit(schema.PARAMS['per_layer.entropy_window'].max or 10**9)}\n"
                    f"        rebalance_interval = {_lit(schema.PARAMS['per_layer.rebalance_interval'].max or 10**9)}\n"
                    "    }\n}\n")
    write("maxed_layers.moe", maxed_layers)
    cases.append(Case("maxed.moe", "policy", "largest values",
                      [["check", "{f}"], ["replay", "{f}", "--trace", BASE_TRACE, "--no-progress"]],
                      "ok", fast=True))
    cases.append(Case("maxed_layers.moe", "policy", "largest values",
                      [["check", "{f}"], ["replay", "{f}", "--trace", BASE_TRACE, "--no-progress"]],
                      "ok", fast=True))

    # ---- native: bit flips and truncations of a small trace with every record kind
    h, recs = small_trace()
    good = native_bytes(h, recs)
    write("small.mpltrace", good)
    cases.append(Case("small.mpltrace", "trace", "sanity", _replays("{f}"), "ok", fast=True))
    hlen = struct.unpack_from("<I", good, 12)[0]
    body = 16 + hlen
    rec_end = body + sum(len(r) for r in recs[:3])
    positions = (list(range(0, 16)) + list(range(16, body, 7)) + list(range(body, rec_end))
                 + list(range(len(good) - 20, len(good))))
    for pos in positions:
        flipped = bytearray(good)
        flipped[pos] ^= 1 << (pos % 8)
        name = f"flip_{pos:05d}.mpltrace"
        write(name, bytes(flipped))
        cases.append(Case(name, "trace", "bit flip", _replays("{f}", ("base_lru.moe",)),
                          "error", fast=pos in (2, 9, 13, body + 1, len(good) - 3)))
    # a flipped record byte with the end marker recomputed: the record checks must catch it
    for pos in range(body, rec_end):
        flipped = bytearray(good[:-_END.size])
        flipped[pos] ^= 0xFF
        data = bytes(flipped) + _END.pack(b"MPLTEND\x00", len(recs), zlib.crc32(bytes(flipped)))
        name = f"reflip_{pos:05d}.mpltrace"
        write(name, data)
        cases.append(Case(name, "trace", "bit flip, checksum fixed",
                          _replays("{f}", ("base_lru.moe", "base_history.moe")), "any",
                          fast=pos - body in (0, 6, 8, 9)))
    cuts = sorted({0, 1, 7, 8, 11, 12, 15, 16, body - 1, body, body + 1, len(good) - 1,
                   len(good) - _END.size, len(good) - _END.size + 8,
                   *[body + sum(len(r) for r in recs[:i]) for i in range(1, len(recs))]})
    for n in cuts:
        name = f"cut_{n:05d}.mpltrace"
        write(name, good[:n])
        cases.append(Case(name, "trace", "truncation", _replays("{f}", ("base_lru.moe",)),
                          "error", ["cut|truncated|end marker|magic|empty"],
                          fast=n in (0, 12, body + 1, len(good) - 1)))
    # version 1 (no end marker) with bytes that are not a record
    write("v1_garbage.mpltrace", native_bytes(h, recs, version=1, end=False) + b"\x4dGARBAGE")
    cases.append(Case("v1_garbage.mpltrace", "trace", "truncation", _replays("{f}", ("base_lru.moe",)),
                      "error"))

    # ---- native: record fields at their extremes (checksum valid)
    def rec_case(name, records, hdr=None, expect="any", mention=(), bases=ALL_BASES, fast=False):
        write(name, native_bytes(hdr or header(4, 16, 2), records))
        cases.append(Case(name, "trace", "record fields", _replays("{f}", bases), expect,
                          list(mention), fast))

    rec_case("rec_step_max.mpltrace", [record(2 ** 32 - 1, 0, [[1, 2]], wide=False)], expect="ok")
    rec_case("rec_layer_ffff.mpltrace", [record(0, 0xFFFF, [[1, 2]], wide=False)], expect="error",
             mention=["layer 65535"], fast=True)
    rec_case("rec_expert_oor.mpltrace", [record(0, 0, [[1, 255]], wide=False)], expect="error",
             mention=["expert id 255"])
    rec_case("rec_k_over_topk.mpltrace", [record(0, 0, [[1, 2, 3]], wide=False)], expect="error",
             mention=["top_k"])
    rec_case("rec_duplicate_ids.mpltrace", [record(0, 0, [[3, 3]], wide=False)], expect="any")
    rec_case("rec_empty_dispatch.mpltrace", [record(0, 0, [], wide=False, k=0, tokens=0),
                                             record(0, 1, [[1, 2]], wide=False)], expect="any")
    rec_case("rec_zero_k.mpltrace", [record(0, 0, [[], [], []], wide=False, k=0)], expect="any")
    rec_case("rec_nan_weight.mpltrace", [record(0, 0, [[1, 2]], wide=False,
                                                weights=[[float("nan"), 0.5]], wcode=3)],
             expect="error", mention=["finite"])
    rec_case("rec_inf_weight.mpltrace", [record(0, 0, [[1, 2]], wide=False,
                                                weights=[[float("inf"), 0.5]], wcode=2)],
             expect="error", mention=["finite"])
    rec_case("rec_huge_weights.mpltrace", [record(0, 0, [[1, 2], [1, 3]], wide=False,
                                                  weights=[[1e308, 1e308], [1e308, 1e308]], wcode=3),
                                           record(1, 0, [[1, 2]], wide=False,
                                                  weights=[[1.7e308, 1.7e308]], wcode=3)],
             expect="any", fast=True)
    prefill = [[(i * 7 + j) % 16 for j in range(2)] for i in range(65535)]
    rec_case("rec_prefill_65535.mpltrace", [record(0, 0, prefill, wide=False),
                                            record(1, 1, [[1, 2]], wide=False)], expect="ok")
    many_preds = {l % 4: [1, 2] for l in range(4)}
    rec_case("rec_pred_bad_layer.mpltrace", [record(0, 0, [[1, 2]], wide=False, preds={9: [1]})],
             expect="error", mention=["layer 9"])
    rec_case("rec_pred_bad_expert.mpltrace", [record(0, 0, [[1, 2]], wide=False, preds={1: [200]})],
             expect="error", mention=["200"])
    rec_case("rec_pred_many.mpltrace", [record(0, 0, [[1, 2]], wide=False, preds=many_preds)],
             expect="ok")
    rec_case("rec_topk255_of_300.mpltrace",
             [record(s, l, [random.Random(s * 8 + l).sample(range(300), 255)], wide=True)
              for s in range(4) for l in range(8)], hdr=header(8, 300, 255), expect="ok", fast=True)

    # ---- native: header fields at their extremes (checksum valid)
    def head_case(name, hdr, records=None, expect="error", mention=(), fast=False):
        write(name, native_bytes(hdr, records if records is not None else [record(0, 0, [[1, 2]], wide=False)]))
        cases.append(Case(name, "trace", "header fields", _replays("{f}", ("base_lru.moe", "base_history.moe")),
                          expect, list(mention), fast))

    for n in (2 ** 31, 2 ** 62, 2 ** 64, 10 ** 400):
        head_case(f"h_num_layers_{len(str(n))}d.mpltrace", dict(header(4, 16, 2), num_layers=n),
                  mention=["num_layers"], fast=n == 2 ** 64)
    for n in (0, -1, 65537, 2 ** 31, 2 ** 64):
        head_case(f"h_num_experts_{n}.mpltrace".replace("-", "m"), dict(header(4, 16, 2), num_experts=n),
                  mention=["num_experts"])
    for n in (0, 17, 256, 2 ** 64):
        head_case(f"h_top_k_{n}.mpltrace", dict(header(4, 16, 2), top_k=n), mention=["top_k"])
    for n in (-1, 2 ** 53, 2 ** 62, 2 ** 64, 10 ** 400):
        head_case(f"h_expert_bytes_{len(str(n))}d.mpltrace".replace("-", "m"),
                  header(4, 16, 2, expert_bytes=n), expect="error", mention=["expert_bytes"],
                  fast=n == 10 ** 400)
    head_case("h_moe_65537.mpltrace", header(65537, 16, 2), mention=["65536"])
    head_case("h_moe_id_huge.mpltrace", header(2 ** 62 + 1, 16, 2, moe=[0, 1, 2, 2 ** 62]),
              mention=["num_layers"])
    head_case("h_moe_id_neg.mpltrace", header(4, 16, 2, moe=[0, 1, -5, 3]), mention=["moe_layers"])
    head_case("h_moe_not_list.mpltrace", header(4, 16, 2, moe={"a": 1}), mention=["moe_layers"])
    deep_blob = "[" * 100000 + "0" + "]" * 100000
    raw = json.dumps(header(4, 16, 2)).replace('"extra": {}', '"extra": {"d": ' + deep_blob + "}")
    blob = raw.encode()
    data = _FIXED.pack(b"MPLTRACE", 2, 0, len(blob)) + blob + record(0, 0, [[1, 2]], wide=False)
    data += _END.pack(b"MPLTEND\x00", 1, zlib.crc32(data))
    write("h_deep_json.mpltrace", data)
    cases.append(Case("h_deep_json.mpltrace", "trace", "header fields",
                      _replays("{f}", ("base_lru.moe",)), "error", ["json"], fast=True))
    head_case("h_long_model.mpltrace", header(4, 16, 2, model="m" * 1_000_000), expect="ok")
    # a header length field past the file's end, and at the 64 MiB limit
    d = bytearray(good)
    struct.pack_into("<I", d, 12, 64 << 20)
    write("h_len_64mib.mpltrace", bytes(d))
    cases.append(Case("h_len_64mib.mpltrace", "trace", "header fields", _replays("{f}", ("base_lru.moe",)),
                      "error", ["truncated", "header"]))
    struct.pack_into("<I", d, 12, 0xFFFFFFFF)
    write("h_len_max.mpltrace", bytes(d))
    cases.append(Case("h_len_max.mpltrace", "trace", "header fields", _replays("{f}", ("base_lru.moe",)),
                      "error", ["header length"], fast=True))

    # ---- native: wide headers, one dispatch (and scattered dispatches)
    wide = [(4096, 65536, 1, True), (1024, 65536, 1, True), (65536, 65536, 1, True),
            (64, 65536, 1, False), (65536, 64, 1, False), (1, 65536, 1, False),
            (65536, 1, 1, False), (1024, 65536, 2000, True), (65536, 65536, 3000, False),
            (4096, 4096, 5000, False)]
    for L, E, n, fast in wide:
        name = f"wide_{L}x{E}_{n}.mpltrace"
        write(name, one_dispatch(L, E, k=min(8, E), dispatches=n))
        cases.append(Case(name, "trace", "wide header", _replays("{f}"), "any", fast=fast))

    # ---- huge top-k
    save(topk_trace(40), "topk255_300.mpltrace")
    cases.append(Case("topk255_300.mpltrace", "trace", "huge top-k", _replays("{f}"), "ok", fast=True))

    # ---- JSONL
    def jl(name, lines, expect="error", mention=(), bases=("base_lru.moe", "base_history.moe"), fast=False):
        write(name, "\n".join(lines) + "\n")
        cases.append(Case(name, "trace", "jsonl", _replays("{f}", bases), expect, list(mention), fast))

    H = {"model": "hostile", "num_experts": 16, "top_k": 2, "num_layers": 4, "moe_layers": [0, 1, 2, 3]}
    row = {"t": 0, "l": 0, "e": [1, 2]}

    def J(**kw):
        return json.dumps({**H, **kw})
    jl("j_ok.jsonl", [J(), json.dumps(row)], expect="ok")
    jl("j_experts_2e64.jsonl", [J(num_experts=2 ** 64), json.dumps(row)], mention=["num_experts"], fast=True)
    jl("j_experts_1e400.jsonl", ['{"model": "m", "num_experts": 1e400, "top_k": 2}', json.dumps(row)],
       mention=["num_experts"])
    jl("j_experts_digits.jsonl", ['{"model": "m", "num_experts": ' + HUGE_INT * 12 + ', "top_k": 2}',
                                  json.dumps(row)], mention=["json"])
    jl("j_layers_2e62.jsonl", [J(num_layers=2 ** 62, moe_layers=[0, 1, 2, 3]), json.dumps(row)],
       mention=["num_layers"], fast=True)
    jl("j_infer_l_huge.jsonl", ['{"model": "m", "num_experts": 16, "top_k": 2}',
                                json.dumps({"t": 0, "l": 2 ** 62, "e": [1, 2]})], mention=["layer"])
    jl("j_infer_l_64k.jsonl", ['{"model": "m", "num_experts": 16, "top_k": 2}',
                               json.dumps({"t": 0, "l": 65535, "e": [1, 2]})], expect="ok",
       bases=ALL_BASES)
    jl("j_topk_huge.jsonl", [J(top_k=2 ** 64), json.dumps(row)], mention=["top_k"])
    jl("j_ebytes_huge.jsonl", [J(expert_bytes=10 ** 30), json.dumps(row)], mention=["expert_bytes"])
    jl("j_step_2e32.jsonl", [J(), json.dumps({**row, "t": 2 ** 32})], mention=["2^32"])
    jl("j_step_max.jsonl", [J(), json.dumps({**row, "t": 2 ** 32 - 1})], expect="ok")
    jl("j_id_2e64.jsonl", [J(), json.dumps({**row, "e": [1, 2 ** 64]})], mention=["expert id"])
    jl("j_deep_e.jsonl", [J(), '{"t": 0, "l": 0, "e": ' + "[" * 100000 + "1" + "]" * 100000 + "}"],
       mention=["json"])
    jl("j_wide_row.jsonl", [J(), json.dumps({**row, "e": list(range(16)) * 1000})], mention=["top_k"])
    jl("j_weights_huge.jsonl", [J(), json.dumps({"t": 0, "l": 0, "e": [[1, 2], [1, 3]],
                                                 "s": [[1.7e308, 1.7e308], [1.7e308, 1.7e308]]})],
       expect="any", bases=ALL_BASES, fast=True)
    jl("j_pred_layer_huge.jsonl", [J(), json.dumps({**row, "p": {str(2 ** 64): [1]}})], mention=["layer"])
    jl("j_header_only.jsonl", [J()], expect="any", bases=ALL_BASES)
    jl("j_moe_65537.jsonl", [J(num_layers=65537, moe_layers=list(range(65537))), json.dumps(row)],
       mention=["65536"])
    jl("j_wide_65536.jsonl", [J(num_layers=65536, moe_layers=list(range(65536)), num_experts=65536, top_k=8),
                              json.dumps({"t": 0, "l": 65535, "e": list(range(65528, 65536))})],
       expect="any", bases=ALL_BASES, fast=True)
    jl("j_nul.jsonl", [J(), "\x00\x00"], mention=["nul"])

    write("manifest.json", json.dumps([asdict(c) for c in cases], indent=1))
    return cases


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: make_corpus.py DIR", file=sys.stderr)
        return 2
    cases = build(Path(argv[0]))
    n_pol = sum(c.kind == "policy" for c in cases)
    print(f"{len(cases)} files ({n_pol} policies, {len(cases) - n_pol} traces) in {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
