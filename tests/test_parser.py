"""Parser: every corpus file, the AST and its spans, the LALR and recovering parsers agree."""

import glob
import os

import pytest

from mpl.syntax import ParseResult, ast, parse
from mpl.syntax.parser import parse_recovering
from parser_helpers import dump

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
CORPUS_FILES = sorted(glob.glob(os.path.join(CORPUS, "*.moe")) + glob.glob(os.path.join(CORPUS, "*.policy")))


def src(text, node):
    return text[node.span.offset:node.span.end_offset]


def test_corpus_exists_with_every_seed_policy():
    names = {os.path.splitext(os.path.basename(f))[0] for f in CORPUS_FILES}
    # the policy texts of the seed document, one file each
    assert {"balanced", "aggressive", "demo"} <= names
    assert len(CORPUS_FILES) >= 6


@pytest.mark.parametrize("path", CORPUS_FILES, ids=os.path.basename)
def test_corpus_parses_clean(path):
    text = open(path, encoding="utf-8").read()
    r = parse(text, path)
    assert isinstance(r, ParseResult)
    assert r.diagnostics == [] and r.ok
    assert r.document.policies
    assert r.document.path == path and r.document.text == text
    # every node's span covers text that starts where the node starts
    for n in ast.walk(r.document):
        assert 0 <= n.span.offset <= n.span.end_offset <= len(text)
        line_start = text.rfind("\n", 0, n.span.offset) + 1
        assert n.span.column == n.span.offset - line_start + 1
        assert n.span.line == text.count("\n", 0, n.span.offset) + 1
        assert n.span.end_line == text.count("\n", 0, n.span.end_offset) + 1


@pytest.mark.parametrize("path", CORPUS_FILES, ids=os.path.basename)
def test_recovering_parser_builds_the_same_ast_as_lalr(path):
    text = open(path, encoding="utf-8").read()
    items, diags = parse_recovering(text, path)
    assert diags == []
    assert dump(items) == dump(parse(text, path).document.items)


def test_balanced_seed_policy_ast():
    text = open(os.path.join(CORPUS, "balanced.moe")).read()
    doc = parse(text).document
    (pol,) = doc.policies
    assert pol.name.text == "balanced" and pol.parent is None and pol.closed
    assert [b.name.text for b in pol.blocks] == ["cache", "prefetch", "schedule", "adapt"]
    cache = pol.block("cache")
    assert [(p.name.text, src(text, p.value)) for p in cache.params] == [
        ("capacity", "16"), ("eviction", "lfu"), ("frequency_decay", "0.9")]
    cap = cache.params[0].value.value
    assert isinstance(cap, ast.Number) and cap.value == 16 and isinstance(cap.value, int)
    decay = cache.params[2].value.value
    assert decay.value == 0.9 and decay.text == "0.9"
    (rule,) = pol.block("adapt").rules
    assert rule.condition.metric.text == "hit_rate" and rule.condition.op == "<"
    assert rule.condition.threshold.value == 0.4
    assert rule.duration.value == 100 and rule.duration.unit.text == "accesses"
    (act,) = rule.actions
    assert isinstance(act, ast.SetAction) and act.target.text == "eviction" and act.value.name == "lru"
    assert src(text, rule).startswith("when hit_rate < 0.4 for 100 accesses")
    assert src(text, rule).endswith("{ eviction = lru }")
    assert src(text, pol).startswith("policy balanced {") and src(text, pol).endswith("}")


