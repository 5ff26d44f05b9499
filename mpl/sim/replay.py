"""Replay: run a compiled policy's runtime over a trace (the same module the live mechanism
uses), time its Plans on a hardware model, and compare with Belady's optimum.

``replay(policy, trace, hardware=None, capacity=None, belady=True)`` -> :class:`ReplayReport`.
A policy whose eviction is ``belady`` (replay only) is answered by the oracle itself.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mpl.runtime import compiled as _compiled
from mpl.runtime import packing as _packing
from mpl.sim import tracepack as _tracepack
from mpl.runtime.core import capacity_of, capacity_slots
from mpl.runtime.plan import STREAM, Load, Plan
from mpl import tracecols
from mpl.rules import model as _model_rules
from mpl.adapt_log import lines as adapt_lines
from mpl.features import features
from mpl.sim.belady import BeladyResult, belady as belady_optimum, requests_of, simulate
from mpl.sim.tracemodel import describe_expert_size, expert_size_source, with_model
from mpl.timemodel import hardware as hw
from mpl.timemodel.tiers import TieredTimeline
from mpl.timemodel.timeline import Timeline, arrived_stats as _arrived, summary as _sim_summary
from mpl.sim.tierreport import host_memory_notes, tier_belady, tier_lines
from mpl.trace import Trace, steps_and_tokens, tokens_of as _tokens_of


class ReplayError(ValueError):
    """The policy and the trace do not fit together (message says why)."""


@dataclass
class ReplayReport:
    policy: str
    trace: dict                     # model, dispatches, steps, source
    hardware: dict                  # the profile
    stats: dict                     # SPEC §5 stats of the runtime (stall_ms simulated)
    belady: dict | None             # the optimum for the same structure and capacity
    sim: dict                       # simulated time: total, per step, tok/s, stall, busy times
    costs: dict                     # per-operation costs used
    capacity: Any = None            # the capacity override, if any
    elapsed_s: float = 0.0          # wall time of the replay (not the simulated time)
    notes: list = field(default_factory=list)   # what an override was taken to mean
    tiers: list | None = None       # memory tiers: each set's tiers on the trace's shape
    runtime: dict | None = None     # the runtime's backend, and why it is pure when it is
    # replay(checkpoint=head): {"dispatches", "stats", "sim"} after the head's dispatches, as
    # a replay of the head alone reports them
    checkpoint: dict | None = None

    @property
    def hit_rate(self) -> float:
        return self.stats["hit_rate"]

    @property
    def belady_hit_rate(self) -> float | None:
        return self.belady["hit_rate"] if self.belady else None

    @property
    def gap(self) -> float | None:
        """Belady's hit rate minus the policy's (>= 0 for demand-only policies)."""
        return None if self.belady is None else self.belady["hit_rate"] - self.hit_rate

    @property
    def tokens_per_s(self) -> float:
        return self.sim["tokens_per_s"]

    def to_dict(self) -> dict:
        out = {"policy": self.policy, "trace": self.trace, "hardware": self.hardware,
               "capacity": self.capacity, "stats": self.stats, "belady": self.belady,
               "gap": self.gap, "sim": self.sim, "costs": self.costs,
               "elapsed_s": self.elapsed_s, "notes": list(self.notes)}
        if self.tiers is not None:
            out["tiers"] = self.tiers
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def format_text(self) -> str:
        s, t, m = self.stats, self.trace, self.sim
        lines = [f"policy {self.policy} on {t['model']} trace ({t['dispatches']} dispatches, "
                 f"{t['steps']} steps), hardware {self.hardware['name']}",
                 "",
                 f"  hit rate      {s['hit_rate']:7.2%}   ({s['hits']} hits / {s['accesses']} accesses"
                 + (f"; {s['late_prefetches']} late prefetches: a prefetch or background load "
                    f"still in flight when needed, not counted as hits)"
                    if s.get("late_prefetches") else ")")]
        if self.belady is not None:
            b = self.belady
            cap = b["capacities"]
            capt = (f"top tier{'s' if len(cap) > 1 else ''} {', '.join(map(str, cap))}"
                    if b.get("structure") == "tiers" else
                    f"per-layer {min(cap)}..{max(cap)}" if isinstance(cap, list) else f"shared {cap}")
            note = "; prefetching beats the demand-only optimum" if self.gap < 0 else ""
            lines.append(f"  Belady        {b['hit_rate']:7.2%}   (optimum, {capt} slots; "
                         f"gap {self.gap * 100:+.2f} pp{note})")
        lines += [
            f"  loads         {s['loads']}  (demand {s['demand_loads']}, background "
            f"{s['background_loads']}, prefetch {s['prefetch_loads']}); "
            f"{_amount(s['bytes_loaded'])}",
            f"  evictions     {s['evictions']}   streamed {s['streamed']}   cpu computes {s['cpu_computes']}",
            f"  prefetch      issued {s['prefetch_issued']}, useful {s['prefetch_useful']}, "
            f"accuracy {s['prefetch_accuracy']:.2%}",
            "",
            f"  simulated     {m['time_per_step_ms']:.2f} ms/step, {m['tokens_per_s']:.2f} tok/s "
            f"(stall {m['stall_ms'] / max(m['steps'], 1):.2f} ms/step, {_link_text(m)})",
        ]
        rt = self.runtime or {}
        if rt.get("policy_reason"):
            lines.append(f"  runtime       {rt['backend']}: {rt['policy_reason']}")
        if m.get("disk_reads"):
            lines.append(f"  disk          {m['disk_reads']} reads, {_amount(m['disk_bytes'])} "
                         f"(busy {m['disk_busy_ms'] / max(m['total_ms'], 1e-9):.0%})")
        if t.get("expert_bytes_source"):
            lines.append(f"  expert size   "
                         f"{describe_expert_size(t['expert_bytes'], t['expert_bytes_source'])}")
        if s.get("tiers"):
            lines += [""] + tier_lines(s)
        pl = s.get("per_layer") or []
        if pl:
            lines += ["", "  per-layer hit rate (layer: rate [capacity])"]
            row = []
            for i, x in enumerate(pl):
                row.append(f"{x['layer']:>3}: {x['hit_rate']:6.1%} [{x.get('capacity', '-')}]")
                if len(row) == 4 or i == len(pl) - 1:
                    lines.append("    " + "   ".join(row))
                    row = []
        if s.get("adapt_log"):
            lines += [""] + ["  " + x for x in adapt_lines(s["adapt_log"])]   # mpl.adapt_log
        for n in self.notes:
            lines += ["", f"  note: {n}"]
        return "\n".join(lines)


    def __str__(self) -> str:
        """The text report (what ``mplc replay`` prints): ``print(policy.replay(trace))``."""
        return self.format_text()

    def __repr__(self) -> str:
        return (f"<ReplayReport {self.policy} on {self.trace.get('model')}: hit rate "
                f"{self.hit_rate:.2%}, {self.tokens_per_s:.2f} tok/s>")


def _amount(nbytes: float) -> str:
    """Bytes moved, in GB with two decimals, or in MB / KB when that would read 0.00 GB."""
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= f * 0.01 or unit == "KB":
            return f"{nbytes / f:,.2f} {unit}"
    return f"{nbytes} bytes"


# ------------------------------------------------------------------ progress
class Progress:
    """A plain stderr progress bar, drawn only when stderr is a terminal."""

    def __init__(self, total: int, label: str = "replay", enabled: bool | None = None):
        self.total = max(total, 1)
        self.label = label
        self.on = sys.stderr.isatty() if enabled is None else enabled
        self.last = -1
        self.every = max(self.total // 200, 1)

    def update(self, i: int, total: int | None = None) -> None:
        """``i`` units done (of ``total``, when the caller counts: a callback ``(i, n)``)."""
        if total is not None and total != self.total and total > 0:
            self.total, self.every = total, max(total // 200, 1)
        if not self.on or (i % self.every and i != self.total):
            return
        pct = int(100 * i / self.total)
        if pct == self.last:
            return
        self.last = pct
        n = pct * 30 // 100
        sys.stderr.write(f"\r{self.label} [{'#' * n}{'.' * (30 - n)}] {pct:3d}%")
        sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\r" + " " * (len(self.label) + 40) + "\r")
            sys.stderr.flush()


# ------------------------------------------------------------------ helpers
def _as_trace(trace) -> Trace:
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return tracecols.load(os.fspath(trace))
    raise TypeError(f"trace must be a Trace or a path, not {type(trace).__name__}")


def _steps_and_tokens(trace: Trace) -> tuple[int, int]:
    """mpl.trace.steps_and_tokens of the trace's dispatches (once per trace while they do not
    change: mpl.runtime.packing.derived)."""
    def count():
        p = _tracepack.cached_pack(trace, trace.header.num_experts)     # (a replay made it)
        return steps_and_tokens(trace.dispatches) if p is None else _packing.steps_and_tokens_of(p)
    return _tracepack.derived(trace, "steps_and_tokens", count)


def _check_fit(header, num_experts_ok=True) -> None:
    if header.num_moe_layers < 1:
        raise ReplayError("the trace has no MoE layers")


def shape_of(header):
    """The trace's model shape for the checker's model-aware rules: the model's
    (``header.shape``, see mpl.sim.tracemodel) when known, else a shape with the header's
    layers, experts, top-k and expert bytes (hidden sizes unknown: the expert is described as
    one 1 x expert_bytes/2 matrix pair at one byte per parameter, which gives those bytes)."""
    from mpl import shapes

    if header.shape is not None:
        return header.shape
    eb = header.expert_bytes or hw.DEFAULT_EXPERT_BYTES
    return shapes.ModelShape(header.model or "trace", max(header.num_layers, max(header.moe_layers) + 1),
                             tuple(header.moe_layers), header.num_experts, header.top_k,
                             hidden_size=1, intermediate_size=max(1, eb // 2), bytes_per_param=1,
                             has_gate=False)


#: (policy text, model shape) -> the model-aware errors that make a replay meaningless: a
#: sweep or a tune replays one policy on one trace's shape many times (prefixes, rounds)
_FITS: dict = {}
_FITS_MAX = 1024

#: the model-aware errors, every one about the model's shape (pins, budgets, sizes, bands,
#: tiers), which the trace's header gives: attach refuses such a policy, so its replay would
#: tell of a run that cannot happen
FIT_CODES = tuple(r.code for r in _model_rules.RULES if r.severity == _model_rules.E)


def check_fits(policy, header) -> None:
    """Run the checker's model-aware rules for the trace's shape; a pinned expert the model
    does not have or a per-layer budget below the minimum raises ReplayError. A policy loaded
    against that shape already (``load_for_replay(..., model=)``) is not checked again."""
    from mpl.checker import REPLAY, analyze

    shape = shape_of(header)
    try:
        errs = getattr(policy, "fits", {}).get(shape)
    except TypeError:            # an unhashable shape
        errs = None
    key = None
    if errs is None:
        text = policy.text()
        key = (text, shape)
        try:
            errs = _FITS.get(key)
        except TypeError:        # an unhashable shape: no memo
            key, errs = None, None
    if errs is None:
        an = analyze(text, model=shape, purpose=REPLAY)
        errs = tuple(d for d in an.errors if d.code in FIT_CODES)
        if key is not None:
            if len(_FITS) >= _FITS_MAX:
                _FITS.clear()
            _FITS[key] = errs
    if errs:
        e = min(errs, key=lambda d: FIT_CODES.index(d.code))   # an expert that does not exist first
        raise ReplayError(f"{_where(policy, shape, e)}policy {policy.name} does not fit the "
                          f"trace's model ({header.model}): {e.message} [{e.code}]")


def _link_text(m: dict) -> str:
    """The link's share of busy time: of the run, or, where transfers issued during it (a
    background load, a prefetch after the last step) land after its end, of the time until
    the last one lands, which the run's total leaves out."""
    total, free = m["total_ms"], m.get("link_free_ms", 0.0)
    span = max(total, free, 1e-9)
    out = f"link busy {m['link_busy_ms'] / span:.0%}"
    if free > total:
        out += f" up to its last transfer, which lands {free - total:.2f} ms after the last step"
    return out


