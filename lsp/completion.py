"""Completion, context-aware and working on half-typed files: what the cursor expects comes
from the forgiving token stream (:mod:`lsp.context`), the candidates and their documentation
from :mod:`mpl.schema`, policy names from this file and its imports, import paths from the
standard library and the workspace."""

from __future__ import annotations

import os

from lsprotocol import types

from mpl import schema
from mpl.stdlib_path import stdlib_names

from . import context, render
from .guard import guarded
from .tokens import NAME

K = types.CompletionItemKind
TRIGGER_CHARACTERS = ["=", " ", "\"", "/", "|", ":", "["]

#: a placeholder value for required parameters in snippets (the user overwrites it)
_PLACEHOLDER = {schema.INT: "8", schema.SLOTS_OR_SIZE: "8", schema.NUMBER: "1", schema.COUNT: "100",
                schema.BOOL: "true", schema.INT_LIST: "[0]"}


def _md(text: str) -> types.MarkupContent:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)


def _snippets_ok(ls) -> bool:
    try:
        c = ls.client_capabilities.text_document.completion.completion_item
        return bool(c and c.snippet_support)
    except AttributeError:
        return False


def _choice(values) -> str:
    return "|" + ",".join(values) + "|"


def param_line(p: schema.Param, n: int, snippets: bool) -> str:
    if p.enum:
        default = p.default if isinstance(p.default, str) else p.enum[0].name
        names = [default] + [v for v in p.enum_names() if v != default]
        value = "${%d%s}" % (n, _choice(names)) if snippets else default
    elif p.default in (schema.REQUIRED, schema.OFF, schema.DERIVED):
        ph = _PLACEHOLDER.get(p.type, "")
        value = "${%d:%s}" % (n, ph) if snippets else ph
    else:
        value = schema.format_value(p.default)
        value = "${%d:%s}" % (n, value) if snippets else value
    return f"{p.name} = {value}"


def section_snippet(x: schema.Section, snippets: bool, indent: str = "    ", first: int = 1) -> str:
    """A nested item with its head and the parameters it usually needs: ``tier NAME { ...}``,
    ``on demote(A -> B) { }``, ``band layers = a..b { tier ... }``, ``pin layers = a..b {
    experts = [...] }``."""
    n = first

    def slot(default: str, choices=None) -> str:
        nonlocal n
        if not snippets:
            return default
        out = "${%d%s}" % (n, _choice(choices) if choices else ":" + default)
        n += 1
        return out

    if x.head == schema.LABEL:
        head = f"{x.kind} {slot('name')}"
        body = []
        for p in x.params:
            if p.required:
                body.append(f"{p.name} = {slot(p.enum[0].name, p.enum_names()) if p.enum else slot('')}")
        cap = x.param("capacity")
        if cap is not None:
            body.append(f"capacity = {slot(_PLACEHOLDER[cap.type])}")
    elif x.head == schema.EDGE:
        events = [e.name for e in x.events]
        head = f"{x.kind} {slot(events[0], events)}({slot('upper')} -> {slot('lower')})"
        body = []
    else:
        sel = x.selector
        head = f"{x.kind} {sel.name} = {slot('0')}..{slot('7')}"
        body = [f"{p.name} = {slot(_PLACEHOLDER.get(p.type, ''))}" for p in x.params if p.required]
        inner = [schema.SECTIONS[k] for k in x.sections if schema.SECTIONS[k].head == schema.LABEL]
        body += [section_snippet(inner[0], snippets, indent, n)] if inner else []
    lines = "\n".join(indent + line for b in body for line in b.split("\n"))
    if not lines:
        lines = indent + ("$0" if snippets else "")
    return f"{head} {{\n{lines}\n}}"


