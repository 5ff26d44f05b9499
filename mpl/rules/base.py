"""What a rule is, and what a cross-field check sees.

A :class:`Rule` is one diagnostic code: its severity, group, title, the explanation with a
wrong and a fixed example (``docs/diagnostics.md`` and ``mplc explain`` are generated from
it). A cross-field or model-aware rule also has its check next to it, in the same module: a
function of :class:`Facts` (a policy's effective values) returning :class:`Violation` objects.

This module imports only the schema and the diagnostics data classes (the IR's ``Size`` on
first use), so the parser, the checker and the docs generator all import the rules without a
cycle and without loading the IR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from mpl import schema
from mpl.diagnostics import Severity

E, W, H = Severity.ERROR, Severity.WARNING, Severity.HINT

LIVE = "live"
REPLAY = "replay"


@dataclass(frozen=True)
class Rule:
    code: str                      # "MPL102": stable, never renumbered
    severity: Severity
    group: str                     # syntax | structure | value | cross-field | warning | model
    title: str                     # short name, used as the docs anchor text
    text: str                      # the explanation (markdown paragraphs)
    wrong: str                     # a .moe file that triggers the code
    fixed: str                     # the same file, fixed
    model: str | None = None       # a model preset the examples are checked with
    device_memory_gb: float | None = None
    filename: str = "policy.moe"   # the name the examples are saved under (imports)


def rule(code: str, severity: Severity, group: str, title: str, text: str, wrong: str,
         fixed: str, **kw) -> Rule:
    """A :class:`Rule` with its texts trimmed (each example ends with one newline)."""
    return Rule(code, severity, group, title, text.strip(), wrong.strip("\n") + "\n",
                fixed.strip("\n") + "\n", **kw)


class _Invalid:
    """Marks a value that failed its checks (an error was reported)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"

    def __bool__(self) -> bool:
        return False


INVALID = _Invalid()


def ok(*vals) -> bool:
    return all(v is not INVALID and v is not None for v in vals)


def fmt_num(x) -> str:
    """A number the way a user writes it (``4``, ``0.5``)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


@dataclass(frozen=True)
class Violation:
    code: str
    message: str
    keys: tuple[str, ...]        # involved schema keys; the first is the primary location
    item: int | None = None      # index of the offending element when the primary is a list


def enables(value, allowed: tuple[str, ...]) -> bool | None:
    """Whether ``value`` of a controlling parameter gives a dependent one (``Param.only_with``)
    an effect (None: unknown because the value had an error)."""
    if value is INVALID:
        return None
    if schema.SET in allowed:
        return value is not None
    if isinstance(value, str):
        parts = value.split("|")
        if value == schema.FALLBACK_PAIR and "fallback" in allowed:
            return True
        return value in allowed or any(p in allowed for p in parts)
    return value in allowed


_CAPACITY = schema.PARAMS["cache.capacity"]


def _is_size(v) -> bool:
    """Whether ``v`` is an :class:`mpl.ir.Size` (imported here, on first use, so that the
    parser, which builds diagnostics through :mod:`mpl.rules`, does not load the IR)."""
    from mpl.ir import Size
    return isinstance(v, Size)


def expert_gb(values: Mapping[str, Any], model) -> float | None:
    g = values.get("cache.expert_size_gb")
    if ok(g):
        return float(g)
    if model is not None:
        return model.expert_bytes / schema.UNITS["GB"].factor
    return None


def capacity_slots(values: Mapping[str, Any], model=None, per_layer: bool = False) -> int | None:
    """cache.capacity in slots (a size needs the expert size: written or from the model; a
    cache.capacity_factor the model's experts: a layer's with ``per_layer``, else every MoE
    layer's, rounded up)."""
    cap = values.get(_CAPACITY.key)
    if cap is None and _CAPACITY.instead is not None:
        factor = values.get(_CAPACITY.instead)
        if not ok(factor) or model is None:
            return None
        experts = model.num_experts if per_layer else model.total_experts
        return max(1, math.ceil(factor * experts))
    if not ok(cap):
        return None
    if _is_size(cap):
        g = expert_gb(values, model)
        if g is None:
            return None
        slots = cap.bytes / (g * schema.UNITS["GB"].factor)
        # an absurdly small expert size makes this overflow: treat as "unknown" (the range
        # check of expert_size_gb reports the value itself)
        return int(slots) if math.isfinite(slots) else None
    return int(cap)


class Facts:
    """What a check sees: the effective values of a policy (every schema key, defaults filled
    in, INVALID where the written value had an error), its blocks, the keys it writes, the
    purpose (live or replay) and the model shape (None without one). ``cap`` is the capacity
    in slots (None when unknown or when a size gives no slot: MPL507 reports that)."""

    __slots__ = ("values", "blocks", "given", "purpose", "model", "per_layer", "slots", "cap", "size")

    def __init__(self, values: Mapping[str, Any], blocks: set[str], given: set[str],
                 purpose: str = LIVE, model=None) -> None:
        self.values = values
        self.blocks = blocks
        self.given = given
        self.purpose = purpose
        self.model = model
        self.per_layer = schema.PER_LAYER_BLOCK in blocks
        self.slots = capacity_slots(values, model, self.per_layer)   # as written (may be 0)
        self.cap = self.slots if self.slots is None or self.slots >= _CAPACITY.min else None
        cap = values.get(_CAPACITY.key)
        self.size = cap if _is_size(cap) else None            # a capacity written as a size

    def get(self, key: str):
        return self.values.get(key)

    def default_note(self, key: str) -> str:
        return "" if key in self.given else " (the default)"

    @property
    def cap_text(self) -> str:
        return fmt_num(self.cap) if self.cap is not None else "?"

    def measure(self, key: str, count: bool = False):
        """The effective value of ``key`` as a relation compares it (None: unknown): the
        capacity in slots, a list's length with ``count``, else the value."""
        if key == _CAPACITY.key:
            return self.cap
        v = self.values.get(key)
        if not ok(v):
            return None
        return len(v) if count else v

    def in_effect(self, key: str) -> bool:
        """Whether ``key`` takes part in this policy: a per-layer parameter needs the per_layer
        block, a parameter with ``only_with`` needs its controlling value."""
        p = schema.PARAMS[key]
        if p.block == schema.PER_LAYER_BLOCK and not self.per_layer:
            return False
        if p.only_with is not None:
            other, allowed = p.only_with
            return bool(enables(self.values.get(other), allowed))
        return True

    def broken(self, rel: schema.Relation) -> tuple[Any, Any] | None:
        """(low, high) when the schema relation ``rel`` (low <= high) does not hold."""
        lo, hi = self.measure(rel.low, rel.count), self.measure(rel.high)
        if lo is None or hi is None or not self.in_effect(rel.low):
            return None
        return (lo, hi) if lo > hi else None

    def relation_keys(self, rel: schema.Relation) -> tuple[str, ...]:
        """The keys a violation of ``rel`` involves: the bounded one, the parameter that gives
        it an effect, the bound."""
        p = schema.PARAMS[rel.low]
        ctrl = (p.only_with[0],) if p.only_with is not None else ()
        return tuple(dict.fromkeys((rel.low, *ctrl, rel.high)))
