"""Error recovery: every error is reported with its code and span, the AST keeps the rest."""

import os

import pytest

from mpl.syntax import ast, parse

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def codes(r):
    return [d.code for d in r.diagnostics]


def at(text, d):
    return text[d.span.offset:d.span.end_offset]


def test_several_errors_all_reported_and_later_policies_kept():
    text = ("policy a {\n"
            "  cache {\n"
            "    capacity =\n"            # missing value
            "    eviction = lru lfu\n"    # junk after the value
            "    ttl 5\n"                 # missing '='
            "  }\n"
            "}\n"
            "policy b { cache { capacity = 4 } }\n")
    r = parse(text)
    assert codes(r) == ["MPL002", "MPL002", "MPL002"]
    d1, d2, d3 = r.diagnostics
    assert d1.message == "expected a value after 'capacity =', found name 'eviction'"
    assert (d1.span.line, d1.span.column) == (4, 5)
    assert at(text, d2) == "lfu" and "after the value" in d2.message
    assert d3.message == "expected '=' after parameter name 'ttl'" and at(text, d3) == "5"
    a, b = r.document.policies
    cache = a.block("cache")
    params = {p.name.text: p for p in cache.params}
    assert params["capacity"].value is None                   # missing -> None
    assert params["eviction"].value.value.name == "lru"
    assert params["ttl"].value.value.value == 5               # value read despite the missing '='
    assert [type(i).__name__ for i in cache.items] == ["Param", "Param", "ErrorNode", "Param"]
    assert cache.items[2].text == "lfu"
    assert b.name.text == "b" and b.block("cache").params[0].value.value.value == 4
    assert all(d.file is None for d in r.diagnostics)


def test_unexpected_character_mpl001():
    text = "policy a { cache { capacity = 4 @ } }\npolicy b { cache { capacity = 2 } }"
    r = parse(text, "x.moe")
    assert codes(r) == ["MPL001"]
    d = r.diagnostics[0]
    assert at(text, d) == "@" and d.message == "unexpected character '@'" and d.file == "x.moe"
    # the stray character is read as if it were not there: no second error, no ErrorNode
    items = r.document.policies[0].blocks[0].items
    assert [type(i) for i in items] == [ast.Param] and items[0].name.text == "capacity"
    assert len(r.document.policies) == 2


def test_stray_character_after_a_block_name_is_one_error():
    # an invisible character after `cache` gave a false "has no cache block" too
    from mpl.checker import check_text
    text = "policy p {\n    cache\u200b { capacity = 8 }\n}\n"
    r = parse(text)
    assert codes(r) == ["MPL001"]
    assert [b.name.text for b in r.document.policies[0].blocks] == ["cache"]
    assert [d.code for d in check_text(text)] == ["MPL001"]


def test_hyphenated_names_are_one_diagnostic_with_a_fix():
    # the original README's `cpu-fallback`, `gpu-only`, `freq-threshold`; `policy my-policy`
    from mpl.checker import check_text
    for text, word, fixed, known in (
            ("policy p {\n cache { capacity = 8 }\n schedule { mode = cpu-fallback }\n}\n",
             "cpu-fallback", "cpu_fallback", True),
            ("policy p {\n cache { capacity = 8 }\n schedule { mode = gpu-only }\n}\n",
             "gpu-only", "gpu_only", True),
            ("policy p {\n cache { capacity = 8; eviction = frequency_threshold; freq-threshold = 0.1 }\n}\n",
             "freq-threshold", "freq_threshold", True),
            ("policy my-policy {\n cache { capacity = 8 }\n}\n", "my-policy", "my_policy", False)):
        diags = check_text(text)
        assert [d.code for d in diags] == ["MPL001"], diags
        d = diags[0]
        assert at(text, d) == word
        assert (f"did you mean '{fixed}'?" in d.message) == known and fixed in d.message
        [fix] = d.fixes
        [edit] = fix.edits
        fixed_text = text[:edit.span.offset] + edit.new_text + text[edit.span.end_offset:]
        assert check_text(fixed_text) == []


def test_runs_of_bad_characters_are_one_diagnostic():
    r = parse("policy a { cache { capacity = 4 } } ¤¤¤€€ ")
    assert codes(r) == ["MPL001"] and "characters" in r.diagnostics[0].message


def test_expected_token_named_in_human_terms_mpl002():
    text = "policy a { cache { capacity 16 } }"
    r = parse(text)
    assert r.diagnostics[0].message == "expected '=' after parameter name 'capacity'"
    text = "policy a { cache { capacity } }"
    r = parse(text)
    assert r.diagnostics[0].message == "expected '=' after parameter name 'capacity', found '}'"
    assert at(text, r.diagnostics[0]) == "}"


