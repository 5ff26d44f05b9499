"""The normative LALR(1) parser: Lark's parse table of ``grammar.lark``, driven here.

The table is Lark's analysis of the grammar, shipped as plain data in ``_tables.py`` (see
:mod:`mpl.syntax.tablegen`), so parsing imports neither Lark nor spends 70-100 ms building
tables. When the shipped table does not match ``grammar.lark`` (an edited checkout), it is
rebuilt with Lark once per process, in memory.

The driver is Lark's own LALR loop (shift, reduce by a rule, goto) with the reductions
calling :class:`AstBuilder`, which builds the typed AST directly (no parse tree). Children
of Lark's helper rules (``x*``) are spliced into their parent and ``_``-terminals (``;``)
dropped, as Lark's tree builder does. A syntax error raises :class:`SyntaxFailure`;
:mod:`mpl.syntax.recover` then parses the file again with recovery.
"""

from __future__ import annotations

from mpl.diagnostics import Span
from mpl.syntax import ast
from mpl.syntax.lexer import Token, cover as _cover, name_text, number_value, tok_span, unescape

END_TYPE = "$END"


class SyntaxFailure(Exception):
    """The tokens are not a valid file (the recovering parser reports why)."""

    def __init__(self, token: Token | None) -> None:
        super().__init__(token)
        self.token = token


def _span_of(x) -> Span:
    return tok_span(x) if isinstance(x, Token) else x.span


def make_number(num: Token, unit: Token | None) -> ast.Number:
    """A Number node from its NUMBER token and optional UNIT token."""
    value = number_value(num.value)
    if value is None:  # the lexer never emits such a NUMBER; keep the AST well-typed anyway
        value = 0
    if unit is None:
        return ast.Number(tok_span(num), value, num.value, None)
    return ast.Number(tok_span(num, unit), value, num.value, ast.Name(tok_span(unit), unit.value))


def make_string(t: Token) -> ast.String:
    body = t.value[1:-1] if len(t.value) >= 2 and t.value.endswith('"') else t.value[1:]
    return ast.String(tok_span(t), unescape(body), t.value)


def make_indexed(t: Token) -> ast.Indexed:
    """An Indexed node from its INDEXED token (``gpu:1``)."""
    name, _, index = t.value.partition(":")
    return ast.Indexed(tok_span(t), name, int(index), t.value)


def make_name(t: Token) -> ast.Name:
    return ast.Name(tok_span(t), name_text(t.value))


class AstBuilder:
    """Rule callbacks (by rule name or alias): children are Tokens and AST nodes."""

    def start(self, c):
        return c

    def version(self, c):
        return ast.Version(tok_span(c[0], c[1]), make_number(c[1], None))

    def import_stmt(self, c):
        return ast.Import(tok_span(c[0], c[1]), make_string(c[1]))

    def policy(self, c):
        # POLICY NAME (EXTENDS NAME)? LBRACE block* RBRACE
        parent = None
        i = 3
        if c[2].type == "EXTENDS":
            parent = make_name(c[3])
            i = 5
        return ast.Policy(tok_span(c[0], c[-1]), make_name(c[1]), parent, list(c[i:-1]), True)

    def block(self, c):
        return ast.Block(tok_span(c[0], c[-1]), make_name(c[0]), list(c[2:-1]), True)

    def section(self, c):
        # NAME head LBRACE item* RBRACE; head: NAME | NAME EQ value | NAME ( NAME -> NAME )
        kind, first = c[0], c[1]
        nxt = c[2]
        if nxt.type == "EQ":
            value = c[3]
            head = ast.Param(_cover(tok_span(first), value.span), make_name(first),
                             ast.Expr(value.span, value))
            i = 4
        elif nxt.type == "LPAREN":
            head = ast.Edge(tok_span(first, c[6]), make_name(first), make_name(c[3]), make_name(c[5]))
            i = 7
        else:
            head = make_name(first)
            i = 2
        return ast.Section(tok_span(kind, c[-1]), make_name(kind), head, list(c[i + 1:-1]), True)

    def param(self, c):
        expr = c[2]
        return ast.Param(_cover(tok_span(c[0]), expr.span), make_name(c[0]), expr)

    def expr(self, c):
        value = c[0]
        fallback = alternative = condition = None
        i = 1
        if i < len(c) and isinstance(c[i], Token) and c[i].type == "PIPE":
            fallback = c[i + 1]
            i += 2
        if i < len(c) and isinstance(c[i], Token) and c[i].type == "COLON":
            alternative = c[i + 1]
            condition = c[i + 3]
        return ast.Expr(_cover(value.span, _span_of(c[-1])), value, fallback, alternative, condition)

    def number(self, c):
        return make_number(c[0], c[1] if len(c) > 1 else None)

    def range(self, c):
        return ast.Range(tok_span(c[0], c[2]), make_number(c[0], None), make_number(c[2], None))

    def indexed(self, c):
        return make_indexed(c[0])

    def call(self, c):
        # NAME LPAREN (arg (COMMA arg)*)? RPAREN
        args = [x for x in c[2:-1] if not isinstance(x, Token)]
        return ast.Call(tok_span(c[0], c[-1]), make_name(c[0]), args, True)

    def arg(self, c):
        return ast.Arg(_cover(tok_span(c[0]), c[2].span), make_name(c[0]), c[2])

    def ident(self, c):
        return ast.Ident(tok_span(c[0]), c[0].value)

    def boolean(self, c):
        return ast.Bool(tok_span(c[0]), c[0].type == "TRUE")

    def string(self, c):
        return make_string(c[0])

    def list(self, c):
        return ast.ListValue(tok_span(c[0], c[-1]), [x for x in c[1:-1] if not isinstance(x, Token)])

    def cond(self, c):
        name, op, num = c
        return ast.Condition(tok_span(name, num), make_name(name), op.value, tok_span(op),
                             make_number(num, None))

    def rule(self, c):
        # WHEN cond (FOR NUMBER UNIT)? LBRACE action* RBRACE
        duration = None
        i = 2
        if isinstance(c[2], Token) and c[2].type == "FOR":
            duration = make_number(c[3], c[4])
            i = 5
        return ast.Rule(tok_span(c[0], c[-1]), c[1], duration, list(c[i + 1:-1]), True)

    def set_action(self, c):
        # NAME (DOT NAME)? EQ value
        if len(c) == 5:
            target = ast.Name(tok_span(c[0], c[2]), f"{c[0].value}.{c[2].value}")
        else:
            target = make_name(c[0])
        value = c[-1]
        return ast.SetAction(_cover(target.span, value.span), target, value)

    def trigger_action(self, c):
        return ast.TriggerAction(tok_span(c[0], c[1]), make_name(c[1]))

    def rebalance_action(self, c):
        return ast.RebalanceAction(tok_span(c[0], c[1]), make_name(c[1]))


