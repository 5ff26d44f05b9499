"""``replay(policy, trace, checkpoint=head)``: the statistics and the simulated time after the
head's dispatches, read from the one replay of the whole trace, are what a replay of the head
alone reports, on both backends, for demand-only policies (the pure backend's lean loop keeps
its counters in locals), prefetching ones, every schedule mode, per-layer caches and the
oracle (which replays the head apart: it sees the future); read at a tick of the replay or
replayed apart (a short head: more ticks than CHECKPOINT_TICKS) alike."""

from __future__ import annotations

import importlib

import pytest

import mpl
from mpl.runtime import compiled
from mpl.runtime.backend import forced
from mpl.sim import replay, synthesize, tracepack
from mpl.tune import prefix

replay_module = importlib.import_module("mpl.sim.replay")   # (mpl.sim.replay: the function)

POLICIES = {
    "lru": "policy p { cache { capacity = 40 } }",
    "lfu_cpu": "policy p { cache { capacity = 40 eviction = lfu } schedule { mode = cpu_fallback } }",
    "hybrid": "policy p { cache { capacity = 40 eviction = score } schedule { mode = hybrid } }",
    "prefetch": "policy p { cache { capacity = 40 } prefetch { strategy = history budget = 2 } }",
    "per_layer": "policy p { cache { capacity = 3 eviction = crf } per_layer { allocation = uniform } }",
    "belady": "policy p { cache { capacity = 40 eviction = belady } }",
}

BACKENDS = ["pure"] + (["compiled"] if compiled.available() else [])


@pytest.fixture(scope="module")
def trace():
    return synthesize("mixtral-8x7b", steps=40, seed=3)


@pytest.mark.parametrize("ticks", [0, 10**9])        # replayed apart / read at a tick
@pytest.mark.parametrize("share", [3, 10])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_checkpoint_is_the_head_replayed_alone(trace, backend, name, share, ticks, monkeypatch):
    monkeypatch.setattr(replay_module, "CHECKPOINT_TICKS", ticks)
    pol = mpl.api.load_for_replay(POLICIES[name])
    head = prefix(trace, len(trace) // share)
    assert 0 < len(head) < len(trace)
    with forced(backend):
        alone = replay(pol, head, belady=False)
        whole = replay(pol, trace, belady=False)
        both = replay(pol, trace, belady=False, checkpoint=head)
    cp = both.checkpoint
    assert cp["dispatches"] == len(head)
    assert cp["stats"] == alone.stats
    assert cp["sim"] == alone.sim
    # the replay itself is the same with or without the checkpoint
    assert both.stats == whole.stats and both.sim == whole.sim
    assert whole.checkpoint is None


@pytest.mark.parametrize("steps", [1, 7])     # a multiple of the bar's ticks, or not
def test_checkpoint_with_the_trace_held_and_a_progress_bar(trace, capsys, steps):
    """A held trace (a tune's) and a drawn progress bar: the tick serves both (or the head
    is replayed apart when the bar's ticks miss its end)."""
    pol = mpl.api.load_for_replay(POLICIES["prefetch"])
    every = max(len(trace) // 200, 1)
    head = prefix(trace, len(trace) // 3 // (every * 32) * every * 32 + steps * 32)
    with tracepack.reusing(trace):
        alone = replay(pol, head, belady=False)
        got = replay(pol, trace, belady=False, checkpoint=head, progress=True)
    assert got.checkpoint["stats"] == alone.stats and got.checkpoint["sim"] == alone.sim
    assert "replay p" in capsys.readouterr().err


@pytest.mark.parametrize("n", [0, -1])
def test_a_checkpoint_must_be_a_proper_head(trace, n):
    pol = mpl.api.load_for_replay(POLICIES["lru"])
    with pytest.raises(ValueError, match="checkpoint"):
        replay(pol, trace, checkpoint=trace if n == 0 else prefix(trace, 0))
