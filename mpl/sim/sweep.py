"""Sweeps: replay one policy over a grid of capacities and parameter values.

Each point reports the policy's hit rate, Belady's optimum for the same cache structure and
capacity (computed once per structure, shared by every parameter value), the gap, and the
simulated tokens/s. Points run in parallel across processes with ``jobs > 1``.
"""

from __future__ import annotations

import itertools
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from mpl import tracecols
from mpl.sim import tracepack as _tracepack
from mpl.sim.belady import belady as belady_optimum
from mpl.trace import Trace


@dataclass
class Point:
    capacity: Any
    params: dict
    policy: str = ""
    total_slots: int | None = None          # slots over all caches (shared: the capacity)
    hit_rate: float | None = None
    belady: float | None = None
    gap: float | None = None
    tokens_per_s: float | None = None
    time_per_step_ms: float | None = None
    stall_ms_per_step: float | None = None
    loads: int | None = None
    per_layer: list[float] = field(default_factory=list)
    capacities: list[int] | int | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        ps = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in self.params.items())
        size = f"{self.total_slots} slots" if self.total_slots is not None else f"cap={self.capacity}"
        return (f"{self.policy} " if self.policy else "") + size + (f", {ps}" if ps else "")

    def to_dict(self) -> dict:
        return {"policy": self.policy, "capacity": self.capacity, "total_slots": self.total_slots,
                "params": self.params, "hit_rate": self.hit_rate,
                "belady": self.belady, "gap": self.gap, "tokens_per_s": self.tokens_per_s,
                "time_per_step_ms": self.time_per_step_ms,
                "stall_ms_per_step": self.stall_ms_per_step, "loads": self.loads,
                "per_layer_hit_rate": self.per_layer, "capacities": self.capacities,
                "error": self.error}


def parse_param(spec: str) -> tuple[str, list]:
    """``eviction=lru,lfu`` or ``cache.eviction=lru,lfu`` -> ("cache.eviction", ["lru", "lfu"]);
    a memory tier's parameter is ``tier.NAME.PARAM`` (``tier.ram.capacity=8GiB,16GiB``)."""
    from mpl import schema
    from mpl.sim.variants import tier_key

    if "=" not in spec:
        raise ValueError(f"--param '{spec}': write NAME=V1,V2 (e.g. eviction=lru,lfu)")
    name, values = spec.split("=", 1)
    name = name.strip()
    if "." not in name:
        hits = [k for k in schema.PARAMS if k.split(".", 1)[1] == name]
        if len(hits) != 1:
            raise ValueError(f"--param '{name}': unknown parameter (write block.name, e.g. cache.eviction)")
        name = hits[0]
    elif name not in schema.PARAMS and tier_key(name) is None:
        raise ValueError(f"--param '{name}': unknown parameter (write block.name, or "
                         f"tier.NAME.PARAM for a memory tier's)")
    items = [v.strip() for v in values.split(",")]
    if not any(items):
        raise ValueError(f"--param '{spec}': no values")
    if not all(items):
        raise ValueError(f"--param '{spec}': an empty value between commas")
    vals = [_value(v) for v in items]
    return name, vals


class RepeatedParam(ValueError):
    """The same parameter in two ``--param`` options (a usage error)."""


def parse_params(specs) -> dict[str, list]:
    """Every ``--param`` (``parse_param``) with every value checked up front by the checker's
    value rules (:func:`mpl.sim.variants.check_override`): ValueError naming the option and
    the value for a bad one, RepeatedParam when a parameter is given twice (in any
    spelling: ``eviction`` and ``cache.eviction`` are one parameter)."""
    from mpl.sim.variants import VariantError, check_override

    params: dict[str, list] = {}
    given: dict[str, str] = {}
    for spec in specs:
        name, vals = parse_param(spec)
        if name in params:
            raise RepeatedParam(f"--param {name} is given twice ('{given[name]}' and '{spec}'); "
                                f"give all its values in one option, e.g. "
                                f"{name.split('.', 1)[1]}=V1,V2")
        for v in vals:
            try:
                check_override(name, v)
            except VariantError as e:
                raise ValueError(f"--param '{spec}': {e}") from None
        params[name], given[name] = vals, spec
    return params


