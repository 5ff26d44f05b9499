"""Replay: the compiled runtime over a trace, Belady's optimum, the cost model."""

import json
import random

import pytest
from hypothesis import given, strategies as st
from property_profiles import prop

import mpl
from mpl import schema, shapes
from mpl import traceio
from mpl.timemodel import hardware
from mpl.sim import replay, synthesize
from mpl.sim.belady import belady
from mpl.sim.replay import PolicyLoadError
from mpl.trace import Dispatch, Trace, TraceHeader
from runtime_helpers import both_backends  # noqa: F401  (autouse: every test on both backends)

LIVE_EVICTIONS = [e.name for e in schema.param("cache.eviction").enum if not e.replay_only]


def _policy(capacity, eviction="lru", per_layer=False, extra="", pin=None):
    ev = "lfu | lru" if eviction == "fallback" else eviction
    pl = "\n  per_layer { allocation = uniform  min_capacity = 1 }" if per_layer else ""
    pn = f"  pin = [{pin}]" if pin is not None else ""
    return mpl.loads(f"policy p {{\n  cache {{ capacity = {capacity}  eviction = {ev}{pn} }}{pl}\n{extra}}}\n")


@pytest.fixture(scope="module")
def ds_trace():
    return synthesize("deepseek-v2-lite", steps=60, seed=3)


def test_report_is_consistent(ds_trace):
    r = replay(_policy(256, "lfu"), ds_trace, hardware="rtx-5080")
    s = r.stats
    assert s["hits"] + s["misses"] == s["accesses"] == 60 * 26 * 6
    assert s["hit_rate"] == pytest.approx(s["hits"] / s["accesses"])
    assert len(s["per_layer"]) == 26
    assert sum(x["accesses"] for x in s["per_layer"]) == s["accesses"]
    assert r.belady["hit_rate"] >= r.hit_rate and r.gap == pytest.approx(r.belady["hit_rate"] - r.hit_rate)
    assert r.belady["structure"] == "shared" and r.belady["capacities"] == 256
    # simulated stall is fed back to the runtime: its stall_ms metric is the simulated one
    assert s["stall_ms"] == pytest.approx(r.sim["stall_ms"], rel=1e-9)
    assert r.sim["tokens_per_s"] == pytest.approx(60 / (r.sim["total_ms"] / 1000))
    d = json.loads(r.to_json())
    assert d["policy"] == "p" and d["hardware"]["name"] == "rtx-5080"
    assert "Belady" in r.format_text()


def test_link_busy_is_a_share_of_the_time_the_link_works():
    """Background loads outrun the link under the CPU schedules (they do not hold compute
    up): the link's last transfer lands after the last step, and the report's share is of the
    time up to that landing, never above 100%, saying how far past the run it is."""
    import re

    trace = synthesize("mixtral-8x7b", steps=16, seed=1)
    for name in ("std/hybrid", "std/cpu_fallback", "std/lru_basic"):
        r = replay(name, trace)
        m = r.sim
        assert 0 <= m["link_busy_ms"] <= max(m["total_ms"], m["link_free_ms"]) + 1e-6
        share = re.search(r"link busy (\d+)%( up to its last transfer, which lands ([\d.]+) ms "
                          r"after the last step)?\)", r.format_text())
        assert share and int(share[1]) <= 100, r.format_text()
        late = m["link_free_ms"] > m["total_ms"]
        assert bool(share[2]) == late
        if late:
            assert float(share[3]) == pytest.approx(m["link_free_ms"] - m["total_ms"], abs=0.01)
    assert replay("std/hybrid", trace).sim["link_free_ms"] > replay("std/hybrid", trace).sim["total_ms"]


def test_per_layer_belady_uses_the_runtime_capacities(ds_trace):
    r = replay(_policy(12, "lru", per_layer=True), ds_trace)
    assert r.belady["structure"] == "per_layer" and r.belady["capacities"] == [12] * 26
    assert all(x["capacity"] == 12 for x in r.stats["per_layer"])
    assert r.belady["hit_rate"] >= r.hit_rate


@st.composite
def small_trace(draw):
    layers = draw(st.integers(1, 3))
    experts = draw(st.integers(2, 6))
    k = draw(st.integers(1, min(3, experts)))
    steps = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 10_000))
    rng = random.Random(seed)
    ds = []
    for s in range(steps):
        for l in range(layers):
            e = rng.sample(range(experts), k)
            ds.append(Dispatch(s, l, [e], [[rng.random() for _ in e]]))
    h = TraceHeader("rand", layers, tuple(range(layers)), experts, k, 1000, "hypothesis")
    return Trace(h, ds)


