"""SPEC §5 semantics of the runtime, one test (at least) per rule, through real .moe text, on
both backends."""

from __future__ import annotations

import mpl
from mpl.runtime.cost import CostModel
from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, PREFETCH, STREAM
from runtime_helpers import both_backends, zipf_trace  # noqa: F401  (autouse: both backends)

STATS_KEYS = {"accesses", "hits", "misses", "hit_rate", "evictions", "loads", "demand_loads",
              "background_loads", "prefetch_loads", "bytes_loaded", "prefetch_issued",
              "prefetch_useful", "prefetch_accuracy", "cpu_computes", "streamed", "stall_ms",
              "per_layer", "adapt_log", "requested_slots", "num_slots"}


def rt(body, L=4, E=16, K=2, **kw):
    return mpl.loads(f"policy t {{ {body} }}").runtime(L, E, K, **kw)


def cold(body: str) -> str:
    """``body`` with adapt rules judging from the first access (monitor.warmup = none): these
    tests are about the rules' mechanics, not the warm-up (tested on its own below)."""
    if "monitor {" in body:
        return body.replace("monitor {", "monitor { warmup = none", 1)
    return body + " monitor { warmup = none }"


def test_keys_are_layer_and_expert():
    r = rt("cache { capacity = 8 }")
    r.dispatch(0, [5])
    p = r.dispatch(1, [5])          # expert 5 of another layer: a different key
    assert p.hit == [False]
    assert p.loads[0].key == (1, 5)
    p = r.dispatch(0, [5])          # new step (layer went back): the same key hits
    assert p.hit == [True] and p.step == 1


def test_stats_keys_and_consistency():
    r = rt("cache { capacity = 3 } prefetch { strategy = history budget = 2 }")
    for layer, ex, _ in zipf_trace(40, 4, 16, 2, seed=1):
        r.dispatch(layer, ex)
    s = r.stats()
    assert set(s) == STATS_KEYS
    assert s["hits"] + s["misses"] == s["accesses"] == 40 * 4 * 2
    assert s["loads"] == s["demand_loads"] + s["background_loads"] + s["prefetch_loads"]
    assert s["prefetch_issued"] == s["prefetch_loads"] > 0
    assert set(s["per_layer"][0]) == {"layer", "accesses", "hits", "hit_rate", "capacity"}
    assert sum(p["accesses"] for p in s["per_layer"]) == s["accesses"]
    assert s["bytes_loaded"] == int((s["loads"] + s["streamed"]) * 1.2e9)


def test_capacity_one_top6_streams():
    r = rt("cache { capacity = 1 }", L=2, E=64, K=6)
    p = r.dispatch(0, [1, 2, 3, 4, 5, 6])
    assert p.where[0] == 0 and p.where[1:] == [STREAM] * 5
    assert r.num_slots == 1
    p = r.dispatch(1, [7, 8, 9, 10, 11, 12])
    # the one slot holds (0, 1), which is not in use now: evicted for (1, 7)
    assert p.loads[0].victim == (0, 1) and p.where[1:] == [STREAM] * 5
    assert r.stats()["streamed"] == 10


def test_in_use_keys_are_never_evicted():
    r = rt("cache { capacity = 2 }", K=3)
    p = r.dispatch(0, [1, 2, 3])
    assert p.where[2] == STREAM and p.evicted == []


def test_pins_occupy_slots_and_are_never_evicted():
    r = rt("cache { capacity = 2 pin = [0] }", L=2)
    r.dispatch(0, [0])                   # loaded on first access
    for e in range(1, 12):
        p = r.dispatch(0, [e])
        assert all(k != (0, 0) for k, _ in p.evicted)
    assert (0, 0) in r.resident()
    assert r.dispatch(0, [0]).hit == [True]


def test_lru_prefetch_arrival_counts_as_access():
    r = rt("cache { capacity = 3 } prefetch { strategy = lookahead budget = 1 }", L=2)
    r.dispatch(0, [1])
    r.dispatch(1, [2], predictions={0: [3]})   # prefetch (0, 3) for the next step
    p = r.dispatch(0, [4])
    # LRU order: (0,1) oldest, then (1,2), then the arrival (0,3): (0,1) is the victim
    assert p.loads[0].victim == (0, 1)


