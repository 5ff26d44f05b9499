"""The compiled module's replay loop (``replay_records``) makes the decisions ``dispatch``
makes and plays them on the timeline exactly as a dispatch-by-dispatch replay does: same
stats, same simulated clocks, same residents, for random policies (every eviction rule,
schedule mode, prefetcher, trigger, per-layer allocation and adapt action the invariant
fuzzer draws), random traces (prefill dispatches, duplicate ids, speculative predictions,
explicit and missing steps) and both overlap settings; and for every stdlib policy."""

from __future__ import annotations

import os
import random

import pytest

import mpl
from mpl.api import from_ir
from mpl.timemodel import hardware
from mpl.sim import synthesize
from mpl.trace import records_of, tokens_of as _tokens_of
from mpl.timemodel.timeline import Timeline
from mpl.stdlib_path import stdlib_names
from test_runtime_invariants import random_policy
from runtime_helpers import both_backends, observable, random_dispatches  # noqa: F401  (both_backends: autouse, every test on both backends)

L, E, K = 4, 12, 3


def reference(policy, dispatches, tl):
    """Dispatch by dispatch, as the replayer did before it had a compiled loop."""
    rt = policy.runtime(L, E, K, expert_bytes=2e8)
    for d in dispatches:
        if d.tokens == 1:
            plan = rt.dispatch(d.layer, d.experts[0], d.weights[0] if d.weights else None, 1,
                               step=d.step, predictions=d.predictions)
            stall = tl.dispatch(plan)
        else:
            ex = [e for row in d.experts for e in row]
            ws = [w for row in d.weights for w in row] if d.weights else None
            plan = rt.dispatch(d.layer, ex, ws, d.tokens, step=d.step, predictions=d.predictions)
            stall = tl.dispatch(plan, _tokens_of(d), d.tokens)
        if stall > 0:
            rt.add_stall(stall)
    return rt


def compiled(policy, dispatches, tl, every=0):
    rt = policy.runtime(L, E, K, expert_bytes=2e8)
    ticks = []
    n = rt.replay_records(records_of(dispatches), tl, ticks.append, every)
    assert n == len(dispatches)
    if every:
        assert ticks == list(range(every, n + 1, every))
    return rt


def state(rt, tl):
    return observable(rt), tl.to_dict()


def costs():
    return hardware.costs_for(hardware.resolve("rtx-4090"), expert_bytes=200_000_000)


@pytest.mark.parametrize("seed", range(int(os.environ.get("MPL_FUZZ_SEEDS", "40"))))
def test_compiled_replay_equals_dispatch_by_dispatch(seed):
    r = random.Random(seed)
    policy = from_ir(random_policy(r))
    dispatches = random_dispatches(r, 240)
    overlap = r.random() < 0.8
    tl1, tl2 = Timeline(costs(), overlap=overlap), Timeline(costs(), overlap=overlap)
    a = reference(policy, dispatches, tl1)
    b = compiled(policy, dispatches, tl2, every=r.choice([0, 7]))
    assert state(a, tl1) == state(b, tl2)


def _preset_for(policy) -> str:
    """Mixtral, unless the policy does not fit it (std/per_layer_16gb's 10 GiB are fewer
    Mixtral experts than layers x min_capacity): then DeepSeek-V2-Lite."""
    from mpl.checker import analyze
    from mpl.shapes import preset

    text = policy.text()
    return ("mixtral-8x7b" if not analyze(text, model=preset("mixtral-8x7b")).errors
            else "deepseek-v2-lite")


@pytest.mark.parametrize("name", stdlib_names())
def test_stdlib_compiled_replay_equals_dispatch_by_dispatch(name):
    policy = mpl.load(f"std/{name}")
    trace = synthesize(_preset_for(policy), steps=60, seed=3)
    h = trace.header
    ds = trace.dispatches
    global L, E, K
    saved = (L, E, K)
    L, E, K = h.num_moe_layers, h.num_experts, h.top_k
    try:
        tl1, tl2 = Timeline(costs()), Timeline(costs())
        a = reference(policy, ds, tl1)
        b = compiled(policy, ds, tl2)
    finally:
        L, E, K = saved
    assert state(a, tl1) == state(b, tl2)


LEAN = {   # demand-only policies with no monitor: the lean loop (hit counts, timeline inline)
    "streams": "policy s { cache { capacity = 2 eviction = lru } }",
    "pinned_full": "policy p { cache { capacity = 3 eviction = lru pin = [0, 1, 2] } }",
    "lfu": "policy f { cache { capacity = 5 eviction = lfu } }",
    "score": "policy w { cache { capacity = 4 eviction = score } }",
    "ttl_steps": "policy t { cache { capacity = 8 eviction = lru ttl = 3 steps } }",
    "memory": "policy m { cache { capacity = 8 eviction = lru memory_threshold = 0.5 "
              "memory_headroom = 0.3 memory_budget_gb = 1.6 } }",
    "per_layer": "policy l { cache { capacity = 3 eviction = lru } per_layer { allocation = "
                 "frequency total_budget = 9 min_capacity = 1 rebalance_interval = 5 } }",
    "priority": "policy q { cache { capacity = 4 eviction = lru } "
                "schedule { priority_routing = true } }",
}


@pytest.mark.parametrize("steps", ["explicit", "counted"])
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("name", sorted(LEAN))
def test_lean_replay_loop_equals_dispatch_by_dispatch(name, overlap, steps):
    """The lean loop's own paths: streams (nothing evictable), several-token records handed
    to dispatch() with the clocks and step counter handed over, both overlap settings,
    triggers and rebalancing that evict into a list nobody reads, TTL in steps, and records
    without a step (the runtime counts steps from the layer order)."""
    policy = mpl.loads(LEAN[name])
    assert "hits += 1" in policy.source          # the lean variant was generated
    r = random.Random(name)
    records = list(records_of(random_dispatches(r, 300)))
    if steps == "counted":
        records = [rec[:4] + (None,) + rec[5:] for rec in records]
    tl1, tl2 = Timeline(costs(), overlap=overlap), Timeline(costs(), overlap=overlap)
    a = policy.runtime(L, E, K, expert_bytes=2e8)
    for layer, experts, weights, tokens, step, predictions, tokens_of in records:
        plan = a.dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
        stall = tl1.dispatch(plan, tokens_of, tokens)
        if stall > 0:
            a.add_stall(stall)
    b = policy.runtime(L, E, K, expert_bytes=2e8)
    assert b.replay_records(iter(records), tl2) == len(records)
    assert state(a, tl1) == state(b, tl2) and a.step == b.step
    if name in ("streams", "pinned_full"):
        assert b.stats()["streamed"] > 0
