"""``cache.capacity_factor``: the cache's size as a fraction of the experts it can hold, turned
into slots from the model's shape by the one slot layout both backends are built from
(``mpl.runtime.core.layout``). A factor replays exactly like the slot count it stands for,
on both backends, through the API and ``mplc replay``; the checker's model-aware rules count
the same slots."""

from __future__ import annotations

import json

import pytest

import mpl
from mpl import schema
from mpl.checker import analyze
from mpl.sim import synthesize
from mpl.shapes import preset
from cli_helpers import clean, mplc
from runtime_helpers import both_backends  # noqa: F401  (every test on both backends)

SHARED = "policy f {\n    cache { capacity_factor = %s  eviction = lfu }\n}\n"
PER_LAYER = "policy f {\n    cache { capacity_factor = %s }\n    per_layer { allocation = uniform }\n}\n"


@pytest.mark.parametrize("factor, experts, slots", [
    (0.25, 1664, 416),        # docs/memory-tiers.md: a quarter of DeepSeek-V2-Lite's experts
    (0.3, 10, 3),             # read as the decimal written: 0.3 * 10 in binary is 3.0000000000000004
    (0.1, 3, 1), (1, 7, 7), (0.001, 8, 1), (0.5, 9, 5)])
def test_a_factor_is_the_fraction_rounded_up_to_whole_slots(factor, experts, slots):
    assert schema.factor_slots(factor, experts) == slots


def test_the_runtime_sizes_the_shared_cache_from_the_model(both_backends):
    rt = mpl.loads(SHARED % "0.3").runtime(4, 10, 2)
    assert rt.backend == both_backends
    assert rt.capacities() == [12] and rt.num_slots == 12 and rt.stats()["requested_slots"] == 12


def test_per_layer_caches_get_the_fraction_of_one_layers_experts(both_backends):
    rt = mpl.loads(PER_LAYER % "0.3").runtime(4, 10, 2)
    assert rt.capacities() == [3, 3, 3, 3] and rt.num_slots == 12


@pytest.mark.parametrize("text, slots", [(SHARED % "0.25", 64), (PER_LAYER % "0.25", 2)])
def test_a_factor_replays_like_the_slot_count_it_stands_for(both_backends, text, slots):
    trace = synthesize("mixtral-8x7b", steps=12, seed=4)      # 32 layers x 8 experts
    by_factor = mpl.loads(text).replay(trace)
    by_slots = mpl.loads(text.replace("capacity_factor = 0.25", f"capacity = {slots}")).replay(trace)
    assert by_factor.stats == by_slots.stats
    assert by_factor.belady == by_slots.belady and by_factor.sim == by_slots.sim


def test_the_checker_counts_the_slots_the_runtime_makes():
    # 0.002 of DeepSeek-V2-Lite's 1,664 experts is 4 slots (3.328 rounded up), below top-k 6
    a = analyze(SHARED % "0.002", model=preset("deepseek-v2-lite"))
    assert [d.code for d in a.diagnostics] == ["MPL502"] and "4" in a.diagnostics[0].message
    rt = mpl.loads(SHARED % "0.002").runtime(26, 64, 6)
    assert rt.capacities() == [4]


def test_a_capacity_override_replaces_the_factor(both_backends):
    trace = synthesize("mixtral-8x7b", steps=8, seed=2)
    rep = mpl.loads(SHARED % "0.5").replay(trace, capacity=8)
    assert rep.belady["capacities"] == 8
    assert rep.notes == ["capacity 8 replaces the policy's capacity_factor 0.5"]
    assert mpl.replay(SHARED % "0.5", trace, capacity=8).stats == rep.stats


def test_mplc_replay_runs_a_factor(tmp_path):
    (tmp_path / "f.moe").write_text(SHARED % "0.25")
    out = mplc("trace", "synth", "--preset", "mixtral-8x7b", "--steps", "4", "-o", "t.mpltrace",
               cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = mplc("replay", "f.moe", "--trace", "t.mpltrace", "--json", cwd=tmp_path)
    clean(out)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["belady"]["capacities"] == 64 and rep["stats"]["num_slots"] == 64
