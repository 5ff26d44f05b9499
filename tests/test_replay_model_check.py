"""A policy loaded for replay against the trace's model is checked once: the replay's
model-aware check (``check_fits``) reads that result instead of checking the text again, and
what it decides is what a separate check decides."""

import pytest

from mpl import checker
from mpl.api import load_for_replay
from mpl.sim import ReplayError, replay, synthesize
from mpl.sim.replay import shape_of
from mpl.sim.tracemodel import with_model


@pytest.fixture(scope="module")
def trace():
    """A trace with its model's shape filled in, as a replay (and the tuner) sees it."""
    return with_model(synthesize("mixtral-8x7b", steps=20, seed=1))


POLICIES = [
    "policy a { cache { capacity = 64  eviction = lru } }",
    "policy b {\n  cache { capacity = 96  eviction = frequency_threshold  pin = [1, 2] }\n"
    "  schedule { mode = cpu_fallback }\n}",
    "policy c {\n  cache { capacity = 16  eviction = crf }\n  per_layer { allocation = uniform }\n"
    "  prefetch { strategy = history  budget = 2 }\n}",
]


def _counting(monkeypatch):
    """The model shapes analyze() is called with from now on (the replays' memo emptied)."""
    import sys

    replay_module = sys.modules["mpl.sim.replay"]
    monkeypatch.setattr(replay_module, "_FITS", {})
    calls = []
    real = checker.analyze

    def counted(text, *a, **kw):
        calls.append(kw.get("model"))
        return real(text, *a, **kw)

    monkeypatch.setattr(checker, "analyze", counted)
    return calls


@pytest.mark.parametrize("text", POLICIES)
def test_same_policy_with_or_without_the_model(text, trace):
    shape = shape_of(trace.header)
    plain, checked = load_for_replay(text), load_for_replay(text, model=shape)
    assert checked.source == plain.source
    assert repr(checked.ir) == repr(plain.ir)
    # (checked with the model, its warnings are among the policy's diagnostics too)
    extra = [d for d in checked.diagnostics if d not in plain.diagnostics]
    assert [d for d in checked.diagnostics if d in plain.diagnostics] == plain.diagnostics
    assert all(not d.is_error for d in extra)
    assert checked.fits == {shape: ()} and plain.fits == {}
    assert replay(checked, trace).stats == replay(plain, trace).stats


@pytest.mark.parametrize("text", POLICIES)
def test_replay_reads_the_load_time_check(text, trace, monkeypatch):
    pol = load_for_replay(text, model=shape_of(trace.header))
    calls = _counting(monkeypatch)
    replay(pol, trace)
    replay(pol, trace)
    assert calls == []                    # neither replay analysed the text again


def test_a_policy_loaded_without_the_model_is_checked_by_the_replay(trace, monkeypatch):
    pol = load_for_replay(POLICIES[0])
    calls = _counting(monkeypatch)
    replay(pol, trace)
    assert calls == [shape_of(trace.header)]


def test_another_shape_is_checked_again(trace, monkeypatch):
    pol = load_for_replay(POLICIES[0], model=shape_of(trace.header))
    other = with_model(synthesize("deepseek-v2-lite", steps=5, seed=1))
    calls = _counting(monkeypatch)
    replay(pol, other)
    assert calls == [shape_of(other.header)]


def test_a_policy_that_does_not_fit_fails_as_it_did(trace):
    """Expert 99 does not exist in Mixtral's 8: the load with the model falls back to the
    model-free check (the policy is fine on its own), and the replay refuses it, naming the
    diagnostic, exactly as for a policy loaded without the model."""
    text = "policy p { cache { capacity = 64  pin = [99] } }"
    with_model = load_for_replay(text, model=shape_of(trace.header))
    assert with_model.fits == {}
    with pytest.raises(ReplayError) as a:
        replay(with_model, trace)
    with pytest.raises(ReplayError) as b:
        replay(load_for_replay(text), trace)
    assert str(a.value) == str(b.value)
    assert "[MPL501]" in str(a.value)


def test_errors_without_the_model_are_the_same(trace):
    from mpl.sim.replay import PolicyLoadError

    text = "policy p { cache { capacity = 64  eviction = nosuch } }"
    with pytest.raises(PolicyLoadError) as a:
        load_for_replay(text, model=shape_of(trace.header))
    with pytest.raises(PolicyLoadError) as b:
        load_for_replay(text)
    assert str(a.value) == str(b.value)