def _value(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def grid(capacities: Sequence, params: dict[str, list]) -> list[tuple[Any, dict]]:
    keys = list(params)
    out = []
    for cap in capacities:
        for combo in itertools.product(*(params[k] for k in keys)):
            out.append((cap, dict(zip(keys, combo))))
    return out


def _run_point(args) -> Point:
    text, name, trace, cap, params, hardware, total = args
    from mpl.api import load_for_replay as load_policy
    from mpl.sim.replay import replay

    p = Point(cap, params, name or "")
    try:
        overrides = point_overrides(text, name, trace.header, cap, params, total)
        pol = load_policy(text, name=name, overrides=overrides)
        p.policy = pol.name
        # (memory tiers: the optimum of each top tier comes with the replay)
        r = replay(pol, trace, hardware=hardware, belady=pol.ir.tiered)
    except Exception as e:       # one bad point (e.g. budget > capacity) must not stop a sweep
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        # a checker location points into the point's generated variant, not a user's file
        p.error = re.sub(r"^<policy>:\d+:\d+: ", "", msg)
        return p
    return _measured(p, r, pol, trace)


def point_overrides(text: str, name, header, cap, params: dict, total: bool) -> dict:
    """The parameters a sweep point sets in the policy: its ``params``, and its capacity: with
    ``total`` a per-layer policy gets ``cap // layers`` per layer and total_budget = cap;
    without, on a per-layer policy that gives total_budget, ``cap`` is each layer's capacity
    (total_budget becomes layers x cap: :func:`mpl.sim.replay.per_layer_capacity`)."""
    from mpl.api import load_for_replay as load_policy
    from mpl.sim.replay import per_layer_capacity, tier_capacity

    overrides = dict(params)
    if cap is not None:
        overrides["cache.capacity"] = cap
        base = load_policy(text, name=name)
        more, _note = tier_capacity(base, cap)
        if more:                     # memory tiers: the top tier's capacity
            del overrides["cache.capacity"]
            overrides.update(more)
        elif total and isinstance(cap, int):
            if base.ir.per_layer:
                L = header.num_moe_layers
                per = cap // L
                if per < 1:
                    raise ValueError(f"{cap} total slots give less than one per layer ({L} layers)")
                overrides["cache.capacity"] = per
                overrides["per_layer.total_budget"] = cap
                if base.ir["per_layer.min_capacity"] > per:
                    overrides["per_layer.min_capacity"] = per
        elif "per_layer.total_budget" not in overrides:
            overrides.update(per_layer_capacity(base, header, cap)[0])
    return overrides


def _measured(p: Point, r, pol, trace) -> Point:
    s = r.stats
    p.hit_rate = s["hit_rate"]
    p.tokens_per_s = r.sim["tokens_per_s"]
    p.time_per_step_ms = r.sim["time_per_step_ms"]
    p.stall_ms_per_step = r.sim["stall_ms"] / max(r.sim["steps"], 1)
    p.loads = s["loads"]
    p.per_layer = [x["hit_rate"] for x in s.get("per_layer", [])]
    if pol.ir.tiered:
        p.capacities = list(r.belady["capacities"])
        p.total_slots = sum(p.capacities)
        p.belady = r.belady["hit_rate"]
        p.gap = r.gap
    elif pol.ir.per_layer:
        p.capacities = [x.get("capacity") for x in s.get("per_layer", [])]
        p.total_slots = sum(_initial_caps(pol, trace))
        p._structure = ("per_layer", tuple(_initial_caps(pol, trace)))
    else:
        cap_slots = _shared_slots(pol, trace)
        p.capacities = cap_slots
        p.total_slots = cap_slots
        p._structure = ("shared", cap_slots)
    return p


def _initial_caps(pol, trace) -> list[int]:
    h = trace.header
    if hasattr(pol, "runtime"):
        rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k,
                         expert_bytes=h.expert_bytes or None)
        return list(rt.capacities())
    from mpl.sim.replay import _per_layer_capacities
    from mpl.timemodel.hardware import expert_bytes_for
    return _per_layer_capacities(pol.ir, h.num_moe_layers, expert_bytes_for(pol.ir, h), h.num_experts)