def test_every_syntax_form():
    text = open(os.path.join(CORPUS, "full_syntax.moe")).read()
    doc = parse(text).document
    assert doc.version.number.value == 1
    assert [i.path.value for i in doc.imports] == ["std/lru_basic"]
    base, tuned = doc.policies
    assert tuned.parent.text == "base" and src(text, tuned.parent) == "base"
    cache = base.block("cache")
    p = {x.name.text: x.value for x in cache.params}
    assert p["capacity"].value.value == 12 and p["capacity"].value.unit.text == "GiB"
    assert src(text, p["capacity"].value) == "12GiB"
    assert p["eviction"].value.name == "lfu" and p["eviction"].fallback.name == "lru"
    assert [i.value for i in p["pin"].value.items] == [0, 1]
    assert p["decay_interval"].value.unit.text == "accesses"   # spaced unit
    assert p["memory_headroom"].value.text == "0.70"            # literal kept as written
    assert p["ttl"].value.unit.text == "steps"
    sched = {x.name.text: x.value.value for x in base.block("schedule").params}
    assert sched["offload_threshold_ms"].value == 25.0 and sched["offload_threshold_ms"].unit.text == "ms"
    assert sched["overlap"].value is True and sched["priority_routing"].value is False
    metrics = base.block("monitor").params[0].value.value
    assert [m.name for m in metrics.items] == ["hit_rate", "miss_rate", "prefetch_accuracy", "stall_ms"]
    r1, r2, r3 = base.block("adapt").rules
    assert isinstance(r1.actions[0], ast.SetAction) and r1.actions[0].target.text == "prefetch.budget"
    assert src(text, r1.actions[0].target) == "prefetch.budget"
    assert isinstance(r1.actions[1], ast.TriggerAction) and r1.actions[1].name.text == "memory_pressure"
    assert isinstance(r2.actions[0], ast.RebalanceAction) and r2.actions[0].name.text == "uniform"
    assert r2.duration.unit.text == "steps" and r2.condition.op == ">="
    assert r3.duration is None and r3.condition.op == "!="
    cond = tuned.block("cache").params[0].value
    assert cond.value.value == 24 and cond.alternative.value == 32
    assert cond.condition.metric.text == "hit_rate" and cond.condition.threshold.value == 0.5
    assert src(text, cond) == "24 : 32 when hit_rate < 0.5"
    # every comment, with its span
    assert len(doc.comments) == 8
    for c in doc.comments:
        assert c.text.startswith("#") and src(text, c) == c.text


def test_numbers_and_units():
    doc = parse("policy p { cache { a = -3  b = 2.5e-3 c = .5 d = 12 GiB e = 12GiG f = 1E3\n"
                "g = 8 h = lru } }").document
    v = {p.name.text: p.value.value for p in doc.policies[0].block("cache").params}
    assert v["a"].value == -3 and isinstance(v["a"].value, int)
    assert v["b"].value == 2.5e-3 and v["c"].value == 0.5
    assert v["d"].unit.text == "GiB"                  # spaced known unit
    assert v["e"].unit.text == "GiG"                  # glued unknown unit: the checker reports it
    assert v["f"].value == 1000.0 and isinstance(v["f"].value, float)
    assert v["g"].unit is None and v["h"].name == "lru"   # an unknown word after a number is the next token


def test_seed_one_line_style_and_semicolons():
    doc = parse("policy p { ; cache { capacity = 8  eviction = lru ; ; } ; } ;").document
    assert [p.name.text for p in doc.policies[0].block("cache").params] == ["capacity", "eviction"]


def test_policy_extension_is_accepted():
    r = parse("policy p { cache { capacity = 8 } }", "x.policy")
    assert r.ok and r.document.path == "x.policy"


def test_empty_and_comment_only_files():
    for text in ("", "   \n\n", "# only a comment\n# two"):
        r = parse(text)
        assert r.ok and r.document.items == []
    assert len(parse("# only a comment\n# two").document.comments) == 2


def test_string_escapes():
    doc = parse('import "a\\"b\\\\c"').document
    assert doc.imports[0].path.value == 'a"b\\c'
    assert doc.imports[0].path.text == '"a\\"b\\\\c"'


def test_keywords_name_policies_after_policy_and_extends():
    # the original accepts `policy when { ... }`: after 'policy' / 'extends' only a name
    # can come, so every keyword is a name there (LALR and the recovering parser agree)
    from mpl.schema import KEYWORDS
    for kw in KEYWORDS:
        text = f"policy {kw} {{ }}\npolicy x extends {kw} {{ }}\n"
        r = parse(text)
        assert r.ok, (kw, r.diagnostics)
        assert [p.name.text for p in r.document.policies] == [kw, "x"]
        assert r.document.policies[1].parent.text == kw
        items, diags = parse_recovering(text)
        assert diags == [] and [p.name.text for p in items] == [kw, "x"]
    # elsewhere keywords stay reserved
    r = parse("policy p { when { } }")
    assert not r.ok and r.diagnostics[0].code == "MPL002"
    # a half-typed 'policy' before the next top-level keyword is not a policy named 'version'
    r = parse("policy\nversion 1\n")
    assert not r.ok and r.document.version is not None


