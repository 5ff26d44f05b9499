"""The compiled backend: the C engine (``mpl.runtime._engine``, mpl/runtime/c/) and the one
place that fills its configuration.

A compiled runtime is an :class:`Engine` built once from the policy's values, its features,
its adapt rules and the slot layout the pure runtime computes the same way
(:func:`mpl.runtime.core.layout`); after that nothing moves between Python and C but the
arguments of a call and what a getter returns. :func:`unsupported` says, for a policy and a
model shape, why the engine cannot hold a runtime (the runtime is then pure for its whole
life, and says so).
"""

from __future__ import annotations

import importlib
import logging
import os

from mpl.runtime.adapt import ACTIONS as ADAPT_ACTIONS
from mpl.runtime.monitor import METRIC_NAMES

ENV_PURE = "MPL_PURE"
#: the calling convention of mpl/runtime/c/module.c (a build of an older source is not used)
ENGINE_ABI = 4

#: what the engine holds (``mplc doctor``; :func:`unsupported` decides, runtime by runtime)
COVERAGE = ("every policy (every eviction rule, prefetch strategy, schedule mode, trigger, "
            "monitor, adapt rule and per-layer allocation), and memory tiers (hierarchy, "
            "per_layer_hierarchy) of whole experts or their granularity_split parts, at one "
            "precision per tier or a dtype_ladder, every tier's eviction one of the engine's "
            "rules or a weighted_sum of its single-queue rules, for its whole life, on models "
            "of up to 2^22 layers x experts (x parts), with an affinity table of up to 64 MiB and a learned "
            "predictor within the compiled predictor's tables; the Belady optimum, trace "
            "packing and JSONL reading")

#: the largest affinity table the engine keeps (per distance, layer and expert a row of counts
#: over the experts); a larger one is held by the pure runtime, whose table grows with what
#: it sees
AFFINITY_MAX_BYTES = 64 << 20

MODES = {"gpu_only": 0, "cpu_fallback": 1, "hybrid": 2}
STRATEGIES = {"none": 0, "history": 1, "affinity": 2, "lookahead": 3, "learned": 4}
ALLOCATIONS = {"uniform": 0, "entropy": 1, "frequency": 2}
COMPARISONS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4, "!=": 5}
UNITS = {"accesses": 0, "steps": 1, "tokens": 2}
METRICS = {name: i for i, name in enumerate(METRIC_NAMES)}

# adapt action codes (engine.h, A_*), by parameter
_A = {key: i for i, key in enumerate((
    "cache.capacity", "cache.eviction", "<store>", "cache.memory_threshold",
    "cache.memory_headroom", "cache.memory_budget_gb", "cache.ttl", "prefetch.strategy",
    "prefetch.budget", "prefetch.lookahead", "prefetch.affinity_threshold",
    "prefetch.history_window", "prefetch.confidence", "schedule.mode",
    "schedule.offload_threshold_ms", "schedule.priority_routing", "monitor.window",
    "monitor.log_interval", "per_layer.allocation", "per_layer.total_budget",
    "per_layer.min_capacity", "per_layer.max_capacity", "per_layer.rebalance_interval",
    "per_layer.entropy_window"))}
_A_TRIGGER = {"memory_pressure": 24, "ttl": 25, "flush": 26}
_A_REBALANCE = 27
#: the adaptable parameters, in the order the engine numbers them (the adapt log's "old")
PLAIN_KEYS = tuple(ADAPT_ACTIONS)


def _import():
    """(the extension module or None, why it is not used)."""
    if os.environ.get(ENV_PURE, "") not in ("", "0"):
        return None, f"{ENV_PURE} is set"
    try:
        mod = importlib.import_module("mpl.runtime._engine")
    except ModuleNotFoundError as e:
        if e.name == "mpl.runtime._engine":
            return None, ("the compiled engine mpl.runtime._engine is not built (no C compiler "
                          "at install time?)")
        return None, f"the compiled engine mpl.runtime._engine does not load ({e})"
    except ImportError as e:          # built for another Python, a broken file, ...
        return None, f"the compiled engine mpl.runtime._engine does not load ({e})"
    if getattr(mod, "ABI", None) != ENGINE_ABI:
        return None, ("the built mpl.runtime._engine is out of date for this source (rebuild "
                      "it: pip install -e .)")
    from mpl.runtime.args import normalize
    from mpl.runtime.errors import DispatchError, RuntimeConfigError
    from mpl.runtime.guard import RuntimeBusyError
    from mpl.runtime.plan import Plan, Step
    mod.setup(Plan, DispatchError, RuntimeConfigError, RuntimeBusyError,
              logging.getLogger("mpl.runtime"), normalize, Step)
    return mod, None


engine, WHY = _import()
#: the store parameters, in the engine's order (mpl/runtime/c/stores.c, its SP_* codes)
STORE_PARAMS = engine.STORE_PARAMS if engine is not None else ()


