"""The Python eDSL: build a policy from Python, checked by the same checker as a .moe file.

Two forms, one builder::

    from mpl import dsl

    # a builder (methods return the builder, so calls chain)
    p = (dsl.policy("mine")
         .cache(capacity=16, eviction="lfu", frequency_decay=0.9)
         .prefetch(strategy="history", budget=4)
         .adapt(dsl.when("hit_rate") < 0.4, for_=100, set={"eviction": "lru"}))

    # a decorator: the function configures the builder it is given, or returns blocks
    @dsl.policy
    def mine(p):
        "A 16-slot LFU cache."
        p.cache(capacity=16, eviction="lfu")

    print(p.to_moe())       # canonical .moe text
    ir = p.ir()             # mpl.ir.PolicyIR, the same IR the .moe text lowers to
    policy = p.build()      # mpl.api.Policy (runtime, attach, replay, ...)

How it stays honest. This module knows no parameter names, types, defaults or ranges (those
live in :mod:`mpl.schema` only). A builder *renders* canonical .moe text, and every check is
the checker's own (:func:`mpl.checker.analyze` on that text): a misspelt keyword argument, a
value out of range or a bad adapt action come back as :class:`mpl.PolicyError` carrying the
checker's diagnostics, with spans in the generated text (``to_moe()``) and, as a related
location, the Python line that wrote it. Only what cannot be written as .moe text at all
(a name with spaces, ``float('nan')``, a ``dict`` value) is refused here, before rendering,
with an ``MPL004`` (invalid literal) diagnostic located at the Python call.

Python values map to .moe values: ``True``/``False`` -> ``true``/``false``; ints and floats
-> numbers; lists/tuples -> ``[...]``; a string that is a name -> that name (``"lfu"``); a
number with a unit, as a string (``"12GiB"``, ``"50 steps"``) or through the unit helpers
(``dsl.GiB(12)``, ``dsl.steps(50)``; one per unit of :data:`mpl.schema.UNITS`) -> ``12GiB``,
``50 steps``; any other real number (``numpy.int64(8)``, ``Fraction(1, 2)``, ``Decimal``) -> its
int or float;
``"lfu|lru"`` or ``dsl.fallback("lfu", "lru")`` -> ``lfu | lru``;
``dsl.cond("lfu", "lru", when=dsl.when("hit_rate") < 0.4)`` -> ``lfu : lru when hit_rate < 0.4``;
any other string -> a quoted string literal (which the checker then judges); ``None`` removes
a parameter set earlier (it goes back to its default).

``extends=`` takes a parent name, ``"std/NAME"`` (imported for you) or another builder (its
policy is rendered into the same text, before this one).
"""

from __future__ import annotations

import inspect
import linecache
import math
import numbers
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from mpl import schema
from mpl.diagnostics import Diagnostic, Related, Span, snippet_window
from mpl.rules import make
from mpl.syntax.lexer import policy_name_problem

__all__ = [
    "policy", "PolicyBuilder", "block", "rule", "when", "metric", "cond", "fallback",
    "quantity", "Quantity", "assign", "trigger", "rebalance", "Condition", "Metric",
    "BlockSpec", "RuleSpec", *schema.UNITS,
]

INDENT = "    "
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TARGET_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")
_NUM = r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NUM_RE = re.compile(rf"\s*({_NUM})\s*([A-Za-z_][A-Za-z0-9_]*)?\s*\Z")
_FALLBACK_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*([A-Za-z_][A-Za-z0-9_]*)\s*\Z")
_OPS = "|".join(re.escape(op) for op in sorted(schema.COMPARISON_OPS, key=len, reverse=True))
_COND_RE = re.compile(rf"\s*([A-Za-z_][A-Za-z0-9_]*)\s*({_OPS})\s*({_NUM})\s*\Z")
_DEFAULT_RULE_UNIT = schema.RULE_DURATION_UNITS[0]   # a bare `for_=100` counts accesses
_ORIGIN = "written by this Python line"


