"""The colour a VS Code colour theme gives a TextMate scope stack, and the colour it gives a
semantic token (type + modifiers) of the language server, the way VS Code decides it.

Used by tests/test_vscode_grammar.py to check that the semantic tokens of the language server
colour every token as the TextMate grammar does in the default themes (test/themes/*.json are
copies of VS Code's theme-defaults, MIT; e2e/run.sh checks that they are still current).

VS Code's rules, as implemented here (src/vs/platform/theme/common/tokenClassificationRegistry.ts
and src/vs/workbench/services/themes/common/colorThemeData.ts):

- a semantic token first takes the theme's ``semanticTokenColors`` rule that matches it;
- else the TextMate scopes registered for its type (VS Code's defaults below, overridden by
  the extension's ``semanticTokenScopes`` for the language) are looked up in the theme's
  ``tokenColors``; the best-scoring selector whose scopes the theme colours wins;
- if neither gives a colour, the token keeps the TextMate grammar's colour.
"""

from __future__ import annotations

import json
from pathlib import Path

#: VS Code's built-in fallback scopes per semantic token selector (type[.modifier...]).
DEFAULT_SCOPES: dict[str, list[str]] = {
    "comment": ["comment"], "string": ["string"], "keyword": ["keyword.control"],
    "number": ["constant.numeric"], "regexp": ["constant.regexp"], "operator": ["keyword.operator"],
    "namespace": ["entity.name.namespace"], "type": ["entity.name.type", "support.type"],
    "struct": ["entity.name.type.struct"], "class": ["entity.name.type.class", "support.class"],
    "interface": ["entity.name.type.interface"], "enum": ["entity.name.type.enum"],
    "typeParameter": ["entity.name.type.parameter"],
    "function": ["entity.name.function", "support.function"],
    "method": ["entity.name.function.member", "support.function"],
    "macro": ["entity.name.function.preprocessor"],
    "variable": ["variable.other.readwrite", "entity.name.variable"],
    "parameter": ["variable.parameter"], "property": ["variable.other.property"],
    "enumMember": ["variable.other.enummember"], "event": ["variable.other.event"],
    "decorator": ["entity.name.decorator", "entity.name.function"],
    "variable.readonly": ["variable.other.constant"],
    "property.readonly": ["variable.other.constant.property"],
    "type.defaultLibrary": ["support.type"], "class.defaultLibrary": ["support.class"],
    "interface.defaultLibrary": ["support.class"],
    "variable.defaultLibrary": ["support.variable", "support.other.variable"],
    "variable.defaultLibrary.readonly": ["support.constant"],
    "property.defaultLibrary": ["support.variable.property"],
    "property.defaultLibrary.readonly": ["support.constant.property"],
    "function.defaultLibrary": ["support.function"],
}


class Theme:
    def __init__(self, path: Path) -> None:
        self.rules: list[tuple[str, dict]] = []     # (selector, settings), in theme order
        self.semantic: dict[str, object] = {}
        self.name = ""
        self._load(Path(path))

    def _load(self, path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        if "include" in data:
            self._load(path.parent / data["include"])
        self.name = data.get("name", self.name)
        for rule in data.get("tokenColors", []):
            scopes = rule.get("scope")
            if scopes is None:
                continue
            for sel in ([scopes] if isinstance(scopes, str) else scopes):
                for part in sel.split(","):
                    if part.strip():
                        self.rules.append((part.strip(), rule.get("settings", {})))
        self.semantic.update(data.get("semanticTokenColors", {}))

    # ---------------------------------------------------------------- TextMate
    def scope_color(self, stack: list[str]) -> str | None:
        """Foreground for a scope stack (outermost first), or None (the editor's default)."""
        for depth in range(len(stack) - 1, -1, -1):
            best, best_key = None, None
            for i, (sel, settings) in enumerate(self.rules):
                if "foreground" not in settings:
                    continue
                parts = sel.split()
                if not _prefix(parts[-1], stack[depth]) or not _parents(parts[:-1], stack[:depth]):
                    continue
                key = (parts[-1].count(".") + 1, len(parts), i)
                if best_key is None or key > best_key:
                    best, best_key = settings["foreground"], key
            if best is not None:
                return best.lower()
        return None

    # ---------------------------------------------------------------- semantic tokens
    def semantic_color(self, ttype: str, modifiers: list[str], language: str,
                       extension_scopes: dict[str, list[str]]) -> str | None:
        """Foreground VS Code gives a semantic token, or None (the TextMate colour stays)."""
        best, best_score = None, -1
        for sel, value in self.semantic.items():
            score = _match(sel, ttype, modifiers, language)
            fg = value if isinstance(value, str) else (value or {}).get("foreground")
            if score >= 0 and fg and score >= best_score:
                best, best_score = fg, score
        if best is not None:
            return best.lower()
        rules = [(sel, scopes) for sel, scopes in DEFAULT_SCOPES.items()]
        rules += [(f"{sel}:{language}", scopes) for sel, scopes in extension_scopes.items()]
        for sel, scopes in rules:
            score = _match(sel, ttype, modifiers, language)
            if score < 0 or score < best_score:
                continue
            for scope in scopes:
                fg = self.scope_color(scope.split())
                if fg is not None:
                    best, best_score = fg, score
                    break
        return best


def _prefix(sel: str, scope: str) -> bool:
    return scope == sel or scope.startswith(sel + ".")


def _parents(parents: list[str], outer: list[str]) -> bool:
    i = 0
    for scope in outer:
        if i < len(parents) and _prefix(parents[i], scope):
            i += 1
    return i == len(parents)


def _match(selector: str, ttype: str, modifiers: list[str], language: str) -> int:
    """VS Code's TokenSelector score: -1 when it does not match."""
    sel, _, lang = selector.partition(":")
    score = 0
    if lang:
        if lang != language:
            return -1
        score += 10
    stype, *smods = sel.split(".")
    if stype != "*":
        if stype != ttype:
            return -1
        score += 100
    if any(m not in modifiers for m in smods):
        return -1
    return score + 100 * len(smods)