#: backends forced by mpl.runtime.backend.forced() (innermost last)
forced: list = []


def available() -> bool:
    """The compiled engine is built and loads (``MPL_PURE`` not set)."""
    return engine is not None


def in_use() -> bool:
    """New runtimes get the compiled engine (available, and not forced pure)."""
    return engine is not None and (not forced or forced[-1] == "compiled")


def kernel(name: str):
    """A compiled helper of the extension (``belady``, ``jsonl_rows``, ``pack_dispatches``,
    ``steps_tokens``) while the compiled backend is in use, else None (its pure twin runs)."""
    return getattr(engine, name, None) if in_use() else None


def _plain(v):
    """A value as the adapt log shows it (sizes and counts as their numbers)."""
    if hasattr(v, "bytes"):
        return f"{v.bytes}B"
    if hasattr(v, "n") and hasattr(v, "unit"):
        return v.n
    return v


def _count(v) -> float:
    return float(getattr(v, "n", v))


def rule_names() -> frozenset:
    """The eviction rules the engine has."""
    return frozenset(name for name, _flags in engine.rules()) if engine is not None else frozenset()


def unsupported(lay, params: dict, features: dict, actions=()) -> str | None:
    """Why the engine cannot hold a runtime of this policy on this shape (None: it can);
    ``actions``: the adapt rules' actions (the eviction rules they can switch to)."""
    if engine is None:
        return WHY
    L, E = lay.num_layers, lay.num_experts
    if L * E > engine.MAX_KEYS:
        return (f"{L:,} layers x {E:,} experts are more keys than the compiled engine's "
                f"{engine.MAX_KEYS:,}")
    names = rule_names()
    if lay.tiers is not None:
        why = _tiers_unsupported(lay.tiers, names, L * E)
        if why is not None:
            return why
    rules = {params["cache.eviction"], *features.get("evictions", ())}
    for r in rules:
        for side in str(r).split("|"):
            if side.strip() not in names:
                return f"the compiled engine has no eviction rule {side.strip()!r}"
    if features.get("affinity"):
        D = min(int(features.get("affinity_depth", 1)), L)
        if D * L * E * E * 8 > AFFINITY_MAX_BYTES:
            return (f"the affinity table ({D} x {L} x {E} x {E} counts) is over the compiled "
                    f"engine's {AFFINITY_MAX_BYTES >> 20} MiB")
    if features.get("learned"):
        context = int(params["prefetch.context_layers"])
        depth = max(1, int(features.get("affinity_depth", 1)))
        maxd = min(L, depth + max(1, context) - 1)
        if context > 1024 or maxd * L * E > engine.LEARNED_MAX_KEYS:
            return ("the learned predictor's tables for this shape are beyond the compiled "
                    "predictor's")
    return None


def _used_levels(t) -> list:
    """The sets of tiers some MoE layer of the shape uses (the engine holds only those)."""
    return [lv for lv in t.levels if lv.layers]


def _parts(t) -> int:
    """The most parts a used set of tiers splits an expert into (the engine's keys per expert,
    mpl/runtime/c/engine.h; 1 without granularity_split or without tiers)."""
    return max((lv.split for lv in _used_levels(t)), default=1) if t is not None else 1


def _tiers_unsupported(t, names, experts: int) -> str | None:
    """Why the engine cannot hold these memory tiers (None: it can); ``experts``: the model's
    layers x experts."""
    parts = _parts(t)
    if experts * parts > engine.MAX_KEYS:
        return (f"{experts:,} layers x experts in {parts} parts each are more keys than the "
                f"compiled engine's {engine.MAX_KEYS:,}")
    for lv in _used_levels(t):
        if len(lv.tiers) > 64:
            return "the compiled engine holds at most 64 tiers in a set"
        for spec in lv.tiers:
            if spec.rungs is not None and (len(spec.rungs) > 8 or spec.budget > 1 << 62):
                return "the compiled engine holds a dtype_ladder of at most 8 rungs and 2^62 bit-units"
            for side in _tier_rule_names(spec.eviction):
                if spec.cache and side not in names:
                    return f"the compiled engine has no eviction rule {side.strip()!r}"
    return None


def _tier_rule_names(rule) -> list:
    """The engine's rules a tier's eviction names: a rule, the sides of a segmented pair, or
    the rules of ``("weighted_sum", ((rule, weight), ...))``."""
    if isinstance(rule, tuple):
        return [r for r, _w in rule[1]]
    return [side.strip() for side in str(rule or "lru").split("|")]


def _tier_rule(rule):
    """A tier's eviction as the engine takes it: the rule's name, or weighted_sum's
    ((rule, weight), ...) (mpl/runtime/c/store_weighted.c)."""
    if isinstance(rule, tuple):
        return tuple((str(r), float(w)) for r, w in rule[1])
    return str(rule or "lru")