def _where(policy, shape, diag) -> str:
    """``file:line:col: `` of ``diag`` (a model-aware error of the policy's canonical text) in
    the file the policy was checked from, where there is one; else nothing."""
    from mpl.checker import REPLAY, analyze

    text, path = getattr(policy, "checked_text", None), getattr(policy, "path", None)
    if not isinstance(text, str) or path is None:
        return ""
    for d in analyze(text, path, model=shape, purpose=REPLAY).errors:
        if d.code == diag.code and d.message == diag.message:
            return f"{d.file or path}:{d.span.line}:{d.span.column}: "
    return ""


def per_layer_capacity(policy, header, capacity) -> tuple[dict, str | None]:
    """What a capacity override (``replay --capacity``, a sweep's capacities) means for
    ``policy``: on a per-layer policy that gives ``per_layer.total_budget`` (which decides
    every layer's capacity, so cache.capacity alone would change nothing) the capacity is each
    layer's, and total_budget becomes layers x that capacity. ``(extra overrides, a note
    saying so)``; ``({}, None)`` for any other policy."""
    ir = getattr(policy, "ir", None)
    if capacity is None or ir is None or not ir.per_layer or ir.get("per_layer.total_budget") is None:
        return {}, None
    L = header.num_moe_layers
    value = capacity
    if isinstance(capacity, str):               # "12GiB" (checked: a size of cache.capacity)
        from mpl.ir import Size
        from mpl.schema import parse_size
        value = Size(parse_size(capacity)) if not capacity.strip().isdigit() else int(capacity)
    per = capacity_slots(value, hw.expert_bytes_for(ir, header))
    old = ir["per_layer.total_budget"]
    shown = f"{capacity}" if isinstance(capacity, int) else f"{capacity} ({per} slots)"
    return ({"per_layer.total_budget": L * per},
            f"capacity {shown} is each layer's capacity: the policy's total_budget "
            f"{_value_text(old)} is replaced by {L} layers x {per} = {L * per} slots")


