"""Memory tiers (SPEC section 12) through the checker: the original's examples check clean and
lower to the IR docs/memory-tiers.md describes; `extends`, `import` and bands over a
hierarchy apply tiers by name; generated variants check clean and malformed ones get located
errors; tiered policies load and compile (a dtype_ladder too)."""

import json
import os

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from property_profiles import prop

import mpl
from mpl import ir
from mpl.checker import analyze, check_text
from mpl.shapes import preset
from cli_helpers import mplc
from tier_helpers import README_EXAMPLE, SPEC_EXAMPLE, malformed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus", "tiers.moe")
DS = preset("deepseek-v2-lite")


def codes(text, **kw):
    return [d.code for d in check_text(text, **kw)]


# ------------------------------------------------------------------ the original's examples
@pytest.mark.parametrize("text, model", [(README_EXAMPLE, None), (SPEC_EXAMPLE, None),
                                         (README_EXAMPLE, preset("mixtral-8x7b")), (README_EXAMPLE, DS)])
def test_the_originals_examples_check_clean(text, model):
    # the only diagnostic is the hint SPEC section 12 asks for, on the int4 tier
    assert codes(text, model=model) == ["MPL420"]


def test_the_specs_example_on_a_small_model_gets_its_warnings():
    # written for a model larger than host memory: on DeepSeek-V2-Lite (16 GB of experts) a
    # band's own 24GiB host tier holds every expert of its layers, and a band's top tier of 4
    # is below top-k 6; warnings, not errors
    got = check_text(SPEC_EXAMPLE, model=DS)
    assert [d.code for d in got] == ["MPL420", "MPL517", "MPL517", "MPL520"]
    assert all(d.severity.value != "error" for d in got)


def test_the_issues_example_lowers_to_the_documented_ir():
    h = analyze(README_EXAMPLE).ir["tiers"].hierarchy
    assert [(t.name, str(t.location), t.dtype, t.capacity, t.eviction, t.implicit) for t in h.tiers] == [
        ("T0_gpu_hot", "gpu", "fp16", 16, "lru", False),
        ("T1_gpu_warm", "gpu", "int4", 32, "lru", False),
        # the written tiers end on a GPU: host memory holding every expert is below them
        (ir.HOST_TIER, "cpu", None, None, None, True),
    ]
    assert h.transitions == (
        ir.Transition("demote", "T0_gpu_hot", "T1_gpu_warm", "in_place_requant", None),
        ir.Transition("promote", "T1_gpu_warm", "T0_gpu_hot", "copy", None),
        ir.Transition("demote", "T1_gpu_warm", ir.HOST_TIER, "copy", None),
        ir.Transition("promote", ir.HOST_TIER, "T1_gpu_warm", "copy", None),
    )
    assert (h.eviction, h.granularity_split) == ("lru", 1)


def test_the_specs_example_lowers_bands_over_the_hierarchy():
    p = analyze(SPEC_EXAMPLE).ir["big"]
    assert p.tiered and p.blocks == {"hierarchy", "per_layer_hierarchy"}
    assert p["cache.capacity"] is None
    h = p.hierarchy
    assert [t.name for t in h.tiers] == ["hot", "warm", "ram", "ssd"]
    ram, ssd = h.tiers[2], h.tiers[3]
    assert ram.capacity == ir.Size(24 * 2 ** 30) and ram.eviction == "lru"
    # the disk tier is the last: it holds every expert, nothing is evicted from it
    assert (ssd.capacity, ssd.eviction, ssd.path, str(ssd.location)) == (None, None, "/models/x", "disk")
    assert ir.Transition("promote", "warm", "hot", "copy", 0.7) in h.transitions
    b0, b1 = p.bands
    assert b0.layers == ir.Layers(0, 7) and b1.layers == ir.Layers(8, 23)
    # a band starts from the hierarchy's tiers and overrides them by name
    assert [t.name for t in b0.hierarchy.tiers] == ["hot", "warm", "ram", "ssd"]
    assert b0.hierarchy.tiers[0].capacity == 4 and b0.hierarchy.tiers[0].dtype == "fp16"
    assert b1.hierarchy.tiers[0].capacity == 8 and b1.hierarchy.eviction == "lfu"
    assert b1.hierarchy.tiers[1].eviction == "lfu"        # a tier without its own: the band's
    assert b0.hierarchy.transitions == h.transitions
    assert p.hierarchy_for(3) is b0.hierarchy and p.hierarchy_for(25) is h
    # the JSON form carries the tiers (and only tiered policies carry these keys)
    j = json.loads(p.to_json())
    assert j["hierarchy"]["tiers"][2]["capacity"] == {"size_bytes": 24 * 2 ** 30}
    assert j["bands"][1]["layers"] == {"first": 8, "last": 23}
    assert "hierarchy" not in json.loads(analyze("policy c { cache { capacity = 8 } }").ir["c"].to_json())


