"""The public API: load, loads, compile, Policy, PolicyError."""

from __future__ import annotations

import pytest

import mpl
from mpl.checker import analyze


def test_loads_and_runtime():
    pol = mpl.loads("policy p { cache { capacity = 4 } }")
    assert pol.name == "p" and pol.ir.values["cache.capacity"] == 4
    rt = pol.runtime(num_layers=2, num_experts=8, top_k=2)
    plan = rt.dispatch(0, [1, 2])
    assert plan.hit == [False, False] and len(plan.loads) == 2


def test_policy_error_carries_diagnostics():
    with pytest.raises(mpl.PolicyError) as ei:
        mpl.loads("policy p { cache { capacity = 0 } }")
    e = ei.value
    assert e.diagnostics and e.diagnostics[0].code.startswith("MPL")
    assert "capacity" in str(e)


def test_several_policies_and_selection(tmp_path):
    text = "policy a { cache { capacity = 4 } }\npolicy b { cache { capacity = 8 } }\n"
    with pytest.raises(mpl.PolicyError, match="a, b"):
        mpl.loads(text)
    assert mpl.loads(text, policy="b").ir.values["cache.capacity"] == 8
    with pytest.raises(mpl.PolicyError, match="no policy named"):
        mpl.loads(text, policy="c")
    f = tmp_path / "x.moe"
    f.write_text(text)
    assert mpl.load(f, policy="a").path == str(f)
    assert "def make_runtime" in mpl.compile(str(f), policy="a")
    assert "def make_runtime" in mpl.compile("policy q { cache { capacity = 2 } }")


def test_load_missing_file_is_policy_error(tmp_path):
    with pytest.raises(mpl.PolicyError, match="cannot read"):
        mpl.load(tmp_path / "missing.moe")


@pytest.mark.parametrize("text", [
    "policy p { cache { capacity = 16 eviction = lfu | lru pin = [1, 2] ttl = 4 steps "
    "frequency_decay = 0.9 : 0.5 when hit_rate < 0.5 } prefetch { strategy = history budget = 2 } "
    "adapt { when hit_rate < 0.4 for 100 accesses { eviction = lru capacity = 32 } "
    "when miss_rate > 0.9 { trigger flush } } }",
    "policy q { cache { capacity = 12GiB } per_layer { allocation = entropy total_budget = 100 } "
    "schedule { mode = hybrid offload_threshold_ms = 20 } monitor { metrics = [hit_rate, stall_ms] } }",
])
def test_text_round_trips_to_the_same_ir(text):
    pol = mpl.loads(text)
    again = analyze(pol.text())
    assert not [d for d in again.diagnostics if d.is_error], pol.text()
    assert again.ir[pol.name] == pol.ir



def _shipped_policies():
    import glob
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in sorted(glob.glob(os.path.join(root, "stdlib", "*.moe"))
                       + glob.glob(os.path.join(root, "tests", "corpus", "*.moe"))):
        an = analyze(open(path, encoding="utf-8").read(), path)
        if not an.errors:
            for name in an.ir:
                yield pytest.param(path, name, id=f"{os.path.basename(path)}:{name}")


@pytest.mark.parametrize("path,name", list(_shipped_policies()))
def test_every_shipped_policys_text_round_trips_to_the_same_ir(path, name):
    """The canonical text (what a sweep, an override and a replay's model check read) keeps
    everything the policy says: blocks, per-layer pins, memory tiers, adapt rules."""
    import dataclasses
    pol = mpl.load(path, name)
    again = analyze(pol.text())
    assert not again.errors, pol.text()
    # resolved: what an `extends` brought is written out, so the text names no parent
    assert again.ir[pol.name] == dataclasses.replace(pol.ir, parent=None), pol.text()

def test_same_source_shares_the_compiled_module():
    a = mpl.loads("policy p { cache { capacity = 3 } }")
    b = mpl.loads("policy p { cache { capacity = 3 } }")
    assert a.module is b.module                    # compiled once, cached by source hash
    c = mpl.loads("policy p {\n  cache { capacity = 3 }\n}")
    assert c.module.SOURCE_HASH != a.module.SOURCE_HASH   # the hash records the source text


