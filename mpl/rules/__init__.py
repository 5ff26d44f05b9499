"""The diagnostic codes: one home for each rule.

Every code is a :class:`~mpl.rules.base.Rule` (code, severity, group, title, explanation
with a wrong and a fixed example) defined in the module of its group, and a cross-field or
model-aware rule has its check right below it:

* :mod:`.syntax` MPL0xx, :mod:`.structure` MPL1xx, :mod:`.values` MPL2xx,
  :mod:`.warnings` MPL4xx: explanations; the checks are passes of the parser/checker;
* :mod:`.crossfield` MPL3xx and :mod:`.model` MPL5xx: explanations and checks (pure
  functions of a policy's effective values, run by :func:`mpl.checker.crossfield.cross_field`).

:data:`CODES` collects them from the explicit list below. ``docs/diagnostics.md``, ``mplc
explain``, the language server's code links and the doc tests are generated from it (see
:mod:`mpl.diagnostic_docs`). Codes are stable: never renumber, only add.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from mpl.diagnostics import Diagnostic, Fix, Related, Severity, Span
from mpl.rules import crossfield, model, structure, syntax, values, warnings
from mpl.rules.base import Rule

CODES: Mapping[str, Rule] = MappingProxyType({r.code: r for r in (
    *syntax.RULES, *structure.RULES, *values.RULES, *crossfield.RULES, *warnings.RULES,
    *model.RULES)})

#: the checks over a policy's effective values, in the order their violations are reported;
#: MODEL_CHECKS only run when the model's shape is known
CROSS_FIELD_CHECKS = (model.check_no_slot, *crossfield.CHECKS)
MODEL_CHECKS = model.CHECKS

ADAPT_STATE_LIMIT = crossfield.ADAPT_STATE_LIMIT


def make(code: str, message: str, span: Span, *, file: str | None = None,
         related: tuple[Related, ...] = (), fixes: tuple[Fix, ...] = (),
         severity: Severity | None = None) -> Diagnostic:
    """Build a diagnostic with the registry's severity (unknown codes are a bug)."""
    info = CODES[code]
    return Diagnostic(code, severity or info.severity, message, span, file, tuple(related), tuple(fixes))