# ---------------------------------------------------------------- where a call came from
@dataclass(frozen=True)
class CallSite:
    """The Python line (outside this module) that made a builder call."""
    file: str
    line: int

    def span(self) -> Span:
        lines = linecache.getlines(self.file)
        if not 1 <= self.line <= len(lines):
            return Span(self.line, 1, self.line, 1, 0, 0)
        start = sum(len(l) for l in lines[:self.line - 1])
        text = lines[self.line - 1].rstrip("\r\n")
        indent = len(text) - len(text.lstrip())
        return Span(self.line, indent + 1, self.line, len(text) + 1, start + indent, start + len(text))

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _caller() -> CallSite | None:
    """The first frame outside this module (the user's line)."""
    frame = sys._getframe(1)
    here = __file__
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    if frame is None:
        return None
    return CallSite(frame.f_code.co_filename, frame.f_lineno)


def _error(message: str, site: CallSite | None) -> "Exception":
    """A PolicyError for something that cannot be written as .moe text (MPL004)."""
    if site is not None:
        diag = make("MPL004", message, site.span(), file=site.file)
    else:
        diag = make("MPL004", message, Span(1, 1, 1, 1, 0, 0), file="<dsl>")
    return _policy_error([diag])


def _policy_error(diags: list[Diagnostic], text: str | None = None) -> Exception:
    """:class:`mpl.PolicyError` with the diagnostics, each rendered with the line of the
    generated text it is about and the Python line that wrote that text."""
    from mpl.api import PolicyError, render
    source = text.splitlines() if text is not None else []
    lines = []
    for d in diags:
        line = render(d)
        origin = next((r for r in d.related if r.message.startswith(_ORIGIN)), None)
        if origin is not None:
            line += f" [{origin.message}]"
        if d.file is None and 1 <= d.span.line <= len(source):
            shown = snippet_window(source[d.span.line - 1], d.span.column - 1, None).text
            line += f"\n    | {shown.strip()}"
        lines.append(line)
    head = f"the policy has {len(diags)} error{'s' if len(diags) != 1 else ''}:"
    return PolicyError(head + "\n  " + "\n  ".join(lines), diags)


def _check_name(text: Any, what: str, site: CallSite | None, pattern=_NAME_RE) -> str:
    if not isinstance(text, str) or not pattern.match(text):
        raise _error(f"{what} {text!r} cannot be written in a policy: a name is letters, digits "
                     f"and '_', not starting with a digit", site)
    return text


def _check_policy_name(text: Any, what: str, site: CallSite | None) -> str:
    """A policy's (or a parent's) name: what the parser reads as one after ``policy`` /
    ``extends`` (a name, or one of the language's keywords)."""
    _check_name(text, what, site)
    why = policy_name_problem(text)
    if why is not None:
        raise _error(f"{what} {text!r} cannot be written in a policy: {why}", site)
    return text


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class Quantity:
    """A number with a unit of :data:`mpl.schema.UNITS`: ``dsl.GiB(12)``, ``dsl.steps(50)``."""
    value: int | float
    unit: str


def quantity(value: int | float, unit: str) -> Quantity:
    """``quantity(12, "GiB")``; the unit helpers (``dsl.GiB(12)``) are shorthands for this."""
    return Quantity(value, unit)


def _unit_helper(unit: str) -> Callable[[int | float], Quantity]:
    def helper(value: int | float) -> Quantity:
        return Quantity(value, unit)
    helper.__name__ = helper.__qualname__ = unit
    helper.__doc__ = f"``{unit}(n)``: n {unit}, {schema.UNITS[unit].doc}."
    return helper


for _unit in schema.UNITS:              # dsl.GiB, dsl.MB, dsl.ms, dsl.steps, ...
    globals()[_unit] = _unit_helper(_unit)
del _unit


@dataclass(frozen=True)
class Fallback:
    """A segmented eviction ``a | b``."""
    primary: Any
    secondary: Any


def fallback(primary: str, secondary: str) -> Fallback:
    """``fallback("lfu", "lru")`` is written ``lfu | lru``."""
    return Fallback(primary, secondary)


@dataclass(frozen=True)
class Condition:
    """``METRIC OP NUMBER``, built by comparing :func:`when` with a number."""
    metric: str
    op: str
    threshold: int | float