def unknown_tiers(policy, keys) -> str | None:
    """Why ``keys`` (overrides) name a memory tier the policy does not have (None: they
    name none, or only its tiers)."""
    from mpl.sim.variants import tier_key

    wanted = [tier_key(k) for k in keys if tier_key(k) is not None]
    if not wanted:
        return None
    ir = getattr(policy, "ir", None)
    levels = (([ir.hierarchy] if ir.hierarchy is not None else []) + [b.hierarchy for b in ir.bands]
              if ir is not None else [])
    names = []
    for h in levels:
        names += [t.name for t in h.tiers if not t.implicit and t.name not in names]
    for name, _param in wanted:
        if name not in names:
            has = f"its tiers: {', '.join(names)}" if names else "it has no memory tiers"
            return f"policy {getattr(policy, 'name', '?')} has no tier '{name}' ({has})"
    return None


def tier_capacity(policy, capacity) -> tuple[dict, str | None]:
    """What a capacity override means for a policy with memory tiers: the capacity of its
    top tier (the hierarchy's, and each band's): ``({"tier.NAME.capacity": capacity, ...},
    a note saying so)``; ``({}, None)`` for a policy without tiers."""
    ir = getattr(policy, "ir", None)
    if capacity is None or ir is None or not ir.tiered:
        return {}, None
    names = []
    for h in ([ir.hierarchy] if ir.hierarchy is not None else []) + [b.hierarchy for b in ir.bands]:
        if h.tiers[0].name not in names:
            names.append(h.tiers[0].name)
    return ({f"tier.{n}.capacity": capacity for n in names},
            f"capacity {capacity} is the capacity of the top tier "
            f"{' and '.join(repr(n) for n in names)}")


