"""The checker's view of a policy after ``extends`` is applied: which AST node (in which
file) sets each parameter, the adapt rules in order, and the checked IR values.

:func:`mpl.lower.lower` turns a :class:`ResolvedPolicy` into a :class:`mpl.ir.PolicyIR`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpl import ir, schema
from mpl.checker.common import INVALID
from mpl.checker.crossfield import ORDER
from mpl.checker.values import negate
from mpl.diagnostics import Span
from mpl.syntax import ast


@dataclass
class Setting:
    """``name = value`` for one schema key, where it was written."""
    key: str
    node: ast.Param
    block: ast.Block
    file: str | None
    policy: str                   # the policy that wrote it (a parent, for inherited ones)
    base: Any = None              # checked IR value (INVALID on errors)
    alternative: Any = None       # the `b` of `a : b when c` (None without one)
    condition: Any = None         # ir.Condition of the conditional part (None without one)

    @property
    def conditional(self) -> bool:
        return self.node.value is not None and self.node.value.condition is not None

    @property
    def value_span(self) -> Span:
        expr = self.node.value
        if expr is not None and expr.value is not None:
            return expr.value.span
        return self.node.name.span


@dataclass
class ActionInfo:
    """One checked adapt action. ``kind``: "set" | "trigger" | "rebalance"."""
    node: Any
    kind: str
    key: str | None = None        # schema key of a set action
    value: Any = None             # IR value (INVALID on errors)
    name: str | None = None       # trigger name / allocation of a rebalance
    value_span: Span | None = None


def action_has_effect(a: ActionInfo, per_layer: bool) -> bool:
    """Whether an accepted adapt action changes anything when it fires (``per_layer``: the
    policy has per-layer caches). Those that cannot are accepted with a warning (MPL308,
    MPL408), as the original accepts them, and left out of the IR."""
    if a.kind == "rebalance":
        return per_layer
    if a.kind == "set" and a.key is not None:
        p = schema.PARAMS[a.key]
        if p.adapt_no_effect:
            return False
        if p.block == PER_LAYER_BLOCK:
            return per_layer
    return True


#: the block of per-layer caches: `rebalance` and actions on its parameters need it
PER_LAYER_BLOCK = schema.PER_LAYER_BLOCK


@dataclass
class RuleInfo:
    """A checked adapt rule, or one half of a conditional value's rule pair."""
    node: Any                     # ast.Rule, or the ast.Param of a conditional value
    file: str | None
    policy: str
    condition: Any                # ir.Condition or INVALID
    duration: Any                 # ir.Count or INVALID
    actions: list[ActionInfo] = field(default_factory=list)
    origin: str = "rule"          # "rule" | "conditional"
    inverse: bool = False         # the restoring half of a conditional pair

    @property
    def valid(self) -> bool:
        return (self.condition is not INVALID and self.duration is not INVALID
                and all(a.value is not INVALID for a in self.actions))


@dataclass
class ResolvedPolicy:
    name: str
    node: ast.Policy
    file: str | None
    text: str
    parent: str | None = None
    parent_policy: "ResolvedPolicy | None" = None
    blocks: dict[str, ast.Block] = field(default_factory=dict)        # known blocks, first wins
    block_files: dict[str, str | None] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)        # schema key -> Setting
    rules: list[RuleInfo] = field(default_factory=list)               # explicit adapt rules
    own_keys: set[str] = field(default_factory=set)                   # keys set by this policy itself
    own_blocks: set[str] = field(default_factory=set)
    has_errors: bool = False
    syntax_damaged: bool = False      # a syntax error lies inside the policy (no cascades)
    violations: frozenset = frozenset()                               # cross-field/model results
    source_hash: str = ""
    tiers: Any = None                 # mpl.checker.tiers.OwnTiers: the memory tiers, resolved
    tier_violations: frozenset = frozenset()                          # their checks' results
    pins: Any = None                  # mpl.checker.pins.OwnPins: the per-layer pins, resolved

    def given(self, key: str) -> bool:
        return key in self.settings

    def gives(self, key: str) -> bool:
        """Whether a required parameter is given: itself, the parameter that may stand instead
        of it (cache.capacity_factor), or a block that stands instead of its block (memory
        tiers instead of the cache)."""
        p = schema.PARAMS[key]
        if key in self.settings or (p.instead is not None and p.instead in self.settings):
            return True
        return any(schema.BLOCKS[b].instead_of == p.block for b in self.blocks)

    def conditional_rules(self) -> list[RuleInfo]:
        """The rule pair of each conditional value, in schema key order."""
        out = []
        for key in sorted((k for k, s in self.settings.items() if s.conditional), key=ORDER.__getitem__):
            s = self.settings[key]
            alt_node = s.node.value.alternative
            out.append(RuleInfo(s.node, s.file, s.policy, s.condition, _zero(),
                                [ActionInfo(s.node, "set", key, s.alternative,
                                            value_span=alt_node.span if alt_node is not None else s.node.span)],
                                origin="conditional"))
            inv = negate(s.condition) if s.condition not in (None, INVALID) else INVALID
            out.append(RuleInfo(s.node, s.file, s.policy, inv, _zero(),
                                [ActionInfo(s.node, "set", key, s.base, value_span=s.value_span)],
                                origin="conditional", inverse=True))
        return out

    def all_rules(self) -> list[RuleInfo]:
        return self.conditional_rules() + list(self.rules)

    def broken_part(self) -> str | None:
        """What cannot be lowered (a value whose error was reported, wherever its diagnostic
        lies, or a missing required parameter), else None. The checker marks a policy with
        such a part as having errors, so lowering only ever sees complete policies."""
        for key in schema.missing_required(self.settings.__contains__):
            if not self.gives(key):       # (memory tiers stand instead of the cache block)
                return f"{key} (not set)"
        for key, s in self.settings.items():
            if _bad(s.base) or (s.conditional and (_bad(s.alternative) or _bad(s.condition))):
                return key
        if self.pins is not None and self.pins.broken():
            return "a pin item"
        for r in self.all_rules():
            if _bad(r.condition) or _bad(r.duration):
                return "an adapt rule"
            for a in r.actions:
                if _bad(a.value) or _bad(a.key if a.kind == "set" else a.name):
                    return "an adapt action"
        return None


def _bad(v) -> bool:
    return v is None or v is INVALID


_ZERO = ir.Count(0, "accesses")


def _zero():
    return _ZERO