def test_every_parameter_lowers():
    a = analyze(open(CORPUS, encoding="utf-8").read(), CORPUS)
    h = a.ir["every_parameter"].hierarchy
    pinned, hot, ladder, ram, ssd = h.tiers
    assert pinned.residency == "always" and pinned.eviction is None and pinned.capacity == ir.Size(2 * 2 ** 30)
    assert pinned.location == ir.Location("gpu", 0)
    assert hot.eviction == ir.WeightedSum((("lru", 0.7), ("lfu", 0.3)))
    assert (ladder.dtype, ladder.dtype_ladder) == ("bf16", ("bf16", "int8", "int4"))
    assert ladder.location == ir.Location("gpu", 1) and ram.eviction == "lfu"
    assert h.eviction == ir.WeightedSum((("lru", 0.5), ("lfu", 0.5))) and h.granularity_split == 4
    assert ir.Transition("promote", "ram", "ladder", "copy", 0.05) in h.transitions
    banded = a.ir["banded"]
    assert banded.hierarchy is None and [b.layers for b in banded.bands] == [ir.Layers(0, 11), ir.Layers(12, 31)]
    assert banded.bands[1].hierarchy.granularity_split == 2


# ------------------------------------------------------------------ extends and import
def test_extends_overrides_tiers_by_name_and_inserts_after_the_one_written_before():
    a = analyze(open(CORPUS, encoding="utf-8").read(), CORPUS)
    h = a.ir["bigger"].hierarchy
    assert [t.name for t in h.tiers] == ["pinned", "hot", "warm", "ram", "ssd"]
    hot = h.tier("hot")
    assert (hot.capacity, hot.dtype, str(hot.location)) == (24, "fp16", "gpu")     # merged
    assert ir.Transition("promote", "warm", "hot", "copy", 0.5) in h.transitions   # overridden
    assert ir.Transition("demote", "hot", "warm", "in_place_requant", None) in h.transitions   # kept
    # the parent's bands come along, over the child's hierarchy
    b0 = a.ir["bigger"].bands[0].hierarchy
    assert [t.name for t in b0.tiers] == ["pinned", "hot", "warm", "ram", "ssd"] and b0.tier("hot").capacity == 4


def test_extends_inserting_a_tier_can_break_the_parents_transitions():
    text = SPEC_EXAMPLE + """
policy child extends big {
    hierarchy {
        tier hot { capacity = 24 }
        tier mid { location = gpu  capacity = 32 }
    }
}
"""
    diags = [d for d in check_text(text) if d.code != "MPL420"]
    assert [d.code for d in diags] == ["MPL320", "MPL320"]
    d = diags[0]
    # said in the child (its hierarchy block), pointing at the parent's transition
    assert d.span.line == text.count("\n", 0, text.index("hierarchy {\n        tier hot { capacity")) + 1
    assert "skips tier 'mid'" in d.message and "inherited from 'big'" in d.related[0].message
    assert d.related[0].span.line == 7


