"""Replays on both backends: the compiled engine's replay (the dispatch in C and the timeline
in C, mpl/runtime/c/engine_replay.c) against the pure runtime's generated loop, for random
policies and random records drawn by hypothesis (derandomised: the same examples on every
run) and on preset traces: the same statistics, simulated clocks, getters and tick
observations; a runtime that keeps dispatching after a replay continues exactly; the
hand-written reference caches of test_runtime_equivalence.py; libCacheSim as an independent
oracle where it is installed; the backend switch (``MPL_PURE``, ``mplc doctor``) and the
optional build (an install without a compiler still succeeds)."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, strategies as st

import mpl
from mpl import ir as _ir
from mpl.api import from_ir
from mpl.runtime import compiled
from mpl.sim import tracepack
from mpl.runtime.backend import forced
from mpl.runtime.plan import CPU, STREAM
from mpl.sim import replay, synthesize
from mpl.timemodel import hardware
from mpl.timemodel.timeline import Timeline
from mpl.trace import Dispatch, records_of
from property_profiles import prop
from runtime_helpers import make_ir, random_dispatches, state_policy, zipf_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_engine = pytest.mark.skipif(not compiled.available(),
                                  reason=f"the compiled engine is not available: {compiled.WHY}")

SETTINGS = prop(int(os.environ.get("MPL_REPLAY_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: every eviction rule of the registry (both backends have them all) and the segmented pairs
RULES = sorted(name for name, _flags in compiled.engine.rules()) if compiled.available() else ["lru"]
PAIRS = ["lfu|lru", "lru|lfu", "score|lru", "frequency_threshold|lru", "lfu|score"]


def costs():
    return hardware.costs_for(hardware.resolve("rtx-4090"), expert_bytes=200_000_000)


def state(rt, tl):
    return (rt.stats(), tl.to_dict(), rt.resident(), rt.store_keys(), rt.capacities(),
            rt.step, rt.metrics(), rt.monitor_log(), rt.values())


def both(policy, shape, **kw):
    L, E, K = shape
    return (policy.runtime(L, E, K, backend="compiled", **kw),
            policy.runtime(L, E, K, backend="pure", **kw))


@st.composite
def scenarios(draw):
    L = draw(st.integers(1, 4))
    E = draw(st.integers(2, 12))
    K = draw(st.integers(1, min(6, E)))
    rule = draw(st.sampled_from(RULES + PAIRS))
    cap = draw(st.integers(1, 10))
    vals = {"cache.capacity": cap, "cache.eviction": rule,
            "cache.pin": tuple(draw(st.lists(st.integers(0, E - 1), max_size=2, unique=True))),
            "cache.frequency_decay": draw(st.sampled_from([0.5, 0.9, 1.0])),
            "cache.decay_interval": draw(st.sampled_from([1, 3, 50])),
            "cache.score_ema_alpha": draw(st.sampled_from([0.1, 0.5, 0.9])),
            "cache.freq_threshold": draw(st.sampled_from([0.0, 0.05, 0.2])),
            "cache.freq_window": draw(st.sampled_from([1, 5, 30])),
            "cache.crf_half_life": draw(st.sampled_from([1, 8, 128])),
            "schedule.priority_routing": draw(st.booleans()),
            "schedule.mode": draw(st.sampled_from(["gpu_only", "gpu_only", "cpu_fallback", "hybrid"])),
            "schedule.offload_threshold_ms": draw(st.sampled_from([0.0, 5.0, 1e6]))}
    blocks = ["cache", "schedule"]
    if draw(st.booleans()):
        blocks.append("per_layer")
        vals["per_layer.min_capacity"] = 1
        vals["per_layer.max_capacity"] = cap + draw(st.integers(0, 3))
        vals["per_layer.allocation"] = draw(st.sampled_from(["uniform", "entropy", "frequency"]))
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
    if draw(st.booleans()):
        blocks.append("prefetch")
        vals["prefetch.strategy"] = draw(st.sampled_from(["history", "affinity", "lookahead"]))
        vals["prefetch.budget"] = draw(st.integers(1, 4))
        vals["prefetch.lookahead"] = draw(st.integers(1, 3))
    weighted = draw(st.sampled_from(["none", "all", "some"]))
    n = draw(st.integers(1, 150))
    ds = []
    step = 0
    for i in range(n):
        layer = i % L if draw(st.integers(0, 9)) else draw(st.integers(0, L - 1))
        if layer == 0 and i:
            step += 1
        tokens = 1 if draw(st.integers(0, 9)) else draw(st.integers(2, 8))
        rows = [draw(st.lists(st.integers(0, E - 1), min_size=K, max_size=K)) for _ in range(tokens)]
        has_w = weighted == "all" or (weighted == "some" and draw(st.booleans()))
        ws = ([[draw(st.floats(0.01, 1.0)) for _ in row] for row in rows] if has_w else None)
        preds = None
        if draw(st.integers(0, 4)) == 0:
            t = (layer + 1) % L
            preds = {t: draw(st.lists(st.integers(0, E - 1), max_size=K + 1))}
        ds.append(Dispatch(step, layer, rows, ws, preds))
    records = list(records_of(ds))
    if draw(st.booleans()):                  # no steps: the runtime counts them
        records = [r[:4] + (None,) + r[5:] for r in records]
    overlap = draw(st.booleans())
    return make_ir(vals, blocks=tuple(blocks)), (L, E, K), records, overlap


def _segmented_case(rule, cap, shape, rows_list):
    """A scenario of one layer's dispatches (rows of token routings) on one shared cache."""
    ds = [Dispatch(i, 0, rows, None) for i, rows in enumerate(rows_list)]
    return make_ir({"cache.capacity": cap, "cache.eviction": rule}), shape, list(records_of(ds)), True