def _value_text(v) -> str:
    b = getattr(v, "bytes", None)
    if b is None:
        return str(v)
    from mpl.rules.base import size_text
    return size_text(b)


def _uses_belady(ir) -> bool:
    if ir.get("cache.eviction") == "belady":
        return True
    return False


def _per_layer_capacities(ir, num_layers: int, expert_bytes: float | None = None,
                          num_experts: int = 0) -> list[int] | None:
    """The runtime's initial per-layer capacities (None for a shared cache): total_budget
    split (a size: as many experts as fit), else layers x capacity (a capacity_factor: of
    each layer's ``num_experts``)."""
    if not ir.per_layer:
        return None
    from mpl.runtime.budgets import allocate

    def slots(v) -> int:
        if not isinstance(v, int):
            if not expert_bytes:
                raise ReplayError("a size needs the expert size")
            return capacity_slots(v, expert_bytes)
        return v

    tb = ir.get("per_layer.total_budget")
    total = (num_layers * slots(capacity_of(ir.values, num_layers, num_experts, True))
             if tb is None else slots(tb))
    return allocate([1.0] * num_layers, total, int(ir["per_layer.min_capacity"]),
                    int(ir["per_layer.max_capacity"]))


# ------------------------------------------------------------------ replay
def _checked_overrides(capacity, params) -> dict:
    """``params`` plus ``capacity`` as ``cache.capacity``, each value checked (one value of
    its parameter: an int in the schema's range or a size, an enum name, ...) before it goes
    anywhere near the policy text; OverrideError (a ReplayError and a PolicyLoadError, as a
    bad value in the file would be) naming the parameter otherwise."""
    from mpl.sim.variants import VariantError, check_override

    if params is not None and not isinstance(params, dict):
        raise OverrideError(f"params must be a dict of 'block.name' -> value, not "
                            f"{type(params).__name__}")
    overrides = dict(params or {})
    if capacity is not None:
        if "cache.capacity" in overrides:
            raise OverrideError("cache.capacity is given twice (capacity= and params=); give it once")
        overrides["cache.capacity"] = capacity
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise OverrideError(f"params: a parameter is named 'block.name', not {key!r}")
        if value is None:
            continue
        try:
            check_override(key, value)
        except VariantError as e:          # the message names the parameter
            raise OverrideError(str(e)) from None
    return overrides