def test_unclosed_block_at_eof_mpl003_with_related():
    text = "policy a {\n  cache {\n    capacity = 4\n"
    r = parse(text)
    assert codes(r) == ["MPL003"]
    d = r.diagnostics[0]
    assert d.span.offset == len(text) and "block 'cache' is not closed" in d.message
    assert [rel.message for rel in d.related] == ["block 'cache' opened here", "policy 'a' opened here"]
    assert [at(text, rel) for rel in d.related] == ["{", "{"]
    assert [rel.span.line for rel in d.related] == [2, 1]
    pol = r.document.policies[0]
    assert pol.closed is False and pol.blocks[0].closed is False
    assert pol.blocks[0].params[0].value.value.value == 4


def test_unclosed_policy_before_next_policy():
    text = "policy a {\n  cache { capacity = 4 }\npolicy b { cache { capacity = 2 } }\n"
    r = parse(text)
    assert codes(r) == ["MPL003"]
    d = r.diagnostics[0]
    assert at(text, d) == "policy" and d.span.line == 3
    assert "policy 'a' is not closed" in d.message and d.related[0].span.line == 1
    a, b = r.document.policies
    assert not a.closed and b.closed and b.block("cache") is not None


def test_unclosed_rule():
    text = "policy a { cache { capacity = 4 }\n adapt { when hit_rate < 0.5 { eviction = lru\n"
    r = parse(text)
    d = r.diagnostics[-1]
    assert d.code == "MPL003" and "rule" in d.message and len(d.related) == 3
    rule = r.document.policies[0].block("adapt").rules[0]
    assert rule.closed is False and rule.actions[0].value.name == "lru"


def test_invalid_literals_mpl004():
    text = 'import "abc\npolicy a { cache { capacity = 1.2.3  eviction = lru } }'
    r = parse(text)
    assert codes(r) == ["MPL004", "MPL004"]
    assert "unterminated string" in r.diagnostics[0].message and at(text, r.diagnostics[0]) == '"abc'
    assert r.diagnostics[1].message == "malformed number '1.2.3'"
    assert r.document.imports[0].path.value == "abc"
    params = r.document.policies[0].block("cache").params
    assert params[0].value is None and params[1].value.value.name == "lru"


def test_huge_number_is_invalid_literal():
    r = parse("policy a { cache { capacity = " + "9" * 5000 + " } }")
    assert codes(r) == ["MPL004"]
    r = parse("policy a { cache { capacity = 1e999 } }")
    assert codes(r) == ["MPL004"]


def test_misplaced_things_are_reported():
    r = parse("cache { capacity = 4 }\npolicy a { capacity = 4 cache { capacity = 4 } }")
    msgs = [d.message for d in r.diagnostics]
    assert msgs[0] == "block 'cache' outside a policy: put it inside 'policy NAME { ... }'"
    assert msgs[1].startswith("parameter 'capacity' outside a block")
    assert r.document.policies[0].block("cache") is not None
    r = parse("policy a { cache { extra { strategy = history } capacity = 4 } }")
    assert r.diagnostics[0].message.startswith("blocks cannot be nested")
    assert r.document.policies[0].block("cache").params[0].name.text == "capacity"


def test_missing_block_brace_before_the_next_known_block():
    text = "policy a {\n  cache {\n    capacity = 4\n  prefetch { strategy = history }\n}\n"
    r = parse(text)
    assert codes(r) == ["MPL003"]
    d = r.diagnostics[0]
    assert d.message == "block 'cache' is not closed before block 'prefetch'; add '}'"
    assert at(text, d) == "prefetch" and d.related[0].span.line == 2
    pol = r.document.policies[0]
    assert pol.closed and not pol.block("cache").closed and pol.block("prefetch").closed
    assert pol.block("cache").params[0].value.value.value == 4


def test_missing_rule_brace_before_the_next_rule():
    text = ("policy a { adapt {\n  when hit_rate < 0.5 { eviction = lru\n"
            "  when hit_rate > 0.9 { eviction = lfu }\n} }")
    r = parse(text)
    assert codes(r) == ["MPL003"]
    assert "rule is not closed before the next 'when'" in r.diagnostics[0].message
    r1, r2 = r.document.policies[0].block("adapt").rules
    assert not r1.closed and r2.closed and r2.actions[0].value.name == "lfu"


