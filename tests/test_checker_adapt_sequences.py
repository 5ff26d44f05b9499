"""MPL306 over firing sequences: values fired by adapt rules persist, so any sequence of
rules can be in force at once. A combination only three rules make is reported, and the
checker reports an MPL306 exactly when some firing sequence reaches an invalid policy
(brute force over every sequence of up to four firings, on random policies)."""

from __future__ import annotations

import itertools
import random

import pytest

from mpl.checker import analyze

TRIPLE = """\
policy p {
    cache { capacity = 8 }
    prefetch { strategy = none budget = 4 }
    adapt {
        when hit_rate < 0.3 { strategy = history }
        when hit_rate < 0.5 { budget = 6  capacity = 16 }
        when hit_rate > 0.9 { capacity = CAP }
    }
}
"""


def codes(text):
    return [d for d in analyze(text, "/t/p.moe").diagnostics if d.code == "MPL306"]


def test_a_combination_of_three_rules_is_reported_on_the_last_one():
    found = codes(TRIPLE.replace("CAP", "4"))
    assert len(found) == 1
    d = found[0]
    assert (d.span.line, d.span.column) == (7, 42)
    assert "after the rules that set 'strategy = history' (line 5) and 'budget = 6' (line 6)" in d.message
    assert "prefetch budget 6 exceeds the cache capacity 4" in d.message
    assert [r.span.line for r in d.related] == [5, 6]


def test_no_report_when_every_combination_is_valid():
    assert codes(TRIPLE.replace("CAP", "8")) == []


# every action draws from these; MPL302 spans budget, strategy and capacity, MPL304 two keys
CHOICES = {"capacity": [2, 4, 8, 16], "budget": [1, 3, 6], "strategy": ["none", "history"],
           "memory_threshold": [0.6, 0.9], "memory_headroom": [0.5, 0.8]}
BLOCK = {"capacity": "cache", "budget": "prefetch", "strategy": "prefetch",
         "memory_threshold": "cache", "memory_headroom": "cache"}


def random_policy(r: random.Random):
    base = {"capacity": 8, "budget": 2, "strategy": "none", "memory_threshold": 0.9,
            "memory_headroom": 0.5}
    rules = []
    for _ in range(r.randint(2, 4)):
        keys = r.sample(sorted(CHOICES), r.choice([1, 1, 2]))
        rules.append({k: r.choice(CHOICES[k]) for k in keys})
    return base, rules


def render(base, rules):
    cache = " ".join(f"{k} = {v}" for k, v in base.items() if BLOCK[k] == "cache")
    pre = " ".join(f"{k} = {v}" for k, v in base.items() if BLOCK[k] == "prefetch")
    body = "\n".join(f"        when hit_rate < 0.{i + 1} {{ "
                     + "  ".join(f"{k} = {v}" for k, v in rule.items()) + " }"
                     for i, rule in enumerate(rules))
    return (f"policy p {{\n    cache {{ {cache} }}\n    prefetch {{ {pre} }}\n"
            f"    adapt {{\n{body}\n    }}\n}}\n")


def invalid(vals) -> bool:
    mpl302 = vals["strategy"] != "none" and vals["budget"] > vals["capacity"]
    mpl304 = vals["memory_headroom"] > vals["memory_threshold"]
    return mpl302 or mpl304


@pytest.mark.parametrize("seed", range(200))
def test_mpl306_iff_some_firing_sequence_is_invalid(seed):
    r = random.Random(seed)
    base, rules = random_policy(r)
    if invalid(base):
        base["memory_headroom"] = 0.5
        base["budget"] = 2
    reachable = False
    for n in range(1, 5):
        for seq in itertools.product(range(len(rules)), repeat=n):
            vals = dict(base)
            for i in seq:
                vals.update(rules[i])
            reachable |= invalid(vals)
    text = render(base, rules)
    got = codes(text)
    assert bool(got) == reachable, (text, [d.message for d in got])
