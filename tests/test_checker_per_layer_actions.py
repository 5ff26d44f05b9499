"""MPL308: an adapt action that sets a per_layer parameter in a policy without a per_layer
block has no effect (one shared cache), like `rebalance` there: a warning at the action (the
original accepts it), whose fix removes it; the action is left out of the IR."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mpl
from mpl import schema
from mpl.checker import analyze


def _policy(actions: str, blocks: str = "") -> str:
    return ("policy p {\n    cache { capacity = 8 }\n" + blocks +
            "    adapt {\n" + "".join(f"        when hit_rate < 0.5 {{ {a} }}\n" for a in actions.split("\n")) +
            "    }\n}\n")


PER_LAYER_TARGETS = sorted(t for t, key in schema.ADAPT_TARGETS.items() if schema.PARAMS[key].block == "per_layer")


def test_there_are_per_layer_targets():
    assert "per_layer.allocation" in PER_LAYER_TARGETS and "allocation" in PER_LAYER_TARGETS


@pytest.mark.parametrize("target", PER_LAYER_TARGETS)
def test_per_layer_action_without_per_layer_is_a_warning(target):
    value = "entropy" if target.endswith("allocation") else "4"
    action = f"{target} = {value}"
    text = _policy(action)
    a = analyze(text)
    assert [(d.code, d.severity.value) for d in a.diagnostics] == [("MPL308", "warning")], \
        [(d.code, d.message) for d in a.diagnostics]
    d = a.diagnostics[0]
    start = text.index(action)
    assert (d.span.offset, d.span.end_offset) == (start, start + len(action))
    assert d.message.startswith(f"'{action}' sets a per-layer parameter") and "per_layer { ... }" in d.message
    assert "has no effect" in d.message and d.fixes
    assert a.ir["p"].adapt[0].actions == ()      # nothing to apply
    # with a per_layer block the same action is fine and the runtime applies it
    fixed = _policy(action, "    per_layer { allocation = uniform }\n")
    assert analyze(fixed).diagnostics == []


def test_rebalance_and_set_both_reported_and_mplc_exits_0(tmp_path):
    text = _policy("rebalance entropy\nper_layer.allocation = frequency")
    p = tmp_path / "p.moe"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "mpl", "check", str(p)], capture_output=True, text=True)
    assert r.returncode == 0
    assert f"{p}:4:31: warning[MPL308]: 'rebalance entropy' has no effect" in r.stdout
    assert f"{p}:5:31: warning[MPL308]: 'per_layer.allocation = frequency' sets a per-layer parameter" in r.stdout
    rt = mpl.loads(text).runtime(num_layers=2, num_experts=8, top_k=1)
    rt.dispatch(0, [0])
    assert rt.stats()["adapt_log"] == []


def test_inheritance():
    parent_with = "policy base {\n    cache { capacity = 8 }\n    per_layer { allocation = uniform }\n}\n"
    child = "policy c extends base {\n    adapt { when hit_rate < 0.5 { allocation = entropy } }\n}\n"
    assert analyze(parent_with + child).diagnostics == []       # the block is inherited
    parent_without = "policy base { cache { capacity = 8 } }\n"
    a = analyze(parent_without + child)
    assert [(d.code, d.span.line) for d in a.diagnostics] == [("MPL308", 3)]
    # a parent's rule is reported once, at the parent, not again in every child
    parent_rule = "policy base {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 { allocation = entropy } }\n}\n"
    a = analyze(parent_rule + "policy c extends base { }\n")
    assert [(d.code, d.span.line) for d in a.diagnostics] == [("MPL308", 3)]


def test_a_bad_value_is_reported_once():
    a = analyze(_policy("per_layer.allocation = entropyy"))
    assert [d.code for d in a.diagnostics] == ["MPL202"]


def test_other_actions_without_their_block_are_not_affected():
    a = analyze(_policy("prefetch.budget = 2\neviction = lfu\nschedule.mode = gpu_only"))
    assert [d for d in a.diagnostics if d.code == "MPL308"] == []
