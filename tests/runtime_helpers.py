"""Helpers for the runtime / codegen tests: IRs built by hand from the schema defaults,
deterministic synthetic routing."""

from __future__ import annotations

import random

import pytest

from mpl import ir as _ir
from mpl import schema


def make_ir(values: dict, *, name: str = "t", blocks=("cache",), adapt=()) -> _ir.PolicyIR:
    """An IR with every schema key at its schema default, then ``values`` applied."""
    vals = {}
    for key, p in schema.PARAMS.items():
        d = p.default
        vals[key] = None if d in (schema.OFF, schema.DERIVED, schema.REQUIRED) else d
    vals.update(values)
    assert vals["cache.capacity"] is not None, "give cache.capacity"
    return _ir.PolicyIR(name=name, values=vals, blocks=frozenset(blocks), adapt=tuple(adapt))


def runtime_for(values: dict, L=4, E=16, K=2, *, blocks=("cache",), adapt=(), **kw):
    from mpl.api import from_ir
    return from_ir(make_ir(values, blocks=blocks, adapt=adapt)).runtime(L, E, K, **kw)


def zipf_trace(steps, L, E, K, *, seed=0, s=1.1, reuse=0.3, weights=False):
    """(layer, experts, weights) in step order: Zipf popularity per layer (each layer its
    own permutation), with some temporal reuse of the previous step's experts."""
    r = random.Random(seed)
    perms = [r.sample(range(E), E) for _ in range(L)]
    pw = [1.0 / (i + 1) ** s for i in range(E)]
    prev = [[] for _ in range(L)]
    out = []
    for _ in range(steps):
        for layer in range(L):
            chosen = []
            while len(chosen) < K:
                if prev[layer] and r.random() < reuse:
                    e = r.choice(prev[layer])
                else:
                    e = perms[layer][r.choices(range(E), pw)[0]]
                if e not in chosen:
                    chosen.append(e)
            prev[layer] = chosen
            w = None
            if weights:
                raw = [r.random() + 0.01 for _ in chosen]
                t = sum(raw)
                w = [x / t for x in raw]
            out.append((layer, chosen, w))
    return out


@pytest.fixture(params=["compiled", "pure"], autouse=True)
def both_backends(request, monkeypatch):
    """Run every test of a module that imports this fixture on both runtime backends: the
    compiled engine (skipped where it is not built) and the pure-Python runtime (forced in
    this process and, through MPL_PURE, in subprocesses)."""
    from mpl.runtime import compiled
    from mpl.runtime.backend import forced

    if request.param == "pure":
        monkeypatch.setenv(compiled.ENV_PURE, "1")
        with forced("pure"):
            yield "pure"
    else:
        if not compiled.available():
            pytest.skip(f"the compiled engine is not available: {compiled.WHY}")
        monkeypatch.delenv(compiled.ENV_PURE, raising=False)
        with forced("compiled"):
            yield "compiled"


#: every eviction rule of the registry (the compiled engine and the pure runtime have them
#: all) and segmented pairs of every kind of side
def _evictions():
    from mpl.runtime.eviction import RULES
    return list(RULES) + ["lfu|lru", "lru|score", "frequency_threshold|lru"]


STATE_EVICTIONS = _evictions()


def random_dispatches(r: random.Random, n: int, L: int = 4, E: int = 12, K: int = 3):
    """Random dispatches: prefill ones (several tokens), a router repeating an id now and
    then, weights on most, speculative predictions on some, steps in order."""
    from mpl.trace import Dispatch
    out = []
    step = 0
    for i in range(n):
        layer = i % L
        if layer == 0 and i:
            step += 1
        tokens = 1 if r.random() < 0.8 else r.randint(2, 5)
        rows = []
        for _ in range(tokens):
            row = r.sample(range(E), K)
            if r.random() < 0.05:
                row[-1] = row[0]            # a router repeating an id
            rows.append(row)
        ws = None
        if r.random() < 0.7:
            ws = [[r.random() + 0.01 for _ in row] for row in rows]
        preds = None
        if r.random() < 0.3:
            preds = {(layer + 1) % L: r.sample(range(E), r.randint(1, 4))}
        out.append(Dispatch(step, layer, rows, ws, preds))
    return out


