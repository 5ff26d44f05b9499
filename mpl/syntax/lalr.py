"""The normative LALR parser: grammar.lark, built once per process, tables cached on disk.

Valid files are parsed here (fast path). The callbacks build the typed AST directly while
parsing (Lark's inline transformer: no parse tree is built). Invalid files make Lark raise;
:mod:`mpl.syntax.recover` then parses them again with recovery.

Cache: Lark's grammar analysis costs 70-100 ms. The analysed parser is pickled by Lark into
``$XDG_CACHE_HOME/mpl/`` (default ``~/.cache/mpl``; ``MPL_CACHE_DIR`` overrides), in a file
named after the hash of the grammar, the Lark version and the Python version, so a changed
grammar never loads stale tables. The file is written under a temporary name and renamed
(concurrent processes never read half a file). When no cache directory is writable the
parser is built in memory.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from typing import Iterator

import lark
from lark import Lark, Token, Transformer
from lark.lexer import Lexer

from mpl.diagnostics import Span
from mpl.syntax import ast
from mpl.syntax.lexer import tok_span, unescape, number_value

GRAMMAR_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grammar.lark")


class TokenListLexer(Lexer):
    """Feeds the tokens of :func:`mpl.syntax.lexer.tokenize` to the LALR parser."""

    def __init__(self, lexer_conf) -> None:  # noqa: D401 - Lark's signature
        pass

    def lex(self, tokens) -> Iterator[Token]:  # Lark's custom-lexer interface 0
        return iter(tokens)


def _cover(a: Span, b: Span) -> Span:
    return Span(a.line, a.column, b.end_line, b.end_column, a.offset, b.end_offset)


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


def make_name(t: Token) -> ast.Name:
    return ast.Name(tok_span(t), t.value)


class AstBuilder(Transformer):
    """Rule callbacks: children are lark Tokens and already-built AST nodes."""

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


_PARSER: Lark | None = None


def _cache_dir() -> str | None:
    base = os.environ.get("MPL_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "mpl")
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        return None
    return base if os.access(base, os.W_OK) else None


def _build(grammar: str, cache: str | bool = False) -> Lark:
    return Lark(grammar, parser="lalr", lexer=TokenListLexer, transformer=AstBuilder(),
                maybe_placeholders=False, cache=cache)


def get_parser() -> Lark:
    """The LALR parser, built (or loaded from the on-disk cache) once per process."""
    global _PARSER
    if _PARSER is not None:
        return _PARSER
    with open(GRAMMAR_PATH, encoding="utf-8") as f:
        grammar = f.read()
    directory = _cache_dir()
    if directory is None:
        _PARSER = _build(grammar)
        return _PARSER
    key = hashlib.sha256("\0".join((grammar, lark.__version__, sys.version)).encode()).hexdigest()[:20]
    final = os.path.join(directory, f"grammar-{key}.lark-cache")
    if os.path.exists(final):
        try:
            _PARSER = _build(grammar, final)
            return _PARSER
        except Exception:  # a corrupt cache file: rebuild below
            pass
    fd, tmp = tempfile.mkstemp(prefix="grammar-", suffix=".tmp", dir=directory)
    os.close(fd)
    os.unlink(tmp)  # Lark writes the file itself
    try:
        _PARSER = _build(grammar, tmp)
        if os.path.exists(tmp):
            os.replace(tmp, final)
    except Exception:
        _PARSER = _build(grammar)
    finally:
        if os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return _PARSER


def parse_tokens(tokens: list[Token]) -> list:
    """Top-level items of a valid token list; raises a lark exception on a syntax error."""
    return get_parser().parse(tokens)
