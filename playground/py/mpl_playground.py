"""The browser playground's Python side: mpl's public API, as the page calls it.

The page (``playground/src/``) runs this module in Pyodide, in a Web Worker, on mpl's pure
Python runtime (the C extension is not built there) with lark as its only dependency. Each
function takes plain values and returns a JSON string, so the worker passes text both ways.
Nothing here knows a parameter name, a default or a doc: diagnostics come from the checker
(:func:`mpl.checker.analyze`), hover text from :mod:`lsp.hover_text` (the language server's),
formatting from :func:`mpl.fmt.format_text`, traces and replays from :mod:`mpl.sim` — the
same functions ``mplc check``, ``mplc fmt`` and ``mplc replay`` call.

Positions: the checker's spans are code-point offsets; the editor (CodeMirror) counts UTF-16
code units. :class:`Units` converts both ways. The editor's text has ``\\n`` line ends only,
which is what the checker's offsets refer to.

The module also runs under CPython (``tests/test_playground.py`` checks it there against the
CLI).
"""

from __future__ import annotations

import bisect
import json
import math
import os
import sys

#: where a dropped trace file is written in the (in-memory) file system
UPLOAD_DIR = "/tmp/mpl-playground"
#: trace file extensions the replayer reads (by extension, as mplc does)
TRACE_EXTENSIONS = (".mpltrace", ".jsonl")
#: the most points of the hit-rate-vs-capacity sweep
SWEEP_POINTS = 8

_state: dict = {"trace": None, "trace_label": None}


def _dump(obj) -> str:
    return json.dumps(obj, allow_nan=False, default=_jsonable)


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


class Units:
    """Code-point offsets <-> UTF-16 code units for one text."""

    def __init__(self, text: str) -> None:
        #: code-point offsets of the characters outside the BMP (two UTF-16 units each)
        self.astral = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
        self.n = len(text)

    def to16(self, cp: int) -> int:
        cp = max(0, min(cp, self.n))
        return cp + bisect.bisect_left(self.astral, cp)

    def from16(self, u: int) -> int:
        lo, hi = 0, self.n
        while lo < hi:                      # the largest cp with to16(cp) <= u
            mid = (lo + hi + 1) // 2
            if self.to16(mid) <= u:
                lo = mid
            else:
                hi = mid - 1
        return lo


# ------------------------------------------------------------------ about this runtime
def info() -> str:
    """Versions, the runtime backend, the model presets and hardware profiles to offer."""
    import mpl
    from mpl import shapes
    from mpl.runtime import backend_info
    from mpl.timemodel import hardware

    runtime = backend_info()
    presets = []
    for name in shapes.PRESETS:
        s = shapes.preset(name)
        presets.append({"name": name, "moe_layers": s.num_moe_layers, "experts": s.num_experts,
                        "top_k": s.top_k})
    return _dump({"mpl": mpl.__version__, "python": sys.version.split()[0],
                  "platform": sys.platform, "backend": runtime["backend"], "backend_why": runtime["reason"],
                  "presets": presets, "hardware": list(hardware.names()),
                  "default_hardware": hardware.DEFAULT, "trace_extensions": list(TRACE_EXTENSIONS)})


def examples() -> str:
    """The standard library's policies (``std/NAME``), name and text, to start from."""
    from mpl.stdlib_path import stdlib_file, stdlib_names

    out = []
    for name in stdlib_names():
        path = stdlib_file(f"std/{name}")
        if path:
            with open(path, encoding="utf-8") as f:
                out.append({"name": name, "text": f.read()})
    return _dump(out)


# ------------------------------------------------------------------ editor services
def _span16(u: Units, span) -> dict:
    return {"from": u.to16(span.offset), "to": u.to16(span.end_offset),
            "line": span.line, "column": span.column}