def state_policy(r, learned=False, priority=False):
    """A random policy with state in every part of the runtime (lru/lfu/score stores, pins,
    TTL in accesses or steps, memory pressure, history/lookahead prefetch one or more layers
    ahead, one schedule mode, per-layer caches with rebalancing, a monitor, adapt rules of
    every unit with every kind of action: a switch of eviction rule, a rebalance, a capacity
    cut, triggers). ``learned``: the learned
    strategy mostly (its context layers and confidence drawn too), and adapt rules that
    switch to it or change its confidence. ``priority``: priority routing mostly on, and adapt
    rules that turn it on or off."""
    from mpl import ir as _ir
    vals = {"cache.capacity": r.choice([1, 2, 3, 5, 8]),
            "cache.eviction": r.choice(STATE_EVICTIONS),
            "cache.pin": tuple(r.sample(range(4), r.choice([0, 0, 1, 2]))),
            "cache.decay_interval": r.choice([1, 3, 50]),
            "cache.frequency_decay": r.choice([0.5, 0.9]),
            "cache.score_ema_alpha": r.choice([0.3, 0.8]),
            "schedule.mode": r.choice(["gpu_only", "gpu_only", "cpu_fallback", "hybrid"]),
            "prefetch.strategy": r.choice(["none", "history", "history", "lookahead", "affinity"]),
            "prefetch.affinity_threshold": r.choice([0.0, 0.2, 0.5]),
            "prefetch.budget": r.choice([1, 2, 3, 5]),
            "prefetch.lookahead": r.choice([1, 1, 2, 3]),
            "prefetch.history_window": r.choice([1, 3, 20])}
    if learned:
        vals["prefetch.strategy"] = r.choice(["learned", "learned", "learned", "history", "none"])
        vals["prefetch.context_layers"] = r.choice([1, 2, 3])
        vals["prefetch.confidence"] = r.choice([0.0, 0.2, 0.5, 0.9])
    if priority:
        vals["schedule.priority_routing"] = r.random() < 0.8
    blocks = {"cache", "prefetch", "schedule"}
    if r.random() < 0.4:
        vals["cache.ttl"] = _ir.Count(r.choice([2, 5, 20]), r.choice(["accesses", "steps"]))
    if r.random() < 0.4:
        vals["cache.memory_threshold"] = r.choice([0.3, 0.5, 0.9])
        vals["cache.memory_headroom"] = r.choice([0.1, 0.3])
        vals["cache.memory_budget_gb"] = 2.0
    if r.random() < 0.35:
        blocks.add("per_layer")
        vals["per_layer.min_capacity"] = 1
        vals["per_layer.max_capacity"] = 6
        vals["per_layer.allocation"] = r.choice(["uniform", "uniform", "entropy", "frequency"])
        vals["per_layer.entropy_window"] = r.choice([1, 4, 10])
        vals["per_layer.rebalance_interval"] = r.choice([0, 3, 7])
    if r.random() < 0.6:
        blocks.add("monitor")
        vals["monitor.window"] = r.choice([1, 4, 30])
        vals["monitor.log_interval"] = r.choice([1, 7, 50])
        vals["monitor.metrics"] = tuple(r.sample(["hit_rate", "miss_rate", "eviction_rate",
                                                  "prefetch_accuracy", "transfer_rate",
                                                  "stall_ms"], r.randint(1, 3)))
    adapt = []
    if r.random() < 0.6:
        blocks.add("adapt")
        blocks.add("monitor")
        for i in range(r.choice([1, 1, 2])):
            act = r.choice([_ir.SetAction("cache.capacity", r.choice([1, 4, 9])),
                            _ir.SetAction("cache.eviction", r.choice(STATE_EVICTIONS)),
                            _ir.SetAction("prefetch.budget", r.choice([1, 4])),
                            _ir.SetAction("prefetch.strategy", r.choice(["none", "history", "affinity"])),
                            _ir.RebalanceAction(r.choice(["uniform", "entropy"])),
                            _ir.SetAction("cache.frequency_decay", 0.7),
                            _ir.SetAction("monitor.window", r.choice([2, 10])),
                            _ir.SetAction("prefetch.history_window", r.choice([1, 5])),
                            _ir.TriggerAction(r.choice(["flush", "ttl", "memory_pressure"]))]
                           + ([_ir.SetAction("prefetch.strategy", r.choice(["learned", "history"])),
                               _ir.SetAction("prefetch.confidence", r.choice([0.1, 0.6]))] * 2
                              if learned else [])
                           + ([_ir.SetAction("schedule.priority_routing", r.random() < 0.5)] * 3
                              if priority else []))
            metric = r.choice(["hit_rate", "miss_rate", "eviction_rate", "prefetch_accuracy",
                               "transfer_rate", "stall_ms"])
            op = r.choice(["<", ">", "<=", ">=", "!=", "=="])
            thr = r.choice([0.0, 0.2, 0.5, 0.6, 1.0])
            adapt.append(_ir.AdaptRule(i, _ir.Condition(metric, op, thr),
                                       _ir.Count(r.choice([0, 1, 5, 20]),
                                                 r.choice(["accesses", "steps", "tokens"])),
                                       (act,)))
    return make_ir(vals, blocks=tuple(blocks), adapt=tuple(adapt))


def observable(rt):
    """Everything a runtime's getters read (the same on both backends)."""
    learned = rt.learned
    return {"stats": rt.stats(), "resident": rt.resident(), "capacities": rt.capacities(),
            "store_keys": rt.store_keys(), "metrics": rt.metrics(),
            "monitor_log": rt.monitor_log(), "values": rt.values(), "step": rt.step,
            "stall": rt.stall, "learned": None if learned is None else learned.dump()}