def test_bad_shape_is_a_clear_error():
    pol = mpl.loads("policy p { cache { capacity = 2 } per_layer { total_budget = 4 min_capacity = 2 } }")
    from mpl.runtime import RuntimeConfigError
    with pytest.raises(RuntimeConfigError, match="min_capacity"):
        pol.runtime(num_layers=8, num_experts=8, top_k=1)


def test_replay_delegates_to_the_simulator():
    from mpl.trace import Dispatch, Trace, TraceHeader
    h = TraceHeader(model="tiny", num_layers=2, moe_layers=(0, 1), num_experts=8, top_k=2,
                    expert_bytes=1_000_000)
    t = Trace(h, [Dispatch(step=s, layer=l, experts=[[s % 8, (s + l + 1) % 8]])
                  for s in range(20) for l in range(2)])
    pol = mpl.loads("policy p { cache { capacity = 3 } }")
    report = pol.replay(t, belady=False)
    rt = pol.runtime(2, 8, 2, expert_bytes=1_000_000)
    for d in t:
        rt.dispatch(d.layer, d.distinct(), step=d.step)
    assert report.stats["hits"] == rt.stats()["hits"]
    assert report.stats["accesses"] == 80


def test_concurrent_processes_share_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys
    code = ("import mpl, sys; p = mpl.loads('policy c { cache { capacity = 7 } }'); "
            "r = p.runtime(2, 8, 2); r.dispatch(0, [1, 2]); print(p.module.SOURCE_HASH)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    env.pop("MPL_NO_CACHE", None)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert len({o[0] for o in outs}) == 1
    entries = os.listdir(tmp_path / "mpl" / "modules")
    assert len(entries) == 1 and not any(e.startswith(".tmp") for e in entries)


def test_attach_delegates_to_the_mechanism(monkeypatch):
    import types
    import sys
    calls = []
    fake = types.ModuleType("mpl.offload")
    fake.attach = lambda policy, model, **kw: calls.append((policy, model, kw)) or "handle"
    monkeypatch.setitem(sys.modules, "mpl.offload", fake)
    pol = mpl.loads("policy p { cache { capacity = 2 } }")
    assert pol.attach("model", device="cpu") == "handle"
    assert calls == [(pol, "model", {"device": "cpu"})]


def test_load_accepts_standard_library_names():
    import mpl
    pol = mpl.load("std/lru_basic")
    assert pol.name == "lru_basic"
    with pytest.raises(mpl.PolicyError, match="std/lru_basic"):
        mpl.load("std/no_such_policy")


def test_plan_loads_are_load_tuples_built_on_first_read():
    from mpl.runtime import DEMAND, Load, Plan
    rt = mpl.loads("policy p { cache { capacity = 2 } }").runtime(2, 8, 2)
    plan = rt.dispatch(0, [3, 5])
    raw = plan.raw_loads
    assert raw == [((0, 3), 0, None, DEMAND), ((0, 5), 1, None, DEMAND)]
    assert all(type(x) is tuple for x in raw)          # the hot path builds no objects
    loads = plan.loads
    assert [type(x) for x in loads] == [Load, Load]
    assert loads[1].key == (0, 5) and loads[1].slot == 1 and loads[1].victim is None
    assert loads[0].kind == DEMAND and plan.raw_loads is loads
    same = Plan(plan.step, 0, [3, 5], list(plan.where), list(plan.hit), list(raw), [])
    assert same == plan and "Load(key=(0, 3)" in repr(plan)
    plan2 = rt.dispatch(1, [3, 5])                      # evicts both keys of layer 0
    assert [(ld.key, ld.victim) for ld in plan2.loads] == [((1, 3), (0, 3)), ((1, 5), (0, 5))]
    assert plan2.evicted == [((0, 3), 0), ((0, 5), 1)]
