"""One test per diagnostic code: a .moe file on disk triggers it, and the test asserts the
code, the exact span (line, column, end column) and the message."""

import os

import pytest

from mpl.checker import check
from mpl.diagnostics import Severity
from mpl.rules import CODES
from mpl.shapes import preset

DS = preset("deepseek-v2-lite")

# code -> (file text, (line, col, end_line, end_col), message fragments, extra kwargs)
CASES = {
    "MPL001": ("policy p {\n    cache { capacity = 8 @ }\n}\n", (2, 26, 2, 27), ["unexpected character '@'"], {}),
    "MPL002": ("policy p {\n    cache { capacity 8 }\n}\n", (2, 22, 2, 23), ["expected '='"], {}),
    "MPL003": ("policy p {\n    cache { capacity = 8 }\n", (3, 1, 3, 1), ["end of file", "add '}'"], {}),
    "MPL004": ("policy p {\n    cache { capacity = 1.2.3 }\n}\n", (2, 24, 2, 29), ["malformed number '1.2.3'"], {}),
    "MPL101": ("policy p {\n    cache { capacity = 8 }\n    shedule { mode = hybrid }\n}\n", (3, 5, 3, 12),
               ["unknown block 'shedule'", "did you mean 'schedule'?"], {}),
    "MPL102": ("policy p {\n    cache {\n        capcity = 4\n        capacity = 8\n    }\n}\n", (3, 9, 3, 16),
               ["unknown parameter 'capcity' in cache; did you mean 'capacity'?"], {}),
    "MPL103": ("policy p {\n    cache { capacity = 8 }\n    cache { eviction = lfu }\n}\n", (3, 5, 3, 10),
               ["block 'cache' appears twice", "remove this one"], {}),
    "MPL104": ("policy p {\n    cache {\n        capacity = 8\n        capacity = 9\n    }\n}\n", (4, 9, 4, 17),
               ["'capacity' is set twice in cache", "remove this one"], {}),
    "MPL105": ("policy p {\n    cache { eviction = lfu }\n}\n", (2, 5, 2, 10),
               ["has no capacity", "add 'capacity = N'"], {}),
    "MPL106": ("policy p { cache { capacity = 8 } }\npolicy p { cache { capacity = 4 } }\n", (2, 8, 2, 9),
               ["policy 'p' is already defined", "rename"], {}),
    "MPL107": ("policy base { cache { capacity = 8 } }\npolicy c extends bsae { }\n", (2, 18, 2, 22),
               ["extends unknown policy 'bsae'", "did you mean 'base'?"], {}),
    "MPL108": ('import "nope.moe"\npolicy p { cache { capacity = 8 } }\n', (1, 8, 1, 18),
               ["cannot find imported file 'nope.moe'"], {}),
    "MPL110": ("policy a extends a { cache { capacity = 8 } }\n", (1, 18, 1, 19),
               ["extends cycle: a -> a", "remove one 'extends'"], {}),
    "MPL111": ("version 7\npolicy p { cache { capacity = 8 } }\n", (1, 9, 1, 10),
               ["version 7 is not supported", "1, 2"], {}),
    "MPL112": ("# only a comment\nversion 1\n", (1, 1, 1, 17), ["defines no policy"], {}),
    "MPL113": ("policy p {\n    cache { capacity = 8 }\n    adapt { capacity = 4 }\n}\n", (3, 13, 3, 21),
               ["adapt block holds rules", "set it in 'cache'"], {}),
    "MPL201": ("policy p {\n    cache { capacity = 8\n        eviction = \"lru\" }\n}\n", (3, 20, 3, 25),
               ["takes a bare name, not a string", "without quotes"], {}),
    "MPL202": ("policy p {\n    cache { capacity = 8 }\n    schedule { mode = hybird }\n}\n", (3, 23, 3, 29),
               ["unknown mode 'hybird'", "did you mean 'hybrid'?"], {}),
    "MPL203": ("policy p {\n    cache { capacity = 0 }\n}\n", (2, 24, 2, 25),
               ["'capacity' must be in [1, 65536], got 0", "use 1"], {}),
    "MPL204": ("policy p {\n    cache { capacity = 8GiBs }\n}\n", (2, 25, 2, 29),
               ["unknown unit 'GiBs'", "did you mean 'GiB'?"], {}),
    "MPL205": ("policy p {\n    cache { capacity = 8 }\n    adapt { when stall > 5 { capacity = 4 } }\n}\n", (3, 18, 3, 23),
               ["unknown metric 'stall'", "did you mean 'stall_ms'?"], {}),
    "MPL206": ("policy p {\n    cache { capacity = 8 }\n    schedule { overlap = true : false when hit_rate < 0.5 }\n}\n",
               (3, 31, 3, 58), ["'overlap' cannot have a conditional value", "keep true"], {}),
    "MPL207": ("policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 { pin = [1] } }\n}\n",
               (3, 35, 3, 38), ["'pin' cannot be changed by an adapt rule"], {}),
    "MPL208": ("policy p {\n    cache { capacity = 8 }\n    schedule { mode = hybrid | gpu_only }\n}\n", (3, 32, 3, 40),
               ["takes a single value, not a fallback", "keep hybrid"], {}),
    "MPL209": ("policy p {\n    cache { capacity = 8; pin = [3, 4, 3] }\n}\n", (2, 40, 2, 41),
               ["3 appears twice in the list; it counts once: remove the duplicate"], {}),
    "MPL301": ("policy p {\n    cache { capacity = 1; pin = [0, 1] }\n}\n", (2, 33, 2, 39),
               ["2 pinned experts do not fit in a cache of 1 slot", "raise capacity to at least 2"], {}),
    "MPL302": ("policy p {\n    cache { capacity = 2 }\n    prefetch { strategy = affinity; budget = 3 }\n}\n",
               (3, 46, 3, 47), ["prefetch budget 3 exceeds the cache capacity 2", "at most 2"], {}),
    "MPL303": ("policy p {\n    cache { capacity = 4 }\n    schedule { mode = hybrid; overlap = false }\n}\n",
               (3, 41, 3, 46), ["hybrid schedule needs overlap = true"], {}),
    "MPL304": ("policy p {\n    cache { capacity = 4; memory_threshold = 0.5 }\n}\n", (2, 46, 2, 49),
               ["memory_headroom 0.7 (the default) is above memory_threshold 0.5", "<= 0.5"], {}),
    "MPL305": ("policy p {\n    cache { capacity = 4 }\n    per_layer { min_capacity = 4; max_capacity = 3 }\n}\n",
               (3, 32, 3, 33), ["min_capacity 4 is above max_capacity 3"], {}),
    "MPL306": ("policy p {\n    cache { capacity = 16 }\n    prefetch { strategy = history; budget = 8 }\n"
               "    adapt { when hit_rate < 0.5 { capacity = 4 } }\n}\n", (4, 46, 4, 47),
               ["when this rule fires, 'capacity = 4' makes the policy invalid",
                "prefetch budget 8 exceeds the cache capacity 4"], {}),
    "MPL307": ("policy p {\n    cache { capacity = 4; eviction = belady }\n}\n", (2, 38, 2, 44),
               ["'belady' needs the future", "replay"], {}),
    "MPL308": ("policy p {\n    cache { capacity = 4 }\n    adapt { when hit_rate < 0.5 { rebalance frequency } }\n}\n",
               (3, 35, 3, 54), ["'rebalance frequency' has no effect", "one shared cache", "per_layer"], {}),
    "MPL309": ("policy p {\n    cache { capacity = 1 }\n    per_layer { allocation = entropy }\n}\n", (2, 24, 2, 25),
               ["per-layer budget (layers x capacity 1 per layer) is below layers x min_capacity 2"], {}),
    "MPL401": ("policy p {\n    cache { capacity = 4 }\n    schedule { mode = gpu_only; offload_threshold_ms = 20 }\n}\n",
               (3, 33, 3, 53), ["'offload_threshold_ms' has no effect with mode = gpu_only", "hybrid"], {}),
    "MPL402": ("policy p {\n    cache { capacity = 4 }\n    adapt { when miss_rate > 1 { eviction = lfu } }\n}\n",
               (3, 18, 3, 31), ["'miss_rate > 1' can never hold"], {}),
    "MPL403": ("policy p {\n    cache { capacity = 8 }\n    adapt {\n        when hit_rate < 0.5 { capacity = 4 }\n"
               "        when miss_rate > 0.4 { capacity = 16 }\n    }\n}\n", (5, 43, 5, 45),
               ["two adapt rules set 'capacity' to different values (4 and 16)", "can hold at once"], {}),
    "MPL404": ("policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 { prefetch_strategy = history } }\n}\n",
               (3, 35, 3, 52), ["'prefetch_strategy' is the original's name for 'strategy'"], {}),
    "MPL405": ("policy p {\n    cache { capacity = 8 }\n    adapt { when stall_ms >= 0 { eviction = lfu } }\n}\n",
               (3, 18, 3, 31), ["'stall_ms >= 0' always holds"], {}),
    "MPL406": ("policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 { mode = gpu_only } }\n}\n",
               (3, 42, 3, 50), ["'mode = gpu_only' is already the value in force"], {}),
    "MPL407": ("policy p {\n    cache { capacity = 8 }\n    monitor { metrics = [hit_rate, stall] }\n}\n", (3, 36, 3, 41),
               ["'stall' is not a metric this toolchain computes", "did you mean 'stall_ms'?"], {}),
    "MPL408": ("policy p {\n    cache { capacity = 8 }\n    adapt { when hit_rate < 0.5 { expert_size_gb = 2 } }\n}\n",
               (3, 35, 3, 53), ["'expert_size_gb = 2' has no effect", "the model's"], {}),
    "MPL501": ("policy p {\n    cache { capacity = 64; pin = [1, 70] }\n}\n", (2, 38, 2, 40),
               ["expert 70 does not exist", "64 experts per layer"], {"model": DS}),
    "MPL502": ("policy p {\n    cache { capacity = 2 }\n}\n", (2, 24, 2, 25),
               ["capacity 2 is below deepseek-v2-lite's top-k of 6"], {"model": DS}),
    "MPL503": ("policy p {\n    cache { capacity = 64 }\n    per_layer { min_capacity = 2 }\n}\n", (2, 24, 2, 26),
               ["holds all 64 experts", "cannot matter"], {"model": DS}),
    "MPL504": ("policy p {\n    cache { capacity = 8; expert_size_gb = 1 }\n}\n", (2, 24, 2, 25),
               ["the slot pool of 8 experts x 954 MiB = 7.45 GiB is more than the 5.87 GiB that a "
                "9.31 GiB device leaves for experts after the skeleton (2.44 GiB) and the KV-cache "
                "reserve (1 GiB); lower capacity to at most 6, or capacity = 5.5GiB"],
               {"model": DS.with_device_memory(10 * 10 ** 9)}),
    "MPL505": ("policy p {\n    cache { eviction = lru }\n    per_layer { total_budget = 30 }\n}\n", (3, 32, 3, 34),
               ["total_budget 30 is below 26 MoE layers x min_capacity 2 = 52"], {"model": DS}),
    "MPL508": ("policy p {\n    cache { capacity = 128 }\n}\n", (2, 24, 2, 27),
               ["a shared cache of capacity 128 is below one step's accesses of deepseek-v2-lite "
                "(26 MoE layers x top-6 = 156)", "it thrashes", "eviction = farthest_layer"], {"model": DS}),
    "MPL509": ("policy p {\n    cache { capacity = 64 }\n    prefetch { strategy = history }\n}\n",
               (2, 24, 2, 26), ["a shared cache of capacity 64 is below one step's accesses",
                                "every hit would be a prefetch"], {"model": DS}),
    "MPL409": ("policy p {\n    cache { capacity = 16 }\n    per_layer { total_budget = 416 }\n}\n",
               (2, 13, 2, 21), ["'capacity' has no effect: per_layer.total_budget = 416 decides every "
                                "layer's capacity", "remove capacity"], {}),
    "MPL506": ("policy p {\n    cache { capacity = 40; pin = [0, 1] }\n}\n", (2, 34, 2, 40),
               ["need 52 slots of the shared cache of 40"], {"model": DS}),
    "MPL507": ("policy p {\n    cache { capacity = 1MiB }\n}\n", (2, 24, 2, 28),
               ["capacity 1 MiB is smaller than one expert of deepseek-v2-lite (16.5 MiB)",
                "it gives no slot"], {"model": DS}),
}


