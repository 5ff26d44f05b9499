"""The intermediate representation: a resolved, fully defaulted, immutable policy.

Produced by :mod:`mpl.lower` from a checked AST (``extends`` applied, aliases resolved,
conditional values turned into adapt-rule pairs, units normalised). Consumed by the code
generator, the eDSL (which builds the same IR) and tests. Parameter names are never spelt
here: ``PolicyIR.values`` is keyed by the schema's ``"block.name"`` keys and holds a value for
*every* parameter of the schema (defaults filled in; ``OFF``/``DERIVED`` lower to ``None``).

Value representation in ``values`` (and in ``SetAction.value``):

* ``int`` / ``float`` / ``bool`` / ``str`` (enum names) as written, numbers with a unit
  normalised to the parameter's base: time in ms (``5 us`` -> ``0.005``), sizes given to
  ``*_gb`` parameters in GB (``512 MiB`` -> ``0.536870912``);
* ``cache.capacity``: ``int`` slots, or :class:`Size` when written with a size unit;
* ``cache.eviction``: the canonical string ``"lru"`` or, for the segmented form,
  ``"lfu|lru"`` (``fallback`` lowers to ``"lfu|lru"``);
* ``cache.ttl``: :class:`Count` (``None`` when off);
* count parameters without alternative units (``decay_interval``, ``history_window``, ...):
  plain ``int``;
* lists: tuples.

The cache's per-layer pins (``pin layers = FIRST..LAST { experts = [...] }`` items) are not
values either: ``PolicyIR.layer_pins`` holds a :class:`LayerPins` per item, by first layer
(``cache.pin``, the ids pinned in every layer, is a value).

Memory tiers (``hierarchy``, ``per_layer_hierarchy``; docs/memory-tiers.md) are not values:
``PolicyIR.hierarchy`` is a :class:`Hierarchy` (``None`` without a hierarchy block) and
``PolicyIR.bands`` the :class:`Band` of each band of layers (``()`` without a
``per_layer_hierarchy`` block), every one fully resolved: ``extends`` and the hierarchy's
tiers under a band applied, every default filled in, the tier that holds every expert made
explicit, and a promotion and a demotion for every pair of adjacent tiers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class Size:
    """A memory size in bytes (``cache.capacity = 12GiB``)."""
    bytes: int

    def __str__(self) -> str:
        return f"{self.bytes}B"


@dataclass(frozen=True, slots=True)
class Count:
    """A count with its unit: ``Count(100, "accesses")`` or ``Count(4, "steps")``."""
    n: int
    unit: str = "accesses"


@dataclass(frozen=True, slots=True)
class Condition:
    metric: str          # a schema.METRICS name
    op: str              # one of schema.COMPARISON_OPS
    threshold: float

    def holds(self, x: float) -> bool:
        op = self.op
        if op == "<":
            return x < self.threshold
        if op == ">":
            return x > self.threshold
        if op == "<=":
            return x <= self.threshold
        if op == ">=":
            return x >= self.threshold
        if op == "==":
            return x == self.threshold
        return x != self.threshold


@dataclass(frozen=True, slots=True)
class SetAction:
    key: str             # schema key, aliases resolved: "cache.eviction"
    value: Any           # lowered like PolicyIR.values


@dataclass(frozen=True, slots=True)
class TriggerAction:
    trigger: str         # a schema.TRIGGERS name


@dataclass(frozen=True, slots=True)
class RebalanceAction:
    allocation: str      # an enum value of per_layer.allocation


@dataclass(frozen=True, slots=True)
class AdaptRule:
    """One edge-triggered rule. ``duration`` 0 means "fires at once"."""
    index: int                      # position among the policy's rules (stable names: rule0, ...)
    condition: Condition
    duration: Count                 # consecutive accesses/steps/tokens the condition must hold
    actions: tuple                  # of SetAction | TriggerAction | RebalanceAction
    origin: str = "rule"            # "rule" | "conditional" (from `p = a : b when c`)
    inverse_of: int | None = None   # for the restoring half of a conditional pair
    # 1-based line in the source, for the adapt log; not part of equality (a formatted file's
    # IR equals the original's)
    source_line: int = field(default=0, compare=False)


# ---------------------------------------------------------------- memory tiers
@dataclass(frozen=True, slots=True)
class Location:
    """Where a tier keeps its experts: ``kind`` "gpu", "cpu" or "disk"; ``index`` the device
    of ``gpu:N`` (``None``: the device the model runs on)."""
    kind: str
    index: int | None = None

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


@dataclass(frozen=True, slots=True)
class Layers:
    """A band's layers, ``first..last``, both included (decoder-layer ids, as in traces)."""
    first: int
    last: int

    def __contains__(self, layer: int) -> bool:
        return self.first <= layer <= self.last

    def __str__(self) -> str:
        return f"{self.first}..{self.last}"