def test_memory_tier_forms():
    """Nested items (a label, a selector or an edge as head), ranges, devices and call-like
    values: the original's hierarchy syntax (SPEC section 12), generic like the rest."""
    text = open(os.path.join(CORPUS, "tiers.moe")).read()
    doc = parse(text).document
    big = next(p for p in doc.policies if p.name.text == "big")
    h = big.block("hierarchy")
    tiers = [s for s in h.sections if s.kind.text == "tier"]
    assert [t.label for t in tiers] == ["hot", "warm", "ram", "ssd"]
    assert src(text, tiers[0]) == "tier hot  { location = gpu   dtype = fp16  capacity = 16 }"
    assert src(text, tiers[0].head) == "hot" and src(text, tiers[0].kind) == "tier"
    assert {p.name.text: src(text, p.value) for p in tiers[2].params} == {"location": "cpu",
                                                                         "capacity": "24GiB"}
    demote, promote = [s for s in h.sections if s.kind.text == "on"]
    assert isinstance(demote.head, ast.Edge) and src(text, demote.head) == "demote(hot -> warm)"
    assert (demote.head.event.text, demote.head.source.text, demote.head.target.text) == ("demote", "hot", "warm")
    assert promote.params[0].value.value.value == 0.7
    bands = big.block("per_layer_hierarchy").sections
    head = bands[1].head
    assert isinstance(head, ast.Param) and head.name.text == "layers"
    rng = head.value.value
    assert isinstance(rng, ast.Range) and (rng.start.value, rng.end.value) == (8, 23)
    assert src(text, rng) == "8..23" and src(text, bands[1]).startswith("band layers = 8..23")
    assert [s.label for s in bands[1].sections] == ["hot"] and bands[1].params[0].name.text == "eviction"
    every = next(p for p in doc.policies if p.name.text == "every_parameter").block("hierarchy")
    loc = every.sections[0].params[0].value.value
    assert isinstance(loc, ast.Indexed) and (loc.name, loc.index, loc.text) == ("gpu", 0, "gpu:0")
    call = every.params[0].value.value
    assert isinstance(call, ast.Call) and call.name.text == "weighted_sum" and call.closed
    assert [(a.name.text, a.value.value) for a in call.args] == [("lru", 0.5), ("lfu", 0.5)]
    assert src(text, call) == "weighted_sum(lru = 0.5, lfu = 0.5)"
    ladder = every.sections[2].params[1].value.value
    assert [i.name for i in ladder.items] == ["bf16", "int8", "int4"]
    # every node's span is inside the text and walk() reaches the new nodes
    kinds = {type(n).__name__ for n in ast.walk(doc)}
    assert {"Section", "Edge", "Range", "Indexed", "Call", "Arg"} <= kinds


def test_nested_items_are_generic():
    """Kinds, heads and call names are names: the checker (not the parser) judges them."""
    text = ("policy p { hierarchy { tyer hot { capcity = 1 } on demot(a -> b) {} band x = 1 {}\n"
            " tier t { eviction = weighted_summ(lruu = 2) } x y { z w {} } } }")
    r = parse(text)
    assert r.ok, r.diagnostics
    h = r.document.policies[0].block("hierarchy")
    assert [s.kind.text for s in h.sections] == ["tyer", "on", "band", "tier", "x"]
    assert h.sections[4].sections[0].label == "w"
    items, diags = parse_recovering(text)
    assert diags == [] and dump(items) == dump(r.document.items)


def test_ranges_and_devices_are_tokens_of_their_own():
    from mpl.syntax.lexer import tokenize
    types = [t.type for t in tokenize("0..7 -1..3 4 .. 5 gpu:12 true:1 a->b (x) 40. .5 5.e-1").tokens]
    assert types == ["NUMBER", "DOTDOT", "NUMBER", "NUMBER", "DOTDOT", "NUMBER", "NUMBER", "DOTDOT",
                     "NUMBER", "INDEXED", "TRUE", "COLON", "NUMBER", "NAME", "ARROW", "NAME",
                     "LPAREN", "NAME", "RPAREN", "NUMBER", "NUMBER", "NUMBER"]
    # `lru:lfu when ...` (a conditional written without spaces) is still three tokens
    assert [t.type for t in tokenize("lru:lfu").tokens] == ["NAME", "COLON", "NAME"]
