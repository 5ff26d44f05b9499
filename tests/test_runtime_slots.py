"""The runtime's slot pool (runtime.num_slots, which sizes the mechanism's device pool) is
capped at the experts a cache can ever hold: a layer's cache holds at most that layer's
experts, the shared cache every MoE layer's. The requested slots still drive every decision
(the plans are those of the uncapped runtime); the stats say both. A size below one expert
is refused, never rounded up to one slot."""

from __future__ import annotations

import pytest

import mpl
from mpl.runtime.core import CAPACITY_SLOTS_MAX, RuntimeConfigError
from runtime_helpers import zipf_trace

L, E, K = 3, 8, 2
EB = 11_000                     # bytes of one expert


def rt(body, **kw):
    return mpl.loads(f"policy t {{ {body} }}").runtime(L, E, K, expert_bytes=EB, **kw)


def plans(r, trace):
    out = []
    for layer, experts, _w in trace:
        p = r.dispatch(layer, experts)
        out.append((p.step, p.layer, tuple(p.hit), tuple(p.where),
                    tuple((x.key, x.slot, x.kind) for x in p.loads), tuple(p.evicted)))
    return out


TRACE = zipf_trace(60, L, E, K, seed=3)


@pytest.mark.parametrize("capacity", ["10GiB", "999999999999999999 GiB", "64"])
def test_shared_pool_stops_at_every_expert(capacity):
    r = rt(f"cache {{ capacity = {capacity} }}")
    assert r.num_slots == L * E
    st = r.stats()
    assert st["num_slots"] == L * E
    # a size as many experts as fit, saturating at CAPACITY_SLOTS_MAX
    assert st["requested_slots"] == (64 if capacity == "64" else
                                     min(mpl.loads(f"policy t {{ cache {{ capacity = {capacity} }} }}")
                                         .ir["cache.capacity"].bytes // float(EB), CAPACITY_SLOTS_MAX))
    assert st["requested_slots"] > st["num_slots"]
    # the same decisions, slot for slot, as a cache of exactly every expert
    assert plans(r, TRACE) == plans(rt(f"cache {{ capacity = {L * E} }}"), TRACE)


def test_a_pool_below_every_expert_is_not_capped():
    r = rt("cache { capacity = 5 }")
    assert r.num_slots == 5 and r.stats()["requested_slots"] == 5


@pytest.mark.parametrize("eviction", ["lru", "lfu | lru", "arc", "s3fifo"])
def test_per_layer_pool_stops_at_every_expert_and_never_runs_out(eviction):
    body = (f"cache {{ capacity = 10GiB  eviction = {eviction} }} "
            "per_layer { allocation = entropy  rebalance_interval = 7  min_capacity = 1 }")
    r = rt(body)
    assert r.num_slots == L * E
    assert r.stats()["requested_slots"] == L * 64        # layers x max_capacity (the default)
    got = plans(r, zipf_trace(200, L, E, K, seed=5))      # a pool exhausted would raise here
    assert len(got) == 200 * L and len(r.resident()) <= L * E
    # the requested capacities drive the allocation, as before the cap
    assert sum(r.capacities()) <= L * 64 and max(r.capacities()) <= 64


def test_per_layer_explicit_budget_is_capped_in_the_pool_only():
    r = rt("cache { capacity = 4 } per_layer { total_budget = 150  max_capacity = 50 }")
    assert r.capacities() == [50, 50, 50]
    assert r.stats()["requested_slots"] == 150 and r.num_slots == L * E


def test_an_adapt_rule_to_a_huge_size_is_capped_too():
    r = rt("cache { capacity = 4 } adapt { when hit_rate < 0.99 for 5 accesses { capacity = 10GiB } }")
    assert r.num_slots == L * E
    plans(r, TRACE)
    assert any(e["key"] == "cache.capacity" for e in r.stats()["adapt_log"])
    assert len(r.resident()) <= L * E


@pytest.mark.parametrize("body", [
    "cache { capacity = 0.001MiB }",                                   # 1048 bytes < one expert
    "cache { capacity = 4 } adapt { when hit_rate < 0.5 { capacity = 0.001MiB } }",
])
def test_a_size_below_one_expert_is_refused_not_one_slot(body):
    with pytest.raises(RuntimeConfigError, match="smaller than one expert .11000 bytes.: it gives no slot"):
        rt(body)