def test_lfu_counts_and_decay_order():
    r = rt("cache { capacity = 2 eviction = lfu decay_interval = 1000 }", L=1)
    for e in (1, 1, 1, 2):
        r.dispatch(0, [e])
    p = r.dispatch(0, [3])
    assert p.loads[0].victim == (0, 2)          # freq 1 < 3


def test_score_uses_router_weights():
    r = rt("cache { capacity = 2 eviction = score }", L=1, K=2)
    r.dispatch(0, [1, 2], weights=[0.9, 0.1])
    p = r.dispatch(0, [3], weights=[0.5])
    assert p.loads[0].victim == (0, 2)


def test_frequency_threshold_rejects_into_stream():
    r = rt("cache { capacity = 4 eviction = frequency_threshold freq_threshold = 0.3 freq_window = 10 }", L=1, K=1)
    for e in [1, 1, 1, 2]:
        p = r.dispatch(0, [e])
    assert p.where == [STREAM]          # (0,2): share 1/4 < 0.3, computed by streaming
    assert (0, 2) not in r.resident()


def test_segmented_demotion_moves_no_data():
    r = rt("cache { capacity = 3 eviction = lfu | lru }", L=1, K=1)
    for e in (1, 2, 3):
        p = r.dispatch(0, [e])
    # a holds 2 keys, the third insert demoted one into b without any eviction
    assert r.stats()["evictions"] == 0 and len(r.resident()) == 3
    p = r.dispatch(0, [4])
    assert len(p.evicted) == 1 and r.stats()["evictions"] == 1


def test_history_prefetch_proposes_most_frequent(both_backends):
    """(The proposals are read from the pure runtime's Runtime._proposals; the compiled
    engine's are the same: tests/test_runtime_backends.py compares their prefetch loads.)"""
    pure = both_backends == "pure"
    r = rt("cache { capacity = 3 } prefetch { strategy = history budget = 2 history_window = 4 }",
           L=2, K=2)
    for _ in range(3):
        r.dispatch(0, [1, 2])
        r.dispatch(1, [7, 8])
    r.dispatch(0, [1, 2])
    r.dispatch(1, [8, 9])
    assert not pure or r._impl._proposals(0, [1, 2], None) == [(1, 8), (1, 7)]   # 8 seen 4x, 7 3x
    for _ in range(4):                                            # the window forgets 7 and 8
        r.dispatch(0, [1, 2])
        p = r.dispatch(1, [3, 4])
    assert not pure or r._impl._proposals(0, [1, 2], None) == [(1, 3), (1, 4)]
    # a proposal that is not resident becomes a PREFETCH load
    r = rt("cache { capacity = 2 } prefetch { strategy = history budget = 1 }", L=2, K=1)
    r.dispatch(0, [1])
    r.dispatch(1, [7])
    r.dispatch(0, [2])                  # evicts (0,1)
    p = r.dispatch(1, [8])              # evicts (1,7); proposes (0,1) for the next step
    pf = [ld for ld in p.loads if ld.kind == PREFETCH]
    assert [(ld.key, ld.victim) for ld in pf] == [((0, 1), (0, 2))]
    assert r.dispatch(0, [1]).hit == [True]
    assert r.stats()["prefetch_useful"] == 1


def test_prefetch_loads_never_evict_in_use_or_proposed():
    r = rt("cache { capacity = 3 } prefetch { strategy = lookahead budget = 3 }", L=2, K=2)
    r.dispatch(0, [1, 2])
    p = r.dispatch(1, [3, 4], predictions={0: [5, 6, 7]})
    kinds = [ld.kind for ld in p.loads]
    assert kinds.count(PREFETCH) <= 1     # only (0,1)/(0,2) are evictable, not in use
    for k, _ in p.evicted:
        assert k not in {(1, 3), (1, 4), (0, 5), (0, 6), (0, 7)}