_TIER_KINDS = {"gpu": 0, "cpu": 1, "disk": 2}


def tiers_config(t, params: dict) -> tuple:
    """The engine's memory tiers (mpl/runtime/c/tiers.c, ``tiers_build``): (stored bits,
    freq_window, per layer its set, the dtype names, per set (label, layers, gpu tiers, disk
    tier, the tier a disk read goes into, its granularity_split, per tier (name, location,
    dtype, kind, bits, exact, always, in-place requantization below it, a unit's bytes, its
    promotion threshold, slots, eviction rule, a dtype_ladder's rungs (dtype, bits, a unit's
    bytes, exact) or None, the ladder's size in bit-units or -1))); only the sets some layer
    uses."""
    used = _used_levels(t)
    index = {lv.index: i for i, lv in enumerate(used)}
    dtypes: list = []
    for lv in used:
        for spec in lv.tiers:
            for d in (spec.dtype, *(r.dtype for r in spec.rungs or ())):
                if d is not None and d not in dtypes:
                    dtypes.append(d)
    nan = float("nan")
    levels = []
    for lv in used:
        tiers = []
        for j, spec in enumerate(lv.tiers):
            loc = spec.kind if spec.device is None else f"{spec.kind}:{spec.device}"
            thr = lv.promote[j]
            tiers.append((spec.name, loc, -1 if spec.dtype is None else dtypes.index(spec.dtype),
                          _TIER_KINDS[spec.kind], int(spec.bits), int(spec.exact), int(spec.always),
                          int(lv.demote[j] == "in_place_requant"), float(spec.unit_bytes),
                          nan if thr is None else float(thr), -1 if spec.slots is None else int(spec.slots),
                          _tier_rule(spec.eviction) if spec.cache else None,
                          None if spec.rungs is None else tuple(
                              (dtypes.index(r.dtype), int(r.bits), float(r.unit_bytes), int(r.exact))
                              for r in spec.rungs),
                          -1 if spec.budget is None else int(spec.budget)))
        levels.append((lv.label, tuple(lv.layers), lv.gpu, -1 if lv.disk is None else lv.disk,
                       -1 if lv.read_into is None else lv.read_into, int(lv.split), tuple(tiers)))
    return (t.stored_bits, int(params["cache.freq_window"]), tuple(index[i] for i in t.level_of),
            tuple(dtypes), tuple(levels))


def encode_action(kind: str, key, value, lay, cost) -> tuple:
    """One adapt action (``('set', key, value)``, ``('trigger', name, None)`` or
    ``('rebalance', None, allocation)``) as the engine takes it: (code, store parameter, int,
    real, hybrid limit, flag, rule, key index, logged key, logged value)."""
    nan = float("nan")
    if kind == "trigger":
        return (_A_TRIGGER[key], 0, 0, nan, nan, 0, None, -1, "trigger", key)
    if kind == "rebalance":
        return (_A_REBALANCE, 0, ALLOCATIONS[value], nan, nan, 0, None,
                PLAIN_KEYS.index("per_layer.allocation"), "per_layer.allocation", value)
    kidx = PLAIN_KEYS.index(key)
    plain = _plain(value)
    if key in STORE_PARAMS:
        return (_A["<store>"], STORE_PARAMS.index(key), 0, _count(value), nan, 0, None, kidx, key, plain)
    code = _A[key]
    i, d, d2, flag, rule = 0, nan, nan, 0, None
    if key in ("cache.capacity", "per_layer.total_budget"):    # a size: as many experts as fit
        # (a policy with memory tiers only records a cache parameter, as the pure runtime does:
        # a size is never turned into slots, nor refused for giving none)
        i = lay.slots(value) if lay.tiers is None else 0
    elif key == "cache.eviction":
        rule = str(value)
    elif key == "cache.ttl":
        i = -1 if value is None else int(getattr(value, "n", value))
        flag = 1 if getattr(value, "unit", "accesses") == "steps" else 0
    elif key == "prefetch.strategy":
        i = STRATEGIES[value]
    elif key == "schedule.mode":
        i = MODES[value]
    elif key == "schedule.offload_threshold_ms":
        d = float(value)
        d2 = cost.cpu_token_limit(lay.expert_bytes, d)
    elif key == "per_layer.allocation":
        i = ALLOCATIONS[value]
    elif key == "schedule.priority_routing":
        i = 1 if value else 0
    elif key in ("cache.memory_threshold", "cache.memory_headroom", "cache.memory_budget_gb",
                 "prefetch.affinity_threshold", "prefetch.confidence"):
        d = nan if value is None else float(value)
    else:                               # the counts: budgets, windows, intervals, bounds
        i = int(getattr(value, "n", value))
    return (code, 0, i, d, d2, flag, rule, kidx, key, plain)


