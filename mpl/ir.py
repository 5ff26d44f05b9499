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


@dataclass(frozen=True)
class PolicyIR:
    name: str
    values: Mapping[str, Any]                   # every schema key -> lowered value
    blocks: frozenset[str]                      # blocks present in the source (after extends)
    adapt: tuple[AdaptRule, ...] = ()
    parent: str | None = None
    source_path: str | None = None
    source_hash: str = ""                       # sha256 of the source text(s) it came from

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

    # Equality ignores where the policy came from: the IR of a formatted file equals the
    # IR of the original, and the eDSL's IR equals the text's.
    def _key(self):
        return (self.name, tuple(sorted(self.values.items(), key=lambda kv: kv[0])),
                self.blocks, self.adapt, self.parent)

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
        return {"name": obj.name, "parent": obj.parent, "blocks": sorted(obj.blocks),
                "values": {k: to_jsonable(v) for k, v in sorted(obj.values.items())},
                "adapt": [to_jsonable(r) for r in obj.adapt]}
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
