"""Unit-level checks of values, units, conditions and the helpers behind fixes."""

import subprocess
import sys

import pytest

from mpl import ir, schema
from mpl.checker import analyze
from mpl.checker.common import removal_span, suggest
from mpl.checker.crossfield import cross_field, DEFAULTS
from mpl.checker.values import can_hold_together, condition_verdict
from mpl.diagnostics import Span


def codes(text, **kw):
    return [(d.code, d.message) for d in analyze(text, **kw).diagnostics]


def only(text, **kw):
    diags = analyze(text, **kw).diagnostics
    assert len(diags) == 1, [(d.code, d.message) for d in diags]
    return diags[0]


def cache(body):
    return f"policy p {{ cache {{ capacity = 8; {body} }} }}"


@pytest.mark.parametrize("body,code,fragment", [
    ("eviction = 3", "MPL201", "'eviction' expects one of lru, lfu"),
    ("pin = 3", "MPL201", "write [3]"),
    ("pin = [1.5]", "MPL201", "holds integers"),
    ("pin = [-1]", "MPL203", "'pin element' must be in [0, 65535]"),
    ("ttl = 0", "MPL203", "'ttl' must be in [1, 1000000000]"),
    ("ttl = 5 tokens", "MPL204", "unit 'tokens' is not allowed for 'ttl'"),
    ("ttl = 5stepz", "MPL204", "unknown unit 'stepz'; did you mean 'steps'?"),
    ("eviction = lfu; frequency_decay = 0", "MPL203", "must be in (0, 1], got 0; choose a value in (0, 1]"),
    ("eviction = lfu; decay_interval = 2.5", "MPL201", "'decay_interval' expects an integer count, got a number '2.5'"),
    ("eviction = lfu | fallback", "MPL208", "'fallback' is already the segmented pair"),
    ("eviction = lfu | nope", "MPL202", "unknown eviction 'nope'"),
    ("expert_size_gb = 0GB", "MPL203", "'expert_size_gb' must be in [1e-09, 1000] GB"),
    ("memory_threshold = 0.9; memory_budget_gb = 8 ms", "MPL204", "unit 'ms' is not allowed"),
])
def test_cache_values(body, code, fragment):
    d = only(cache(body))
    assert d.code == code and fragment in d.message, d.message


def test_capacity_forms():
    assert codes("policy p { cache { capacity = 0GiB } }")[0][0] == "MPL203"
    assert codes("policy p { cache { capacity = 65537 } }")[0] == (
        "MPL203", "'capacity' must be in [1, 65536], got 65537; use 65536")
    assert codes("policy p { cache { capacity = 8 accesses } }")[0][0] == "MPL204"
    assert codes("policy p { cache { capacity = true } }")[0][0] == "MPL201"


def test_schedule_and_monitor_values():
    d = only("policy p { cache { capacity = 8 } schedule { overlap = \"true\" } }")
    assert d.code == "MPL201" and d.fixes[0].edits[0].new_text == "true"
    d = only("policy p { cache { capacity = 8 } monitor { metrics = hit_rate } }")
    assert d.code == "MPL201" and d.fixes[0].edits[0].new_text == "[hit_rate]"
    d = only("policy p { cache { capacity = 8 } monitor { metrics = [hit_rate, hit_rate] } }")
    assert d.code == "MPL209" and d.related[0].message == "first occurrence"
    d = only("policy p { cache { capacity = 8 } monitor { window = 10 steps } }")
    assert d.code == "MPL204" and "use accesses or no unit" in d.message