class Metric:
    """A metric name; comparing it with a number gives a :class:`Condition`."""

    __slots__ = ("name",)
    __hash__ = None  # == builds a condition

    def __init__(self, name: str) -> None:
        self.name = name

    def _cmp(self, op: str, other: Any) -> Condition:
        return Condition(self.name, op, other)

    def __lt__(self, other): return self._cmp("<", other)
    def __le__(self, other): return self._cmp("<=", other)
    def __gt__(self, other): return self._cmp(">", other)
    def __ge__(self, other): return self._cmp(">=", other)
    def __eq__(self, other): return self._cmp("==", other)  # type: ignore[override]
    def __ne__(self, other): return self._cmp("!=", other)  # type: ignore[override]

    def __repr__(self) -> str:
        return f"when({self.name!r})"


def when(metric_name: str) -> Metric:
    """``when("hit_rate") < 0.4`` is the condition ``hit_rate < 0.4`` (metrics: see
    :data:`mpl.schema.METRICS`; an unknown name is reported by the checker)."""
    return Metric(metric_name)


metric = when


@dataclass(frozen=True)
class Conditional:
    """``value : alternative when condition``."""
    value: Any
    alternative: Any
    condition: Condition | str


def cond(value: Any, alternative: Any, *, when: Condition | str) -> Conditional:
    """``cond(16, 8, when=dsl.when("hit_rate") < 0.3)`` is written ``16 : 8 when hit_rate < 0.3``:
    the parameter is ``alternative`` while the condition holds and ``value`` otherwise."""
    return Conditional(value, alternative, when)


# ---------------------------------------------------------------- adapt actions
@dataclass(frozen=True)
class SetAction:
    target: str          # "eviction" or "cache.capacity" (as the user wrote it)
    value: Any
    site: CallSite | None = None


@dataclass(frozen=True)
class TriggerAction:
    name: str
    site: CallSite | None = None


@dataclass(frozen=True)
class RebalanceAction:
    allocation: str
    site: CallSite | None = None


def assign(target: str, value: Any) -> SetAction:
    """The adapt action ``target = value`` (``assign("cache.capacity", 8)``)."""
    return SetAction(target, value, _caller())


def trigger(name: str) -> TriggerAction:
    """The adapt action ``trigger NAME`` (``memory_pressure``, ``ttl``, ``flush``)."""
    return TriggerAction(name, _caller())


def rebalance(allocation: str) -> RebalanceAction:
    """The adapt action ``rebalance ALLOCATION`` (needs a per_layer block)."""
    return RebalanceAction(allocation, _caller())


# ---------------------------------------------------------------- blocks and rules
@dataclass
class _Param:
    value: Any
    site: CallSite | None


@dataclass
class BlockSpec:
    """A block's parameters (``dsl.cache(capacity=16)``), added to a builder with ``add``."""
    name: str
    params: dict[str, _Param] = field(default_factory=dict)
    site: CallSite | None = None


@dataclass
class RuleSpec:
    """One adapt rule: ``when CONDITION [for N UNIT] { actions }``."""
    condition: Condition | str
    duration: Any = None
    actions: list = field(default_factory=list)
    site: CallSite | None = None


def _param_name(kwarg: str) -> str:
    # PEP 8: a trailing underscore avoids a Python keyword (for_); it is not part of the name
    return kwarg[:-1] if kwarg.endswith("_") and len(kwarg) > 1 else kwarg


def _spec(name: str, params: dict[str, Any], site: CallSite | None) -> BlockSpec:
    return BlockSpec(name, {_param_name(k): _Param(v, site) for k, v in params.items()}, site)


def block(name: str, /, **params: Any) -> BlockSpec:
    """A block with parameters: ``block("cache", capacity=16)``; ``dsl.cache(...)`` (any
    block of :data:`mpl.schema.BLOCKS`) is the same."""
    return _spec(name, params, _caller())