def test_affinity_learns_a_deterministic_pattern():
    pol = mpl.loads("policy a { cache { capacity = 6 } prefetch { strategy = affinity budget = 1 affinity_threshold = 0.9 } }")
    import random
    rnd = random.Random(3)
    r = pol.runtime(2, 16, 1)
    for s in range(300):
        e = rnd.randrange(16)
        r.dispatch(0, [e])
        r.dispatch(1, [(e + 5) % 16])      # layer 1 always follows with e+5
    st = r.stats()
    assert st["prefetch_accuracy"] > 0.9
    assert st["per_layer"][1]["hit_rate"] > 0.8
    # without prefetch layer 1 hits far less
    base = mpl.loads("policy b { cache { capacity = 6 } }").runtime(2, 16, 1)
    rnd = random.Random(3)
    for s in range(300):
        e = rnd.randrange(16)
        base.dispatch(0, [e])
        base.dispatch(1, [(e + 5) % 16])
    assert base.stats()["per_layer"][1]["hit_rate"] < 0.6


def test_lookahead_falls_back_to_history():
    r = rt("cache { capacity = 8 } prefetch { strategy = lookahead budget = 1 }", L=2, K=1)
    for _ in range(3):
        r.dispatch(0, [1])
        r.dispatch(1, [9])
    st0 = r.stats()["prefetch_issued"]
    p = r.dispatch(0, [2], predictions={1: [4]})
    assert [ld.key for ld in p.loads if ld.kind == PREFETCH] == [(1, 4)]
    assert r.stats()["prefetch_issued"] == st0 + 1


def test_prefetch_accuracy_counts_use_before_eviction():
    r = rt("cache { capacity = 4 } prefetch { strategy = lookahead budget = 2 }", L=2, K=1)
    r.dispatch(0, [1], predictions={1: [5, 6]})
    r.dispatch(1, [5])
    s = r.stats()
    assert s["prefetch_issued"] == 2 and s["prefetch_useful"] == 1 and s["prefetch_accuracy"] == 0.5


def test_cpu_fallback_computes_on_cpu_and_loads_in_background():
    r = rt("cache { capacity = 4 } schedule { mode = cpu_fallback }", L=1, K=1)
    p = r.dispatch(0, [3])
    assert p.where == [CPU] and p.loads[0].kind == BACKGROUND
    assert r.dispatch(0, [3]).hit == [True]
    s = r.stats()
    assert s["cpu_computes"] == 1 and s["background_loads"] == 1 and s["demand_loads"] == 0


def test_hybrid_uses_the_cost_model():
    text = "cache { capacity = 4 } schedule { mode = hybrid offload_threshold_ms = 1000 }"
    cost = CostModel(link_gbps=10.0, cpu_gflops=100.0)    # 1 GB: 100 ms link, 10 ms/token CPU
    r = rt(text, L=1, K=1, expert_bytes=1e9, cost=cost)
    assert r.dispatch(0, [1], tokens=1).where == [CPU]          # 10 ms < 100 ms
    p = r.dispatch(0, [2], tokens=64)                           # 640 ms > 100 ms: transfer
    assert p.where[0] >= 0 and p.loads[0].kind == DEMAND
    # a transfer above the threshold always goes to the CPU
    r2 = rt("cache { capacity = 4 } schedule { mode = hybrid offload_threshold_ms = 50 }",
            L=1, K=1, expert_bytes=1e9, cost=cost)
    assert r2.dispatch(0, [2], tokens=64).where == [CPU]
    assert r2.stats()["cpu_computes"] == 1


def test_memory_pressure_trigger_frees_slots():
    r = rt("cache { capacity = 10 memory_threshold = 0.8 memory_headroom = 0.5 memory_budget_gb = 10 }",
           L=1, K=1, expert_bytes=1e9)
    for e in range(7):
        p = r.dispatch(0, [e])
    assert len(r.resident()) == 7
    p = r.dispatch(0, [7])            # 8 GB / 10 GB >= 0.8: evict down to <= 5 GB
    assert len(r.resident()) == 5
    assert len(p.evicted) == 3 and (0, 7) in r.resident()


def test_ttl_in_accesses_and_steps():
    r = rt("cache { capacity = 10 ttl = 3 }", L=1, K=1)
    r.dispatch(0, [1])
    r.dispatch(0, [2])
    r.dispatch(0, [3])
    p = r.dispatch(0, [4])            # (0,1) last accessed 3 accesses ago
    assert [k for k, _ in p.evicted] == [(0, 1)]
    r2 = rt("cache { capacity = 10 ttl = 2 steps }", L=2, K=1)
    r2.dispatch(0, [1]); r2.dispatch(1, [1])
    r2.dispatch(0, [2]); r2.dispatch(1, [2])
    p = r2.dispatch(0, [3])           # step 2: (0,1) and (1,1) unused since step 0
    assert sorted(k for k, _ in p.evicted) == [(0, 1), (1, 1)]
    assert r2.num_slots == 10