def test_missing_keywords_are_named():
    r = parse("policy a { adapt { hit_rate < 0.5 for 10 accesses { eviction = lru } } }")
    assert r.diagnostics[0].message.startswith("expected 'when' before the condition 'hit_rate < 0.5'")
    rule = r.document.policies[0].block("adapt").rules[0]
    assert rule.condition.metric.text == "hit_rate" and rule.duration.value == 10
    r = parse("policy a { adapt { when hit_rate < 0.5 10 accesses { eviction = lru } } }")
    assert r.diagnostics[0].message == "expected 'for' before the duration '10 accesses'"
    assert r.document.policies[0].block("adapt").rules[0].duration.unit.text == "accesses"
    r = parse("policy b { cache { capacity = 1 } }\npolicy a b { cache { capacity = 2 } }")
    assert r.diagnostics[0].message.endswith("did you mean 'policy a extends b'?")
    assert r.document.policies[1].parent.text == "b" and r.document.policies[1].closed
    r = parse("policy a { adapt { when hit_rate < 0.5 { memory_pressure; entropy } } }")
    assert [d.message.split("; ")[1] for d in r.diagnostics] == [
        "did you mean 'trigger memory_pressure'?", "did you mean 'rebalance entropy'?"]
    acts = r.document.policies[0].block("adapt").rules[0].actions
    assert [type(a).__name__ for a in acts] == ["TriggerAction", "RebalanceAction"]


def test_rule_errors():
    r = parse("policy a { adapt { when hit_rate < 0.5 for 10 { eviction = lru } } }")
    assert r.diagnostics[0].message.startswith("expected a unit after 'for 10' (accesses, steps, tokens)")
    r = parse("policy a { adapt { when hit_rate = 0.5 { eviction = lru } } }")
    assert r.diagnostics[0].message == "use '==' to compare, not '='"
    assert r.document.policies[0].block("adapt").rules[0].condition.op == "=="
    r = parse("policy a { adapt { when stall_ms > 5 ms { trigger ttl } } }")
    assert r.diagnostics[0].message.startswith("a condition's threshold takes no unit")
    r = parse("policy a { adapt { when hit_rate < 0.5 { trigger } } }")
    assert "expected a trigger name" in r.diagnostics[0].message
    act = r.document.policies[0].block("adapt").rules[0].actions[0]
    assert isinstance(act, ast.TriggerAction) and act.name is None


def test_conditional_value_errors():
    r = parse("policy a { cache { capacity = 4 : 8 } }")
    assert "expected 'when'" in r.diagnostics[0].message
    e = r.document.policies[0].block("cache").params[0].value
    assert e.value.value == 4 and e.alternative.value == 8 and e.condition is None
    r = parse("policy a { cache { capacity = 4 : 8 when hit_rate } }")
    e = r.document.policies[0].block("cache").params[0].value
    assert e.condition.metric.text == "hit_rate" and e.condition.op is None


def test_unclosed_list():
    text = "policy a { monitor { metrics = [hit_rate, miss_rate\n window = 10 } }"
    r = parse(text)
    assert codes(r) == ["MPL002"] and "list" in r.diagnostics[0].message
    assert r.diagnostics[0].related[0].message == "list opened here"
    mon = r.document.policies[0].block("monitor")
    assert [i.name for i in mon.params[0].value.value.items] == ["hit_rate", "miss_rate"]
    assert mon.params[1].value.value.value == 10


@pytest.mark.parametrize("text", [
    "", "\x00\x01\x02", "}}}}", "{{{{", "[" * 5000, "policy " * 3000, "\ufeffpolicy a {}",
    "policy a { cache { capacity = " + "[" * 3000 + "1" + "]" * 3000 + " } }",
    "policy a {" * 2000, "when " * 1000, '"' * 101, "\r\n\r\n#\r\n", "𝔭olicy a {}",
    "policy a { cache { capacity = -  } }", "policy a { x { y = 1 ! 2 } }",
    "policy a { cache { capacity = 1\u00b2 } }", "1\u0663", "0.\u00b3",
])
def test_never_raises_and_spans_inside(text):
    r = parse(text)
    assert not any("internal parser error" in d.message for d in r.diagnostics)
    for d in r.diagnostics:
        assert 0 <= d.span.offset <= d.span.end_offset <= len(text)
        for rel in d.related:
            assert 0 <= rel.span.offset <= rel.span.end_offset <= len(text)
    for n in ast.walk(r.document):
        assert 0 <= n.span.offset <= n.span.end_offset <= len(text)


def test_deep_list_nesting_is_limited():
    text = "policy a { cache { capacity = " + "[" * 100 + "1" + "]" * 100 + " } }"
    r = parse(text)
    assert codes(r) == ["MPL002"] and "nested deeper" in r.diagnostics[0].message
    assert r.document.policies[0].block("cache") is not None


