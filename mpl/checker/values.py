"""Type, enum, range and unit checks of one value against its schema parameter.

Each check also *converts* the value to its IR representation (see :mod:`mpl.ir`), so the
checker and the lowering share one definition of what a value means. With ``sink=None`` the
functions only convert (used by :mod:`mpl.lower` on checked input).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

from mpl import ir, schema
from mpl.checker.common import (INVALID, Sink, did_you_mean, fmt_num, quote_list,
                                replace_fix)
from mpl.diagnostics import Span
from mpl.syntax import ast

#: eviction written as `fallback` is the segmented pair lfu | lru
FALLBACK_PAIR = schema.FALLBACK_PAIR


def _emit(sink: Sink | None, *args, **kw) -> None:
    if sink is not None:
        sink.emit(*args, **kw)


def describe(node) -> str:
    """A short rendering of a value node for messages."""
    if isinstance(node, ast.Number):
        return node.text + (node.unit.text if node.unit is not None else "")
    if isinstance(node, ast.Ident):
        return node.name
    if isinstance(node, ast.Bool):
        return "true" if node.value else "false"
    if isinstance(node, ast.String):
        return node.text
    if isinstance(node, ast.ListValue):
        return "[" + ", ".join(describe(i) for i in node.items) + "]"
    if isinstance(node, ast.Range):
        return f"{node.start.text}..{node.end.text if node.end is not None else ''}"
    if isinstance(node, ast.Indexed):
        return node.text
    if isinstance(node, ast.Call):
        args = ", ".join(f"{a.name.text} = {describe(a.value)}" for a in node.args
                         if isinstance(a, ast.Arg))
        return f"{node.name.text}({args})"
    return "?"


def kind_of(node) -> str:
    if isinstance(node, ast.Number):
        return "an integer" if isinstance(node.value, int) else "a number"
    if isinstance(node, ast.Ident):
        return "a name"
    if isinstance(node, ast.Bool):
        return "a boolean"
    if isinstance(node, ast.String):
        return "a string"
    if isinstance(node, ast.ListValue):
        return "a list"
    if isinstance(node, ast.Range):
        return "a range"
    if isinstance(node, ast.Indexed):
        return "a device"
    if isinstance(node, ast.Call):
        return "a call"
    return "nothing"


def number_span(sink: Sink, node: ast.Number) -> Span:
    """The span of the digits of a number (without its unit)."""
    start = node.span.offset
    return sink.span(start, start + len(node.text))


def _expected(p: schema.Param) -> str:
    t = p.type
    if t == schema.ENUM:
        return "one of " + quote_list(p.enum_names())
    if t == schema.SLOTS_OR_SIZE:
        return "an integer number of slots or a size such as 12GiB"
    if t == schema.COUNT:
        return "an integer count"
    if t == schema.ENUM_LIST:
        return "a list of " + quote_list(p.enum_names()) + f" such as [{p.enum[0].name}]"
    if t == schema.LOCATION:
        return "gpu, gpu:N, cpu or disk"
    if t == schema.LAYER_RANGE:
        return "a range of layers such as 0..7, or one layer"
    if t == schema.STRING:
        return 'a string such as "/models/experts"'
    return {schema.INT: "an integer", schema.NUMBER: "a number", schema.BOOL: "true or false",
            schema.INT_LIST: "a list of integers such as [0, 1]",
            schema.METRIC_LIST: "a list of metric names such as [hit_rate]"}.get(t, t)


def _type_error(sink, p: schema.Param, node, what: str | None = None) -> _Invalid_t:
    if sink is None:
        return INVALID
    fixes = ()
    if what is not None:
        msg = what
    elif isinstance(node, ast.String) and p.type == schema.ENUM and node.value in p.enum_names():
        fixes = (replace_fix(f"Remove the quotes: {node.value}", node.span, node.value),)
        msg = f"'{p.name}' takes a bare name, not a string; write {node.value} without quotes"
    elif isinstance(node, ast.String) and p.type == schema.BOOL and node.value in ("true", "false"):
        fixes = (replace_fix(f"Remove the quotes: {node.value}", node.span, node.value),)
        msg = f"'{p.name}' takes true or false, not a string; write {node.value} without quotes"
    elif isinstance(node, ast.Number) and p.type == schema.INT_LIST:
        fixes = (replace_fix(f"Write [{node.text}]", node.span, f"[{node.text}]"),)
        msg = f"'{p.name}' expects a list of integers, got {describe(node)}; write [{node.text}]"
    else:
        msg = (f"'{p.name}' expects {_expected(p)}, got {kind_of(node)} "
                       f"'{describe(node)}'")
    sink.emit("MPL201", msg, node.span, fixes=fixes)
    return INVALID


_Invalid_t = Any


def _whole(node: ast.Number) -> int | None:
    """The exact integer a fraction literal stands for (``1e5``, ``70000.0``, ``16.``), or
    None when it is not a whole number (``1e-400`` is not 0, ``1.0000000000000000001`` is
    not 1). Where an integer is expected, a whole number written as a fraction is that
    integer (the original accepts ``capacity = 16.0``)."""
    try:
        d = Decimal(node.text)
    except InvalidOperation:
        return None
    if not d.is_finite() or d != d.to_integral_value():
        return None
    return int(d)


# ------------------------------------------------------------------ numbers and units
def _range_verdict(p: schema.Param, x: float) -> tuple[bool, float | None]:
    """(is ``x`` inside ``p``'s own range, the closed bound it would be clamped to)."""
    lo, hi = p.min, p.max
    bad_lo = lo is not None and (x <= lo if p.min_open else x < lo)
    bad_hi = hi is not None and (x >= hi if p.max_open else x > hi)
    if bad_lo and not p.min_open:
        return False, lo
    if bad_hi and not p.max_open:
        return False, hi
    return not (bad_lo or bad_hi), None


def _range_check(sink, p: schema.Param, node: ast.Number, x: float, *, label: str | None = None) -> bool:
    ok, clamp = _range_verdict(p, x)
    if ok:
        return True
    if sink is None:
        return False
    lo, hi = p.min, p.max
    rt = p.range_text()
    must = f"in {rt}" if (lo is not None and hi is not None) else rt
    name = label or p.name
    fixes = ()
    tail = ""
    if clamp is not None:
        c = int(clamp) if (p.type in (schema.INT, schema.COUNT, schema.SLOTS_OR_SIZE, schema.INT_LIST)
                           or float(clamp).is_integer()) else clamp
        unit = schema.UNITS.get(node.unit.text) if node.unit is not None else None
        if unit is None or unit.kind == "count":
            # a count keeps its unit (the range is in that unit): the digits are clamped
            tail = f"; use {fmt_num(c)}"
            fixes = (replace_fix(f"Clamp to {fmt_num(c)}", number_span(sink, node), fmt_num(c)),)
        else:
            # a size or a time: the range is in the parameter's base unit (GB, ms)
            text = f"{fmt_num(c)} {p.unit}" if p.unit else fmt_num(c)
            tail = f"; use {text}"
            fixes = (replace_fix(f"Clamp to {text}", node.span, text),)
    else:
        tail = "; choose a value " + must
    sink.emit("MPL203", f"'{name}' must be {must}{_in_unit(p)}, got {describe(node)}{tail}",
              node.span, fixes=fixes)
    return False


def _in_unit(p: schema.Param) -> str:
    """" GB" / " ms" after a range a sized or timed value is compared in (its base unit)."""
    if p.type == schema.NUMBER and p.unit and \
            any(schema.UNITS[u].kind in ("size", "time") for u in p.units if u in schema.UNITS):
        return f" {p.unit}"
    return ""


def _unit_check(sink, allowed: tuple[str, ...], node: ast.Number, owner: str) -> schema.Unit | None | _Invalid_t:
    """The unit of ``node`` if it is allowed (None when there is none), else INVALID."""
    u = node.unit
    if u is None:
        return None
    unit = schema.UNITS.get(u.text)
    if unit is None:
        tail, s = did_you_mean(u.text, allowed or schema.UNITS)
        fixes = (replace_fix(f"Replace '{u.text}' with '{s}'", u.span, s),) if s else ()
        if not tail and allowed:
            tail = "; use " + quote_list(allowed)
        _emit(sink, "MPL204", f"unknown unit '{u.text}'{tail}", u.span, fixes=fixes)
        return INVALID
    if u.text not in allowed:
        if allowed:
            hint = "; use " + quote_list(allowed) + " or no unit"
        else:
            hint = "; remove the unit"
        fixes = ()
        if sink is not None and not allowed:
            fixes = (replace_fix(f"Remove '{u.text}'", sink.span(node.span.offset + len(node.text),
                                                                   u.span.end_offset), ""),)
        _emit(sink, "MPL204", f"unit '{u.text}' is not allowed for '{owner}'{hint}", u.span, fixes=fixes)
        return INVALID
    return unit


def _to_base(p: schema.Param, value: float, unit: schema.Unit | None):
    """Normalise a number with a unit to the parameter's base unit."""
    if unit is None:
        return value
    try:
        if unit.kind == "size":          # *_gb parameters are in GB
            base = schema.UNITS["GB"].factor
            out = value * unit.factor / base
        elif unit.kind == "time":        # time parameters are in ms
            out = value * unit.factor
        else:
            return value
    except OverflowError:            # an integer beyond any float: out of every range
        return math.inf
    if isinstance(value, int) and float(out).is_integer():
        return int(out)
    return out


def _check_number(sink, p: schema.Param, node) -> Any:
    if not isinstance(node, ast.Number):
        return _type_error(sink, p, node)
    integral = p.type in (schema.INT, schema.COUNT)
    value = node.value
    if integral and not isinstance(value, int):
        value = _whole(node)        # `16.0`, `2.`, `1e2`: a whole number (the original takes it)
        if value is None:
            return _type_error(sink, p, node)
    if isinstance(value, float) and not math.isfinite(value):
        _emit(sink, "MPL201", f"'{p.name}' expects a finite number, got {node.text}", node.span)
        return INVALID
    unit = _unit_check(sink, p.units, node, p.name)
    if unit is INVALID:
        return INVALID
    x = _to_base(p, value, unit)
    if not _range_check(sink, p, node, x):
        return INVALID
    if p.type == schema.COUNT and len(p.units) > 1:
        return ir.Count(int(value), unit.name if unit is not None else (p.unit or p.units[0]))
    return x


def _check_capacity(sink, p: schema.Param, node) -> Any:
    if not isinstance(node, ast.Number):
        return _type_error(sink, p, node)
    unit = _unit_check(sink, p.units, node, p.name)
    if unit is INVALID:
        return INVALID
    if unit is None:
        value = node.value if isinstance(node.value, int) else _whole(node)   # `16.0` slots
        if value is None:
            return _type_error(sink, p, node)
        if not _range_check(sink, p, node, value):
            return INVALID
        return value
    try:      # a byte count every later step can divide (a float), so at most ~1.8e308
        f = unit.factor        # exact for an integer count of a whole-byte unit
        exact = isinstance(node.value, int) and float(f).is_integer()
        nbytes = node.value * int(f) if exact else int(round(node.value * f))
        float(nbytes)
    except (OverflowError, ValueError):
        _emit(sink, "MPL203", f"'{p.name}' must be a finite size, got {describe(node)}; "
                              f"write a size such as 12GiB", node.span)
        return INVALID
    if nbytes <= 0:
        _emit(sink, "MPL203", f"'{p.name}' must be a positive size, got {describe(node)}; "
                              f"write a size such as 12GiB", node.span)
        return INVALID
    return ir.Size(nbytes)


def _check_bool(sink, p, node) -> Any:
    if isinstance(node, ast.Bool):
        return node.value
    return _type_error(sink, p, node)


def check_enum_name(sink, p: schema.Param, node) -> Any:
    if not isinstance(node, ast.Ident):
        return _type_error(sink, p, node)
    if p.enum_value(node.name) is None:
        if sink is not None:
            tail, s = did_you_mean(node.name, p.enum_names())
            if not tail:
                tail = "; expected " + quote_list(p.enum_names())
            fixes = (replace_fix(f"Replace '{node.name}' with '{s}'", node.span, s),) if s else ()
            sink.emit("MPL202", f"unknown {p.name} '{node.name}'{tail}", node.span, fixes=fixes)
        return INVALID
    return node.name


def _check_enum(sink, p, node) -> Any:
    v = check_enum_name(sink, p, node)
    if v == "fallback":
        return FALLBACK_PAIR
    return v


def _check_int_list(sink, p, node) -> Any:
    if not isinstance(node, ast.ListValue):
        return _type_error(sink, p, node)
    out, ok, seen = [], True, {}
    for item in node.items:
        value = None
        if isinstance(item, ast.Number):
            value = item.value if isinstance(item.value, int) else _whole(item)   # `1.0` is 1
        if value is None:
            _type_error(sink, p, item, f"'{p.name}' holds integers, got {kind_of(item)} '{describe(item)}'")
            ok = False
            continue
        if item.unit is not None:
            _unit_check(sink, (), item, p.name)
            ok = False
            continue
        if not _range_check(sink, p, item, value, label=f"{p.name} element"):
            ok = False
            continue
        if value in seen:           # a warning: the duplicate is dropped (the original accepted it)
            _duplicate_element(sink, node, item, seen[value], describe(item))
            continue
        seen[value] = item
        out.append(value)
    return tuple(out) if ok else INVALID


def _duplicate_element(sink, lst: ast.ListValue, item, first, text: str) -> None:
    if sink is None:
        return
    from mpl.diagnostics import Related
    # delete ", item" (or "item, " for the first element)
    idx = lst.items.index(item)
    if idx > 0:
        prev = lst.items[idx - 1]
        span = sink.span(prev.span.end_offset, item.span.end_offset)
    else:
        span = item.span
    sink.emit("MPL209", f"{text} appears twice in the list; it counts once: remove the duplicate", item.span,
              related=(Related("first occurrence", first.span),),
              fixes=(replace_fix(f"Remove the duplicate {text}", span, ""),))


def _check_metric_list(sink, p, node) -> Any:
    if not isinstance(node, ast.ListValue):
        if isinstance(node, ast.Ident) and node.name in schema.METRICS:
            if sink is not None:
                sink.emit("MPL201", f"'{p.name}' expects a list; write [{node.name}]", node.span,
                          fixes=(replace_fix(f"Write [{node.name}]", node.span, f"[{node.name}]"),))
            return INVALID
        return _type_error(sink, p, node)
    out, ok, seen = [], True, {}
    for item in node.items:
        if not isinstance(item, ast.Ident):
            _type_error(sink, p, item, f"'{p.name}' holds metric names, got {kind_of(item)} '{describe(item)}'")
            ok = False
            continue
        if item.name not in schema.METRICS:
            # the original records any name: a warning, and the name is not recorded
            _unknown_monitor_metric(sink, p, item)
            continue
        if item.name in seen:
            _duplicate_element(sink, node, item, seen[item.name], item.name)
            continue
        seen[item.name] = item
        out.append(item.name)
    return tuple(out) if ok else INVALID


def _unknown_monitor_metric(sink, p, item: ast.Ident) -> None:
    """MPL407: a name in monitor.metrics that is not a metric this toolchain computes."""
    if sink is None:
        return
    name = item.name
    tail, s = did_you_mean(name, schema.METRICS)
    fixes = (replace_fix(f"Replace '{name}' with '{s}'", item.span, s),) if s else ()
    if not tail:
        tail = "; known metrics: " + ", ".join(schema.METRICS)
    sink.emit("MPL407", f"'{name}' is not a metric this toolchain computes, so '{p.name}' does "
              f"not record it{tail}", item.span, fixes=fixes)


def check_metric_name(sink, name: str, span: Span) -> bool:
    if name in schema.METRICS:
        return True
    if sink is not None:
        tail, s = did_you_mean(name, schema.METRICS)
        if not tail:
            tail = "; known metrics: " + ", ".join(schema.METRICS)
        fixes = (replace_fix(f"Replace '{name}' with '{s}'", span, s),) if s else ()
        sink.emit("MPL205", f"unknown metric '{name}'{tail}", span, fixes=fixes)
    return False


def _check_string(sink, p, node) -> Any:
    if isinstance(node, ast.String):
        return node.value
    return _type_error(sink, p, node)


def _check_enum_list(sink, p, node) -> Any:
    if not isinstance(node, ast.ListValue):
        if isinstance(node, ast.Ident) and p.enum_value(node.name) is not None:
            if sink is not None:
                sink.emit("MPL201", f"'{p.name}' expects a list; write [{node.name}]", node.span,
                          fixes=(replace_fix(f"Write [{node.name}]", node.span, f"[{node.name}]"),))
            return INVALID
        return _type_error(sink, p, node)
    out, ok, seen = [], True, {}
    for item in node.items:
        v = check_enum_name(sink, p, item)
        if v is INVALID:
            ok = False
            continue
        if v in seen:
            _duplicate_element(sink, node, item, seen[v], v)
            continue
        seen[v] = item
        out.append(v)
    return tuple(out) if ok else INVALID


def _check_location(sink, p, node) -> Any:
    """``gpu``, ``gpu:N``, ``cpu``, ``disk`` -> :class:`mpl.ir.Location`."""
    if isinstance(node, ast.Ident):
        v = check_enum_name(sink, p, node)
        return INVALID if v is INVALID else ir.Location(v)
    if not isinstance(node, ast.Indexed):
        return _type_error(sink, p, node)
    indexed = [e.name for e in p.enum if e.name == "gpu"]
    if node.name not in indexed:
        if sink is not None:
            known = p.enum_value(node.name) is not None
            why = (f"only {quote_list(indexed)} takes a device index" if known
                   else "expected " + quote_list(p.enum_names()) + " (gpu:N for device N)")
            fixes = (replace_fix(f"Replace with '{node.name}'", node.span, node.name),) if known else ()
            sink.emit("MPL202", f"unknown {p.name} '{node.text}': {why}", node.span, fixes=fixes)
        return INVALID
    top = schema.DEVICE_INDEX_MAX
    if node.index > top:
        if sink is not None:
            sink.emit("MPL203", f"the device index of '{node.text}' must be in [0, {top}], got "
                      f"{node.index}", node.span)
        return INVALID
    return ir.Location(node.name, node.index)


def _check_layer_range(sink, p, node) -> Any:
    """``a..b`` or ``N`` -> :class:`mpl.ir.Layers` (both ends included)."""
    if isinstance(node, ast.Number):
        ends = (node, node)
    elif isinstance(node, ast.Range) and node.end is not None:
        ends = (node.start, node.end)
    else:
        return _type_error(sink, p, node)
    values = []
    for end in ends:
        v = end.value if isinstance(end.value, int) else _whole(end)
        if v is None or end.unit is not None:
            if sink is not None:
                sink.emit("MPL201", f"'{p.name}' takes whole layer numbers, got {describe(end)}",
                          end.span)
            return INVALID
        if not _range_check(sink, p, end, v, label=f"{p.name} (a layer id)"):
            return INVALID
        values.append(v)
    first, last = values
    if first > last:
        if sink is not None:
            fixed = f"{ends[1].text}..{ends[0].text}"
            sink.emit("MPL211", f"the range {describe(node)} runs backwards: its first layer is "
                      f"above its last; write {fixed}", node.span,
                      fixes=(replace_fix(f"Write {fixed}", node.span, fixed),))
        return INVALID
    return ir.Layers(first, last)


def check_weighted_sum(sink, p, node: ast.Call) -> Any:
    """``weighted_sum(rule = weight, ...)`` -> :class:`mpl.ir.WeightedSum` (MPL210)."""
    name = node.name.text
    if name != schema.WEIGHTED_SUM:
        if sink is not None:
            tail, s = did_you_mean(name, (schema.WEIGHTED_SUM,))
            fixes = (replace_fix(f"Replace '{name}' with '{s}'", node.name.span, s),) if s else ()
            sink.emit("MPL210", f"unknown {p.name} '{name}(...)'{tail or '; the call-like value is ' + schema.WEIGHTED_SUM + '(lru = 0.5, lfu = 0.5)'}",
                      node.name.span, fixes=fixes)
        return INVALID
    singles = tuple(e.name for e in p.enum if e.segment)
    weights, ok, seen = [], True, {}
    for a in node.args:
        if not isinstance(a, ast.Arg):
            ok = False
            continue
        rule = a.name.text
        if rule not in singles:
            if sink is not None:
                if p.enum_value(rule) is None:
                    tail, s = did_you_mean(rule, singles)
                    fixes = (replace_fix(f"Replace '{rule}' with '{s}'", a.name.span, s),) if s else ()
                    msg = f"unknown rule '{rule}' in {name}(...){tail or '; rules: ' + quote_list(singles)}"
                else:
                    fixes = ()
                    msg = (f"'{rule}' cannot be weighted in {name}(...): each argument names a "
                           f"single-queue rule ({quote_list(singles)})")
                sink.emit("MPL210", msg, a.name.span, fixes=fixes)
            ok = False
            continue
        if rule in seen:
            if sink is not None:
                from mpl.diagnostics import Related
                prev = node.args[node.args.index(a) - 1]
                span = sink.span(prev.span.end_offset, a.span.end_offset)
                sink.emit("MPL210", f"'{rule}' is weighted twice in {name}(...); name each rule "
                          f"once", a.name.span, related=(Related("first weighted here", seen[rule].span),),
                          fixes=(replace_fix(f"Remove the second '{rule}'", span, ""),))
            ok = False
            continue
        seen[rule] = a
        w = a.value
        if not isinstance(w, ast.Number) or w.unit is not None:
            if sink is not None and w is not None:
                sink.emit("MPL201", f"the weight of '{rule}' in {name}(...) is a number in (0, 1], "
                          f"got {kind_of(w)} '{describe(w)}'", w.span)
            ok = False
            continue
        x = float(w.value)
        if not (0 < x <= 1):
            if sink is not None:
                sink.emit("MPL203", f"the weight of '{rule}' in {name}(...) must be in (0, 1], got "
                          f"{w.text}", w.span)
            ok = False
            continue
        weights.append((rule, w.value))
    if ok and len(weights) < 2:
        if sink is not None:
            one = weights[0][0] if weights else None
            fixes = (replace_fix(f"Write {one}", node.span, one),) if one else ()
            sink.emit("MPL210", f"{name}(...) weighs at least two rules" +
                      (f"; with one, write {p.name} = {one}" if one else ", e.g. "
                       f"{name}(lru = 0.5, lfu = 0.5)"), node.span, fixes=fixes)
        return INVALID
    return ir.WeightedSum(tuple(weights)) if ok else INVALID


def _check_eviction_value(sink, p, node) -> Any:
    """An enum value, or a weighted_sum(...) where the parameter takes one."""
    if isinstance(node, ast.Call) and p.weighted:
        return check_weighted_sum(sink, p, node)
    return _check_enum(sink, p, node)


_CHECKERS = {
    schema.INT: _check_number,
    schema.NUMBER: _check_number,
    schema.COUNT: _check_number,
    schema.BOOL: _check_bool,
    schema.ENUM: _check_enum,
    schema.INT_LIST: _check_int_list,
    schema.METRIC_LIST: _check_metric_list,
    schema.SLOTS_OR_SIZE: _check_capacity,
    schema.STRING: _check_string,
    schema.ENUM_LIST: _check_enum_list,
    schema.LOCATION: _check_location,
    schema.LAYER_RANGE: _check_layer_range,
}


def check_value(p: schema.Param, node, sink: Sink | None = None) -> Any:
    """The IR value of ``node`` for parameter ``p``, or INVALID (errors reported to sink)."""
    if node is None or isinstance(node, ast.ErrorNode):
        return INVALID
    if p.weighted:
        return _check_eviction_value(sink, p, node)
    return _CHECKERS[p.type](sink, p, node)


# ------------------------------------------------------------------ expressions
def _segment_rules() -> tuple[str, ...]:
    """The rules a side of ``a | b`` can be (the schema's single-queue rules; the runtime's
    SEGMENT_RULES are the same, tests/test_checker_segmented_eviction.py holds them equal)."""
    return tuple(e.name for e in schema.param("cache.eviction").enum if e.segment)


def _bad_side(sink, p: schema.Param, expr: ast.Expr, side: ast.Ident, other: Any) -> None:
    """MPL208 for a rule that cannot be one side of ``a | b`` (``other``: the other side's
    value, INVALID when it is not known)."""
    if sink is None:
        return
    name = side.name
    pair = sink.span(expr.value.span.offset, expr.fallback.span.end_offset)
    singles = _segment_rules()
    each = f"each side is one of {', '.join(singles)}"
    if name == "fallback":
        sink.emit("MPL208", "'fallback' is already the segmented pair lfu | lru and cannot be "
                  "one side of 'a | b'; name two single rules such as lfu | lru", side.span,
                  fixes=(replace_fix("Replace with lfu | lru", pair, "lfu | lru"),))
        return
    e = p.enum_value(name)
    if e is not None and e.replay_only:
        fix = (replace_fix(f"Replace with {other}", pair, other),) if other in singles else ()
        sink.emit("MPL208", f"'{name}' is the offline optimum over the whole cache and cannot be one "
                  f"side of 'a | b'; write 'eviction = {name}' alone (trace replay only), or pair two "
                  f"single rules ({each})",
                  side.span, fixes=fix)
        return
    sink.emit("MPL208", f"'{name}' is a complete policy with its own queues and cannot be one side "
              f"of 'a | b'; write 'eviction = {name}' alone, or pair two single rules ({each})",
              side.span, fixes=(replace_fix(f"Replace with {name}", pair, name),))


def check_fallback(sink, p: schema.Param, expr: ast.Expr) -> Any:
    """``a | b`` for a parameter that accepts it: ``"a|b"``. Each side must be a single-queue
    rule (MPL208 for ``fallback``, arc, s3fifo, lfru, belady)."""
    sides = (expr.value, expr.fallback)
    parts = [check_enum_name(sink, p, side) for side in sides]
    if INVALID in parts:
        return INVALID
    singles = _segment_rules()
    for i, (side, v) in enumerate(zip(sides, parts)):
        if v not in singles:
            _bad_side(sink, p, expr, side, parts[1 - i])
            return INVALID
    return "|".join(parts)


def expr_end(expr: ast.Expr) -> int:
    return expr.span.end_offset


def check_expr(sink: Sink | None, p: schema.Param, expr: ast.Expr | None):
    """Check ``value (| value)? (: value when cond)?`` for ``p``.

    Returns ``(base, alternative, condition)``: IR values (``alternative``/``condition`` are
    None without a conditional part); any part may be INVALID.
    """
    if expr is None or expr.value is None or isinstance(expr.value, ast.ErrorNode):
        return INVALID, None, None
    if expr.fallback is not None and not isinstance(expr.fallback, ast.ErrorNode):
        if p.fallback:
            base = check_fallback(sink, p, expr)
        else:
            check_value(p, expr.value, sink)
            if sink is not None:
                span = sink.span(expr.value.span.end_offset, expr.fallback.span.end_offset)
                sink.emit("MPL208", f"'{p.name}' takes a single value, not a fallback 'a | b'; "
                          f"only eviction has a fallback; keep {describe(expr.value)}",
                          sink.span(expr.fallback.span.offset, expr.fallback.span.end_offset),
                          fixes=(replace_fix(f"Remove '| {describe(expr.fallback)}'", span, ""),))
            base = INVALID
    else:
        base = check_value(p, expr.value, sink)
    if expr.alternative is None and expr.condition is None:
        return base, None, None
    if not p.conditional:
        if sink is not None:
            start = expr.value.span.end_offset
            if expr.fallback is not None:
                start = expr.fallback.span.end_offset
            span = sink.span(start, expr.span.end_offset)
            text = sink.text[span.offset:span.end_offset]
            colon = text.find(":")
            if colon >= 0:
                span = sink.span(start + colon, expr.span.end_offset)
            sink.emit("MPL206", f"'{p.name}' cannot have a conditional value 'a : b when ...'; it is fixed "
                      f"for the run; keep {describe(expr.value)}", span,
                      fixes=(replace_fix(f"Keep {describe(expr.value)}", span, ""),))
        return INVALID, INVALID, INVALID
    alt = check_value(p, expr.alternative, sink) if expr.alternative is not None else INVALID
    if alt == "fallback":
        alt = FALLBACK_PAIR
    cond = check_condition(sink, expr.condition)
    return base, alt, cond


# ------------------------------------------------------------------ conditions
_NEGATE = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}