def replay(policy, trace, *, hardware=None, capacity=None, belady: bool = True,
           progress: bool | None = False, params: dict | None = None,
           model=None, checkpoint: Trace | None = None) -> ReplayReport:
    """Replay ``trace`` (a Trace or a path) through ``policy`` (an mpl Policy, or a path /
    text, which mpl.api.replay loads). ``capacity`` overrides cache.capacity; ``params`` overrides
    other parameters ("block.name" -> value). ``hardware``: a profile name, file, dict or
    Profile (default rtx-4090). ``model``: the trace's model (a preset name, a config.json
    path or a ModelShape) when its header does not name a preset (mpl.sim.tracemodel).

    ``checkpoint``: a head of ``trace`` (its first dispatches, e.g. :func:`mpl.tune.prefix`);
    the report's :attr:`ReplayReport.checkpoint` holds the statistics and the simulated time
    after those dispatches, as a replay of the head alone reports them: a runtime decides
    from what it has seen, so they are read from the same replay as it passes them (a tick
    of the replay loop, at every multiple of the head's length: when that is more than
    :data:`CHECKPOINT_TICKS` times, or the progress bar's ticks miss it, the head is
    replayed apart, as it is for the oracle, which sees the future)."""
    t_start = time.perf_counter()
    overrides = _checked_overrides(capacity, params)
    trace = with_model(_as_trace(trace), model)
    h = trace.header
    _check_fit(h)
    notes = []
    why = unknown_tiers(policy, overrides)
    if why is not None:
        raise OverrideError(why)
    if capacity is not None:
        more, note = tier_capacity(policy, capacity)
        if more:
            del overrides["cache.capacity"]
            overrides.update(more)
            notes.append(note)
    if capacity is not None and "per_layer.total_budget" not in overrides:
        more, note = per_layer_capacity(policy, h, capacity)
        overrides.update(more)
        notes += [note] if note else []
    factor = getattr(getattr(policy, "ir", None), "values", {}).get("cache.capacity_factor")
    if capacity is not None and factor is not None:
        notes.append(f"capacity {capacity} replaces the policy's capacity_factor {factor:g}")
    policy = _given_policy(policy, overrides)
    check_fits(policy, h)
    ir = policy.ir
    profile = hw.resolve(hardware)
    eb, costs = hw.costs_for_trace(profile, ir, h)
    L, E, K = h.num_moe_layers, h.num_experts, h.top_k
    overlap = bool(ir["schedule.overlap"])
    tl = Timeline(costs, overlap=overlap)
    # progress: None draws a bar when stderr is a terminal, True always, False never
    bar = Progress(len(trace), f"replay {policy.name}", None if progress is None else bool(progress))

    tiers = runtime = None
    mark = None
    if checkpoint is not None:
        checkpoint = with_model(_as_trace(checkpoint), model)
        mark = len(checkpoint)
        if mark < 1 or mark >= len(trace):
            raise ValueError(f"checkpoint: a head of the trace ({len(trace)} dispatches), not "
                             f"{mark} dispatches")
    at = None                   # the checkpoint's (stats, timeline totals), once passed
    # read at a tick of this replay, or (None) replayed apart
    ticked = mark is not None and not _uses_belady(ir) and len(trace) // mark <= CHECKPOINT_TICKS \
        and not (bar.on and mark % bar.every)
    if _uses_belady(ir):
        stats, bres = _replay_oracle(ir, trace, tl, eb, bar)
        stats = _arrived(stats, tl)
    else:
        rt = policy.runtime(L, E, K, expert_bytes=eb, cost=hw.runtime_cost_model(costs),
                            **hw.tier_arguments(ir, h))
        runtime = {"backend": rt.backend, "reason": rt.backend_reason,
                   # (pure because of this policy, where the compiled engine is in use)
                   "policy_reason": rt.backend_reason if rt.backend == "pure" and
                   _compiled.in_use() else None}
        tiers = rt.tier_layout
        if tiers is not None:   # memory tiers: disk reads, moves between tiers, their copies
            tl = TieredTimeline(costs, overlap=overlap, layout=tiers)
            notes += host_memory_notes(tiers, profile, E)
        caps0 = list(rt.capacities()) if ir.per_layer else None
        # the shared optimum's capacity: the policy's own, or the largest an adapt rule can
        # set (the runtime's slot pool), so that the optimum stays an upper bound
        # (at most the slot pool: a capacity above every expert is every expert)
        cap0 = rt.num_slots if features(ir).adapts_capacity else min(rt.capacities()[0], rt.num_slots)
        upd = bar.update
        every = bar.every if bar.on else 0
        if ticked:
            draw, step_every = upd, every
            every = every or mark           # (a multiple of the bar's: it draws as it did)
            done_at = []

            def upd(count):
                if count == mark:       # the state is whole here (mpl.runtime.guard)
                    done_at.append((_arrived(rt.stats(), tl), tl.to_dict()))
                if step_every and count % step_every == 0:
                    draw(count)
        # the runtime's backend replays the trace (its pack or its records, made once per
        # trace while a sweep or a tune holds it)
        _tracepack.replay_trace(rt, trace, tl, upd, every)
        bar.update(len(trace))
        if ticked:
            hs, ht = done_at[0]
            hsteps, htokens = _steps_and_tokens(checkpoint)
            at = (hs, _sim_summary(_Totals(ht), hsteps, htokens))
        stats = _arrived(rt.stats(), tl)     # late prefetches counted apart (SPEC §5)
        bres = None
        if belady and tiers is not None:
            bres = tier_belady(trace, tiers, E)
        elif belady:
            # Pins are a policy decision, not part of the cache structure: the optimum for the
            # same structure and capacity chooses freely what to keep (so no policy, pinned or
            # not, can beat it).
            if caps0 is not None:
                bres = belady_optimum(trace.dispatches, E, capacities=caps0)
            else:
                cap = cap0
                bres = belady_optimum(trace.dispatches, E, capacity=int(cap), num_layers=L)
    bar.close()
    if mark is not None and not ticked:
        head = replay(policy, checkpoint, hardware=profile, belady=False)
        at = (head.stats, head.sim)
    steps, tokens = _steps_and_tokens(trace)     # (after the replay: from its pack, if made)
    return ReplayReport(
        policy=policy.name,
        trace={"model": h.model, "dispatches": len(trace), "steps": steps, "tokens": tokens,
               "moe_layers": L, "num_experts": E, "top_k": K, "source": h.source,
               "expert_bytes": eb,
               "expert_bytes_source": expert_size_source(h, bool(ir.get("cache.expert_size_gb"))),
               "model_shape": h.shape.name if h.shape is not None else None},
        hardware=profile.to_dict(), stats=stats, tiers=tiers.describe() if tiers else None,
        runtime=runtime,
        belady=bres.to_dict() if bres is not None else None,
        sim=_sim_summary(tl, steps, tokens), costs=costs.to_dict(), capacity=capacity,
        elapsed_s=time.perf_counter() - t_start, notes=notes,
        checkpoint=None if at is None else {"dispatches": mark, "stats": at[0], "sim": at[1]})