def test_tiers_come_through_imports(tmp_path):
    (tmp_path / "base.moe").write_text(SPEC_EXAMPLE)
    (tmp_path / "main.moe").write_text('import "base.moe"\n\npolicy tuned extends big {\n'
                                       '    hierarchy { tier ram { capacity = 48GiB } }\n}\n')
    a = analyze((tmp_path / "main.moe").read_text(), str(tmp_path / "main.moe"))
    assert [d.code for d in a.diagnostics] == ["MPL420"] and a.diagnostics[0].file.endswith("base.moe")
    assert a.ir["tuned"].hierarchy.tier("ram").capacity == ir.Size(48 * 2 ** 30)
    assert a.ir["tuned"].bands[0].hierarchy.tier("ram").capacity == ir.Size(48 * 2 ** 30)


def test_a_child_band_with_the_same_layers_overrides_the_parents():
    text = SPEC_EXAMPLE + """
policy child extends big {
    per_layer_hierarchy {
        band layers = 0..7 { tier hot { capacity = 6 } }
        band layers = 24..26 { tier hot { location = gpu  capacity = 2 } }
    }
}
"""
    a = analyze(text)
    assert [d.code for d in a.diagnostics] == ["MPL420"]
    bands = a.ir["child"].bands
    assert [b.layers for b in bands] == [ir.Layers(0, 7), ir.Layers(8, 23), ir.Layers(24, 26)]
    assert [b.hierarchy.tier("hot").capacity for b in bands] == [6, 8, 2]


# ------------------------------------------------------------------ the rules, beyond the examples
@pytest.mark.parametrize("text, code", [
    ("policy p { cache { capacity = 8 } per_layer_hierarchy { band layers = 0..3 { tier h { location = gpu  capacity = 2 } } } }", "MPL114"),
    ("policy p { per_layer { } hierarchy { tier h { location = gpu  capacity = 2 } } }", "MPL114"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  tier x {} } } }", "MPL115"),
    ("policy p { cache { capacity = 8  tier x { location = gpu } } }", "MPL115"),
    ("policy p { hierarchy { band layers = 0..1 { } } }", "MPL115"),
    ("policy p { hierarchy { tier h(a -> b) { } } }", "MPL115"),
    ("policy p { per_layer_hierarchy { } }", "MPL118"),
    ("policy p { hierarchy { tier h { capacity = 2 } } }", "MPL120"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } tier r { location = cpu } tier s { location = disk } } }", "MPL120"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  eviction = weighted_sum(lru = 1) } } }", "MPL210"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  eviction = weighted_sum(lru = 1, lru = 1) } } }", "MPL210"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } eviction = weighted_sumx(lru = 1, lfu = 1) } }", "MPL210"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  dtype_ladder = [fp16, bf16] } } }", "MPL213"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } tier r { location = cpu } on promote(h -> r) {} } }", "MPL320"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } on promote(h -> h) {} } }", "MPL320"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } tier w { location = gpu  dtype = int4  capacity = 4 } on promote(w -> h) { mechanism = in_place_requant } } }", "MPL323"),
    ("policy p { hierarchy { tier h { location = gpu:0  capacity = 2 } tier w { location = gpu:1  dtype = int4  capacity = 4 } on demote(h -> w) { mechanism = in_place_requant } } }", "MPL323"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  path = \"x\" } } }", "MPL421"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } tier r { location = cpu  capacity = 9GiB } tier s { location = disk  capacity = 4 } } }", "MPL421"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  residency = always  eviction = lfu } } }", "MPL421"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } tier r { location = cpu } on demote(h -> r) { trigger_threshold = 0.5 } } }", "MPL421"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } } adapt { when hit_rate < 0.5 { ttl = 4 } } }", "MPL422"),
    ("policy p { hierarchy { tier h { location = cpu:1 } } }", "MPL202"),
    ("policy p { hierarchy { tier h { location = gpu:256  capacity = 2 } } }", "MPL203"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  granularity_split = 2 } } }", "MPL102"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2  capacity = 3 } } }", "MPL104"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 : 4 when hit_rate < 0.5 } } }", "MPL206"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } eviction = lru | lfu } }", "MPL208"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 0..4 } } }", "MPL201"),
    ("policy p { per_layer_hierarchy { band layers = 1.5 { tier h { location = gpu  capacity = 2 } } } }", "MPL201"),
    ("policy p { per_layer_hierarchy { band layer = 0..3 { tier h { location = gpu  capacity = 2 } } } }", "MPL102"),
    ("policy p { per_layer_hierarchy { band layers = 0..3 { tier h { location = gpu  capacity = 2 } } band layers = 0..3 {} } }", "MPL116"),
    ("policy p { hierarchy { tier h { location = gpu  capacity = 2 } when hit_rate < 0.5 { eviction = lfu } } }", "MPL113"),
])
def test_each_rule_finds_its_case(text, code):
    got = codes(text)
    assert code in got, got


