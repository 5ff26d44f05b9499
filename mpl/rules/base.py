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


def slots_of(value, values: Mapping[str, Any], model=None) -> int | None:
    """A slot count or a size (cache.capacity, per_layer.total_budget) in slots: a size is
    as many experts as fit (it needs the expert size: written or from the model)."""
    if not ok(value):
        return None
    if _is_size(value):
        g = expert_gb(values, model)
        if g is None:
            return None
        slots = value.bytes / (g * schema.UNITS["GB"].factor)
        # an absurdly small expert size makes this overflow: treat as "unknown" (the range
        # check of expert_size_gb reports the value itself)
        return int(slots) if math.isfinite(slots) else None
    return int(value)


def capacity_slots(values: Mapping[str, Any], model=None, per_layer: bool = False) -> int | None:
    """cache.capacity in slots (a size needs the expert size: written or from the model; a
    cache.capacity_factor the model's experts: a layer's with ``per_layer``, else every MoE
    layer's, rounded up)."""
    cap = values.get(_CAPACITY.key)
    if cap is None and _CAPACITY.instead is not None:
        factor = values.get(_CAPACITY.instead)
        if ok(factor):
            if model is None:
                return None
            experts = model.num_experts if per_layer else model.total_experts
            return schema.factor_slots(factor, experts)
    return slots_of(cap, values, model)


_TOTAL = schema.PARAMS["per_layer.total_budget"]


def size_text(b: float) -> str:
    """A byte count the way a user writes a size, with enough digits (``16.5 MiB``,
    ``10 GiB``, ``26.8 GiB``)."""
    for unit in ("GiB", "MiB", "KiB"):
        u = schema.UNITS[unit].factor if unit in schema.UNITS else 1024
        if b >= u:
            exact = isinstance(b, int) and b % int(u) == 0
            x = b / u
            return f"{b // int(u) if exact else (format(x, '.3g') if x < 100 else f'{x:,.0f}')} {unit}"
    return f"{int(b)} bytes"


def size_at_most(b: float) -> str:
    """A size to write in a policy that is at most ``b`` bytes (rounded down, never up: a
    suggestion that must fit), e.g. ``11.9GiB``, ``850MiB``."""
    gib, mib = schema.UNITS["GiB"].factor, schema.UNITS["MiB"].factor
    if b >= gib:
        return f"{math.floor(b / gib * 10) / 10:g}GiB"
    return f"{max(1, math.floor(b / mib))}MiB"


class Facts:
    """What a check sees: the effective values of a policy (every schema key, defaults filled
    in, INVALID where the written value had an error), its blocks, the keys it writes, the
    purpose (live or replay) and the model shape (None without one). ``cap`` is the capacity
    in slots (None when unknown or when a size gives no slot: MPL507 reports that); with
    per_layer it is each layer's, derived from ``total`` (total_budget in slots) when
    total_budget is given and capacity is not (``cap_derived``)."""

    __slots__ = ("values", "blocks", "given", "purpose", "model", "per_layer", "slots", "cap",
                 "size", "total", "cap_derived")

    def __init__(self, values: Mapping[str, Any], blocks: set[str], given: set[str],
                 purpose: str = LIVE, model=None) -> None:
        self.values = values
        self.blocks = blocks
        self.given = given
        self.purpose = purpose
        self.model = model
        self.per_layer = schema.PER_LAYER_BLOCK in blocks
        self.total = slots_of(values.get(_TOTAL.key), values, model) if self.per_layer else None
        self.slots = capacity_slots(values, model, self.per_layer)   # as written (may be 0)
        self.cap_derived = False
        if (values.get(_CAPACITY.key) is None and self.total is not None and model is not None
                and model.num_moe_layers):
            self.slots = max(1, self.total // model.num_moe_layers)   # each layer's share
            self.cap_derived = True
        self.cap = self.slots if self.slots is None or self.slots >= _CAPACITY.min else None
        cap = values.get(_CAPACITY.key)
        self.size = cap if _is_size(cap) else None            # a capacity written as a size

    def cap_words(self, cap=None) -> str:
        """The capacity as a message shows it, saying "per layer" with per_layer caches:
        ``capacity 16``, ``capacity 10 GiB = 620 slots``, ``capacity 10 GiB per layer = 620
        slots per layer``, ``22 slots per layer (total_budget 598 over 26 layers)``."""
        n = self.cap if cap is None else cap
        n_text = fmt_num(n) if n is not None else "?"
        per = " per layer" if self.per_layer else ""
        if self.cap_derived:
            t = self.values.get(_TOTAL.key)
            t_text = size_text(t.bytes) if _is_size(t) else fmt_num(t)
            return (f"{n_text} slot{'s' if n != 1 else ''} per layer (total_budget {t_text} over "
                    f"{self.model.num_moe_layers} layers)")
        if self.size is not None:
            return f"capacity {size_text(self.size.bytes)}{per} = {n_text} slots{per}"
        return f"capacity {n_text}{per}"

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
