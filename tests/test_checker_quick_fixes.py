"""Quick fixes never suggest an invalid value: a whole number written as a fraction (``1e5``,
``70000.0``) is that integer (the original accepts ``capacity = 16.0``), so it is fine in
range and gets the bound it is clamped to outside; a fraction that is not whole
(``1e-400``) gets no replacement. The fixes are the ones ``mplc check --json`` prints and the
language server offers as code actions."""

from __future__ import annotations

import json
from decimal import Decimal
import subprocess
import sys

import pytest

from mpl import schema
from mpl.checker import analyze

INTEGRAL = [k for k, p in schema.PARAMS.items() if p.type in (schema.INT, schema.COUNT, schema.SLOTS_OR_SIZE)]
LITERALS = ["8.0", "1e5", "70000.0", "1e-400", "0.0", "-3.0", "1.5e4", "1e20", "1.00000000000000000001", "2.5"]
VALUE_CODES = {"MPL201", "MPL203", "MPL004"}


def _text(key: str, literal: str) -> str:
    block, name = key.split(".")
    if key == "cache.capacity":
        return f"policy p {{ cache {{ capacity = {literal} }} }}\n"
    if block == "cache":
        return f"policy p {{ cache {{ capacity = 8 {name} = {literal} }} }}\n"
    return f"policy p {{ cache {{ capacity = 8 }} {block} {{ {name} = {literal} }} }}\n"


def _apply(text, fix):
    for e in sorted(fix.edits, key=lambda e: e.span.offset, reverse=True):
        text = text[:e.span.offset] + e.new_text + text[e.span.end_offset:]
    return text


@pytest.mark.parametrize("literal", LITERALS)
@pytest.mark.parametrize("key", INTEGRAL)
def test_every_fix_of_a_value_error_gives_a_valid_value(key, literal):
    text = _text(key, literal)
    diags = [d for d in analyze(text).diagnostics if d.code in VALUE_CODES]
    whole = Decimal(literal) == Decimal(literal).to_integral_value()
    p = schema.PARAMS[key]
    in_range = whole and (p.min is None or Decimal(literal) >= Decimal(p.min)) and (
        p.max is None or Decimal(literal) <= Decimal(p.max))
    # a whole number in range is accepted; anything else is an error
    assert bool(diags) != in_range, (key, literal, diags)
    for d in diags:
        for fix in d.fixes:
            fixed = _apply(text, fix)
            left = [(x.code, x.message) for x in analyze(fixed).diagnostics if x.code in VALUE_CODES]
            assert left == [], (text, fix.title, fixed, left)
            # and the message names the value the fix writes
            assert fix.edits[0].new_text in d.message


def _one(text):
    (d,) = analyze(text).diagnostics
    return d


def test_capacity_1e5_is_clamped_to_the_max_not_written_out():
    d = _one("policy p { cache { capacity = 1e5 } }")
    assert d.code == "MPL203" and "got 1e5" in d.message and d.message.endswith("use 65536")
    assert [(f.title, [e.new_text for e in f.edits]) for f in d.fixes] == [("Clamp to 65536", ["65536"])]


def test_capacity_70000_0():
    d = _one("policy p { cache { capacity = 70000.0 } }")
    assert [e.new_text for f in d.fixes for e in f.edits] == ["65536"]
    assert "write 70000" not in d.message


def test_tiny_fraction_is_not_zero():
    d = _one("policy p { cache { capacity = 1e-400 } }")
    assert d.code == "MPL201" and d.fixes == () and "write 0" not in d.message


def test_in_range_whole_number_is_that_integer():
    for text, key, value in (("policy p { cache { capacity = 1.5e4 } }", "cache.capacity", 15000),
                             ("policy p { cache { capacity = 16. } }", "cache.capacity", 16),
                             ("policy p { cache { capacity = 8 pin = [1.0, 2] } }", "cache.pin", (1, 2)),
                             ("policy p { cache { capacity = 8 } prefetch { strategy = history "
                              "budget = 2.0 } }", "prefetch.budget", 2)):
        a = analyze(text)
        assert a.diagnostics == [], (text, a.diagnostics)
        v = a.ir["p"].values[key]
        assert v == value and type(v) is type(value)


def test_exact_integer_for_a_large_exponent():
    """2.5e8 is the integer 250000000; 1e20 is 100000000000000000000 exactly, above
    decay_interval's range (10^9), clamped to its bound."""
    a = analyze("policy p { cache { capacity = 8 eviction = lfu decay_interval = 2.5e8 } }")
    assert a.diagnostics == [] and a.ir["p"].values["cache.decay_interval"] == 250_000_000
    assert type(a.ir["p"].values["cache.decay_interval"]) is int
    a = analyze("policy p { cache { capacity = 8 eviction = lfu decay_interval = 1e20 } }")
    [d] = a.diagnostics
    assert d.code == "MPL203" and "got 1e20" in d.message
    assert [e.new_text for f in d.fixes for e in f.edits] == ["1000000000"]


def test_cli_json_carries_the_in_range_fix(tmp_path):
    f = tmp_path / "p.moe"
    f.write_text("policy p { cache { capacity = 1e5 } }\n")
    r = subprocess.run([sys.executable, "-m", "mpl", "check", "--json", str(f)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    (d,) = json.loads(r.stdout)
    assert d["code"] == "MPL203"
    assert [e["new_text"] for fx in d["fixes"] for e in fx["edits"]] == ["65536"]
    r = subprocess.run([sys.executable, "-m", "mpl", "check", str(f)], capture_output=True, text=True)
    assert "use 65536" in r.stdout and "write 100000" not in r.stdout