def block_snippet(b: schema.Block, snippets: bool, indent: str = "    ") -> str:
    if b.sections and not b.flat:
        inner = section_snippet(schema.SECTIONS[b.sections[0]], snippets, indent)
        return f"{b.name} {{\n" + "\n".join(indent + line for line in inner.split("\n")) + "\n}"
    if b.rules:
        metrics = list(schema.METRICS)
        if snippets:
            body = (f"{indent}when ${{1{_choice(metrics)}}} ${{2{_choice(schema.COMPARISON_OPS)}}} ${{3:0.5}} {{\n"
                    f"{indent}{indent}$0\n{indent}}}")
        else:
            body = f"{indent}when {metrics[0]} < 0.5 {{\n{indent}}}"
        return f"{b.name} {{\n{body}\n}}"
    lines = []
    n = 1
    for p in b.params:
        if p.required:
            lines.append(indent + param_line(p, n, snippets))
            n += 1
    if not lines:
        lines.append(indent + ("$0" if snippets else ""))
    return f"{b.name} {{\n" + "\n".join(lines) + "\n}"


def policy_snippet(snippets: bool) -> str:
    indent = "    "
    name = "${1:name}" if snippets else "name"
    inner = []
    for b in schema.BLOCKS.values():
        if b.required:
            body = block_snippet(b, False, indent)
            if snippets:
                # renumber the block's placeholders after the policy name
                body = "\n".join(indent + l for l in _renumbered_block(b, indent).split("\n"))
            else:
                body = "\n".join(indent + l for l in body.split("\n"))
            inner.append(body)
    tail = f"\n{indent}$0" if snippets else ""
    return f"policy {name} {{\n" + "\n".join(inner) + tail + "\n}"


def _renumbered_block(b: schema.Block, indent: str) -> str:
    lines, n = [], 2
    for p in b.params:
        if p.required:
            lines.append(indent + param_line(p, n, True))
            n += 1
    return f"{b.name} {{\n" + "\n".join(lines) + "\n}"


_TOP_KEYWORDS = {
    "version": "`version N`: the language version of this file (supported: "
               + ", ".join(str(v) for v in schema.SUPPORTED_VERSIONS) + ").",
    "import": '`import "FILE"`: make the policies of another file visible here (a relative path, '
              'or `std/NAME` from the standard library).',
    "policy": "`policy NAME [extends PARENT] { blocks }`: a named policy; `extends` copies every block "
              "and parameter of the parent, then applies this policy's.",
}
_EXTENDS_DOC = ("`policy NAME extends PARENT { ... }`: copy every block and parameter of PARENT "
                "(defined in this file or an imported one), then apply this policy's.")


def _file_items(items: "_Items", doc, tokens) -> None:
    """What can start a statement at the top of a file, each once: ``version``, ``import``,
    ``policy``, and (as a snippet) a policy that ``extends`` another."""
    if items.snippets:
        versions = [str(v) for v in sorted(schema.SUPPORTED_VERSIONS, reverse=True)]
        items.add("version", K.Snippet, _TOP_KEYWORDS["version"], insert=f"version ${{1{_choice(versions)}}}",
                  snippet=True, detail="version N", sort="3version")
        items.add("import", K.Snippet, _TOP_KEYWORDS["import"], insert='import "${1:std/}$0"',
                  snippet=True, detail='import "..."', sort="2import")
        items.add("policy", K.Snippet, _TOP_KEYWORDS["policy"] + "\n\nA whole policy with its required blocks.",
                  insert=policy_snippet(True), snippet=True, detail="policy NAME { ... }", sort="0policy")
        parents = sorted(_policy_names(doc, tokens)) or ["parent"]
        parent = f"${{2{_choice(parents)}}}" if len(parents) > 1 else f"${{2:{parents[0]}}}"
        items.add("extends", K.Snippet, _EXTENDS_DOC, insert=f"policy ${{1:name}} extends {parent} {{\n    $0\n}}",
                  snippet=True, detail="policy NAME extends PARENT { ... }", sort="1extends")
    else:
        for kw, doc_md in _TOP_KEYWORDS.items():
            items.add(kw, K.Keyword, doc_md, sort="1" + kw)


def _next_text(tokens, offset: int) -> str | None:
    """The text of the first token starting at or after ``offset``."""
    for t in tokens:
        if t.start >= offset:
            return t.text
    return None