def _check_file(tmp_path, text, name="case.moe", model=None):
    path = tmp_path / name
    path.write_text(text)
    return check(str(path), model=model)


@pytest.mark.parametrize("code", sorted(CASES))
def test_code(tmp_path, code):
    text, (line, col, eline, ecol), fragments, kw = CASES[code]
    diags = _check_file(tmp_path, text, model=kw.get("model"))
    hits = [d for d in diags if d.code == code]
    assert hits, f"{code} not reported; got {[(d.code, d.message) for d in diags]}"
    d = hits[0]
    assert d.severity is CODES[code].severity
    assert d.file == str(tmp_path / "case.moe")
    assert (d.span.line, d.span.column, d.span.end_line, d.span.end_column) == (line, col, eline, ecol), d
    for frag in fragments:
        assert frag in d.message, (frag, d.message)


def test_every_code_has_a_case_here_or_a_file_test():
    # MPL100 (unreadable file) and MPL109 (import cycle) need several files: tested below.
    assert set(CODES) - set(CASES) == {"MPL100", "MPL109"}


def test_mpl100_missing_directory_binary(tmp_path):
    (tmp_path / "bin.moe").write_bytes(b"policy \x00\x01")
    (tmp_path / "latin.moe").write_bytes(b"policy caf\xe9 {}")
    for name, frag in (("missing.moe", "no such file"), ("", "is a directory"),
                       ("bin.moe", "binary file"), ("latin.moe", "not UTF-8")):
        path = str(tmp_path / name) if name else str(tmp_path)
        [d] = check(path)
        assert d.code == "MPL100" and frag in d.message and d.file == path
        assert (d.span.line, d.span.column) == (1, 1)


