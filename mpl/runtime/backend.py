"""A runtime's backend, chosen once for its whole life, and the :class:`Runtime` users hold.

``policy.runtime(...)`` (a compiled policy module's ``make_runtime``) makes a runtime on the
compiled engine (mpl/runtime/c, :mod:`mpl.runtime.compiled`) when it is built and covers the
policy on that shape, else on the pure-Python reference (:mod:`mpl.runtime.core` and the
module's generated class); ``backend="pure"`` or ``"compiled"`` asks for one. Both give the
same plans and statistics, bit for bit. ``rt.backend`` says which one a runtime has and
``rt.backend_reason`` why it is pure.

The runtime's state lives in its backend alone: the :class:`Runtime` object has no state of
its own but the layout it was built with, takes no attribute writes, and reads through
getters that copy what they return. Its one write is :meth:`Runtime.set`, an adapt action
applied between dispatches, checked against the schema first.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager

from mpl import schema
from mpl.runtime import compiled, core
from mpl.runtime.errors import RuntimeConfigError
from mpl.runtime.values import Count, Size

PURE, COMPILED = "pure", "compiled"

_forced = compiled.forced   # backends forced by forced() (innermost last)


@contextmanager
def forced(name: str):
    """Make every runtime built inside the block on backend ``name`` ("pure" or "compiled"),
    and run the compiled helpers (Belady, trace reading, packing) on it too."""
    if name not in (PURE, COMPILED):
        raise ValueError(f"a backend is 'pure' or 'compiled', not {name!r}")
    _forced.append(name)
    try:
        yield
    finally:
        _forced.pop()


def default() -> str:
    """The backend a runtime gets when its policy is covered: compiled where the engine is
    built and not switched off (``MPL_PURE``), else pure."""
    if _forced:
        return _forced[-1]
    return COMPILED if compiled.available() else PURE


def info() -> dict:
    """The backend new runtimes get and, when it is pure, why (``mplc doctor``)."""
    name = default()
    return {"backend": name, "reason": None if name == COMPILED else
            ("forced pure" if _forced else compiled.WHY), "env": os.environ.get(compiled.ENV_PURE)}


def make(cls, params: dict, features: dict, conditions, actions, inverses, num_layers,
         num_experts, top_k, *, expert_bytes=None, cost=None, backend=None, policy=None,
         layer_ids=None, stored_bits=None) -> "Runtime":
    """A runtime of a compiled policy module's policy (its generated pure class ``cls``, its
    ``PARAMS``, ``FEATURES`` and rules) for a model shape, on ``backend`` (None: the default
    where it covers the policy). ``layer_ids`` and ``stored_bits``: the MoE layers'
    decoder-layer ids and the checkpoint's precision, for memory tiers (core.layout)."""
    lay = core.layout(params, features, num_layers, num_experts, top_k, expert_bytes=expert_bytes,
                      cost=cost, layer_ids=layer_ids, stored_bits=stored_bits)
    want = backend if backend is not None else default()
    if want not in (PURE, COMPILED):
        raise RuntimeConfigError(f"backend must be 'pure' or 'compiled', not {backend!r}")
    why = None
    if want == COMPILED:
        why = compiled.unsupported(lay, params, features, actions)
        if why is not None and backend == COMPILED:
            raise RuntimeConfigError(f"the compiled backend cannot hold this runtime: {why}")
    if want == PURE or why is not None:
        impl = cls(lay, params, features, rules=inverses)
        return Runtime(impl, PURE, why or ("asked for" if backend == PURE else
                                           "forced pure" if _forced else compiled.WHY),
                       lay, features, policy)
    cfg = compiled.engine_config(lay, params, features, conditions, actions, inverses)
    return Runtime(compiled.engine.Engine(cfg), COMPILED, None, lay, features, policy)