def _shared_slots(pol, trace) -> int:
    """The shared optimum's capacity (as replay(): the largest an adapt rule can set)."""
    from mpl.features import features

    h = trace.header
    if features(pol.ir).adapts_capacity and hasattr(pol, "runtime"):
        return pol.runtime(h.num_moe_layers, h.num_experts, h.top_k,
                           expert_bytes=h.expert_bytes or None).num_slots
    from mpl.runtime.core import capacity_of, capacity_slots
    cap = capacity_of(pol.ir.values, h.num_moe_layers, h.num_experts, False)
    if isinstance(cap, int):
        return cap
    from mpl.timemodel.hardware import expert_bytes_for
    # a size: as many experts as fit (replay refuses one below an expert), at most every expert
    return min(capacity_slots(cap, expert_bytes_for(pol.ir, h)), h.num_moe_layers * h.num_experts)


class SweepError(ValueError):
    """The sweep cannot say anything (its points do not change the policy)."""


#: the diagnostics saying a parameter has no effect in a point's variant
_NO_EFFECT = ("MPL401", "MPL409")


def identical_points(text: str, name, header, points, total: bool) -> str | None:
    """Why two points of ``points`` ((capacity, params) pairs) would replay the same policy,
    or None: each point's variant is checked, the parameters the checker says have no effect
    in it (MPL401, MPL409) are set aside, and two points whose policies are then equal are
    the same row twice (say ``--param frequency_decay=0.9,0.5`` with ``eviction = lru``). A
    point that cannot be made is left to the sweep, which reports it in its row."""
    from mpl import schema
    from mpl.checker import REPLAY, analyze
    from mpl.sim.variants import set_params

    seen: dict = {}
    for cap, ps in points:
        try:
            overrides = point_overrides(text, name, header, cap, ps, total)
            variant = set_params(text, overrides, policy=name)
        except Exception:          # noqa: BLE001 — the point's own row says what is wrong
            continue
        an = analyze(variant, purpose=REPLAY)
        if an.errors:
            continue
        pir = an.ir.get(name) if name else (list(an.ir.values())[-1] if an.ir else None)
        if pir is None:
            continue
        idle = {}
        for d in an.diagnostics:
            if d.code in _NO_EFFECT:
                idle[variant[d.span.offset:d.span.end_offset]] = d
        values = tuple(sorted((k, repr(v)) for k, v in pir.values.items()
                              if schema.PARAMS[k].name not in idle))
        key = (values, pir.blocks, repr(pir.adapt), pir.hierarchy, pir.bands)
        label = _point_label(cap, ps)
        if key in seen:
            first, first_idle = seen[key]
            swept = [k for k in ps if k in schema.PARAMS
                     and schema.PARAMS[k].name in {**idle, **first_idle}]
            if cap is not None and "capacity" in {**idle, **first_idle}:
                swept.append("cache.capacity")
            why = {**first_idle, **idle}
            reason = "; ".join(f"{why[schema.PARAMS[k].name].message} [{why[schema.PARAMS[k].name].code}]"
                               for k in swept) or "nothing in the policy tells them apart"
            return (f"the sweep's points {first} and {label} replay the same policy: {reason}; "
                    f"sweep only what changes the policy")
        seen[key] = (label, idle)
    return None


def _point_label(cap, ps: dict) -> str:
    parts = ([f"capacity={cap}"] if cap is not None else []) + \
        [f"{k.split('.', 1)[1]}={v}" for k, v in ps.items()]
    return "(" + ", ".join(parts) + ")"


