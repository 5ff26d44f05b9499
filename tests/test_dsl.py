"""mpl.dsl: the eDSL renders .moe text that the real checker judges; its IR equals the IR of
the equivalent hand-written text; errors come back as the checker's diagnostics."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

import mpl
from mpl import dsl, schema
from mpl.checker import analyze
from mpl.diagnostics import Severity
from mpl.fmt import format_text


def text_ir(text: str, name: str):
    analysis = analyze(text)
    errors = [d for d in analysis.diagnostics if d.is_error]
    assert not errors, errors
    return analysis.ir[name]


def assert_clean_and_canonical(builder):
    text = builder.to_moe()
    diags = analyze(text).diagnostics
    assert [d for d in diags if d.severity in (Severity.ERROR, Severity.WARNING)] == [], (text, diags)
    assert format_text(text) == text, text


# ---------------------------------------------------------------- IR equivalence
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def simple():
    b = dsl.policy("simple").cache(capacity=16, eviction="lru")
    t = "policy simple { cache { capacity = 16  eviction = lru } }"
    return b, t


@case
def seed_language_example():
    b = (dsl.policy("balanced")
         .cache(capacity=16, eviction="lfu", frequency_decay=0.9)
         .prefetch(strategy="history", budget=4)
         .schedule(mode="hybrid")
         .adapt(dsl.when("hit_rate") < 0.4, for_=100, set={"eviction": "lru"}))
    t = """
    policy balanced {
        cache {
            capacity = 16
            eviction = lfu
            frequency_decay = 0.9
        }
        prefetch {
            strategy = history
            budget = 4
        }
        schedule { mode = hybrid }
        adapt {
            when hit_rate < 0.4 for 100 accesses
                { eviction = lru }
        }
    }"""
    return b, t


@case
def per_layer():
    b = (dsl.policy("epcb")
         .cache(eviction="lfu")
         .per_layer(allocation="entropy", total_budget=864, rebalance_interval=500,
                    min_capacity=4, max_capacity=48, entropy_window=100))
    t = """policy epcb {
        per_layer { allocation = entropy; total_budget = 864; rebalance_interval = 500
                    min_capacity = 4; max_capacity = 48; entropy_window = 100 }
        cache { eviction = lfu }
    }"""
    return b, t


@case
def conditional_value():
    b = (dsl.policy("cond")
         .cache(capacity=dsl.cond(16, 8, when=dsl.when("hit_rate") < 0.3), eviction="lfu"))
    t = "policy cond { cache { capacity = 16 : 8 when hit_rate < 0.3  eviction = lfu } }"
    return b, t


@case
def conditional_string_condition():
    b = (dsl.policy("cond2").cache(capacity=8)
         .schedule(mode=dsl.cond("gpu_only", "cpu_fallback", when="stall_ms >= 200")))
    t = "policy cond2 { cache { capacity = 8 } schedule { mode = gpu_only : cpu_fallback when stall_ms >= 200 } }"
    return b, t


@case
def fallback_object():
    b = dsl.policy("seg").cache(capacity=24, eviction=dsl.fallback("lfu", "lru"))
    t = "policy seg { cache { capacity = 24  eviction = lfu | lru } }"
    return b, t


@case
def fallback_string():
    b = dsl.policy("seg2").cache(capacity=24, eviction="lfu|lru")
    t = "policy seg2 { cache { capacity = 24  eviction = fallback } }"
    return b, t


@case
def pin_and_triggers():
    b = (dsl.policy("pinned")
         .cache(capacity=16, eviction="lfu", pin=[0, 3], memory_threshold=0.9,
                memory_headroom=0.6, memory_budget_gb=dsl.GiB(8), ttl=dsl.steps(20))
         .monitor(metrics=["hit_rate", "prefetch_accuracy"], window=200))
    t = """policy pinned {
        cache { capacity = 16  eviction = lfu  pin = [0, 3]  memory_threshold = 0.9
                memory_headroom = 0.6  memory_budget_gb = 8 GiB  ttl = 20 steps }
        monitor { metrics = [hit_rate, prefetch_accuracy]  window = 200 }
    }"""
    return b, t


@case
def size_capacity_and_time_units():
    b = (dsl.policy("sized").cache(capacity="12GiB")
         .schedule(mode="hybrid", offload_threshold_ms=dsl.us(2500), overlap=True))
    t = "policy sized { cache { capacity = 12 GiB } schedule { mode = hybrid  offload_threshold_ms = 2500us  overlap = true } }"
    return b, t


@case
def adapt_actions_of_every_kind():
    b = (dsl.policy("rules")
         .cache(capacity=16, eviction="lfu")
         .prefetch(strategy="history", budget=2)
         .per_layer(allocation="uniform")
         .adapt("hit_rate < 0.3", dsl.assign("cache.capacity", 24), dsl.trigger("memory_pressure"),
                for_="4 steps", rebalance="entropy")
         .adapt(dsl.when("prefetch_accuracy") <= 0.1, set={"prefetch_budget": 1}, trigger=["ttl"]))
    t = """policy rules {
        cache { capacity = 16  eviction = lfu }
        prefetch { strategy = history  budget = 2 }
        per_layer { allocation = uniform }
        adapt {
            when hit_rate < 0.3 for 4 steps { cache.capacity = 24  trigger memory_pressure  rebalance entropy }
            when prefetch_accuracy <= 0.1 { prefetch.budget = 1  trigger ttl }
        }
    }"""
    return b, t


@case
def extends_stdlib():
    b = dsl.policy("roomier", extends="std/balanced").cache(capacity=6)
    t = 'import "std/balanced"\npolicy roomier extends balanced { cache { capacity = 6 } }'
    return b, t


@case
def extends_a_builder():
    base = dsl.policy("base", doc="The base.").cache(capacity=16, eviction="lfu", pin=[1])
    mid = dsl.policy("mid", extends=base).prefetch(strategy="history", budget=2)
    b = dsl.policy("leaf", extends=mid).cache(capacity=8).adapt("hit_rate < 0.2", set={"eviction": "arc"})
    t = """policy base { cache { capacity = 16  eviction = lfu  pin = [1] } }
    policy mid extends base { prefetch { strategy = history  budget = 2 } }
    policy leaf extends mid { cache { capacity = 8 }  adapt { when hit_rate < 0.2 { eviction = arc } } }"""
    return b, t


@case
def decorator_configuring():
    @dsl.policy
    def deco(p):
        """A docstring becomes the header comment."""
        p.cache(capacity=8, eviction="arc")
        p.prefetch(strategy="affinity", budget=2, affinity_threshold=0.5)
    t = "policy deco { cache { capacity = 8  eviction = arc } prefetch { strategy = affinity  budget = 2  affinity_threshold = 0.5 } }"
    return deco, t


@case
def decorator_returning_blocks():
    @dsl.policy(extends="std/lru_basic")
    def deco2():
        return [dsl.cache(capacity=4), dsl.schedule(mode="cpu_fallback"),
                dsl.rule(dsl.when("miss_rate") > 0.8, for_=dsl.accesses(50), set={"eviction": "lfu"})]
    t = """import "std/lru_basic"
    policy deco2 extends lru_basic {
        cache { capacity = 4 }
        schedule { mode = cpu_fallback }
        adapt { when miss_rate > 0.8 for 50 accesses { eviction = lfu } }
    }"""
    return deco2, t


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_dsl_ir_equals_handwritten_text(make):
    builder, text = make()
    assert builder.ir() == text_ir(text, builder.name)


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_dsl_text_checks_clean_and_is_canonical(make):
    builder, _ = make()
    assert_clean_and_canonical(builder)


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_build_gives_a_working_policy(make):
    builder, text = make()
    policy = builder.build()
    assert isinstance(policy, mpl.Policy)
    assert policy.ir == mpl.loads(text, policy=builder.name).ir
    rt = policy.runtime(num_layers=4, num_experts=16, top_k=2)
    for step in range(6):
        for layer in range(4):
            rt.dispatch(layer, [(step + layer) % 8, 8 + (3 * layer) % 8])
    stats = rt.stats()
    assert stats["accesses"] == 48
    assert stats["hits"] + stats["misses"] == 48


def test_ir_differs_when_the_policy_differs():
    a = dsl.policy("a").cache(capacity=16, eviction="lfu")
    b = dsl.policy("a").cache(capacity=16, eviction="lru")
    assert a.ir() != b.ir()


# ---------------------------------------------------------------- builder behaviour
def test_block_calls_merge_override_and_remove():
    b = dsl.policy("m").cache(capacity=16, eviction="lfu", ttl=100)
    b.cache(capacity=8)
    b.cache(ttl=None)
    ir = b.ir()
    assert ir["cache.capacity"] == 8
    assert ir["cache.eviction"] == "lfu"
    assert ir["cache.ttl"] is None
    assert "ttl" not in b.to_moe()


def test_copy_is_independent():
    base = dsl.policy("base").cache(capacity=16, eviction="lfu")
    other = base.copy("other").cache(capacity=4).adapt("hit_rate < 0.1", set={"eviction": "lru"})
    assert base.ir()["cache.capacity"] == 16 and base.ir().adapt == ()
    assert other.name == "other" and other.ir()["cache.capacity"] == 4 and len(other.ir().adapt) == 1


def test_params_render_in_schema_order_whatever_the_call_order():
    b = dsl.policy("o").prefetch(budget=2, strategy="history").cache(eviction="lfu", capacity=8)
    text = b.to_moe()
    assert text.index("cache {") < text.index("prefetch {")
    assert text.index("capacity") < text.index("eviction")
    assert text.index("strategy") < text.index("budget")


def test_generic_block_method_and_module_factories():
    a = dsl.policy("g").block("cache", capacity=8)
    b = dsl.policy("g").add(dsl.block("cache", capacity=8))
    c = dsl.policy("g").add(dsl.cache(capacity=8))
    assert a.to_moe() == b.to_moe() == c.to_moe()


def test_block_methods_come_from_the_schema():
    p = dsl.policy("x")
    for name, blk in schema.BLOCKS.items():
        if not blk.rules and blk.flat:
            assert callable(getattr(p, name)) and name in dir(p)
            assert callable(getattr(dsl, name))
        elif not blk.rules:         # memory tiers: nested items, written in .moe text
            assert name not in dir(p) and not hasattr(dsl, name)
    with pytest.raises(AttributeError, match="did you mean 'prefetch'"):
        p.prefetc
    with pytest.raises(AttributeError):
        dsl.not_a_block


def test_unit_helpers_come_from_the_schema():
    for unit in schema.UNITS:
        q = getattr(dsl, unit)(3)
        assert q == dsl.Quantity(3, unit)
        glued = schema.UNITS[unit].kind == "size"
        assert dsl.render_value(q) == (f"3{unit}" if glued else f"3 {unit}")


@pytest.mark.parametrize("value, text", [
    (True, "true"), (False, "false"), (16, "16"), (-2, "-2"), (0.9, "0.9"), (1e-4, "0.0001"),
    (1e20, "100000000000000000000.0"), ("lfu", "lfu"), ("lfu|lru", "lfu | lru"),
    (" lfu | lru ", "lfu | lru"), ("12GiB", "12GiB"), ("12 GiB", "12GiB"), ("1.50 MB", "1.5MB"),
    ("50steps", "50 steps"), ("12GiG", "12GiG"), (dsl.ms(5), "5 ms"),
    ("16", "16"), ([0, 1], "[0, 1]"), (("hit_rate", "miss_rate"), "[hit_rate, miss_rate]"),
    ([], "[]"), ("two words", '"two words"'), ('a"b', '"a\\"b"'),
    (dsl.fallback("lfu", "lru"), "lfu | lru"), (Fraction(1, 4), "0.25"), (Decimal("0.5"), "0.5"),
    (dsl.cond(16, 8, when=dsl.when("hit_rate") < 0.3), "16 : 8 when hit_rate < 0.3"),
    (dsl.cond("lru", "lfu", when="miss_rate>=1e-1"), "lru : lfu when miss_rate >= 0.1"),
])
def test_python_values_map_to_moe_values(value, text):
    assert dsl.render_value(value) == text


def test_conditions_from_every_operator():
    m = dsl.when("hit_rate")
    got = [dsl.render_condition(c) for c in (m < 1, m <= 1, m > 1, m >= 1, m == 1, m != 1)]
    assert got == [f"hit_rate {op} 1" for op in ("<", "<=", ">", ">=", "==", "!=")]
    assert set(op for op in schema.COMPARISON_OPS) == {"<", "<=", ">", ">=", "==", "!="}
    assert dsl.render_condition(0.4 > m) == "hit_rate < 0.4"      # reflected comparison


def test_string_values_cannot_inject_structure():
    b = dsl.policy("inj").cache(capacity=4, eviction="lru } } policy evil { cache { capacity = 1")
    text = b.to_moe()
    assert analyze(text).document.policies[0].name.text == "inj"
    assert len(analyze(text).document.policies) == 1
    with pytest.raises(mpl.PolicyError) as e:
        b.build()
    assert e.value.diagnostics[0].code == "MPL201"


# ---------------------------------------------------------------- errors are the checker's
def test_unknown_kwarg_gets_the_checkers_did_you_mean():
    b = dsl.policy("typo").cache(capcity=16)
    with pytest.raises(mpl.PolicyError) as e:
        b.build()
    d = next(d for d in e.value.diagnostics if d.code == "MPL102")
    assert "did you mean 'capacity'" in d.message
    text = b.to_moe()
    assert text[d.span.offset:d.span.end_offset] == "capcity"
    # the same message as the hand-written file gives
    hand = next(h for h in analyze(text).diagnostics if h.code == "MPL102")
    assert (hand.code, hand.message, hand.span) == (d.code, d.message, d.span)
    # and the related location is this test's Python line
    assert d.related and d.related[-1].file == __file__
    with open(__file__) as f:
        line = f.read().splitlines()[d.related[-1].span.line - 1]
    assert "capcity=16" in line


@pytest.mark.parametrize("configure, code", [
    (lambda p: p.cache(capacity=0), "MPL203"),
    (lambda p: p.cache(capacity=8, eviction="lfuu"), "MPL202"),
    (lambda p: p.cache(capacity=8, frequency_decay=True), "MPL201"),
    (lambda p: p.cache(capacity=8).prefetch(strategy="history", budget=9), "MPL302"),
    (lambda p: p.cache(capacity=8).schedule(mode="hybrid", overlap=False), "MPL303"),
    (lambda p: p.cache(capacity=8).adapt(dsl.when("hit_rat") < 0.3, set={"eviction": "lru"}), "MPL205"),
    (lambda p: p.cache(capacity=8).adapt("hit_rate < 0.3", set={"colour": "red"}), "MPL207"),
    (lambda p: p.cache(capacity="12 GiG"), "MPL204"),
    (lambda p: p.cahce(capacity=8) if False else p.block("cahce", capacity=8), "MPL101"),
    (lambda p: p.prefetch(strategy="history"), "MPL105"),
])
def test_errors_come_back_as_the_checkers_diagnostics(configure, code):
    b = dsl.policy("bad")
    configure(b)
    with pytest.raises(mpl.PolicyError) as e:
        b.ir()
    assert code in [d.code for d in e.value.diagnostics]
    hand = [d for d in analyze(b.to_moe()).diagnostics if d.is_error]
    assert [(d.code, d.message, d.span) for d in e.value.diagnostics] == \
        [(d.code, d.message, d.span) for d in hand]


def test_warnings_are_reported_but_do_not_fail_the_build():
    b = dsl.policy("w").cache(capacity=8, eviction="lru", frequency_decay=0.5)
    warnings = [d for d in b.diagnostics() if d.severity is Severity.WARNING]
    assert [d.code for d in warnings] == ["MPL401"]
    policy = b.build()
    assert policy.ir["cache.frequency_decay"] == 0.5
    assert [d.code for d in policy.diagnostics] == ["MPL401"]


def test_importing_the_dsl_stays_light():
    import subprocess
    import sys
    code = ("import sys, mpl.dsl; print([m for m in ('torch', 'numpy', 'transformers', 'pygls') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("make", [
    lambda: dsl.policy("two words"),
    lambda: dsl.policy("x").cache(capacity=float("nan")),
    lambda: dsl.policy("x").cache(capacity=float("inf")),
    lambda: dsl.policy("x").cache(capacity={"slots": 4}),
    lambda: dsl.policy("x").block("my block", capacity=1),
    lambda: dsl.policy("x").cache(**{"ca pacity": 1}),
    lambda: dsl.policy("x").adapt("hit_rate is low", set={"eviction": "lru"}),
    lambda: dsl.policy("x").adapt(dsl.when("hit rate") < 1, set={"eviction": "lru"}),
    lambda: dsl.policy("x").adapt("hit_rate < 1", set={"cache..capacity": 1}),
    lambda: dsl.policy("x").adapt("hit_rate < 1", for_=True, set={"eviction": "lru"}),
    lambda: dsl.policy("x").adapt("hit_rate < 1", 42),
    lambda: dsl.policy("x", extends="not a name"),
])
def test_what_cannot_be_written_is_refused_with_a_located_mpl004(make):
    with pytest.raises(mpl.PolicyError) as e:
        make().to_moe()
    d = e.value.diagnostics[0]
    assert d.code == "MPL004"
    assert d.file == __file__          # located at the Python call


def test_keywords_name_policies_as_in_a_moe_file():
    # the original accepts `policy when { ... }`; the DSL writes what the parser reads
    for kw in ("when", "policy", "extends", "true"):
        parent = dsl.policy(kw).cache(capacity=8)
        child = dsl.policy("x", extends=kw)
        text = parent.to_moe() + "\n" + child.to_moe()
        assert f"policy {kw} {{" in text and f"policy x extends {kw} {{" in text
        a = analyze(text)
        assert a.diagnostics == [] and set(a.ir) == {kw, "x"}
        assert "policy true {" in parent.copy(name="true").to_moe()


def test_decorator_errors_surface_at_definition():
    with pytest.raises(mpl.PolicyError) as e:
        @dsl.policy
        def broken(p):
            p.cache(capacity=8, evicton="lru")
    d = next(d for d in e.value.diagnostics if d.code == "MPL102")
    assert "did you mean 'eviction'" in d.message


def test_decorator_docstring_and_name():
    @dsl.policy(version=None)
    def documented():
        """First line.

        Second paragraph."""
        return dsl.cache(capacity=2)
    text = documented.to_moe()
    assert text.startswith("# First line.\n#\n# Second paragraph.\n")
    assert "version" not in text and "policy documented {" in text
    assert documented.ir().name == "documented"
    assert_clean_and_canonical(documented)


def test_relative_import_resolves_against_path(tmp_path):
    (tmp_path / "base.moe").write_text("policy base { cache { capacity = 12  eviction = lfu } }\n")
    b = dsl.policy("child", imports=["base.moe"], extends="base", path=str(tmp_path / "child.moe"))
    b.prefetch(strategy="history", budget=2)
    ir = b.ir()
    assert ir["cache.capacity"] == 12 and ir["cache.eviction"] == "lfu" and ir.parent == "base"
    assert b.build().ir == ir


def test_extends_a_builder_puts_the_ancestors_in_the_text():
    base = dsl.policy("base").cache(capacity=16, eviction="lfu")
    child = dsl.policy("child", extends=base).cache(capacity=4)
    text = child.to_moe()
    assert text.index("policy base {") < text.index("policy child extends base {")
    assert child.ir()["cache.eviction"] == "lfu" and child.ir()["cache.capacity"] == 4
    base.cache(eviction="arc")                 # the child sees its parent as it is now
    assert child.ir()["cache.eviction"] == "arc"


def test_an_extends_cycle_between_builders_is_the_checkers_error():
    a = dsl.policy("a").cache(capacity=2)
    b = dsl.policy("b", extends=a)
    a.extends(b)
    with pytest.raises(mpl.PolicyError) as e:
        b.ir()
    assert {d.code for d in e.value.diagnostics} == {"MPL110"}