class _Table:
    __slots__ = ("start", "end", "states", "reducers")

    def __init__(self, data: dict, builder: AstBuilder) -> None:
        self.start = data["start"]
        self.end = data["end"]
        self.states = data["states"]
        self.reducers = [self._reducer(origin, size, handler, mask, builder)
                         for origin, size, handler, mask in data["rules"]]

    @staticmethod
    def _reducer(origin, size, handler, mask, builder):
        callback = getattr(builder, handler) if handler else None
        if mask is None:
            def children(c):
                return c
        elif mask[0] == 1 and handler is None:
            # `x*` helper rules are left-recursive (list, item): grow the list in place
            rest = tuple(zip(range(1, len(mask)), mask[1:]))

            def children(c):
                out = c[0]
                for i, m in rest:
                    if m == 0:
                        out.append(c[i])
                    elif m == 1:
                        out.extend(c[i])
                return out
        else:
            def children(c):
                out = []
                for m, x in zip(mask, c):
                    if m == 0:
                        out.append(x)
                    elif m == 1:
                        out.extend(x)
                return out
        if callback is None:      # a helper rule: a list spliced into the parent
            return origin, size, children
        if mask is None:
            return origin, size, callback
        return origin, size, lambda c: callback(children(c))


_TABLE: _Table | None = None


def _load_data() -> dict:
    from mpl.syntax import tablegen

    try:
        from mpl.syntax import _tables
    except ImportError:
        _tables = None
    try:
        text = tablegen.grammar_text()
    except OSError:  # the grammar file is not installed: trust the shipped table
        if _tables is None:
            raise
        text = None
    if _tables is not None and (text is None or _tables.GRAMMAR_SHA256 == tablegen.grammar_hash(text)):
        return {"start": _tables.START, "end": _tables.END, "rules": _tables.RULES,
                "states": _tables.STATES}
    return tablegen.build_tables(text)  # edited grammar: Lark, once per process


def get_table() -> _Table:
    """The parse table, loaded once per process."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _Table(_load_data(), AstBuilder())
    return _TABLE


def parse_tokens(tokens: list[Token]) -> list:
    """Top-level items of a valid token list; raises :class:`SyntaxFailure` otherwise."""
    table = get_table()
    states = table.states
    reducers = table.reducers
    end_state = table.end
    stack = [table.start]
    values: list = []
    push_state = stack.append
    push_value = values.append
    for tok in tokens:
        ttype = tok.type
        while True:
            act = states[stack[-1]].get(ttype)
            if act is None:
                raise SyntaxFailure(tok)
            if act >= 0:
                push_state(act)
                push_value(tok)
                break
            origin, size, reduce = reducers[~act]
            if size:
                c = values[-size:]
                del stack[-size:]
                del values[-size:]
            else:
                c = []
            push_value(reduce(c))
            push_state(states[stack[-1]][origin])
    while True:  # end of input: reduce to the start symbol
        if stack[-1] == end_state:
            return values[-1]
        act = states[stack[-1]].get(END_TYPE)
        if act is None or act >= 0:
            raise SyntaxFailure(None)
        origin, size, reduce = reducers[~act]
        if size:
            c = values[-size:]
            del stack[-size:]
            del values[-size:]
        else:
            c = []
        push_value(reduce(c))
        push_state(states[stack[-1]][origin])
