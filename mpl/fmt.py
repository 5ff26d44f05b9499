"""The canonical formatter: ``format_text(text) -> str``.

Layout
------
* ``version`` first, then ``import``s, then the policies in source order; one blank line
  between these groups and between two policies.
* Blocks in schema order (:data:`mpl.schema.BLOCK_ORDER`), unknown blocks after the known
  ones in source order; parameters in schema order within a block, unknown parameters after
  the known ones in source order; rules after the parameters, in source order (their order
  is meaningful). Duplicates keep their source order (the checker reports them).
* Nested items (``tier``, ``on``, ``band``): in a block or section that holds them
  (``hierarchy``, ``band``) they come first, by kind in the schema's order (tiers, then
  transitions), each kind in source order (the tiers' order is their meaning), then the
  parameters; in the cache block its per-layer pins (``pin layers = ...``) come after its
  parameters, in source order; a tier's or a transition's parameters in schema order. Heads are written
  ``tier hot``, ``band layers = 0..7``, ``on demote(hot -> warm)``; values
  ``weighted_sum(lru = 0.5, lfu = 0.5)``, ``gpu:1``, ``0..7``.
* 4-space indent, one item per line, every block and rule expanded (``name {`` ... ``}``), an
  empty one written ``name {}``. ``name = value``, single spaces around ``=``, ``|``, ``:``
  and comparison operators, ``[a, b]`` lists, no ``;``.
* Number literals exactly as written (``0.90`` stays ``0.90``). A size unit is glued to its
  number (``12GiB``), any other known unit follows after one space (``100 accesses``,
  ``25 ms``); an unknown unit stays glued (``12GiG``: with a space it would be the next token).

Comments
--------
Every comment is kept, with its text unchanged. A comment on a line of its own belongs to the
item after it and moves with it when the items are reordered (a blank line after it in the
source is kept); comments before a closing ``}`` stay at the end of that block, rule or
policy; comments at the end of the file stay there. A comment after code on the same line
stays at the end of the output line of the item that code belongs to; when two such comments
end up on one output line (an item written over several source lines), the later ones go on
their own lines just before it.

The result parses to the same AST up to order and spans, and formatting is idempotent.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from mpl import schema
from mpl.diagnostics import Diagnostic, has_errors
from mpl.syntax import ast, parse
from mpl.syntax.lexer import tokenize

INDENT = "    "
_SPACE_RE = re.compile(r"[ \t\r\f\v\n]*")
_LONE_CR_RE = re.compile(r"\r(?!\n)")


class FormatError(Exception):
    """The text has syntax errors; ``diagnostics`` says which."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        first = next((d for d in self.diagnostics if d.is_error), None)
        where = f" (line {first.span.line}: {first.message})" if first else ""
        super().__init__(f"cannot format a file with syntax errors{where}")


def format_text(text: str) -> str:
    """The canonical layout of ``text``; raises :class:`FormatError` on syntax errors."""
    # a lone '\r' (old Mac files) ends a line as '\n' does; the same length, so every span
    # of the diagnostics is the same
    text = _LONE_CR_RE.sub("\n", text)
    result = parse(text)
    if has_errors(result.diagnostics):
        raise FormatError(result.diagnostics)
    return _Formatter(text, result.document).run()


# ------------------------------------------------------------------ values
def format_number(n: ast.Number) -> str:
    if n.unit is None:
        return n.text
    unit = schema.UNITS.get(n.unit.text)
    if unit is None or unit.kind == "size":
        return n.text + n.unit.text
    return f"{n.text} {n.unit.text}"