@prop(80)
@given(small_trace(), st.integers(1, 6), st.booleans(), st.sampled_from([None, 0, 1]))
def test_no_eviction_rule_beats_belady(trace, capacity, per_layer, pin):
    """Every live eviction rule, shared and per-layer, with and without a pinned expert
    (pins are the policy's choice; the optimum for the same capacity keeps what it likes)."""
    h = trace.header
    if pin is not None and capacity < 2:
        capacity = 2
    for ev in LIVE_EVICTIONS:
        try:
            pol = _policy(capacity, ev, per_layer=per_layer, pin=pin)
        except mpl.PolicyError:       # e.g. a pin the checker refuses for this capacity
            continue
        rt = pol.runtime(h.num_moe_layers, h.num_experts, h.top_k)
        for d in trace:
            rt.dispatch(d.layer, d.experts[0], d.weights[0], 1, step=d.step)
        hits = rt.stats()["hits"]
        if per_layer:
            opt = belady(trace.dispatches, h.num_experts, capacities=rt.capacities())
        else:
            opt = belady(trace.dispatches, h.num_experts, capacity=capacity,
                         num_layers=h.num_moe_layers)
        assert hits <= opt.hits, (ev, hits, opt.hits)


def test_eviction_belady_replays_the_oracle(ds_trace, tmp_path):
    p = tmp_path / "opt.moe"
    p.write_text("policy opt {\n  cache { capacity = 200  eviction = belady }\n}\n")
    with pytest.raises(mpl.PolicyError):
        mpl.load(str(p))                                   # live use refuses it
    r = replay(str(p), ds_trace)
    assert r.hit_rate == pytest.approx(r.belady["hit_rate"])
    assert r.hit_rate >= replay(_policy(200, "lfu"), ds_trace).hit_rate
    assert r.stats["loads"] + r.stats["streamed"] == r.stats["misses"]


@pytest.mark.parametrize("name", list(shapes.PRESETS))
def test_all_miss_time_matches_first_principles(name):
    """Capacity = top-k and no reuse: every access is a transfer; time per token must be
    within 15% of bytes per token / link bandwidth (docs/simulation.md)."""
    shape = shapes.PRESETS[name]
    tr = synthesize(name, steps=6, seed=1)
    for prof in ("rtx-4090", "h100"):
        r = replay(_policy(shape.top_k), tr, hardware=prof, belady=False)
        p = hardware.resolve(prof)
        misses_per_token = r.stats["misses"] / 6
        bound_ms = misses_per_token * shape.expert_bytes / (p.effective_link_gbps * 1e9) * 1e3
        assert r.stats["hit_rate"] < 0.05
        assert r.sim["time_per_step_ms"] == pytest.approx(bound_ms, rel=0.15), (name, prof)
        assert r.sim["time_per_step_ms"] >= bound_ms


def test_overlap_and_prefetch_change_simulated_time(ds_trace):
    base = replay(_policy(64), ds_trace, belady=False)
    no_overlap = replay(_policy(64, extra="  schedule { overlap = false }\n"), ds_trace, belady=False)
    assert no_overlap.sim["total_ms"] > base.sim["total_ms"]
    cpu = replay(_policy(64, extra="  schedule { mode = cpu_fallback }\n"), ds_trace, belady=False)
    assert cpu.stats["cpu_computes"] > 0 and cpu.sim["cpu_busy_ms"] > 0


def test_capacity_override_and_size_capacity(ds_trace):
    pol = _policy(32)
    a = replay(pol, ds_trace, capacity=512, belady=False)
    b = replay(_policy(512), ds_trace, belady=False)
    assert a.stats == b.stats
    # 17.3 MB experts: 2GiB holds 124 of them
    c = replay(pol, ds_trace, capacity="2GiB")
    assert c.belady["capacities"] == 2 * 2 ** 30 // ds_trace.header.expert_bytes