def check(text: str) -> str:
    """The checker's diagnostics of ``text`` (this document's, in the editor's units):
    code, severity, message, range, the docs link, related notes and the quick fixes (title
    and edits). Replay-only values (``eviction = belady``) are accepted, as ``mplc replay``
    accepts them: the playground replays."""
    from mpl.checker import REPLAY, analyze
    from mpl.diagnostics import docs_url

    u = Units(text)
    a = analyze(text, None, purpose=REPLAY)
    out = []
    for d in a.diagnostics:
        if d.file is not None:          # a diagnostic of an imported file
            continue
        fixes = []
        for f in d.fixes:
            edits = [{**_span16(u, e.span), "insert": e.new_text} for e in f.edits if e.file is None]
            if edits:
                fixes.append({"title": f.title, "edits": edits})
        out.append({"code": d.code, "severity": d.severity.value, "message": d.message,
                    **_span16(u, d.span), "url": docs_url(d.code),
                    "related": [{"message": r.message, **_span16(u, r.span)}
                                for r in d.related if r.file is None],
                    "fixes": fixes})
    return _dump({"diagnostics": out, "policies": sorted(a.ir or {})})


def hover(text: str, offset16: int) -> str:
    """The language server's hover markdown for the token at UTF-16 offset ``offset16``
    (null when there is none)."""
    from lsp.hover_text import hover_text
    from mpl.checker import REPLAY, analyze

    u = Units(text)
    memo: list = []

    def analysis():
        if not memo:
            memo.append(analyze(text, None, purpose=REPLAY))
        return memo[0]

    found = hover_text(text, u.from16(offset16), analysis)
    if found is None:
        return _dump(None)
    md, start, end = found
    return _dump({"markdown": md, "from": u.to16(start), "to": u.to16(end)})


def format_policy(text: str) -> str:
    """``mplc fmt`` of ``text``: ``{"text": ...}``, or ``{"error": ...}`` saying why a text
    with syntax errors is not formatted."""
    from mpl.fmt import FormatError, format_text

    try:
        return _dump({"text": format_text(text)})
    except FormatError as e:
        errors = [d for d in e.diagnostics if d.is_error]
        first = errors[0] if errors else None
        where = f" (line {first.span.line}: {first.message})" if first is not None else ""
        more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
        return _dump({"error": f"not formatted: the policy has syntax errors{where}{more}"})


# ------------------------------------------------------------------ traces
def _summary(trace, label: str) -> dict:
    h = trace.header
    return {"label": label, "model": h.model, "moe_layers": h.num_moe_layers,
            "experts": h.num_experts, "top_k": h.top_k, "dispatches": len(trace),
            "steps": trace.num_steps, "source": h.source}


def synth(preset: str, steps: int, seed: int) -> str:
    """A synthetic trace (``mplc trace synth --preset P --steps N --seed S``), kept for the
    replays that follow."""
    from mpl.sim import synthesize

    try:
        steps, seed = int(steps), int(seed)
        trace = synthesize(preset, steps=steps, seed=seed)
    except (TypeError, ValueError) as e:
        return _dump({"error": str(e)})
    label = f"synthetic {preset}, {steps} steps, seed {seed}"
    _state.update(trace=trace, trace_label=label)
    return _dump(_summary(trace, label))


def load_trace(name: str, data) -> str:
    """A dropped trace file (``.mpltrace`` or the original's ``.jsonl``), read by mpl's own
    reader; a file it refuses gets the reader's message."""
    from mpl.sim import TraceFormatError, load_trace as load

    base = os.path.basename(str(name)) or "trace"
    if not base.lower().endswith(TRACE_EXTENSIONS):
        return _dump({"error": f"{base}: not a trace file (expected {' or '.join(TRACE_EXTENSIONS)})"})
    raw = bytes(data.to_py() if hasattr(data, "to_py") else data)
    os.makedirs(UPLOAD_DIR, exist_ok=True)
    path = os.path.join(UPLOAD_DIR, base)
    with open(path, "wb") as f:
        f.write(raw)
    try:
        trace = load(path)
    except (TraceFormatError, ValueError, OSError) as e:
        return _dump({"error": f"{base}: {e}"})
    _state.update(trace=trace, trace_label=base)
    return _dump(_summary(trace, base))