def negate(c: ir.Condition) -> ir.Condition:
    return ir.Condition(c.metric, _NEGATE[c.op], c.threshold)


def check_condition(sink: Sink | None, cond: ast.Condition | None):
    """``METRIC OP NUMBER`` -> ir.Condition, or INVALID. Reports MPL205/204/201 and the
    never/always-holds warnings MPL402/MPL405."""
    if cond is None or cond.metric is None or cond.op is None or cond.threshold is None:
        return INVALID
    if isinstance(cond.threshold, ast.ErrorNode):
        return INVALID
    if not check_metric_name(sink, cond.metric.text, cond.metric.span):
        return INVALID
    metric = schema.METRICS[cond.metric.text]
    th = cond.threshold
    if not isinstance(th, ast.Number):
        if sink is not None:
            sink.emit("MPL201", f"a condition compares '{metric.name}' with a number, got "
                      f"{kind_of(th)} '{describe(th)}'", th.span)
        return INVALID
    allowed = schema.TIME_UNITS if metric.unit == "ms" else ()
    unit = _unit_check(sink, allowed, th, metric.name)
    if unit is INVALID:
        return INVALID
    x = float(th.value) * (unit.factor if unit is not None else 1.0)
    c = ir.Condition(metric.name, cond.op, x)
    if sink is not None:
        verdict = condition_verdict(c)
        if verdict is not None:
            span = sink.span(cond.span.offset, cond.span.end_offset)
            hi = "unbounded" if metric.max is None else fmt_num(metric.max)
            rng = f"[{fmt_num(metric.min)}, {hi}]" if metric.max is not None else f">= {fmt_num(metric.min)}"
            if verdict == "never":
                sink.emit("MPL402", f"condition '{metric.name} {cond.op} {describe(th)}' can never hold: "
                          f"{metric.name} is always {rng}; change the threshold", span)
            else:
                sink.emit("MPL405", f"condition '{metric.name} {cond.op} {describe(th)}' always holds: "
                          f"{metric.name} is always {rng}; set the value directly instead", span)
    return c