FOUND = [
    _segmented_case("lfu|lru", 7, (1, 5, 2),
                    [[[3, 0]], [[4, 3]], [[2, 3]], [[4, 1]], [[1, 2], [1, 0]], [[2, 4], [4, 1]],
                     [[0, 0]], [[2, 3], [4, 0]], [[3, 2]]]),
    _segmented_case("lfu|score", 7, (1, 3, 1), [[[2]], [[1]], [[0], [1]], [[0]], [[2]]]),
]


@needs_engine
@SETTINGS
@given(scenarios())
@example(FOUND[0])
@example(FOUND[1])
def test_a_replay_is_the_same_on_both_backends(sc):
    """records -> replay_records on each backend: the same statistics, clocks and state; then
    the same decisions for more dispatches."""
    pir, shape, records, overlap = sc
    a, b = both(from_ir(pir), shape, expert_bytes=2e8)
    tl_a, tl_b = Timeline(costs(), overlap=overlap), Timeline(costs(), overlap=overlap)
    assert a.replay_records(iter(records), tl_a) == len(records)
    assert b.replay_records(iter(records), tl_b) == len(records)
    assert state(a, tl_a) == state(b, tl_b)
    for layer, experts, weights, tokens, step, preds, _tok in records[:20]:
        assert a.dispatch(layer, experts, weights, tokens, step=step, predictions=preds) == \
            b.dispatch(layer, experts, weights, tokens, step=step, predictions=preds)


@needs_engine
@SETTINGS
@given(st.integers(0, 2 ** 32 - 1))
@example(1033)   # a per-layer rebalance lost the evictions of a deferred cut (KeyError in TTL)
def test_every_policy_replays_identically_on_both_backends(seed):
    """Random policies over every feature (monitor, adapt rules, prefetchers, triggers,
    per-layer allocations), records with several tokens and odd tokens_of mappings, progress
    ticks: the same state, clocks, stats and ticks."""
    r = random.Random(seed)
    policy = from_ir(state_policy(r))
    L, E, K = 4, 16, 2
    records = list(records_of(random_dispatches(r, 150, L, E, K)))
    if r.random() < 0.3:   # tokens_of not a plain dict
        records = [rec[:6] + (Counter(rec[6]),) if rec[6] and r.random() < 0.5 else rec
                   for rec in records]
    every = r.choice([0, 0, 1, 7, 40])
    overlap = r.random() < 0.8

    def run(rt):
        tl = Timeline(costs(), overlap=overlap)
        ticks = []
        tick = lambda n: ticks.append((n, tl.clocks(), tl.transfers, rt.stats()["accesses"]))
        assert rt.replay_records(iter(records), tl, tick, every) == len(records)
        return state(rt, tl), ticks

    a, b = both(policy, (L, E, K), expert_bytes=2e8)
    assert run(a) == run(b)


