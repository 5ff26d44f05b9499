"""The data a policy's runtime is made from: its parameters, features and adapt rules.

A generated module writes these tables as literals (``PARAMS``, ``FEATURES``, ``_RULES``,
``_ACTIONS``, ``_CONDITIONS``) and passes them to ``mpl.runtime.backend.make``; a loaded
:class:`mpl.Policy` builds the same tables from its IR directly, so a runtime on the
compiled engine needs no generated module at all. Both come from :func:`tables`: the
module's literals are the source text of what it returns, with the runtime's value types
given by the caller (the compiler never imports the runtime).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from mpl import ir as _ir
from mpl import schema
from mpl.features import features


class Tables(NamedTuple):
    params: dict          # every schema parameter, as lowered
    features: dict        # what the policy can reach (Features.runtime_dict)
    conditions: tuple     # per adapt rule: (metric, op, threshold, for N, unit, line)
    actions: tuple        # per adapt rule: its actions, (kind, key, value) each
    rules: tuple          # per adapt rule: the rule it is the inverse of, or None


def value(v, size: Callable, count: Callable):
    """An IR value as the runtime holds it: an ``ir.Size`` as ``size(bytes)``, an
    ``ir.Count`` as ``count(n, unit)`` (``mpl.runtime.values``' types, or the source text
    that makes them), a list as a tuple; None, bool, int, str and finite floats as they are."""
    if isinstance(v, _ir.Size):
        return size(int(v.bytes))
    if isinstance(v, _ir.Count):
        return count(int(v.n), str(v.unit))
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(f"non-finite value {v!r} in the IR")
        return v
    if isinstance(v, (list, tuple)):
        return tuple(value(x, size, count) for x in v)
    raise TypeError(f"cannot compile IR value of type {type(v).__name__}")


def _action(a, size, count) -> tuple:
    if isinstance(a, _ir.SetAction):
        if a.key not in schema.PARAMS:
            raise ValueError(f"adapt action sets unknown parameter {a.key!r}")
        return ("set", a.key, value(a.value, size, count))
    if isinstance(a, _ir.TriggerAction):
        if a.trigger not in schema.TRIGGERS:
            raise ValueError(f"unknown trigger {a.trigger!r}")
        return ("trigger", a.trigger, None)
    if isinstance(a, _ir.RebalanceAction):
        return ("rebalance", None, a.allocation)
    raise TypeError(f"unknown adapt action {a!r}")


def require_values(pir: _ir.PolicyIR) -> None:
    """ValueError unless ``pir`` has a value for every schema parameter."""
    for key in schema.PARAMS:
        if key not in pir.values:
            raise ValueError(f"IR of policy {pir.name!r} lacks a value for {key!r}")


def tables(pir: _ir.PolicyIR, size: Callable, count: Callable, feats=None) -> Tables:
    """The runtime tables of ``pir``, its sizes and counts made by ``size`` and ``count``
    (:func:`value`); ``feats``: its :func:`mpl.features.features`, when computed already."""
    require_values(pir)
    f = features(pir) if feats is None else feats
    table = f.runtime_dict()
    return Tables(
        {key: value(pir.values[key], size, count) for key in schema.PARAMS},
        {k: value(table[k], size, count) for k in sorted(table)},
        tuple((c.metric, c.op, float(c.threshold), int(r.duration.n), r.duration.unit,
               int(r.source_line)) for r in pir.adapt for c in (r.condition,)),
        tuple(tuple(_action(a, size, count) for a in r.actions) for r in pir.adapt),
        tuple(r.inverse_of for r in pir.adapt))


# ---------------------------------------------------------------- as source text
class _Source(str):
    """Source text standing for a value (a constructor call) inside :func:`source`."""


def _size_source(n: int) -> _Source:
    return _Source(f"_Size({n!r})")


def _count_source(n: int, unit: str) -> _Source:
    return _Source(f"_Count({n!r}, {unit!r})")


def source_tables(pir: _ir.PolicyIR, feats=None) -> Tables:
    """:func:`tables` with each size and count as the source text of its constructor
    (``_Size``, ``_Count``: the generated module's names for ``mpl.runtime.values``')."""
    return tables(pir, _size_source, _count_source, feats)


def source(v) -> str:
    """Python source for a value of :func:`source_tables`."""
    if isinstance(v, _Source):
        return str(v)
    if isinstance(v, tuple):
        inner = ", ".join(source(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)