def engine_config(lay, params: dict, features: dict, conditions, actions, inverses) -> dict:
    """The engine's configuration: the policy's values, features and rules over the slot
    layout ``lay`` (:func:`mpl.runtime.core.layout`)."""
    p = params
    cost = lay.cost
    ttl = p["cache.ttl"]
    thr = p["cache.memory_threshold"]
    rules = []
    for cond, acts, inv in zip(conditions, actions, inverses):
        metric, op, value, n, unit, line = cond
        rules.append((METRICS[metric], COMPARISONS[op], float(value), int(n), UNITS[unit],
                      -1 if inv is None else int(inv), int(line),
                      tuple(encode_action(kind, key, val, lay, cost) for kind, key, val in acts)))
    learned = None
    if features.get("learned"):
        learned = engine.Learned(lay.num_layers, lay.num_experts, int(p["prefetch.context_layers"]),
                                 int(p["prefetch.history_window"]), float(p["prefetch.confidence"]),
                                 int(features.get("affinity_depth", p["prefetch.lookahead"])))
    metrics = tuple(m for m in p["monitor.metrics"] if m in METRICS)
    tiers = None
    capacities = tuple(lay.capacities)
    if lay.tiers is not None:
        tiers = tiers_config(lay.tiers, p)
        capacities = tuple(lay.capacities[lv.index] for lv in _used_levels(lay.tiers))
    return {
        "tiers": tiers, "parts": _parts(lay.tiers),
        "num_layers": lay.num_layers, "num_experts": lay.num_experts, "top_k": lay.top_k,
        "expert_bytes": lay.expert_bytes, "pins": tuple(sorted(layer * lay.num_experts + e for layer, e in lay.pins)),
        "per_layer": int(lay.per_layer), "pool_size": lay.pool_size,
        "requested_slots": lay.requested_slots, "capacity": lay.capacity,
        "capacities": capacities, "eviction": str(p["cache.eviction"]),
        "store_params": tuple(_count(p[k]) for k in STORE_PARAMS),
        "weighted": int(bool(features.get("weighted"))),
        "mode": MODES[p["schedule.mode"]], "cpu_limit": lay.cpu_limit,
        "priority": int(bool(p["schedule.priority_routing"])),
        "strategy": STRATEGIES[p["prefetch.strategy"]], "budget": int(p["prefetch.budget"]),
        "lookahead": int(p["prefetch.lookahead"]),
        "affinity_threshold": float(p["prefetch.affinity_threshold"]),
        "f_prefetch": int(bool(features.get("prefetch"))),
        "f_history": int(bool(features.get("history"))),
        "f_affinity": int(bool(features.get("affinity"))),
        "f_learned": int(bool(features.get("learned"))),
        "f_lookahead": int(bool(features.get("lookahead_strategy"))),
        "next_only": int(bool(features.get("history_next_only"))),
        "affinity_depth": int(features.get("affinity_depth", p["prefetch.lookahead"])),
        "history_window": int(p["prefetch.history_window"]), "learned": learned,
        "f_ttl": int(bool(features.get("ttl"))),
        "ttl_n": None if ttl is None else int(getattr(ttl, "n", ttl)),
        "ttl_steps": int(getattr(ttl, "unit", "accesses") == "steps"),
        "f_memory": int(bool(features.get("memory"))),
        "memory_threshold": None if thr is None else float(thr),
        "memory_headroom": float(p["cache.memory_headroom"]),
        "memory_budget": float(p["cache.memory_budget_gb"]) * 1e9,
        "allocation": ALLOCATIONS[p["per_layer.allocation"]],
        "f_signal": int(bool(features.get("signal"))),
        "f_rebalance": int(bool(features.get("rebalance"))),
        "budget_derived": int(lay.budget_derived), "total_budget": lay.total_budget,
        "min_capacity": lay.min_cap, "max_capacity": lay.max_cap,
        "rebalance_interval": int(p["per_layer.rebalance_interval"]),
        "entropy_window": int(p["per_layer.entropy_window"]),
        "f_monitor": int(bool(features.get("monitor"))),
        "warm_on_eviction": int(p.get("monitor.warmup", "first_eviction") == "first_eviction"
                                and bool(rules)),
        "monitor_window": int(p["monitor.window"]), "log_interval": int(p["monitor.log_interval"]),
        "metrics": metrics, "metric_codes": tuple(METRICS[m] for m in metrics),
        "rules": tuple(rules),
        "plain_keys": PLAIN_KEYS,
        "plain_values": tuple(_plain(p.get(k)) for k in PLAIN_KEYS),
        "kidx_capacity": PLAIN_KEYS.index("cache.capacity"),
        "kidx_allocation": PLAIN_KEYS.index("per_layer.allocation"),
    }
