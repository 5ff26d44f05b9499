"""Cross-field rules (MPL3xx) and model-aware rules (MPL5xx) over a policy's effective values.

The rules are pure functions of ``values`` (every schema key -> IR value, defaults filled in,
``INVALID`` where the written value had an error) and the set of blocks present. They return
:class:`Violation` objects naming the keys involved (the first is where the problem is
reported); :mod:`mpl.checker.policy` places them on the source. The same rules run on the
values an adapt rule would produce (MPL306).

The original's 20 validator rules and where they went:

* capacity >= 1, ranges of every number, enum values, known metrics, duration units:
  per-value checks (MPL201-205) driven by the schema;
* pinned experts vs capacity: MPL301 (and per_layer.min_capacity; MPL506 with a model);
* prefetch budget <= capacity: MPL302;
* hybrid schedule needs overlap: MPL303;
* memory_headroom <= memory_threshold: MPL304;
* min_capacity <= max_capacity: MPL305;
* total_budget large enough for every layer's min_capacity: MPL309 (MPL505 with a model);
* rebalance needs per_layer: MPL308; adapt targets must exist and be adaptable: MPL207;
* an adapt action must keep the policy valid: MPL306;
* belady only in replay: MPL307.
* Dropped: "capacity = 1 needs a prefetcher" (SPEC §5: any capacity >= 1 must work).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Mapping

from mpl import ir, schema
from mpl.checker.common import INVALID, fmt_num
from mpl.shapes import ModelShape

LIVE = "live"
REPLAY = "replay"


@dataclass(frozen=True)
class Violation:
    code: str
    message: str
    keys: tuple[str, ...]        # involved schema keys; the first is the primary location
    item: int | None = None      # index of the offending element when the primary is a list


def default_value(p: schema.Param) -> Any:
    d = p.default
    if d is schema.REQUIRED or d is schema.OFF or d is schema.DERIVED:
        return None
    return d


#: every schema key -> its default IR value (None for REQUIRED/OFF/DERIVED)
DEFAULTS: dict[str, Any] = {key: default_value(p) for key, p in schema.PARAMS.items()}
#: schema key -> position in the schema (canonical order)
ORDER: dict[str, int] = {key: i for i, key in enumerate(schema.PARAMS)}


def ok(*vals) -> bool:
    return all(v is not INVALID and v is not None for v in vals)


def expert_gb(values: Mapping[str, Any], model: ModelShape | None) -> float | None:
    g = values.get("cache.expert_size_gb")
    if ok(g):
        return float(g)
    if model is not None:
        return model.expert_bytes / schema.UNITS["GB"].factor
    return None


def capacity_slots(values: Mapping[str, Any], model: ModelShape | None = None) -> int | None:
    """cache.capacity in slots (a size needs the expert size: written or from the model)."""
    cap = values.get("cache.capacity")
    if not ok(cap):
        return None
    if isinstance(cap, ir.Size):
        g = expert_gb(values, model)
        if g is None:
            return None
        slots = cap.bytes / (g * schema.UNITS["GB"].factor)
        # an absurdly small expert size makes this overflow: treat as "unknown" (the range
        # check of expert_size_gb reports the value itself)
        return int(slots) if math.isfinite(slots) else None
    return int(cap)


def _eviction_parts(v) -> list[str]:
    return v.split("|") if isinstance(v, str) else []


def _default_note(key: str, given: set[str]) -> str:
    return "" if key in given else " (the default)"


def cross_field(values: Mapping[str, Any], blocks: set[str], given: set[str], *,
                purpose: str = LIVE, model: ModelShape | None = None) -> list[Violation]:
    out: list[Violation] = []
    cap = capacity_slots(values, model)
    pins = values.get("cache.pin")
    per_layer = "per_layer" in blocks
    if cap is not None and cap < _CAPACITY.min:      # a size below one expert: no slot
        out.append(_no_slot(values, model))
        cap = None                                   # the rules below would only repeat it
    cap_text = fmt_num(cap) if cap is not None else "?"

    if cap is not None and ok(pins) and len(pins) > cap:
        out.append(Violation("MPL301", f"{len(pins)} pinned experts do not fit in a cache of {_slots(cap)}; raise capacity to at least {len(pins)} or pin fewer experts",
                             ("cache.pin", "cache.capacity")))
    mn, mx = values.get("per_layer.min_capacity"), values.get("per_layer.max_capacity")
    if per_layer and ok(pins, mn) and len(pins) > mn:
        out.append(Violation("MPL301", f"{len(pins)} pinned experts do not fit in a layer of min_capacity "
                             f"{mn}{_default_note('per_layer.min_capacity', given)}; raise min_capacity "
                             f"to at least {len(pins)} or pin fewer experts",
                             ("cache.pin", "per_layer.min_capacity")))

    strategy, budget = values.get("prefetch.strategy"), values.get("prefetch.budget")
    if ok(strategy, budget) and strategy != "none" and cap is not None and budget > cap:
        out.append(Violation("MPL302", f"prefetch budget {budget}{_default_note('prefetch.budget', given)} "
                             f"exceeds the cache capacity {cap_text}; set budget to at most {cap_text}",
                             ("prefetch.budget", "prefetch.strategy", "cache.capacity")))

    mode, overlap = values.get("schedule.mode"), values.get("schedule.overlap")
    if ok(mode, overlap) and mode == "hybrid" and overlap is False:
        out.append(Violation("MPL303", "the hybrid schedule needs overlap = true (it overlaps transfers "
                             "with CPU compute); set overlap = true or use mode = cpu_fallback",
                             ("schedule.overlap", "schedule.mode")))

    thr, head = values.get("cache.memory_threshold"), values.get("cache.memory_headroom")
    if ok(thr, head) and head > thr:
        out.append(Violation("MPL304", f"memory_headroom {fmt_num(head)}"
                             f"{_default_note('cache.memory_headroom', given)} is above memory_threshold "
                             f"{fmt_num(thr)}: the trigger must evict down to a level below the one that "
                             f"fires it; set memory_headroom <= {fmt_num(thr)}",
                             ("cache.memory_headroom", "cache.memory_threshold")))

    if per_layer and ok(mn, mx) and mn > mx:
        out.append(Violation("MPL305", f"min_capacity {mn} is above max_capacity {mx}"
                             f"{_default_note('per_layer.max_capacity', given)}; make min_capacity <= "
                             f"max_capacity", ("per_layer.min_capacity", "per_layer.max_capacity")))

    ev = values.get("cache.eviction")
    if purpose == LIVE and ok(ev):
        replay_only = [n for n in _eviction_parts(ev)
                       if (e := schema.PARAMS["cache.eviction"].enum_value(n)) is not None and e.replay_only]
        if replay_only:
            out.append(Violation("MPL307", f"eviction '{replay_only[0]}' needs the future and only works in "
                                 f"trace replay; use it with 'mplc replay' or choose lru, lfu, arc, ...",
                                 ("cache.eviction",)))

    total = values.get("per_layer.total_budget")
    if per_layer and ok(total, mn) and total < mn:
        out.append(Violation("MPL309", f"total_budget {total} is below min_capacity {mn}"
                             f"{_default_note('per_layer.min_capacity', given)}: not even one layer gets "
                             f"its minimum; raise total_budget or lower min_capacity",
                             ("per_layer.total_budget", "per_layer.min_capacity")))
    if per_layer and total is None and cap is not None and ok(mn) and cap < mn:
        out.append(Violation("MPL309", f"the per-layer budget (layers x capacity {cap_text}) is below layers x "
                             f"min_capacity {mn}{_default_note('per_layer.min_capacity', given)}; raise "
                             f"capacity to {mn}, lower min_capacity, or set total_budget",
                             ("cache.capacity", "per_layer.min_capacity", "per_layer.total_budget")))
    if model is not None:
        out.extend(model_rules(values, blocks, given, model))
    return out


_CAPACITY = schema.PARAMS["cache.capacity"]


def _slots(n: int) -> str:
    return f"{n} slot" + ("" if n == 1 else "s")


def _bytes_text(b: float) -> str:
    for unit in ("GiB", "MiB"):
        f = schema.UNITS[unit].factor
        if b >= f:
            exact = isinstance(b, int) and b % int(f) == 0
            return f"{b // int(f) if exact else format(b / f, '.3g')} {unit}"
    return f"{int(b)} bytes"


def _expert_bytes(values: Mapping[str, Any], model: ModelShape | None) -> float:
    return expert_gb(values, model) * schema.UNITS["GB"].factor


def _no_slot(values: Mapping[str, Any], model: ModelShape | None) -> Violation:
    """MPL507: a size capacity that holds no expert (the runtime never rounds it up)."""
    eb = _expert_bytes(values, model)
    whose = f"of {model.name}" if model is not None and not ok(values.get("cache.expert_size_gb")) \
        else "(cache.expert_size_gb)"
    size = values["cache.capacity"]
    return Violation("MPL507", f"capacity {_bytes_text(size.bytes)} is smaller than one expert {whose} "
                     f"({_bytes_text(eb)}): it gives no slot; write at least {_bytes_text(eb)} or a "
                     f"slot count", ("cache.capacity",))


def effective_slots(slots: int, per_layer: bool, model: ModelShape) -> int:
    """The slots a cache of ``slots`` can ever use on ``model``: a layer's cache holds at most
    that layer's experts, the shared cache every MoE layer's (the runtime's pool stops
    there)."""
    return min(slots, model.num_experts if per_layer else model.total_experts)


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.1f} GB"


def model_rules(values: Mapping[str, Any], blocks: set[str], given: set[str],
                model: ModelShape) -> list[Violation]:
    """MPL5xx: only when the model's shape is known."""
    out: list[Violation] = []
    per_layer = "per_layer" in blocks
    layers = model.num_moe_layers
    pins = values.get("cache.pin")
    cap = capacity_slots(values, model)
    if cap is not None and cap < _CAPACITY.min:
        cap = None                     # MPL507 (cross_field): no slot at all
    size = values.get("cache.capacity") if isinstance(values.get("cache.capacity"), ir.Size) else None
    if cap is not None and size is not None and effective_slots(cap, per_layer, model) > _CAPACITY.max:
        out.append(Violation("MPL507", f"capacity {_bytes_text(size.bytes)} gives "
                             f"{effective_slots(cap, per_layer, model)} slots of {model.name}'s experts, "
                             f"more than the {_CAPACITY.max} a cache can have; lower it to at most "
                             f"{_bytes_text(_CAPACITY.max * _expert_bytes(values, model))}",
                             ("cache.capacity",)))
    written = f"{_bytes_text(size.bytes)} = {cap} slots" if size is not None else f"{cap}"
    if ok(pins):
        bad = [e for e in pins if e >= model.num_experts]
        if bad:
            out.append(Violation("MPL501", f"expert {bad[0]} does not exist: {model.name} has "
                                 f"{model.num_experts} experts per layer (ids 0..{model.num_experts - 1}); "
                                 f"remove it from pin", ("cache.pin",), item=list(pins).index(bad[0])))
    if cap is not None and cap < model.top_k:
        out.append(Violation("MPL502", f"capacity {cap} is below {model.name}'s top-k of {model.top_k}: every "
                             f"dispatch streams at least {model.top_k - cap} experts; raise capacity to "
                             f"{model.top_k} or more", ("cache.capacity",)))
    total = values.get("per_layer.total_budget")
    mn = values.get("per_layer.min_capacity")
    if per_layer:
        per = (total // layers if ok(total) and layers else cap)
        if per is not None and per >= model.num_experts:
            held = (f"{_bytes_text(size.bytes)} = {per} slots" if size is not None and per == cap
                    else f"{per} slots")
            out.append(Violation("MPL503", f"every layer's cache ({held}) holds all {model.num_experts} "
                                 f"experts of {model.name}: the policy cannot matter, and the slot pool is "
                                 f"capped at {layers} x {model.num_experts} = {model.total_experts} slots "
                                 f"(only those are allocated); lower the budget or load the model without "
                                 f"offloading", ("per_layer.total_budget", "cache.capacity")))
        if ok(total, mn) and total < layers * mn:
            out.append(Violation("MPL505", f"total_budget {total} is below {layers} MoE layers x min_capacity "
                                 f"{mn} = {layers * mn} for {model.name}; raise total_budget to {layers * mn} "
                                 f"or lower min_capacity", ("per_layer.total_budget", "per_layer.min_capacity")))
    else:
        if cap is not None and cap >= model.total_experts:
            out.append(Violation("MPL503", f"capacity {written} holds all {model.total_experts} experts of "
                                 f"{model.name} ({layers} layers x {model.num_experts}): the policy cannot "
                                 f"matter, and the slot pool is capped at {model.total_experts} slots (only "
                                 f"those are allocated); lower capacity or load the model without offloading",
                                 ("cache.capacity",)))
        if cap is not None and ok(pins) and pins and len(pins) * layers > cap:
            out.append(Violation("MPL506", f"{len(pins)} pinned experts in each of {model.name}'s {layers} MoE "
                                 f"layers need {len(pins) * layers} slots of the shared cache of {cap}; "
                                 f"raise capacity to {len(pins) * layers} or pin fewer experts",
                                 ("cache.pin", "cache.capacity")))
    dev = model.device_memory_bytes
    if dev:
        budget = values.get("cache.memory_budget_gb")
        if "cache.memory_budget_gb" in given and ok(budget) and budget * 1e9 > dev:
            out.append(Violation("MPL504", f"memory_budget_gb {fmt_num(budget)} is above the device's memory "
                                 f"({_gb(dev)}); set it to at most {dev / 1e9:.1f}",
                                 ("cache.memory_budget_gb",)))
        eb = model.expert_bytes
        g = values.get("cache.expert_size_gb")
        if ok(g):
            eb = g * 1e9
        need = effective_slots(cap, per_layer, model) if cap is not None else None
        if need is not None and need * eb > dev:
            out.append(Violation("MPL504", f"the cache needs {need} x {_gb(eb)} = {_gb(need * eb)}, more than "
                                 f"the device's memory ({_gb(dev)}); lower capacity to at most "
                                 f"{int(dev // eb)}", ("cache.capacity",)))
    return out