def test_monitor_window_metrics():
    r = rt("cache { capacity = 1 } monitor { window = 4 metrics = [hit_rate, eviction_rate] }", L=1, K=1)
    for e in (1, 1, 1, 1):
        r.dispatch(0, [e])
    assert r.metrics()["hit_rate"] == 0.75
    for e in (2, 3, 4, 5):
        r.dispatch(0, [e])
    m = r.metrics()
    assert m["hit_rate"] == 0.0 and m["eviction_rate"] == 1.0 and m["transfer_rate"] == 1.0
    assert m["miss_rate"] == 1.0 and m["prefetch_accuracy"] is None   # no prefetch in window
    log = r.monitor_log()                  # log_interval defaults to 50 accesses
    assert log == []
    r2 = rt("cache { capacity = 1 } monitor { window = 4 log_interval = 2 metrics = [miss_rate] }",
            L=1, K=1)
    for e in (1, 1, 2, 3):
        r2.dispatch(0, [e])
    assert [(x["access"], x["miss_rate"]) for x in r2.monitor_log()] == [(2, 0.5), (4, 0.75)]


def test_adapt_fires_after_duration_in_place_and_logs():
    r = rt(cold("cache { capacity = 4 } adapt { when hit_rate < 0.5 for 5 accesses { capacity = 2 } }"),
           L=1, K=1)
    for e in range(4):
        p = r.dispatch(0, [e])
    assert r.capacities() == [4] and r.stats()["adapt_log"] == []
    p = r.dispatch(0, [4])            # 5th consecutive access with hit_rate < 0.5
    assert r.capacities() == [2]
    assert len(r.resident()) == 2     # the cut evicted down to the new size, in place
    assert len(p.evicted) == 3        # the miss's victim + two by the cut
    entry = r.stats()["adapt_log"][0]
    assert entry == {"step": 4, "access": 5, "rule": "rule0", "line": 1,
                     "key": "cache.capacity", "old": 4, "new": 2}
    assert r.num_slots == 4


def test_adapt_is_edge_triggered():
    r = rt(cold("cache { capacity = 2 } adapt { when miss_rate > 0.5 { trigger flush } }"), L=1, K=1)
    for e in range(6):
        r.dispatch(0, [e])
    assert len(r.stats()["adapt_log"]) == 1     # held all along: fired once


def test_eviction_switch_keeps_residents():
    r = rt(cold("cache { capacity = 4 } adapt { when hit_rate < 0.9 for 4 accesses { eviction = lfu } }"), L=1, K=1)
    for e in range(4):
        r.dispatch(0, [e])
    assert r.values()["cache.eviction"] == "lfu"
    assert sorted(r.resident()) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert r.stats()["evictions"] == 0


def test_conditional_value_pair_restores():
    r = rt(cold("cache { capacity = 4 : 2 when hit_rate < 0.5 } monitor { window = 4 }"), L=1, K=1)
    r.dispatch(0, [1])                      # miss: hit_rate 0 < 0.5 -> capacity 2
    assert r.capacities() == [2]
    for _ in range(4):
        r.dispatch(0, [1])                  # hits: hit_rate back to >= 0.5 -> capacity 4
    assert r.capacities() == [4]
    keys = [(e["key"], e["old"], e["new"]) for e in r.stats()["adapt_log"]]
    assert keys == [("cache.capacity", 4, 2), ("cache.capacity", 2, 4)]


def test_per_layer_uniform_and_shared_pool():
    r = rt("cache { capacity = 4 } per_layer { total_budget = 12 min_capacity = 1 }", L=3, E=16, K=2)
    assert r.capacities() == [4, 4, 4] and r.num_slots == 12
    slots = set()
    for s in range(10):
        for layer in range(3):
            p = r.dispatch(layer, [s % 16, (s + 3) % 16])
            slots.update(w for w in p.where if w >= 0)
    assert slots <= set(range(12))
    assert all(sum(1 for k in r.resident() if k[0] == layer) <= 4 for layer in range(3))


