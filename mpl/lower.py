"""Lowering: a checked, resolved policy -> :class:`mpl.ir.PolicyIR`.

* every schema key gets a value: the written one, else the schema default (``OFF`` and
  ``DERIVED`` lower to ``None``);
* values are converted by the same functions the checker uses (:mod:`mpl.checker.values`):
  units normalised, ``fallback`` and ``lfu | lru`` -> ``"lfu|lru"``, lists -> tuples;
* adapt-action aliases (``lfu_decay``) resolve to schema keys;
* a conditional value ``p = a : b when c`` lowers to ``a`` plus the rule pair
  ``when c { p = b }`` (origin ``"conditional"``) and ``when not c { p = a }`` (its inverse,
  ``inverse_of`` = the first rule's index). Conditional pairs come first, in schema key order,
  then the explicit adapt rules in source order (parent's first) — so the IR does not depend on
  the order parameters are written in (the formatter reorders them);
* rule durations -> :class:`mpl.ir.Count` (no ``for``: ``Count(0)``, fires at once);
* memory tiers -> :class:`mpl.ir.Hierarchy` and :class:`mpl.ir.Band`
  (:func:`mpl.checker.tiers.lower`);
* the cache's ``pin layers = ...`` items -> :class:`mpl.ir.LayerPins`
  (:func:`mpl.checker.pins.lower`).

The input must be free of errors (``Analysis.ir`` only lowers those: the checker marks a
policy with any part that cannot be lowered as having errors, see
:meth:`mpl.checker.resolved.ResolvedPolicy.broken_part`); ``LoweringError`` is raised otherwise.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from mpl import ir
from mpl.checker import pins, tiers
from mpl.checker.crossfield import DEFAULTS
from mpl.checker.resolved import PER_LAYER_BLOCK, ResolvedPolicy, RuleInfo, action_has_effect


class LoweringError(ValueError):
    """The policy still has errors (lower only checked policies)."""


def source_hash(texts: Iterable[str]) -> str:
    """sha256 of the source text and the texts it imports (in load order)."""
    h = hashlib.sha256()
    for i, t in enumerate(texts):
        if i:
            h.update(b"\x00")
        h.update(t.encode("utf-8"))
    return h.hexdigest()


def _lower_rule(index: int, r: RuleInfo, inverse_of: int | None, per_layer: bool) -> ir.AdaptRule:
    actions = []
    for a in r.actions:
        if not action_has_effect(a, per_layer):
            continue                # accepted with a warning (MPL308, MPL408): nothing to do
        if a.kind == "set":
            actions.append(ir.SetAction(a.key, a.value))
        elif a.kind == "trigger":
            actions.append(ir.TriggerAction(a.name))
        else:
            actions.append(ir.RebalanceAction(a.name))
    node = r.node
    line = node.span.line if node is not None else 0
    return ir.AdaptRule(index, r.condition, r.duration,
                        tuple(actions), origin=r.origin, inverse_of=inverse_of, source_line=line)


def lower(rp: ResolvedPolicy, *, source_hash: str | None = None,
          source_path: str | None = None) -> ir.PolicyIR:
    """The IR of a resolved policy without errors."""
    if rp.has_errors:
        raise LoweringError(f"policy '{rp.name}' has errors")
    broken = rp.broken_part()
    if broken is not None:     # the checker marks such a policy as having errors
        raise LoweringError(f"cannot lower {broken} of policy '{rp.name}': it has errors")
    values = dict(DEFAULTS)
    for key, s in rp.settings.items():
        values[key] = s.base
    rules: list[ir.AdaptRule] = []
    per_layer = PER_LAYER_BLOCK in rp.blocks
    for r in rp.conditional_rules():
        if r.inverse:
            rules.append(_lower_rule(len(rules), r, inverse_of=len(rules) - 1, per_layer=per_layer))
        else:
            rules.append(_lower_rule(len(rules), r, inverse_of=None, per_layer=per_layer))
    for r in rp.rules:
        rules.append(_lower_rule(len(rules), r, inverse_of=None, per_layer=per_layer))
    hierarchy, bands = (None, ())
    if rp.tiers is not None and rp.tiers.present:
        broken = tiers.broken_part(rp.tiers)
        if broken is not None:
            raise LoweringError(f"cannot lower {broken} of policy '{rp.name}': it has errors")
        hierarchy, bands = tiers.lower(rp.tiers)
    return ir.PolicyIR(
        name=rp.name,
        values=values,
        blocks=frozenset(rp.blocks),
        adapt=tuple(rules),
        parent=rp.parent,
        source_path=source_path if source_path is not None else rp.file,
        source_hash=source_hash if source_hash is not None else rp.source_hash,
        hierarchy=hierarchy,
        bands=bands,
        layer_pins=pins.lower(rp.pins),
        source_line=rp.node.span.line,
    )
