"""Runs the cross-field rules (MPL3xx) and the model-aware rules (MPL5xx) over a policy's
effective values.

The rules themselves (explanation, examples and check) live in :mod:`mpl.rules.crossfield`
and :mod:`mpl.rules.model`; this module builds what they see (``values``: every schema key
-> IR value, defaults filled in, ``INVALID`` where the written value had an error) and runs
them in order. They return :class:`Violation` objects naming the keys involved (the first is
where the problem is reported); :mod:`mpl.checker.policy` places them on the source. The same
rules run on the values an adapt rule would produce (MPL306).
"""

from __future__ import annotations

from typing import Any, Mapping

from mpl import schema
from mpl.rules import CROSS_FIELD_CHECKS, MODEL_CHECKS
from mpl.rules.base import LIVE, REPLAY, Facts, Violation
from mpl.shapes import ModelShape

__all__ = ["DEFAULTS", "LIVE", "ORDER", "REPLAY", "Violation", "cross_field", "default_value"]


def default_value(p: schema.Param) -> Any:
    d = p.default
    if d is schema.REQUIRED or d is schema.OFF or d is schema.DERIVED:
        return None
    return d


#: every schema key -> its default IR value (None for REQUIRED/OFF/DERIVED)
DEFAULTS: dict[str, Any] = {key: default_value(p) for key, p in schema.PARAMS.items()}
#: schema key -> position in the schema (canonical order)
ORDER: dict[str, int] = {key: i for i, key in enumerate(schema.PARAMS)}


def cross_field(values: Mapping[str, Any], blocks: set[str], given: set[str], *,
                purpose: str = LIVE, model: ModelShape | None = None) -> list[Violation]:
    """Every violation of a cross-field rule (and, with ``model``, of a model-aware one)."""
    facts = Facts(values, blocks, given, purpose, model)
    out: list[Violation] = []
    for check in CROSS_FIELD_CHECKS:
        out.extend(check(facts))
    if model is not None:
        for check in MODEL_CHECKS:
            out.extend(check(facts))
    return out