_OP_WORDS = {"<": "below", ">": "above", "<=": "at most", ">=": "at least", "==": "equal to",
             "!=": "different from"}


class _Items:
    def __init__(self, idx, start: int, end: int, snippets: bool) -> None:
        self.items: list[types.CompletionItem] = []
        self.range = idx.range(start, end)
        self.snippets = snippets

    def add(self, label: str, kind, doc: str | None = None, *, insert: str | None = None,
            snippet: bool = False, detail: str | None = None, sort: str | None = None,
            deprecated: bool = False) -> None:
        if snippet and not self.snippets:
            return
        text = label if insert is None else insert
        self.items.append(types.CompletionItem(
            label=label, kind=kind, detail=detail,
            documentation=_md(doc) if doc else None,
            text_edit=types.TextEdit(self.range, text),
            insert_text_format=types.InsertTextFormat.Snippet if snippet else types.InsertTextFormat.PlainText,
            sort_text=sort, tags=[types.CompletionItemTag.Deprecated] if deprecated else None,
            filter_text=label))


def _policy_names(doc, tokens) -> dict[str, str]:
    """Policy names visible here: defined in this file (from the tokens, robust to errors)
    and in the files it imports (from the last analysis)."""
    out: dict[str, str] = {}
    infos = context.classify(tokens)
    for t, info in zip(tokens, infos):
        if info.role == context.POLICY_DEF:
            out[t.text] = "this file"
    a = doc.last_analysis
    for path, d in (getattr(a, "imports", None) or {}).items():
        for p in getattr(d, "policies", []):
            if p.name is not None:
                out.setdefault(p.name.text, os.path.basename(str(path)))
    return out


def _import_candidates(ls, doc) -> list[tuple[str, str]]:
    out = [(f"std/{n}", "standard library") for n in stdlib_names()]
    here = os.path.dirname(doc.path) if doc.path else None
    for f in ls.store.workspace_files():
        if doc.path and os.path.normcase(os.path.abspath(f)) == doc.path:
            continue
        rel = os.path.relpath(f, here).replace(os.sep, "/") if here else f
        out.append((rel, "workspace file"))
    return out