def test_rule_parts():
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 for 10 ms { eviction = lfu } } }")
    assert d.code == "MPL204" and "not allowed for 'for'" in d.message
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { capcity = 4 } } }")
    assert d.code == "MPL207" and "did you mean 'capacity'?" in d.message
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { cache.capcity = 4 } } }")
    assert d.code == "MPL207" and "did you mean 'cache.capacity'?" in d.message
    d = only("policy p { cache { capacity = 8 } per_layer { } adapt { when hit_rate < 0.5 { rebalance entropie } } }")
    assert d.code == "MPL207" and "did you mean 'entropy'?" in d.message
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { eviction = lruu } } }")
    assert d.code == "MPL202"
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { capacity = 0 } } }")
    assert d.code == "MPL203"
    d = only("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { eviction = belady } } }")
    assert d.code == "MPL306" and "belady" in d.message
    assert codes("policy p { cache { capacity = 8 } adapt { when hit_rate < 0.5 { eviction = belady } } }",
                 purpose="replay") == []


def test_conditional_values():
    d = only("policy p { cache { capacity = 8; pin = [0, 1] : [0] when hit_rate < 0.5 } }")
    assert d.code == "MPL206"
    d = only("policy p { cache { capacity = 4 : 1 when hit_rate < 0.5; pin = [0, 1] } }")
    assert d.code == "MPL306" and (d.span.column, d.span.end_column) == (35, 36)
    d = only("policy p { cache { capacity = 4 : 8 when hit_rate < -1 } }")
    assert d.code == "MPL402"
    d = only("policy p { cache { capacity = 4 : 8 when hitrate < 0.5 } }")
    assert d.code == "MPL205"
    d = only("policy p { cache { capacity = 8 : 8 when hit_rate < 0.5 } }")
    assert d.code == "MPL406"


def test_no_effect_respects_adapt_rules_and_fallback():
    # an adapt rule that can switch lfu on gives frequency_decay an effect
    assert codes("policy p { cache { capacity = 8; frequency_decay = 0.5 }"
                 " adapt { when hit_rate < 0.3 { eviction = lfu } } }") == []
    assert codes(cache("eviction = lfu | lru; frequency_decay = 0.5")) == []
    assert codes(cache("eviction = fallback; frequency_decay = 0.5")) == []
    d = only(cache("memory_budget_gb = 12"))
    assert d.code == "MPL401" and "without memory_threshold" in d.message
    # the removal fix deletes the whole parameter
    text = "policy p {\n    cache {\n        capacity = 8\n        score_ema_alpha = 0.5\n    }\n}\n"
    d = only(text)
    [e] = d.fixes[0].edits
    assert text[:e.span.offset] + text[e.span.end_offset:] == "policy p {\n    cache {\n        capacity = 8\n    }\n}\n"


def test_condition_verdicts():
    c = ir.Condition
    assert condition_verdict(c("hit_rate", "<", 0)) == "never"
    assert condition_verdict(c("hit_rate", "<=", 0)) is None
    assert condition_verdict(c("hit_rate", ">", 1)) == "never"
    assert condition_verdict(c("hit_rate", ">=", 0)) == "always"
    assert condition_verdict(c("hit_rate", "==", 2)) == "never"
    assert condition_verdict(c("hit_rate", "!=", -1)) == "always"
    assert condition_verdict(c("stall_ms", ">", 1e9)) is None      # unbounded above
    assert condition_verdict(c("transfer_rate", "<", 0)) == "never"


def test_can_hold_together():
    c = ir.Condition
    assert can_hold_together(c("hit_rate", "<", 0.5), c("hit_rate", "<", 0.2))
    assert not can_hold_together(c("hit_rate", "<", 0.3), c("hit_rate", ">", 0.6))
    assert not can_hold_together(c("hit_rate", "<", 0.5), c("hit_rate", ">=", 0.5))
    assert can_hold_together(c("hit_rate", "<=", 0.5), c("hit_rate", ">=", 0.5))
    # miss_rate is 1 - hit_rate
    assert not can_hold_together(c("hit_rate", ">", 0.8), c("miss_rate", ">", 0.5))
    assert can_hold_together(c("hit_rate", "<", 0.4), c("miss_rate", ">", 0.5))
    assert not can_hold_together(c("hit_rate", "==", 0.5), c("hit_rate", "!=", 0.5))
    assert can_hold_together(c("hit_rate", "<", 0.5), c("stall_ms", ">", 3))