def test_per_layer_entropy_rebalances_in_place():
    body = ("cache { capacity = 4 } per_layer { allocation = entropy total_budget = 12 min_capacity = 2 "
            "max_capacity = 8 rebalance_interval = 30 entropy_window = 30 }")
    r = rt(body, L=3, E=16, K=1)
    import random
    rnd = random.Random(0)
    for s in range(40):
        r.dispatch(0, [0])                  # layer 0: one expert (entropy 0)
        r.dispatch(1, [rnd.randrange(16)])  # layer 1: spread
        r.dispatch(2, [rnd.randrange(4)])
    caps = r.capacities()
    assert sum(caps) <= 12 and caps[0] == 2 and caps[1] > caps[2] >= 2
    assert r.resident().get((0, 0)) is not None     # shrinking kept its hot key


def test_per_layer_frequency_allocation():
    body = ("cache { capacity = 4 } per_layer { allocation = frequency total_budget = 12 "
            "min_capacity = 2 max_capacity = 8 rebalance_interval = 20 entropy_window = 20 }")
    r = rt(body, L=2, E=16, K=1)
    for s in range(20):
        r.dispatch(0, [s % 2])
        r.dispatch(1, [s % 10])
    # layer 0 used 2 distinct experts, layer 1 ten: 12 slots split 2 : 10, clamped to max 8
    assert r.capacities() == [4, 8]


def test_add_stall_feeds_stats_and_window():
    r = rt("cache { capacity = 2 } monitor { window = 10 }", L=1, K=1)
    r.dispatch(0, [1])
    r.add_stall(3.5)
    r.dispatch(0, [2])
    assert r.stats()["stall_ms"] == 3.5
    assert r.metrics()["stall_ms"] == 3.5


def test_size_capacity_uses_expert_bytes():
    r = rt("cache { capacity = 4GB }", L=1, K=1, expert_bytes=1e9)
    assert r.num_slots == 4
    r = rt("cache { capacity = 4GB expert_size_gb = 2 }", L=1, K=1)
    assert r.num_slots == 2


def test_num_slots_covers_adapt_capacities():
    r = rt(cold("cache { capacity = 4 } adapt { when hit_rate < 0.1 { capacity = 32 } }"))
    assert r.num_slots == 32


def test_priority_routing_orders_loads_by_weight():
    r = rt("cache { capacity = 4 } schedule { priority_routing = true }", L=1, K=3)
    p = r.dispatch(0, [1, 2, 3], weights=[0.1, 0.7, 0.2])
    assert [ld.key[1] for ld in p.loads] == [2, 3, 1]
    assert p.experts == [1, 2, 3] and p.where[1] == 0


def test_adapt_duration_in_steps():
    r = rt(cold("cache { capacity = 1 } adapt { when hit_rate < 0.5 for 2 steps { capacity = 3 } }"),
           L=2, K=1)
    r.dispatch(0, [1]); r.dispatch(1, [1])       # step 0: condition holds (counter starts)
    r.dispatch(0, [2]); r.dispatch(1, [2])       # step 1: 1 step held
    assert r.capacities() == [1]
    r.dispatch(0, [3])                           # step 2: 2 steps held -> fires
    assert r.capacities() == [3]
    assert r.stats()["adapt_log"][0]["step"] == 2


def test_adapt_rebalance_and_trigger_actions():
    body = ("cache { capacity = 4 } per_layer { total_budget = 8 min_capacity = 1 max_capacity = 7 "
            "rebalance_interval = 0 entropy_window = 50 } "
            "adapt { when hit_rate < 0.5 for 40 accesses { rebalance frequency } }")
    r = rt(cold(body), L=2, E=16, K=1)
    assert r.capacities() == [4, 4]
    for s in range(20):
        r.dispatch(0, [0])
        r.dispatch(1, [s % 8])
    # layer 1 used 8 distinct experts, layer 0 one: rebalanced in place at access 40
    assert r.capacities() == [1, 7]
    log = r.stats()["adapt_log"]
    assert [(x["key"], x["old"], x["new"]) for x in log] == [("per_layer.allocation", "uniform", "frequency")]
    r2 = rt(cold("cache { capacity = 6 memory_budget_gb = 10 } "
            "adapt { when hit_rate < 0.5 for 4 accesses { trigger memory_pressure } }"),
            L=1, K=1, expert_bytes=2e9)
    for e in range(4):
        p = r2.dispatch(0, [e])
    # 4 x 2 GB resident; the trigger evicts down to headroom 0.7 x 10 GB = 7 GB: 3 keys
    assert len(r2.resident()) == 3 and len(p.evicted) == 1


