"""What each token is, and what is expected at the cursor: a small state machine over the
forgiving token stream (:mod:`lsp.tokens`).

It never fails on broken input, so completion, hover and semantic tokens work on half-typed
files that the parser can only partly understand. The roles it gives are the ones the
grammar implies (SPEC section 2): ``policy NAME extends NAME { NAME { NAME = value ... } }``,
``when METRIC OP NUMBER (for N UNIT)? { action* }`` in rule blocks. Where a file has errors
the roles follow the recovering parser's reading (:mod:`mpl.syntax.recover`): a top-level
keyword ends every construct left open and starts the next top-level item, a ';' is a
separator, a ',' or nothing, as the parser reads it (:mod:`lsp.tokens`), and a '{' opens
what the parser opens there, also on the line after its header.

The scan is linear in the number of tokens: each frame carries what it inherits (its policy,
block and container), so no token walks the stack of open frames.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from mpl import schema
from mpl.syntax.lexer import KEYWORD_TYPES, PUNCT_TYPES
from mpl.syntax.recover import TOP_KEYWORDS, is_policy_name

from .tokens import AS_COMMA, COMMENT, NAME, NUMBER, OP, PUNCT, STRAY, STRING, Token, tokenize

# token roles
KEYWORD, POLICY_DEF, POLICY_REF, BLOCK, PARAM, VALUE, METRIC, UNIT = (
    "keyword", "policy_def", "policy_ref", "block", "param", "value", "metric", "unit")
NUMBER_R, STRING_R, COMMENT_R, OPERATOR, TARGET, TRIGGER, IMPORT_PATH, UNKNOWN = (
    "number", "string", "comment", "operator", "target", "trigger", "import_path", "unknown")
BOOL_R = "bool"
# memory tiers: the kind of a nested item (tier, band, on), a tier's name where it is defined
# and where a transition names it, a transition's event (promote, demote)
SECTION_R, LABEL_R, LABEL_REF, EVENT_R = "section", "label", "label_ref", "event"


@dataclass
class Info:
    """The role of one token and where it sits."""
    role: str
    policy: str | None = None
    block: str | None = None
    param: str | None = None      # schema key ("cache.capacity") or raw name when unknown
    container: str | None = None  # the innermost block or nested item kind ("tier")


@dataclass
class Frame:
    kind: str                      # top | policy | block | section | rule | other
    name: str | None = None        # policy name / block name / a section's kind
    open_index: int = -1           # index of the '{' token (the header's last, where it is missing)
    policy: str | None = None      # the enclosing policy's name
    block: str | None = None       # the innermost block's name
    container: str | None = None   # the innermost block or nested item kind
    policy_open: int = -1          # index of the enclosing policy's '{'

    def child(self, kind: str, name: str | None, open_index: int) -> "Frame":
        """The frame opened inside this one at ``open_index``, inheriting what it does not
        define itself."""
        return Frame(kind, name, open_index,
                     name if kind == "policy" else self.policy,
                     name if kind == "block" else self.block,
                     name if kind in ("block", "section") else self.container,
                     open_index if kind == "policy" else self.policy_open)


@dataclass
class Context:
    """What the cursor expects (for completion)."""
    kind: str
    policy: str | None = None
    block: str | None = None
    param: str | None = None       # schema key of the parameter whose value is being written
    prefix: str = ""
    start: int = 0                 # code-point range the completion replaces
    end: int = 0
    frame_open: int = -1           # index of the '{' of the innermost frame
    policy_open: int = -1
    in_list: bool = False
    after_number: bool = False
    in_string: bool = False
    after_pipe: bool = False       # the value is the second side of a segmented `a | b`
    container: str | None = None   # the innermost block or nested item kind ("tier")
    section: str | None = None     # the kind of the nested item whose head is being written


def _param_key(block: str | None, name: str) -> str | None:
    """The schema key of parameter ``name`` of a block or a nested item kind."""
    b = schema.container(block) if block else None
    if b is None:
        return None
    p = b.param(name)
    sel = getattr(b, "selector", None)          # a band's head: `layers = ...`
    if p is None and sel is not None and sel.name == name:
        p = sel
    return p.key if p is not None else None


def _target_key(name: str) -> str | None:
    return schema.ADAPT_TARGETS.get(name)


def _parser_type(tok: Token | None) -> str:
    """The type :mod:`mpl.syntax.lexer` gives the token (a keyword's, a punctuation's)."""
    if tok is None:
        return "$END"
    if tok.kind == NAME:
        return KEYWORD_TYPES.get(tok.text, "NAME")
    if tok.kind == PUNCT:
        return PUNCT_TYPES.get(tok.text, "PUNCT")
    if tok.kind == AS_COMMA:
        return "COMMA"
    return tok.kind.upper()


def _code_index(tokens: list[Token], i: int, step: int) -> int:
    """Index of the nearest token before (``step`` -1) or after (+1) index ``i`` that is not a
    comment or a stray ';' (the parser never sees comments, and reads a stray ';' as if it
    were not there); -1 or ``len(tokens)`` where there is none. A call walks one run of
    comments and stray ';', which only the token beside it looks across."""
    i += step
    while 0 <= i < len(tokens) and tokens[i].kind in (COMMENT, STRAY):
        i += step
    return i


def _code_token(tokens: list[Token], i: int, step: int) -> Token | None:
    """The token at :func:`_code_index`, None where there is none."""
    i = _code_index(tokens, i, step)
    return tokens[i] if 0 <= i < len(tokens) else None


def _next_index(tokens: list[Token], i: int) -> int:
    """Index of the token after index ``i``, past the stray ';' the parser reads as if they
    were not there (``len(tokens)`` at the end)."""
    i += 1
    while i < len(tokens) and tokens[i].kind == STRAY:
        i += 1
    return i


def _next_token(tokens: list[Token], i: int) -> Token | None:
    j = _next_index(tokens, i)
    return tokens[j] if j < len(tokens) else None


def _starts_top_item(tokens: list[Token], i: int, name_expected: bool) -> bool:
    """Whether the parser ends every open construct at token ``i`` and starts a top-level
    item there: a top-level keyword, unless it stands where a policy name is expected and
    reads as one (``policy policy {``)."""
    ty = _parser_type(tokens[i])
    if ty not in TOP_KEYWORDS:
        return False
    return not (name_expected and is_policy_name(ty, _parser_type(_code_token(tokens, i, 1))))


def starts_top_item(tokens: list[Token], i: int) -> bool:
    """:func:`_starts_top_item` from the text alone: a policy name is taken to be expected
    after any ``policy`` or ``extends``. The scanner, which knows where a policy's header
    is, starts a top-level item wherever this says so (and in a few more places, such as
    the ``policy`` of ``version extends policy {``)."""
    if _parser_type(tokens[i]) not in TOP_KEYWORDS:
        return False               # (no look-back: a run of comments or stray ';' stays linear)
    prev = _code_token(tokens, i, -1)
    return _starts_top_item(tokens, i, prev is not None and prev.text in ("policy", "extends"))


class Scanner:
    """Feeds tokens one by one, tracking frames and the current statement."""

    def __init__(self, tokens: list[Token], start: int = 0) -> None:
        self.tokens = tokens
        self.base = start                  # index of the first token fed (a checkpoint)
        self.frames: list[Frame] = [Frame("top")]
        self.infos: list[Info] = []        # infos[i - base] is the role of tokens[i]
        self._reset_stmt()

    # statement state
    def _reset_stmt(self) -> None:
        self.stmt: list[int] = []
        self.phase = "start"
        self.param: str | None = None      # schema key (or None)
        self.param_name: str | None = None
        self.depth = 0                      # [ ] nesting inside the statement
        self.stmt_head: str | None = None   # first word of the statement
        self.section: str | None = None     # the statement is a nested item of this kind
        self.call = 0                       # ( ) nesting of a call-like value

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def _policy(self) -> str | None:
        return self.frame.policy

    def _block(self) -> str | None:
        return self.frame.block

    def _container(self) -> str | None:
        return self.frame.container

    def _ends_statement(self, i: int) -> bool:
        """A newline before token ``i`` ends the statement, unless a list or a call is open,
        the token is the ``{`` that opens the statement's body (:meth:`_brace_opens_body`) or,
        at the top level, it goes on with the statement's header (the parser reads those
        across lines: ``extends base {`` on the line after ``policy p``)."""
        tok = self.tokens[i]
        if not (tok.nl_before and self.depth == 0 and self.call == 0 and self.stmt):
            return False
        if tok.kind == PUNCT and tok.text == "{" and self._brace_opens_body():
            return False
        if self.frame.kind == "top":
            return self._header_step(i) is None
        return True

    def _brace_opens_body(self) -> bool:
        """A ``{`` after the current statement opens its body, wherever it stands: the parser
        takes the next token for a policy's, a block's, a rule's or a nested item's ``{``
        without looking at lines (``when hit_rate < 0.4 for 100 accesses`` with its ``{`` on
        the next line is a rule). A top-level statement takes it (:meth:`_open` makes it a
        policy's), a statement in a policy when it ends with the block's name
        (``cache`` then ``{``), and in a block or a nested item a rule (``when ...``) or a
        nested item (``tier hot``, ``on promote(hot -> warm)``, ``band layers = 0..7``);
        a ``{`` after a parameter's value is skipped by the parser, not an opening."""
        frame = self.frame
        if frame.kind == "top":
            return True
        if frame.kind == "policy":
            return self.tokens[self.stmt[-1]].kind == NAME
        if frame.kind in ("block", "section"):
            return self.section is not None or self.stmt_head == "when"
        return False

    def _opens_body(self, i: int) -> bool:
        """Token ``i`` starts the body of a policy whose ``{`` is missing: a name and ``{`` right
        after a complete header, not taken by it (``policy p`` then ``cache { ... }``, on
        the same line or the next). The parser reads the body from there, as if the brace
        were there, up to the ``}`` that closes the policy."""
        tok = self.tokens[i]
        if not (self.stmt_head == "policy" and self.phase in ("after_name", "after_parent")
                and _parser_type(tok) == "NAME"):
            return False
        nxt = _code_token(self.tokens, i, 1)
        return nxt is not None and nxt.text == "{" and self._header_step(i) is None

    def _policy_name_expected(self) -> bool:
        """A policy's header has just had its ``policy`` or ``extends``: a name may come."""
        return self.frame.kind == "top" and self.phase in ("name", "parent")

    def _header_step(self, i: int) -> tuple[str, str] | None:
        """(role, next phase) of token ``i`` in a top-level statement after its keyword, as
        the parser reads ``policy NAME (extends NAME)?``, ``import STRING`` and ``version
        NUMBER`` (a keyword is a policy name where it reads as one, and ``policy b a {``
        has lost its ``extends``); None when the token is not part of the header."""
        tok, phase = self.tokens[i], self.phase
        ty, next_ty = _parser_type(tok), _parser_type(_code_token(self.tokens, i, 1))
        if phase in ("name", "parent") and is_policy_name(ty, next_ty):
            return (POLICY_DEF, "after_name") if phase == "name" else (POLICY_REF, "after_parent")
        if phase in ("name", "after_name") and ty == "EXTENDS":
            return KEYWORD, "parent"
        if phase == "after_name" and ty == "NAME" and next_ty == "LBRACE" and tok.text not in schema.BLOCKS:
            return POLICY_REF, "after_parent"
        if (phase, ty) in (("import", "STRING"), ("version", "NUMBER")):
            return (IMPORT_PATH if ty == "STRING" else NUMBER_R), "done"
        return None

    def _value_role(self, tok: Token) -> str:
        if tok.text in ("true", "false"):
            return BOOL_R
        p = schema.PARAMS.get(self.param) if self.param else None
        if p is not None and p.type == schema.METRIC_LIST:
            return METRIC
        return VALUE

    def feed(self, i: int) -> None:
        tok = self.tokens[i]
        tokens = self.tokens
        frame = self.frame
        kind, text = tok.kind, tok.text
        if kind == COMMENT:               # the parser never sees comments
            self.infos.append(Info(COMMENT_R, self._policy(), self._block(), None, self._container()))
            return
        if kind == STRAY:                 # a ';' the parser reads as if it were not there
            self.infos.append(Info(OPERATOR, self._policy(), self._block(), None, self._container()))
            return
        if kind == AS_COMMA:              # a ';' the parser reads as ','
            tok = tok._replace(kind=PUNCT, text=",")
            kind, text = PUNCT, ","
        if frame.kind == "top" and self._opens_body(i):
            self._open(self.stmt[-1])      # the policy's frame, opened after its header
            frame = self.frame
        elif self._ends_statement(i):
            self._reset_stmt()
        if _starts_top_item(tokens, i, self._policy_name_expected()):
            del self.frames[1:]            # the parser's recovery: whatever is open ends here
            self._reset_stmt()
            frame = self.frame
        info = Info(UNKNOWN, self._policy(), self._block(), None, self._container())
        if kind == PUNCT and text == "{":
            self._open(i)
            info.role = OPERATOR
            self.infos.append(info)
            return
        if kind == PUNCT and text == "}":
            if len(self.frames) > 1:
                self.frames.pop()
            self._reset_stmt()
            info.role = OPERATOR
            info.policy, info.block, info.container = self._policy(), self._block(), self._container()
            self.infos.append(info)
            return
        if kind == PUNCT and text == ";":
            info.role = OPERATOR
            self.infos.append(info)
            if self.section is not None and frame.kind in ("block", "section"):
                # in a nested item's head the parser skips to the item's '{' on this line or
                # at the start of the next (`tier ; hot {` is an item with no name)
                self.phase = "head_skip"
            else:
                self._reset_stmt()
            return
        nxt = _next_token(tokens, i)
        if (frame.kind in ("block", "section") and not self.stmt and kind == NAME
                and text in schema.BLOCKS and nxt is not None and nxt.text == "{" and len(self.frames) > 2):
            # `NAME {` with a block's name inside a block: the enclosing block (and items)
            # were left unclosed (half-typed); recover as the parser does, at policy level
            while len(self.frames) > 2 and self.frame.kind in ("block", "section"):
                self.frames.pop()
            frame = self.frame
            info.block = info.container = None
        if frame.kind == "top":
            self._feed_top(i, tok, info)
        elif frame.kind == "policy":
            self._feed_policy(tok, info, nxt)
        elif frame.kind in ("block", "rule", "section"):
            self._feed_body(i, tok, info, nxt)
        else:
            info.role = NUMBER_R if kind == NUMBER else STRING_R if kind == STRING else UNKNOWN
        self.stmt.append(i)
        self.infos.append(info)

    def _open(self, i: int) -> None:
        frame = self.frame
        if frame.kind == "top":
            name = None
            if self.stmt_head == "policy":
                for j in self.stmt:
                    if self.infos[j - self.base].role == POLICY_DEF:
                        name = self.tokens[j].text
                        break
            new = frame.child("policy", name, i)
        elif frame.kind == "policy":
            name = None
            for j in reversed(self.stmt):
                if self.tokens[j].kind == NAME:
                    name = self.tokens[j].text
                    break
            new = frame.child("block", name, i)
        elif frame.kind in ("block", "section") and self.section is not None:
            new = frame.child("section", self.section, i)
        elif frame.kind in ("block", "section") and self.stmt_head == "when":
            new = frame.child("rule", frame.name, i)
        else:
            new = frame.child("other", None, i)
        self.frames.append(new)
        self._reset_stmt()

    def _feed_top(self, i: int, tok: Token, info: Info) -> None:
        """A top-level statement: its keyword, then its header (:meth:`_header_step`); what
        does not fit is skipped text, as the parser skips it."""
        if not self.stmt:
            self.stmt_head = tok.text if tok.kind == NAME else None
            if _parser_type(tok) in TOP_KEYWORDS:
                info.role = KEYWORD
                self.phase = "name" if tok.text == "policy" else tok.text
                return
        step = self._header_step(i)
        if step is not None:
            info.role, self.phase = step
            if info.role == POLICY_DEF:
                info.policy = tok.text
            return
        self.phase = "skipped"
        info.role = NUMBER_R if tok.kind == NUMBER else STRING_R if tok.kind == STRING else UNKNOWN

    def _feed_policy(self, tok: Token, info: Info, nxt: Token | None) -> None:
        if tok.kind == NAME:
            info.role = BLOCK
            info.block = tok.text
            if not self.stmt:
                self.stmt_head = tok.text
        elif tok.kind == NUMBER:
            info.role = NUMBER_R
        elif tok.kind == STRING:
            info.role = STRING_R

    def _is_section(self, i: int, text: str, nxt: Token | None) -> bool:
        """A nested item starts at token ``i``: a known kind (``tier``, ``band``, ``on``)
        unless a parameter's ``=`` or ``.`` follows it (the parser reads ``tier ; hot {`` and
        ``tier {`` as items whose head is missing), or any ``NAME NAME {`` / ``NAME NAME (``."""
        known = text in schema.SECTIONS
        if nxt is None or nxt.nl_before:
            return known                 # `tier` alone on its line: being typed
        if nxt.kind == NAME:
            if known:
                return True
            after = _next_token(self.tokens, _next_index(self.tokens, i))
            return after is not None and after.kind == PUNCT and after.text in ("{", "(")
        return known and not (nxt.kind == PUNCT and nxt.text in ("=", "."))

    def _condition_without_when(self, i: int) -> bool:
        """``NAME OP NUMBER`` from token ``i``, followed by ``for`` or ``{`` (on any line): a
        rule whose ``when`` is missing, as the parser's ``looks_like_condition`` sees it."""
        toks = self.tokens
        j = _code_index(toks, i, 1)
        if j >= len(toks) or toks[j].kind != OP:
            return False
        j = _code_index(toks, j, 1)
        if j >= len(toks) or toks[j].kind != NUMBER:
            return False
        j = _code_index(toks, j, 1)
        return j < len(toks) and (toks[j].text == "{" and toks[j].kind == PUNCT
                                  or _parser_type(toks[j]) == "FOR")

    def _feed_head(self, tok: Token, info: Info, nxt: Token | None) -> bool:
        """The head of a nested item (``tier hot``, ``band layers = ...``,
        ``on demote(hot -> warm)``); False when the token is not part of it."""
        kind, text, phase = tok.kind, tok.text, self.phase
        if phase == "head" and kind == NAME:
            spec = schema.SECTIONS.get(self.section)
            shape = spec.head if spec is not None else (
                schema.EDGE if nxt is not None and nxt.text == "(" else
                schema.SELECTOR if nxt is not None and nxt.text == "=" else schema.LABEL)
            if shape == schema.SELECTOR:
                info.role = PARAM
                self.param = _param_key(self.section, text)
                self.param_name = text
                info.param = self.param or text
                self.phase = "name"
            elif shape == schema.EDGE:
                info.role = EVENT_R
                info.param = self.section
                self.phase = "edge_open"
            else:
                info.role = LABEL_R
                self.phase = "after_head"
            return True
        steps = {("edge_open", "("): "edge_src", ("edge_arrow", "->"): "edge_dst",
                 ("edge_close", ")"): "after_head"}
        if kind == PUNCT and (phase, text) in steps:
            info.role = OPERATOR
            self.phase = steps[(phase, text)]
            return True
        if kind == NAME and phase in ("edge_src", "edge_dst"):
            info.role = LABEL_REF
            self.phase = "edge_arrow" if phase == "edge_src" else "edge_close"
            return True
        return False

    def _feed_call(self, tok: Token, info: Info) -> None:
        """Inside a call-like value: ``weighted_sum(lru = 0.5, lfu = 0.5)``."""
        kind, text = tok.kind, tok.text
        info.param = self.param
        if kind == PUNCT and text == ")":
            info.role = OPERATOR
            self.call -= 1
            self.phase = "after_value" if not self.call else "call_after"
        elif kind == PUNCT and text in ("=", ","):
            info.role = OPERATOR
            self.phase = "call_value" if text == "=" else "call_arg"
        elif kind == PUNCT and text == "(":
            info.role = OPERATOR
            self.call += 1
            self.phase = "call_arg"
        elif kind == NUMBER:
            info.role = NUMBER_R
            self.phase = "call_after"
        elif kind == NAME:
            info.role = VALUE
            self.phase = "call_eq" if self.phase == "call_arg" else "call_after"
        elif kind == STRING:
            info.role = STRING_R

    def _feed_body(self, i: int, tok: Token, info: Info, nxt: Token | None) -> None:
        frame = self.frame
        kind, text = tok.kind, tok.text
        block = frame.name
        rule_block = (schema.block(block).rules if schema.block(block) else False) or frame.kind == "rule"
        if self.call:
            self._feed_call(tok, info)
            return
        if self.phase == "head_skip":      # skipped by the parser, up to the item's '{'
            info.role = NUMBER_R if kind == NUMBER else STRING_R if kind == STRING else UNKNOWN
            return
        # a NAME followed by '=' after a complete value starts a new statement
        if (kind == NAME and self.stmt and self.depth == 0 and nxt is not None
                and nxt.text == "=" and self.phase in ("after_value", "after_cond", "after_head",
                                                       "after_number")):
            self._reset_stmt()
        if self.section is not None and self._feed_head(tok, info, nxt):
            return
        if not self.stmt:
            self.stmt_head = text if kind == NAME else None
            if kind == NAME and frame.kind in ("block", "section") and self._is_section(i, text, nxt):
                info.role = SECTION_R
                self.section = text
                self.phase = "head"
                return
            if kind == NAME and frame.kind in ("block", "section") and self._condition_without_when(i):
                info.role = METRIC          # the parser reads a rule (one error, its 'when' missing)
                self.stmt_head = "when"
                self.phase = "cond_op"
                return
            if kind == NAME:
                if frame.kind == "block" and text == "when" and rule_block:
                    info.role = KEYWORD
                    self.phase = "cond_metric"
                    return
                if frame.kind == "rule" and text in ("trigger", "rebalance"):
                    info.role = KEYWORD
                    self.phase = text
                    return
                if frame.kind == "rule":
                    info.role = TARGET
                    self.param = _target_key(text)
                    self.param_name = text
                    info.param = self.param or text
                    self.phase = "name"
                    return
                info.role = PARAM
                self.param = _param_key(block, text)
                self.param_name = text
                info.param = self.param or text
                self.phase = "name"
                return
        phase = self.phase
        info.param = self.param
        if kind == PUNCT and text == ".":
            info.role = OPERATOR
            self.phase = "dot"
            return
        if phase == "dot" and kind == NAME:
            full = f"{self.param_name}.{text}"
            self.param_name = full
            self.param = _target_key(full) or (full if full in schema.PARAMS else None)
            info.role = TARGET if frame.kind == "rule" else PARAM
            info.param = self.param or full
            self.phase = "name"
            return
        if phase == "trigger":
            info.role = TRIGGER if kind == NAME else UNKNOWN
            self.phase = "after_value"
            return
        if phase == "rebalance":
            info.role = VALUE if kind == NAME else UNKNOWN
            info.param = schema.REBALANCE
            self.param = schema.REBALANCE
            self.phase = "after_value"
            return
        if kind == PUNCT and text == "(" and phase == "after_value" and self.depth == 0:
            info.role = OPERATOR           # `weighted_sum(`: a call-like value
            self.call = 1
            self.phase = "call_arg"
            return
        if kind == PUNCT and text in ("=", "|", ":", ",", ".."):
            info.role = OPERATOR
            self.phase = "value"
            return
        if kind == PUNCT and text == "[":
            info.role = OPERATOR
            self.depth += 1
            self.phase = "value"
            return
        if kind == PUNCT and text == "]":
            info.role = OPERATOR
            self.depth = max(0, self.depth - 1)
            self.phase = "after_value"
            return
        if kind == NAME and text == "when" and phase in ("after_value", "after_number"):
            info.role = KEYWORD
            self.phase = "cond_metric"
            return
        if kind == NAME and text == "for" and phase in ("after_cond", "after_number") and self.stmt_head == "when":
            info.role = KEYWORD
            self.phase = "duration"
            return
        if kind == OP:
            info.role = OPERATOR
            self.phase = "cond_num"
            return
        if phase == "cond_metric" and kind == NAME:
            info.role = METRIC
            info.param = None
            self.phase = "cond_op"
            return
        if kind == NUMBER:
            info.role = NUMBER_R
            if phase == "cond_num":
                self.phase = "after_cond"
            elif phase == "duration":
                self.phase = "duration_unit"
            else:
                self.phase = "after_number"
            return
        if kind == NAME and phase in ("after_number", "duration_unit"):
            info.role = UNIT
            if phase == "duration_unit":
                info.param = None
                self.phase = "after_cond"
            else:
                self.phase = "after_value"
            return
        if kind == NAME and phase == "value":
            info.role = self._value_role(tok)
            self.phase = "after_value" if self.depth == 0 else "value"
            return
        if kind == STRING:
            info.role = STRING_R
            self.phase = "after_value"
            return
        info.role = UNKNOWN

    def run(self, upto: int | None = None) -> "Scanner":
        n = len(self.tokens) if upto is None else upto
        for i in range(self.base + len(self.infos), n):
            self.feed(i)
        return self

    def info(self, i: int) -> Info:
        return self.infos[i - self.base]


def checkpoints(tokens: list[Token]) -> list[int]:
    """Indices of the tokens that start a top-level item (:func:`starts_top_item`): the
    scanner's state there is known, so a scan for the cursor can start at the last one
    instead of at the top of the file."""
    return [0, *(i for i in range(1, len(tokens)) if starts_top_item(tokens, i))]


def scanner_upto(tokens: list[Token], cut: int, starts: list[int] | None = None) -> Scanner:
    """A scanner that has consumed ``tokens[:cut]``, started at the last checkpoint."""
    base = 0
    if starts:
        k = bisect.bisect_right(starts, cut - 1) - 1
        base = starts[k] if k >= 0 else 0
        if base >= cut:
            base = 0
    return Scanner(tokens, base).run(cut)


def classify(tokens: list[Token]) -> list[Info]:
    """The role of every token."""
    return Scanner(tokens).run().infos


# ---------------------------------------------------------------- frames and extents
def frame_end(tokens: list[Token], open_index: int) -> int:
    """Index of the '}' matching the '{' at ``open_index``; for an unclosed frame, of the
    token that starts the next top-level item (where the parser ends it), else len(tokens).
    A policy whose '{' is missing opens at the last token of its header (its body follows
    that token, :meth:`Scanner._opens_body`)."""
    depth = 0 if tokens[open_index].text == "{" else 1
    for j in range(open_index, len(tokens)):
        t = tokens[j]
        if t.kind == NAME and j > open_index and starts_top_item(tokens, j):
            return j
        if t.kind == PUNCT:
            if t.text == "{":
                depth += 1
            elif t.text == "}":
                depth -= 1
                if depth == 0:
                    return j
    return len(tokens)


def params_set_in(tokens: list[Token], open_index: int) -> set[str]:
    """Names written as ``NAME =`` directly inside the frame opened at ``open_index``, read
    as the parser reads them (``capacity ; = 8`` and ``capacity # c`` then ``= 8`` set
    ``capacity``)."""
    out: set[str] = set()
    end = frame_end(tokens, open_index)
    depth = 0
    for j in range(open_index + 1, end):
        t = tokens[j]
        if t.kind == PUNCT and t.text in "{[":
            depth += 1
        elif t.kind == PUNCT and t.text in "}]":
            depth -= 1
        elif depth == 0 and t.kind == NAME:
            k = _code_index(tokens, j, 1)
            if k < end and tokens[k].text == "=":
                out.add(t.text)
    return out


def blocks_in(tokens: list[Token], open_index: int) -> set[str]:
    """Names of the blocks (``NAME {``) directly inside the policy opened at ``open_index``,
    read as the parser reads them (``cache ; {`` and ``cache # c`` then ``{`` are blocks)."""
    out: set[str] = set()
    end = frame_end(tokens, open_index)
    depth = 0
    for j in range(open_index + 1, end):
        t = tokens[j]
        if t.kind == PUNCT and t.text == "{":
            k = _code_index(tokens, j, -1)
            if depth == 0 and k > open_index and tokens[k].kind == NAME:
                out.add(tokens[k].text)
            depth += 1
        elif t.kind == PUNCT and t.text == "}":
            depth -= 1
    return out


# ---------------------------------------------------------------- the cursor
def cursor_context(text: str, tokens: list[Token], offset: int, starts: list[int] | None = None) -> Context:
    """What is expected at ``offset``; the word being typed (if any) is the prefix."""
    # the word under/just before the cursor is the prefix being typed
    n = 0
    while n < len(tokens) and tokens[n].end < offset:
        n += 1
    prefix, start, end = "", offset, offset
    in_string = False
    cut = n
    if n < len(tokens):
        t = tokens[n]
        if t.start < offset <= t.end and t.kind in (NAME, NUMBER):
            prefix, start, end, cut = t.text[: offset - t.start], t.start, t.end, n
        elif t.start < offset <= t.end and t.kind == STRING and not (t.end == offset and len(t.text) > 1 and t.text.endswith('"')):
            in_string = True
            prefix, start, end, cut = t.text[1: offset - t.start], t.start + 1, t.end - (1 if t.text.endswith('"') and len(t.text) > 1 else 0), n
        elif t.end == offset:
            cut = n + 1
        # a token starting after the cursor is not consumed
    sc = scanner_upto(tokens, cut, starts)
    frame = sc.frame
    ctx = Context("none", sc._policy(), sc._block(), sc.param, prefix, start, end,
                  frame.open_index, -1, sc.depth > 0, False, in_string,
                  container=sc._container(), section=sc.section)
    ctx.policy_open = frame.policy_open
    # a newline between the last consumed token and the cursor starts a new statement
    last = tokens[cut - 1] if cut > 0 else None
    gap = text[last.end:start] if last is not None else ""
    if last is not None and sc.depth == 0 and sc.call == 0 and sc.stmt and ("\n" in gap or "\r" in gap):
        sc._reset_stmt()
        ctx.param = None
        ctx.section = None
    ctx.after_pipe = last is not None and last.kind == PUNCT and last.text == "|"
    if in_string:
        ctx.kind = "import_path" if frame.kind == "top" and sc.stmt_head == "import" else "none"
        return ctx
    if frame.kind == "top":
        if not sc.stmt:
            ctx.kind = "top"
        elif sc.stmt_head == "import" and len(sc.stmt) == 1:
            ctx.kind = "import_path"
        elif last is not None and last.text == "extends":
            ctx.kind = "extends"
        elif sc.stmt_head == "policy" and len(sc.stmt) == 2:
            ctx.kind = "after_policy_name"
        return ctx
    if frame.kind == "policy":
        ctx.kind = "block_name" if not sc.stmt else "none"
        return ctx
    if frame.kind not in ("block", "rule", "section"):
        return ctx
    phase = sc.phase
    if not sc.stmt:
        ctx.kind = "rule_action" if frame.kind == "rule" else "param_name"
        return ctx
    if sc.call and phase == "call_arg":
        ctx.kind = "call_arg"
        return ctx
    if sc.call:
        return ctx
    if sc.section is not None and phase == "head" and last is not None and last.end < offset:
        ctx.kind = "section_head"
        return ctx
    if sc.section is not None and phase in ("head", "edge_src", "edge_dst"):
        ctx.kind = "section_head" if phase == "head" else "tier_name"
        return ctx
    if phase == "cond_metric":
        ctx.kind = "metric"
    elif phase == "cond_op":
        ctx.kind = "op"
    elif phase in ("trigger",):
        ctx.kind = "trigger"
    elif phase == "rebalance":
        ctx.kind = "value"
        ctx.param = schema.REBALANCE
    elif phase == "value":
        ctx.kind = "value"
    elif phase == "after_number" and last is not None and last.kind == NUMBER:
        ctx.kind = "unit"
        ctx.after_number = True
    elif phase == "duration_unit":
        ctx.kind = "duration_unit"
    elif phase == "name" and last is not None and last.kind == NAME and frame.kind == "rule" and last.end == offset:
        ctx.kind = "rule_action"
    elif phase == "after_value" and last is not None and last.end < offset and sc.stmt_head != "when":
        ctx.kind = "after_value"
    return ctx


def context_at(text: str, offset: int, tokens: list[Token] | None = None) -> Context:
    """Convenience: tokenize (unless given) and find the context at ``offset``."""
    return cursor_context(text, tokenize(text) if tokens is None else tokens, offset)
