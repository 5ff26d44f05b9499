"""Every integer and real parameter's range (mpl.schema), from the table itself: a value just
past the largest bound is MPL203 naming the value and the range, whose clamp fix gives a
clean policy; the same value set by an adapt action or a conditional value, and an adapt
rule's duration past schema.RULE_DURATION_MAX, too; and every path that runs a policy sees
the diagnostic before anything runs (mpl.loads for attach, the replay loader, the vLLM
preflight, mplc check and mplc replay)."""

from __future__ import annotations

import os
import sys

import pytest

import mpl
from mpl import schema
from mpl.checker import analyze

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile"))

import make_corpus  # noqa: E402
from cli_helpers import clean, mplc  # noqa: E402

BOUNDED = [p for p in make_corpus.numeric_params() if p.max is not None]


def test_every_integer_and_real_parameter_has_an_upper_bound_with_its_reason():
    unbounded = [p.key for p in make_corpus.numeric_params() if p.max is None]
    assert unbounded == []
    for p in BOUNDED:        # the reason is in the doc text (hover, docs/MANUAL.md); a
        if p.max == 1:       # fraction's [0, 1] needs none
            continue
        assert "At most" in p.doc or "at most" in p.doc, p.key


def _past(p: schema.Param) -> str:
    return make_corpus._lit(p.max + 1 if p.type != schema.NUMBER else p.max * 1.5 + 0.5)


def _apply(text: str, fix) -> str:
    for e in sorted(fix.edits, key=lambda e: -e.span.offset):
        text = text[:e.span.offset] + e.new_text + text[e.span.end_offset:]
    return text


@pytest.mark.parametrize("p", BOUNDED, ids=[p.key for p in BOUNDED])
@pytest.mark.parametrize("how", ["param", "adapt", "conditional"])
def test_a_value_past_the_range_is_reported_and_clamped(p, how):
    if how != "param" and not p.conditional:
        pytest.skip("not adaptable")
    value = _past(p)
    text = make_corpus.policy_text(p.key, value, how=how)
    errs = [d for d in analyze(text).diagnostics if d.is_error]
    [d] = [d for d in errs if d.code == "MPL203"]
    assert f"'{p.name}" in d.message and value in d.message and p.range_text() in d.message
    fixed = _apply(text, d.fixes[0])
    # in range now (a relation with another value, MPL3xx, may still hold against it)
    assert [x.code for x in analyze(fixed).diagnostics if x.is_error and x.code < "MPL300"] == [], fixed


@pytest.mark.parametrize("unit", schema.RULE_DURATION_UNITS)
def test_a_rule_duration_past_the_range_is_reported_and_clamped(unit):
    text = ("policy p {\n  cache { capacity = 8 }\n  monitor { metrics = [hit_rate] }\n  adapt {\n"
            f"    when hit_rate < 0.5 for 18446744073709551616 {unit} {{ eviction = lfu }}\n  }}\n}}\n")
    [d] = [d for d in analyze(text).diagnostics if d.is_error]
    assert d.code == "MPL203" and str(schema.RULE_DURATION_MAX) in d.message
    assert [x for x in analyze(_apply(text, d.fixes[0])).diagnostics if x.is_error] == []
    ok = text.replace("18446744073709551616", str(schema.RULE_DURATION_MAX))
    assert [x for x in analyze(ok).diagnostics if x.is_error] == []


HOSTILE = make_corpus.policy_text("prefetch.history_window", "4611686018427387904")


def test_every_path_that_runs_a_policy_sees_the_range_error_first(tmp_path):
    with pytest.raises(mpl.PolicyError) as e:          # compile and attach load through this
        mpl.loads(HOSTILE)
    assert [d.code for d in e.value.diagnostics] == ["MPL203"]
    from mpl.api import load_for_replay
    with pytest.raises(Exception) as e:
        load_for_replay(HOSTILE)
    assert "MPL203" in str(e.value) or any(d.code == "MPL203" for d in e.value.diagnostics)
    from mpl.vllm.errors import PREFLIGHT, PolicyDoesNotFit
    with pytest.raises(PolicyDoesNotFit) as e:
        PREFLIGHT.check_policy(HOSTILE, None, None, None)
    assert "MPL203" in str(e.value) and "the engine was not started" in str(e.value)
    (tmp_path / "h.moe").write_text(HOSTILE)
    r = mplc("check", "h.moe", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "MPL203" in r.stdout and "[1, 100000]" in r.stdout
    make_corpus.build(tmp_path)
    r = mplc("replay", "h.moe", "--trace", make_corpus.BASE_TRACE, cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "MPL203" in r.stderr and "4611686018427387904" in r.stderr
