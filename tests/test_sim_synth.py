"""Synthetic traces: shapes, determinism, knobs, and the statistics the presets imitate."""

import json
import statistics
import subprocess
import sys
from collections import Counter

import pytest

from mpl import shapes
from mpl import traceio
from mpl.sim import synth
from mpl.sim.belady import belady


@pytest.mark.parametrize("name", list(shapes.PRESETS))
def test_presets_have_the_published_shapes(name):
    s = shapes.PRESETS[name]
    tr = synth.synthesize(name, steps=6, seed=0)
    h = tr.header
    assert (h.num_experts, h.top_k, h.moe_layers) == (s.num_experts, s.top_k, s.moe_layers)
    assert h.expert_bytes == s.expert_bytes
    assert len(tr) == 6 * s.num_moe_layers
    for d in tr:
        assert len(d.experts[0]) == s.top_k and len(set(d.experts[0])) == s.top_k
        assert all(0 <= e < s.num_experts for e in d.experts[0])
        assert abs(sum(d.weights[0]) - 1) < 0.01


def test_deterministic_for_a_seed_and_different_across_seeds():
    a = traceio.to_bytes(synth.synthesize("olmoe-1b-7b", steps=30, seed=7))
    b = traceio.to_bytes(synth.synthesize("olmoe-1b-7b", steps=30, seed=7))
    c = traceio.to_bytes(synth.synthesize("olmoe-1b-7b", steps=30, seed=8))
    assert a == b and a != c


def _top_to_median(tr, layer):
    cnt = Counter(e for d in tr if d.layer == layer for e in d.distinct())
    v = sorted((cnt.get(e, 0) for e in range(tr.header.num_experts)), reverse=True)
    return v[0] / statistics.median(v)


def test_deepseek_preset_imitates_the_published_skew():
    # seed: "some experts activated 3-5x more often" (DeepSeek-V2-Lite)
    tr = synth.synthesize("deepseek-v2-lite", steps=800, seed=0)
    ratio = statistics.median(_top_to_median(tr, l) for l in range(26))
    assert 3.0 <= ratio <= 5.0, ratio


def test_skew_knob_raises_belady_hit_rate():
    lo = synth.synthesize("olmoe-1b-7b", steps=200, seed=1, skew=0.0, reuse=0.0, affinity=0.0)
    hi = synth.synthesize("olmoe-1b-7b", steps=200, seed=1, skew=1.2, reuse=0.0, affinity=0.0)
    caps = [16] * 16
    assert belady(hi.dispatches, 64, capacities=caps).hit_rate > belady(lo.dispatches, 64, capacities=caps).hit_rate + 0.1


def test_a_skew_too_steep_for_a_float_still_draws_k_distinct_experts():
    """1/rank**skew below the smallest float is a weight of 0 (never drawn), not an
    overflow: every token still gets top-k distinct experts."""
    for skew in (200.0, 1e300):
        tr = synth.synthesize("deepseek-v2-lite", steps=3, seed=2, skew=skew)
        assert all(len(set(e)) == len(e) == 6 for d in tr.dispatches for e in d.experts)


def test_reuse_knob_repeats_previous_step_experts():
    def repeat(tr):
        prev, same, n = {}, 0, 0
        for d in tr:
            ks = set(d.distinct())
            if d.layer in prev:
                same += len(ks & prev[d.layer])
                n += len(ks)
            prev[d.layer] = ks
        return same / n
    a = synth.synthesize("mixtral-8x7b", steps=300, seed=2, reuse=0.0, affinity=0.0, skew=0.0)
    b = synth.synthesize("mixtral-8x7b", steps=300, seed=2, reuse=0.6, affinity=0.0, skew=0.0)
    assert repeat(a) < 0.35 and repeat(b) > repeat(a) + 0.2


def test_predictions_knob_records_lookahead_predictions():
    tr = synth.synthesize("qwen1.5-moe-a2.7b", steps=50, seed=3, pred_accuracy=0.8)
    d0 = tr.dispatches[0]
    assert set(d0.predictions) == {1}
    hits = total = 0
    for i, d in enumerate(tr.dispatches):
        if d.predictions:
            true = set(tr.dispatches[i + 1].distinct())
            hits += len(true & set(d.predictions[d.layer + 1]))
            total += len(true)
    assert 0.7 < hits / total < 0.95


def test_prompt_tokens_make_a_prefill_step():
    tr = synth.synthesize("mixtral-8x7b", steps=3, seed=0, prompt_tokens=5)
    assert tr.dispatches[0].tokens == 5 and tr.dispatches[-1].tokens == 1


def test_bad_knobs_are_rejected():
    with pytest.raises(ValueError, match="reuse"):
        synth.synthesize("mixtral-8x7b", steps=3, reuse=1.5)
    with pytest.raises(ValueError, match="unknown preset"):
        synth.synthesize("gpt-5", steps=3)


def test_cli_synth(tmp_path):
    out = tmp_path / "q.mpltrace"
    cmd = [sys.executable, "-m", "mpl.cli.main", "trace", "synth", "--preset", "qwen3-moe",
           "--steps", "20", "--seed", "4", "--skew", "0.9", "-o", str(out), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["dispatches"] == 20 * 48 and info["num_experts"] == 128
    tr = traceio.load(str(out))
    assert tr.header.extra["synth"]["skew"] == 0.9
    r2 = subprocess.run(cmd, capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    assert traceio.load(str(out)).dispatches[-1].experts == tr.dispatches[-1].experts
    bad = subprocess.run([sys.executable, "-m", "mpl.cli.main", "trace", "synth", "--preset",
                          "nope"], capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown preset" in bad.stderr and "Traceback" not in bad.stderr