# ------------------------------------------------------------------ replay and sweep
def _policy_or_error(text: str):
    from mpl.api import load_for_replay
    from mpl.sim import PolicyLoadError

    try:
        return load_for_replay(text), None
    except PolicyLoadError as e:
        return None, str(e)


def replay(text: str, hardware: str | None = None) -> str:
    """``mplc replay --json`` of ``text`` on the current trace: the report's dictionary
    (stats, Belady's optimum, simulated time, costs), or ``{"error": ...}``."""
    from mpl.runtime.core import RuntimeConfigError
    from mpl.sim import ReplayError, replay as run_replay
    from mpl.timemodel.hardware import HardwareError

    trace = _state["trace"]
    if trace is None:
        return _dump({"error": "no trace: synthesize one or drop a trace file"})
    policy, err = _policy_or_error(text)
    if err is not None:
        return _dump({"error": err})
    try:
        report = run_replay(policy, trace, hardware=hardware or None)
    except (ReplayError, HardwareError, RuntimeConfigError, ValueError) as e:
        return _dump({"error": str(e)})
    d = json.loads(report.to_json())
    d["trace_label"] = _state["trace_label"]
    return _dump(d)


def sweep_capacities(policy, trace) -> tuple[list[int], int | None]:
    """Capacities for the hit-rate-vs-capacity plot, and the policy's own (in slots; None
    when it has none in that range): about :data:`SWEEP_POINTS` from top-k to every expert
    (per layer for a per_layer policy, else of the shared cache), evenly spaced on a log
    scale, with the policy's own capacity among them."""
    from mpl.sim.sweep import _shared_slots

    h = trace.header
    per_layer = bool(policy.ir.per_layer)
    top = h.num_experts if per_layer else h.num_moe_layers * h.num_experts
    low = max(1, min(h.top_k, top))
    caps = {low, top}
    if top > low:
        r = (top / low) ** (1 / (SWEEP_POINTS - 1))
        caps.update(max(low, min(top, round(low * r ** i))) for i in range(SWEEP_POINTS))
    from mpl.runtime.core import capacity_of
    cap = capacity_of(policy.ir.values, h.num_moe_layers, h.num_experts, per_layer)
    if policy.ir.tiered:           # memory tiers: the capacity swept is the top tier's
        from mpl.timemodel.hardware import tier_arguments
        from mpl.timemodel.hardware import expert_bytes_for
        rt = policy.runtime(h.num_moe_layers, h.num_experts, h.top_k,
                            expert_bytes=expert_bytes_for(policy.ir, h), **tier_arguments(policy.ir, h))
        own = rt.capacities()[0] if rt.capacities() else None
    elif per_layer:
        own = cap if isinstance(cap, int) else None
    else:
        own = _shared_slots(policy, trace)   # a size in slots, as replay and sweep count it
    if isinstance(own, int) and 1 <= own <= top:
        caps.add(own)
    else:
        own = None
    return sorted(caps), own


def sweep(text: str, hardware: str | None = None) -> str:
    """Hit rate and Belady's optimum at each capacity of :func:`sweep_capacities`
    (``mplc sweep --capacity ... --json``): ``{"points": [...], "own": capacity}``."""
    from mpl.sim.sweep import run_sweep

    trace = _state["trace"]
    if trace is None:
        return _dump({"error": "no trace: synthesize one or drop a trace file"})
    policy, err = _policy_or_error(text)
    if err is not None:
        return _dump({"error": err})
    caps, own = sweep_capacities(policy, trace)
    try:
        points = run_sweep(text, trace, caps, hardware=hardware or None)
    except ValueError as e:
        return _dump({"error": str(e)})
    out = []
    for p in points:
        d = p.to_dict()
        out.append({"capacity": d.get("capacity"), "hit_rate": d.get("hit_rate"),
                    "belady": d.get("belady"), "tokens_per_s": d.get("tokens_per_s"),
                    "error": d.get("error")})
    return _dump({"points": out, "per_layer": bool(policy.ir.per_layer), "own": own})