def complete(ls, doc, offset: int) -> list[types.CompletionItem]:
    tokens = doc.tokens
    text = doc.text
    ctx = context.cursor_context(text, tokens, offset, doc.checkpoints)
    items = _Items(doc.index(ls.encoding), ctx.start, ctx.end, _snippets_ok(ls))
    kind = ctx.kind
    if kind == "top":
        _file_items(items, doc, tokens)
    elif kind == "after_policy_name":
        items.add("extends", K.Keyword, _EXTENDS_DOC, insert="extends ")
    elif kind == "import_path":
        for name, where in _import_candidates(ls, doc):
            items.add(name, K.File, f"{where}: `{name}`", insert=name if ctx.in_string else f'"{name}"',
                      detail=where)
    elif kind == "extends":
        for name, where in _policy_names(doc, tokens).items():
            if name != _defining_policy(tokens, ctx.start):
                items.add(name, K.Class, f"policy `{name}` ({where})", detail=where)
    elif kind == "block_name":
        present = context.blocks_in(tokens, ctx.policy_open) if ctx.policy_open >= 0 else set()
        # `NAME {` already written (renaming a block): the name alone, not a second body
        braced = _next_text(tokens, ctx.end) == "{"
        for b in schema.BLOCKS.values():
            if b.name in present and b.name != ctx.prefix:
                continue
            doc_md = render.block_markdown(b)
            if items.snippets and not braced:
                items.add(b.name, K.Snippet, doc_md, insert=block_snippet(b, True), snippet=True,
                          detail=f"{b.name} {{ ... }}", sort="0" + b.name)
            else:
                items.add(b.name, K.Module, doc_md, sort="0" + b.name)
    elif kind == "param_name":
        b = schema.container(ctx.container or "")
        if b is not None:
            already = context.params_set_in(tokens, ctx.frame_open) - {ctx.prefix}
            for p in b.params:
                if p.name in already:
                    continue
                items.add(p.name, K.Property, render.param_markdown(p), insert=f"{p.name} = ",
                          detail=f"{p.type} = {p.default_text()}")
            for k in b.sections:
                _section_items(items, schema.SECTIONS[k])
            if getattr(b, "rules", False):
                _rule_items(items)
    elif kind == "section_head":
        _head_items(items, ctx)
    elif kind == "tier_name":
        for name in _tier_names(tokens, ctx):
            items.add(name, K.Variable, f"tier `{name}`", detail="tier")
    elif kind == "call_arg":
        p = schema.find(ctx.param or "")
        if p is not None and p.weighted:
            for e in p.enum:
                if e.segment:
                    items.add(e.name, K.EnumMember, render.enum_markdown(p, e), insert=f"{e.name} = ",
                              detail=f"weight of {e.name}")
    elif kind == "rule_action":
        for name, key in schema.ADAPT_TARGETS.items():
            p = schema.PARAMS[key]
            if p.adapt_no_effect:     # accepted for the original's files, with MPL408: not offered
                continue
            alias = name in p.aliases
            items.add(name, K.Property, (f"Alias of `{key}` (the original's name).\n\n" if alias else "")
                      + render.param_markdown(p), insert=f"{name} = ", detail=key,
                      deprecated=alias, sort=("2" if alias else "1" if "." in name else "0") + name)
        items.add("trigger", K.Keyword, "Run a trigger now: " + ", ".join(schema.TRIGGERS), insert="trigger ")
        items.add("rebalance", K.Keyword, "Rebalance per-layer capacities with an allocation rule.",
                  insert="rebalance ")
    elif kind == "trigger":
        for name in schema.TRIGGERS:
            items.add(name, K.Event, render.trigger_markdown(name))
    elif kind == "value":
        _value_items(items, ctx)
    elif kind == "metric":
        for m in schema.METRICS.values():
            items.add(m.name, K.Variable, render.metric_markdown(m))
    elif kind == "op":
        for op in schema.COMPARISON_OPS:
            items.add(op, K.Operator, f"`METRIC {op} NUMBER`: {_OP_WORDS.get(op, op)} the threshold")
    elif kind == "unit":
        p = schema.find(ctx.param or "")
        names = p.units if p is not None and p.units else tuple(schema.UNITS)
        for u in names:
            items.add(u, K.Unit, render.unit_markdown(schema.UNITS[u]))
    elif kind == "duration_unit":
        for u in schema.RULE_DURATION_UNITS:
            items.add(u, K.Unit, render.unit_markdown(schema.UNITS[u]))
    elif kind == "after_value":
        p = schema.find(ctx.param or "")
        if p is not None and p.conditional:
            items.add("when", K.Keyword, "Conditional value: `a : b when METRIC OP NUMBER`.")
    return items.items


def _section_items(items: _Items, x: schema.Section) -> None:
    """A nested item a block or an item holds (``tier``, ``on``, ``band``)."""
    md = render.section_markdown(x)
    items.add(x.kind, K.Keyword, md, insert=f"{x.kind} ", detail=x.syntax, sort="1" + x.kind)
    items.add(x.kind, K.Snippet, md, insert=section_snippet(x, True), snippet=True, detail=x.syntax,
              sort="1" + x.kind)


def _head_items(items: _Items, ctx: context.Context) -> None:
    """After a nested item's kind: a transition's events, a band's `layers =`."""
    x = schema.SECTIONS.get(ctx.section or "")
    if x is None:
        return
    if x.head == schema.EDGE:
        for e in x.events:
            items.add(e.name, K.EnumMember, f"**{e.name}**: {e.doc}", insert=f"{e.name}(",
                      detail=x.syntax)
    elif x.head == schema.SELECTOR:
        items.add(x.selector.name, K.Property, render.param_markdown(x.selector),
                  insert=f"{x.selector.name} = ", detail=x.syntax)


