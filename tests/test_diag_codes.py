"""One test per diagnostic code: a .moe file on disk triggers it, and the test asserts the
code, the exact span (line, column, end column) and the message."""


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
    # memory tiers
    'MPL114': ('policy p {\n    cache { capacity = 8 }\n    hierarchy { tier hot { location = gpu  capacity = 16 } }\n}\n',
               (2, 5, 2, 10), ["a policy has 'cache' or 'hierarchy', not both", "remove one of them"], {}),
    'MPL115': ('policy p {\n    hierarchy {\n        tyer hot { location = gpu  capacity = 16 }\n        tier t { location = gpu  capacity = 4 }\n    }\n}\n',
               (3, 9, 3, 13), ["unknown item 'tyer' in 'hierarchy'", "did you mean 'tier'?"], {}),
    'MPL116': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier hot { location = cpu }\n    }\n}\n',
               (4, 14, 4, 17), ["tier 'hot' appears twice in hierarchy"], {}),
    'MPL117': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu }\n        on promote(ram -> hot) { trigger_threshold = 0.5 }\n        on promote(ram -> hot) {}\n    }\n}\n',
               (6, 12, 6, 31), ["transition 'promote(ram -> hot)' appears twice in hierarchy"], {}),
    'MPL118': ('policy p {\n    hierarchy {\n        eviction = lfu\n    }\n}\n',
               (2, 5, 2, 14), ['the hierarchy has no tier'], {}),
    'MPL119': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu }\n        on demote(hot -> rma) {}\n    }\n}\n',
               (5, 26, 5, 29), ["unknown tier 'rma' in 'demote(hot -> rma)'", "did you mean 'ram'?"], {}),
    'MPL120': ('policy p {\n    hierarchy {\n        tier hot { location = gpu }\n    }\n}\n',
               (3, 14, 3, 17), ["tier 'hot' has no capacity: a gpu tier holds 'capacity = N' slots or a size such as 'capac"], {}),
    'MPL210': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        eviction = weighted_sum(lru = 0.5, lfuu = 0.5)\n    }\n}\n',
               (4, 44, 4, 48), ["unknown rule 'lfuu' in weighted_sum(...)", "did you mean 'lfu'?"], {}),
    'MPL211': ('policy p {\n    per_layer_hierarchy {\n        band layers = 7..0 { tier hot { location = gpu  capacity = 8 } }\n    }\n}\n',
               (3, 23, 3, 27), ['the range 7..0 runs backwards: its first layer is above its last'], {}),
    'MPL212': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu }\n        on demot(hot -> ram) {}\n    }\n}\n',
               (5, 12, 5, 17), ["unknown transition 'demot'", "did you mean 'demote'?"], {}),
    'MPL213': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16  dtype_ladder = [fp16, fp32] }\n    }\n}\n',
               (3, 66, 3, 78), ['dtype_ladder goes from the highest precision to the lowest'], {}),
    'MPL320': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier warm { location = gpu  capacity = 32 }\n        tier ram { location = cpu }\n        on demote(hot -> ram) {}\n    }\n}\n',
               (6, 12, 6, 30), ["'demote(hot -> ram)' skips tier 'warm': a transition joins two adjacent tiers"], {}),
    'MPL321': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu  capacity = 8GiB }\n        tier ssd { location = disk }\n        tier hdd { location = disk }\n    }\n}\n',
               (6, 31, 6, 35), ["tier 'hdd' is a second disk tier (tier 'ssd' is the first): a hierarchy has at most one di"], {}),
    'MPL322': ('policy p {\n    hierarchy {\n        tier ram { location = cpu  capacity = 8GiB }\n        tier hot { location = gpu  capacity = 16 }\n    }\n}\n',
               (4, 31, 4, 34), ["tier 'hot' (gpu) comes after tier 'ram' (cpu): tiers are ordered fastest first: gpu, then "], {}),
    'MPL323': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier warm { location = gpu  capacity = 32 }\n        on demote(hot -> warm) { mechanism = in_place_requant }\n    }\n}\n',
               (5, 46, 5, 62), ["in_place_requant quantizes to a lower precision, but tier 'warm' holds the checkpoint's pr"], {}),
    'MPL324': ('policy p {\n    per_layer_hierarchy {\n        band layers = 0..7 { tier hot { location = gpu  capacity = 4 } }\n        band layers = 7..9 { tier hot { location = gpu  capacity = 4 } }\n    }\n}\n',
               (4, 14, 4, 27), ['band 7..9 overlaps band 0..7 (layer 7 in both): every layer is in at most one band'], {}),
    'MPL325': ('policy p {\n    per_layer_hierarchy {\n        band layers = 0..7 { tier hot { location = gpu  capacity = 4 } }\n        band layers = 9..9 { tier hot { location = gpu  capacity = 4 } }\n    }\n}\n',
               (4, 14, 4, 27), ['layer 8 is in no band (between band 0..7 and band 9..9): without a hierarchy block every M'], {}),
    'MPL326': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16  dtype = fp16  dtype_ladder = [fp32, fp16] }\n    }\n}\n',
               (3, 59, 3, 63), ["tier 'hot' has dtype fp16 and a dtype_ladder that starts at fp32: the ladder's first rung "], {}),
    'MPL327': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ssd { location = disk }\n    }\n}\n',
               (4, 31, 4, 35), ["the disk tier 'ssd' is read into host memory first, but the hierarchy has no cpu tier"], {}),
    'MPL328': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 2 }\n    }\n    prefetch { strategy = history; budget = 3 }\n}\n',
               (5, 45, 5, 46), ["prefetch budget 3 exceeds the 2 slots of the top tier 'hot', which prefetches load into"], {}),
    'MPL329': ('policy p {\n    cache { capacity = 16; capacity_factor = 0.5 }\n}\n',
               (2, 28, 2, 43), ['the cache sets both capacity and capacity_factor: they are two ways to give its size'], {}),
    'MPL420': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier warm { location = gpu  dtype = int8  capacity = 64 }\n    }\n}\n',
               (4, 14, 4, 18), ["tier 'warm' holds experts at int8, below any checkpoint's own precision: what it serves is"], {}),
    'MPL421': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu  eviction = lfu }\n    }\n}\n',
               (4, 36, 4, 44), ["'eviction' has no effect on tier 'ram': it is the last tier and holds every expert"], {}),
    'MPL422': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n    }\n    adapt { when hit_rate < 0.5 { eviction = lfu } }\n}\n',
               (5, 35, 5, 49), ["'eviction' sets a cache parameter, but the policy has memory tiers instead of a cache bloc"], {}),
    'MPL330': ('policy p {\n    cache {\n        capacity = 64\n        pin layers = 0..7 { experts = [3] }\n        pin layers = 7..9 { experts = [4] }\n    }\n}\n',
               (5, 13, 5, 26), ['pin layers = 7..9 overlaps pin layers = 0..7 (layer 7 in both)'], {}),
    'MPL521': ('policy p {\n    cache {\n        capacity = 160\n        pin layers = 0..3 { experts = [3] }\n    }\n}\n',
               (4, 13, 4, 26), ["layer 0 is not one of deepseek-v2-lite's MoE layers (it is a dense layer)"], {"model": DS}),
    'MPL515': ('policy p {\n    per_layer_hierarchy {\n        band layers = 0..30 { tier hot { location = gpu  capacity = 8 } }\n    }\n}\n',
               (3, 14, 3, 28), ['band 0..30 names layers deepseek-v2-lite does not have (its layers are 0..26)'], {"model": DS}),
    'MPL516': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 300 }\n        tier warm { location = gpu  dtype = int4  capacity = 400 }\n    }\n}\n',
               (2, 5, 2, 14), ['the gpu tiers on the device need 6.9 GB of experts, more than its memory (4.0 GB)'], {"model": DS.with_device_memory(4 * 10 ** 9)}),
    'MPL517': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 1664 }\n        tier ram { location = cpu }\n    }\n}\n',
               (3, 47, 3, 51), ["tier 'hot' holds 1664 slots, every one of the 1664 experts of deepseek-v2-lite: the tiers "], {"model": DS}),
    'MPL518': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 16 }\n        tier ram { location = cpu  capacity = 1000 }\n    }\n}\n',
               (4, 47, 4, 51), ["tier 'ram' is the last tier, which holds every expert, but its capacity gives 1000 of the "], {"model": DS}),
    'MPL519': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 8 }\n        tier warm { location = gpu  dtype = int4  capacity = 4MiB }\n    }\n}\n',
               (4, 62, 4, 66), ["tier 'warm': capacity 4 MiB is smaller than one expert of deepseek-v2-lite at int4 (4.12 M"], {"model": DS}),
    'MPL520': ('policy p {\n    hierarchy {\n        tier hot { location = gpu  capacity = 5 }\n    }\n}\n',
               (3, 47, 3, 48), ["the top tier 'hot' holds 5 slots, below deepseek-v2-lite's top-k of 6: every dispatch stre"], {"model": DS}),
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


def test_tier_fixes_are_mechanical_edits(tmp_path):
    """The quick fixes of the memory-tier codes leave a file without that code."""
    for code in ("MPL115", "MPL116", "MPL117", "MPL119", "MPL210", "MPL211", "MPL212", "MPL213",
                 "MPL320", "MPL329", "MPL421", "MPL422"):
        text, _, _, kw = CASES[code]
        [d] = [d for d in _check_file(tmp_path, text) if d.code == code]
        assert d.fixes, code
        edits = sorted(d.fixes[0].edits, key=lambda e: e.span.offset, reverse=True)
        fixed = text
        for e in edits:
            fixed = fixed[:e.span.offset] + e.new_text + fixed[e.span.end_offset:]
        assert code not in {x.code for x in _check_file(tmp_path, fixed, "fixed.moe")}, (code, fixed)


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