def test_per_layer_num_slots_covers_adapt_capacity():
    r = rt(cold("cache { capacity = 2 } per_layer { min_capacity = 1 } "
           "adapt { when hit_rate < 0.1 for 8 accesses { capacity = 5 } }"), L=3, K=1)
    assert r.num_slots == 15 and r.capacities() == [2, 2, 2]
    for e in range(8):
        r.dispatch(e % 3, [e])
    assert r.capacities() == [5, 5, 5]


def test_lfu_heap_stays_bounded(both_backends):
    if both_backends == "compiled":
        return                      # (the compiled heap is indexed: no lazy entries)
    r = rt("cache { capacity = 8 eviction = lfu }", L=1, K=1)
    for i in range(5000):
        r.dispatch(0, [i % 8])
    store = r._impl.caches[0].store
    assert len(store.heap) <= 2 * len(store) + 64      # lazy entries are compacted


def test_bad_dispatch_is_a_clear_error():
    from mpl.runtime import DispatchError
    r = rt("cache { capacity = 2 }", L=2, K=2)
    import pytest
    for args in [(2, [1]), (-1, [1]), (0, [1, 2], [0.5])]:
        with pytest.raises(DispatchError):
            r.dispatch(*args)
    assert r.stats()["accesses"] == 0 and r.step == -1    # nothing was recorded


def test_duplicate_experts_are_one_access_each():
    r = rt("cache { capacity = 4 eviction = score }", L=1, K=2)
    p = r.dispatch(0, [3, 5, 3], weights=[0.2, 0.5, 0.4])
    assert p.experts == [3, 5] and r.stats()["accesses"] == 2
    # expert 3's score is its mean weight, 0.3: below 5's 0.5 and a newcomer's 0.35
    r.dispatch(0, [6], weights=[0.35])
    r.dispatch(0, [8], weights=[0.6])          # full now
    assert [k for k, _ in r.dispatch(0, [7], weights=[0.9]).evicted] == [(0, 3)]


def test_window_events_expire_between_dispatch_ends():
    r = rt(cold("cache { capacity = 1 } monitor { window = 2 } "
           "adapt { when eviction_rate >= 0.5 for 3 accesses { capacity = 2 } }"), L=1, K=3)
    r.dispatch(0, [1])                 # access 1: load, no eviction
    r.dispatch(0, [2])                 # access 2: evicts (0,1) -> rate 0.5 (held 1)
    r.dispatch(0, [2, 7, 8])           # access 3: hit, rate 0.5 (held 2); access 4: the
    # eviction of access 2 left the 2-access window: rate 0, the rule must not fire
    assert r.capacities() == [1] and r.stats()["adapt_log"] == []


def test_lookahead_several_layers_round_robin():
    r = rt("cache { capacity = 16 } prefetch { strategy = lookahead budget = 3 lookahead = 2 }",
           L=3, K=1)
    p = r.dispatch(0, [1], predictions={1: [4, 5], 2: [6, 7]})
    assert [ld.key for ld in p.loads if ld.kind == PREFETCH] == [(1, 4), (2, 6), (1, 5)]
    p = r.dispatch(2, [1], predictions={0: [9], 1: [8]})     # wraps into the next step
    assert [ld.key for ld in p.loads if ld.kind == PREFETCH] == [(0, 9), (1, 8)]


def test_shared_cache_per_layer_stats_report_resident_share():
    r = rt("cache { capacity = 5 }", L=2, K=2)
    r.dispatch(0, [1, 2])
    r.dispatch(1, [3, 4])
    r.dispatch(1, [5, 6])        # evicts two keys of layer 0 (LRU)
    pl = r.stats()["per_layer"]
    assert [x["capacity"] for x in pl] == [1, 4]
    assert [x["hit_rate"] for x in pl] == [0.0, 0.0]