def _tier_names(tokens, ctx: context.Context) -> list[str]:
    """The tiers a transition can name: those defined in this policy (its hierarchy and
    bands), in order, each once."""
    lo = ctx.policy_open if ctx.policy_open >= 0 else 0
    hi = context.frame_end(tokens, lo) if ctx.policy_open >= 0 else len(tokens)
    infos = context.classify(tokens[:hi])
    out: list[str] = []
    for t, info in zip(tokens[lo:hi], infos[lo:hi]):
        if info.role == context.LABEL_R and info.container in ("hierarchy", "band") \
                and t.text not in out and t.text != ctx.prefix:
            out.append(t.text)
    return out


def _rule_items(items: _Items) -> None:
    """The adapt rule, offered once: the whole rule as a snippet where the client takes
    snippets, else the keyword (one label with two items would list `when` twice)."""
    doc = "An adapt rule: `when METRIC OP NUMBER [for N accesses] { actions }`."
    if items.snippets:
        metrics = list(schema.METRICS)
        items.add("when", K.Snippet, doc, snippet=True, detail="when ... { ... }",
                  insert=f"when ${{1{_choice(metrics)}}} ${{2{_choice(schema.COMPARISON_OPS)}}} ${{3:0.5}} {{\n    $0\n}}")
    else:
        items.add("when", K.Keyword, doc, insert="when ")


def _value_items(items: _Items, ctx: context.Context) -> None:
    p = schema.find(ctx.param or "")
    if p is None:
        return
    if p.weighted:
        singles = [e.name for e in p.enum if e.segment]
        doc = f"`{schema.WEIGHTED_SUM}(...)`: {schema.WEIGHTED_SUM_DOC}."
        items.add(schema.WEIGHTED_SUM, K.Function, doc, detail=f"{p.key}",
                  insert=f"{schema.WEIGHTED_SUM}({singles[0]} = 0.5, {singles[1]} = 0.5)")
        items.add(schema.WEIGHTED_SUM, K.Snippet, doc, snippet=True, detail=f"{p.key}",
                  insert=f"{schema.WEIGHTED_SUM}(${{1{_choice(singles)}}} = ${{2:0.5}}, "
                         f"${{3{_choice(singles[1:] + singles[:1])}}} = ${{4:0.5}})")
    if p.enum:
        for e in p.enum:
            if ctx.after_pipe and not e.segment:   # a side of `a | b`: single-queue rules only
                continue
            items.add(e.name, K.EnumMember, render.enum_markdown(p, e),
                      detail="replay only" if e.replay_only else p.key)
    elif p.type == schema.BOOL:
        for v in ("true", "false"):
            items.add(v, K.Value, f"`{p.key}`: {p.doc}")
    elif p.type == schema.METRIC_LIST:
        if ctx.in_list:
            for m in schema.METRICS.values():
                items.add(m.name, K.Variable, render.metric_markdown(m))
        else:
            items.add("[...]", K.Value, "A list of metric names.", insert="[" + ", ".join(
                schema.format_value(x) for x in p.default) + "]")
    elif p.default not in (schema.REQUIRED, schema.OFF, schema.DERIVED) and not ctx.in_list:
        d = schema.format_value(p.default)
        items.add(d, K.Value, f"The default of `{p.key}`.", detail="default")


def _defining_policy(tokens, offset: int) -> str | None:
    """The name after the last `policy` before ``offset`` (a policy cannot extend itself)."""
    name, prev = None, None
    for t in tokens:
        if t.start >= offset:
            break
        if prev is not None and prev.text == "policy" and t.kind == NAME:
            name = t.text
        prev = t
    return name


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False))
    @guarded(default=lambda: types.CompletionList(is_incomplete=False, items=[]))
    def completion(ls, params: types.CompletionParams):
        doc = ls.store.get(params.text_document.uri)
        if doc is None:
            return types.CompletionList(is_incomplete=False, items=[])
        offset = doc.index(ls.encoding).offset(params.position)
        return types.CompletionList(is_incomplete=False, items=complete(ls, doc, offset))