@needs_engine
@pytest.mark.parametrize("mode", ["cpu_fallback", "hybrid"])
def test_a_replay_prunes_the_arrival_map_as_the_timeline_does(mode):
    """A long replay with more than 4096 transfers in flight (7000 slots, background loads,
    history prefetch): the C timeline forgets the landed ones at the same dispatches as
    Timeline.dispatch (which changes which later misses count as in flight)."""
    L2, E2, K2 = 64, 128, 8
    policy = from_ir(make_ir({"cache.capacity": 7000, "cache.eviction": "lru",
                              "schedule.mode": mode, "prefetch.strategy": "history",
                              "prefetch.budget": 12, "prefetch.history_window": 3},
                             blocks=("cache", "prefetch", "schedule")))
    r = random.Random(7)
    ds = []
    for i in range(5000):
        t = 1 if r.random() < 0.8 else 3
        ids = r.sample(range(E2), K2 * t)
        ds.append(Dispatch(i // L2, i % L2, [ids[j * K2:(j + 1) * K2] for j in range(t)]))
    records = list(records_of(ds))

    def run(rt):
        tl = Timeline(costs())
        assert rt.replay_records(iter(records), tl) == len(records)
        return state(rt, tl), dict(tl.arrival)

    a, b = both(policy, (L2, E2, K2), expert_bytes=2e8)
    got, want = run(a), run(b)
    assert got == want
    assert len(want[1]) > 0


@needs_engine
@pytest.mark.parametrize("mode", ["gpu_only", "cpu_fallback", "hybrid"])
def test_ticks_see_the_same_timeline(mode):
    """What a tick reads (clocks, counters, the arrival map, the runtime's stall) record for
    record; a timeline the C side cannot hold (an int clock, a dispatch replaced on the
    instance) is played through its Python dispatch with the same results."""
    pol = mpl.loads("policy a { cache { capacity = 10 eviction = lfu } prefetch { strategy = "
                    f"history budget = 3 }} schedule {{ mode = {mode} }} monitor {{ window = 20 }} }}")
    r = random.Random(11)
    ds = []
    for i in range(600):
        t = 1 if r.random() < 0.7 else 2
        ids = r.sample(range(16), 3 * t)
        ds.append(Dispatch(i // 4, i % 4, [ids[j * 3:(j + 1) * 3] for j in range(t)]))
    records = list(records_of(ds))

    def run(backend, python_dispatch=False, int_clock=False):
        rt, tl = pol.runtime(4, 16, 3, backend=backend), Timeline(costs())
        if python_dispatch:
            tl.dispatch = tl.dispatch          # (an instance attribute)
        if int_clock:
            tl.now = 0
        seen = []
        tick = lambda n: seen.append((n, tl.clocks(), tl.cpu_ms, tl.cpu_wait_ms, tl.transfers,
                                      tl.bytes, dict(tl.arrival), rt.stall))
        assert rt.replay_records(records, tl, tick, 13) == len(records)
        return seen, tl.to_dict(), rt.stats()

    want = run("pure")
    assert want[1]["transfers"] > 0 and len(want[0]) == len(records) // 13
    assert run("compiled") == want
    assert run("compiled", python_dispatch=True) == want
    assert run("compiled", int_clock=True) == run("pure", int_clock=True)


@needs_engine
def test_a_runtime_keeps_dispatching_after_a_replay():
    pol = mpl.loads("policy a { cache { capacity = 6 eviction = lfu pin = [0] } prefetch { "
                    "strategy = history } }")
    recs = [(l, e, None) for l, e, _ in zipf_trace(60, 3, 10, 2, seed=4)]
    records = list(records_of([Dispatch(i // 3, l, [e]) for i, (l, e, _) in enumerate(recs)]))
    a, b = both(pol, (3, 10, 2))
    for rt in (a, b):
        rt.dispatch(0, [1, 2])                     # a runtime that has dispatched replays too
        rt.replay_records(iter(records), Timeline(costs()))
    for layer, experts, _ in zipf_trace(40, 3, 10, 2, seed=5):
        assert a.dispatch(layer, experts) == b.dispatch(layer, experts)
    assert a.stats() == b.stats() and a.store_keys() == b.store_keys()


TRIGGERS = {"": "", "ttl": "ttl = 40", "ttl_steps": "ttl = 2 steps",
            "memory": "memory_threshold = 0.8 memory_headroom = 0.6 memory_budget_gb = 60"}


@needs_engine
def same_replay(text, trace):
    """``text`` replayed on ``trace`` on the compiled backend and on the pure one: the same
    statistics and simulated clocks; -> the compiled replay's report."""
    with forced("compiled"):
        a = replay(text, trace, belady=False)
    with forced("pure"):
        b = replay(text, trace, belady=False)
    assert a.stats == b.stats and a.sim == b.sim
    return a


@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
@pytest.mark.parametrize("ev", RULES + ["lfu | lru", "frequency_threshold | lru"])
@pytest.mark.parametrize("per_layer", [False, True])
def test_replay_reports_are_identical_on_a_preset_trace(ev, per_layer, trigger):
    trace = synthesize("deepseek-v2-lite", steps=60, seed=3, prompt_tokens=12)
    extra = " per_layer { min_capacity = 2 }" if per_layer else ""
    text = (f"policy p {{ cache {{ capacity = {12 if per_layer else 300} eviction = {ev} "
            f"pin = [3] {TRIGGERS[trigger]} expert_size_gb = 0.2 }}{extra} }}")
    a = same_replay(text, trace)
    assert a.stats["demand_loads"] > 0
    if trigger:     # the trigger changed the outcome
        with forced("compiled"):
            plain = replay(text.replace(TRIGGERS[trigger], ""), trace, belady=False)
        assert plain.stats != a.stats


@pytest.mark.parametrize("preset", ["olmoe", "qwen3-30b-a3b"])
@pytest.mark.parametrize("budget", [1, 3, 8, 9, 30])
@pytest.mark.parametrize("lookahead, threshold", [(1, 0.0), (2, 0.0), (1, 0.15), (3, 0.4)])
def test_affinity_prefetches_the_same_on_many_experts(preset, budget, lookahead, threshold):
    """The engine ranks affinity targets from each row's kept targets for a budget of at most
    eight (and from every target above that): on 64 and 128 experts, whose rows hold many
    more targets, it prefetches what the Python predictor ranks, plan for plan."""
    trace = synthesize(preset, steps=40, seed=budget, prompt_tokens=6)
    text = (f"policy p {{ cache {{ capacity = 40 eviction = lru }} per_layer {{ }} prefetch {{ "
            f"strategy = affinity budget = {budget} lookahead = {lookahead} "
            f"affinity_threshold = {threshold} }} }}")
    a = same_replay(text, trace)
    assert a.stats["prefetch_loads"] > 0


# ------------------------------------------------------------------ reference caches
@pytest.mark.parametrize("backend", ["compiled", "pure"])
@pytest.mark.parametrize("rule", ["lru", "lfu", "score", "arc", "s3fifo", "lfru",
                                  "frequency_threshold", "lfu|lru"])
@pytest.mark.parametrize("cap", [1, 3, 8, 13])
def test_the_hand_written_references_decide_every_access_alike(backend, rule, cap):
    """test_runtime_equivalence.py's reference caches decide every access as each backend's
    replay does (one-expert records: the decisions of a whole trace, read from its Plans)."""
    import test_runtime_equivalence as ref

    if backend == "compiled" and not compiled.available():
        pytest.skip(f"the compiled engine is not available: {compiled.WHY}")
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
    rt = from_ir(make_ir(values)).runtime(L, E, K, backend=backend)
    got = []
    for i, (layer, experts, w) in enumerate(trace):
        plan = rt.dispatch(layer, experts, w, step=i // L)
        victims = {ld.key: ld.victim for ld in plan.loads}
        for e, h, where in zip(plan.experts, plan.hit, plan.where):
            if h:
                got.append(("hit",))
            elif where == STREAM:
                got.append(("stream",))
            elif where == CPU:
                got.append(("cpu",))
            else:
                got.append(("load", victims[(layer, e)]))
    assert got == want


# ------------------------------------------------------------------ libCacheSim
def _oracle_general(path, keys):
    """libCacheSim's oracleGeneral binary trace: (u32 time, u64 id, u32 size, i64 next)."""
    with open(path, "wb") as f:
        f.write(b"".join(struct.pack("<IQIq", i, k + 1, 1, -1) for i, k in enumerate(keys)))


@needs_engine
@pytest.mark.parametrize("rule", ["lru", "lfu", "arc"])
@pytest.mark.parametrize("split", [False, True])
def test_hit_counts_equal_libcachesim(rule, split, tmp_path):
    """Where in-use protection cannot matter — a top-1 trace, or every access its own
    dispatch (a top-6 trace split) — our hit counts are libCacheSim's exactly."""
    try:
        import libcachesim as lcs
    except ImportError:
        if os.environ.get("MPL_LIBCACHESIM_REQUIRED") == "1":    # tests/run_libcachesim_oracle.sh
            pytest.fail("libCacheSim is required here but does not import")
        pytest.skip("libCacheSim is not installed (bash tests/run_libcachesim_oracle.sh "
                    "installs it and runs these)")
    trace = synthesize("deepseek-v2-lite", steps=120, seed=7)
    h = trace.header
    if split:      # each access alone: the only key in use is the one that misses
        trace.dispatches[:] = [Dispatch(d.step, d.layer, [[e]]) for d in trace.dispatches
                               for e in dict.fromkeys(d.experts[0])]
    else:          # top-1
        trace.dispatches[:] = [Dispatch(d.step, d.layer, [d.experts[0][:1]]) for d in trace.dispatches]
    p = tracepack.pack_trace(trace, h.num_experts)
    keys = [p.layers[r] * h.num_experts + p.experts[a]
            for r in range(len(p)) for a in range(p.offs[r], p.offs[r + 1])]
    path = str(tmp_path / "t.oracleGeneral")
    _oracle_general(path, keys)
    cap = 256 if split else 64
    cls = {"lru": lcs.LRU, "lfu": lcs.LFU, "arc": lcs.ARC}[rule]
    miss_ratio = cls(cap).process_trace(lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE))[0]
    theirs = round(len(keys) * (1 - miss_ratio))
    pol = mpl.loads(f"policy p {{ cache {{ capacity = {cap} eviction = {rule} "
                    f"frequency_decay = 1.0 }} }}")
    rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, backend="compiled")
    rt.replay_packed(p, Timeline(costs()))
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
    return "compiled" if importlib.util.find_spec("mpl.runtime._engine") is not None else "pure"


def test_backend_and_the_pure_switch():
    out = _run("import mpl.runtime as r; print(r.backend())", MPL_PURE="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pure"
    out = _run("import mpl.runtime as r; print(r.backend())", MPL_PURE="")
    assert out.stdout.strip() == _built()
    out = _run("import mpl; rt = mpl.loads('policy p { cache { capacity = 4 } }').runtime(2, 8, 2); "
               "print(rt.backend, '|', rt.backend_reason)", MPL_PURE="1")
    assert out.stdout.strip() == "pure | MPL_PURE is set"


def test_a_runtime_the_engine_cannot_hold_is_pure_and_says_why():
    pol = mpl.loads("policy p { cache { capacity = 4 } }")
    if not compiled.available():
        rt = pol.runtime(2, 8, 2)
        assert rt.backend == "pure" and rt.backend_reason == compiled.WHY
        return
    rt = pol.runtime(65536, 65536, 2)
    assert rt.backend == "pure" and "keys" in rt.backend_reason
    with pytest.raises(mpl.runtime.RuntimeConfigError, match="compiled backend cannot hold"):
        pol.runtime(65536, 65536, 2, backend="compiled")
    assert pol.runtime(2, 8, 2).backend == "compiled"
    assert pol.runtime(2, 8, 2, backend="pure").backend_reason == "asked for"


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
    assert not list((src / "mpl" / "runtime").glob("_engine*.so"))
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert list((src / "mpl" / "runtime").glob("_engine*.so"))


def test_a_stale_build_is_not_used(monkeypatch):
    """An _engine built from an older source (another calling convention) is not loaded."""
    import types
    fake = types.ModuleType("mpl.runtime._engine")
    fake.ABI = compiled.ENGINE_ABI - 1
    monkeypatch.setitem(sys.modules, "mpl.runtime._engine", fake)
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    mod, why = compiled._import()
    assert mod is None and "out of date" in why
    monkeypatch.setenv(compiled.ENV_PURE, "1")
    assert compiled._import() == (None, "MPL_PURE is set")


# ------------------------------------------------------------------ memory tiers
@pytest.mark.parametrize("preset", ["mixtral-8x7b", "deepseek-v2-lite"])
@pytest.mark.parametrize("text", [
    "policy t { hierarchy { tier hot { location = gpu  capacity = 24 } "
    "tier warm { location = gpu  dtype = int4  capacity = 40 }  tier ram { location = cpu  capacity = 60 } "
    "tier ssd { location = disk }  on demote(hot -> warm) { mechanism = in_place_requant } } "
    "prefetch { strategy = history  budget = 2 } }",
    "policy t { hierarchy { tier hot { location = gpu  capacity = 30 }  granularity_split = 4 "
    "eviction = weighted_sum(lru = 0.5, score = 0.5) } schedule { mode = hybrid } }",
    "policy t { hierarchy { tier hot { location = gpu  capacity = 24 }  tier ram { location = cpu  "
    "capacity = 60  eviction = weighted_sum(lfu = 0.5, frequency_threshold = 1) }  tier ssd { location = disk } "
    "eviction = weighted_sum(lru = 0.5, score = 0.5) } schedule { mode = hybrid } }",
    "policy t { hierarchy { tier hot { location = gpu  capacity = 24  dtype_ladder = [fp16, int8, int4] } "
    "tier warm { location = gpu  capacity = 30  dtype_ladder = [int8, int4] }  tier ram { location = cpu  capacity = 60 } "
    "tier ssd { location = disk } } prefetch { strategy = history  budget = 2 } }"])
def test_tiered_replays_are_the_same_on_both_backends(text, preset):
    """Four tiered policies (a four-tier hierarchy, experts cached as parts, weighted_sum
    tiers, dtype ladders) replay the same on the compiled engine (mpl/runtime/c/tiers.c) as
    on the pure runtime."""
    from mpl.timemodel.tiers import TieredTimeline
    pol = mpl.loads(text)
    t = synthesize(preset, steps=8, seed=2)
    h = t.header
    rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=200_000_000,
                     layer_ids=h.moe_layers)
    if rt.backend != "compiled":
        assert not compiled.available(), rt.backend_reason
        pytest.skip(f"the compiled side: {rt.backend_reason}")
    ref = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k, expert_bytes=200_000_000,
                      layer_ids=h.moe_layers, backend="pure")
    tls = [TieredTimeline(costs(), layout=x.tier_layout) for x in (rt, ref)]
    for x, tl in zip((rt, ref), tls):
        tracepack.replay_trace(x, t, tl)
    assert state(rt, tls[0]) == state(ref, tls[1])