def test_cross_field_is_pure():
    v = dict(DEFAULTS, **{"cache.capacity": 2, "cache.pin": (0, 1, 2)})
    [x] = cross_field(v, {"cache"}, {"cache.capacity", "cache.pin"})
    assert x.code == "MPL301" and x.keys == ("cache.pin", "cache.capacity")
    # a size capacity counts in slots once the expert size is known
    v = dict(DEFAULTS, **{"cache.capacity": ir.Size(3 * 10 ** 9), "cache.expert_size_gb": 1.5,
                          "cache.pin": (0, 1, 2)})
    assert [x.code for x in cross_field(v, {"cache"}, set(v))] == ["MPL301"]
    v["cache.expert_size_gb"] = None
    assert cross_field(v, {"cache"}, set(v)) == []


#: each relation of mpl.schema.RELATIONS and the code that reports it
RELATION_CODES = {("cache.pin", "cache.capacity"): "MPL301", ("prefetch.budget", "cache.capacity"): "MPL302",
                  ("cache.memory_headroom", "cache.memory_threshold"): "MPL304",
                  ("per_layer.min_capacity", "per_layer.max_capacity"): "MPL305"}


def _breaking(rel):
    """Effective values that break the schema relation ``rel`` and nothing else: ``high`` at
    a value inside its range, ``low`` just above it (a list one element longer), and the
    parameter that gives ``low`` an effect set to a value that does."""
    hp = schema.PARAMS[rel.high]
    hi = 0.5 if hp.max == 1 else 4
    lo = tuple(range(hi + 1)) if rel.count else (hi + 0.25 if isinstance(hi, float) else hi + 1)
    v = dict(DEFAULTS, **{rel.high: hi, rel.low: lo})
    v.setdefault("cache.capacity", None)
    if v["cache.capacity"] is None:
        v["cache.capacity"] = 64
    only_with = schema.PARAMS[rel.low].only_with
    if only_with is not None and schema.SET not in only_with[1]:
        v[only_with[0]] = only_with[1][0]
    return v


def test_schema_relations_drive_the_cross_field_checks():
    """The relations between parameters are the schema's (max_ref, min_ref, count_max_ref),
    and each is checked by one cross-field rule: breaking it (and nothing else) gives that
    rule's code, on the bounded parameter first and the bound last."""
    assert {(r.low, r.high) for r in schema.RELATIONS} == set(RELATION_CODES)
    for rel in schema.RELATIONS:
        v = _breaking(rel)
        blocks = {"cache", "prefetch"} | {schema.PARAMS[k].block for k in (rel.low, rel.high)}
        [x] = cross_field(v, blocks, set(v))
        assert x.code == RELATION_CODES[(rel.low, rel.high)], (rel, x)
        assert x.keys[0] == rel.low and x.keys[-1] == rel.high
        # the relation holds at equality: no violation
        v[rel.low] = v[rel.high] if not rel.count else tuple(range(v[rel.high]))
        assert cross_field(v, blocks, set(v)) == [], rel
    # a per_layer relation is only checked with the per_layer block
    v = _breaking(next(r for r in schema.RELATIONS if r.low == "per_layer.min_capacity"))
    assert cross_field(v, {"cache"}, set(v)) == []
    # a parameter without effect is not checked: the budget without a prefetcher
    v = _breaking(next(r for r in schema.RELATIONS if r.low == "prefetch.budget"))
    v["prefetch.strategy"] = "none"
    assert cross_field(v, {"cache", "prefetch"}, set(v)) == []


def test_required_parameters_come_from_the_schema():
    assert schema.REQUIRED_KEYS == tuple(k for k, p in schema.PARAMS.items() if p.default is schema.REQUIRED)
    assert "cache.capacity" in schema.REQUIRED_KEYS
    [d] = analyze("policy p { cache { eviction = lfu } }").diagnostics
    assert d.code == "MPL105" and "has no capacity" in d.message
    assert analyze("policy p { cache { eviction = lfu } }").ir == {}