@dataclass(frozen=True, slots=True)
class LayerPins:
    """A ``pin layers = FIRST..LAST { experts = [...] }`` item of the cache block: these expert
    ids are pinned in each of these layers (decoder-layer ids), besides ``cache.pin``'s."""
    layers: Layers
    experts: tuple[int, ...]
    source_line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class WeightedSum:
    """``weighted_sum(lru = 0.5, lfu = 0.5)``: ``weights`` as written, ``(rule, weight)``
    pairs of single-queue rules, each named once; only their ratios matter."""
    weights: tuple[tuple[str, float], ...]


#: the name of the tier made explicit below the written ones when they end on a GPU: host
#: memory holding every expert (a name no tier can be written with)
HOST_TIER = "<host>"


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier, fully defaulted. ``dtype`` ``None`` is the checkpoint's own precision;
    ``dtype_ladder`` ``()`` is one precision (else its first rung is ``dtype``);
    ``capacity`` an ``int`` number of slots or a :class:`Size`, as written, or ``None`` for
    the last tier, which holds every expert (a last cpu tier keeps a written capacity: the
    host memory it may use); ``eviction`` ``None`` for the last tier and for a tier whose
    ``residency`` is ``"always"`` (nothing is evicted from them); ``implicit`` for the
    host-memory tier that was not written (:data:`HOST_TIER`). docs/memory-tiers.md."""
    name: str
    location: Location
    dtype: str | None
    dtype_ladder: tuple[str, ...]
    capacity: Any                           # int | Size | None
    residency: str                          # "on_demand" | "always"
    eviction: Any                           # str | WeightedSum | None
    path: str | None                        # disk: None is the checkpoint's own files
    implicit: bool = False
    source_line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Transition:
    """A move between two adjacent tiers: ``event`` "demote" (``source`` the upper tier,
    ``target`` the one below it) or "promote" (``source`` the lower tier, ``target`` the one
    above it). ``mechanism`` "copy" or "in_place_requant"; ``trigger_threshold`` ``None``
    admits every promoted key."""
    event: str
    source: str
    target: str
    mechanism: str
    trigger_threshold: float | None


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Tiers fastest first (the last holds every expert), the transitions of every adjacent
    pair (for tiers i and i+1: demote(i -> i+1), then promote(i+1 -> i)), the default eviction
    and the number of parts an expert is moved and cached as."""
    tiers: tuple[Tier, ...]
    transitions: tuple[Transition, ...]
    eviction: Any                           # str | WeightedSum
    granularity_split: int
    source_line: int = field(default=0, compare=False)   # of its block or band

    def tier(self, name: str) -> Tier | None:
        for t in self.tiers:
            if t.name == name:
                return t
        return None


