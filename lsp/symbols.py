"""Document symbols (the outline): policies > blocks > parameters, adapt rules and nested
items (tiers, bands, transitions, with their own parameters as children), from the parser's
AST (which exists for broken files too)."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema
from mpl.syntax import ast

from . import analysis
from .guard import guarded

S = types.SymbolKind


def _sym(idx, name: str, kind, node_span, sel_span, detail: str | None = None, children=None):
    # the selection range must lie inside the range: cover both
    ns, ne = idx.span_offsets(node_span)
    ss, se = idx.span_offsets(sel_span)
    return types.DocumentSymbol(name=name or "?", kind=kind, range=idx.range(min(ns, ss), max(ne, se)),
                                selection_range=idx.range(ss, se), detail=detail, children=children or None)


def _text(doc, node, idx) -> str:
    s, e = idx.span_offsets(node.span)
    return " ".join(doc.text[s:e].split())


def _rule_name(doc, rule: ast.Rule, idx) -> str:
    if rule.condition is not None:
        return "when " + _text(doc, rule.condition, idx)
    return "when ..."


#: the outline kind of a nested item, by its head (a tier, a band, a transition)
_SECTION_KIND = {"label": S.Object, "selector": S.Namespace, "edge": S.Event}


def _items(doc, node, idx) -> list:
    """The outline of a block's or a nested item's items (nested items as children)."""
    items = []
    for it in node.items:
        if isinstance(it, ast.Param):
            detail = _text(doc, it.value, idx) if it.value is not None else None
            items.append(_sym(idx, it.name.text, S.Property, it.span, it.name.span, detail))
        elif isinstance(it, ast.Section):
            head = it.head.span if it.head is not None else it.kind.span
            name = _text(doc, it, idx) if it.head is None else (
                f"{it.kind.text} {_text(doc, it.head, idx)}")
            form = (schema.LABEL if isinstance(it.head, ast.Name) else
                    schema.SELECTOR if isinstance(it.head, ast.Param) else schema.EDGE)
            items.append(_sym(idx, name if it.head is not None else it.kind.text,
                              _SECTION_KIND[form], it.span, head, None, _items(doc, it, idx)))
        elif isinstance(it, ast.Rule):
            acts = []
            for a in it.actions:
                if isinstance(a, ast.SetAction):
                    acts.append(_sym(idx, a.target.text, S.Field, a.span, a.target.span,
                                     _text(doc, a.value, idx) if a.value is not None else None))
                elif isinstance(a, (ast.TriggerAction, ast.RebalanceAction)):
                    acts.append(_sym(idx, _text(doc, a, idx), S.Function, a.span, a.span))
            head = it.condition.span if it.condition is not None else it.span
            items.append(_sym(idx, _rule_name(doc, it, idx), S.Event, it.span, head, None, acts))
    return items


def document_symbols(store, doc, encoding) -> list[types.DocumentSymbol]:
    idx = doc.index(encoding)
    tree = analysis.document(store, doc)
    out = []
    for pol in tree.policies:
        blocks = []
        for b in pol.blocks:
            if not isinstance(b, ast.Block):
                continue
            blocks.append(_sym(idx, b.name.text, S.Module, b.span, b.name.span, None, _items(doc, b, idx)))
        name_span = pol.name.span if pol.name is not None else pol.span
        detail = f"extends {pol.parent.text}" if pol.parent is not None else None
        out.append(_sym(idx, pol.name.text if pol.name else "policy", S.Class, pol.span, name_span,
                        detail, blocks))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @guarded(default=list)
    def symbols(ls, params: types.DocumentSymbolParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else document_symbols(ls.store, doc, ls.encoding)
