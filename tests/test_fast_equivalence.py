"""The compiled replay kernel (``mpl.runtime._fast``) against the pure-Python runtime, the
reference: decision by decision (every access's hit, slot, victim or stream against the Plans
of dispatch()), and in the end state (stats, simulated clocks, residents, store order, slot
pool, step counter), for random policies and random records drawn by hypothesis (derandomized:
the same examples on every run); the hand-written reference caches of
test_runtime_equivalence.py; libCacheSim as an independent oracle where it is installed; the
backend switch (``MPL_PURE``, ``mpl.runtime.backend()``, ``mplc doctor``) and the optional
build (an install without a compiler still succeeds)."""

from __future__ import annotations

import os
import random
from collections import Counter
import shutil
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, strategies as st

import mpl
from mpl import ir as _ir
from mpl.api import from_ir
from mpl.runtime import fast
from mpl.runtime.plan import CPU, STREAM
from mpl.sim import replay, synthesize
from mpl.timemodel import hardware
from mpl.trace import records_of
from mpl.timemodel.timeline import Timeline
from mpl.trace import Dispatch
from property_profiles import prop
from runtime_helpers import full_state, make_ir, state_policy, store_state, zipf_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_kernel = pytest.mark.skipif(fast._kernel is None,
                                  reason=f"the compiled kernel is not available: {fast._WHY}")