def test_mpl100_import_of_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    diags = _check_file(tmp_path, 'import "sub"\npolicy p { cache { capacity = 8 } }\n')
    [d] = [d for d in diags if d.code == "MPL100"]
    assert "is a directory" in d.message and (d.span.line, d.span.column, d.span.end_column) == (1, 8, 13)


def test_mpl109_import_cycle_across_files(tmp_path):
    (tmp_path / "a.moe").write_text('import "b.moe"\npolicy a { cache { capacity = 8 } }\n')
    (tmp_path / "b.moe").write_text('import "a.moe"\npolicy b { cache { capacity = 8 } }\n')
    diags = check(str(tmp_path / "a.moe"))
    [d] = [d for d in diags if d.code == "MPL109"]
    assert d.message.startswith("import cycle: a.moe -> b.moe -> a.moe")
    assert d.file == str(tmp_path / "b.moe")          # reported where the cycle closes
    assert (d.span.line, d.span.column, d.span.end_column) == (1, 8, 15)


def test_fixes_are_mechanical_edits(tmp_path):
    text = CASES["MPL102"][0]
    [d] = [d for d in _check_file(tmp_path, text) if d.code == "MPL102"]
    [fix] = d.fixes
    [edit] = fix.edits
    assert text[edit.span.offset:edit.span.end_offset] == "capcity" and edit.new_text == "capacity"
    # applying the duplicate-removal fix of MPL104 leaves a clean file
    text = CASES["MPL104"][0]
    [d] = [d for d in _check_file(tmp_path, text) if d.code == "MPL104"]
    [edit] = d.fixes[0].edits
    fixed = text[:edit.span.offset] + edit.new_text + text[edit.span.end_offset:]
    assert fixed == "policy p {\n    cache {\n        capacity = 8\n    }\n}\n"
    assert _check_file(tmp_path, fixed, "fixed.moe") == []
    # the clamp fix of MPL203
    text = CASES["MPL203"][0]
    [d] = [d for d in _check_file(tmp_path, text) if d.code == "MPL203"]
    [edit] = d.fixes[0].edits
    assert edit.new_text == "1"
    assert [r.message for r in d.related] == []


def test_related_locations(tmp_path):
    [d] = [d for d in _check_file(tmp_path, CASES["MPL104"][0]) if d.code == "MPL104"]
    [r] = d.related
    assert r.message == "first set here" and (r.span.line, r.span.column) == (3, 9)
    [d] = [d for d in _check_file(tmp_path, CASES["MPL403"][0]) if d.code == "MPL403"]
    [r] = d.related
    assert (r.span.line, r.span.column) == (4, 42) and "capacity = 4" in r.message


def test_warnings_only_leave_the_policy_loadable(tmp_path):
    from mpl.checker import analyze
    a = analyze(CASES["MPL401"][0])
    assert [d.code for d in a.diagnostics] == ["MPL401"]
    assert a.diagnostics[0].severity is Severity.WARNING
    assert "p" in a.ir
