"""Every adapt action the original accepts is accepted, and each one either
does at runtime what it says (applied in place, like the others) or is a warning naming why it
has no effect. Each test loads a policy through the public API, drives the runtime with a
dispatch sequence that makes the rule fire, and observes the changed behaviour against the
same policy without the rule."""

from __future__ import annotations

import mpl
from mpl.checker import analyze
from runtime_helpers import both_backends  # noqa: F401  (autouse: every test on both backends)


def _cold(body: str) -> str:
    """``body`` with adapt rules judging from the first access (monitor.warmup = none): these
    tests drive a rule from a cold cache."""
    if "monitor {" in body:
        return body.replace("monitor {", "monitor { warmup = none", 1)
    return body + "\n monitor { warmup = none }"


def _rt(body: str, *, layers=2, experts=16, top_k=1, **kw):
    policy = mpl.loads("policy p {\n" + _cold(body) + "\n}\n")
    return policy.runtime(num_layers=layers, num_experts=experts, top_k=top_k, **kw)


def _both(body: str, rule: str, drive, **kw) -> dict:
    """{False: runtime without the rule, True: with it}, each driven by ``drive(rt)``."""
    out = {}
    for with_rule in (False, True):
        rt = _rt(body.replace("{}", rule if with_rule else ""), **kw)
        drive(rt)
        out[with_rule] = rt
    return out


def _log(rt):
    return [(e["key"], e["old"], e["new"]) for e in rt.stats()["adapt_log"]]


def _codes(text):
    return [(d.code, d.severity.value) for d in analyze(text).diagnostics]


def test_every_action_of_the_original_is_accepted():
    names = ["overlap = false", "priority_routing = true", "freq_window = 10", "window = 10",
             "log_interval = 10", "memory_budget_gb = 8", "expert_size_gb = 2",
             "total_budget = 64", "min_capacity = 2", "max_capacity = 8",
             "rebalance_interval = 10", "entropy_window = 10", "capacity = 16.0",
             "prefetch_budget = 2.0"]
    for action in names:
        text = ("policy p {\n cache { capacity = 8 eviction = frequency_threshold memory_threshold = 0.9 }\n"
                " prefetch { strategy = history }\n per_layer { allocation = entropy }\n"
                f" adapt {{ when hit_rate < 0.5 {{ {action} }} }}\n}}\n")
        a = analyze(text)
        assert not a.errors, (action, [(d.code, d.message) for d in a.diagnostics])
        assert "p" in a.ir


def test_integral_floats_set_integers():
    rt = _rt("cache { capacity = 8 }\n prefetch { strategy = history budget = 4 }\n"
             " adapt { when hit_rate < 0.5 { capacity = 2.0 prefetch_budget = 1. } }", layers=1)
    rt.dispatch(0, [0])
    assert _log(rt) == [("cache.capacity", 8, 2), ("prefetch.budget", 4, 1)]
    v = rt.values()
    assert v["cache.capacity"] == 2 and type(v["cache.capacity"]) is int
    assert v["prefetch.budget"] == 1 and type(v["prefetch.budget"]) is int


def test_priority_routing_orders_the_loads_by_weight_once_the_rule_fired():
    body = " cache { capacity = 8 }\n schedule { priority_routing = false }\n{}"
    rule = " adapt { when hit_rate < 0.5 { priority_routing = true } }"
    plans = {}

    def drive(rt):
        plans[rt] = (rt.dispatch(0, [0, 1], weights=[0.2, 0.8]), rt.dispatch(0, [2, 3], weights=[0.3, 0.7]))

    rts = _both(body, rule, drive, layers=1, top_k=2)
    for with_rule, rt in rts.items():
        first, second = plans[rt]
        assert [ld[0][1] for ld in first.raw_loads] == [0, 1]      # router order before firing
        assert [ld[0][1] for ld in second.raw_loads] == ([3, 2] if with_rule else [2, 3])
    assert _log(rts[True]) == [("schedule.priority_routing", False, True)]