def format_value(v) -> str:
    if isinstance(v, ast.Number):
        return format_number(v)
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.Bool):
        return "true" if v.value else "false"
    if isinstance(v, ast.String):
        return v.text
    if isinstance(v, ast.ListValue):
        return "[" + ", ".join(format_value(x) for x in v.items) + "]"
    if isinstance(v, ast.Range):
        return f"{format_number(v.start)}..{format_number(v.end)}"
    if isinstance(v, ast.Indexed):
        return v.text
    if isinstance(v, ast.Call):
        args = ", ".join(f"{a.name.text} = {format_value(a.value)}" for a in v.args)
        return f"{v.name.text}({args})"
    raise TypeError(f"not a value: {v!r}")


def format_head(sec: ast.Section) -> str:
    """``tier hot``, ``band layers = 0..7``, ``on demote(hot -> warm)``."""
    h = sec.head
    if isinstance(h, ast.Name):
        return f"{sec.kind.text} {h.text}"
    if isinstance(h, ast.Param):
        return f"{sec.kind.text} {h.name.text} = {format_expr(h.value)}"
    return f"{sec.kind.text} {h.event.text}({h.source.text} -> {h.target.text})"


def format_condition(c: ast.Condition) -> str:
    return f"{c.metric.text} {c.op} {format_number(c.threshold)}"


def format_expr(e: ast.Expr) -> str:
    out = format_value(e.value)
    if e.fallback is not None:
        out += " | " + format_value(e.fallback)
    if e.alternative is not None:
        out += f" : {format_value(e.alternative)} when {format_condition(e.condition)}"
    return out


def format_action(a) -> str:
    if isinstance(a, ast.SetAction):
        return f"{a.target.text} = {format_value(a.value)}"
    if isinstance(a, ast.TriggerAction):
        return f"trigger {a.name.text}"
    return f"rebalance {a.name.text}"


# ------------------------------------------------------------------ ordering
def block_key(block: ast.Block, index: int):
    order = schema.BLOCK_ORDER
    name = block.name.text
    return (order.index(name) if name in order else len(order), index)


def param_key(block_name: str, param: ast.Param, index: int):
    spec = schema.container(block_name)
    names = spec.param_names() if spec else ()
    name = param.name.text
    return (names.index(name) if name in names else len(names), index)


def section_key(container: str, sec: ast.Section, index: int):
    spec = schema.container(container)
    kinds = spec.sections if spec else ()
    kind = sec.kind.text
    return (kinds.index(kind) if kind in kinds else len(kinds), index)


def ordered_blocks(policy: ast.Policy) -> list[ast.Block]:
    blocks = [b for b in policy.blocks if isinstance(b, ast.Block)]
    return [b for _, b in sorted(((block_key(b, i), b) for i, b in enumerate(blocks)),
                                 key=lambda kb: kb[0])]


def ordered_items(block) -> list:
    """The items of a block or a section in canonical order: a container of nested items
    (hierarchy, band) has them first, by kind in the schema's order (tiers keep their order:
    it is the tiers' order), then its parameters, unless the schema writes them after its
    parameters (the cache's pins: ``Block.sections_first``); elsewhere parameters, rules, then
    any nested item (misplaced: the checker reports it)."""
    params = [p for p in block.items if isinstance(p, ast.Param)]
    rules = [r for r in block.items if isinstance(r, ast.Rule)]
    sections = [x for x in block.items if isinstance(x, ast.Section)]
    name = block.name.text if isinstance(block, ast.Block) else block.kind.text
    params = [p for _, p in sorted(((param_key(name, p, i), p) for i, p in enumerate(params)),
                                   key=lambda kp: kp[0])]
    sections = [x for _, x in sorted(((section_key(name, x, i), x) for i, x in enumerate(sections)),
                                     key=lambda kx: kx[0])]
    spec = schema.container(name)
    if spec is not None and spec.sections and getattr(spec, "sections_first", True):
        return sections + params + rules
    return params + rules + sections