class Runtime:
    """One policy's runtime for one model shape (SPEC §5, §9): ``dispatch`` and ``hits``, the
    getters, ``set`` and ``add_stall``, replays. Made by ``policy.runtime(...)``."""

    __slots__ = ("dispatch", "hits", "_impl", "backend", "backend_reason", "_lay", "_features",
                 "policy")

    def __init__(self, impl, backend: str, reason, lay, features: dict, policy):
        for name, value in (("_impl", impl), ("dispatch", impl.dispatch), ("hits", impl.hits),
                            ("backend", backend), ("backend_reason", reason), ("_lay", lay),
                            ("_features", dict(features)), ("policy", policy)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"a runtime's state is its backend's: {name!r} cannot be set "
                             f"(change an adaptable parameter with rt.set(key, value))")

    __delattr__ = __setattr__

    def __repr__(self) -> str:
        return (f"<mpl Runtime {self.policy or ''} {self.num_layers}x{self.num_experts} "
                f"top-{self.top_k}, {self.backend}>")

    # ---------------------------------------------------------------- shape
    @property
    def num_layers(self) -> int:
        return self._lay.num_layers

    @property
    def num_experts(self) -> int:
        return self._lay.num_experts

    @property
    def top_k(self) -> int:
        return self._lay.top_k

    @property
    def expert_bytes(self) -> float:
        return self._lay.expert_bytes

    @property
    def per_layer(self) -> bool:
        return self._lay.per_layer

    @property
    def cost(self):
        """The cost model the hybrid schedule decides with (mpl.runtime.cost.CostModel)."""
        return self._lay.cost

    @property
    def num_slots(self) -> int:
        """The slot pool's size (what the mechanism allocates)."""
        return self._lay.pool_size

    @property
    def requested_slots(self) -> int:
        return self._lay.requested_slots

    @property
    def tiers(self) -> list | None:
        """A tiered policy's tiers on this shape (per set of tiers: its label, MoE layers,
        granularity split and tiers with their slots, precision and bytes); None without
        memory tiers."""
        t = self._lay.tiers
        return None if t is None else t.describe()

    @property
    def tier_layout(self):
        """The :class:`mpl.runtime.tier_layout.TierLayout` (None without memory tiers)."""
        return self._lay.tiers

    # ---------------------------------------------------------------- reads
    @property
    def step(self) -> int:
        impl = self._impl
        if self.backend == COMPILED:
            return impl.step
        with impl._guard.read():
            return impl.step

    @property
    def stall(self) -> float:
        impl = self._impl
        if self.backend == COMPILED:
            return impl.stall
        with impl._guard.read():
            return impl.stall

    def stats(self) -> dict:
        return self._impl.stats()

    get_stats = stats

    def capacities(self) -> list:
        return self._impl.capacities()

    def resident(self) -> dict:
        """key -> slot of every resident key, in key order."""
        return self._impl.resident()

    def store_keys(self) -> list:
        """Per cache (the shared one, or one per layer) its resident keys as its eviction
        rule orders them, coldest first."""
        return self._impl.store_keys()

    def metrics(self) -> dict:
        return self._impl.metrics()

    def monitor_log(self) -> list:
        return self._impl.monitor_log()

    def values(self) -> dict:
        """The adaptable parameters' values now (a capacity in slots, a size as "NB")."""
        return self._impl.values()

    @property
    def learned(self):
        """The learned predictor, read only (``rt.learned.dump()``); None: the policy has none."""
        return _LearnedView(self) if self._features.get("learned") else None

    # ---------------------------------------------------------------- writes
    def add_stall(self, ms) -> None:
        """A measured (or simulated) stall in ms: a finite number >= 0."""
        self._impl.add_stall(ms)

    def set(self, key: str, value) -> list:
        """Change an adaptable parameter between dispatches, as an adapt action would (the
        cache keeps its residents; a capacity cut evicts down to the new size). The value is
        checked as the checker checks one value of that parameter. Returns what it evicted, as
        ``((layer, expert), slot)`` pairs (a live mechanism frees those slots)."""
        value = checked_value(key, value)
        why = unreachable(self._features, self._lay, key, value)
        if why is not None:
            raise RuntimeConfigError(f"{key} = {_shown(value)}: {why}")
        if self.backend == PURE:
            return self._impl.set(key, value)
        lay = self._lay
        return self._impl._apply(compiled.encode_action("set", key, value, lay, lay.cost))

    # ---------------------------------------------------------------- replays
    def replay_records(self, records, tl, tick=None, every=0) -> int:
        """Dispatch every record (``(layer, experts, weights, tokens, step, predictions,
        tokens_of)``, mpl.sim.replay.records_of) and play it on the timeline ``tl``; the
        record count. ``tick(count)`` every ``every`` records."""
        if self.backend == PURE:
            return self._impl.replay_records(records, tl, tick, every)
        from mpl.runtime import packing
        return self._impl.replay(packing.pack(records, self.num_experts), tl, tick, every)

    def replay_packed(self, packed, tl, tick=None, every=0) -> int:
        """:meth:`replay_records` of packed records (mpl.runtime.packing)."""
        if self.backend == PURE:
            from mpl.runtime import packing
            return self._impl.replay_records(packing.records_of(packed), tl, tick, every)
        return self._impl.replay(packed, tl, tick, every)


class _LearnedView:
    """``rt.learned``: the runtime's learned predictor, read only."""

    __slots__ = ("_rt",)

    def __init__(self, rt):
        self._rt = rt

    def dump(self):
        return self._rt._impl.learned_dump()


# ------------------------------------------------------------------ checking a set() value
def _shown(value) -> str:
    if isinstance(value, Size):
        return f"{value.bytes} bytes"
    if isinstance(value, Count):
        return f"{value.n} {value.unit}"
    return repr(value)


