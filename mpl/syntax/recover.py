"""The recovering parser: recursive descent over the lexer's tokens, for files with errors.

It accepts exactly the language of ``grammar.lark`` (on a valid file it builds the same AST
as the LALR parser; a test checks that on the corpus) and, on an error, reports it, keeps
what it understood and resynchronises, in the style of rust-analyzer's and ruff's parsers:

* **Recovery points** (where skipping stops): ``}``, a top-level keyword (``policy``,
  ``import``, ``version``), the end of the file, a token at the start of a line, and a name
  followed by ``=``, ``.`` or ``{`` (the next parameter or block, also on the same line in the
  seed's ``capacity = 8  eviction = lru`` style). A ``{ ... }`` group met while skipping is
  skipped as a whole.
* Skipped text becomes an :class:`~mpl.syntax.ast.ErrorNode` in the enclosing container;
  a missing piece becomes ``None`` (``capacity =`` -> ``Param(value=None)``); a construct
  whose ``}`` never comes gets ``closed=False``.
* Unclosed constructs are reported once (``MPL003``) where the file ends or where a
  top-level keyword interrupts them, with a related location per open construct.
* ``ERROR`` tokens were already reported by the lexer: they are skipped silently.

Nothing here recurses deeper than the list nesting limit of the lexer, so huge or deeply
nested inputs cannot exhaust the stack.
"""

from __future__ import annotations


from mpl import schema
from mpl.diagnostics import Diagnostic, Fix, Related, Span, TextEdit
from mpl.rules import make
from mpl.syntax import ast
from mpl.syntax.lexer import (ERROR, KEYWORD_TYPES, MAX_ITEM_DEPTH, MAX_LIST_DEPTH, STRAY, LineIndex, Token,
                              cover as _cover, name_text, tok_span)
from mpl.syntax.lalr import make_indexed, make_name, make_number, make_string

EOF = "$END"
_ALLOCATIONS = frozenset(schema.PARAMS[schema.REBALANCE].enum_names())
#: the keywords that start a top-level item: wherever one stands (unless it is read as a policy
#: name, see is_policy_name) every open construct ends there and the next item starts
TOP_KEYWORDS = frozenset(("POLICY", "IMPORT", "VERSION"))
_KEYWORD_TYPES = frozenset(KEYWORD_TYPES.values())
#: the tokens an item can end with / start with: a ';' between them is a separator
_ENDS_ITEM = frozenset(("NUMBER", "UNIT", "NAME", "STRING", "TRUE", "FALSE", "RBRACK", "RBRACE",
                        "LBRACE", "_SEMI", "INDEXED", "RPAREN", ERROR))
_STARTS_ITEM = frozenset(("NAME", "WHEN", "TRIGGER", "REBALANCE", "RBRACE", "POLICY",
                          "IMPORT", "VERSION", EOF))
_VALUE_START = frozenset(("NUMBER", "NAME", "TRUE", "FALSE", "STRING", "LBRACK", "INDEXED"))

_PUNCT_TEXT = {
    "LBRACE": "'{'", "RBRACE": "'}'", "LBRACK": "'['", "RBRACK": "']'", "EQ": "'='",
    "COMMA": "','", "PIPE": "'|'", "COLON": "':'", "_SEMI": "';'", "DOT": "'.'",
    "LPAREN": "'('", "RPAREN": "')'", "DOTDOT": "'..'", "ARROW": "'->'",
}


def describe(t: Token) -> str:
    """A token in human terms, for 'found ...' in messages."""
    ty = t.type
    if ty == EOF:
        return "the end of the file"
    if ty == "NAME":
        return f"name '{t.value}'"
    if ty == "NUMBER":
        return f"number {t.value}"
    if ty == "UNIT":
        return f"unit '{t.value}'"
    if ty == "STRING":
        return f"string {t.value}"
    if ty == "INDEXED":
        return f"'{t.value}'"
    if ty == "OP":
        return f"'{t.value}'"
    if ty in _PUNCT_TEXT:
        return _PUNCT_TEXT[ty]
    if ty == ERROR:
        return repr(t.value)
    return f"keyword '{t.value}'"


def is_policy_name(ty: str, next_ty: str) -> bool:
    """Whether a token of type ``ty`` followed by one of type ``next_ty`` is read as a policy
    name where one is expected (after ``policy`` / ``extends``): a NAME, or a keyword (the
    position is unambiguous, as in the grammar) followed by ``{`` or ``extends`` (so a
    half-typed ``policy`` before the next top-level keyword is not read as a policy named
    ``version``)."""
    return ty == "NAME" or (ty in _KEYWORD_TYPES and next_ty in ("LBRACE", "EXTENDS"))


def read_semicolons(types: list[str]) -> dict[int, str | None]:
    """How the parser reads each ';' of a token stream, given the types of its tokens (no
    comments, no stray characters): ``"_SEMI"`` where it separates two items, ``"COMMA"``
    where it stands for a ',' between two values of a list or arguments of a call (``[1; 2]``),
    None where it is read as if it were not there (``capacity = ; 8``, ``policy p ; {``).
    A run of ';' is judged by the token after the whole run, so each ';' of
    ``when hit_rate ;; < 0.4`` is read as not there (one error each) rather than the first
    being kept as a separator that cuts the condition in two. The language server reads its
    own tokens with this rule, so its roles follow the parser's."""
    out: dict[int, str | None] = {}
    prev = None                 # the type of the last token read
    depth = 0                   # '[' and '(' nesting
    n = len(types)
    after = [EOF] * n           # after[j]: the type of the first token after j that is not ';'
    for j in range(n - 2, -1, -1):
        nxt = types[j + 1]
        after[j] = after[j + 1] if nxt == "_SEMI" else nxt
    for j, ty in enumerate(types):
        if ty in ("LBRACK", "LPAREN"):
            depth += 1
        elif ty in ("RBRACK", "RPAREN") and depth:
            depth -= 1
        elif ty in ("LBRACE", "RBRACE"):
            depth = 0           # no list holds a brace: an unclosed '[' ends here
        elif ty == "_SEMI":
            nxt = after[j]
            if depth and prev not in (None, "LBRACK", "LPAREN", "COMMA") and nxt in _VALUE_START:
                out[j] = "COMMA"
            elif (prev is None or prev in _ENDS_ITEM) and nxt in _STARTS_ITEM and not depth:
                out[j] = "_SEMI"
            else:
                out[j] = None
                continue
            prev = out[j]
            continue
        prev = ty
    return out