def test_jsonl_import_replays_like_native(tmp_path, ds_trace):
    j = tmp_path / "t.jsonl"
    n = tmp_path / "t.mpltrace"
    traceio.save(ds_trace, str(j))
    traceio.save(ds_trace, str(n))
    pol = _policy(128, "lfu")
    a = replay(pol, str(j), belady=False).stats
    b = replay(pol, str(n), belady=False).stats
    c = replay(pol, ds_trace, belady=False).stats
    assert a == b == c


def test_custom_hardware_profile(tmp_path, ds_trace):
    f = tmp_path / "box.json"
    f.write_text(json.dumps({"base": "rtx-4090", "link": "pcie5", "name": "4090-gen5"}))
    fast = replay(_policy(32), ds_trace, hardware=str(f), belady=False)
    slow = replay(_policy(32), ds_trace, hardware="rtx-4090", belady=False)
    assert fast.hardware["name"] == "4090-gen5"
    assert fast.sim["tokens_per_s"] > 1.5 * slow.sim["tokens_per_s"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"base": "rtx-4090", "link_gpbs": 3}))
    with pytest.raises(hardware.HardwareError, match="did you mean 'link_gbps'"):
        hardware.resolve(str(bad))
    with pytest.raises(hardware.HardwareError, match="missing field"):
        hardware.resolve({"name": "x"})


def test_bad_policy_is_a_located_error(tmp_path, ds_trace):
    p = tmp_path / "bad.moe"
    p.write_text("policy b {\n  cache { capcity = 4 }\n}\n")
    with pytest.raises(PolicyLoadError, match=r"bad.moe:2:\d+: .*capcity"):
        replay(str(p), ds_trace)


def test_prefetch_with_trace_predictions():
    tr = synthesize("qwen1.5-moe-a2.7b", steps=40, seed=2, pred_accuracy=0.9)
    pol = mpl.loads("policy la {\n cache { capacity = 8 }\n per_layer { min_capacity = 1 }\n"
                    " prefetch { strategy = lookahead  budget = 4 }\n}\n")
    r = replay(pol, tr)
    assert r.stats["prefetch_issued"] > 0 and r.stats["prefetch_accuracy"] > 0.5


def test_timeline_by_hand():
    from mpl.runtime.plan import DEMAND, PREFETCH, Load, Plan
    from mpl.timemodel.timeline import Timeline

    costs = hardware.costs_for(hardware.resolve("rtx-4090"), model="deepseek-v2-lite")
    tl = Timeline(costs)
    x, g, dn = costs.transfer_ms(), costs.gpu_expert_ms(1), costs.dense_ms(1)
    assert x > 2 * g
    # two hits and one demand miss, then a prefetch of (1, 9) issued at the end
    p1 = Plan(0, 0, [1, 2, 3], [0, 1, 2], [True, True, False],
              [Load((0, 3), 2, None, DEMAND), Load((1, 9), 3, None, PREFETCH)])
    stall = tl.dispatch(p1)
    assert stall == pytest.approx(x - 2 * g)
    end1 = dn + x + g
    assert tl.now == pytest.approx(end1)
    # the next layer hits (1, 9) while its transfer is still in flight: it waits for it
    p2 = Plan(0, 1, [9], [3], [True])
    stall2 = tl.dispatch(p2)
    assert stall2 == pytest.approx(end1 + x - (end1 + dn))
    assert tl.transfers == 2 and tl.bytes == 2 * costs.expert_bytes


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys, ds_trace):
    replay(_policy(64), ds_trace, belady=False, progress=True)
    err = capsys.readouterr().err
    assert "replay p [" in err and "100%" in err
    replay(_policy(64), ds_trace, belady=False, progress=None)     # stderr is not a TTY here
    assert capsys.readouterr().err == ""


def test_policy_that_does_not_fit_the_trace_model_is_refused(ds_trace):
    from mpl.sim import ReplayError
    pol = mpl.loads("policy p {\n  cache { capacity = 64  pin = [70] }\n}\n")
    with pytest.raises(ReplayError, match="MPL50"):
        replay(pol, ds_trace)