def run_sweep(policy_text: str, trace: Trace | str, capacities: Sequence, params: dict | None = None,
              *, policy: str | None = None, hardware=None, jobs: int = 1, belady: bool = True,
              progress=None, total: bool = False, model=None) -> list[Point]:
    """Replay every (capacity, params) point. ``capacities`` may hold None (the policy's own).
    ``total``: capacities are total slots; a per-layer policy gets ``N // layers`` per layer
    and ``per_layer.total_budget = N`` (the matched-budget comparison). ``model``: the
    trace's model when its header names no preset (see mpl.sim.tracemodel)."""
    from mpl.sim.tracemodel import with_model

    if not isinstance(trace, Trace):
        trace = tracecols.load(os.fspath(trace))
    trace = with_model(trace, model)
    points = grid(list(capacities) or [None], params or {})
    if params:
        from mpl.api import load_for_replay
        from mpl.sim.replay import unknown_tiers
        why = unknown_tiers(load_for_replay(policy_text, name=policy), params)
        if why is not None:
            raise SweepError(why)
    if len(points) > 1:
        same = identical_points(policy_text, policy, trace.header, points, total)
        if same is not None:
            raise SweepError(same)
    work = [(policy_text, policy, trace, cap, ps, hardware, total) for cap, ps in points]
    if jobs > 1 and len(work) > 1:
        from mpl.workers import quiet_interrupt, stop_pool

        ex = ProcessPoolExecutor(max_workers=min(jobs, len(work)), initializer=quiet_interrupt)
        try:
            results = []
            for i, r in enumerate(ex.map(_run_point, work)):
                results.append(r)
                if progress:
                    progress(i + 1, len(work))
        except KeyboardInterrupt:
            stop_pool(ex)
            raise
        ex.shutdown()
    else:
        results = []
        with _tracepack.reusing(trace):      # pack the trace once for every point
            for i, w in enumerate(work):
                results.append(_run_point(w))
                if progress:
                    progress(i + 1, len(work))
    if belady:
        memo: dict = {}
        E = trace.header.num_experts
        for p in results:
            st = getattr(p, "_structure", None)
            if st is None:
                continue
            if st not in memo:
                kind, caps = st
                if kind == "shared":
                    r = belady_optimum(trace.dispatches, E, capacity=caps,
                                       num_layers=trace.header.num_moe_layers)
                else:
                    r = belady_optimum(trace.dispatches, E, capacities=list(caps))
                memo[st] = r.hit_rate
            p.belady = memo[st]
            p.gap = p.belady - p.hit_rate
    for p in results:
        p.__dict__.pop("_structure", None)
    return results


def format_table(points: list[Point]) -> str:
    keys = []
    for p in points:
        for k in p.params:
            if k not in keys:
                keys.append(k)
    several = len({p.policy for p in points}) > 1
    head = (["policy"] if several else []) + ["capacity", "slots"] + [k.split(".", 1)[1] for k in keys] \
        + ["hit rate", "Belady", "gap (pp)", "tok/s", "ms/step"]
    rows = []
    failed = 0
    for p in points:
        row = ([p.policy] if several else []) + [
            str(p.capacity if p.capacity is not None else "-"),
            str(p.total_slots if p.total_slots is not None else "-")] + [str(p.params.get(k, "")) for k in keys]
        if p.error:
            failed += 1
            row += [f"error {failed}", "-", "-", "-", "-"]     # the message: format_errors()
        else:
            row += [f"{p.hit_rate:.2%}",
                    f"{p.belady:.2%}" if p.belady is not None else "-",
                    f"{p.gap * 100:+.2f}" if p.gap is not None else "-",
                    f"{p.tokens_per_s:.2f}", f"{p.time_per_step_ms:.2f}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(lines)


def format_errors(points: list[Point]) -> str:
    """The points that failed, numbered as their rows of :func:`format_table` say
    (``error N``), one line each; "" when none did."""
    bad = [p for p in points if p.error]
    if not bad:
        return ""
    lines = [f"{len(bad)} of {len(points)} point{'s' if len(points) != 1 else ''} failed:"]
    lines += [f"  error {i}: {p.label}: {p.error}" for i, p in enumerate(bad, 1)]
    return "\n".join(lines)