def test_suggest_and_removal_span():
    assert suggest("capcity", ["capacity", "eviction"]) == "capacity"
    assert suggest("EVICTION", ["capacity", "eviction"]) == "eviction"
    assert suggest("zzz", ["capacity"]) is None
    text = "a { x = 1; y = 2 }"
    s = removal_span(text, Span.from_offsets(text, 4, 9))
    assert text[:s.offset] + text[s.end_offset:] == "a { y = 2 }"
    text = "a {\n  x = 1   # note\n}"
    s = removal_span(text, Span.from_offsets(text, 6, 11))
    assert text[:s.offset] + text[s.end_offset:] == "a {\n  # note\n}"
    for nl in ("\n", "\r\n", "\r"):          # a whole line goes with its own line end
        text = f"a {{{nl}  x = 1{nl}  y = 2{nl}}}"
        i = text.index("x")
        s = removal_span(text, Span.from_offsets(text, i, i + 5))
        assert text[:s.offset] + text[s.end_offset:] == f"a {{{nl}  y = 2{nl}}}", repr(nl)


@pytest.mark.parametrize("nl", ["\r\n", "\r"])
def test_crlf_lone_cr_and_bom(tmp_path, nl):
    """A byte-order mark is not content, and a line ends at '\r\n' or a lone '\r' (old Mac
    files), as editors and the LSP count them: a comment stops there, and diagnostics name
    the line an editor shows."""
    from mpl.checker import check
    p = tmp_path / "w.moe"
    p.write_bytes(f"\ufeff# a comment{nl}policy p {{{nl}    cache {{ capacity = 0 }}{nl}}}{nl}".encode())
    [d] = check(str(p))
    assert d.code == "MPL203" and (d.span.line, d.span.column) == (3, 24)
    text = f"# c{nl}policy p {{{nl}  cache {{ capacity = 0 }}  # c\r\n}}{nl}"   # mixed line ends
    [d] = analyze(text).diagnostics
    assert text[d.span.offset:d.span.end_offset] == "0" and d.span.line == 3
    assert analyze(f"# only a comment{nl}policy p {{ cache {{ capacity = 8 }} }}{nl}").ir


def test_mpl306_pairs_of_rules():
    """A fired rule's values persist, so two rules that are each fine can break the policy
    together; exclusive conditions do not help (they fire at different times)."""
    text = ("policy p {\n  cache { capacity = 8 }\n  prefetch { strategy = history; budget = 2 }\n"
            "  adapt {\n    when hit_rate < 0.3 { capacity = 3 }\n    when hit_rate > 0.8 { budget = 4 }\n  }\n}\n")
    d = only(text)
    assert d.code == "MPL306" and (d.span.line, d.span.column) == (6, 36)
    assert "after the one that sets 'capacity = 3' (line 5)" in d.message
    assert "prefetch budget 4 exceeds the cache capacity 3" in d.message
    assert (d.related[0].span.line, d.related[0].span.column) == (5, 38)
    # compatible pairs are fine
    assert codes(text.replace("capacity = 3", "capacity = 4")) == []


def test_denormal_expert_size_with_size_capacity_does_not_crash(tmp_path):
    # capacity in slots = 1 GiB / 1e-320 GB would overflow a float: an expert below one byte
    # is out of expert_size_gb's range, reported as such, with no traceback
    text = "policy p { cache { capacity = 1GiB  expert_size_gb = 1e-320 } }"
    errs = [d for d in analyze(text).diagnostics if d.is_error]
    assert [(d.code, "'expert_size_gb' must be in [1e-09, 1000] GB" in d.message) for d in errs] == \
        [("MPL203", True)]
    f = tmp_path / "p.moe"
    f.write_text(text)
    out = subprocess.run([sys.executable, "-m", "mpl", "check", str(f)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