def test_trigger_ttl_action_runs_the_sweep():
    r = rt(cold("cache { capacity = 8 ttl = 2 } adapt { when hit_rate < 0.5 for 3 accesses { trigger ttl } }"),
           L=1, K=1)
    r.dispatch(0, [1])
    r.dispatch(0, [2])
    r.dispatch(0, [3])
    log = r.stats()["adapt_log"]
    assert [(x["key"], x["new"]) for x in log] == [("trigger", "ttl")]
    assert sorted(r.resident()) == [(0, 2), (0, 3)]


def test_adapt_rules_wait_for_the_warm_up():
    """monitor.warmup = first_eviction (the default): a cold cache's compulsory misses do not
    fire a rule; the dispatch that fills the cache (every slot of its pool occupied, or the
    first eviction) clears the window, and the rules judge only what comes after it."""
    body = "cache { capacity = 4 } adapt { when hit_rate < 0.4 for 3 accesses { eviction = lfu } }"
    r = rt(body, L=1, E=32, K=1)
    for e in range(4):                 # four compulsory misses: the 4th fills the cache
        r.dispatch(0, [e])
    assert r.stats()["adapt_log"] == [] and r.metrics()["hit_rate"] == 0.0
    r.dispatch(0, [9])                 # a miss (the first eviction: expert 0 leaves)
    for e in (1, 2, 3):                # three hits: 3/4
        r.dispatch(0, [e])
    fired = None
    for i, e in enumerate(range(10, 20)):
        r.dispatch(0, [e])
        if r.stats()["adapt_log"] and fired is None:
            fired = i
    # 3/5, 3/6, 3/7, then below 0.4 from the 4th miss on (3/8), held for 3 accesses: the 6th
    # miss fires it
    assert fired == 5
    entry = r.stats()["adapt_log"][0]
    assert entry["key"] == "cache.eviction" and entry["access"] == 4 + 1 + 3 + 6
    # the same policy judging from the first access fires at once on the cold misses
    r2 = rt(cold(body), L=1, K=1)
    for e in range(3):
        r2.dispatch(0, [e])
    assert [e["access"] for e in r2.stats()["adapt_log"]] == [3]


def test_a_cache_holding_the_whole_model_ends_its_warm_up_once_it_holds_every_expert():
    """A cache as large as the model never evicts: its warm-up ends when every slot of its
    pool (every expert) is occupied, and a rule judges the accesses after that."""
    body = "cache { capacity = 64 } adapt { when hit_rate > 0.9 for 4 accesses { capacity = 2 } }"
    r = rt(body, L=2, E=4, K=1)
    assert r.num_slots == 8
    for layer in (0, 1):
        for e in range(3):
            r.dispatch(layer, [e])
    for _ in range(10):                # six of eight experts: still warming up
        r.dispatch(0, [1])
    assert r.stats()["adapt_log"] == []
    r.dispatch(0, [3])
    r.dispatch(1, [3])                 # the eighth: the pool is full, the window cleared
    assert r.stats()["adapt_log"] == [] and r.metrics()["hit_rate"] == 0.0
    for _ in range(4):
        r.dispatch(0, [1])
    assert [(e["key"], e["new"], e["access"]) for e in r.stats()["adapt_log"]] == \
        [("cache.capacity", 2, 6 + 10 + 2 + 4)]


def test_a_repeated_experts_mean_weight_is_finite_where_the_sum_overflows():
    """A repeated expert's weight is the mean of its weights: finite weights whose sum passes
    the largest float are each divided first, so the mean stays finite (both backends, live
    and in a replay, agree on it)."""
    from mpl.runtime.routing import distinct
    assert distinct([3, 3, 4], [1.7e308, 1.5e308, 0.5]) == ([3, 4], [1.6e308, 0.5])
    assert distinct([3, 3], [0.25, 0.5]) == ([3], [0.375])
    r = rt("cache { capacity = 2 eviction = score }", L=1, E=8, K=2)
    plan = r.dispatch(0, [3, 3, 4], [1.7e308, 1.5e308, 0.5])
    assert plan.experts == [3, 4]
    r.dispatch(0, [5], [1.0])             # the score rule evicts by the weights it kept
    assert sorted(e for (_, e) in r.resident()) == [3, 5]     # 4, the lower weight, left