def test_prefill_dispatches_and_public_api():
    tr = synthesize("mixtral-8x7b", steps=5, seed=0, prompt_tokens=7)
    assert isinstance(tr, mpl.Trace)
    pol = _policy(16)
    r = pol.replay(tr, hardware="a100")                # Policy.replay -> mpl.sim.replay
    assert r.sim["tokens"] == 7 + 4 and r.sim["steps"] == 5
    assert r.stats["accesses"] == sum(len(d.distinct()) for d in tr)
    r2 = mpl.replay(pol, tr, hardware="a100-80gb")
    assert r2.stats == r.stats and r2.sim == r.sim


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("launch_us", [5.0, 2000.0])    # transfer-bound and compute-bound
def test_timeline_fast_path_equals_general_path(launch_us, overlap):
    """Timeline.demand's closed form (taken when every miss is a demand load or a stream and
    nothing is in flight, with or without overlap) gives the clocks of the general
    expert-by-expert path."""
    from mpl.runtime.plan import STREAM, Load, Plan
    from mpl.timemodel.timeline import Timeline

    costs = hardware.costs_for(hardware.resolve({"base": "h100", "kernel_launch_us": launch_us}),
                               model="deepseek-v2-lite")
    rng = random.Random(launch_us)
    streams = 0
    for _ in range(500):
        k = rng.randint(1, 8)
        hit = [rng.random() < 0.5 for _ in range(k)]
        where = [i if h or rng.random() < 0.7 else STREAM for i, h in enumerate(hit)]
        streams += where.count(STREAM)
        loads = [Load((0, i), i, None, "demand") for i, h in enumerate(hit)
                 if not h and where[i] != STREAM]
        plan = Plan(0, 0, list(range(k)), where, hit, loads, [])
        a, b = Timeline(costs, overlap=overlap), Timeline(costs, overlap=overlap)
        a.now = b.now = rng.random() * 5
        a.link_free = b.link_free = rng.random() * 10
        sa = a.dispatch(plan)
        sb = b.dispatch(plan, {})             # a tokens map (one token each): the general path
        assert sa == pytest.approx(sb) and a.now == pytest.approx(b.now)
        assert a.link_free == pytest.approx(b.link_free) and a.transfers == b.transfers
        assert a.gpu_ms == pytest.approx(b.gpu_ms) and a.stall_ms == pytest.approx(b.stall_ms)
        assert a.bytes == b.bytes and a.transfer_ms == pytest.approx(b.transfer_ms)
    assert streams > 100


def test_belady_uses_the_largest_capacity_an_adapt_rule_can_set():
    tr = synthesize("olmoe-1b-7b", steps=40, seed=3)
    p = mpl.loads("policy a {\n cache { capacity = 32 : 256 when hit_rate < 0.5 }\n}\n")
    r = replay(p, tr)
    assert r.stats["adapt_log"] and r.belady["capacities"] == 256
    assert r.belady["hit_rate"] >= r.hit_rate


def test_a_prefetch_that_lands_after_its_dispatch_starts_is_late_not_a_hit():
    """SPEC §5: a prefetched key still in flight when its dispatch starts is a late
    prefetch, counted apart from the hits. Mixtral's experts over PCIe take longer to move
    than a layer takes to compute, so a history prefetch of 4 per layer arrives late; on a
    link a thousand times faster the same decisions land in time, and every late prefetch
    of the slow link is a hit there."""
    tr = synthesize("mixtral-8x7b", steps=30, seed=1)
    p = mpl.loads("policy p {\n cache { capacity = 64 }\n"
                  " prefetch { strategy = history  budget = 4 }\n}\n")
    slow = replay(p, tr, hardware="rtx-5080", belady=False)
    fast = replay(p, tr, hardware={**hardware.resolve("rtx-5080").to_dict(), "name": "fast",
                                   "link_gbps": 64000.0}, belady=False)
    s, f = slow.stats, fast.stats
    assert s["late_prefetches"] > 0 and f["late_prefetches"] == 0
    for st_ in (s, f):
        assert st_["hits"] + st_["late_prefetches"] + st_["misses"] == st_["accesses"]
        assert st_["hit_rate"] == pytest.approx(st_["hits"] / st_["accesses"])
        assert sum(r["late_prefetches"] for r in st_["per_layer"]) == st_["late_prefetches"]
        assert sum(r["hits"] for r in st_["per_layer"]) == st_["hits"]
    assert s["hits"] + s["late_prefetches"] == f["hits"]
    assert slow.sim["late_prefetches"] == s["late_prefetches"]
    assert "late prefetches" in str(slow) and "late prefetches" not in str(fast)
    # without a prefetch nothing is ever late
    none = replay(_policy(64), tr, hardware="rtx-5080", belady=False).stats
    assert none["late_prefetches"] == 0 and none["hits"] + none["misses"] == none["accesses"]
