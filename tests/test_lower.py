"""Lowering to IR: every key defaulted from the schema, units normalised, fallback and
conditional values, aliases, durations, determinism, immutability, hashes."""

import glob
import hashlib
import os

import pytest

from mpl import ir, schema
from mpl.checker import analyze
from mpl.lower import LoweringError, lower

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one(text, name="p", **kw):
    a = analyze(text, **kw)
    assert not a.errors, [(d.code, d.message) for d in a.errors]
    return a.ir[name]


def test_every_schema_key_with_defaults():
    p = one("policy p { cache { capacity = 4 } }")
    assert set(p.values) == set(schema.PARAMS)
    for key, param in schema.PARAMS.items():
        if key == "cache.capacity":
            continue
        d = param.default
        expected = None if d in (schema.OFF, schema.DERIVED) else d
        assert p[key] == expected, key
    assert p["cache.memory_threshold"] is None and p["cache.ttl"] is None
    assert p["cache.expert_size_gb"] is None and p["per_layer.total_budget"] is None
    assert p.blocks == frozenset({"cache"}) and p.adapt == () and p.parent is None


@pytest.mark.parametrize("src,key,value", [
    ("cache { capacity = 12GiB }", "cache.capacity", ir.Size(12 * 2 ** 30)),
    ("cache { capacity = 1.5GB }", "cache.capacity", ir.Size(1_500_000_000)),
    ("cache { capacity = 4; memory_threshold = 0.9; memory_budget_gb = 512MiB }",
     "cache.memory_budget_gb", 0.536870912),
    ("cache { capacity = 4; memory_threshold = 0.9; memory_budget_gb = 2000MB }", "cache.memory_budget_gb", 2),
    ("cache { capacity = 4; expert_size_gb = 0.5GB }", "cache.expert_size_gb", 0.5),
    ("cache { capacity = 4 } schedule { mode = hybrid; offload_threshold_ms = 500 us }",
     "schedule.offload_threshold_ms", 0.5),
    ("cache { capacity = 4; ttl = 64 }", "cache.ttl", ir.Count(64, "accesses")),
    ("cache { capacity = 4; ttl = 8 steps }", "cache.ttl", ir.Count(8, "steps")),
    ("cache { capacity = 4; eviction = lfu; decay_interval = 20 accesses }", "cache.decay_interval", 20),
    ("cache { capacity = 4; eviction = fallback }", "cache.eviction", "lfu|lru"),
    ("cache { capacity = 4; eviction = lfu | lru }", "cache.eviction", "lfu|lru"),
    ("cache { capacity = 4; eviction = score | lru }", "cache.eviction", "score|lru"),
    ("cache { capacity = 4; pin = [3, 1] }", "cache.pin", (3, 1)),
    ("cache { capacity = 4 } monitor { metrics = [stall_ms, hit_rate] }", "monitor.metrics", ("stall_ms", "hit_rate")),
    ("cache { capacity = 4 } schedule { overlap = false }", "schedule.overlap", False),
])
def test_values(src, key, value):
    p = one(f"policy p {{ {src} }}")
    assert p[key] == value
    assert type(p[key]) is type(value)


def test_conditional_value_lowers_to_rule_pair():
    p = one("policy p { cache { capacity = 16 : 8 when stall_ms > 5\n eviction = lru : lfu when hit_rate <= 0.3 } }")
    assert p["cache.capacity"] == 16 and p["cache.eviction"] == "lru"
    r0, r1, r2, r3 = p.adapt
    # pairs in schema key order (capacity before eviction), each followed by its inverse
    assert r0 == ir.AdaptRule(0, ir.Condition("stall_ms", ">", 5.0), ir.Count(0, "accesses"),
                              (ir.SetAction("cache.capacity", 8),), origin="conditional")
    assert r1 == ir.AdaptRule(1, ir.Condition("stall_ms", "<=", 5.0), ir.Count(0, "accesses"),
                              (ir.SetAction("cache.capacity", 16),), origin="conditional", inverse_of=0)
    assert r2.condition == ir.Condition("hit_rate", "<=", 0.3) and r2.actions == (ir.SetAction("cache.eviction", "lfu"),)
    assert r3.condition == ir.Condition("hit_rate", ">", 0.3) and r3.inverse_of == 2
    assert r0.source_line == 1 and r2.source_line == 2


