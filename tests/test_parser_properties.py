"""Property tests: random and mutated inputs never make the parser raise, spans stay inside."""

import glob
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from property_profiles import prop

from mpl.syntax import ast, lalr, parse
from mpl.syntax.lexer import tokenize
from mpl.syntax.parser import parse_recovering
from found_cases import FOUND
from parser_helpers import dump, line_starts

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
TEXTS = [open(f, encoding="utf-8").read() for f in sorted(glob.glob(os.path.join(CORPUS, "*.moe")))]
FULL = open(os.path.join(CORPUS, "full_syntax.moe"), encoding="utf-8").read()

# pieces of the language, to build plausible broken files
PIECES = ["policy", "p", "{", "}", "[", "]", "cache", "capacity", "=", "4", "12GiB", "lru", "|",
          ":", "when", "hit_rate", "<", "0.5", "for", "100", "accesses", "trigger", "rebalance",
          ";", ",", ".", "\n", " ", "#c\n", '"s"', '"', "-", "version", "import", "extends",
          "adapt", "true", "1e", "@", "é", "hierarchy", "tier", "band", "layers", "0..7", "..",
          "on", "demote", "(", ")", "->", "weighted_sum", "gpu:1", "per_layer_hierarchy"]


def check(text):
    r = parse(text)
    n = len(text)
    # the last-resort catch-all must never be what handled the input
    assert not any("internal parser error" in d.message for d in r.diagnostics), r.diagnostics
    for d in r.diagnostics:
        assert 0 <= d.span.offset <= d.span.end_offset <= n, d
        assert d.code.startswith("MPL") and d.message
        for rel in d.related:
            assert 0 <= rel.span.offset <= rel.span.end_offset <= n
    for node in ast.walk(r.document):
        assert 0 <= node.span.offset <= node.span.end_offset <= n
    for c in r.document.comments:
        assert text[c.span.offset:c.span.end_offset] == c.text
    # no silent failure: an AST without errors means no error diagnostics, and the reverse
    if r.ok:
        assert not any(isinstance(x, ast.ErrorNode) for x in ast.walk(r.document))
    return r


_settings = prop(150)


@_settings
@given(st.text(max_size=300))
def test_random_text(text):
    check(text)


@_settings
@given(st.lists(st.sampled_from(PIECES), max_size=80))
def test_random_token_soup(pieces):
    agree(" ".join(pieces))
    agree("".join(pieces))


VALID_PIECES = ["policy p {", "policy q extends p {", "}", "cache {", "adapt {",
                "capacity = 4", "eviction = lfu | lru", "pin = [1, 2]", "ttl = 8 : 4 when hit_rate < 0.5",
                "when hit_rate < 0.5 for 3 steps {", "eviction = lru", "trigger ttl", "rebalance uniform",
                "x.y = 1", "version 1", 'import "a"', ";", "\n", "# c\n", "m = []", "s = \"t\"",
                "hierarchy {", "per_layer_hierarchy {", "tier hot {", "band layers = 0..7 {",
                "on demote(hot -> warm) {", "location = gpu:1", "e = weighted_sum(lru = 0.5, lfu = 1)",
                "x = f()"]


@_settings
@given(st.lists(st.sampled_from(VALID_PIECES), max_size=40))
def test_plausible_sequences(pieces):
    """Sequences of well-formed fragments: often valid, often subtly not."""
    agree(" ".join(pieces))


def mutated(text: str, ops) -> str:
    """``text`` with each ``(op, at, length, piece)`` applied in turn: ``del`` removes
    ``length`` characters, ``ins`` inserts ``piece``, ``dup`` repeats ``length`` characters."""
    for op, i, k, piece in ops:
        i = min(i, len(text))
        if op == "del":
            text = text[:i] + text[i + k:]
        elif op == "ins":
            text = text[:i] + piece + text[i:]
        else:
            text = text[:i] + text[i:i + k] + text[i:]
    return text


@_settings
@given(st.sampled_from(TEXTS), st.data())
def test_mutated_corpus(text, data):
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["del", "ins", "dup"]),
                                       st.integers(0, len(text)), st.integers(0, 20),
                                       st.sampled_from(PIECES)), min_size=1, max_size=5))
    agree(mutated(text, ops))


@pytest.mark.parametrize("name,text", FOUND, ids=[n for n, _ in FOUND])
def test_the_found_cases_parse_alike(name, text):
    """Every input a hunt or a user found (tests/found_cases.py): both parsers accept it or
    neither, with the same AST."""
    agree(text)


def agree(text):
    """The two parsers accept exactly the same files, and build the same AST on them."""
    r = check(text)
    lexed = tokenize(text)
    try:
        lalr_items = None if lexed.diagnostics else lalr.parse_tokens(lexed.tokens)
    except lalr.SyntaxFailure:
        lalr_items = None
    items, diags = parse_recovering(text)
    assert r.ok == (lalr_items is not None) == (not diags and not lexed.diagnostics)
    if lalr_items is not None:
        assert dump(items) == dump(lalr_items) == dump(r.document.items)