def _collect_actions(actions: Iterable, set_: dict | None, trigger_: Any, rebalance_: Any,
                     site: CallSite | None) -> list:
    out = []
    for a in actions:
        if isinstance(a, (SetAction, TriggerAction, RebalanceAction)):
            out.append(a)
        elif isinstance(a, dict):
            out.extend(SetAction(k, v, site) for k, v in a.items())
        else:
            raise _error(f"an adapt action must be dsl.assign(...), dsl.trigger(...), "
                         f"dsl.rebalance(...) or a dict of settings, not {a!r}", site)
    if set_:
        if not isinstance(set_, dict):
            raise _error(f"set= takes a dict of settings, e.g. {{'eviction': 'lru'}}, not {set_!r}", site)
        out.extend(SetAction(k, v, site) for k, v in set_.items())
    for t in _as_list(trigger_):
        out.append(TriggerAction(t, site))
    for r in _as_list(rebalance_):
        out.append(RebalanceAction(r, site))
    return out


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def rule(condition: Condition | str, *actions: Any, for_: Any = None, set: dict | None = None,
         trigger: Any = None, rebalance: Any = None) -> RuleSpec:
    """An adapt rule. ``condition``: ``dsl.when("hit_rate") < 0.4`` or the string
    ``"hit_rate < 0.4"``. ``for_``: how long it must hold, an int (accesses), ``dsl.steps(5)`` or
    ``"5 steps"``. Actions, in order: positional ``dsl.assign``/``dsl.trigger``/``dsl.rebalance``
    (or dicts), then ``set={param: value}``, then ``trigger=``, then ``rebalance=``."""
    site = _caller()
    return RuleSpec(condition, for_, _collect_actions(actions, set, trigger, rebalance, site), site)


def _builds(name: str) -> bool:
    """Whether the builder has a method for block ``name``: every block of parameters (the
    adapt block is built with rules; memory tiers, whose items are nested, are written in
    .moe text)."""
    blk = schema.BLOCKS[name]
    return not blk.rules and blk.flat