#: replay(checkpoint=head) reads the head's numbers at a tick of the replay when the replay
#: passes the head's length at most this many times (each tick hands the timeline to Python
#: and back); a shorter head is replayed apart (it costs less than the ticks)
CHECKPOINT_TICKS = 4


class _Totals:
    """A timeline's totals taken at a checkpoint (``to_dict``), for :func:`_sim_summary`."""

    def __init__(self, totals: dict):
        self._totals = totals

    def to_dict(self) -> dict:
        return dict(self._totals)


def _replay_oracle(ir, trace: Trace, tl: Timeline, eb: int, bar: Progress):
    """``eviction = belady``: the oracle decides; plans are built from its decisions so the
    timeline and the stats are those of the optimum."""
    h = trace.header
    L, E = h.num_moe_layers, h.num_experts
    # cache.pin and the per-layer pins are ignored: the oracle decides what stays (see the
    # comment in replay()).
    caps = _per_layer_capacities(ir, L, eb, E)
    reqs, layers = requests_of(trace.dispatches, E)
    outcome: list[list[int] | None] = [None] * len(reqs)
    if caps is None:
        cap = min(capacity_slots(capacity_of(ir.values, L, E, False), eb), L * E)   # at most every expert
        res = simulate(reqs, cap, frozenset(), E, outcomes=outcome)
        res.structure, res.capacities = "shared", cap
    else:
        res = BeladyResult(structure="per_layer", capacities=caps)
        by_layer: dict[int, list[int]] = {}      # the layers that occur, not the header's
        for i, x in enumerate(layers):
            by_layer.setdefault(x, []).append(i)
        for l, idx in sorted(by_layer.items()):
            sub_out: list = [None] * len(idx)
            r = simulate([reqs[i] for i in idx], caps[l], frozenset(), E, outcomes=sub_out)
            res.merge(r)
            for i, o in zip(idx, sub_out):
                outcome[i] = o
    per_layer_acc = [0] * L
    per_layer_hit = [0] * L
    for i, d in enumerate(trace.dispatches):
        ks = reqs[i]
        oc = outcome[i]
        experts = [k - d.layer * E for k in ks]
        hit = [o == 0 for o in oc]
        where = [0 if o != 2 else STREAM for o in oc]
        loads = [Load((d.layer, e), 0, None, "demand") for e, o in zip(experts, oc) if o == 1]
        plan = Plan(d.step, d.layer, experts, where, hit, loads, [])
        tl.dispatch(plan, _tokens_of(d), d.tokens)
        per_layer_acc[d.layer] += len(ks)
        per_layer_hit[d.layer] += sum(hit)
        bar.update(i + 1)
    acc, hits = res.accesses, res.hits
    stats = {"accesses": acc, "hits": hits, "misses": acc - hits,
             "hit_rate": hits / acc if acc else 0.0, "evictions": res.evictions,
             "loads": res.loads, "demand_loads": res.loads, "background_loads": 0,
             "prefetch_loads": 0, "bytes_loaded": res.loads * eb, "prefetch_issued": 0,
             "prefetch_useful": 0, "prefetch_accuracy": 0.0, "cpu_computes": 0,
             "streamed": res.streamed, "stall_ms": tl.stall_ms,
             "per_layer": [{"layer": l, "accesses": per_layer_acc[l], "hits": per_layer_hit[l],
                            "hit_rate": per_layer_hit[l] / per_layer_acc[l] if per_layer_acc[l] else 0.0,
                            "capacity": caps[l] if caps else res.capacities}
                           for l in range(L)],
             "adapt_log": []}
    return stats, res


# ------------------------------------------------------------------ loading
class PolicyLoadError(ValueError):
    def __init__(self, message: str, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


class OverrideError(ReplayError, PolicyLoadError):
    """A bad ``capacity`` / ``params`` override of :func:`replay` (caught as either)."""


def _given_policy(policy, overrides: dict):
    """The loaded ``policy`` with the checked ``overrides`` applied: sim takes a policy, the
    API layer turns text into one (``mpl.api.load_for_replay``; a Policy's ``with_params``
    edits and checks its text again)."""
    if not (hasattr(policy, "text") and hasattr(policy, "ir")):
        raise TypeError(f"policy must be an mpl Policy, a .moe path or policy text, not "
                        f"{type(policy).__name__}")
    return policy.with_params(overrides) if overrides else policy