def condition_verdict(c: ir.Condition) -> str | None:
    """"never", "always" or None, from the metric's range in the schema."""
    m = schema.METRICS[c.metric]
    lo = m.min
    hi = math.inf if m.max is None else m.max
    t, op = c.threshold, c.op
    never = always = False
    if op == "<":
        never, always = t <= lo, t > hi
    elif op == "<=":
        never, always = t < lo, t >= hi
    elif op == ">":
        never, always = t >= hi, t < lo
    elif op == ">=":
        never, always = t > hi, t <= lo
    elif op == "==":
        never = t < lo or t > hi
    elif op == "!=":
        always = t < lo or t > hi
    return "never" if never else "always" if always else None


def _interval(c: ir.Condition):
    """The set of metric values where ``c`` holds, as (lo, lo_closed, hi, hi_closed), or
    ("ne", t) for !=. ``miss_rate`` is expressed on the ``hit_rate`` axis."""
    metric, op, t = c.metric, c.op, c.threshold
    if metric == "miss_rate":
        metric, t = "hit_rate", 1.0 - t
        op = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}[op]
    m = schema.METRICS[metric]
    lo, hi = m.min, (math.inf if m.max is None else m.max)
    if op == "<":
        return metric, (lo, True, t, False)
    if op == "<=":
        return metric, (lo, True, t, True)
    if op == ">":
        return metric, (t, False, hi, True)
    if op == ">=":
        return metric, (t, True, hi, True)
    if op == "==":
        return metric, (t, True, t, True)
    return metric, ("ne", t)