def test_internal_failure_becomes_a_diagnostic(monkeypatch):
    from mpl.syntax import parser

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(parser, "_parse", boom)
    r = parse("policy a {}", "f.moe")
    assert codes(r) == ["MPL002"] and "internal parser error" in r.diagnostics[0].message
    assert r.document.items == [] and r.document.path == "f.moe"


def test_every_error_in_the_file_is_reported_in_order():
    text = "\n".join(f"policy p{i} {{ cache {{ capacity = }} }}" for i in range(20))
    r = parse(text)
    assert codes(r) == ["MPL002"] * 20
    assert [d.span.line for d in r.diagnostics] == list(range(1, 21))
    assert len(r.document.policies) == 20


def test_semicolons_where_the_original_took_them_are_one_error_with_a_fix():
    # the original took ';' anywhere; here it separates items only, and a
    # misplaced one is one error whose fix removes it (or, in a list, makes it a ',')
    from mpl.checker import check_text
    for text, fix in (("policy p {\n    cache { capacity = ; 8 }\n}\n", ""),
                      ("policy p ; {\n    cache { capacity = 8 }\n}\n", ""),
                      ("policy p {\n    cache { pin = [1; 2] capacity = 8 }\n}\n", ","),
                      ("policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 "
                       "for 10 accesses; { capacity = 4 } }\n}\n", "")):
        diags = check_text(text)
        assert [d.code for d in diags] == ["MPL002"], (text, diags)
        [edit] = diags[0].fixes[0].edits
        assert text[edit.span.offset:edit.span.end_offset] == ";" and edit.new_text == fix
        fixed = text[:edit.span.offset] + fix + text[edit.span.end_offset:]
        assert check_text(fixed) == []
    # valid separators stay valid
    assert check_text("policy p { ; cache { capacity = 8 ; ; eviction = lru ; } ; } ;\n") == []


def test_each_semicolon_of_a_run_inside_a_header_is_one_error_with_a_fix():
    # a run of ';' is read by what follows the whole run: inside a header each ';' of it is
    # one error whose fix removes it, and the header reads on (no ';' kept as a separator
    # that cuts a policy from its '{' or a condition in two)
    from mpl.checker import check_text
    for text in ("policy p ;; {\n    cache { capacity = 8 }\n}\n",
                 "policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate ;; < 0.5 "
                 "{ capacity = 4 } }\n}\n"):
        diags = check_text(text)
        assert [d.code for d in diags] == ["MPL002", "MPL002"], (text, diags)
        run = text.index(";;")
        edits = [d.fixes[0].edits[0] for d in diags]
        assert [(e.span.offset, e.new_text) for e in edits] == [(run, ""), (run + 1, "")]
        assert check_text(text.replace(";;", "")) == []
    rule = parse("policy p { adapt { when hit_rate ;; < 0.5 { capacity = 4 } } }").document.policies[0]
    cond = rule.blocks[0].items[0].condition
    assert (cond.metric.text, cond.op, cond.threshold.value) == ("hit_rate", "<", 0.5)


def test_missing_space_before_the_next_parameter_is_one_error_with_a_fix():
    from mpl.checker import check_text
    text = "policy p {\n    cache { capacity = 8eviction = lru }\n}\n"
    diags = check_text(text)
    assert [d.code for d in diags] == ["MPL002"] and "missing space between 8 and 'eviction'" in diags[0].message
    [edit] = diags[0].fixes[0].edits
    fixed = text[:edit.span.offset] + edit.new_text + text[edit.span.end_offset:]
    assert fixed == "policy p {\n    cache { capacity = 8 eviction = lru }\n}\n" and check_text(fixed) == []
    # a glued unknown unit that does not start an item is still an unknown unit
    assert [d.code for d in check_text("policy p { cache { capacity = 8GiG } }")] == ["MPL204"]