# ------------------------------------------------------------------ the formatter
class _Formatter:
    def __init__(self, text: str, doc: ast.Document) -> None:
        self.text = text
        self.doc = doc
        toks = [t for t in tokenize(text).tokens]
        self.tok_starts = [t.start_pos for t in toks]
        self.tok_ends = [t.end_pos for t in toks]
        self.toks = toks
        # output lines owning source text: (start offset, key); sorted by start
        self.owners: list[tuple[int, tuple]] = []
        self.leading: dict[tuple, list[ast.Comment]] = {}
        self.trailing: dict[tuple, ast.Comment] = {}
        self.file_end: list[ast.Comment] = []
        self.out: list[str] = []

    # ---- ownership of source text by output lines
    def collect_owners(self) -> None:
        own = self.owners.append
        for item in self.doc.items:
            if isinstance(item, (ast.Version, ast.Import)):
                own((item.span.offset, ("item", id(item))))
            elif isinstance(item, ast.Policy):
                self.own_container(item)
                for block in item.blocks:
                    self.own_items(block)
        self.owners.sort(key=lambda o: o[0])
        self.owner_starts = [o[0] for o in self.owners]

    def own_items(self, node) -> None:
        """A block or a section: its header, its items (nested ones too), its '}'."""
        own = self.owners.append
        stack = [node]
        while stack:
            n = stack.pop()
            self.own_container(n)
            for x in n.items:
                if isinstance(x, ast.Param):
                    own((x.span.offset, ("item", id(x))))
                elif isinstance(x, ast.Rule):
                    self.own_container(x)
                    for a in x.actions:
                        own((a.span.offset, ("item", id(a))))
                elif isinstance(x, ast.Section):
                    stack.append(x)

    def own_container(self, node) -> None:
        """The header line owns the text up to the body; the closing line owns the '}'."""
        self.owners.append((node.span.offset, ("open", id(node))))
        self.owners.append((node.span.end_offset - 1, ("close", id(node))))

    def owner_of(self, offset: int) -> tuple | None:
        i = bisect_right(self.owner_starts, offset) - 1
        return self.owners[i][1] if i >= 0 else None

    # ---- comments
    def attach_comments(self) -> None:
        text = self.text
        for c in self.doc.comments:
            line_start = text.rfind("\n", 0, c.span.offset) + 1
            own_line = text[line_start:c.span.offset].strip() == ""
            if not own_line:
                # the last token before the comment decides the output line
                i = bisect_right(self.tok_ends, c.span.offset) - 1
                key = self.owner_of(self.toks[i].start_pos) if i >= 0 else None
                if key is not None:
                    if key in self.trailing:
                        self.leading.setdefault(key, []).append(c)
                    else:
                        self.trailing[key] = c
                    continue
            # own line: the item after it (skipping ';')
            i = bisect_right(self.tok_starts, c.span.offset)
            while i < len(self.toks) and self.toks[i].type == "_SEMI":
                i += 1
            if i >= len(self.toks):
                self.file_end.append(c)
                continue
            key = self.owner_of(self.toks[i].start_pos)
            if key is None:
                self.file_end.append(c)
            else:
                self.leading.setdefault(key, []).append(c)

    def split_header(self) -> list[ast.Comment]:
        """Comments before the first token, up to the last one followed by a blank line:
        the file's header, which stays at the top whatever moves."""
        if not self.toks:
            return []
        key = self.owner_of(self.toks[0].start_pos)
        first = self.toks[0].start_pos
        group = [c for c in self.leading.get(key, ()) if c.span.offset < first]
        cut = max((k + 1 for k, c in enumerate(group) if self.blank_after(c)), default=0)
        if cut:
            self.leading[key] = self.leading[key][cut:]
        return group[:cut]

    def blank_after(self, c: ast.Comment) -> bool:
        """A blank line follows the comment (and something follows the blank line)."""
        gap = _SPACE_RE.match(self.text, c.span.end_offset)
        return gap.end() < len(self.text) and self.text.count("\n", gap.start(), gap.end()) >= 2

    # ---- output
    def emit(self, key: tuple, depth: int, line: str, comment_depth: int | None = None) -> None:
        """One output line, after its own-line comments, with its trailing comment.

        ``comment_depth``: indentation of the leading comments when it differs from the
        line's (the comments at the end of a block sit inside it, before its ``}``)."""
        indent = INDENT * depth
        cindent = INDENT * (depth if comment_depth is None else comment_depth)
        comments = self.leading.get(key, ())
        for k, c in enumerate(comments):
            self.out.append(cindent + c.text)
            last = k == len(comments) - 1
            if self.blank_after(c) and not (last and comment_depth is not None):
                self.out.append("")
        trailing = self.trailing.get(key)
        if trailing is not None:
            line = f"{line}  {trailing.text}"
        self.out.append(indent + line)

    def emit_container(self, node, depth: int, header: str, children) -> None:
        """``header {`` children ``}``, or ``header {}`` when empty and comment-free."""
        open_key, close_key = ("open", id(node)), ("close", id(node))
        if not children and not self.leading.get(close_key):
            if close_key in self.trailing and open_key not in self.trailing:
                self.trailing[open_key] = self.trailing.pop(close_key)  # `name {}  # c`
            if close_key not in self.trailing:
                self.emit(open_key, depth, header + " {}")
                return
        self.emit(open_key, depth, header + " {")
        for child in children:
            child()
        self.emit(close_key, depth, "}", comment_depth=depth + 1)

    def run(self) -> str:
        self.collect_owners()
        self.attach_comments()
        header = self.split_header()
        for c in header:
            self.out.append(c.text)
            if c is not header[-1] and self.blank_after(c):
                self.out.append("")
        if header:
            self.out.append("")
        doc = self.doc
        versions = [i for i in doc.items if isinstance(i, ast.Version)]
        imports = [i for i in doc.items if isinstance(i, ast.Import)]
        policies = [i for i in doc.items if isinstance(i, ast.Policy)]
        groups = []
        if versions:
            groups.append([lambda v=v: self.emit(("item", id(v)), 0, f"version {format_number(v.number)}")
                           for v in versions])
        if imports:
            groups.append([lambda i=i: self.emit(("item", id(i)), 0, f"import {i.path.text}")
                           for i in imports])
        for p in policies:
            groups.append([lambda p=p: self.emit_policy(p)])
        for gi, group in enumerate(groups):
            if gi:
                self.out.append("")
            for g in group:
                g()
        if self.file_end:
            if self.out:
                self.out.append("")
            self.out.extend(c.text for c in self.file_end)
        return "\n".join(self.out) + "\n" if self.out else ""

    def emit_policy(self, p: ast.Policy) -> None:
        header = f"policy {p.name.text}"
        if p.parent is not None:
            header += f" extends {p.parent.text}"
        self.emit_container(p, 0, header, [lambda b=b: self.emit_block(b, 1) for b in ordered_blocks(p)])

    def emit_block(self, b, depth: int) -> None:
        """A block or a section (``header { items }``)."""
        children = []
        for item in ordered_items(b):
            if isinstance(item, ast.Param):
                children.append(lambda x=item: self.emit(
                    ("item", id(x)), depth + 1, f"{x.name.text} = {format_expr(x.value)}"))
            elif isinstance(item, ast.Section):
                children.append(lambda x=item: self.emit_block(x, depth + 1))
            else:
                children.append(lambda r=item: self.emit_rule(r, depth + 1))
        header = b.name.text if isinstance(b, ast.Block) else format_head(b)
        self.emit_container(b, depth, header, children)

    def emit_rule(self, r: ast.Rule, depth: int) -> None:
        header = f"when {format_condition(r.condition)}"
        if r.duration is not None:
            header += f" for {format_number(r.duration)}"
        children = [lambda a=a: self.emit(("item", id(a)), depth + 1, format_action(a)) for a in r.actions]
        self.emit_container(r, depth, header, children)