@_settings
@given(st.binary(max_size=200))
def test_binary_garbage(data):
    check(data.decode("latin-1"))


def test_large_binary_garbage():
    import random

    rng = random.Random(1)
    check(bytes(rng.randrange(256) for _ in range(50000)).decode("latin-1"))


def test_cut_at_every_position():
    """A half-typed file: every prefix of the richest corpus file."""
    for i in range(len(FULL) + 1):
        r = check(FULL[:i])
        # what precedes the cut is kept: the policies whose text is complete are there
        if i == len(FULL):
            assert r.ok
    # a cut inside the second policy keeps the first one whole
    cut = FULL.index("policy tuned") + len("policy tuned extends base {\n    cache {")
    r = parse(FULL[:cut])
    base = r.document.policies[0]
    assert base.closed and base.name.text == "base" and len(base.blocks) == 6
    assert r.document.policies[1].closed is False
    assert r.diagnostics[-1].code == "MPL003"


def covered_exactly_once(text):
    """Every character outside whitespace lies in exactly one token or comment."""
    from mpl.syntax.lexer import tokenize

    lx = tokenize(text)
    marks = [0] * len(text)
    for a, b in [(t.start_pos, t.end_pos) for t in lx.tokens] + \
                [(c.span.offset, c.span.end_offset) for c in lx.comments]:
        assert a < b
        for i in range(a, b):
            marks[i] += 1
    for i, ch in enumerate(text):
        if ch in " \t\r\f\v\n" or (i == 0 and ch == "\ufeff"):
            assert marks[i] <= 1
        else:
            assert marks[i] == 1, (i, ch, text)
    # tokens come in order and their positions agree with their line/column (a line ends at
    # '\n', '\r\n' or a lone '\r')
    starts = line_starts(text)
    for t in lx.tokens:
        assert text[t.start_pos:t.end_pos] == t.value
        done = [s for s in starts if s <= t.start_pos]
        assert t.line == len(done)
        assert t.column == t.start_pos - done[-1] + 1


@_settings
@given(st.lists(st.sampled_from(PIECES + ["!", "!=", "- ", "-.", "1.", "1.2.3", "\\", "12GiB",
                                          "\ufeff", "\u00a0", "\t", "\r"]), max_size=60))
def test_tokens_cover_the_text(pieces):
    covered_exactly_once("".join(pieces))
    covered_exactly_once(" ".join(pieces))


@_settings
@given(st.text(max_size=200))
def test_tokens_cover_random_text(text):
    covered_exactly_once(text)


def test_long_runs_are_linear():
    """Pathological runs (trailing spaces, '-', '[') tokenize in linear time: a quadratic
    lexer would take minutes here."""
    for text in ("policy" + " " * 200000, "-" * 100000, "[" * 100000, '"' * 100001,
                 "@" * 100000, "a " * 100000):
        check(text)


def test_rule_or_action_keyword_after_a_value_on_the_same_line():
    # found by test_mutated_corpus: separators are optional, so both parsers must accept a
    # rule (or an action keyword) right after a complete item on the same line
    agree("policy p {\n cache {\n  expert_size_gb = 0.5G        when transfer_rate > 1.5 { x = 1 }\n }\n}\n")
    agree("policy p { cache { capacity = 4 } adapt { when hit_rate < 0.5 { capacity = 2 trigger ttl rebalance uniform } } }")
    agree("policy p { adapt { when hit_rate < 0.5 { eviction = lru when } } }")
    agree("policy p { cache { ttl = 5 when hit_rate < 0.5 } }")


def test_a_section_after_an_item_on_the_same_line():
    # found by test_derivations_of_the_grammar: a section with a selector head (`NAME NAME =
    # value {`) right after a complete item on the same line is grammatical, as a section
    # with a label or an edge head is; the recovering parser read it as garbage after a value
    agree("policy p{e{r=[]e p=e{}}}")
    agree('policy t{n{y=5 m c=""{}}}policy t extends t{}')
    agree('policy b{o{y t(e->h){e c{when r==2 for 1steps{trigger y}o=u}}when y==0{}}e{e=1 n e=""{}}}')
    agree("policy t{y{n=\"\"e g=[t(y=0)]{}}}")
    agree("policy p {\n  per_layer_hierarchy { x = 2 band layers = 0..7 { tier hot { capacity = 4 } } }"
          "\n}\n")


