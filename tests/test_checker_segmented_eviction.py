"""Segmented eviction ``a | b``: only single-queue rules can be a side. Every pair of the
schema's eviction rules either checks clean and runs, or gets a located MPL208 (never a
runtime KeyError); the runtime itself refuses a bad pair with a ValueError naming the rule
(IR built without the checker)."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

import mpl
from mpl import dsl, schema
from mpl.checker import analyze
from runtime_helpers import make_ir, zipf_trace

RULES = schema.PARAMS["cache.eviction"].enum_names()
SINGLE = {"lru", "lfu", "score", "frequency_threshold"}   # the rules a segment can hold


def test_the_schema_has_the_rules_this_test_is_about():
    assert len(RULES) == 14 and SINGLE < set(RULES)
    assert {"fallback", "arc", "s3fifo", "lfru", "least_stale", "crf", "classlru", "vllm_lfru",
            "farthest_layer", "belady"} < set(RULES)


def test_schema_segment_rules_are_the_runtime_single_queue_stores():
    """The checker reads the schema's flag (it may not import the runtime); the runtime
    builds the segments from its own stores: the two lists must be the same."""
    from mpl.runtime.eviction import SEGMENT_RULES

    flagged = {e.name for e in schema.param("cache.eviction").enum if e.segment}
    assert flagged == set(SEGMENT_RULES) == SINGLE


def _text(a, b):
    return f"policy p {{ cache {{ capacity = 6 eviction = {a} | {b} }} }}\n"


@pytest.mark.parametrize("purpose", ["live", "replay"])
@pytest.mark.parametrize("a,b", list(itertools.product(RULES, RULES)))
def test_every_pair_checks_clean_and_runs_or_is_refused(a, b, purpose):
    text = _text(a, b)
    an = analyze(text, purpose=purpose)
    if a in SINGLE and b in SINGLE:
        assert an.diagnostics == [], [(d.code, d.message) for d in an.diagnostics]
        rt = mpl.loads(text).runtime(2, 8, 2)
        for layer, experts, _ in zipf_trace(6, 2, 8, 2, seed=3):
            rt.dispatch(layer, experts)
        s = rt.stats()
        assert s["accesses"] == 6 * 2 * 2 and s["hits"] + s["misses"] == s["accesses"]
        return
    assert [d.code for d in an.diagnostics] == ["MPL208"], [(d.code, d.message) for d in an.diagnostics]
    d = an.diagnostics[0]
    bad = a if a not in SINGLE else b
    # located at the offending side
    start = text.index(f"= {a} | {b}") + 2 + (0 if a not in SINGLE else len(a) + 3)
    assert (d.span.offset, d.span.end_offset) == (start, start + len(bad))
    assert f"'{bad}'" in d.message and "cannot be one side of 'a | b'" in d.message
    assert not an.ir
    with pytest.raises(mpl.PolicyError) as e:
        mpl.loads(text)
    assert "MPL208" in str(e.value)
    # a suggested replacement is itself a clean policy
    for fix in d.fixes:
        (edit,) = fix.edits
        fixed = text[:edit.span.offset] + edit.new_text + text[edit.span.end_offset:]
        errors = [x for x in analyze(fixed, purpose="replay").diagnostics if x.is_error]
        assert errors == [], (fixed, [(x.code, x.message) for x in errors])


def test_cli_check_reports_the_pair(tmp_path):
    p = tmp_path / "arc.moe"
    p.write_text("policy p { cache { capacity = 6 eviction = arc | lru } }\n")
    r = subprocess.run([sys.executable, "-m", "mpl", "check", str(p)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{p}:1:44: error[MPL208]: 'arc' is a complete policy" in r.stdout
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_cli_replay_refuses_belady_as_a_side(tmp_path):
    trace = tmp_path / "t.mpltrace"
    subprocess.run([sys.executable, "-m", "mpl", "trace", "synth", "--preset", "mixtral-8x7b",
                    "--steps", "4", "-o", str(trace)], check=True, capture_output=True)
    p = tmp_path / "lb.moe"
    p.write_text("policy p { cache { capacity = 6 eviction = lru | belady } }\n")
    r = subprocess.run([sys.executable, "-m", "mpl", "replay", str(p), "-t", str(trace), "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "MPL208" in out and "'belady'" in out, out
    assert "internal error" not in out and "KeyError" not in out


def test_dsl_goes_through_the_same_check():
    b = dsl.policy("seg").cache(capacity=6, eviction=dsl.fallback("s3fifo", "lru"))
    with pytest.raises(mpl.PolicyError) as e:
        b.build()
    assert "MPL208" in str(e.value) and "'s3fifo'" in str(e.value)


@pytest.mark.parametrize("rule", ["arc|lru", "lru|lfru", "s3fifo|s3fifo", "lfu|fallback", "lru|belady",
                                  "lru|nope", "lru|lfu|score"])
def test_runtime_refuses_a_bad_pair_with_a_clear_error(rule):
    """An IR that never went through the checker: a ValueError naming the rule, no KeyError."""
    from mpl.api import from_ir
    from mpl.runtime.eviction import make_store

    pir = make_ir({"cache.capacity": 6, "cache.eviction": rule})
    with pytest.raises(ValueError) as e:
        make_store(rule, 6, pir.values)
    assert not isinstance(e.value, KeyError)
    bad = next(s for s in rule.split("|", 1) if s not in SINGLE)
    assert repr(bad) in str(e.value) and "cannot be one side" in str(e.value)
    with pytest.raises(ValueError) as e:
        from_ir(pir).runtime(2, 8, 2)
    assert repr(bad) in str(e.value)


def test_runtime_builds_a_good_pair_directly():
    from mpl.runtime.eviction import make_store

    pir = make_ir({"cache.capacity": 6, "cache.eviction": "score|lru"})
    st = make_store(" score | lru ", 6, pir.values)
    assert st.name == "score|lru"


def test_adapt_and_conditional_values_keep_single_pairs():
    """An adapt action takes one value (the grammar has no 'a | b' there); `fallback` in an
    action is the valid pair lfu | lru, and a conditional value's base pair is checked."""
    ok = ("policy p { cache { capacity = 6 }\n"
          "  adapt { when hit_rate < 0.5 { eviction = fallback } } }\n")
    assert [d for d in analyze(ok).diagnostics if d.is_error] == []
    rt = mpl.loads(ok).runtime(2, 8, 2)
    for layer, experts, _ in zipf_trace(20, 2, 8, 2, seed=1):
        rt.dispatch(layer, experts)
    bad = "policy p { cache { capacity = 6 eviction = lfru | lru : lru when hit_rate < 0.5 } }\n"
    assert [d.code for d in analyze(bad).diagnostics] == ["MPL208"]
    pair_in_action = ("policy p { cache { capacity = 6 }\n"
                      "  adapt { when hit_rate < 0.5 { eviction = arc | lru } } }\n")
    codes = [d.code for d in analyze(pair_in_action).diagnostics]
    assert codes and all(c.startswith("MPL0") for c in codes), codes   # a syntax error, located
