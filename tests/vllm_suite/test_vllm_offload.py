"""Live expert offload in vLLM's CPU build (PolicyRunner(..., offload=True)): tiny
random-initialised Qwen3-MoE and Mixtral (float32, greedy) generate exactly the token ids of
the same engine without offload, with the pool at 25%, 50% and 100% of the experts, shared
and per-layer caches, for one request and for six concurrent requests of different lengths;
the copies into slots equal the runtime's loads; the live statistics equal an mpl replay of
the trace recorded in the same run (its pre-gating predictions too, for the lookahead and
learned prefetches); the expert memory the layers hold is the pool's.

One engine per model: the reference runs with recording only, then ``PolicyRunner.switch``
installs each policy live (the experts back on the layers in between)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_vllm

from prompts import CONCURRENT, EXPERTS, LAYERS, MAX_TOKENS, SINGLE, generate_both as _generate, logprobs  # noqa: F401


def shared_policy(slots: int) -> str:
    return f"policy shared_{slots} {{ cache {{ capacity = {slots}  eviction = lru }} }}\n"


def per_layer_policy(per_layer: int) -> str:
    return (f"policy per_layer_{per_layer} {{\n"
            f"    cache {{ capacity = {per_layer}  eviction = lfu }}\n"
            f"    per_layer {{ allocation = uniform  min_capacity = {min(2, per_layer)} }}\n}}\n")


#: (case name, policy text, extra PolicyRunner.switch arguments); 25/50/100% of the 24 experts
CASES = [
    ("shared-25", shared_policy(6), {}),
    ("shared-50", shared_policy(12), {}),
    ("shared-100", shared_policy(24), {}),
    ("per-layer-25", per_layer_policy(2), {}),
    ("per-layer-50", per_layer_policy(4), {}),
    ("per-layer-100", per_layer_policy(8), {}),
    # a step's experts beyond the cache (3 slots, 12.5%) and 2 transient slots: on the CPU
    # the host window (the kernel on the host store; passes run with memory tiers:
    # test_vllm_disk_tier.py, test_vllm_more_tiers.py)
    ("window-12", shared_policy(3), {"stream_slots": 2}),
    # misses computed on the CPU from the host store (and loaded in the background)
    ("cpu-fallback-25", "policy cf { cache { capacity = 6 }  schedule { mode = cpu_fallback } }\n", {}),
    # each miss placed by the hybrid schedule's cost decision: loaded, or computed on the CPU
    ("hybrid-25", "policy hy { cache { capacity = 6 }  schedule { mode = hybrid } }\n", {}),
    # pre-gating: the next layers' gates and routers on each layer's hidden states give the
    # dispatch's predictions (a lookahead prefetch's; a learned predictor's feature)
    ("lookahead-25", "policy la { cache { capacity = 6 }\n"
                     "    prefetch { strategy = lookahead  budget = 2  lookahead = 2 } }\n", {}),
    ("learned-25", "policy le { cache { capacity = 6 }\n"
                   "    prefetch { strategy = learned  budget = 2  confidence = 0.2 } }\n", {}),
]
MODELS = ("qwen3-moe", "mixtral")


@pytest.fixture(scope="module", params=MODELS)
def runs(request, tiny):
    """model -> {"reference": (one, many), case: (one, many)} from one engine."""
    from mpl.vllm import PolicyRunner

    runner = PolicyRunner(model=tiny(request.param), dtype="float32", max_model_len=256,
                          seed=0, enable_prefix_caching=False)
    from mpl.vllm import VllmIntegrationError
    try:
        out = {"reference": _generate(runner)}
        for name, text, kw in CASES:
            runner.switch(text, offload=True, **kw)
            out[name] = _generate(runner)
        # a policy only a worker can refuse (a tier at fp16 over the model's float32 experts):
        # the one that ran before runs again, and the engine stays up
        with pytest.raises(VllmIntegrationError) as refused:
            runner.switch(REFUSED_IN_A_WORKER, offload=True)
        out["refused"] = (str(refused.value), _generate(runner))
        runner.switch(CASES[0][1], offload=True)
        out["after-refused"] = _generate(runner)
        runner.close()
        with pytest.raises(VllmIntegrationError) as closed:
            runner.generate(SINGLE, max_tokens=2)
        out["closed"] = str(closed.value)
        yield request.param, out
    finally:
        runner.close()


#: a policy the driver's checks let through and every worker refuses: it holds its device tier
#: at fp16, and the model's experts are float32 (only a worker sees its tensors' dtype)
REFUSED_IN_A_WORKER = ("policy half { hierarchy { tier hot { location = gpu  capacity = 6  "
                       "dtype = fp16 }  tier ram { location = cpu } } }\n")


def test_a_policy_a_worker_refuses_leaves_the_previous_one_running(runs):
    model, out = runs
    message, (one, many) = out["refused"]
    assert "fp16" in message and "fp32" in message
    assert message.startswith("<text>:1: tier 'hot'") and "the policy that ran before runs again" in message
    # the last case's policy, live again: its results, and the engine takes a new one after
    last = CASES[-1][0]
    assert many.report["mode"] == "offload" and many.report["policy"] == "le"
    assert one.token_ids == out[last][0].token_ids and many.token_ids == out[last][1].token_ids
    a_one, a_many = out["after-refused"]
    assert a_many.report["policy"] == "shared_6"
    assert a_many.token_ids == out["reference"][1].token_ids
    assert logprobs(a_many) == logprobs(out["reference"][1])
    assert "PolicyRunner is closed" in out["closed"]


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_tokens_identical_to_the_engine_without_offload(runs, case):
    model, out = runs
    ref_one, ref_many = out["reference"]
    one, many = out[case]
    assert ref_one.report is None and one.report["mode"] == "offload"
    # continuous batching really mixed the concurrent requests
    assert any(len(b) > 1 for b in many.trace.header.extra["batches"])
    assert one.token_ids == ref_one.token_ids, f"{model} {case}: one request"
    assert many.token_ids == ref_many.token_ids, f"{model} {case}: concurrent requests"
    assert all(len(t) == MAX_TOKENS for t in many.token_ids)
    if case not in ("cpu-fallback-25", "hybrid-25"):
        # bit for bit: the final logits' floats (a CPU-placed expert's output is added after
        # the kernel's, in another order)
        assert logprobs(one) == logprobs(ref_one), f"{model} {case}: one request"
        assert logprobs(many) == logprobs(ref_many), f"{model} {case}: concurrent requests"


def _decided(stats: dict) -> dict:
    """Statistics as the runtime decided them: a late prefetch counted as the hit it was in
    residency; stall_ms (measured live, simulated in replay) left out."""
    def merged(d: dict) -> dict:
        out = {k: v for k, v in d.items() if k not in ("stall_ms", "late_prefetches")}
        out["hits"] = d["hits"] + d.get("late_prefetches", 0)
        out["hit_rate"] = out["hits"] / d["accesses"] if d["accesses"] else 0.0
        return out

    out = merged(stats)
    out["per_layer"] = [merged(row) for row in stats["per_layer"]]
    return out


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_copies_equal_loads_and_live_stats_equal_replay(runs, case, tmp_path):
    import mpl
    from mpl import traceio

    model, out = runs
    _, many = out[case]
    text = dict((c[0], c[1]) for c in CASES)[case]
    stats, mech = many.stats, many.report["offload"]
    assert stats["accesses"] > 0
    assert mech["copies"] == stats["loads"]
    # host-to-device bytes: the loads (the runtime's bytes_loaded) and the streamed experts,
    # but those of a dispatch the host window computed (read where they are)
    window = mech["host_window_streamed"]
    assert mech["bytes_copied"] == (stats["loads"] + stats["streamed"] - window) * mech["expert_bytes"]
    assert stats["bytes_loaded"] == mech["bytes_copied"] + window * mech["expert_bytes"]
    assert mech["stream_copies"] + window == stats["streamed"]
    assert mech["demand_copies"] == stats["demand_loads"]
    assert mech["dispatches"] == len(many.trace)        # every dispatch of the run was planned
    path = tmp_path / "live.mpltrace"
    traceio.save(many.trace, str(path))
    rep = mpl.replay(mpl.loads(text), str(path), belady=False)
    # the same decisions: live copies on the CPU are synchronous (nothing is late), while the
    # replay's simulated link may still carry a background load or a prefetch when its key is
    # next used (a late prefetch, counted apart from the hits)
    assert stats["late_prefetches"] == 0
    live = _decided(stats)
    replayed = _decided(rep.stats)
    assert live == replayed, f"{model} {case}"
    if case.endswith("-100"):
        # every expert fits: after the first touch of each, everything hits
        assert stats["evictions"] == 0 and stats["loads"] <= LAYERS * EXPERTS
    if case.endswith(("-12", "-25")) and case not in ("cpu-fallback-25", "hybrid-25"):
        assert stats["evictions"] > 0 and mech["stream_copies"] + window > 0
    if case == "hybrid-25":      # each miss loaded or computed on the host, as the cost decides
        assert stats["evictions"] > 0
        assert mech["cpu_computes"] == stats["cpu_computes"]
        assert mech["demand_copies"] + mech["cpu_computes"] > 0
    if case == "window-12":
        assert mech["host_window_dispatches"] > 0 and mech["multi_pass_dispatches"] == 0
    if case in ("lookahead-25", "learned-25"):
        # every layer but the last predicts the next ones (within the step), in the trace the
        # replay read: the same prefetches live and replayed
        distance = 2 if case == "lookahead-25" else 1
        for d in many.trace.dispatches:
            want = [t for t in range(d.layer + 1, min(d.layer + 1 + distance, LAYERS))]
            assert sorted(d.predictions or {}) == want, (case, d.layer)
            assert all(len(v) >= len(set(d.experts[0])) for v in (d.predictions or {}).values())
        assert stats["prefetch_issued"] > 0
    if case == "cpu-fallback-25":
        assert mech["cpu_computes"] == stats["cpu_computes"] > 0
        assert mech["background_copies"] == stats["background_loads"] > 0


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_expert_memory_is_the_pool(runs, case):
    _, out = runs
    _, many = out[case]
    mech = many.report["offload"]
    eb = mech["expert_bytes"]
    assert mech["layer_bytes_before"] == LAYERS * EXPERTS * eb == mech["expert_bytes_total"]
    assert mech["layer_bytes_after"] == mech["pool_slots"] * eb == mech["pool_bytes"]
    # the pool: the runtime's slots, the bounded transient area of the CPU build without
    # memory tiers (unless told otherwise), one zero entry
    from mpl.mechanism.footprint import default_stream_slots
    bounded = default_stream_slots(EXPERTS, 2)   # (E here)
    assert mech["stream_slots"] == (2 if case == "window-12" else bounded)
    assert mech["pool_slots"] == mech["cache_slots"] + mech["stream_slots"] + 1
    want = {"12": 3, "25": 6, "50": 12, "100": 24}[case.rsplit("-", 1)[1]]
    assert mech["cache_slots"] == want