def unreachable(features: dict, lay, key: str, value) -> str | None:
    """Why a runtime built for a policy with these ``features`` cannot take ``key = value``
    (None: it can). A runtime holds the machinery of the values its policy reaches (its
    initial ones and those its adapt rules set): a rule, a strategy, a schedule mode or an
    allocation it never reaches has no tables and no code path there."""
    f = features
    if f.get("tiers") and key.startswith("cache."):
        return ("this policy has memory tiers instead of a cache block: cache parameters have "
                "no effect on it (MPL422); change its tiers in the policy")
    reach = {"cache.eviction": "evictions", "prefetch.strategy": "strategies",
             "schedule.mode": "modes", "per_layer.allocation": "allocations"}
    if key in reach:
        if key == "per_layer.allocation" and not lay.per_layer:
            return None                 # (no per-layer caches: it has no effect, as in a rule)
        vals = tuple(f.get(reach[key], ()))
        if value not in vals:
            return (f"not a value this policy reaches (its runtime is built for "
                    f"{', '.join(map(repr, vals))}: its initial value and those its adapt rules "
                    f"set); write the value into the policy")
        return None
    off = {"schedule.priority_routing": ("priority", bool(value)),
           "cache.ttl": ("ttl", value is not None),
           "cache.memory_threshold": ("memory", value is not None),
           "per_layer.rebalance_interval": ("rebalance", lay.per_layer and bool(value))}
    if key in off:
        feature, on = off[key]
        if on and not f.get(feature):
            return ("this policy never turns it on, so its runtime keeps no machinery for it; "
                    "write it into the policy")
        return None
    if key == "prefetch.lookahead" and value != 1 and f.get("history_next_only"):
        return ("this policy prefetches one layer ahead only, so its runtime looks no further; "
                "write the lookahead into the policy")
    return None

def checked_value(key: str, value):
    """``value`` for the adaptable parameter ``key`` in the runtime's representation (an int,
    a float, a name, a bool, None where the parameter can be off, a Size or a Count), or
    RuntimeConfigError naming the parameter and what it takes."""
    p = schema.PARAMS.get(key)
    if p is None or not p.adaptable:
        adaptable = ", ".join(k for k, q in schema.PARAMS.items() if q.adaptable)
        raise RuntimeConfigError(f"{key!r} is not a parameter a runtime can change; these are: "
                                 f"{adaptable}")
    want = f"{key} takes {schema.TYPE_DOCS.get(p.type, p.type)}" + (
        f" ({p.range_text()})" if p.range_text() else "")
    if value is None:
        if p.default is schema.OFF:
            return None
        raise RuntimeConfigError(f"{want}, not None")
    if p.type == schema.BOOL:
        if isinstance(value, bool):
            return value
        raise RuntimeConfigError(f"{want}, not {value!r}")
    if p.type == schema.ENUM:
        if not isinstance(value, str):
            raise RuntimeConfigError(f"{want}, not {value!r}")
        sides = [v.strip() for v in value.split("|")] if p.fallback and "|" in value else [value]
        for v in sides:
            ev = p.enum_value(v)
            if ev is None or ev.replay_only or (len(sides) == 2 and not ev.segment) or len(sides) > 2:
                raise RuntimeConfigError(f"{want}, not {value!r}")
        return "|".join(sides)
    if p.type == schema.SLOTS_OR_SIZE and isinstance(value, Size):
        if not value.bytes > 0:
            raise RuntimeConfigError(f"{want}, not a size of {value.bytes} bytes")
        return value
    if p.type == schema.COUNT and isinstance(value, Count):
        if value.unit not in p.units:
            raise RuntimeConfigError(f"{want}, in {', '.join(p.units) or 'no unit'}; not {value.unit!r}")
        _in_range(p, want, value.n, integer=True)
        return value
    integer = p.type in (schema.INT, schema.COUNT, schema.SLOTS_OR_SIZE)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RuntimeConfigError(f"{want}, not {value!r}")
    if integer:
        if isinstance(value, float):
            if not (math.isfinite(value) and value == int(value)):
                raise RuntimeConfigError(f"{want}, not {value!r}")
            value = int(value)
    elif not math.isfinite(value):
        raise RuntimeConfigError(f"{want}, not {value!r}")
    _in_range(p, want, value, integer)
    return value


def _in_range(p, want: str, v, integer: bool) -> None:
    lo, hi = p.min, p.max
    if p.type == schema.SLOTS_OR_SIZE and lo is None:
        lo = 1
    bad = ((lo is not None and (v <= lo if p.min_open else v < lo)) or
           (hi is not None and (v >= hi if p.max_open else v > hi)))
    if bad:
        raise RuntimeConfigError(f"{want}, not {v!r}")
