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


#: a model-aware error of every kind the checker has, each about the trace's shape
MISFITS = {
    "MPL506": "policy p {\n  cache {\n    capacity = 16\n    pin = [0, 1]\n  }\n}\n",
    "MPL515": "policy p {\n  per_layer_hierarchy {\n    band layers = 0..40 {\n"
              "      tier hot { location = gpu  capacity = 200 }\n    }\n  }\n}\n",
    "MPL521": "policy p {\n  cache {\n    capacity = 64\n    pin layers = 40..41 { experts = [1] }\n"
              "  }\n}\n",
    "MPL505": "policy p {\n  cache { capacity = 4 }\n  per_layer {\n    total_budget = 40\n"
              "    min_capacity = 2\n  }\n}\n",
}


@pytest.mark.parametrize("code", sorted(MISFITS))
def test_a_policy_attach_refuses_is_refused_by_the_replay_at_its_line(code, trace, tmp_path):
    """What the checker calls a model-aware error on the trace's shape (and attach refuses) is
    a replay's located error too, in the policy's own file, not a report of a run that cannot
    happen."""
    from mpl.rules.model import RULES

    assert code in {r.code for r in RULES}
    path = tmp_path / "p.moe"
    path.write_text(MISFITS[code])
    shape = shape_of(trace.header)
    want = [d for d in checker.analyze(MISFITS[code], str(path), model=shape).errors
            if d.code == code][0]
    with pytest.raises(ReplayError) as e:
        replay(load_for_replay(str(path)), trace)
    assert str(e.value).startswith(f"{path}:{want.span.line}:{want.span.column}: policy p does not "
                                   f"fit the trace's model")
    assert str(e.value).endswith(f"{want.message} [{code}]")
    with pytest.raises(ReplayError, match=rf"^policy p does not fit .*\[{code}\]$"):
        replay(load_for_replay(MISFITS[code]), trace)        # text: no file to point into