def test_freq_window_changes_what_is_admitted():
    # frequency_threshold admits a missed key only if its share of the last freq_window
    # accesses of its layer is >= freq_threshold: with a window of 1 every key qualifies
    body = (" cache { capacity = 4 eviction = frequency_threshold freq_threshold = 0.3 "
            "freq_window = 100 }\n{}")
    rule = " adapt { when hit_rate > 0.5 { freq_window = 1 } }"

    def drive(rt):
        for e in [0] * 6 + [1, 2, 3]:    # rare experts: 1/7, 1/8, 1/9 of the window of 100
            rt.dispatch(0, [e])

    out = {k: rt.stats() for k, rt in _both(body, rule, drive, layers=1).items()}
    assert out[False]["streamed"] == 3          # not admitted
    assert out[True]["streamed"] == 0 and out[True]["loads"] == 4
    assert [e["key"] for e in out[True]["adapt_log"]] == ["cache.freq_window"]


def test_window_resizes_the_metrics_window_in_place():
    body = " cache { capacity = 8 }\n monitor { window = 100 }\n{}"
    rule = " adapt { when hit_rate > 0.9 { window = 4 } }"

    def drive(rt):
        for e in [0] * 12 + [1, 2, 3, 4]:   # 1 miss, then hits (fires at 10/11), then 4 misses
            rt.dispatch(0, [e])

    got = {k: rt.metrics() for k, rt in _both(body, rule, drive, layers=1).items()}
    assert got[True]["hit_rate"] == 0.0                      # the last 4 accesses only
    assert abs(got[False]["hit_rate"] - 11 / 16) < 1e-12     # all 16 accesses
    # the events (loads) of the kept accesses stay, the older ones left with them
    assert got[True]["transfer_rate"] == 1.0 and abs(got[False]["transfer_rate"] - 5 / 16) < 1e-12
    # growing it again keeps what is known and widens as accesses come
    rt = _rt(" cache { capacity = 8 }\n monitor { window = 2 }\n"
             " adapt { when miss_rate > 0.9 { window = 10 } }", layers=1)
    rt.dispatch(0, [0])                           # a miss: fires, the window grows to 10
    for _ in range(3):
        rt.dispatch(0, [0])
    assert rt.metrics()["hit_rate"] == 3 / 4      # 4 known accesses, 3 hits


def test_log_interval_changes_the_monitor_log():
    body = " cache { capacity = 8 }\n monitor { log_interval = 100 }\n{}"
    rule = " adapt { when hit_rate > 0.5 { log_interval = 2 } }"

    def drive(rt):
        for _ in range(10):
            rt.dispatch(0, [0])

    logs = {k: [r["access"] for r in rt.monitor_log()] for k, rt in _both(body, rule, drive, layers=1).items()}
    assert logs[False] == []
    # the rule fires at the 3rd access (2/3 > 0.5); the new interval applies from the next dispatch
    assert logs[True] == [4, 6, 8, 10]


def test_memory_budget_gb_moves_the_memory_pressure_trigger():
    body = (" cache { capacity = 8 expert_size_gb = 1 memory_threshold = 0.9 "
            "memory_headroom = 0.5 memory_budget_gb = 100 }\n{}")
    rule = " adapt { when hit_rate < 0.5 for 6 accesses { memory_budget_gb = 4 } }"

    def drive(rt):
        for e in range(8):
            rt.dispatch(0, [e])

    res = {k: (len(rt.resident()), rt.stats()["evictions"])
           for k, rt in _both(body, rule, drive, layers=1).items()}
    assert res[False] == (8, 0)
    # the 7th load passed 0.9 x 4 GB: evicted down to 0.5 x 4 GB, then one more load
    assert res[True] == (3, 5)


def test_per_layer_budget_and_bounds_rebalance_in_place():
    base = (" cache { capacity = 4 }\n per_layer { allocation = uniform total_budget = 8 "
            "min_capacity = 1 max_capacity = 4 }\n")
    for action, caps in (("total_budget = 4", [2, 2]), ("max_capacity = 3", [3, 3]),
                         ("total_budget = 12", [4, 4])):
        rt = _rt(base + f" adapt {{ when hit_rate < 0.5 {{ {action} }} }}")
        assert rt.capacities() == [4, 4]
        rt.dispatch(0, [0])
        assert rt.capacities() == caps, action
    # min_capacity: a skewed frequency split, then every layer gets at least the new minimum
    body = (" cache { capacity = 4 }\n per_layer { allocation = frequency total_budget = 8 "
            "min_capacity = 1 max_capacity = 8 rebalance_interval = 4 }\n{}")
    rule = " adapt { when hit_rate > 0.5 for 20 accesses { min_capacity = 3 } }"
    caps = {k: rt.capacities() for k, rt in _both(body, rule, _skewed(40, 7)).items()}
    assert caps[False][1] < 3 and sum(caps[False]) <= 8
    assert caps[True][1] == 3 and sum(caps[True]) <= 8


