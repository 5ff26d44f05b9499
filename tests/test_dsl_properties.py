"""Properties of the eDSL over random configurations drawn from the schema table: the text
it prints is always canonical (a fixed point of mplc fmt), always parses, and when the
checker accepts it, the IR is what the builder's values say (numbers survive the round trip
exactly). Also: a user's script gets errors located at its own lines."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

from hypothesis import given
from hypothesis import strategies as st
from property_profiles import prop

from mpl import dsl, schema
from mpl.checker import analyze
from mpl.fmt import format_text
from mpl.ir import Count, Size

SYNTAX = {"MPL001", "MPL002", "MPL003", "MPL004"}


def _bounds(p: schema.Param, lo_default: float, hi_default: float) -> tuple[float, float]:
    lo = lo_default if p.min is None else p.min
    hi = hi_default if p.max is None else p.max
    return lo, hi


def value_strategy(p: schema.Param):
    t = p.type
    if t == schema.ENUM:
        names = [e.name for e in p.enum if not e.replay_only]
        base = st.sampled_from(names)
        if p.fallback:
            base = base | st.builds(dsl.fallback, st.sampled_from(["lfu", "lru", "score"]),
                                    st.sampled_from(["lru", "lfu"]))
        return base
    if t == schema.BOOL:
        return st.booleans()
    if t in (schema.INT, schema.COUNT):
        lo, hi = _bounds(p, 0, 5000)
        ints = st.integers(int(math.ceil(lo)), int(min(hi, 5000)))
        if t == schema.COUNT and "steps" in p.units:
            return ints | st.builds(dsl.steps, st.integers(max(1, int(lo)), 500))
        return ints
    if t == schema.NUMBER:
        lo, hi = _bounds(p, 0, 1000)
        hi = min(hi, 1000)
        # six decimals: still exercises the exponent path (1e-06 is written 0.000001);
        # denormals have their own regression test in tests/test_checker_values.py
        floats = st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 6))
        return floats.filter(lambda x: (x > lo if p.min_open else x >= lo)
                             and (x < hi if p.max_open else x <= hi))
    if t == schema.INT_LIST:
        return st.lists(st.integers(0, 63), max_size=3, unique=True)
    if t == schema.METRIC_LIST:
        return st.lists(st.sampled_from(sorted(schema.METRICS)), min_size=1, max_size=3, unique=True)
    if t == schema.SLOTS_OR_SIZE:
        return st.integers(1, 512) | st.builds(dsl.GiB, st.integers(1, 64))
    raise AssertionError(f"no strategy for {t}")


BLOCKS = [b for b in schema.BLOCKS.values() if not b.rules and b.flat]


@st.composite
def builders(draw):
    b = dsl.policy("random_policy")
    chosen = {}
    for blk in BLOCKS:
        if blk.name != "cache" and not draw(st.booleans()):
            continue
        params = {}
        for p in blk.params:
            if p.required or draw(st.integers(0, 3)) == 0:
                params[p.name] = draw(value_strategy(p))
        b.block(blk.name, **params)
        chosen.update({f"{blk.name}.{k}": v for k, v in params.items()})
    if draw(st.booleans()):
        metric = draw(st.sampled_from(sorted(schema.METRICS)))
        op = draw(st.sampled_from(schema.COMPARISON_OPS))
        thr = draw(st.floats(0, 1, allow_nan=False))
        b.adapt(dsl.Condition(metric, op, thr), for_=draw(st.integers(1, 500)),
                set={"eviction": draw(st.sampled_from(["lru", "lfu", "arc"]))})
    return b, chosen


@prop(25)
@given(builders())
def test_printed_text_is_canonical_parses_and_keeps_every_value(made):
    b, chosen = made
    text = b.to_moe()
    assert format_text(text) == text
    analysis = analyze(text)
    assert not [d for d in analysis.diagnostics if d.code in SYNTAX], text
    pir = analysis.ir.get("random_policy")
    if pir is None:
        return                      # the checker refused a combination: fine, it said why
    assert b.ir() == pir
    for key, value in chosen.items():
        got = pir[key]
        if isinstance(value, dsl.Quantity):
            if isinstance(got, Size):
                assert got.bytes == value.value * schema.UNITS[value.unit].factor
            elif isinstance(got, Count):
                assert got.n == value.value and got.unit == value.unit
            else:                   # a count with only one possible unit lowers to an int
                assert got == value.value
        elif isinstance(value, dsl.Fallback):
            assert got == f"{value.primary}|{value.secondary}" or got == value.primary
        elif isinstance(value, list):
            assert tuple(got) == tuple(value)
        elif isinstance(got, Count):
            assert got.n == value
        elif key == "cache.eviction" and value == "fallback":
            assert got == "lfu|lru"         # the enum name of the segmented lfu | lru
        else:
            assert got == value, (key, got, value)


def test_a_users_script_gets_errors_at_its_own_lines(tmp_path):
    script = tmp_path / "my_policies.py"
    script.write_text(textwrap.dedent("""\
        from mpl import dsl

        @dsl.policy
        def serving(p):
            p.cache(capacity=8, eviction="lfu")
            p.prefetch(strategy="histroy", budget=4)
        """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=str(tmp_path))
    assert out.returncode == 1
    err = out.stderr
    assert "mpl.api.PolicyError" in err or "PolicyError" in err
    assert "MPL202" in err and "did you mean 'history'" in err
    assert f"written by this Python line ({script}:6)" in err
    assert "| strategy = histroy" in err
