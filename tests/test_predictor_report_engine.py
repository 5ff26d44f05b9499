"""The predictor report (``mpl.tune_predict``, what ``mplc tune`` prints) ranks history and
affinity with the compiled engine's own predictors when runtimes are compiled: the same
scores as the Python predictors on random traces (decode and prefill dispatches, several
windows and budgets); and ``Engine._rank`` answers every bad argument with an exception."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st

from mpl.api import load_for_replay
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.sim import synthesize
from mpl.tune_predict import _ENGINE_POLICIES, _engine_rank, evaluate_many
from property_profiles import prop

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

PRESETS = ("mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b", "olmoe")


def scores(trace, window, budgets):
    got = evaluate_many(trace, ("history", "affinity"), budgets, window=window, warmup=0.05)
    return [(s.strategy, s.scored, s.hits, s.predicted, s.actual) for s in got]


@needs_engine
@prop(30, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_the_engine_ranks_as_the_python_predictors(seed):
    r = random.Random(seed)
    preset = r.choice(PRESETS)
    trace = synthesize(preset, steps=r.randint(8, 40), seed=seed % 1000,
                       prompt_tokens=r.choice([0, 0, 5, 40]))
    window = r.choice([1, 2, 5, 50, 300])
    budgets = tuple(sorted(r.sample([1, 2, 3, 4, 8, 16, 200], r.randint(1, 4))))
    h = trace.header
    assert _engine_rank("history", h, window) is not None
    assert _engine_rank("affinity", h, window) is not None
    compiled_scores = scores(trace, window, budgets)
    with forced("pure"):
        assert _engine_rank("history", h, window) is None
        pure_scores = scores(trace, window, budgets)
    assert compiled_scores == pure_scores
    assert all(s[1] > 0 for s in compiled_scores)


@pytest.fixture
def engines():
    out = {}
    for name, text in _ENGINE_POLICIES.items():
        pol = load_for_replay(text.replace("WINDOW", "50"))
        out[name] = pol.runtime(4, 8, 2)._impl
    return out


@needs_engine
def test_rank_observes_then_ranks_the_next_layer(engines):
    hist, aff = engines["history"], engines["affinity"]
    assert hist._rank(0, 0, 0, [3, 1], 8) == []             # layer 1 seen nothing yet
    assert hist._rank(0, 1, 0, [5, 2], 8) == []
    assert hist._rank(0, 0, 1, (3,), 8) == [2, 5]           # layer 1's counts, ties: lower id
    assert hist._rank(0, 1, 1, [5], 1) == []                 # layer 2: nothing seen
    assert hist._rank(0, 0, 2, [3], 1) == [5]                # layer 1: 5 twice, 2 once
    assert aff._rank(1, 0, 0, [1, 2], 4) == []               # nothing learned yet
    aff._rank(1, 1, 0, [6, 4], 4)                            # layer 0 -> 1 learned
    assert aff._rank(1, 0, 1, [1], 4) == [4, 6]              # P = 1 each, lower id first
    assert aff._rank(1, 0, 2, [2], 1) == [4]


@needs_engine
@pytest.mark.parametrize("args, err, msg", [
    ((), TypeError, "kind, layer"),
    ((0, 0, 0, [1]), TypeError, "kind, layer"),
    ((2, 0, 0, [1], 4), ValueError, "kind is 0"),
    ((0, 4, 0, [1], 4), ValueError, "layer out of range"),
    ((0, -1, 0, [1], 4), ValueError, "layer out of range"),
    ((0, 2 ** 70, 0, [1], 4), ValueError, "layer out of range"),
    ((0, 0, -1, [1], 4), ValueError, "step out of range"),
    ((0, 0, 2 ** 63, [1], 4), ValueError, "step out of range"),
    ((0, 0, 0, [1], -1), ValueError, "top"),
    ((0, 0, 0, [8], 4), ValueError, "out of range"),
    ((0, 0, 0, [-1], 4), ValueError, "out of range"),
    ((0, 0, 0, [-2], 4), ValueError, "out of range"),
    ((0, 0, 0, [2 ** 64], 4), ValueError, "out of range"),
    ((0, 0, 0, [1, 1], 4), ValueError, "distinct"),
    ((0, 0, 0, list(range(9)), 4), ValueError, "more experts"),
    ((0, 0, 0, {1, 2}, 4), TypeError, "list or tuple"),
    ((0, 0, 0, [1.0], 4), TypeError, "list or tuple of ints"),
    ((0, 0, 0, [True], 4), TypeError, "list or tuple of ints"),
    ((0.0, 0, 0, [1], 4), TypeError, "ints"),
    ((True, 0, 0, [1], 4), TypeError, "ints"),
])
def test_rank_refuses_a_bad_call(engines, args, err, msg):
    with pytest.raises(err, match=msg):
        engines["history"]._rank(*args)


@needs_engine
def test_rank_refuses_a_predictor_the_policy_does_not_hold(engines):
    with pytest.raises(ValueError, match="does not configure"):
        engines["history"]._rank(1, 0, 0, [1], 4)
    with pytest.raises(ValueError, match="does not configure"):
        engines["affinity"]._rank(0, 0, 0, [1], 4)
    plain = load_for_replay("policy p { cache { capacity = 4 } }").runtime(4, 8, 2)
    if plain.backend == "compiled":
        with pytest.raises(ValueError, match="does not configure"):
            plain._impl._rank(0, 0, 0, [1], 4)


@needs_engine
def test_a_huge_top_is_the_layer_s_experts(engines):
    aff = engines["affinity"]
    aff._rank(1, 2, 5, [0, 1], 2 ** 62)
    aff._rank(1, 3, 5, [2, 3, 4], 2 ** 62)
    assert aff._rank(1, 2, 6, [0], 2 ** 62) == [2, 3, 4]


@needs_engine
def test_a_window_the_schema_refuses_is_ranked_in_python():
    h = synthesize("mixtral-8x7b", steps=4, seed=0).header
    assert _engine_rank("history", h, 50) is not None
    for window in (0, 10 ** 9):
        assert _engine_rank("history", h, window) is None
