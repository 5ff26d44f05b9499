"""The layout of a policy's memory tiers on a model shape (SPEC §12): which set of tiers each
MoE layer has, and every tier's slots, precision and bytes. Computed once by
:func:`mpl.runtime.core.layout` from the policy's ``FEATURES["tiers"]`` (the plain data of
:func:`mpl.features.tiers_table`); the runtime (:mod:`mpl.runtime.tiers`), the timeline
(:mod:`mpl.timemodel.tiers`) and the replay report read it.

Words: a *level* is one set of tiers (the hierarchy's, or a band's); a *unit* is what a tier
caches: an expert, or with ``granularity_split = N`` one of its N equal parts. A tier's
*slots* count units (``capacity`` experts are ``capacity x N`` part slots). Imports only the
schema and the runtime's errors.
"""

from __future__ import annotations

from mpl.runtime.errors import RuntimeConfigError
from mpl.schema import DTYPES

#: the checkpoint's precision when the caller does not say (fp16 / bf16)
STORED_BITS = 16

#: a size capacity's slots saturate here (as mpl.runtime.core.CAPACITY_SLOTS_MAX)
_SLOTS_MAX = (1 << 31) - 1


class TierSpec:
    """One tier of one level, resolved for the model shape."""

    __slots__ = ("index", "name", "kind", "device", "dtype", "bits", "slots", "residency",
                 "eviction", "implicit", "path", "exact", "unit_bytes", "host_bytes", "rungs",
                 "budget")

    # ``rungs``: a cache tier with a dtype_ladder of several precisions: ``(Rung, ...)`` from
    # the highest precision to the lowest (None: one precision); ``budget``: what it may
    # hold, in bit-units (one unit at one bit per parameter; a unit at rung r costs
    # ``rungs[r].bits``), so that the ladder's accounting is exact integers; its ``slots``
    # are as many units as fit at the lowest rung (the most keys it can ever hold).

    @property
    def always(self) -> bool:
        return self.residency == "always"

    @property
    def cache(self) -> bool:
        """A tier with slots (not the last, which holds every expert)."""
        return self.slots is not None

    def describe(self) -> dict:
        out = {"index": self.index, "name": self.name, "location": self.kind if self.device is None
               else f"{self.kind}:{self.device}", "dtype": self.dtype, "bits": self.bits,
               "slots": self.slots, "residency": self.residency, "exact": self.exact,
               "unit_bytes": self.unit_bytes, "implicit": self.implicit}
        if self.rungs is not None:
            out["dtype_ladder"] = [r.dtype for r in self.rungs]
            out["bytes"] = self.capacity_bytes
        return out

    @property
    def capacity_bytes(self) -> float | None:
        """The bytes a cache tier holds when full (None: the last tier)."""
        if self.slots is None:
            return None
        if self.rungs is None:
            return self.slots * self.unit_bytes
        return self.budget * self.rungs[0].unit_bytes / self.rungs[0].bits

    def rung_of(self, dtype) -> int:
        """The rung of a ladder tier that holds ``dtype``."""
        for i, r in enumerate(self.rungs):
            if r.dtype == dtype:
                return i
        raise KeyError(dtype)

    def bytes_at(self, dtype) -> float:
        """One unit's bytes in this tier at ``dtype`` (a rung of its ladder; None or the
        tier's own dtype: ``unit_bytes``)."""
        if self.rungs is None or dtype is None or dtype == self.dtype:
            return self.unit_bytes
        return self.rungs[self.rung_of(dtype)].unit_bytes


class Rung:
    """One precision of a tier's dtype_ladder: its name, bits, one unit's bytes, and whether
    it is at the checkpoint's precision (exact)."""

    __slots__ = ("dtype", "bits", "unit_bytes", "exact")

    def __init__(self, dtype: str, bits: int, unit_bytes: float, exact: bool):
        self.dtype, self.bits, self.unit_bytes, self.exact = dtype, bits, unit_bytes, exact


class LevelSpec:
    """A set of tiers and the MoE layers (ordinals) that use it."""

    __slots__ = ("index", "label", "first", "last", "layers", "split", "tiers", "promote",
                 "demote", "gpu", "disk", "read_into", "thresholds")

    @property
    def last_tier(self) -> int:
        return len(self.tiers) - 1

    def describe(self) -> dict:
        return {"label": self.label, "layers": list(self.layers), "split": self.split,
                "tiers": [t.describe() for t in self.tiers]}


class TierLayout:
    """Every level, the level of each MoE layer, and the checkpoint's precision."""

    __slots__ = ("levels", "level_of", "stored_bits", "layer_ids")

    def describe(self) -> list:
        return [lv.describe() for lv in self.levels]


def layer_id_list(value, name: str, n: int) -> list[int]:
    """``value`` as ``n`` distinct decoder-layer ids >= 0 (RuntimeConfigError otherwise)."""
    try:
        out = [int(x) for x in value]
    except (TypeError, ValueError):
        raise RuntimeConfigError(f"{name} must be {n} decoder-layer ids, got {value!r}") from None
    if len(out) != n or any(isinstance(x, bool) or x < 0 for x in value) or len(set(out)) != n:
        raise RuntimeConfigError(f"{name} must be {n} distinct decoder-layer ids >= 0 (one per "
                                 f"MoE layer), got {list(value)!r}")
    return out


def stored_bits_of(value) -> int:
    """The checkpoint's precision in bits (16 or 32; None: 16)."""
    if value is None:
        return STORED_BITS
    if isinstance(value, bool) or value not in (16, 32):
        raise RuntimeConfigError(f"stored_bits (the checkpoint's precision) must be 16 or 32, "
                                 f"got {value!r}")
    return int(value)