class _Open:
    """A construct whose closing '}' (or ']') is still expected."""

    __slots__ = ("what", "brace")

    def __init__(self, what: str, brace: Token) -> None:
        self.what = what      # "policy 'x'", "block 'cache'", "rule 'when ...'"
        self.brace = brace


class RecoveringParser:
    def __init__(self, text: str, tokens: list[Token], index: LineIndex, path: str | None,
                 reported: list[Diagnostic]) -> None:
        self.text = text
        self.index = index
        self.path = path
        n = len(text)
        end_line = index.span(n, n)
        self.eof = Token(EOF, "", n, end_line.line, end_line.column, end_line.line,
                         end_line.column, n)
        # stray characters were reported by the lexer: read the text as if they were not
        # there, so they cause no second error (`cache\u200b {` is still a block)
        self.toks = [t for t in tokens if t.type != STRAY] + [self.eof]
        self.diags: list[Diagnostic] = []
        self._drop_stray_semicolons()
        self.i = 0
        self.open: list[_Open] = []
        self.unclosed_reported_at = -1
        # offsets already carrying a diagnostic (lexer or parser): no cascades there
        self.error_offsets = {d.span.offset for d in reported}

    def _drop_stray_semicolons(self) -> None:
        """A ';' only separates items (the original took one anywhere): one that is not
        between two items (``capacity = ; 8``, ``[1; 2]``, ``policy p ; {``) is reported,
        with the fix that removes it, and read as if it were not there (no cascade)."""
        toks = self.toks
        if not any(t.type == "_SEMI" for t in toks):
            return
        readings = read_semicolons([t.type for t in toks])
        keep = []
        for j, t in enumerate(toks):
            if t.type != "_SEMI":
                keep.append(t)
                continue
            reading = readings[j]
            span = tok_span(t)
            if reading == "_SEMI":
                keep.append(t)
            elif reading == "COMMA":
                # `[1; 2]`, `weighted_sum(lru = 1; lfu = 1)`: a ';' for a ','
                self.diags.append(make(
                    "MPL002", "use ',' between list elements and arguments, not ';'", span, file=self.path,
                    fixes=(Fix("Replace ';' with ','", (TextEdit(span, ","),)),)))
                keep.append(Token("COMMA", ",", t.start_pos, t.line, t.column, t.end_line,
                                  t.end_column, t.end_pos))
            else:
                self.diags.append(make(
                    "MPL002", "unexpected ';' here: ';' only separates two items (parameters, "
                    "blocks, rules, actions, policies); remove it", span, file=self.path,
                    fixes=(Fix("Remove ';'", (TextEdit(span, ""),)),)))
        self.toks = keep

    # ------------------------------------------------------------ token helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else self.eof

    def at(self, *types: str) -> bool:
        return self.toks[self.i].type in types

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.type != EOF:
            self.i += 1
        return t

    def line_start(self, j: int | None = None) -> bool:
        j = self.i if j is None else j
        return j == 0 or self.toks[j].line > self.toks[j - 1].end_line

    def prev(self) -> Token:
        return self.toks[self.i - 1] if self.i > 0 else self.toks[0]

    # ------------------------------------------------------------ diagnostics
    def error(self, code: str, message: str, span: Span, related=(), fixes=()) -> None:
        if span.offset in self.error_offsets:
            return
        self.error_offsets.add(span.offset)
        self.diags.append(make(code, message, span, file=self.path, related=tuple(related),
                               fixes=tuple(fixes)))

    def unexpected(self, message: str) -> None:
        """MPL002 at the current token (silent on lexer ERROR tokens, already reported)."""
        t = self.tok
        if t.type == ERROR:
            return
        if t.type == EOF or (t.type in TOP_KEYWORDS and self.open):
            self.report_unclosed(message)
            return
        self.error("MPL002", f"{message}, found {describe(t)}", tok_span(t))

    def report_unclosed(self, message: str | None = None) -> None:
        """MPL003 at the current token (EOF or a top-level keyword) for every open construct."""
        if self.unclosed_reported_at == self.i:
            return
        self.unclosed_reported_at = self.i
        t = self.tok
        related = [Related(f"{o.what} opened here", tok_span(o.brace), self.path)
                   for o in reversed(self.open)]
        if self.open:
            inner = self.open[-1].what
            count = f" ({len(self.open)} constructs are open)" if len(self.open) > 1 else ""
            if t.type == EOF:
                msg = "unexpected end of file: " + (f"{message}; " if message else "")
                msg += f"{inner} is not closed; add '}}'{count}"
            elif message:
                msg = f"{message}, found {describe(t)}; {inner} is not closed; add '}}'{count}"
            else:
                msg = f"{inner} is not closed before {describe(t)}; add '}}'{count}"
        else:
            msg = f"unexpected end of file: {message}" if message else "unexpected end of file"
        self.error("MPL003", msg, tok_span(t), related)

    # ------------------------------------------------------------ recovery
    def at_hard_stop(self) -> bool:
        ty = self.tok.type
        return ty == EOF or ty == "RBRACE" or ty in TOP_KEYWORDS

    def at_item_start(self) -> bool:
        """A plausible start of the next item (parameter, block, rule, action)."""
        t = self.tok
        # separators are optional in the grammar: a rule or an action keyword may follow a
        # complete item on the same line (`ttl = 5 when hit_rate < 0.5 { ... }`)
        if t.type in ("WHEN", "TRIGGER", "REBALANCE"):
            return True
        if self.line_start() and t.type == "NAME":
            return True
        if t.type == "NAME" and self.peek().type in ("EQ", "DOT", "LBRACE"):
            return True
        return t.type == "NAME" and self.at_section_start()

    def at_section_start(self) -> bool:
        """``NAME NAME {``, ``NAME NAME (`` or ``NAME NAME = value {``: the start of a section
        (``tier hot {``, ``on demote(hot -> warm) {``, ``band layers = 0..7 {``) whatever
        comes before it."""
        if self.peek().type != "NAME":
            return False
        after = self.peek(2).type
        return after in ("LBRACE", "LPAREN") or (after == "EQ"
                                                 and self._brace_after_value(self.i + 3))

    def skip(self, container: list, *, at_least_one: bool = True) -> None:
        """Skip to the next recovery point; the skipped text becomes an ErrorNode."""
        start = self.i
        first = True
        while True:
            if self.at_hard_stop():
                break
            if not first or not at_least_one:
                if self.at_item_start() or self.at("_SEMI"):
                    break
            first = False
            if self.at("LBRACE"):
                self.skip_group()
            else:
                self.advance()
        if self.i > start:
            a, b = self.toks[start], self.toks[self.i - 1]
            container.append(ast.ErrorNode(tok_span(a, b), self.text[a.start_pos:b.end_pos]))

    def skip_group(self) -> None:
        """Skip a balanced '{ ... }' group (stops early at EOF or a top-level keyword)."""
        depth = 0
        while True:
            ty = self.tok.type
            if ty == EOF or ty in TOP_KEYWORDS:
                return
            self.advance()
            if ty == "LBRACE":
                depth += 1
            elif ty == "RBRACE":
                depth -= 1
                if depth <= 0:
                    return

    # ------------------------------------------------------------ grammar
    def parse_document(self) -> list:
        items: list = []
        while True:
            ty = self.tok.type
            if ty == EOF:
                break
            if ty == "_SEMI":
                self.advance()
            elif ty == "VERSION":
                items.append(self.parse_version())
            elif ty == "IMPORT":
                items.append(self.parse_import())
            elif ty == "POLICY":
                items.append(self.parse_policy())
            else:
                self.top_level_error(items)
        return items

    def top_level_error(self, items: list) -> None:
        t = self.tok
        if t.type == "NAME" and self.peek().type == "LBRACE":
            self.error("MPL002", f"block '{t.value}' outside a policy: put it inside "
                       f"'policy NAME {{ ... }}'", tok_span(t))
        elif t.type == "RBRACE":
            self.error("MPL002", "unmatched '}': no policy is open here", tok_span(t))
        else:
            self.unexpected("expected 'policy', 'import' or 'version' at the top level")
        start = self.i
        while not self.at(EOF, *TOP_KEYWORDS):
            if self.at("LBRACE"):
                self.skip_group()
            else:
                self.advance()
        if self.i > start:
            a, b = self.toks[start], self.toks[self.i - 1]
            items.append(ast.ErrorNode(tok_span(a, b), self.text[a.start_pos:b.end_pos]))

    def parse_version(self) -> ast.Version:
        kw = self.advance()
        if self.at("NUMBER"):
            num = self.advance()
            return ast.Version(tok_span(kw, num), make_number(num, None))
        self.unexpected("expected a version number after 'version', e.g. 'version 1'")
        return ast.Version(tok_span(kw), None)

    def parse_import(self) -> ast.Import:
        kw = self.advance()
        if self.at("STRING"):
            s = self.advance()
            return ast.Import(tok_span(kw, s), make_string(s))
        self.unexpected("expected a quoted path after 'import', e.g. import \"std/lru_basic\"")
        return ast.Import(tok_span(kw), None)

    def parse_policy(self) -> ast.Policy:
        kw = self.advance()
        name = parent = None
        if self.at_policy_name():
            name = make_name(self.advance())
        else:
            self.unexpected("expected a policy name after 'policy'")
        if self.at("EXTENDS"):
            ext = self.advance()
            if self.at_policy_name():
                parent = make_name(self.advance())
            else:
                self.unexpected(f"expected the name of the parent policy after '{ext.value}'")
        elif (name is not None and self.at("NAME") and self.peek().type == "LBRACE"
              and self.tok.value not in schema.BLOCKS):
            # `policy b a {`: most likely a missing 'extends'
            t = self.tok
            self.error("MPL002", f"expected 'extends' or '{{' after policy '{name.text}', found "
                       f"name '{t.value}'; did you mean 'policy {name.text} extends {t.value}'?",
                       tok_span(t))
            parent = make_name(self.advance())
        policy = ast.Policy(tok_span(kw, self.prev()), name, parent, [], False)
        if not self.at("LBRACE"):
            label = f"policy '{name.text}'" if name else "'policy'"
            self.unexpected(f"expected '{{' after {label}")
            # `policy x\n  cache { ... }`: go on as if the brace were there
            if not (self.at("NAME") and self.peek().type == "LBRACE"):
                if not self.at_hard_stop():
                    self.skip(policy.blocks)
                    policy.span = _cover(policy.span, tok_span(self.prev()))
                return policy
            brace = None
        else:
            brace = self.advance()
        what = f"policy '{name.text}'" if name else "policy"
        if brace is not None:
            self.open.append(_Open(what, brace))
        closed = self.parse_policy_body(policy.blocks)
        if brace is not None:
            self.open.pop()
        policy.closed = closed and brace is not None
        policy.span = _cover(policy.span, tok_span(self.prev()))
        return policy

    def at_policy_name(self) -> bool:
        """A policy name after ``policy`` / ``extends`` (:func:`is_policy_name`)."""
        return is_policy_name(self.tok.type, self.peek().type)

    def parse_policy_body(self, blocks: list) -> bool:
        while True:
            t = self.tok
            ty = t.type
            if ty == "RBRACE":
                self.advance()
                return True
            if ty == EOF or ty in TOP_KEYWORDS:
                self.report_unclosed()
                return False
            if ty == "_SEMI":
                self.advance()
            elif ty == "NAME" and self.peek().type == "LBRACE":
                blocks.append(self.parse_block())
            elif ty == "NAME" and self.peek().type in ("EQ", "DOT"):
                self.error("MPL002", f"parameter '{t.value}' outside a block: put it inside "
                           f"a block such as 'cache {{ ... }}'", tok_span(t))
                self.skip(blocks)
            elif ty == "WHEN":
                self.error("MPL002", "rule outside a block: put 'when ...' rules inside "
                           "'adapt { ... }'", tok_span(t))
                start = len(blocks)
                self.advance()
                self.skip(blocks, at_least_one=False)
                if self.at("LBRACE"):
                    self.skip_group()
                self._merge_errors(blocks, start, t)
            elif ty == "NAME":
                start = len(blocks)
                self.advance()
                spec = schema.SECTIONS.get(name_text(t.value))
                if spec is not None:
                    inside = " or ".join(f"'{b} {{ ... }}'" for b in spec.parents)
                    self.error("MPL002", f"'{t.value}' items belong inside {inside}, not directly "
                               f"in a policy", tok_span(t))
                    while not (self.at_hard_stop() or self.at("LBRACE")):
                        self.advance()
                    if self.at("LBRACE"):
                        self.skip_group()
                elif name_text(t.value) in schema.BLOCKS:
                    self.unexpected(f"expected '{{' after block name '{t.value}'")
                else:
                    self.error("MPL002", f"expected a block (e.g. 'cache {{ ... }}') or '}}', "
                               f"found name '{t.value}'", tok_span(t))
                self.skip(blocks, at_least_one=False)
                self._merge_errors(blocks, start, t)
            else:
                self.unexpected("expected a block name (e.g. 'cache') or '}'")
                self.skip(blocks)

    def _merge_errors(self, container: list, start: int, first: Token) -> None:
        """Replace the ErrorNodes appended since ``start`` by one covering ``first``..here."""
        del container[start:]
        last = self.prev()
        container.append(ast.ErrorNode(tok_span(first, last), self.text[first.start_pos:last.end_pos]))

    def parse_block(self) -> ast.Block:
        name_tok = self.advance()
        brace = self.advance()
        block = ast.Block(tok_span(name_tok, brace), make_name(name_tok), [], False)
        what = f"block '{name_tok.value}'"
        self.open.append(_Open(what, brace))
        block.closed = self.parse_items(block.items, what, brace)
        self.open.pop()
        block.span = _cover(block.span, tok_span(self.prev()))
        return block

    def parse_items(self, items: list, what: str, brace: Token, section: bool = False) -> bool:
        """The items of a block or a section up to its '}' (True) or to where it is seen to be
        unclosed (False, reported)."""
        while True:
            t = self.tok
            ty = t.type
            if ty == "RBRACE":
                self.advance()
                return True
            if ty == EOF or ty in TOP_KEYWORDS:
                self.report_unclosed()
                return False
            if ty == "_SEMI":
                self.advance()
            elif ty == "NAME":
                nxt = self.peek().type
                if nxt == "LBRACE" and name_text(t.value) in schema.BLOCKS:
                    # another known block: most likely this construct's '}' is missing
                    self.report_unclosed_before_block(t)
                    return False
                if self.at_section():
                    if len(self.open) >= MAX_ITEM_DEPTH:
                        # already reported by the lexer: skip the deeper item whole
                        start = len(items)
                        self.advance()
                        while not (self.at_hard_stop() or self.at("LBRACE")):
                            self.advance()
                        self.skip_group()
                        self._merge_errors(items, start, t)
                    else:
                        items.append(self.parse_section())
                elif nxt == "LBRACE":
                    self.error("MPL002", f"blocks cannot be nested: close {what} before "
                               f"block '{t.value}'", tok_span(t))
                    start = len(items)
                    self.advance()
                    self.skip_group()
                    self._merge_errors(items, start, t)
                elif self.looks_like_condition():
                    self.error("MPL002", f"expected 'when' before the condition "
                               f"'{t.value} {self.peek().value} {self.peek(2).value}': "
                               f"a rule starts with 'when'", tok_span(t))
                    items.append(self.parse_rule(missing_when=True))
                else:
                    self.parse_param(items)
            elif ty == "WHEN":
                items.append(self.parse_rule())
            else:
                if section:
                    self.unexpected(f"expected a parameter ('name = value') or '}}' in {what}")
                else:
                    self.unexpected(f"expected a parameter ('name = value'), a rule ('when ...') "
                                    f"or '}}' in {what}")
                self.skip(items)

    def report_unclosed_before_block(self, t: Token) -> None:
        """MPL003: the constructs open inside the policy are not closed before block ``t``."""
        inner = [o for o in reversed(self.open) if not o.what.startswith("policy")]
        related = [Related(f"{o.what} opened here", tok_span(o.brace), self.path) for o in inner]
        if len(inner) == 1:
            msg = f"{inner[0].what} is not closed before block '{t.value}'; add '}}'"
        else:
            names = ", ".join(o.what for o in inner[:-1]) + " and " + inner[-1].what
            msg = f"{names} are not closed before block '{t.value}'; add '}}' for each"
        self.error("MPL003", msg, tok_span(t), related)

    def at_section(self) -> bool:
        """At a NAME: whether a section starts here (``tier hot {``, ``band layers = 0..7 {``,
        ``on demote(hot -> warm) {``). Exact on valid input (a NAME followed by a NAME can only
        start a section); with errors, a known section kind starts one whatever follows."""
        nxt = self.peek().type
        known = name_text(self.tok.value) in schema.SECTIONS
        if nxt == "NAME":
            after = self.peek(2).type
            if after in ("LBRACE", "LPAREN"):
                return True
            if after == "EQ" and self._brace_after_value(self.i + 3):
                return True
            return known
        return known and nxt not in ("EQ", "DOT")

    def _brace_after_value(self, j: int) -> bool:
        """Whether the tokens from ``j`` are one value followed by '{'."""
        toks = self.toks
        n = len(toks)

        def ty(k: int) -> str:
            return toks[k].type if k < n else EOF

        t = ty(j)
        if t == "NUMBER":
            j += 1
            if ty(j) == "UNIT":
                j += 1
            elif ty(j) == "DOTDOT" and ty(j + 1) == "NUMBER":
                j += 2
        elif t == "NAME" and ty(j + 1) == "LPAREN" or t == "LBRACK":
            j += 1 if t == "LBRACK" else 2
            level = 1
            while level:
                k = ty(j)
                if k in (EOF, "LBRACE", "RBRACE"):
                    return False
                level += {"LPAREN": 1, "LBRACK": 1, "RPAREN": -1, "RBRACK": -1}.get(k, 0)
                j += 1
        elif t in ("NAME", "INDEXED", "STRING", "TRUE", "FALSE"):
            j += 1
        else:
            return False
        return ty(j) == "LBRACE"

    def parse_section(self) -> ast.Section:
        """``KIND head { items }``; the head is a label, a selector or an edge."""
        kind_tok = self.advance()
        kind = make_name(kind_tok)
        spec = schema.SECTIONS.get(kind.text)
        form = f" ('{spec.syntax}')" if spec is not None else ""
        sec = ast.Section(tok_span(kind_tok), kind, None, [], False)
        head_ok = True
        if self.at("NAME"):
            first = self.advance()
            if self.at("EQ"):
                eq = self.advance()
                # (a name right before the section's '{' is the head's value: `tier a = b {`
                # is grammatical, and the checker says what the head should be)
                if self.starts_value() or (self.at("NAME") and self.peek().type == "LBRACE"):
                    v = self.parse_value()
                    sec.head = ast.Param(_cover(tok_span(first), v.span), make_name(first),
                                         ast.Expr(v.span, v))
                else:
                    self.unexpected(f"expected a value after '{first.value} =' in "
                                    f"'{kind_tok.value} {first.value} = ...'")
                    sec.head = ast.Param(tok_span(first, eq), make_name(first), None)
                    head_ok = False
            elif self.at("LPAREN"):
                sec.head, head_ok = self.parse_edge(first)
            elif self.at("NAME") and self.peek().type == "ARROW":
                # `on demote hot -> warm {`: the parentheses are missing
                self.error("MPL002", f"expected '(' after '{first.value}': write "
                           f"{kind_tok.value} {first.value}({self.tok.value} -> "
                           f"{self.peek(2).value if self.peek(2).type == 'NAME' else '...'})",
                           tok_span(self.tok))
                sec.head = ast.Edge(tok_span(first), make_name(first))
                head_ok = False
            else:
                sec.head = make_name(first)
        else:
            what = spec.head_name if spec is not None else "a name"
            self.unexpected(f"expected {what} after '{kind_tok.value}'{form}")
            head_ok = False
        sec.span = _cover(sec.span, tok_span(self.prev()))
        if not self.at("LBRACE"):
            if head_ok:
                # (the head as one line: a head written across lines is quoted on one)
                head = " ".join(self.text[sec.span.offset:sec.span.end_offset].split())
                self.unexpected(f"expected '{{' after '{head}'")
            # garbage in the head: skip to a '{' on this line, or stop
            while not (self.at_hard_stop() or self.line_start() or self.at("LBRACE")):
                self.advance()
            if not self.at("LBRACE"):
                return sec
        brace = self.advance()
        head_text = " ".join(self.text[sec.span.offset:sec.span.end_offset].split()[1:])
        what = f"{kind.text} '{head_text}'" if head_text else kind.text
        self.open.append(_Open(what, brace))
        sec.closed = self.parse_items(sec.items, what, brace, section=True)
        self.open.pop()
        sec.span = _cover(sec.span, tok_span(self.prev()))
        return sec

    def parse_edge(self, event: Token) -> tuple[ast.Edge, bool]:
        """``EVENT ( NAME -> NAME )`` (the '(' is the current token); (edge, complete)."""
        lparen = self.advance()
        edge = ast.Edge(tok_span(event, lparen), make_name(event))
        example = f"{event.value}(hot -> warm)"

        def done(ok: bool):
            edge.span = _cover(edge.span, tok_span(self.prev()))
            return edge, ok

        if not self.at("NAME"):
            self.unexpected(f"expected the name of the tier the transition leaves, e.g. {example}")
            return done(False)
        edge.source = make_name(self.advance())
        if self.at("ARROW"):
            self.advance()
        elif self.at("NAME"):
            self.error("MPL002", f"expected '->' between the two tiers: "
                       f"{event.value}({edge.source.text} -> {self.tok.value})", tok_span(self.tok))
        else:
            self.unexpected(f"expected '->' and the tier the transition enters, e.g. {example}")
            return done(False)
        if not self.at("NAME"):
            self.unexpected(f"expected the name of the tier the transition enters, e.g. {example}")
            return done(False)
        edge.target = make_name(self.advance())
        if not self.at("RPAREN"):
            self.unexpected(f"expected ')' after '{edge.target.text}'")
            return done(False)
        self.advance()
        return done(True)

    def looks_like_condition(self) -> bool:
        """``NAME OP NUMBER`` followed by ``for`` or ``{``: a rule that lacks its 'when'."""
        return (self.peek().type == "OP" and self.peek(2).type == "NUMBER"
                and self.peek(3).type in ("FOR", "LBRACE"))

    def parse_param(self, items: list) -> None:
        """``NAME = expr``; appends the Param (and any skipped text after it) to ``items``."""
        name_tok = self.advance()
        name = make_name(name_tok)
        if self.at("DOT") and self.peek().type == "NAME":
            # `cache.capacity = 4` inside a block: qualified names are for adapt actions
            self.error("MPL002", f"unexpected '.' after parameter name '{name_tok.value}': "
                       f"inside a block write the parameter name alone", tok_span(self.tok))
            self.advance()
            last = self.advance()
            name = ast.Name(tok_span(name_tok, last), f"{name_text(name_tok.value)}.{name_text(last.value)}")
        if self.at("EQ"):
            self.advance()
        elif self.at("OP") and self.tok.value == "==":
            self.error("MPL002", "use '=' to set a parameter, not '=='", tok_span(self.tok))
            self.advance()
        elif self.tok.type in _VALUE_START and not self.line_start() and not self.at_item_start():
            # `capacity 16`: report and read the value anyway
            self.error("MPL002", f"expected '=' after parameter name '{name.text}'",
                       tok_span(self.tok))
        else:
            self.unexpected(f"expected '=' after parameter name '{name.text}'")
            items.append(ast.Param(name.span, name, None))
            if not self.at_hard_stop() and not self.at_item_start():
                self.skip(items)
            return
        expr = self.parse_expr(name.text)
        if expr is None:
            items.append(ast.Param(_cover(name.span, tok_span(self.prev())), name, None))
            if not (self.at_hard_stop() or self.at_item_start() or self.at("_SEMI")):
                self.skip(items)
            return
        items.append(ast.Param(_cover(name.span, expr.span), name, expr))
        self.after_item(items)

    def after_item(self, items: list) -> None:
        """After a complete item: anything but a recovery point is unexpected."""
        if self.at_hard_stop() or self.at_item_start() or self.at("_SEMI"):
            return
        if self.at("UNIT"):
            self.error("MPL002", f"unexpected unit '{self.tok.value}' here", tok_span(self.tok))
        elif self.at("OP") and self.tok.value == "==":
            self.unexpected("unexpected comparison")
        else:
            self.unexpected("expected a new line, ';' or '}' after the value")
        self.skip(items)

    def starts_value(self) -> bool:
        t = self.tok
        if t.type not in _VALUE_START:
            return False
        if t.type == "NAME" and (self.peek().type in ("EQ", "DOT", "LBRACE")
                                 or (self.line_start() and self.at_section_start())):
            return False  # the next item, not a value
        return True

    def parse_expr(self, param_name: str) -> ast.Expr | None:
        if not self.starts_value():
            self.unexpected(f"expected a value after '{param_name} ='")
            return None
        value = self.parse_value()
        expr = ast.Expr(value.span, value)
        if self.at("PIPE"):
            bar = self.advance()
            if self.starts_value():
                expr.fallback = self.parse_value()
            else:
                self.unexpected(f"expected a fallback value after '{param_name} = ... |'")
                expr.span = _cover(expr.span, tok_span(bar))
                return expr
        if self.at("COLON"):
            colon = self.advance()
            expr.span = _cover(expr.span, tok_span(colon))
            if self.starts_value():
                expr.alternative = self.parse_value()
            else:
                self.unexpected("expected the alternative value after ':' "
                                "(a : b when METRIC OP NUMBER)")
                return expr
            if self.at("WHEN"):
                when = self.advance()
                expr.condition = self.parse_condition(when)
            elif self._device_with_spaces(expr):
                return expr
            else:
                self.unexpected("expected 'when' and a condition after the alternative value "
                                "(a : b when METRIC OP NUMBER)")
        last = expr.condition or expr.alternative or expr.fallback or expr.value
        expr.span = _cover(expr.span, last.span)
        return expr

    def _device_with_spaces(self, expr: ast.Expr) -> bool:
        """``gpu : 1`` (no ``when`` follows): a device index written with spaces. One error
        with the fix, and the value is read as ``gpu:1``."""
        v, alt = expr.value, expr.alternative
        if not (isinstance(v, ast.Ident) and expr.fallback is None and isinstance(alt, ast.Number)
                and alt.unit is None and isinstance(alt.value, int) and alt.value >= 0
                and not alt.text.startswith("-")):
            return False
        text = f"{v.name}:{alt.text}"
        span = _cover(v.span, alt.span)
        if self.text[span.offset:span.end_offset] != text:
            self.error("MPL002", f"a device index is written without spaces: '{text}'", span,
                       fixes=(Fix(f"Write '{text}'", (TextEdit(span, text),)),))
        # else written so, and split only by what is glued after it (`gpu:10d`), which the
        # lexer reported
        expr.value = ast.Indexed(span, v.name, alt.value, text)
        expr.alternative = None
        expr.span = span
        return True

    def parse_value(self, depth: int = 0) -> ast.Node:
        t = self.advance()
        ty = t.type
        if ty == "NUMBER":
            if self.at("UNIT"):
                return make_number(t, self.advance())
            if self.at("DOTDOT"):
                return self.parse_range(t)
            return make_number(t, None)
        if ty == "NAME":
            if self.at("LPAREN"):
                return self.parse_call(t, depth)
            return ast.Ident(tok_span(t), name_text(t.value))
        if ty == "INDEXED":
            return make_indexed(t)
        if ty in ("TRUE", "FALSE"):
            return ast.Bool(tok_span(t), ty == "TRUE")
        if ty == "STRING":
            return make_string(t)
        return self.parse_list(t, depth)

    def parse_range(self, start: Token) -> ast.Range:
        """``a..b`` (the '..' is the current token)."""
        dots = self.advance()
        if self.at("NUMBER"):
            end = self.advance()
            return ast.Range(tok_span(start, end), make_number(start, None), make_number(end, None))
        self.unexpected(f"expected the last number of the range after '{start.value}..', "
                        f"e.g. {start.value}..{start.value}")
        return ast.Range(tok_span(start, dots), make_number(start, None), None)

    def parse_call(self, name: Token, depth: int) -> ast.Call:
        """``NAME ( (NAME = value (, NAME = value)*)? )`` (the '(' is the current token)."""
        lparen = self.advance()
        call = ast.Call(tok_span(name, lparen), make_name(name), [], False)
        if depth >= MAX_LIST_DEPTH:
            # already reported by the lexer: skip the rest of this call
            level = 1
            while level and not self.at_hard_stop():
                t = self.advance()
                level += {"LPAREN": 1, "LBRACK": 1, "RPAREN": -1, "RBRACK": -1}.get(t.type, 0)
            call.span = _cover(call.span, tok_span(self.prev()))
            return call
        fn = name_text(name.value)
        expect_arg = True
        while True:
            if self.at("RPAREN"):
                if expect_arg and call.args:
                    self.unexpected("expected an argument ('NAME = value') after ','")
                call.closed = True
                call.span = _cover(call.span, tok_span(self.advance()))
                return call
            if expect_arg and self.at("NAME") and self.peek().type == "EQ":
                arg_name = self.advance()
                self.advance()
                value = None
                if self.starts_value():
                    value = self.parse_value(depth + 1)
                else:
                    self.unexpected(f"expected a value after '{arg_name.value} =' in "
                                    f"'{fn}(...)'")
                end = value.span if value is not None else tok_span(self.prev())
                call.args.append(ast.Arg(_cover(tok_span(arg_name), end), make_name(arg_name), value))
                expect_arg = False
                continue
            if expect_arg and self.at("NAME") and self.peek().type in ("COMMA", "RPAREN"):
                # `weighted_sum(lru, lfu)`: the weight is missing
                t = self.tok
                self.error("MPL002", f"expected '=' and a weight after '{t.value}': each "
                           f"argument of '{fn}(...)' is 'NAME = value', e.g. {t.value} = 0.5",
                           tok_span(t))
                self.advance()
                call.args.append(ast.Arg(tok_span(t), make_name(t), None))
                expect_arg = False
                continue
            if not expect_arg and self.at("COMMA"):
                self.advance()
                expect_arg = True
                continue
            # anything else ends the call: report the missing ')'
            if self.at(EOF):
                self.report_unclosed(f"expected ')' to close '{fn}('")
            elif self.at_hard_stop() or self.at_item_start() or not expect_arg:
                self.error("MPL002", f"expected ',' or ')' in '{fn}(...)': the call is not closed",
                           tok_span(self.tok),
                           [Related(f"'{fn}(' opened here", tok_span(lparen), self.path)])
            else:
                self.unexpected(f"expected an argument ('NAME = value') or ')' in '{fn}(...)'")
            call.span = _cover(call.span, tok_span(self.prev()))
            return call

    def parse_list(self, lbrack: Token, depth: int) -> ast.ListValue:
        lst = ast.ListValue(tok_span(lbrack), [])
        if depth >= MAX_LIST_DEPTH:
            # already reported by the lexer: skip the rest of this list
            level = 1
            while level and not self.at_hard_stop():
                t = self.advance()
                level += {"LBRACK": 1, "RBRACK": -1}.get(t.type, 0)
            lst.span = _cover(lst.span, tok_span(self.prev()))
            return lst
        expect_value = True
        while True:
            if self.at("RBRACK"):
                if expect_value and lst.items:
                    self.unexpected("expected a value after ','")
                lst.span = _cover(lst.span, tok_span(self.advance()))
                return lst
            if expect_value and self.starts_value():
                lst.items.append(self.parse_value(depth + 1))
                expect_value = False
                continue
            if not expect_value and self.at("COMMA"):
                self.advance()
                expect_value = True
                continue
            # anything else ends the list: report the missing ']'
            if self.at(EOF):
                self.report_unclosed("expected ']' to close the list")
            elif expect_value and not (self.at_hard_stop() or self.at_item_start()):
                self.unexpected("expected a value or ']' in the list")
            else:
                self.error("MPL002", "expected ',' or ']' in the list: this list is not closed",
                           tok_span(self.tok),
                           [Related("list opened here", tok_span(lbrack), self.path)])
            if self.i > 0:
                lst.span = _cover(lst.span, tok_span(self.prev()))
            return lst

    def parse_condition(self, when: Token) -> ast.Condition | None:
        cond = ast.Condition(tok_span(when), None, None, None, None)
        if self.at("NAME"):
            t = self.advance()
            cond.metric = make_name(t)
            cond.span = tok_span(t)
        else:
            self.unexpected("expected a metric name after 'when', e.g. 'when hit_rate < 0.4'")
            return None if cond.metric is None else cond
        if self.at("OP"):
            op = self.advance()
            cond.op, cond.op_span = op.value, tok_span(op)
            cond.span = _cover(cond.span, tok_span(op))
        elif self.at("EQ"):
            self.error("MPL002", "use '==' to compare, not '='", tok_span(self.tok))
            op = self.advance()
            cond.op, cond.op_span = "==", tok_span(op)
            cond.span = _cover(cond.span, tok_span(op))
        else:
            ops = " ".join(schema.COMPARISON_OPS)
            self.unexpected(f"expected a comparison ({ops}) after metric '{cond.metric.text}'")
            return cond
        if self.at("NUMBER"):
            num = self.advance()
            cond.threshold = make_number(num, None)
            cond.span = _cover(cond.span, tok_span(num))
            if self.at("UNIT"):
                u = self.tok
                self.error("MPL002", f"a condition's threshold takes no unit: write "
                           f"'{cond.metric.text} {cond.op} {num.value}'", tok_span(u))
                self.advance()
        else:
            self.unexpected(f"expected a number after '{cond.metric.text} {cond.op}'")
        return cond

    def parse_rule(self, missing_when: bool = False) -> ast.Rule:
        when = self.tok if missing_when else self.advance()
        rule = ast.Rule(tok_span(when), None, None, [], False)
        rule.condition = self.parse_condition(when)
        if self.at("NUMBER") and self.peek().type == "UNIT":
            num, unit = self.tok, self.peek()
            self.error("MPL002", f"expected 'for' before the duration '{num.value} {unit.value}'",
                       tok_span(num))
            self.advance()
            self.advance()
            rule.duration = make_number(num, unit)
        elif self.at("FOR"):
            kw = self.advance()
            if self.at("NUMBER"):
                num = self.advance()
                unit = None
                if self.at("UNIT"):
                    unit = self.advance()
                else:
                    units = ", ".join(schema.RULE_DURATION_UNITS)
                    self.unexpected(f"expected a unit after 'for {num.value}' ({units})")
                rule.duration = make_number(num, unit)
            else:
                self.unexpected(f"expected a number after '{kw.value}', e.g. 'for 100 accesses'")
        rule.span = _cover(rule.span, tok_span(self.prev()))
        if not self.at("LBRACE"):
            self.unexpected("expected '{' and the rule's actions after the condition")
            if not (self.at_hard_stop() or self.at_item_start()):
                # garbage inside the condition: skip to a '{' on this line, or stop
                while not (self.at_hard_stop() or self.at_item_start() or self.at("LBRACE")):
                    self.advance()
            if not self.at("LBRACE"):
                return rule
        brace = self.advance()
        self.open.append(_Open("rule 'when'", brace))
        actions = rule.actions
        while True:
            t = self.tok
            ty = t.type
            if ty == "RBRACE":
                self.advance()
                rule.closed = True
                break
            if ty == EOF or ty in TOP_KEYWORDS:
                self.report_unclosed()
                break
            if ty == "_SEMI":
                self.advance()
            elif ty == "NAME":
                self.parse_set_action(actions)
            elif ty in ("TRIGGER", "REBALANCE"):
                kw = self.advance()
                cls = ast.TriggerAction if ty == "TRIGGER" else ast.RebalanceAction
                if self.at("NAME"):
                    n = self.advance()
                    actions.append(cls(tok_span(kw, n), make_name(n)))
                    self.after_item(actions)
                else:
                    what = "a trigger name (e.g. memory_pressure)" if ty == "TRIGGER" \
                        else "an allocation name (e.g. entropy)"
                    self.unexpected(f"expected {what} after '{kw.value}'")
                    actions.append(cls(tok_span(kw), None))
            elif ty == "WHEN":
                # rules do not nest: most likely this rule's '}' is missing
                self.error("MPL003", "rule is not closed before the next 'when'; add '}'",
                           tok_span(t), [Related("rule opened here", tok_span(brace), self.path)])
                break
            else:
                self.unexpected("expected an action ('name = value', 'trigger NAME', "
                                "'rebalance NAME') or '}'")
                self.skip(actions)
        self.open.pop()
        rule.span = _cover(rule.span, tok_span(self.prev()))
        return rule

    def parse_set_action(self, actions: list) -> None:
        """``NAME (. NAME)? = value``; appends the action (and skipped text) to ``actions``."""
        first = self.advance()
        if self.at("DOT"):
            self.advance()
            if self.at("NAME"):
                last = self.advance()
                target = ast.Name(tok_span(first, last), f"{name_text(first.value)}.{name_text(last.value)}")
            else:
                self.unexpected(f"expected a parameter name after '{first.value}.'")
                target = ast.Name(tok_span(first, self.prev()), f"{first.value}.")
        else:
            target = make_name(first)
        if not self.at("EQ"):
            if target.text in schema.TRIGGERS or target.text in _ALLOCATIONS:
                # `{ memory_pressure }`: a trigger or rebalance without its keyword
                kw = "trigger" if target.text in schema.TRIGGERS else "rebalance"
                self.error("MPL002", f"expected '=' after '{target.text}' in the action; did you "
                           f"mean '{kw} {target.text}'?", tok_span(first))
                cls = ast.TriggerAction if kw == "trigger" else ast.RebalanceAction
                actions.append(cls(target.span, target))
                self.after_item(actions)
                return
            self.unexpected(f"expected '=' after '{target.text}' in the action")
            actions.append(ast.SetAction(target.span, target, None))
            if not (self.at_hard_stop() or self.at_item_start()):
                self.skip(actions)
            return
        self.advance()
        if not self.starts_value():
            self.unexpected(f"expected a value after '{target.text} ='")
            actions.append(ast.SetAction(_cover(target.span, tok_span(self.prev())), target, None))
            if not (self.at_hard_stop() or self.at_item_start() or self.at("_SEMI")):
                self.skip(actions)
            return
        value = self.parse_value()
        actions.append(ast.SetAction(_cover(target.span, value.span), target, value))
        self.after_item(actions)