def test_rules_durations_and_actions():
    p = one("""policy p {
        cache { capacity = 8; eviction = lfu }
        per_layer { }
        adapt {
            when hit_rate < 0.5 for 10 steps { lfu_decay = 0.5; trigger flush }
            when miss_rate >= 0.2 { rebalance entropy; cache.capacity = 12; prefetch_budget = 2 }
            when transfer_rate > 2 for 3 tokens { schedule_mode = cpu_fallback }
        }
    }""")
    r0, r1, r2 = p.adapt
    assert r0.duration == ir.Count(10, "steps") and r1.duration == ir.Count(0, "accesses")
    assert r2.duration == ir.Count(3, "tokens")
    assert r0.actions == (ir.SetAction("cache.frequency_decay", 0.5), ir.TriggerAction("flush"))
    assert r1.actions == (ir.RebalanceAction("entropy"), ir.SetAction("cache.capacity", 12),
                          ir.SetAction("prefetch.budget", 2))
    assert r2.actions == (ir.SetAction("schedule.mode", "cpu_fallback"),)
    assert [r.index for r in p.adapt] == [0, 1, 2] and all(r.origin == "rule" for r in p.adapt)
    assert r1.source_line == 6


def test_extends_copies_then_overrides_and_appends_rules():
    a = analyze("""
policy base {
    cache { capacity = 8; eviction = lfu; frequency_decay = 0.8 }
    prefetch { strategy = history }
    adapt { when hit_rate < 0.3 { eviction = lru } }
}
policy child extends base {
    cache { capacity = 16 }
    adapt { when hit_rate > 0.8 { eviction = lfu } }
}""")
    assert not a.diagnostics
    c = a.ir["child"]
    assert c.parent == "base"
    assert c["cache.capacity"] == 16 and c["cache.eviction"] == "lfu" and c["cache.frequency_decay"] == 0.8
    assert c["prefetch.strategy"] == "history" and c.blocks == frozenset({"cache", "prefetch", "adapt"})
    assert [r.condition.op for r in c.adapt] == ["<", ">"]


def test_ir_is_immutable_and_deterministic():
    text = open(os.path.join(ROOT, "tests", "corpus", "full_syntax.moe")).read()
    a, b = analyze(text), analyze(text)
    assert a.ir["base"].to_json() == b.ir["base"].to_json()
    assert a.ir["tuned"] == b.ir["tuned"]
    with pytest.raises(TypeError):
        a.ir["base"].values["cache.capacity"] = 3
    with pytest.raises(Exception):
        a.ir["base"].name = "x"


def test_source_hash(tmp_path):
    text = "policy p { cache { capacity = 4 } }\n"
    assert one(text).source_hash == hashlib.sha256(text.encode()).hexdigest()
    (tmp_path / "lib.moe").write_text("policy base { cache { capacity = 4 } }\n")
    main = 'import "lib.moe"\npolicy p extends base { }\n'
    h1 = analyze(main, str(tmp_path / "main.moe")).ir["p"].source_hash
    (tmp_path / "lib.moe").write_text("policy base { cache { capacity = 5 } }\n")
    h2 = analyze(main, str(tmp_path / "main.moe")).ir["p"].source_hash
    assert h1 != h2 and len(h1) == 64


def test_no_ir_for_policies_with_errors():
    a = analyze("policy good { cache { capacity = 4 } }\npolicy bad { cache { capacity = 0 } }\n"
                "policy child extends bad { cache { eviction = lfu } }\n")
    assert set(a.ir) == {"good"}
    with pytest.raises(LoweringError):
        lower(a.policies["bad"])


def test_replay_purpose_allows_belady():
    text = "policy p { cache { capacity = 4; eviction = belady } }"
    assert "p" not in analyze(text).ir
    a = analyze(text, purpose="replay")
    assert a.diagnostics == [] and a.ir["p"]["cache.eviction"] == "belady"


def test_formatter_keeps_the_ir():
    fmt = pytest.importorskip("mpl.fmt")
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.moe"))
                       + glob.glob(os.path.join(ROOT, "stdlib", "*.moe"))):
        text = open(path, encoding="utf-8").read()
        before = analyze(text, path).ir
        after = analyze(fmt.format_text(text), path).ir
        assert before == after, path