def tier_layout(table, num_layers: int, num_experts: int, expert_bytes: float, *,
                layer_ids=None, stored_bits=None) -> TierLayout:
    """The :class:`TierLayout` of ``table`` (``FEATURES["tiers"]``) on a model of
    ``num_layers`` MoE layers (``layer_ids``: their decoder-layer ids, which bands name;
    None: the ordinals themselves) of ``num_experts`` experts of ``expert_bytes`` bytes at
    ``stored_bits``; RuntimeConfigError for a shape the tiers cannot take."""
    L = num_layers
    ids = list(range(L)) if layer_ids is None else layer_id_list(layer_ids, "layer_ids", L)
    stored = stored_bits_of(stored_bits)
    out = TierLayout()
    out.stored_bits, out.layer_ids = stored, ids
    levels = []
    for i, (label, first, last, split, tiers, moves) in enumerate(table):
        lv = LevelSpec()
        lv.index, lv.label, lv.first, lv.last, lv.split = i, label, first, last, int(split)
        lv.layers = []
        lv.tiers = [_tier(j, t, j == len(tiers) - 1, lv.split, expert_bytes, stored)
                    for j, t in enumerate(tiers)]
        n = len(lv.tiers)
        lv.promote = [None] * n            # [t]: promote(t+1 -> t)'s trigger_threshold
        lv.demote = ["copy"] * n           # [t]: demote(t -> t+1)'s mechanism
        for event, src, dst, mechanism, threshold in moves:
            if event == "promote":
                lv.promote[dst] = threshold
            else:
                lv.demote[src] = mechanism
        lv.thresholds = any(x is not None for x in lv.promote)
        lv.gpu = 0
        while lv.gpu < n and lv.tiers[lv.gpu].kind == "gpu":
            lv.gpu += 1
        lv.disk = n - 1 if lv.tiers[-1].kind == "disk" else None
        lv.read_into = n - 2 if lv.disk is not None and n > 1 and lv.tiers[n - 2].cache else None
        if lv.disk is not None and (lv.read_into is None or lv.tiers[lv.read_into].kind != "cpu"):
            raise RuntimeConfigError(f"the disk tier '{lv.tiers[-1].name}' of {label} is read into "
                                     f"host memory first: it needs a cpu tier with a capacity "
                                     f"above it (MPL327)")
        levels.append(lv)
    hierarchy = next((lv for lv in levels if lv.first is None), None)
    bands = [lv for lv in levels if lv.first is not None]
    out.level_of = []
    for ordinal, d in enumerate(ids):
        lv = next((b for b in bands if b.first <= d <= b.last), hierarchy)
        if lv is None:
            raise RuntimeConfigError(
                f"MoE layer {ordinal} (decoder layer {d}) is in no band of per_layer_hierarchy, "
                f"and the policy has no hierarchy block for the layers outside its bands; add a "
                f"band for it")
        lv.layers.append(ordinal)
        out.level_of.append(lv.index)
    out.levels = levels
    return out


def _tier(index: int, t: tuple, last: bool, split: int, expert_bytes: float, stored: int) -> TierSpec:
    name, kind, device, dtype, ladder, capacity, residency, eviction, path, implicit = t
    spec = TierSpec()
    spec.index, spec.name, spec.kind, spec.device = index, name, kind, device
    spec.dtype, spec.residency, spec.eviction = dtype, residency, eviction
    spec.implicit, spec.path = bool(implicit), path
    # the disk holds the checkpoint's own files; a tier without a dtype, its precision
    spec.bits = DTYPES[dtype].bits if dtype is not None and kind != "disk" else stored
    spec.exact = spec.bits >= stored
    spec.unit_bytes = expert_bytes * spec.bits / stored / split
    spec.host_bytes = None
    spec.rungs = spec.budget = None
    if last:
        # the last tier holds every expert; a last cpu tier's written capacity is the host
        # memory it may use (the replay report compares it with the machine's)
        spec.slots = None
        if kind == "cpu" and capacity is not None:
            spec.host_bytes = getattr(capacity, "bytes", None)
    elif ladder and len(ladder) > 1:
        # a ladder: the tier's bytes (a size, or its slots at the first rung), counted in
        # bit-units; as many slots as units fit at the lowest rung
        spec.rungs = tuple(Rung(d, DTYPES[d].bits, expert_bytes * DTYPES[d].bits / stored / split,
                                DTYPES[d].bits >= stored) for d in ladder)
        first = _slots(name, capacity, expert_bytes * spec.bits / stored, dtype)   # (>= 1 expert)
        b = getattr(capacity, "bytes", None)
        spec.budget = (first * split * spec.bits if b is None else
                       int(b * stored * split // expert_bytes))
        spec.slots = min(spec.budget // spec.rungs[-1].bits, _SLOTS_MAX)
    else:
        spec.slots = _slots(name, capacity, expert_bytes * spec.bits / stored, dtype) * split
    return spec


def _slots(name: str, capacity, expert_bytes: float, dtype) -> int:
    b = getattr(capacity, "bytes", None)
    if b is None:
        return int(capacity)
    n = int(b // expert_bytes)
    if n < 1:
        raise RuntimeConfigError(f"tier '{name}': capacity of {int(b)} bytes is smaller than one "
                                 f"expert at {dtype or 'the checkpoint precision'} "
                                 f"({int(expert_bytes)} bytes): it gives no slot")
    return min(n, _SLOTS_MAX)