def test_capacity_factor():
    a = analyze("policy p {\n    cache { capacity_factor = 0.25 }\n}\n")
    assert a.diagnostics == [] and a.ir["p"]["cache.capacity_factor"] == 0.25
    assert a.ir["p"]["cache.capacity"] is None
    # with a model, the slots are known: the model-aware rules see them (1664 x 0.002 -> 4 < top-k 6)
    assert codes("policy p { cache { capacity_factor = 0.002 } }", model=DS) == ["MPL502"]
    assert codes("policy p { cache { capacity_factor = 1 } }", model=DS) == ["MPL503"]
    assert codes("policy p { cache { capacity_factor = 1.5 } }") == ["MPL203"]
    assert codes("policy p { cache { eviction = lfu } }") == ["MPL105"]
    assert "capacity_factor = ..." in check_text("policy p { cache { eviction = lfu } }")[0].message


def test_model_aware_band_coverage_and_the_hierarchys_layers():
    text = "policy p { per_layer_hierarchy { band layers = 1..20 { tier h { location = gpu  capacity = 8 } } } }"
    [d] = check_text(text, model=DS)
    assert d.code == "MPL515" and "MoE layers 21..26 of deepseek-v2-lite are in no band" in d.message
    # with a hierarchy the layers outside every band use its tiers
    text = ("policy p { hierarchy { tier h { location = gpu  capacity = 8 } }\n"
            " per_layer_hierarchy { band layers = 1..20 { tier h { capacity = 12 } } } }")
    assert check_text(text, model=DS) == []


def test_a_model_with_fp32_weights_makes_16_bit_tiers_approximate():
    fp32 = DS.__class__(**{**DS.__dict__, "bytes_per_param": 4})
    text = "policy p { hierarchy { tier h { location = gpu  dtype = bf16  capacity = 8 } } }"
    assert codes(text) == [] and codes(text, model=fp32) == ["MPL420"]


# ------------------------------------------------------------------ generated variants
_LOC = st.sampled_from(["gpu", "gpu:0", "gpu:1"])
_DTYPE = st.sampled_from([None, "fp16", "bf16", "fp32"])


@st.composite
def hierarchies(draw):
    """A valid hierarchy: gpu tiers, then maybe a host tier, then maybe a disk tier (with a
    host tier above it), transitions between adjacent tiers, any eviction."""
    n_gpu = draw(st.integers(1, 3))
    tiers = []
    for i in range(n_gpu):
        params = [f"location = {draw(_LOC)}", f"capacity = {draw(st.sampled_from(['8', '16', '2GiB', '64']))}"]
        d = draw(_DTYPE)
        if d:
            params.append(f"dtype = {d}")
        if draw(st.booleans()):
            params.append(f"eviction = {draw(st.sampled_from(['lru', 'lfu', 'arc', 'weighted_sum(lru = 0.5, score = 0.5)']))}")
        tiers.append((f"g{i}", "gpu", params))
    disk = draw(st.booleans())
    if disk or draw(st.booleans()):
        tiers.append(("ram", "cpu", ["location = cpu"] + (["capacity = 32GiB"] if disk else [])))
    if disk:
        tiers.append(("ssd", "disk", ["location = disk", 'path = "/models/e"']))
    lines = [f"        tier {name} {{ {'  '.join(params)} }}" for name, _, params in tiers]
    names = [t[0] for t in tiers]
    for a, b in zip(names, names[1:]):
        if draw(st.booleans()):
            lines.append(f"        on promote({b} -> {a}) {{ trigger_threshold = {draw(st.sampled_from(['0', '0.1', '1']))} }}")
        if draw(st.booleans()):
            lines.append(f"        on demote({a} -> {b}) {{ mechanism = copy }}")
    if draw(st.booleans()):
        lines.append(f"        granularity_split = {draw(st.integers(1, 64))}")
    if draw(st.booleans()):
        lines.append(f"        eviction = {draw(st.sampled_from(['lfu', 'weighted_sum(lru = 0.3, lfu = 0.7)']))}")
    return "policy gen {\n    hierarchy {\n" + "\n".join(lines) + "\n    }\n}\n", names