# deterministic under the ci profile, random and scaled under the hunt one (property_profiles)
SETTINGS = prop(int(os.environ.get("MPL_FAST_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def costs():
    return hardware.costs_for(hardware.resolve("rtx-4090"), expert_bytes=200_000_000)


def state(rt, tl):
    caches = rt.caches if rt.per_layer else rt.caches[:1]
    return (rt.stats(), tl.to_dict(), [sorted(c.resident.items()) for c in caches],
            [c.store.keys() for c in caches], [store_state(c.store) for c in caches],
            sorted(rt.pool.free), rt.step, rt._last_layer,
            None if rt._ttl is None else list(rt._ttl.items()), rt.accesses)


# ------------------------------------------------------------------ random scenarios
@st.composite
def scenarios(draw):
    L = draw(st.integers(1, 4))
    E = draw(st.integers(2, 12))
    K = draw(st.integers(1, min(6, E)))
    rule = draw(st.sampled_from(sorted(fast.RULES) + ["lfu|lru", "lru|lfu", "score|lru",
                                                      "frequency_threshold|lru", "lfu|score"]))
    cap = draw(st.integers(1, 10))
    vals = {"cache.capacity": cap, "cache.eviction": rule,
            "cache.pin": tuple(draw(st.lists(st.integers(0, E - 1), max_size=2, unique=True))),
            "cache.frequency_decay": draw(st.sampled_from([0.5, 0.9, 1.0])),
            "cache.decay_interval": draw(st.sampled_from([1, 3, 50])),
            "cache.score_ema_alpha": draw(st.sampled_from([0.1, 0.5, 0.9])),
            "cache.freq_threshold": draw(st.sampled_from([0.0, 0.05, 0.2])),
            "cache.freq_window": draw(st.sampled_from([1, 5, 30])),
            "schedule.priority_routing": draw(st.booleans()),
            "schedule.mode": draw(st.sampled_from(["gpu_only", "gpu_only", "cpu_fallback", "hybrid"])),
            "schedule.offload_threshold_ms": draw(st.sampled_from([0.0, 5.0, 1e6]))}
    blocks = ["cache", "schedule"]
    if draw(st.booleans()):
        blocks.append("per_layer")
        vals["per_layer.min_capacity"] = 1
        vals["per_layer.max_capacity"] = cap + draw(st.integers(0, 3))
        vals["per_layer.allocation"] = "uniform"
        vals["per_layer.rebalance_interval"] = draw(st.sampled_from([0, 1, 7]))
        if draw(st.booleans()):
            vals["per_layer.total_budget"] = L * cap + draw(st.integers(0, L))
    if draw(st.booleans()):
        vals["cache.ttl"] = _ir.Count(draw(st.sampled_from([1, 3, 20])),
                                      draw(st.sampled_from(["accesses", "steps"])))
    if draw(st.booleans()):        # 2e8-byte experts: a 1.6 GB budget is 8 slots
        vals["cache.memory_threshold"] = draw(st.sampled_from([0.3, 0.5, 0.9]))
        vals["cache.memory_headroom"] = draw(st.sampled_from([0.1, 0.3]))
        vals["cache.memory_budget_gb"] = 1.6
    weighted = draw(st.booleans())
    n = draw(st.integers(1, 150))
    ds = []
    step = 0
    for i in range(n):
        layer = i % L if draw(st.integers(0, 9)) else draw(st.integers(0, L - 1))
        if layer == 0 and i:
            step += 1
        tokens = 1 if draw(st.integers(0, 9)) else draw(st.integers(2, 8))
        rows = [draw(st.lists(st.integers(0, E - 1), min_size=K, max_size=K)) for _ in range(tokens)]
        ws = ([[draw(st.floats(0.01, 1.0)) for _ in row] for row in rows] if weighted else None)
        ds.append(Dispatch(step, layer, rows, ws))
    records = list(records_of(ds))
    if draw(st.booleans()):                  # no steps: the runtime counts them
        records = [r[:4] + (None,) + r[5:] for r in records]
    overlap = draw(st.booleans())
    return make_ir(vals, blocks=tuple(blocks)), (L, E, K), records, overlap


def _segmented_case(rule, cap, shape, rows_list):
    """A scenario of one layer's dispatches (rows of token routings) on one shared cache."""
    ds = [Dispatch(i, 0, rows, None) for i, rows in enumerate(rows_list)]
    return make_ir({"cache.capacity": cap, "cache.eviction": rule}), shape, list(records_of(ds)), True


#: found cases: a segmented store whose cache names more slots than the model has keys
#: (capacity 7 on 5 or 3 experts); the kernel split the segments on the pool's size instead
#: of the capacity, so its residents' order (and later decisions) left the pure path's
FOUND_SEGMENTED = [
    _segmented_case("lfu|lru", 7, (1, 5, 2),
                    [[[3, 0]], [[4, 3]], [[2, 3]], [[4, 1]], [[1, 2], [1, 0]], [[2, 4], [4, 1]],
                     [[0, 0]], [[2, 3], [4, 0]], [[3, 2]]]),
    _segmented_case("lfu|score", 7, (1, 3, 1), [[[2]], [[1]], [[0], [1]], [[0]], [[2]]]),
]


def _decisions_pure(policy, shape, records, overlap):
    """Dispatch by dispatch on the pure path: per distinct expert (hit, slot, victim)."""
    L, E, K = shape
    rt = policy.runtime(L, E, K, expert_bytes=2e8)
    tl = Timeline(costs(), overlap=overlap)
    out = []
    for layer, experts, weights, tokens, step, predictions, tokens_of in records:
        plan = rt.dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
        stall = tl.dispatch(plan, tokens_of, tokens)
        if stall > 0:
            rt.add_stall(stall)
        loads = {ld.key: ld for ld in plan.loads}
        for e, h, w in zip(plan.experts, plan.hit, plan.where):
            ld = loads.get((layer, e))
            v = None if ld is None or ld.victim is None else ld.victim[0] * E + ld.victim[1]
            if h:
                out.append(("hit", w, None))
            elif w == STREAM:
                out.append(("stream", None, None))
            elif w == CPU:
                out.append(("cpu", None if ld is None else ld.slot, v))
            else:
                out.append(("load", w, v))
    return rt, tl, out


def _decisions_kernel(rt, tl, records):
    p = fast.pack(records, rt.num_experts)
    rec = fast.Decisions()
    runs = fast.kernel_runs
    assert fast.replay_packed(rt, p, tl, _record=rec) == len(records)
    assert fast.kernel_runs == runs + 1
    names = {0: "stream", 1: "hit", 2: "load", 3: "cpu", 4: "cpu"}
    return [(names[o], s if o in (1, 2, 3) else None, v if (o in (2, 3) and v >= 0) else None)
            for o, v, s in zip(rec.outcome, rec.victim, rec.slot)]


@needs_kernel
@SETTINGS
@given(scenarios())
@example(FOUND_SEGMENTED[0])
@example(FOUND_SEGMENTED[1])
def test_kernel_equals_pure_decision_by_decision(sc):
    pir, shape, records, overlap = sc
    policy = from_ir(pir)
    L, E, K = shape
    a, tl_a, want = _decisions_pure(policy, shape, records, overlap)
    b = policy.runtime(L, E, K, expert_bytes=2e8)
    assert fast.unsupported(b) is None
    tl_b = Timeline(costs(), overlap=overlap)
    got = _decisions_kernel(b, tl_b, records)
    assert got == want
    assert state(a, tl_a) == state(b, tl_b)


@needs_kernel
@SETTINGS
@given(scenarios())
@example(FOUND_SEGMENTED[0])
@example(FOUND_SEGMENTED[1])
def test_generated_replay_loop_uses_the_kernel_with_identical_results(sc):
    """The generated module's replay_records takes the kernel (compiled backend) or its own
    loop (pure backend): same end state."""
    pir, (L, E, K), records, overlap = sc
    policy = from_ir(pir)
    with fast.pure():
        a = policy.runtime(L, E, K, expert_bytes=2e8)
        tl_a = Timeline(costs(), overlap=overlap)
        assert a.replay_records(iter(records), tl_a) == len(records)
    runs = fast.kernel_runs
    b = policy.runtime(L, E, K, expert_bytes=2e8)
    tl_b = Timeline(costs(), overlap=overlap)
    assert b.replay_records(iter(records), tl_b) == len(records)
    assert fast.kernel_runs == runs + 1
    assert state(a, tl_a) == state(b, tl_b)


@SETTINGS
@given(st.integers(0, 2 ** 32 - 1))
@example(1033)   # a per-layer rebalance lost the evictions of a deferred cut (KeyError in TTL)
def test_every_policy_replays_identically_on_both_backends(seed):
    """Random policies over every feature (every eviction rule, schedule modes, prefetchers,
    TTL and memory triggers, per-layer allocations, adapt rules): what the kernel does not
    cover falls back, and the results are the same either way."""
    from test_replay_kernel import L, E, K, random_dispatches
    from test_runtime_invariants import random_policy

    r = random.Random(seed)
    policy = from_ir(random_policy(r))
    records = list(records_of(random_dispatches(r, 150)))

    def run(rt, tl):
        rt.replay_records(iter(records), tl)
        return state(rt, tl)

    with fast.pure():
        want = run(policy.runtime(L, E, K, expert_bytes=2e8), Timeline(costs()))
    b = policy.runtime(L, E, K, expert_bytes=2e8)
    covered = fast.unsupported(b, fast.pack(records, E)) is None
    runs = fast.kernel_runs
    assert run(b, Timeline(costs())) == want
    assert fast.kernel_runs == runs + (1 if covered else 0)


@SETTINGS
@given(st.integers(0, 2 ** 32 - 1))
def test_replays_through_the_live_dispatch_equal_the_pure_loop(seed):
    """Policies the kernel does not cover but the live dispatch holds (prefetch, monitor,
    adapt rules) replay through it (fast._live_replay: the C dispatch, the Python timeline):
    the same state, clocks and stats as the generated pure loop."""
    from test_replay_kernel import L, E, K, random_dispatches

    r = random.Random(seed)
    policy = from_ir(state_policy(r))
    records = [rec for rec in records_of(random_dispatches(r, 150)) if len(set(rec[1])) == len(rec[1])]
    if r.random() < 0.3:   # tokens_of not a plain dict: those plans take Timeline.dispatch in Python
        records = [rec[:6] + (Counter(rec[6]),) if rec[6] and r.random() < 0.5 else rec
                   for rec in records]
    every = r.choice([0, 0, 1, 7, 40])
    overlap = r.random() < 0.8

    def run(rt, tl):
        ticks = []

        assert rt.replay_records(iter(records), tl, ticks.append, every) == len(records)
        return state(rt, tl), ticks, full_state(rt)

    with fast.pure():
        want = run(policy.runtime(L, E, K, expert_bytes=2e8), Timeline(costs(), overlap=overlap))
    b = policy.runtime(L, E, K, expert_bytes=2e8)
    live = fast.live_backend(b) == "compiled"
    runs, kruns, cruns = fast.live_replays, fast.kernel_runs, fast.live_loops_in_c
    got = run(b, Timeline(costs(), overlap=overlap))
    assert got[0] == want[0]
    if fast.kernel_runs == kruns:      # the kernel did not take it: the live dispatch did,
        assert fast.live_replays == runs + (1 if live else 0)      # its record loop in C
        assert fast.live_loops_in_c == cruns + (1 if live else 0)
        assert got[1:] == want[1:]     # exact to the last store tick (the kernel's write-back
    else:                              # restarts frequencies: docs/internals.md)
        assert fast.live_replays == runs
        assert got[1] == want[1]


@needs_kernel
@pytest.mark.parametrize("mode", ["cpu_fallback", "hybrid"])
def test_a_live_replay_prunes_the_arrival_map_as_the_timeline_does(mode):
    """A long replay with more than 4096 transfers in the arrival map (a cache of 7000 slots,
    background loads, history prefetch): the C loop forgets the landed ones at the same
    dispatches as Timeline.dispatch (which changes which later misses count as in flight)."""
    L2, E2, K2 = 64, 128, 8
    policy = from_ir(make_ir({"cache.capacity": 7000, "cache.eviction": "lru",
                              "schedule.mode": mode, "prefetch.strategy": "history",
                              "prefetch.budget": 12, "prefetch.history_window": 3},
                             blocks=("cache", "prefetch", "schedule")))
    r = random.Random(7)
    ds = []
    for i in range(5000):
        t = 1 if r.random() < 0.8 else 3    # several tokens, no id twice (the C loop's records)
        ids = r.sample(range(E2), K2 * t)
        rows = [ids[j * K2:(j + 1) * K2] for j in range(t)]
        ds.append(Dispatch(i // L2, i % L2, rows))
    records = list(records_of(ds))

    def run(tl):
        rt = policy.runtime(L2, E2, K2, expert_bytes=2e8)
        assert rt.replay_records(iter(records), tl) == len(records)
        return state(rt, tl), dict(tl.arrival)

    with fast.pure():
        want = run(Timeline(costs()))
        # the same plans through Timeline.dispatch itself, counting its prunes (a new map)
        rt, tl = policy.runtime(L2, E2, K2, expert_bytes=2e8), Timeline(costs())
        prunes = 0
        for layer, experts, weights, tokens, step, preds, tok in records:
            before = tl.arrival
            stall = tl.dispatch(rt.dispatch(layer, experts, weights, tokens, step=step), tok, tokens)
            if stall > 0:
                rt.stall += stall
            prunes += tl.arrival is not before
        assert (state(rt, tl), dict(tl.arrival)) == want
    assert prunes >= 2
    cruns = fast.live_loops_in_c
    got = run(Timeline(costs()))
    assert fast.live_loops_in_c == cruns + 1
    assert got == want


def test_what_the_kernel_does_not_cover_is_said():
    cases = {
        "policy a { cache { capacity = 4 } prefetch { strategy = history } }": "prefetch",
        "policy a { cache { capacity = 4 } monitor { window = 10 } }": "monitor",
    }
    for text, why in cases.items():
        rt = mpl.loads(text).runtime(2, 8, 2)
        reason = fast.unsupported(rt)
        if fast._kernel is None:
            assert reason == "the compiled backend is not in use"
        else:
            assert reason is not None and why in reason, (text, reason)
    with fast.pure():
        rt = mpl.loads("policy a { cache { capacity = 4 } }").runtime(2, 8, 2)
        assert fast.unsupported(rt) == "the compiled backend is not in use"
        assert fast.backend() == "pure"


@needs_kernel
def test_a_runtime_that_has_dispatched_replays_on_the_pure_path():
    pol = mpl.loads("policy a { cache { capacity = 4 eviction = lru } }")
    rt = pol.runtime(2, 8, 2)
    rt.dispatch(0, [1, 2])
    assert "already dispatched" in fast.unsupported(rt)
    ref = pol.runtime(2, 8, 2)
    ref.dispatch(0, [1, 2])
    recs = list(records_of([Dispatch(0, 1, [[3, 4]]), Dispatch(1, 0, [[1, 5]])]))
    tl1, tl2 = Timeline(costs()), Timeline(costs())
    with fast.pure():
        ref.replay_records(iter(recs), tl1)
    rt.replay_records(iter(recs), tl2)
    assert state(ref, tl1) == state(rt, tl2)


@needs_kernel
def test_a_runtime_keeps_dispatching_after_a_compiled_lru_replay():
    """After the kernel the stores are rebuilt from its residents (exact for lru): live
    dispatches continue exactly as after a pure replay."""
    pol = mpl.loads("policy a { cache { capacity = 6 eviction = lru pin = [0] } }")
    recs = [(l, e, None) for l, e, _ in zipf_trace(60, 3, 10, 2, seed=4)]
    records = list(records_of([Dispatch(i // 3, l, [e]) for i, (l, e, _) in enumerate(recs)]))
    with fast.pure():
        a = pol.runtime(3, 10, 2)
        a.replay_records(iter(records), Timeline(costs()))
    b = pol.runtime(3, 10, 2)
    b.replay_records(iter(records), Timeline(costs()))
    for layer, experts, _ in zipf_trace(40, 3, 10, 2, seed=5):
        assert a.dispatch(layer, experts) == b.dispatch(layer, experts)
    assert a.stats() == b.stats()


TRIGGERS = {"": "", "ttl": "ttl = 40", "ttl_steps": "ttl = 2 steps",
            "memory": "memory_threshold = 0.8 memory_headroom = 0.6 memory_budget_gb = 60"}


@needs_kernel
@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
@pytest.mark.parametrize("ev", sorted(fast.RULES) + ["lfu | lru", "frequency_threshold | lru"])
@pytest.mark.parametrize("per_layer", [False, True])
def test_replay_reports_are_identical_on_a_preset_trace(ev, per_layer, trigger):
    trace = synthesize("deepseek-v2-lite", steps=60, seed=3, prompt_tokens=12)
    extra = " per_layer { min_capacity = 2 }" if per_layer else ""
    text = (f"policy p {{ cache {{ capacity = {12 if per_layer else 300} eviction = {ev} "
            f"pin = [3] {TRIGGERS[trigger]} expert_size_gb = 0.2 }}{extra} }}")
    runs = fast.kernel_runs
    a = replay(text, trace, belady=False)
    assert fast.kernel_runs == runs + 1
    with fast.pure():
        b = replay(text, trace, belady=False)
    assert a.stats == b.stats and a.sim == b.sim
    assert a.stats["demand_loads"] > 0
    if trigger:     # the trigger changed the outcome
        plain = replay(text.replace(TRIGGERS[trigger], ""), trace, belady=False)
        assert plain.stats != a.stats


# ------------------------------------------------------------------ reference caches
@needs_kernel
@pytest.mark.parametrize("rule", ["lru", "lfu", "score", "arc", "s3fifo", "lfru",
                                  "frequency_threshold", "lfu|lru"])
@pytest.mark.parametrize("cap", [1, 3, 8, 13])
def test_kernel_against_the_hand_written_references(rule, cap):
    """test_runtime_equivalence.py's reference caches decide every access as the kernel does."""
    import test_runtime_equivalence as ref

    L, E = 3, 12
    K = 3 if rule in ("lru", "lfu", "score", "frequency_threshold", "lfu|lru") else 1
    values = {"cache.capacity": cap, "cache.eviction": rule}
    model = {"lru": lambda: ref.RefLRU(cap),
             "lfu": lambda: ref.RefLFU(cap, 0.5, 7),
             "score": lambda: ref.RefScore(cap, 0.4),
             "arc": lambda: ref.RefARC(cap),
             "s3fifo": lambda: ref.RefS3FIFO(cap),
             "lfru": lambda: ref.RefLFRU(cap, 0.5, 9),
             "frequency_threshold": lambda: ref.RefFT(cap, 0.12, 20),
             "lfu|lru": lambda: ref.RefSegmented(cap, 0.5, 11)}[rule]()
    if rule == "lfu":
        values.update({"cache.frequency_decay": 0.5, "cache.decay_interval": 7})
    if rule == "lfru":
        values.update({"cache.frequency_decay": 0.5, "cache.decay_interval": 9})
    if rule == "frequency_threshold":
        values.update({"cache.freq_threshold": 0.12, "cache.freq_window": 20})
    if rule == "lfu|lru":
        values.update({"cache.frequency_decay": 0.5, "cache.decay_interval": 11})
    if rule == "score":
        values["cache.score_ema_alpha"] = 0.4
    trace = zipf_trace(200, L, E, K, seed=cap, weights=rule == "score")
    want = []
    for layer, experts, w in trace:
        for o in model.dispatch(layer, experts, w, K):
            want.append(("load", o[1]) if o[0] == "load" else o)
    rt = from_ir(make_ir(values)).runtime(L, E, K)
    records = list(records_of([Dispatch(i // L, l, [e], None if w is None else [w])
                               for i, (l, e, w) in enumerate(trace)]))
    got = []
    for kind, _slot, victim in _decisions_kernel(rt, Timeline(costs()), records):  # noqa: B007
        if kind == "load":
            got.append(("load", None if victim is None else (victim // E, victim % E)))
        else:
            got.append((kind,))
    assert got == want


# ------------------------------------------------------------------ libCacheSim
def _oracle_general(path, keys):
    """libCacheSim's oracleGeneral binary trace: (u32 time, u64 id, u32 size, i64 next)."""
    with open(path, "wb") as f:
        f.write(b"".join(struct.pack("<IQIq", i, k + 1, 1, -1) for i, k in enumerate(keys)))


@needs_kernel
@pytest.mark.parametrize("rule", ["lru", "lfu", "arc"])
@pytest.mark.parametrize("protect", [False, True])
def test_hit_counts_equal_libcachesim(rule, protect, tmp_path):
    """With in-use protection off (the kernel's test-only mode) on a top-6 trace, or on a
    top-1 trace (where it cannot matter), our hit counts are libCacheSim's exactly."""
    try:
        import libcachesim as lcs
    except ImportError:
        if os.environ.get("MPL_LIBCACHESIM_REQUIRED") == "1":    # tests/run_libcachesim_oracle.sh
            pytest.fail("libCacheSim is required here but does not import")
        pytest.skip("libCacheSim is not installed (bash tests/run_libcachesim_oracle.sh "
                    "installs it and runs these)")
    trace = synthesize("deepseek-v2-lite", steps=120, seed=7)
    if protect:    # top-1: the only key in use is the one that misses
        trace.dispatches[:] = [Dispatch(d.step, d.layer, [d.experts[0][:1]]) for d in trace.dispatches]
    h = trace.header
    p = fast.pack_trace(trace, h.num_experts)
    keys = [p.layers[r] * h.num_experts + p.experts[a]
            for r in range(len(p)) for a in range(p.offs[r], p.offs[r + 1])]
    path = str(tmp_path / "t.oracleGeneral")
    _oracle_general(path, keys)
    cap = 256 if not protect else 64
    cls = {"lru": lcs.LRU, "lfu": lcs.LFU, "arc": lcs.ARC}[rule]
    miss_ratio = cls(cap).process_trace(lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE))[0]
    theirs = round(len(keys) * (1 - miss_ratio))
    pol = mpl.loads(f"policy p {{ cache {{ capacity = {cap} eviction = {rule} "
                    f"frequency_decay = 1.0 }} }}")
    rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k)
    fast.replay_packed(rt, p, Timeline(costs()), _protect=protect)
    assert rt.stats()["hits"] == theirs
    assert 0 < theirs < len(keys)


# ------------------------------------------------------------------ the backend switch
def _run(code, **env):
    e = dict(os.environ, PYTHONPATH=ROOT, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=e, timeout=120)


def _built() -> str:
    """The backend a process gets without MPL_PURE: compiled iff the extension is built."""
    import importlib.util
    return "compiled" if importlib.util.find_spec("mpl.runtime._fast") is not None else "pure"


def test_backend_and_the_pure_switch():
    out = _run("import mpl.runtime as r; print(r.backend())", MPL_PURE="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pure"
    out = _run("import mpl.runtime as r; print(r.backend())", MPL_PURE="")
    assert out.stdout.strip() == _built()


def test_mplc_doctor_says_which_backend():
    e = dict(os.environ, PYTHONPATH=ROOT, MPL_PURE="1")
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "doctor"], capture_output=True,
                         text=True, cwd=ROOT, env=e, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "runtime backend: pure" in out.stdout and "MPL_PURE is set" in out.stdout
    e["MPL_PURE"] = ""
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "--version"], capture_output=True,
                         text=True, cwd=ROOT, env=e, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"runtime backend: {_built()}" in out.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler on this machine")
def test_the_build_without_a_working_compiler_still_succeeds(tmp_path):
    """setup.py's optional build_ext: a compiler that fails leaves the pure path and says so."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "mpl"), src / "mpl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(os.path.join(ROOT, "stdlib"), src / "stdlib")
    shutil.copytree(os.path.join(ROOT, "lsp"), src / "lsp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, CC="false", LDSHARED="false")
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "pure-Python runtime" in out.stderr
    assert not list((src / "mpl" / "runtime").glob("_fast*.so"))
    # with the compiler, the same command builds it
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert list((src / "mpl" / "runtime").glob("_fast*.so"))


def test_a_stale_build_is_not_used(monkeypatch):
    """A _fast built from an older source (another calling convention) is not loaded."""
    import types
    fake = types.ModuleType("mpl.runtime._fast")
    fake.ABI = fast.KERNEL_ABI - 1
    monkeypatch.setitem(sys.modules, "mpl.runtime._fast", fake)
    monkeypatch.delenv(fast.ENV_PURE, raising=False)
    mod, why = fast._import_kernel()
    assert mod is None and "out of date" in why
    fake.ABI = fast.KERNEL_ABI
    assert fast._import_kernel() == (fake, None)
    monkeypatch.setenv(fast.ENV_PURE, "1")
    assert fast._import_kernel() == (None, "MPL_PURE is set")


@needs_kernel
def test_live_replayable_in_c_judges_records_as_the_python_check():
    """LiveState.replayable (the check of a replay's records before the loop in C) agrees with
    fast._live_replayable's Python loop on lists of every kind of record."""
    rt = mpl.loads("policy a { cache { capacity = 4 } prefetch { strategy = history } }").runtime(4, 64, 2)
    d = rt.dispatch
    if not hasattr(d, "replayable"):
        pytest.skip("the runtime's dispatch is not the compiled LiveState")
    r = random.Random(3)
    kinds = 0
    for _ in range(400):
        recs = []
        for _ in range(r.randint(0, 6)):
            n = r.choice([0, 1, 2, 6, 17, 40])
            ex = r.sample(range(64), n)
            if n > 1 and r.random() < 0.15:
                ex[r.randrange(n)] = ex[0] if ex[0] != ex[-1] else ex[1]      # an id twice
            ex = r.choice([ex, ex, ex, tuple(ex)]) if r.random() < 0.1 else ex
            if ex and r.random() < 0.05:
                ex = list(ex[:-1]) + [2 ** 70]      # not a C long: the Python check judges
            preds = r.choice([None, None, {}, {1: [2]}, [], [[1]], 0])
            rec = (0, ex, None, 1, 0, preds, None)
            recs.append(list(rec) if r.random() < 0.03 else rec)
        want = fast._live_replayable(recs)
        kinds |= 1 << want
        assert fast._live_replayable(recs, d) == want, recs
    assert kinds == 3


@needs_kernel
@pytest.mark.parametrize("mode", ["gpu_only", "cpu_fallback", "hybrid"])
def test_a_live_replay_in_c_shows_ticks_the_timeline_of_the_python_loop(mode):
    """The clocks, counters and arrival map a tick callback reads are those of fast._live_replay's
    Python loop (what a timeline whose dispatch is overridden gets), record for record; a
    timeline holding an int clock gets the Python loop (LiveState.replay declines it)."""
    pol = mpl.loads("policy a { cache { capacity = 10 eviction = lfu } prefetch { strategy = history budget = 3 } "
                    f"schedule {{ mode = {mode} }} monitor {{ window = 20 }} }}")
    r = random.Random(11)
    ds = []
    for i in range(600):
        t = 1 if r.random() < 0.7 else 2
        ids = r.sample(range(16), 3 * t)
        ds.append(Dispatch(i // 4, i % 4, [ids[j * 3:(j + 1) * 3] for j in range(t)]))
    records = list(records_of(ds))

    def run(python_loop=False, int_clock=False):
        rt, tl = pol.runtime(4, 16, 3), Timeline(costs())
        if python_loop:
            tl.dispatch = tl.dispatch          # (an instance attribute: not the C loop's)
        if int_clock:
            tl.now = 0
        seen = []
        tick = lambda n: seen.append((n, tl.clocks(), tl.cpu_ms, tl.cpu_wait_ms, tl.transfers,
                                      tl.bytes, dict(tl.arrival), rt.__dict__.get("stall")))
        before = fast.live_loops_in_c
        assert rt.replay_records(records, tl, tick, 13) == len(records)
        return (seen, tl.to_dict(), rt.stats()), fast.live_loops_in_c - before

    want, n = run(python_loop=True)
    assert n == 0
    got, n = run()
    assert n == 1
    assert got == want
    assert want[1]["transfers"] > 0 and len(want[0]) == len(records) // 13
    got, n = run(int_clock=True)
    assert n == 0
    assert got == want
