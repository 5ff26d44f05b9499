"""The syntax layer: tokenizer, LALR grammar (``grammar.lark``), recovering parser, typed AST.

``parse(text, path=None) -> ParseResult(document, diagnostics)`` never raises.
"""

from mpl.syntax.parser import ParseResult, parse

__all__ = ["ParseResult", "parse"]
