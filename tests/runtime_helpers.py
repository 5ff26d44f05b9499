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
    compiled replay kernel (skipped where it is not built) and the pure-Python runtime
    (forced in this process and, through MPL_PURE, in subprocesses)."""
    from mpl.runtime import fast

    if request.param == "pure":
        monkeypatch.setenv(fast.ENV_PURE, "1")
        with fast.pure():
            yield "pure"
    else:
        if fast._kernel is None:
            pytest.skip(f"the compiled kernel is not available: {fast._WHY}")
        monkeypatch.delenv(fast.ENV_PURE, raising=False)
        yield "compiled"


# ------------------------------------------------------------------ the live dispatch (LiveState)
#: every eviction rule the live dispatch holds (in C) and every segmented pair kind
STATE_EVICTIONS = ["lru", "lfu", "score", "frequency_threshold", "arc", "s3fifo", "lfru", "lfu|lru",
                   "lru|score", "frequency_threshold|lru", "crf", "classlru", "vllm_lfru",
                   "farthest_layer"]


def store_state(store):
    """A store's whole state (its dump, keys as they are), order-free where the store's own
    order is (the entries of a dict the store only looks up)."""
    d = store.dump(lambda k: k)
    name = type(store).__name__
    if name in ("LFU", "Score"):
        return (name, sorted(d[0])) + tuple(d[1:])
    if name == "FrequencyThreshold":
        return (name, sorted(d[0]), sorted(d[1])) + tuple(d[2:])
    if name == "LFRU":
        return (name, d[0], sorted(d[1])) + tuple(d[2:])
    if name == "S3FIFO":
        return (name,) + tuple(d[:3]) + (sorted(d[3]),)
    if name == "Segmented":
        return (name, store_state(store.a), store_state(store.b))
    if name == "CRF":
        return (name, sorted(d[0]), sorted(d[1])) + tuple(d[2:])
    if name == "ClassLRU":
        return (name, sorted(d[0]), d[1], sorted(d[2])) + tuple(d[3:])
    return (name, d)


def state_policy(r, learned=False, priority=False):
    """A random policy over what LiveState holds (lru/lfu/score stores, pins, TTL in accesses
    or steps, memory pressure, history/lookahead prefetch one or more layers ahead, one
    schedule mode, per-layer caches with rebalancing, a monitor, adapt rules of every unit
    with every kind of action, some of which take the policy off LiveState: an eviction rule
    it does not hold, a rebalance, a capacity cut, triggers). ``learned``: the learned
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


def full_state(rt):
    """Everything a dispatch can change, as the pure structures hold it (reading it syncs a
    LiveState runtime: the attributes come back through Runtime.__getattr__)."""
    caches = rt.caches if rt.per_layer else rt.caches[:1]

    def store(s):
        return store_state(s) if hasattr(s, "dump") else (type(s).__name__, s.keys())
    h = rt.history
    hist = None if h is None else (h.window, [list(w) for w in h.win], h.cnt,
                                   [[sorted(b) for b in bk] for bk in h.bk], h.mask)
    a = rt.affinity
    # per source its observations and target counts (the candidate set and its watermark
    # are a cache of those: mpl.runtime.prefetch.Affinity)
    aff = None if a is None else (a.depth, a.threshold, a.last,
                                  {ds: {e: (row[0], row[1]) for e, row in tab.items()}
                                   for ds, tab in a.table.items()})
    sg = rt.signal
    sig = None if sg is None else (sg.window, [list(w) for w in sg.win],
                                   [list(c.items()) for c in sg.cnt], sg.total)
    m = rt.monitor
    mon = None if m is None else (m.window, bytes(m.ring), m.acc, m.hits, m.skipped,
                                  list(m.events), m.ev, m.ld, m.pfl, m.pfu, m.stall,
                                  list(m.seen), m.log)
    return (rt.stats(), rt.resident(), rt.capacities(), [store(c.store) for c in caches],
            [c.resident for c in caches], list(rt.pool.free), rt.step, rt._last_layer,
            rt.dispatches, rt.accesses, dict(rt._pf),
            None if rt._ttl is None else list(rt._ttl.items()), hist, mon,
            [(x.armed, x.held, x.mark) for x in rt.rules], rt.metrics(), rt.p, aff, sig,
            None if rt.learned is None else rt.learned.dump())