@st.composite
def banded(draw):
    """The same tiers per band of layers: bands covering 0..LAST without a gap, or over a
    hierarchy (then a band may override a tier's capacity and the bands may leave gaps)."""
    text, names = draw(hierarchies())
    body = text[text.index("hierarchy {\n") + len("hierarchy {\n"):text.rindex("    }\n}")]
    over = draw(st.booleans())
    cuts = sorted(draw(st.sets(st.integers(1, 47), max_size=4)))
    bounds = list(zip([0, *cuts], [c - 1 for c in cuts] + [47]))
    bands = []
    for k, (first, last) in enumerate(bounds):
        if over and (bands or k + 1 < len(bounds)) and draw(st.booleans()):
            continue                     # layers left to the hierarchy (at least one band)
        head = f"        band layers = {first}..{last} {{\n"
        items = (f"            tier {names[0]} {{ capacity = {draw(st.integers(8, 32))} }}\n"
                 if over else "".join("    " + line + "\n" for line in body.splitlines()))
        bands.append(head + items + "        }\n")
    out = "policy gen {\n"
    if over:
        out += "    hierarchy {\n" + body + "    }\n"
    out += "    per_layer_hierarchy {\n" + "".join(bands) + "    }\n}\n"
    return out, names


def _clean_and_lowered(text, names):
    from mpl.fmt import format_text
    a = analyze(text, model=preset("qwen3-30b-a3b"))
    assert [d.code for d in a.diagnostics if d.code != "MPL517"] == [], (
        text, [(d.code, d.message) for d in a.diagnostics])
    p = a.ir["gen"]
    for h in [p.hierarchy, *(b.hierarchy for b in p.bands)]:
        if h is None:
            continue
        assert [t.name for t in h.tiers if not t.implicit] == names
        assert len(h.transitions) == 2 * (len(h.tiers) - 1)
    formatted = format_text(text)
    assert format_text(formatted) == formatted and analyze(formatted, model=preset("qwen3-30b-a3b")).ir == a.ir
    return p


@prop(60)
@example(("policy gen {\n    hierarchy {\n        tier g0 { location = gpu  capacity = 8 }\n    }\n}\n", ["g0"]))
@given(hierarchies())
def test_generated_variants_check_clean_and_lower(made):
    assert _clean_and_lowered(*made).hierarchy is not None


@prop(40)
@given(banded())
def test_generated_bands_check_clean_and_lower(made):
    p = _clean_and_lowered(*made)
    assert p.bands or p.hierarchy is not None
    firsts = [b.layers.first for b in p.bands]
    assert firsts == sorted(firsts)


