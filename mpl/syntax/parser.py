"""``parse(text, path=None) -> ParseResult``: the front door of the syntax layer.

1. :func:`mpl.syntax.lexer.tokenize` splits the text (one tokenizer for both parsers).
2. A file without lexical errors that passes cheap necessary checks (balanced ``{}`` / ``[]``,
   a first and a last token that can start and end a file) goes to the LALR parser of
   ``grammar.lark`` (the normative grammar); on success that is the result. (Skipping the
   doomed LALR pass otherwise keeps half-typed files cheap.)
3. Otherwise :class:`mpl.syntax.recover.RecoveringParser` parses the same tokens again,
   reporting every error and keeping everything it understood.

``parse`` never raises: an internal failure (a bug) becomes an ``MPL002`` diagnostic at the
start of the file and an empty document.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from mpl.diagnostics import Diagnostic, Span, has_errors, sort_key
from mpl.rules import make
from mpl.syntax import ast


@dataclass
class ParseResult:
    document: ast.Document
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the text has no syntax error."""
        return not has_errors(self.diagnostics)


def parse(text: str, path: str | None = None) -> ParseResult:
    """Parse ``text`` (the contents of ``path``, used only in diagnostics). Never raises."""
    try:
        return _parse(text, path)
    except Exception as e:  # last resort: a bug must not take the caller down
        if not isinstance(text, str):
            text = ""
        span = Span(1, 1, 1, 1, 0, 0)
        doc = ast.Document(Span.from_offsets(text, 0, len(text)), [], [], text, path)
        diag = make("MPL002", f"internal parser error ({type(e).__name__}: {e}); "
                    "please report this file", span, file=path)
        return ParseResult(doc, [diag])


def _parse(text: str, path: str | None) -> ParseResult:
    if not isinstance(text, str):
        raise TypeError(f"parse() needs a str, not {type(text).__name__}")
    # The parser allocates many small objects and no cycles (the AST is a tree): pausing
    # the cyclic garbage collector saves about 10 % on large files.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _parse_text(text, path)
    finally:
        if paused:
            gc.enable()


def _parse_text(text: str, path: str | None) -> ParseResult:
    from mpl.syntax.lexer import tokenize

    lexed = tokenize(text, path)
    doc_span = lexed.index.span(0, len(text))
    items = None
    if not lexed.diagnostics and _may_be_valid(lexed):
        items = _parse_lalr(lexed.tokens)
    if items is not None:
        diags: list[Diagnostic] = []
    else:
        items, diags = parse_recovering(text, path, lexed)
        diags = sorted(lexed.diagnostics + diags, key=sort_key)
    doc = ast.Document(doc_span, items, lexed.comments, text, path)
    return ParseResult(doc, diags)


_FIRST = frozenset(("VERSION", "IMPORT", "POLICY", "_SEMI"))
_LAST = frozenset(("NUMBER", "STRING", "RBRACE", "_SEMI"))   # version, import, policy, ';'


def _may_be_valid(lexed) -> bool:
    """Cheap necessary conditions for a valid file: balanced brackets, and first and last
    tokens that can start and end a file. When they fail the LALR attempt is skipped."""
    toks = lexed.tokens
    if not toks:
        return True
    return lexed.balanced and toks[0].type in _FIRST and toks[-1].type in _LAST


def _parse_lalr(tokens):
    """Top-level items, or None when the tokens are not a valid file."""
    from mpl.syntax.lalr import SyntaxFailure, parse_tokens

    try:
        return parse_tokens(tokens)
    except SyntaxFailure:
        return None


def parse_recovering(text: str, path: str | None = None, lexed=None):
    """Run the recovering parser only (tests compare it with the LALR parser).

    Returns ``(items, parser_diagnostics)``; the lexer's diagnostics are not included.
    """
    from mpl.syntax.lexer import tokenize
    from mpl.syntax.recover import RecoveringParser

    if lexed is None:
        lexed = tokenize(text, path)
    p = RecoveringParser(text, lexed.tokens, lexed.index, path, lexed.diagnostics)
    items = p.parse_document()
    return items, p.diags
