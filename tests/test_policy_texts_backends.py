"""Random policy *texts* (tests/policy_texts.py: drawn from the schema, every block, parameter,
nested item and adapt action the language has, with values in and out of range, units,
fallbacks and conditional values), taken the way a user's file is: checked, and when clean loaded, formatted, and run on
both backends. What the checker accepts must lower, compile, format (and render canonically) to the same IR and run on
the compiled engine and the pure runtime with the same Plans, errors and state; what it
refuses gets located errors. The other backend tests draw policies as IR or from a fixed
grammar of tiers; this one reaches the combinations only text makes (an adapt rule setting a
cache parameter of a policy with memory tiers, a size where a count is usual, ...)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, strategies as st

import mpl
from mpl import fmt, schema
from mpl.checker import analyze
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.runtime.core import RuntimeConfigError
from mpl.sim.replay import ReplayError
from mpl.trace import Dispatch, Trace, TraceHeader
from policy_texts import Texts
from property_profiles import prop
from runtime_helpers import observable
from test_runtime_backends import calls, play

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

SETTINGS = prop(100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                           HealthCheck.data_too_large])


def without_lines(ir_json: str):
    """An IR's JSON without source lines (formatting moves them)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("line", "source_line")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(json.loads(ir_json))


def small_trace(r: random.Random, L: int, E: int, K: int) -> Trace:
    ds = [Dispatch(step, layer, [r.sample(range(E), K) for _ in range(r.choice([1, 1, 3]))],
                   None, None) for step in range(10) for layer in range(L)]
    return Trace(TraceHeader("tiny", L, tuple(range(L)), E, K, expert_bytes=50_000_000), ds)


def test_the_generator_draws_every_block_and_item():
    """The drawn texts reach every block, nested item kind and kind of adapt action."""
    seen = set()
    for seed in range(300):
        text = Texts(random.Random(seed)).policy()
        seen |= {b for b in schema.BLOCKS if f"    {b} {{" in text}
        seen |= {k for k in schema.SECTIONS if f" {k} " in text or f"{k} layers" in text}
        seen |= {a for a in ("trigger ", "rebalance ") if a in text}
    assert set(schema.BLOCKS) | set(schema.SECTIONS) | {"trigger ", "rebalance "} <= seen


@needs_engine
@SETTINGS
@given(st.integers(0, 2**32 - 1), st.data())
def test_a_policy_text_runs_alike_on_both_backends(seed, data):
    r = random.Random(seed)
    text = Texts(r).policy()
    a = analyze(text, None)
    errors = [d for d in a.diagnostics if d.is_error]
    for d in a.diagnostics:
        assert 0 <= d.span.offset <= d.span.end_offset <= len(text), d
        assert "internal" not in d.message, d
    if errors or not a.ir:
        with pytest.raises(mpl.PolicyError):
            mpl.loads(text)
        return
    pol = mpl.loads(text)
    compile(pol.source, "<policy module>", "exec")
    formatted = fmt.format_text(text)
    b = analyze(formatted, None)
    assert not [d for d in b.diagnostics if d.is_error], formatted
    assert ({k: without_lines(v.to_json()) for k, v in a.ir.items()}
            == {k: without_lines(v.to_json()) for k, v in b.ir.items()})
    assert fmt.format_text(formatted) == formatted
    canonical = analyze(pol.text(), None)          # what sweeps, overrides and model checks read
    assert not canonical.errors, pol.text()
    assert without_lines(canonical.ir[pol.name].to_json()) == without_lines(pol.ir.to_json())
    E = r.randint(2, 16)
    L, K = r.randint(1, 6), r.randint(1, min(4, E))
    try:
        pure = pol.runtime(L, E, K, backend="pure")
    except RuntimeConfigError as e:
        with pytest.raises(RuntimeConfigError) as other:
            pol.runtime(L, E, K)
        assert str(other.value) == str(e)
        return
    engine = pol.runtime(L, E, K)
    assert engine.backend == "compiled", engine.backend_reason
    play(engine, pure, data.draw(st.lists(calls(L, E, K), min_size=1, max_size=60)))
    assert observable(engine) == observable(pure)
    if r.random() < 0.2:
        trace = small_trace(r, L, E, K)
        try:
            with forced("pure"):
                ra = pol.replay(trace)
        except ReplayError as e:    # a model-aware error on the trace's shape, as attach's
            assert e.args[0].endswith("]") and "does not fit the trace's model" in e.args[0]
            with pytest.raises(ReplayError) as other:
                pol.replay(trace)
            assert str(other.value) == str(e)
            return
        rb = pol.replay(trace)
        assert ra.stats == rb.stats and ra.sim == rb.sim and ra.belady == rb.belady