# ---------------------------------------------------------------- derivations of the grammar
# Random sentences of mpl/syntax/grammar.lark (names, values of every kind, parameters with
# fallbacks and conditional values, rules and actions, sections with the three heads, nested),
# laid out with random spaces and line breaks, then optionally cut and spliced: a file
# mutation of the corpus rarely builds (a section after an item on the same line, a keyword
# as a policy name, an edge head inside a band).
_NAMES = st.sampled_from(["cache", "tier", "band", "on", "hot", "warm", "x", "_y", "capacity",
                          "eviction", "layers", "demote", "lru", "gpu", "adapt", "hit_rate",
                          "hierarchy", "per_layer_hierarchy", "weighted_sum", "mode"])
_GAP = st.sampled_from([" ", " ", "  ", "\n", "\n  ", "", " # c\n"])
_NUMBER = st.sampled_from(["1", "0", "-1", "0.5", "1e3", "12", ".5", "40."])
_UNIT = st.sampled_from(["GiB", " GiB", "MB", "accesses", " steps", ""])


def _join(parts, sep=" "):
    return st.tuples(*parts).map(lambda xs: sep.join(xs))


_VALUE = st.recursive(
    st.one_of(_join([_NUMBER, _UNIT], ""), _join([_NUMBER, st.just(".."), _NUMBER], ""), _NAMES,
              st.sampled_from(["gpu:1", "cpu:0", "true", "false", '"s"'])),
    lambda inner: st.one_of(
        st.tuples(_NAMES, st.lists(_join([_NAMES, st.just("="), inner]), max_size=2))
        .map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]")),
    max_leaves=4)
_COND = _join([_NAMES, st.sampled_from(["<", ">", "<=", ">=", "!=", "=="]), _NUMBER])
_OR_NOT = st.just("")
_FALLBACK = st.one_of(_OR_NOT, _VALUE.map(lambda v: f" | {v}"))
_CONDITIONAL = st.one_of(_OR_NOT, st.tuples(_VALUE, _COND).map(lambda t: f" : {t[0]} when {t[1]}"))
_EXPR = st.tuples(_VALUE, _FALLBACK, _CONDITIONAL).map("".join)
_PARAM = _join([_NAMES, _GAP, st.just("="), _GAP, _EXPR], "")
_ACTION = st.one_of(_join([_NAMES, st.just("="), _VALUE]),
                    _join([st.sampled_from(["trigger", "rebalance"]), _NAMES]))
_FOR = st.one_of(_OR_NOT, _join([_NUMBER, st.sampled_from(["accesses", "steps", "x"])])
                 .map(lambda f: " for " + f))
_RULE = st.tuples(_COND, _FOR, _GAP, st.lists(_ACTION, max_size=3)).map(
    lambda t: f"when {t[0]}{t[1]}{t[2]}{{{'; '.join(t[3])}}}")
_HEAD = st.one_of(_NAMES, _join([_NAMES, _GAP, st.just("="), _GAP, _VALUE], ""),
                  _join([_NAMES, st.just("("), _NAMES, st.just("->"), _NAMES, st.just(")")], ""))
_ITEMS = st.recursive(
    st.lists(st.one_of(_PARAM, _RULE, st.just(";")), max_size=3),
    lambda inner: st.lists(st.one_of(
        _PARAM, _RULE, st.just(";"),
        st.tuples(_NAMES, _HEAD, _GAP, inner)
        .map(lambda t: f"{t[0]} {t[1]}{t[2]}{{{' '.join(t[3])}}}")),
        max_size=3),
    max_leaves=6)
_BLOCK = st.tuples(_NAMES, _GAP, _ITEMS, _GAP).map(lambda t: f"{t[0]}{t[1]}{{{t[3].join(t[2])}}}")
_POLICY_NAME = st.one_of(_NAMES, st.sampled_from(["version", "import", "policy", "extends",
                                                  "when", "for", "trigger", "rebalance", "true",
                                                  "false"]))
_EXTENDS = st.one_of(_OR_NOT, _POLICY_NAME.map(lambda n: " extends " + n))
_POLICY = st.tuples(_POLICY_NAME, _EXTENDS, _GAP, st.lists(_BLOCK, max_size=3), _GAP).map(
    lambda t: f"policy {t[0]}{t[1]}{t[2]}{{{t[4].join(t[3])}}}")
_FILE = st.lists(st.one_of(_POLICY, _NUMBER.map(lambda n: "version " + n),
                           st.just('import "a"'), st.just(";")), min_size=1, max_size=3)


@_settings
@given(_FILE, st.lists(st.tuples(st.sampled_from(["del", "ins", "dup"]), st.integers(0, 400),
                                 st.integers(1, 12), st.sampled_from(PIECES)), max_size=2),
       _GAP)
def test_derivations_of_the_grammar(parts, ops, gap):
    """Both parsers accept the same sentences of the grammar, laid out any way, and the same
    near-sentences, with the same AST."""
    agree(mutated(gap.join(parts), ops))