# ------------------------------------------------------------------ where the runtime runs them
def test_tiered_policies_load_and_compile(tmp_path):
    # the runtime runs memory tiers (tests/test_runtime_tiers.py): loading and compiling
    # them works; checking and formatting as before
    path = tmp_path / "big.moe"
    path.write_text(SPEC_EXAMPLE)
    assert mpl.load(str(path)).ir.tiered and mpl.loads(README_EXAMPLE).ir.tiered
    out = mplc("compile", "big.moe", "-o", "x.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "TieredRuntime" in (tmp_path / "x.py").read_text()
    assert mplc("check", "big.moe", cwd=tmp_path).returncode == 0
    assert mplc("fmt", "--check", "big.moe", cwd=tmp_path).returncode == 1   # would reformat


def test_a_dtype_ladder_checks_compiles_and_replays(tmp_path):
    # the runtime runs ladders (tests/test_runtime_dtype_ladder.py): every path from the
    # text to a runtime takes one
    text = SPEC_EXAMPLE.replace("dtype = int4  capacity = 64", "dtype_ladder = [int8, int4]  capacity = 64")
    path = tmp_path / "ladder.moe"
    path.write_text(text)
    assert mplc("check", "ladder.moe", cwd=tmp_path).returncode == 0
    pol = mpl.load(str(path))
    warm = pol.ir.hierarchy.tiers[1]
    assert (warm.dtype, warm.dtype_ladder) == ("int8", ("int8", "int4"))
    out = mplc("compile", "ladder.moe", "-o", "x.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "_rung_hit" in (tmp_path / "x.py").read_text()


# ------------------------------------------------------------------ docs/memory-tiers.md
DOC = os.path.join(ROOT, "docs", "memory-tiers.md")


def test_the_docs_examples_check_clean():
    page = open(DOC, encoding="utf-8").read()
    blocks = [b.split("```", 1)[0] for b in page.split("```moe\n")[1:]]
    assert len(blocks) >= 3
    for code in blocks:
        a = analyze(code)
        assert [d.code for d in a.diagnostics if d.code != "MPL420"] == [], code
        assert a.ir and all(p.tiered for p in a.ir.values())
    bigger = analyze(blocks[-1]).ir["bigger"].hierarchy
    assert [(t.name, t.capacity) for t in bigger.tiers] == [("pinned", 4), ("hot", 32), ("ram", None)]


def test_the_docs_describe_every_field_of_the_tier_ir():
    import dataclasses
    page = open(DOC, encoding="utf-8").read()
    ir_part = page[page.index("## The IR"):]
    for cls in (ir.Hierarchy, ir.Tier, ir.Transition, ir.Band, ir.Location, ir.Layers, ir.WeightedSum):
        fields = [f.name for f in dataclasses.fields(cls)]
        assert f"{cls.__name__}({', '.join(fields)}" in ir_part.replace("\n  ", " ").replace("\n", " "), cls


# ------------------------------------------------------------------ malformed variants
def _fuzz_one(text, model=None):
    """analyze and the formatter never raise; diagnostics lie in the text; a policy lowers
    exactly when it has no error, and every IR keeps the tier invariants."""
    from mpl.diagnostics import Span
    from mpl.fmt import FormatError, format_text
    a = analyze(text, model=model)
    for d in a.diagnostics:
        assert 0 <= d.span.offset <= d.span.end_offset <= len(text), d
        assert d.span == Span.from_offsets(text, d.span.offset, d.span.end_offset), d
        for f in d.fixes:
            for e in f.edits:
                assert 0 <= e.span.offset <= e.span.end_offset <= len(text), d
    for name, rp in a.policies.items():
        assert (name in a.ir) == (not rp.has_errors), name
    if len(a.ir) < len(a.policies):
        assert not a.ok
    for p in a.ir.values():
        for h in [p.hierarchy, *(b.hierarchy for b in p.bands)]:
            if h is not None:
                assert h.tiers[-1].location.kind in ("cpu", "disk")
                assert len(h.transitions) == 2 * (len(h.tiers) - 1)
    try:
        out = format_text(text)
    except FormatError as e:
        assert e.diagnostics and any(d.is_error for d in e.diagnostics)
    else:
        assert format_text(out) == out
        assert analyze(out, model=model).ir == a.ir


@prop(80)
@given(malformed(), st.sampled_from([None, DS]))
def test_malformed_variants_get_located_errors_and_never_raise(text, model):
    _fuzz_one(text, model)


def test_found_tier_cases_through_the_cli(tmp_path):
    """Every found case with memory tiers: `mplc check` exits 1 with located errors and
    `mplc fmt` refuses it with its diagnostics, never an internal error."""
    from found_cases import FOUND, TIER_CASES
    for name, text in FOUND:
        if name not in TIER_CASES:
            continue
        _fuzz_one(text)
        path = tmp_path / f"{name}.moe"
        path.write_text(text)
        for args in (("check", path.name), ("fmt", "--check", path.name)):
            out = mplc(*args, cwd=tmp_path)
            assert out.returncode == 1, (name, args, out.stderr)
            assert "Traceback" not in out.stderr and "internal error" not in out.stderr
            assert f"{path.name}:" in out.stderr + (out.stdout or "")
