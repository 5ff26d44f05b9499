#!/usr/bin/env python3
"""Generate the extension's TextMate grammar from ``mpl.schema``.

The block names, parameter names, enum values, metric names, units, trigger names,
comparison operators and keywords of the grammar all come from the one table in
``mpl/schema.py``, so the highlighting never drifts from the language.

Usage::

    python vscode-extension/scripts/gen_grammar.py           # rewrite the committed grammar
    python vscode-extension/scripts/gen_grammar.py --check   # exit 1 if it is stale

``tests/test_vscode_grammar.py`` runs the ``--check`` comparison in the Python test suite.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXT = HERE.parent
ROOT = EXT.parent
if str(ROOT) not in sys.path:          # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from mpl import schema  # noqa: E402

GRAMMAR_PATH = EXT / "syntaxes" / "moe.tmLanguage.json"

SCOPE = "source.moe"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A number as the language writes it: optional sign, digits, optional fraction/exponent; in a
# range `0..7` the first number's '.' is never the first of the two, and the second number
# follows the '..'.
NUMBER = r"(?:(?<![\w.])|(?<=\.\.))-?(?:\d+(?:\.(?!\.)\d*)?|\.\d+)(?:[eE][+-]?\d+)?"


def _alt(names) -> str:
    """A regex alternation of literal names, longest first (so `<=` wins over `<`)."""
    uniq = sorted(set(names), key=lambda n: (-len(n), n))
    return "|".join(re.escape(n) for n in uniq)


def _words(names) -> str:
    return r"\b(?:" + _alt(names) + r")\b"


# ------------------------------------------------------------------ name lists
def block_names() -> list[str]:
    return list(schema.BLOCK_ORDER)


def param_names() -> list[str]:
    """Every parameter name (memory tiers' too), plus the original's adapt-action aliases."""
    names = [p.name for p in schema.PARAMS.values()]
    names += [p.name for p in schema.NESTED_PARAMS.values()]
    names += [a for p in schema.PARAMS.values() for a in p.aliases]
    return sorted(set(names))


def enum_values() -> list[str]:
    """Every enum value (memory tiers' too), the transitions' events and weighted_sum."""
    values = {e.name for p in schema.PARAMS.values() for e in p.enum}
    values |= {e.name for p in schema.NESTED_PARAMS.values() for e in p.enum}
    values |= {e.name for x in schema.SECTIONS.values() for e in x.events}
    values.add(schema.WEIGHTED_SUM)
    return sorted(values)


def section_kinds() -> list[str]:
    """The kinds of nested items: tier, band, on."""
    return sorted(schema.SECTIONS)


def metric_names() -> list[str]:
    return sorted(schema.METRICS)


def unit_names() -> list[str]:
    return sorted(set(schema.UNITS) | set(schema.RULE_DURATION_UNITS))


def trigger_names() -> list[str]:
    return sorted(schema.TRIGGERS)


def rebalance_names() -> list[str]:
    return list(schema.param(schema.REBALANCE).enum_names())


# ------------------------------------------------------------------ the grammar
def build_grammar() -> dict:
    kw = set(schema.KEYWORDS)
    assert {"version", "import", "policy", "extends", "when", "for", "trigger",
            "rebalance", "true", "false"} <= kw, "grammar generator needs updating"
    blocks = _words(block_names())
    params = _words(param_names())
    ops = _alt(schema.COMPARISON_OPS)

    repo: dict[str, dict] = {}
    repo["comment"] = {
        "match": r"(#).*$",
        "name": "comment.line.number-sign.moe",
        "captures": {"1": {"name": "punctuation.definition.comment.moe"}},
    }
    repo["string"] = {
        "name": "string.quoted.double.moe",
        "begin": '"',
        "beginCaptures": {"0": {"name": "punctuation.definition.string.begin.moe"}},
        "end": r'"|$',
        "endCaptures": {"0": {"name": "punctuation.definition.string.end.moe"}},
        "patterns": [{"match": r"\\.", "name": "constant.character.escape.moe"}],
    }
    repo["version"] = {
        "match": rf"\b(version)\b(?:\s+({NUMBER}))?",
        "captures": {"1": {"name": "keyword.other.version.moe"},
                     "2": {"name": "constant.numeric.version.moe"}},
    }
    repo["import"] = {
        "match": r"\b(import)\b",
        "captures": {"1": {"name": "keyword.control.import.moe"}},
    }
    repo["policy"] = {
        "match": rf"\b(policy)\b(?:\s+({IDENT}))?(?:\s+(extends)\b(?:\s+({IDENT}))?)?",
        "captures": {"1": {"name": "storage.type.policy.moe"},
                     "2": {"name": "entity.name.type.policy.moe"},
                     "3": {"name": "storage.modifier.extends.moe"},
                     "4": {"name": "entity.other.inherited-class.moe"}},
    }
    repo["block"] = {
        "comment": "a known block name opening a block",
        "match": rf"({blocks})(?=\s*\{{)",
        "captures": {"1": {"name": "entity.name.namespace.block.moe"}},
    }
    repo["section"] = {
        "comment": "the kind of a nested item followed by its head (tier hot, band layers, on demote)",
        "match": rf"({_words(section_kinds())})(?=\s+{IDENT})",
        "captures": {"1": {"name": "keyword.control.section.moe"}},
    }
    repo["qualified-param"] = {
        "comment": "block.param in an adapt action",
        "match": rf"({blocks})(\.)({params})",
        "captures": {"1": {"name": "entity.name.namespace.block.moe"},
                     "2": {"name": "punctuation.accessor.dot.moe"},
                     "3": {"name": "variable.parameter.moe"}},
    }
    repo["param"] = {
        "comment": "a known parameter name being assigned",
        "match": rf"({params})(?=\s*=(?!=))",
        "captures": {"1": {"name": "variable.parameter.moe"}},
    }
    repo["control"] = {
        "match": r"\b(when|for)\b",
        "name": "keyword.control.conditional.moe",
    }
    repo["trigger"] = {
        "match": rf"\b(trigger)\b(?:\s+({_words(trigger_names())}))?",
        "captures": {"1": {"name": "keyword.control.trigger.moe"},
                     "2": {"name": "support.function.trigger.moe"}},
    }
    repo["rebalance"] = {
        "match": rf"\b(rebalance)\b(?:\s+({_words(rebalance_names())}))?",
        "captures": {"1": {"name": "keyword.control.rebalance.moe"},
                     "2": {"name": "variable.other.enummember.moe"}},
    }
    repo["boolean"] = {
        "match": r"\b(?:true|false)\b",
        "name": "constant.language.boolean.moe",
    }
    repo["metric"] = {
        "match": _words(metric_names()),
        "name": "support.variable.metric.moe",
    }
    repo["enum"] = {
        "match": _words(enum_values()),
        "name": "variable.other.enummember.moe",
    }
    repo["number"] = {
        "comment": "a number, optionally followed by a unit (12GiB, 100 accesses, 5 ms)",
        "match": rf"({NUMBER})(?:\s*((?:{_alt(unit_names())})\b))?",
        "captures": {"1": {"name": "constant.numeric.moe"},
                     "2": {"name": "keyword.other.unit.moe"}},
    }
    repo["operator"] = {
        "patterns": [
            {"match": ops, "name": "keyword.operator.comparison.moe"},
            {"match": r"\.\.", "name": "keyword.operator.range.moe"},
            {"match": "->", "name": "keyword.operator.arrow.moe"},
            {"match": "=", "name": "keyword.operator.assignment.moe"},
            {"match": r"\|", "name": "keyword.operator.fallback.moe"},
            {"match": ":", "name": "keyword.operator.conditional.moe"},
        ],
    }
    repo["punctuation"] = {
        "patterns": [
            {"match": r"\{", "name": "punctuation.section.block.begin.moe"},
            {"match": r"\}", "name": "punctuation.section.block.end.moe"},
            {"match": r"\[", "name": "punctuation.section.brackets.begin.moe"},
            {"match": r"\]", "name": "punctuation.section.brackets.end.moe"},
            {"match": r"\(", "name": "punctuation.section.parens.begin.moe"},
            {"match": r"\)", "name": "punctuation.section.parens.end.moe"},
            {"match": ",", "name": "punctuation.separator.comma.moe"},
            {"match": ";", "name": "punctuation.terminator.statement.moe"},
            {"match": r"\.", "name": "punctuation.accessor.dot.moe"},
        ],
    }
    repo["identifier"] = {
        "comment": "any other name (an unknown block or parameter: the checker reports it)",
        "match": rf"\b{IDENT}\b",
        "name": "variable.other.moe",
    }
    order = ["comment", "string", "version", "import", "policy", "block", "section", "qualified-param",
             "param", "control", "trigger", "rebalance", "boolean", "metric", "enum",
             "number", "operator", "punctuation", "identifier"]
    assert set(order) == set(repo)
    return {
        "$schema": "https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json",
        "comment": "GENERATED by vscode-extension/scripts/gen_grammar.py from mpl/schema.py; do not edit.",
        "name": "MoE-PolicyLang",
        "scopeName": SCOPE,
        "fileTypes": [e.lstrip(".") for e in schema.FILE_EXTENSIONS],
        "patterns": [{"include": f"#{k}"} for k in order],
        "repository": repo,
    }


def grammar_scopes(grammar: dict | None = None) -> set[str]:
    """Every scope name the grammar can assign (for the coverage check)."""
    grammar = grammar or build_grammar()
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "name" and isinstance(v, str) and v.endswith(".moe"):
                    found.add(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(grammar["repository"])
    return found


# ------------------------------------------------------------------ files
def render(obj: dict) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def outputs() -> dict[Path, str]:
    return {GRAMMAR_PATH: render(build_grammar())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if a committed file differs from the generated one")
    ap.add_argument("--scopes", action="store_true", help="print every scope the grammar assigns")
    args = ap.parse_args(argv)
    if args.scopes:
        print("\n".join(sorted(grammar_scopes())))
        return 0
    stale = []
    for path, text in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is stale: run python vscode-extension/scripts/gen_grammar.py",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
