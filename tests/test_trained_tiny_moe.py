"""The trained tiny MoE (benchmarks/models/tiny-moe-stdlib, made by
benchmarks/train_tiny_moe.py): the shipped weights give the bits per byte their meta.json and
README record on the shipped held-out slice; training is bit-for-bit reproducible; and its
learned routing is what live pre-gating predicts better than on the same architecture
random-initialised (benchmarks/bench_prediction.py, through attach and generate)."""

from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


def _module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tm():
    return _module("train_tiny_moe")


@pytest.fixture(scope="module")
def bench(tm):
    import sys
    sys.modules.setdefault("train_tiny_moe", tm)     # bench_prediction imports it by name
    return _module("bench_prediction")


@pytest.fixture(scope="module")
def meta(tm):
    with open(os.path.join(tm.MODEL_DIR, "meta.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def trained(tm):
    torch.set_num_threads(1)
    return tm.load()


def test_the_shipped_weights_give_the_recorded_bits_per_byte(tm, meta, trained):
    with open(os.path.join(tm.MODEL_DIR, "heldout_sample.txt"), "rb") as f:
        sample = f.read()
    assert len(sample) == tm.SAMPLE_BYTES
    bpb = tm.bits_per_byte(trained, sample)
    assert bpb == pytest.approx(meta["sample_bits_per_byte"], abs=0.01)
    # the README states the run's held-out figure, as meta.json records it
    with open(os.path.join(tm.MODEL_DIR, "README.md")) as f:
        readme = f.read()
    assert f"{meta['heldout_bits_per_byte']:.3f} bits per byte" in readme
    assert re.search(rf"--steps {meta['steps']}\b", readme) and f"--seed {meta['seed']}" in readme
    # the weights are the recorded ones, and far from an untrained model's ~8 bits per byte
    assert tm.state_hash(trained.half()) == meta["weights_sha256"]
    assert tm.bits_per_byte(tm.random_model(0), sample[:2048]) > bpb + 3


def test_training_is_bit_for_bit_reproducible(tm):
    files = tm.corpus()[0][:6]
    kw = dict(steps=20, batch=4, seq=64, warmup=5, threads=1, files=files)
    a, loss_a = tm.train(seed=0, **kw)
    b, loss_b = tm.train(seed=0, **kw)
    assert tm.state_hash(a) == tm.state_hash(b) and loss_a == loss_b
    untrained, _ = tm.train(seed=0, **dict(kw, steps=0))
    assert tm.state_hash(untrained) != tm.state_hash(a)      # the hash sees the training


def test_live_pregating_predicts_the_trained_routing_better_than_random(tm, bench, trained):
    ids = bench.prompts(4, 48)
    acc = {}
    for name, model in (("trained", trained), ("random", tm.random_model(0))):
        policy, stats, trace, _ = bench.run_hf(model, ids, 16, "lookahead")
        cands, _ = bench.candidates(trace, policy)
        row = bench.accuracy(trace, cands, model.config.num_experts_per_tok)
        assert row["predictions"] == 4 * 15 * 3      # prompts x decode steps x layers 1..3
        assert stats["prefetch_issued"] > 0
        acc[name] = row["accuracy"]
    assert acc["trained"] > acc["random"], acc


def test_the_learned_candidates_replayed_from_the_trace_are_the_live_ones(bench, trained):
    """bench_prediction.py judges the learned predictor by replaying it on the trace recorded
    in the same run: its state at the end equals the live runtime's, so every candidate list
    it scores is the one the live runtime had."""
    policy, stats, trace, state = bench.run_hf(trained, bench.prompts(2, 48), 16, "learned")
    cands, lrn = bench.candidates(trace, policy)
    assert state is not None and lrn.dump() == state
    assert len(cands) == len(trace.dispatches)       # one target ahead per dispatch
    row = bench.accuracy(trace, cands, 2)
    assert row["predictions"] == 2 * 15 * 3 and 0.0 < row["accuracy"] <= 1.0
    assert 0 < stats["prefetch_useful"] <= stats["prefetch_issued"]