def _skewed(n: int, spread: int):
    """Layer 0 cycles over ``spread`` experts, layer 1 uses one, for ``n`` steps."""
    def drive(rt):
        for i in range(n):
            rt.dispatch(0, [i % spread])
            rt.dispatch(1, [0])
    return drive


def test_rebalance_interval_starts_periodic_rebalancing():
    body = (" cache { capacity = 4 }\n per_layer { allocation = frequency total_budget = 8 "
            "min_capacity = 1 max_capacity = 8 rebalance_interval = 0 }\n{}")
    rule = " adapt { when hit_rate < 0.9 for 10 accesses { rebalance_interval = 2 } }"
    caps = {k: rt.capacities() for k, rt in _both(body, rule, _skewed(30, 6)).items()}
    assert caps[False] == [4, 4]                  # never rebalanced
    assert caps[True][0] > caps[True][1]          # the busier layer got more slots


def test_entropy_window_changes_the_allocation_signal():
    body = (" cache { capacity = 4 }\n per_layer { allocation = entropy total_budget = 8 "
            "min_capacity = 1 max_capacity = 7 rebalance_interval = 2 entropy_window = 200 }\n{}")
    rule = " adapt { when hit_rate > 0.5 for 30 accesses { entropy_window = 1 } }"
    rts = _both(body, rule, _skewed(40, 6))
    assert rts[True].values()["per_layer.entropy_window"] == 1
    assert rts[False].values()["per_layer.entropy_window"] == 200
    caps = {k: rt.capacities() for k, rt in rts.items()}
    # over the whole window layer 0 has the higher entropy; over one dispatch both have none
    assert caps[False][0] > caps[False][1]
    assert caps[True] == [4, 4]


def test_actions_without_effect_are_warnings_and_left_out():
    for action, code, why in (("overlap = false", "MPL408", "copy stream"),
                              ("expert_size_gb = 2", "MPL408", "the model's"),
                              ("rebalance entropy", "MPL308", "one shared cache"),
                              ("min_capacity = 2", "MPL308", "one shared cache")):
        text = ("policy p {\n cache { capacity = 8 }\n"
                f" adapt {{ when hit_rate < 0.5 {{ {action} }} }}\n}}\n")
        a = analyze(text)
        assert [(d.code, d.severity.value) for d in a.diagnostics] == [(code, "warning")], action
        assert why in a.diagnostics[0].message
        assert a.diagnostics[0].fixes, action                       # remove the action
        assert a.ir["p"].adapt[0].actions == ()                     # nothing to apply
        rt = mpl.loads(text).runtime(num_layers=2, num_experts=8, top_k=1)
        rt.dispatch(0, [0])
        assert rt.stats()["adapt_log"] == []


def test_no_effect_action_is_not_an_invalid_state():
    # hybrid needs overlap: an overlap action that cannot apply does not make the policy invalid
    text = ("policy p {\n cache { capacity = 8 }\n schedule { mode = hybrid }\n"
            " adapt { when hit_rate < 0.5 { overlap = false } }\n}\n")
    assert _codes(text) == [("MPL408", "warning")]


def test_every_adaptable_parameter_has_a_runtime_action_and_no_other_one():
    # the runtime applies adapt actions from its table (mpl.runtime.adapt.ACTIONS), keyed by
    # the schema's adaptable parameters; the runtime does not read the schema, so this holds
    # the two equal: a new adaptable parameter needs an action, a non-adaptable one has none
    from mpl import schema
    from mpl.runtime.adapt import ACTIONS

    adaptable = {p.key for p in schema.PARAMS.values() if p.adaptable}
    assert set(ACTIONS) == adaptable, (sorted(adaptable - set(ACTIONS)),
                                       sorted(set(ACTIONS) - adaptable))
    no_effect = {p.key for p in schema.PARAMS.values() if p.adapt_no_effect}
    assert no_effect and not no_effect & set(ACTIONS)
    assert set(schema.ADAPT_TARGETS.values()) == adaptable | no_effect
