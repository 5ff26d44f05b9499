"""Typed AST of a .moe file. Every node carries a :class:`~mpl.diagnostics.Span`.

The parser builds these nodes even for broken input: parts it could not understand become
:class:`ErrorNode` items (or ``None`` fields), so the checker, the formatter and the language
server can work on half-typed files. Nodes are plain mutable dataclasses (the parser fills
them in incrementally); treat them as read-only after parsing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from mpl.diagnostics import Span


@dataclass(eq=False)
class Node:
    span: Span


@dataclass(eq=False)
class Name(Node):
    text: str


@dataclass(eq=False)
class Comment(Node):
    text: str                 # including the leading '#'


@dataclass(eq=False)
class ErrorNode(Node):
    """Text the parser skipped while recovering. ``text`` is the raw source covered."""
    text: str = ""


# ------------------------------------------------------------------ values
@dataclass(eq=False)
class Number(Node):
    value: int | float        # int when the literal has no '.' or exponent
    text: str                 # the literal as written (without the unit)
    unit: Name | None = None  # e.g. GiB, accesses; not checked by the parser


@dataclass(eq=False)
class Ident(Node):
    """A bare NAME used as a value (enum value, metric name)."""
    name: str


@dataclass(eq=False)
class Bool(Node):
    value: bool


@dataclass(eq=False)
class String(Node):
    value: str                # unescaped
    text: str                 # as written, with quotes


@dataclass(eq=False)
class ListValue(Node):
    items: list["Value"] = field(default_factory=list)


@dataclass(eq=False)
class Range(Node):
    """``a..b`` (both ends inclusive, e.g. a band's layers)."""
    start: Number
    end: Number | None        # None when missing after '..' (an error was reported)


@dataclass(eq=False)
class Indexed(Node):
    """A name glued to ``:`` and an integer: a device such as ``gpu:1``."""
    name: str
    index: int
    text: str                 # as written


@dataclass(eq=False)
class Arg(Node):
    """``NAME = value``, one argument of a :class:`Call`."""
    name: Name
    value: "Value | None"     # None when missing after '='


@dataclass(eq=False)
class Call(Node):
    """A call-like value: ``weighted_sum(lru = 0.5, lfu = 0.5)``."""
    name: Name
    args: list[Union[Arg, ErrorNode]] = field(default_factory=list)
    closed: bool = True       # False when the closing ')' is missing


Value = Union[Number, Ident, Bool, String, ListValue, Range, Indexed, Call]


@dataclass(eq=False)
class Condition(Node):
    metric: Name | None
    op: str | None            # one of schema.COMPARISON_OPS
    op_span: Span | None
    threshold: Number | None


@dataclass(eq=False)
class Expr(Node):
    """``value ("|" value)? (":" value "when" cond)?``"""
    value: Value | None
    fallback: Value | None = None           # the right side of `a | b`
    alternative: Value | None = None        # the `b` of `a : b when cond`
    condition: Condition | None = None


# ------------------------------------------------------------------ block content
@dataclass(eq=False)
class Param(Node):
    name: Name
    value: Expr | None        # None when missing after '=' (an error was reported)


@dataclass(eq=False)
class SetAction(Node):
    """``NAME ("." NAME)? = value``; ``target`` is the dotted text, e.g. ``cache.capacity``."""
    target: Name              # Name.text may contain one '.'
    value: Value | None


@dataclass(eq=False)
class TriggerAction(Node):
    name: Name | None


@dataclass(eq=False)
class RebalanceAction(Node):
    name: Name | None


Action = Union[SetAction, TriggerAction, RebalanceAction]


@dataclass(eq=False)
class Rule(Node):
    """``when cond ("for" INT UNIT)? { action* }``"""
    condition: Condition | None
    duration: Number | None = None          # with its unit (accesses, steps, tokens)
    actions: list[Union[Action, ErrorNode]] = field(default_factory=list)
    closed: bool = True                     # False when the closing brace is missing


@dataclass(eq=False)
class Edge(Node):
    """The head of a transition: ``demote(hot -> warm)``."""
    event: Name | None
    source: Name | None = None
    target: Name | None = None


class _Items:
    """The item views of a block or a section."""

    @property
    def params(self) -> list[Param]:
        return [i for i in self.items if isinstance(i, Param)]

    @property
    def rules(self) -> list[Rule]:
        return [i for i in self.items if isinstance(i, Rule)]

    @property
    def sections(self) -> list["Section"]:
        return [i for i in self.items if isinstance(i, Section)]


@dataclass(eq=False)
class Section(_Items, Node):
    """A nested item of a block: ``KIND head { items }``. The kind is a name checked against
    the schema (``tier``, ``band``, ``on``); the head is a label (``tier hot``: a
    :class:`Name`), a selector (``band layers = 0..7``: a :class:`Param`) or an edge
    (``on demote(hot -> warm)``: an :class:`Edge`), ``None`` when missing."""
    kind: Name
    head: Union[Name, Param, Edge, None] = None
    items: list[Union[Param, Rule, "Section", ErrorNode]] = field(default_factory=list)
    closed: bool = True

    @property
    def label(self) -> str | None:
        """The name of a labelled section (``tier hot`` -> ``hot``)."""
        return self.head.text if isinstance(self.head, Name) else None


@dataclass(eq=False)
class Block(_Items, Node):
    name: Name
    items: list[Union[Param, Rule, Section, ErrorNode]] = field(default_factory=list)
    closed: bool = True


# ------------------------------------------------------------------ top level
@dataclass(eq=False)
class Version(Node):
    number: Number | None


@dataclass(eq=False)
class Import(Node):
    path: String | None


@dataclass(eq=False)
class Policy(Node):
    name: Name | None
    parent: Name | None = None              # after `extends`
    blocks: list[Union[Block, ErrorNode]] = field(default_factory=list)
    closed: bool = True

    def block(self, name: str) -> Block | None:
        """The first block with this name."""
        for b in self.blocks:
            if isinstance(b, Block) and b.name.text == name:
                return b
        return None


TopLevel = Union[Version, Import, Policy, ErrorNode]


@dataclass(eq=False)
class Document(Node):
    items: list[TopLevel] = field(default_factory=list)   # in source order
    comments: list[Comment] = field(default_factory=list)  # every comment, in source order
    text: str = ""
    path: str | None = None

    @property
    def version(self) -> Version | None:
        for i in self.items:
            if isinstance(i, Version):
                return i
        return None

    @property
    def imports(self) -> list[Import]:
        return [i for i in self.items if isinstance(i, Import)]

    @property
    def policies(self) -> list[Policy]:
        return [i for i in self.items if isinstance(i, Policy)]

    @property
    def errors(self) -> list[ErrorNode]:
        return [i for i in self.items if isinstance(i, ErrorNode)]


def walk(node):
    """Yield ``node`` and every node below it, depth first, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        yield n
        children = []
        if isinstance(n, Document):
            children = n.items
        elif isinstance(n, Policy):
            children = [n.name, n.parent, *n.blocks]
        elif isinstance(n, Block):
            children = [n.name, *n.items]
        elif isinstance(n, Section):
            children = [n.kind, n.head, *n.items]
        elif isinstance(n, Edge):
            children = [n.event, n.source, n.target]
        elif isinstance(n, Range):
            children = [n.start, n.end]
        elif isinstance(n, Call):
            children = [n.name, *n.args]
        elif isinstance(n, Arg):
            children = [n.name, n.value]
        elif isinstance(n, Param):
            children = [n.name, n.value]
        elif isinstance(n, Expr):
            children = [n.value, n.fallback, n.alternative, n.condition]
        elif isinstance(n, Condition):
            children = [n.metric, n.threshold]
        elif isinstance(n, Rule):
            children = [n.condition, n.duration, *n.actions]
        elif isinstance(n, SetAction):
            children = [n.target, n.value]
        elif isinstance(n, (TriggerAction, RebalanceAction)):
            children = [n.name]
        elif isinstance(n, ListValue):
            children = n.items
        elif isinstance(n, Number):
            children = [n.unit]
        elif isinstance(n, Version):
            children = [n.number]
        elif isinstance(n, Import):
            children = [n.path]
        stack.extend(reversed([c for c in children if c is not None]))