def __getattr__(name: str):
    """``dsl.cache(...)``, ``dsl.prefetch(...)``: one block factory per schema block."""
    if name in schema.BLOCKS and _builds(name):
        def factory(**params: Any) -> BlockSpec:
            return _spec(name, params, _caller())
        factory.__name__ = factory.__qualname__ = name
        factory.__doc__ = schema.BLOCKS[name].doc
        return factory
    raise AttributeError(f"module 'mpl.dsl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {b for b in schema.BLOCKS if _builds(b)})


# ---------------------------------------------------------------- rendering
class _Writer:
    """Accumulates lines of .moe text and, per line, the Python call that produced it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.sites: list[CallSite | None] = []

    def add(self, text: str, site: CallSite | None = None) -> None:
        self.lines.append(text)
        self.sites.append(site)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _number(x: int | float, site: CallSite | None) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise _error(f"{x!r} is not a finite number and cannot be written in a policy", site)
        r = repr(x)
        if "e" in r or "E" in r:      # the literal stays a float: 1e20 -> 100000000000000000000.0
            r = format(Decimal(r), "f")
            if "." not in r:
                r += ".0"
        return r
    if isinstance(x, numbers.Integral):
        return str(int(x))
    if isinstance(x, (numbers.Real, Decimal)):
        return _number(float(x), site)
    raise _error(f"expected a number, got {x!r}", site)


def _with_unit(number: str, unit: str | None) -> str:
    """Canonical spelling (as ``mplc fmt`` writes it): a size unit or an unknown unit is
    glued to its number (``12GiB``), any other unit follows after a space (``50 steps``)."""
    if not unit:
        return number
    known = schema.UNITS.get(unit)
    if known is None or known.kind == "size":
        return number + unit
    return f"{number} {unit}"


def _parse_number(text: str) -> int | float:
    """The value of a number literal matched by ``_NUM`` (as the lexer reads it)."""
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)


def _string_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def render_value(v: Any, site: CallSite | None = None) -> str:
    """The .moe text of a Python value (see the module docstring for the mapping)."""
    if isinstance(v, (numbers.Real, Decimal)):   # bool, int, float, numpy scalars, Fraction
        return _number(v, site)
    if isinstance(v, Quantity):
        return _with_unit(_number(v.value, site), _check_name(v.unit, "the unit", site))
    if isinstance(v, Metric):
        return _check_name(v.name, "the name", site)
    if isinstance(v, str):
        m = _NUM_RE.match(v)
        if m:
            return _with_unit(_number(_parse_number(m.group(1)), site), m.group(2))
        if _NAME_RE.match(v):
            return v
        m = _FALLBACK_RE.match(v)
        if m:
            return f"{m.group(1)} | {m.group(2)}"
        return _string_literal(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(render_value(x, site) for x in v) + "]"
    if isinstance(v, Fallback):
        return f"{render_value(v.primary, site)} | {render_value(v.secondary, site)}"
    if isinstance(v, Conditional):
        return (f"{render_value(v.value, site)} : {render_value(v.alternative, site)} "
                f"when {render_condition(v.condition, site)}")
    raise _error(f"a {type(v).__name__} value ({v!r}) cannot be written in a policy: use a "
                 f"number, true/false, a name, a list, or dsl.GiB(...)/dsl.fallback(...)/dsl.cond(...)",
                 site)


def render_condition(c: Condition | str, site: CallSite | None = None) -> str:
    if isinstance(c, str):
        m = _COND_RE.match(c)
        if not m:
            raise _error(f"{c!r} is not a condition: write 'METRIC OP NUMBER' "
                         f"(OP one of {' '.join(schema.COMPARISON_OPS)}), e.g. 'hit_rate < 0.4'", site)
        return f"{m.group(1)} {m.group(2)} {_number(_parse_number(m.group(3)), site)}"
    if isinstance(c, Condition):
        name = _check_name(c.metric, "the metric", site)
        thr = c.threshold
        m = _NUM_RE.match(thr) if isinstance(thr, str) else None
        if m and not m.group(2):
            thr_text = _number(_parse_number(m.group(1)), site)
        elif isinstance(thr, (numbers.Real, Decimal)) and not isinstance(thr, bool):
            thr_text = _number(thr, site)
        else:
            raise _error(f"a condition compares a metric with a number, not {thr!r}", site)
        return f"{name} {c.op} {thr_text}"
    raise _error(f"expected a condition such as dsl.when('hit_rate') < 0.4, got {c!r}", site)


def _render_duration(d: Any, site: CallSite | None) -> str:
    if isinstance(d, bool):
        raise _error(f"for_ takes a count (e.g. 100 or dsl.steps(5)), not {d!r}", site)
    if isinstance(d, int):
        return f"{d} {_DEFAULT_RULE_UNIT}"
    if isinstance(d, Quantity):
        return f"{_number(d.value, site)} {_check_name(d.unit, 'the unit', site)}"
    if isinstance(d, str):
        m = _NUM_RE.match(d)
        if m:
            return f"{_number(_parse_number(m.group(1)), site)} {m.group(2) or _DEFAULT_RULE_UNIT}"
    raise _error(f"for_ takes a count (e.g. 100, '5 steps' or dsl.steps(5)), not {d!r}", site)


# ---------------------------------------------------------------- the builder
class PolicyBuilder:
    """Builds one policy. Block methods (``.cache(...)``, ``.prefetch(...)``, one per block of
    :data:`mpl.schema.BLOCKS`) merge keyword arguments into that block: a later call overrides
    a parameter set earlier, ``None`` removes it. ``.adapt(...)`` appends a rule. Every method
    returns the builder (so calls chain); ``copy()`` makes an independent one.

    Nothing is checked until ``diagnostics()``, ``check()``, ``ir()`` or ``build()``: a builder
    may be incomplete while it is being written.
    """

    def __init__(self, name: str, *, extends: "str | PolicyBuilder | None" = None,
                 imports: Iterable[str] = (),
                 doc: str | None = None, version: int | None = 1, path: str | None = None) -> None:
        site = _caller()
        self._site = site
        self.name = _check_policy_name(name, "the policy name", site)
        self._imports: list[str] = []
        self.parent: str | None = None
        self._parent_builder: PolicyBuilder | None = None
        for imp in ([imports] if isinstance(imports, str) else imports):
            self.import_(imp)
        if extends is not None:
            self.extends(extends)
        self.doc = doc
        self.version = version
        self.path = path
        self._blocks: dict[str, BlockSpec] = {}
        self._rules: list[RuleSpec] = []
        self._analysis_cache: tuple[str, Any] | None = None

    # -- configuration ----------------------------------------------------------------
    def import_(self, path: str) -> "PolicyBuilder":
        """Add ``import "PATH"`` (``"std/NAME"`` or a .moe file relative to ``path``)."""
        if not isinstance(path, str):
            raise _error(f"an import is a path string, not {path!r}", _caller())
        if path not in self._imports:
            self._imports.append(path)
        return self

    def extends(self, parent: "str | PolicyBuilder") -> "PolicyBuilder":
        """``extends PARENT``. ``"std/NAME"`` also imports the standard-library file NAME; a
        :class:`PolicyBuilder` puts that policy (and its own builder ancestors) in the same
        text, before this one."""
        site = _caller()
        self._parent_builder = None
        if isinstance(parent, PolicyBuilder):
            self._parent_builder = parent
            parent = parent.name
        elif isinstance(parent, str) and parent.startswith("std/"):
            self.import_(parent)
            parent = parent[4:]
        self.parent = _check_policy_name(parent, "the parent policy", site)
        return self

    def block(self, name: str, /, **params: Any) -> "PolicyBuilder":
        """Set parameters of the block ``name`` (creating it, possibly empty)."""
        self._merge(_spec(name, params, _caller()))
        return self

    def adapt(self, condition: Condition | str, *actions: Any, for_: Any = None,
              set: dict | None = None, trigger: Any = None, rebalance: Any = None) -> "PolicyBuilder":
        """Append an adapt rule (arguments as :func:`rule`)."""
        site = _caller()
        self._rules.append(RuleSpec(condition, for_,
                                    _collect_actions(actions, set, trigger, rebalance, site), site))
        return self

    def add(self, *items: Any) -> "PolicyBuilder":
        """Add :class:`BlockSpec`/:class:`RuleSpec` objects (or iterables of them)."""
        for item in items:
            if isinstance(item, BlockSpec):
                self._merge(item)
            elif isinstance(item, RuleSpec):
                self._rules.append(item)
            elif isinstance(item, Iterable) and not isinstance(item, (str, bytes, dict)):
                self.add(*item)
            else:
                raise _error(f"expected blocks (dsl.cache(...)) or rules (dsl.rule(...)), got {item!r}",
                             _caller())
        return self

    def _merge(self, spec: BlockSpec) -> None:
        _check_name(spec.name, "the block name", spec.site)
        target = self._blocks.get(spec.name)
        if target is None:
            target = self._blocks[spec.name] = BlockSpec(spec.name, {}, spec.site)
        for k, p in spec.params.items():
            _check_name(k, "the parameter name", p.site)
            if p.value is None:
                target.params.pop(k, None)
            else:
                target.params.pop(k, None)   # a re-set parameter moves to the end
                target.params[k] = p

    def __getattr__(self, name: str):
        if not name.startswith("_") and name in schema.BLOCKS and _builds(name):
            def method(**params: Any) -> "PolicyBuilder":
                self._merge(_spec(name, params, _caller()))
                return self
            method.__name__ = name
            method.__doc__ = schema.BLOCKS[name].doc
            return method
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}"
                             + _did_you_mean(name, [*dir(type(self)), *schema.BLOCKS]))

    def __dir__(self):
        return sorted(set(super().__dir__()) | {b for b in schema.BLOCKS if _builds(b)})

    def copy(self, name: str | None = None) -> "PolicyBuilder":
        """An independent builder with the same content (renamed when ``name`` is given)."""
        new = PolicyBuilder.__new__(PolicyBuilder)
        new.__dict__.update(self.__dict__)
        new.name = self.name if name is None else _check_policy_name(name, "the policy name", _caller())
        new._imports = list(self._imports)
        new._blocks = {k: BlockSpec(b.name, dict(b.params), b.site) for k, b in self._blocks.items()}
        new._rules = [RuleSpec(r.condition, r.duration, list(r.actions), r.site) for r in self._rules]
        new._analysis_cache = None
        return new

    # -- rendering --------------------------------------------------------------------
    def _chain(self) -> list["PolicyBuilder"]:
        """The builders whose policies this text holds: ancestors given as builders, oldest
        first, then this one. A cycle stops the walk (the checker reports it, MPL110)."""
        chain, seen, b = [], {id(self)}, self._parent_builder
        while b is not None and id(b) not in seen:
            seen.add(id(b))
            chain.append(b)
            b = b._parent_builder
        return [*reversed(chain), self]

    def _render(self) -> _Writer:
        w = _Writer()
        chain = self._chain()
        if self.doc:
            self._render_doc(w, self.doc, self._site)
        if self.version is not None:
            w.add(f"version {_number(self.version, self._site)}", self._site)
        imports = list(dict.fromkeys(imp for b in chain for imp in b._imports))
        if imports:
            if w.lines:
                w.add("")
            for imp in imports:
                w.add(f"import {_string_literal(imp)}", self._site)
        for b in chain:
            if w.lines:
                w.add("")
            if b is not self and b.doc:
                self._render_doc(w, b.doc, b._site)
            b._render_policy(w)
        return w

    @staticmethod
    def _render_doc(w: _Writer, doc: str, site: CallSite | None) -> None:
        for line in inspect.cleandoc(doc).splitlines():
            w.add(("# " + line).rstrip(), site)

    def _render_policy(self, w: _Writer) -> None:
        head = f"policy {self.name}" + (f" extends {self.parent}" if self.parent else "")
        w.add(head + " {", self._site)
        for spec in self._ordered_blocks():
            if not spec.params:
                w.add(f"{INDENT}{spec.name} {{}}", spec.site)
                continue
            w.add(f"{INDENT}{spec.name} {{", spec.site)
            for pname, p in self._ordered_params(spec):
                w.add(f"{INDENT * 2}{pname} = {render_value(p.value, p.site)}", p.site)
            w.add(f"{INDENT}}}", spec.site)
        if self._rules:
            rules_block = next(b for b in schema.BLOCKS.values() if b.rules).name
            w.add(f"{INDENT}{rules_block} {{", self._rules[0].site)
            for r in self._rules:
                head = f"{INDENT * 2}when {render_condition(r.condition, r.site)}"
                if r.duration is not None:
                    head += f" for {_render_duration(r.duration, r.site)}"
                if not r.actions:
                    w.add(head + " {}", r.site)
                    continue
                w.add(head + " {", r.site)
                for a in r.actions:
                    w.add(INDENT * 3 + self._render_action(a, r.site), a.site or r.site)
                w.add(f"{INDENT * 2}}}", r.site)
            w.add(f"{INDENT}}}", self._rules[0].site)
        w.add("}", self._site)

    @staticmethod
    def _render_action(a: Any, site: CallSite | None) -> str:
        site = getattr(a, "site", None) or site
        if isinstance(a, SetAction):
            target = _check_name(a.target, "the adapt target", site, _TARGET_RE)
            return f"{target} = {render_value(a.value, site)}"
        if isinstance(a, TriggerAction):
            return f"trigger {_check_name(a.name, 'the trigger', site)}"
        return f"rebalance {_check_name(a.allocation, 'the allocation', site)}"

    def _ordered_blocks(self) -> list[BlockSpec]:
        order = {name: i for i, name in enumerate(schema.BLOCK_ORDER)}
        blocks = list(self._blocks.values())
        return sorted(blocks, key=lambda b: order.get(b.name, len(order)))   # stable: unknown last

    @staticmethod
    def _ordered_params(spec: BlockSpec) -> list[tuple[str, _Param]]:
        blk = schema.BLOCKS.get(spec.name)
        order = {n: i for i, n in enumerate(blk.param_names())} if blk else {}
        return sorted(spec.params.items(), key=lambda kv: order.get(kv[0], len(order)))

    def to_moe(self) -> str:
        """The policy as canonical .moe text (what ``mplc fmt`` would print)."""
        return self._render().text()

    __str__ = to_moe

    def __repr__(self) -> str:
        parts = [b.name for b in self._ordered_blocks()] + (["adapt"] if self._rules else [])
        return f"<PolicyBuilder {self.name!r}: {', '.join(parts) or 'empty'}>"

    # -- checking ---------------------------------------------------------------------
    def _analyze(self):
        writer = self._render()
        text = writer.text()
        if self._analysis_cache is not None and self._analysis_cache[0] == text:
            return writer, self._analysis_cache[1]
        from mpl.checker import analyze
        analysis = analyze(text, self.path)
        self._analysis_cache = (text, analysis)
        return writer, analysis

    def diagnostics(self) -> list[Diagnostic]:
        """The checker's diagnostics for the generated text (errors, warnings and hints), each
        with the Python line that wrote the offending text as a related location."""
        writer, analysis = self._analyze()
        return [self._with_origin(d, writer) for d in analysis.diagnostics]

    def _with_origin(self, d: Diagnostic, writer: _Writer) -> Diagnostic:
        if d.file not in (None, self.path):
            return d              # a diagnostic inside an imported file
        idx = d.span.line - 1
        site = writer.sites[idx] if 0 <= idx < len(writer.sites) else None
        if site is None:
            return d
        rel = Related(f"{_ORIGIN} ({site})", site.span(), site.file)
        return replace(d, related=(*d.related, rel))

    def check(self) -> "PolicyBuilder":
        """Raise :class:`mpl.PolicyError` if the policy has errors; return the builder."""
        errors = [d for d in self.diagnostics() if d.is_error]
        if errors:
            raise _policy_error(errors, self.to_moe())
        return self

    def ir(self):
        """The :class:`mpl.ir.PolicyIR` (raises :class:`mpl.PolicyError` on errors)."""
        self.check()
        _, analysis = self._analyze()
        return analysis.ir[self.name]

    def build(self):
        """The :class:`mpl.api.Policy`: the checked IR compiled as ``mpl.loads`` compiles it
        (``mpl.api.from_ir``), carrying the checker's warnings in ``.diagnostics``."""
        pir = self.ir()
        from mpl.api import from_ir
        return from_ir(pir, diagnostics=self.diagnostics(), path=self.path)

    def runtime(self, num_layers: int, num_experts: int, top_k: int, **kw):
        """Shorthand for ``build().runtime(...)``."""
        return self.build().runtime(num_layers, num_experts, top_k, **kw)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    import difflib
    close = difflib.get_close_matches(name, [c for c in candidates if not c.startswith("_")], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# ---------------------------------------------------------------- policy(): builder or decorator
def policy(name: str | Callable | None = None, /, *, extends: "str | PolicyBuilder | None" = None,
           imports: Iterable[str] = (), doc: str | None = None, version: int | None = 1,
           path: str | None = None):
    """Start a policy.

    * ``policy("name", ...)`` returns a :class:`PolicyBuilder`.
    * ``@policy`` / ``@policy(extends=..., ...)`` on a function makes a builder named after
      the function, with its docstring as the header comment. The function either takes
      the builder and configures it, or takes nothing and returns blocks and rules
      (``dsl.cache(...)``, ``dsl.rule(...)``), or both. The decorated name is bound to the
      builder, already checked: errors surface as :class:`mpl.PolicyError` at definition.
    """
    opts = dict(extends=extends, imports=imports, doc=doc, version=version, path=path)
    if isinstance(name, str):
        return PolicyBuilder(name, **opts)
    if callable(name):
        return _decorate(name, opts)
    if name is None:
        return lambda func: _decorate(func, opts)
    raise _error(f"policy() takes a name or decorates a function, not {name!r}", _caller())


def _decorate(func: Callable, opts: dict) -> PolicyBuilder:
    site = CallSite(func.__code__.co_filename, func.__code__.co_firstlineno)
    if opts.get("doc") is None and func.__doc__:
        opts = {**opts, "doc": func.__doc__}
    builder = PolicyBuilder(func.__name__, **opts)
    builder._site = site
    try:
        nparams = len(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        nparams = 1
    result = func(builder) if nparams else func()
    if result is not None and result is not builder:
        builder.add(result)
    return builder.check()