@dataclass(frozen=True, slots=True)
class Band:
    """The tiers of a band of layers (``per_layer_hierarchy``)."""
    layers: Layers
    hierarchy: Hierarchy
    source_line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class PolicyIR:
    name: str
    values: Mapping[str, Any]                   # every schema key -> lowered value
    blocks: frozenset[str]                      # blocks present in the source (after extends)
    adapt: tuple[AdaptRule, ...] = ()
    parent: str | None = None
    source_path: str | None = None
    source_hash: str = ""                       # sha256 of the source text(s) it came from
    hierarchy: Hierarchy | None = None          # the hierarchy block, resolved
    bands: tuple[Band, ...] = ()                # per_layer_hierarchy, by first layer
    layer_pins: tuple[LayerPins, ...] = ()      # the cache's per-layer pins, by first layer
    source_line: int = 0                        # of `policy NAME`; not part of equality

    def __post_init__(self) -> None:
        if not isinstance(self.values, MappingProxyType):
            object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def per_layer(self) -> bool:
        return "per_layer" in self.blocks

    @property
    def tiered(self) -> bool:
        """Whether the policy describes memory tiers (a hierarchy or bands of layers)."""
        return self.hierarchy is not None or bool(self.bands)

    def hierarchy_for(self, layer: int) -> Hierarchy | None:
        """The tiers of ``layer``: its band's, else the hierarchy's (None: neither)."""
        for b in self.bands:
            if layer in b.layers:
                return b.hierarchy
        return self.hierarchy

    # Equality ignores where the policy came from: the IR of a formatted file equals the
    # IR of the original, and the eDSL's IR equals the text's.
    def _key(self):
        return (self.name, tuple(sorted(self.values.items(), key=lambda kv: kv[0])),
                self.blocks, self.adapt, self.parent, self.hierarchy, self.bands, self.layer_pins)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PolicyIR) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def to_json(self) -> str:
        """Deterministic JSON (used for hashing and for embedding in compiled modules)."""
        return json.dumps(to_jsonable(self), sort_keys=True, separators=(",", ":"))

    def fingerprint(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def to_jsonable(obj: Any) -> Any:
    """A JSON-compatible rendering of IR values (tagged for the non-plain types)."""
    if isinstance(obj, PolicyIR):
        out = {"name": obj.name, "parent": obj.parent, "blocks": sorted(obj.blocks),
               "values": {k: to_jsonable(v) for k, v in sorted(obj.values.items())},
               "adapt": [to_jsonable(r) for r in obj.adapt]}
        # only tiered policies carry these keys: every other IR's JSON (and fingerprint) is
        # what it always was
        if obj.hierarchy is not None:
            out["hierarchy"] = to_jsonable(obj.hierarchy)
        if obj.bands:
            out["bands"] = [to_jsonable(b) for b in obj.bands]
        if obj.layer_pins:     # (likewise: only policies with per-layer pins)
            out["layer_pins"] = [to_jsonable(p) for p in obj.layer_pins]
        return out
    if isinstance(obj, Location):
        return str(obj)
    if isinstance(obj, Layers):
        return {"first": obj.first, "last": obj.last}
    if isinstance(obj, LayerPins):
        return {"layers": to_jsonable(obj.layers), "experts": list(obj.experts),
                "line": obj.source_line}
    if isinstance(obj, WeightedSum):
        return {"weighted_sum": [[rule, w] for rule, w in obj.weights]}
    if isinstance(obj, Tier):
        return {"name": obj.name, "location": str(obj.location), "dtype": obj.dtype,
                "dtype_ladder": list(obj.dtype_ladder), "capacity": to_jsonable(obj.capacity),
                "residency": obj.residency, "eviction": to_jsonable(obj.eviction),
                "path": obj.path, "implicit": obj.implicit, "line": obj.source_line}
    if isinstance(obj, Transition):
        return {"event": obj.event, "source": obj.source, "target": obj.target,
                "mechanism": obj.mechanism, "trigger_threshold": obj.trigger_threshold}
    if isinstance(obj, Hierarchy):
        return {"tiers": [to_jsonable(t) for t in obj.tiers],
                "transitions": [to_jsonable(t) for t in obj.transitions],
                "eviction": to_jsonable(obj.eviction),
                "granularity_split": obj.granularity_split}
    if isinstance(obj, Band):
        return {"layers": to_jsonable(obj.layers), "hierarchy": to_jsonable(obj.hierarchy)}
    if isinstance(obj, Size):
        return {"size_bytes": obj.bytes}
    if isinstance(obj, Count):
        return {"count": obj.n, "unit": obj.unit}
    if isinstance(obj, Condition):
        return {"metric": obj.metric, "op": obj.op, "threshold": obj.threshold}
    if isinstance(obj, SetAction):
        return {"set": obj.key, "value": to_jsonable(obj.value)}
    if isinstance(obj, TriggerAction):
        return {"trigger": obj.trigger}
    if isinstance(obj, RebalanceAction):
        return {"rebalance": obj.allocation}
    if isinstance(obj, AdaptRule):
        return {"index": obj.index, "condition": to_jsonable(obj.condition),
                "duration": to_jsonable(obj.duration),
                "actions": [to_jsonable(a) for a in obj.actions], "origin": obj.origin,
                "inverse_of": obj.inverse_of, "line": obj.source_line}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    return obj