def can_hold_together(a: ir.Condition, b: ir.Condition) -> bool:
    """Whether two conditions can hold at the same time (metrics other than the
    hit/miss pair are treated as independent)."""
    ma, ia = _interval(a)
    mb, ib = _interval(b)
    if ma != mb:
        return True
    if ia[0] == "ne" or ib[0] == "ne":
        if ia[0] == "ne" and ib[0] == "ne":
            return True
        ne, other = (ia, ib) if ia[0] == "ne" else (ib, ia)
        lo, _, hi, _ = other
        return not (lo == hi == ne[1])
    lo = max(ia[0], ib[0])
    hi = min(ia[2], ib[2])
    if lo < hi:
        return True
    if lo > hi:
        return False
    # a single point: closed on both sides?
    lo_closed = (ia[1] if ia[0] == lo else True) and (ib[1] if ib[0] == lo else True)
    hi_closed = (ia[3] if ia[2] == hi else True) and (ib[3] if ib[2] == hi else True)
    return lo_closed and hi_closed


def check_duration(sink: Sink | None, node) -> Any:
    """``for N UNIT`` -> ir.Count (no duration: Count(0))."""
    if node is None:
        return ir.Count(0, "accesses")
    if isinstance(node, ast.ErrorNode):
        return INVALID
    value = None
    if isinstance(node, ast.Number):
        value = node.value if isinstance(node.value, int) else _whole(node)   # `for 100. accesses`
    if value is None:
        if sink is not None:
            sink.emit("MPL201", f"a rule's duration is a whole number of accesses, steps or tokens, "
                      f"got {describe(node)}", node.span)
        return INVALID
    unit = _unit_check(sink, schema.RULE_DURATION_UNITS, node, "for")
    if unit is INVALID:
        return INVALID
    if value < 0:
        if sink is not None:
            sink.emit("MPL203", f"a rule's duration must be >= 0, got {describe(node)}; use 0 to "
                      f"fire at once", node.span)
        return INVALID
    top = schema.RULE_DURATION_MAX
    if value > top:
        if sink is not None:
            sink.emit("MPL203", f"a rule's duration must be in [0, {top}], got {describe(node)}: "
                      f"a condition held that long never makes the rule fire in a run; use "
                      f"{top}", node.span,
                      fixes=(replace_fix(f"Clamp to {top}", number_span(sink, node), str(top)),))
        return INVALID
    return ir.Count(value, unit.name if unit is not None else "accesses")