@pytest.mark.parametrize("text, message", [
    ("policy p { hierarchy { tier { location = gpu } } }",
     "expected the tier's name after 'tier' ('tier NAME { ... }'), found '{'"),
    ("policy p { hierarchy { tier hot location = gpu } }", "expected '{' after 'tier hot'"),
    ("policy p { hierarchy { on demote(hot, warm) { } } }", "expected '->' and the tier the transition enters"),
    ("policy p { hierarchy { on demote(hot warm) { } } }", "expected '->' between the two tiers: demote(hot -> warm)"),
    ("policy p { hierarchy { on demote hot -> warm { } } }", "expected '(' after 'demote': write on demote(hot -> warm)"),
    ("policy p { hierarchy { eviction = weighted_sum(lru, lfu = 1) } }",
     "expected '=' and a weight after 'lru': each argument of 'weighted_sum(...)' is 'NAME = value'"),
    ("policy p { hierarchy { eviction = weighted_sum(lru = 0.5, lfu = 0.5 } }",
     "expected ',' or ')' in 'weighted_sum(...)': the call is not closed"),
    ("policy p { per_layer_hierarchy { band layers = 0.. { } } }",
     "expected the last number of the range after '0..'"),
    ("policy p { per_layer_hierarchy { band { } } }", "expected 'layers = FIRST..LAST' after 'band'"),
    ("policy p { tier hot { } }", "'tier' items belong inside 'hierarchy { ... }' or 'band { ... }'"),
    ("policy p {\n hierarchy {\n tier", "unexpected end of file: expected the tier's name after 'tier'"),
])
def test_half_typed_tiers_are_one_located_error_and_keep_the_rest(text, message):
    r = parse(text)
    assert len(r.diagnostics) == 1, r.diagnostics
    d = r.diagnostics[0]
    assert d.code in ("MPL002", "MPL003") and message in d.message, d.message
    assert r.document.policies and r.document.policies[0].name.text == "p"


def test_recovered_tiers_keep_their_items():
    text = ("policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = }\n"
            "        tier ram { location = cpu }\n        on demote(hot -> ) { mechanism = copy }\n"
            "        eviction = lfu\n    }\n}\n")
    r = parse(text)
    assert codes(r) == ["MPL002", "MPL002"]
    h = r.document.policies[0].block("hierarchy")
    hot, ram, edge = h.sections
    assert hot.label == "hot" and hot.params[1].value is None          # `capacity =` kept, no value
    assert ram.label == "ram" and ram.closed
    assert edge.head.target is None and edge.params[0].name.text == "mechanism"
    assert h.params[0].name.text == "eviction"


def test_a_device_index_with_spaces_is_one_error_with_a_fix():
    from mpl.checker import check_text
    text = "policy p {\n    hierarchy { tier hot { location = gpu : 1  capacity = 4 } }\n}\n"
    diags = check_text(text)
    assert [d.code for d in diags] == ["MPL002"] and "written without spaces: 'gpu:1'" in diags[0].message
    [edit] = diags[0].fixes[0].edits
    fixed = text[:edit.span.offset] + edit.new_text + text[edit.span.end_offset:]
    assert "location = gpu:1" in fixed and check_text(fixed) == []


def test_a_device_index_with_a_glued_word_after_it_is_not_said_to_have_spaces():
    """`gpu:10d`: the lexer splits the glued word off the index and says so; no error claims
    the index has spaces, whose fix would write the same text again."""
    from mpl.checker import check_text
    text = "policy p {\n    cache { capacity = 8 }\n    prefetch {\n        lookahea\n=gpu:10d = 2\n    }\n}\n"
    diags = check_text(text)
    assert not [d for d in diags if "without spaces" in d.message], diags
    assert any("missing space between 10 and 'd'" in d.message for d in diags), diags
    for d in diags:
        for fix in d.fixes:
            for e in fix.edits:
                assert text[e.span.offset:e.span.end_offset] != e.new_text, (d, fix)


def test_unclosed_tier_before_the_next_block_names_every_open_construct():
    text = "policy p {\n    hierarchy {\n        tier hot { location = gpu\n    prefetch { strategy = history }\n}\n"
    r = parse(text)
    [d] = r.diagnostics
    assert d.code == "MPL003"
    assert d.message == ("tier 'hot' and block 'hierarchy' are not closed before block 'prefetch'; "
                         "add '}' for each")
    assert [rel.message for rel in d.related] == ["tier 'hot' opened here", "block 'hierarchy' opened here"]


def test_deep_item_nesting_is_limited():
    text = "policy a { hierarchy { " + "tier t { " * 100 + "}" * 100 + " } }"
    r = parse(text)
    assert codes(r) == ["MPL002"] and "items nested deeper" in r.diagnostics[0].message
    assert r.document.policies[0].block("hierarchy") is not None


def test_a_section_head_written_across_lines_is_quoted_on_one_line():
    # `tier` alone on its line reads the next line as its head (newlines do not end a
    # head); the message that quotes the head keeps to one line
    text = "policy p {\n  hierarchy {\n    tier\n    capacity = 8\n  }\n}\n"
    r = parse(text)
    messages = [d.message for d in r.diagnostics]
    assert "expected '{' after 'tier capacity = 8', found '}'" in messages
    assert not any("\n" in m for m in messages)
