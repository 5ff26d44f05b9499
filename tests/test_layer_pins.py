"""Per-layer pins as a user meets them: `pin layers = FIRST..LAST { experts = [...] }` items
in a policy file, `mplc check` / `fmt` / `replay` on it, `mplc trace place` writing them from a
trace, and the runtime pinning those keys (decoder-layer ids mapped to MoE-layer ordinals)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import mpl
from mpl import traceio
from mpl.runtime.core import RuntimeConfigError
from mpl.sim import synth

from cli_helpers import clean, mplc

PINNED = """# hot experts placed from a profile
policy profiled {
    cache {
        capacity = 200
        eviction = lfu
        pin = [0]    # in every layer
        # the first MoE layers
        pin layers = 1..3 {
            experts = [3, 7]
        }
        pin layers = 5 {
            experts = [1]    # one layer alone
        }
    }
}

policy child extends profiled {
    cache {
        capacity = 220
    }
}

policy other extends profiled {
    cache {
        pin layers = 2 {
            experts = [9]
        }
    }
}
"""


@pytest.fixture(scope="module")
def ds_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("pins")
    path = d / "ds.mpltrace"
    traceio.save(synth.synthesize("deepseek-v2-lite", steps=24, seed=5), str(path))
    return path


def test_a_file_loads_into_per_layer_pins(tmp_path):
    f = tmp_path / "p.moe"
    f.write_text(PINNED)
    assert mpl.check(str(f)) == []
    ir = mpl.load(str(f), policy="profiled").ir
    assert [(p.layers.first, p.layers.last, p.experts) for p in ir.layer_pins] == [(1, 3, (3, 7)), (5, 5, (1,))]
    assert ir["cache.pin"] == (0,)
    # extends: a child that writes no pin item keeps its parent's, one that writes some replaces them
    assert mpl.load(str(f), policy="child").ir.layer_pins == ir.layer_pins
    other = mpl.load(str(f), policy="other").ir.layer_pins
    assert [(p.layers.first, p.layers.last, p.experts) for p in other] == [(2, 2, (9,))]
    # a policy without pin items: its IR (and fingerprint) is what it always was
    plain = mpl.loads("policy q { cache { capacity = 8 } }").ir
    assert plain.layer_pins == () and "layer_pins" not in plain.to_json()
    assert "layer_pins" in ir.to_json()


@pytest.mark.parametrize("text, model, code, where, words", [
    ("policy p { cache { capacity = 64\n pin layers = 0..7 { experts = [3] }\n pin layers = 7..9 { experts = [4] } } }",
     None, "MPL330", "3:6", "pin layers = 7..9 overlaps pin layers = 0..7 (layer 7 in both)"),
    ("policy p { cache { capacity = 64\n pin layers = 6..9 { experts = [4] }\n pin layers = 0..7 { experts = [3] } } }",
     None, "MPL330", "3:6", "pin layers = 0..7 overlaps pin layers = 6..9 (layers 6..7 in both)"),
    ("policy p { cache { capacity = 160\n pin layers = 0..3 { experts = [3] } } }",
     "deepseek-v2-lite", "MPL521", "2:6", "layer 0 is not one of deepseek-v2-lite's MoE layers (it is a dense layer)"),
    ("policy p { cache { capacity = 160\n pin layers = 20..30 { experts = [3] } } }",
     "deepseek-v2-lite", "MPL521", "2:6", "layer 27 is not one of deepseek-v2-lite's MoE layers"),
    ("policy p { cache { capacity = 160\n pin layers = 1 { experts = [3, 64] } } }",
     "deepseek-v2-lite", "MPL501", "2:33", "expert 64 does not exist"),
    ("policy p { cache { capacity = 4\n pin layers = 1..3 { experts = [3, 7] } } }",
     None, "MPL301", "2:6", "pin 6 experts over their layers, more than the shared cache's capacity 4"),
    ("policy p { cache { capacity = 8\n pin = [0, 1]\n pin layers = 1 { experts = [3, 7] } }\n"
     " per_layer { min_capacity = 2 } }",
     None, "MPL301", "3:6", "4 pinned experts in each of layers 1..1 do not fit in per_layer.min_capacity of 2"),
    ("policy p { cache { capacity = 40\n pin layers = 1..26 { experts = [3, 7] } } }",
     "deepseek-v2-lite", "MPL506", "2:6", "need 52 slots of the shared cache of 40"),
    ("policy p { cache { capacity = 40\n pin layer = 1 { experts = [3] } } }",
     None, "MPL102", "2:6", "did you mean 'layers'"),
    ("policy p { cache { capacity = 40\n pin layers = 1 { } } }",
     None, "MPL105", "2:6", "this pin item has no 'experts'"),
    ("policy p { cache { capacity = 40\n pin layers = 3..1 { experts = [3] } } }",
     None, "MPL211", "2:15", "runs backwards"),
    ("policy p { cache { capacity = 40\n pin hot { experts = [3] } } }",
     None, "MPL115", "2:6", "a pin is written 'pin layers = FIRST..LAST { experts = [ID, ...] }'"),
    ("policy p { cache { capacity = 40 }\n prefetch { pin layers = 1 { experts = [3] } } }",
     None, "MPL115", "2:13", "'pin' items belong in 'cache', not in 'prefetch'"),
    ("policy p { cache { capacity = 40\n pin layers = 1.. { experts = [3] } } }",
     None, "MPL002", "2:19", "expected the last number of the range after '1..'"),
])
def test_mplc_check_locates_every_pin_error(tmp_path, text, model, code, where, words):
    f = tmp_path / "p.moe"
    f.write_text(text + "\n")
    args = ["check", f.name] + (["--model", model] if model else [])
    r = mplc(*args, cwd=tmp_path)
    clean(r)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"p.moe:{where}: error[{code}]" in out, out
    assert words in out, out
    r = mplc(*args, "--json", cwd=tmp_path)
    diags = json.loads(r.stdout)
    assert sum(d["code"] == code for d in diags) == 1, diags
    line, col = map(int, where.split(":"))
    assert any(d["code"] == code and (d["span"]["line"], d["span"]["column"]) == (line, col) for d in diags)


def test_mplc_fmt_keeps_comments_and_meaning(tmp_path):
    messy = ("policy profiled { cache {\n"
             "  # the first MoE layers\n"
             "  pin layers = 1 .. 3 { experts = [3,7] }   # from the profile\n"
             "  capacity = 200 ; pin = [0]\n"
             "  pin layers = 5 {\n"
             "      # one layer alone\n"
             "      experts = [1]\n"
             "  }\n"
             "} }\n")
    f = tmp_path / "p.moe"
    f.write_text(messy)
    r = mplc("fmt", "-", cwd=tmp_path, stdin=messy)
    clean(r)
    assert r.returncode == 0
    assert r.stdout == ("policy profiled {\n"
                        "    cache {\n"
                        "        capacity = 200\n"
                        "        pin = [0]\n"
                        "        # the first MoE layers\n"
                        "        pin layers = 1..3 {\n"
                        "            experts = [3, 7]\n"
                        "        }  # from the profile\n"
                        "        pin layers = 5 {\n"
                        "            # one layer alone\n"
                        "            experts = [1]\n"
                        "        }\n"
                        "    }\n"
                        "}\n")
    assert mpl.loads(r.stdout).ir == mpl.loads(messy).ir
    assert mplc("fmt", f.name, cwd=tmp_path).returncode == 0
    assert mplc("fmt", "--check", f.name, cwd=tmp_path).returncode == 0
    assert f.read_text() == r.stdout


def _replay(tmp_path, policy, trace, pure: bool):
    env = {"MPL_PURE": "1"} if pure else {"MPL_PURE": ""}
    r = mplc("replay", policy, "-t", trace, "--json", "--no-progress", cwd=tmp_path, env=env)
    clean(r)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_mplc_trace_place_then_check_fmt_and_replay(tmp_path, ds_trace):
    r = mplc("trace", "place", ds_trace, "--slots", "3", "--indent", "8", cwd=tmp_path)
    clean(r)
    assert r.returncode == 0, r.stderr
    placed = r.stdout
    assert placed.startswith("        # the 3 most accessed experts of each MoE layer of deepseek-v2-lite")
    # the placement is each layer's top 3 by accesses (one per distinct expert of a dispatch)
    trace = traceio.load(str(ds_trace))
    counts = Counter()
    for d in trace.dispatches:
        for e in {e for row in d.experts for e in row}:
            counts[(trace.header.moe_layers[d.layer], e)] += 1
    want = {}
    for layer in trace.header.moe_layers:
        ranked = sorted((e for (x, e) in counts if x == layer), key=lambda e: (-counts[(layer, e)], e))
        want[layer] = tuple(sorted(ranked[:3]))
    j = json.loads(mplc("trace", "place", ds_trace, "--slots", "3", "--json", cwd=tmp_path).stdout)
    assert {x["layer"]: tuple(sorted(x["experts"])) for x in j["layers"]} == want
    assert j["moe"].strip() == placed.split("\n", 1)[1].strip().replace("\n        ", "\n")
    # pasted into a cache block: a policy that checks clean for the model and is canonical
    text = "policy profiled {\n    cache {\n        capacity = 120\n" + placed + "    }\n}\n"
    (tmp_path / "p.moe").write_text(text)
    r = mplc("check", "p.moe", "--model", "deepseek-v2-lite", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mplc("fmt", "--check", "p.moe", cwd=tmp_path).returncode == 0
    ir = mpl.load(str(tmp_path / "p.moe")).ir
    got = {x: p.experts for p in ir.layer_pins for x in range(p.layers.first, p.layers.last + 1)}
    assert got == want
    # replay: both backends give the same statistics; every pinned key hits after its first load
    a = _replay(tmp_path, "p.moe", ds_trace, pure=True)
    b = _replay(tmp_path, "p.moe", ds_trace, pure=False)
    assert a["runtime"]["backend"] == "pure"
    assert a["stats"] == b["stats"]
    pinned = {(trace.header.moe_layers.index(x), e) for x, ids in want.items() for e in ids}
    rt = mpl.load(str(tmp_path / "p.moe")).runtime(
        trace.header.num_moe_layers, trace.header.num_experts, trace.header.top_k,
        layer_ids=trace.header.moe_layers)
    seen, evicted = set(), set()
    for d in trace.dispatches:
        p = rt.dispatch(d.layer, d.experts[0])
        for e, hit in zip(p.experts, p.hit):
            if (d.layer, e) in pinned and (d.layer, e) in seen:
                assert hit
            seen.add((d.layer, e))
        evicted |= {tuple(k) for k, _ in p.evicted}
    assert evicted and not evicted & pinned
    # Belady (the replay's optimum) ignores pins: a policy decision, not the cache's structure
    plain = "policy profiled {\n    cache {\n        capacity = 120\n    }\n}\n"
    (tmp_path / "plain.moe").write_text(plain)
    c = _replay(tmp_path, "plain.moe", ds_trace, pure=False)
    assert c["belady"] == b["belady"]


def test_mplc_trace_place_refuses_bad_input(tmp_path, ds_trace):
    for args, rc, words in ((["--slots", "0"], 2, "--slots must be at least 1"),
                            (["--slots", "65"], 2, "is more than the 64 experts per layer"),
                            (["--slots", "2", "--indent", "-1"], 2, "--indent must be 0..64")):
        r = mplc("trace", "place", ds_trace, *args, cwd=tmp_path)
        clean(r)
        assert r.returncode == rc and words in r.stderr, r.stderr
    r = mplc("trace", "place", "missing.mpltrace", "--slots", "2", cwd=tmp_path)
    clean(r)
    assert r.returncode == 1 and "missing.mpltrace" in r.stderr
    r = mplc("trace", "place", ds_trace, cwd=tmp_path)
    assert r.returncode == 2 and "--slots" in r.stderr


@pytest.mark.parametrize("backend", ["pure", "compiled"])
def test_layer_ids_map_pins_to_moe_layers(backend):
    from mpl.runtime import compiled
    if backend == "compiled" and not compiled.available():
        pytest.skip(compiled.WHY)
    pol = mpl.loads("policy p { cache { capacity = 4\n pin layers = 2 { experts = [5] } } }")
    # the model's MoE layers are decoder layers 1, 2, 3: decoder layer 2 is ordinal 1
    rt = pol.runtime(3, 8, 2, layer_ids=(1, 2, 3), backend=backend)
    for i in range(60):
        rt.dispatch(1, [5, i % 7 if i % 7 != 5 else 6])
        p = rt.dispatch(0, [5, (i + 1) % 8])
    assert rt.dispatch(1, [5]).hit == [True]
    with pytest.raises(RuntimeConfigError, match=r"names layer 2, which is not a MoE layer"):
        pol.runtime(3, 8, 2, layer_ids=(0, 1, 3), backend=backend)
    with pytest.raises(RuntimeConfigError, match=r"names layer 2, which is not a MoE layer.*0\.\.1"):
        pol.runtime(2, 8, 2, backend=backend)
    with pytest.raises(RuntimeConfigError, match="lists expert 5, but the model has 4 experts"):
        pol.runtime(3, 4, 2, backend=backend)
    assert p.layer == 0
