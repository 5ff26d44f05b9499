"""The standard library (stdlib/*.moe, importable as "std/NAME"): every file is documented,
checks clean, is in canonical layout, loads, runs a synthetic dispatch sequence, and can be
imported and extended from a user's file."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys

import pytest

import mpl
from mpl.checker import analyze, check
from mpl.diagnostics import Severity
from mpl.runtime.backend import forced
from mpl.runtime.plan import CPU, LOWER, STREAM
from mpl.sim import synthesize
from mpl.stdlib_path import stdlib_dir, stdlib_file, stdlib_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = stdlib_names()

# what the seed and the issue ask for, at least
REQUIRED = {"lru_basic", "aggressive", "balanced", "balanced_adaptive", "generous", "skeleton",
            "fiddler_equiv", "epcb_deepseek", "cpu_fallback", "hybrid", "adaptive"}


def read(name: str) -> str:
    with open(stdlib_file(name), encoding="utf-8") as f:
        return f.read()


def header(name: str) -> str:
    """The leading comment block of the file."""
    lines = []
    for line in read(name).splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


def test_the_stdlib_is_found_and_complete():
    assert os.path.isdir(stdlib_dir())
    assert REQUIRED <= set(NAMES), REQUIRED - set(NAMES)
    for name in NAMES:
        assert stdlib_file(f"std/{name}") == stdlib_file(name) == os.path.join(stdlib_dir(), f"{name}.moe")


@pytest.mark.parametrize("name", NAMES)
def test_one_policy_named_like_the_file(name):
    analysis = analyze(read(name), stdlib_file(name))
    assert [p.name.text for p in analysis.document.policies] == [name]


@pytest.mark.parametrize("name", NAMES)
def test_header_says_when_to_use_it_and_when_not(name):
    text = header(name)
    assert text.startswith(f"{name}:"), f"the first comment line must start with '# {name}:'"
    assert re.search(r"\bUse it\b", text), "say when to use it"
    assert re.search(r"\bDo not (use|expect)\b", text), "say when not to use it"


@pytest.mark.parametrize("name", NAMES)
def test_checks_clean(name):
    diags = check(stdlib_file(name))
    # (a lower-precision memory tier gets the hint SPEC §12 asks for: the trade is explicit)
    diags = [d for d in diags if not (d.code == "MPL420" and d.severity == Severity.HINT)]
    assert diags == [], [(d.code, d.message) for d in diags]


@pytest.mark.parametrize("name", NAMES)
def test_is_in_canonical_layout(name):
    from mpl.fmt import format_text
    assert format_text(read(name)) == read(name)


def test_every_file_is_documented():
    with open(os.path.join(ROOT, "docs", "stdlib.md"), encoding="utf-8") as f:
        doc = f.read()
    sections = set(re.findall(r"^### `std/([a-z0-9_]+)`$", doc, re.M))
    assert sections == set(NAMES), (set(NAMES) - sections, sections - set(NAMES))
    for name in NAMES:
        assert re.search(rf"^\| `{name}` \|", doc, re.M), f"{name} is missing from the tables"


def test_cli_check_accepts_the_whole_stdlib():
    files = [stdlib_file(n) for n in NAMES]
    out = subprocess.run([sys.executable, "-m", "mpl.cli.main", "check", *files],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "error" not in out.stdout.lower() and "warning" not in out.stdout.lower()
    fmt = subprocess.run([sys.executable, "-m", "mpl.cli.main", "fmt", "--check", *files],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


# ---------------------------------------------------------------- running them
DEEPSEEK = dict(num_layers=27, num_experts=64, top_k=6)
SMALL = dict(num_layers=8, num_experts=32, top_k=4)


#: DeepSeek-V2-Lite's expert size: a per-layer policy sized in bytes (total_budget = 10GiB)
#: needs it to be counted in slots
DEEPSEEK_EXPERT_BYTES = 3 * 2048 * 1408 * 2


def shape_for(ir) -> dict:
    return dict(DEEPSEEK, expert_bytes=DEEPSEEK_EXPERT_BYTES) if ir.per_layer else SMALL


def synthetic_dispatches(num_layers, num_experts, top_k, steps, seed=0):
    """A deterministic routing sequence: per-layer Zipf popularity and some reuse of the
    previous step's experts, with router weights."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 1.1 for i in range(num_experts)]
    perms = [rng.sample(range(num_experts), num_experts) for _ in range(num_layers)]
    prev = [[] for _ in range(num_layers)]
    for _ in range(steps):
        for layer in range(num_layers):
            chosen: list[int] = []
            for e in prev[layer]:
                if len(chosen) < top_k // 2 and rng.random() < 0.5:
                    chosen.append(e)
            while len(chosen) < top_k:
                e = perms[layer][rng.choices(range(num_experts), weights)[0]]
                if e not in chosen:
                    chosen.append(e)
            prev[layer] = chosen
            w = [rng.random() + 0.1 for _ in chosen]
            total = sum(w)
            yield layer, chosen, [x / total for x in w]


def run(policy, steps=12, expert_bytes=None, **shape):
    rt = policy.runtime(**shape, **({"expert_bytes": expert_bytes} if expert_bytes else {}))
    plans = [rt.dispatch(layer, experts, weights)
             for layer, experts, weights in synthetic_dispatches(steps=steps, **shape)]
    return rt, plans


@pytest.mark.parametrize("name", NAMES)
def test_loads_and_runs_a_synthetic_dispatch_sequence(name):
    policy = mpl.load(stdlib_file(name))
    assert policy.name == name
    shape = shape_for(policy.ir)
    rt, plans = run(policy, **shape)
    stats = rt.stats()
    accesses = sum(len(p.experts) for p in plans)
    assert stats["accesses"] == accesses == 12 * shape["num_layers"] * shape["top_k"]
    assert stats["hits"] + stats["misses"] == accesses
    assert 0.0 <= stats["hit_rate"] <= 1.0
    assert stats["hit_rate"] == pytest.approx(stats["hits"] / accesses)
    assert stats["hits"] == sum(sum(p.hit) for p in plans)
    for plan in plans:
        assert len(plan.where) == len(plan.experts) == len(plan.hit)
        for where in plan.where:       # (LOWER: computed from a lower memory tier's copy)
            assert where in (CPU, STREAM, LOWER) or 0 <= where < rt.num_slots
        for load in plan.loads:
            assert 0 <= load.slot < rt.num_slots
    resident = rt.resident()
    assert len(set(resident.values())) == len(resident), "two keys in one slot"
    assert len(resident) <= sum(rt.capacities()) <= rt.num_slots


# what each policy's documentation promises, checked on the mechanism
def test_skeleton_keeps_at_most_one_expert():
    rt, plans = run(mpl.load(stdlib_file("skeleton")), **SMALL)
    assert rt.capacities() == [1]
    assert len(rt.resident()) <= 1
    assert rt.stats()["streamed"] > 0          # top-4 with one slot: the rest stream


@pytest.mark.parametrize("name, slots", [("aggressive", 2), ("balanced", 4), ("generous", 8),
                                         ("fiddler_equiv", 2), ("lru_basic", 16)])
def test_shared_capacities_are_the_documented_ones(name, slots):
    rt, _ = run(mpl.load(stdlib_file(name)), **SMALL)
    assert rt.capacities() == [slots]
    assert len(rt.resident()) <= slots


@pytest.mark.parametrize("name", ["epcb_deepseek", "epcb_entropy"])
def test_epcb_splits_864_slots_over_27_layers(name):
    policy = mpl.load(stdlib_file(name))
    assert policy.ir["per_layer.total_budget"] == 864
    rt, _ = run(policy, **DEEPSEEK)
    caps = rt.capacities()
    assert len(caps) == 27 and sum(caps) <= 864 and all(4 <= c <= 48 for c in caps)
    if name == "epcb_deepseek":
        assert caps == [32] * 27


def test_epcb_beats_a_flat_cache_on_the_deepseek_shape():
    flat, _ = run(mpl.load(stdlib_file("lru_basic")), **DEEPSEEK)
    per_layer, _ = run(mpl.load(stdlib_file("epcb_deepseek")), **DEEPSEEK)
    assert per_layer.stats()["hit_rate"] > flat.stats()["hit_rate"]


def test_cpu_fallback_computes_misses_on_the_cpu():
    rt, plans = run(mpl.load(stdlib_file("cpu_fallback")), **SMALL)
    stats = rt.stats()
    assert stats["cpu_computes"] > 0
    for plan in plans:
        for hit, where in zip(plan.hit, plan.where):
            if not hit:
                assert where == CPU


MIXTRAL = dict(num_layers=8, num_experts=8, top_k=2)


def test_prefetching_policies_prefetch():
    for name in ("generous", "lfu_history", "affinity_prefetch", "lookahead_prefetch", "adaptive"):
        rt, _ = run(mpl.load(stdlib_file(name)), steps=20, **SMALL)
        stats = rt.stats()
        assert stats["prefetch_issued"] > 0 and stats["prefetch_loads"] > 0, name


def test_balanced_prefetches_only_with_room_beside_the_running_dispatch():
    # documented: with top-2 there are 2 free slots to prefetch into; with top-4 the running
    # dispatch's experts fill all 4 slots and are never evicted by a prefetch
    policy = mpl.load(stdlib_file("balanced"))
    top2, _ = run(policy, steps=20, **MIXTRAL)
    assert top2.stats()["prefetch_loads"] > 0
    top4, plans = run(policy, steps=20, **SMALL)
    assert top4.stats()["prefetch_loads"] == 0
    assert all(load.kind != "prefetch" for p in plans for load in p.loads)


def test_consumer_16gb_sizes_its_cache_from_the_expert_size():
    policy = mpl.load(stdlib_file("consumer_16gb"))
    rt = policy.runtime(**SMALL, expert_bytes=512 * 2 ** 20)       # 512 MiB experts
    assert rt.capacities() == [20]                                  # 10 GiB / 512 MiB


def test_larger_than_ram_reads_from_the_disk_what_host_memory_lost():
    t = synthesize("mixtral-8x7b", steps=16, seed=3)
    rep = mpl.load(stdlib_file("larger_than_ram")).replay(t, hardware="rtx-4090")
    rows = {r["tier"]: r for r in rep.stats["tiers"]}
    assert (rows["gpu"]["capacity"], rows["ram"]["capacity"]) == (30, 121)    # 10 / 40 GiB of 352 MB
    assert rows["ram"]["hits"] > 0 and 0 < rows["ssd"]["reads"] < rep.stats["accesses"]
    assert rep.sim["disk_reads"] == rows["ssd"]["reads"] and not rep.notes


def test_int4_warm_computes_part_of_its_accesses_from_int4_copies():
    t = synthesize("deepseek-v2-lite", steps=24, seed=3)
    warm = mpl.load(stdlib_file("int4_warm")).replay(t, hardware="rtx-5080")
    full = mpl.load(stdlib_file("consumer_16gb")).replay(t, hardware="rtx-5080")
    rows = {r["tier"]: r for r in warm.stats["tiers"]}
    assert (rows["hot"]["capacity"], rows["warm"]["capacity"]) == (372, 992)
    assert 0 < warm.stats["approximate_computes"] == rows["warm"]["approximate"] < warm.stats["accesses"]
    assert warm.stats["bytes_loaded"] < full.stats["bytes_loaded"]
    assert warm.tokens_per_s > full.tokens_per_s


def test_composed_full_pins_expert_zero_of_every_layer():
    rt, plans = run(mpl.load(stdlib_file("composed_full")), steps=20, **SMALL)
    evicted = {key for p in plans for key, _ in p.evicted}
    assert not any(expert == 0 for _, expert in evicted)


# ---------------------------------------------------------------- import + extends
@pytest.mark.parametrize("name", NAMES)
def test_import_and_extend_from_a_user_file(name, tmp_path):
    parent = mpl.load(stdlib_file(name)).ir
    user = tmp_path / "mine.moe"
    user.write_text(f'import "std/{name}"\n\npolicy mine extends {name} {{\n'
                    f'    monitor {{\n        window = 50\n    }}\n}}\n')
    diags = check(str(user))
    assert [d for d in diags if d.severity in (Severity.ERROR, Severity.WARNING)] == []
    child = mpl.load(str(user), policy="mine")
    assert child.ir.parent == name
    assert child.ir["monitor.window"] == 50
    for key, value in parent.values.items():          # everything else is inherited
        if key != "monitor.window":
            assert child.ir[key] == value, key
    assert child.ir.adapt == parent.adapt
    child.runtime(**shape_for(child.ir)).dispatch(0, [1, 2])


def test_extends_overrides_one_parameter(tmp_path):
    user = tmp_path / "roomier.moe"
    user.write_text('import "std/balanced"\npolicy roomier extends balanced { cache { capacity = 6 } }\n')
    ir = mpl.load(str(user), policy="roomier").ir
    assert ir["cache.capacity"] == 6
    assert ir["cache.eviction"] == "lfu"
    assert ir["prefetch.strategy"] == "history" and ir["prefetch.budget"] == 4


def test_unknown_stdlib_import_is_a_located_error():
    text = 'import "std/balancd"\npolicy x extends balanced { cache { capacity = 2 } }\n'
    diags = analyze(text).diagnostics
    codes = [d.code for d in diags if d.is_error]
    assert "MPL108" in codes
    d = next(d for d in diags if d.code == "MPL108")
    assert d.span.line == 1 and "balancd" in text[d.span.offset:d.span.end_offset]


def uniform_run(policy, steps=60, num_layers=8, num_experts=64, top_k=4, seed=1):
    rt = policy.runtime(num_layers=num_layers, num_experts=num_experts, top_k=top_k)
    rng = random.Random(seed)
    for _ in range(steps):
        for layer in range(num_layers):
            rt.dispatch(layer, rng.sample(range(num_experts), top_k))
    return rt


@pytest.mark.parametrize("name, expected", [
    ("adaptive", [("cache.frequency_decay", 0.9, 0.5), ("prefetch.strategy", "history", "none")]),
    ("balanced_adaptive", [("cache.eviction", "lfu", "lru")]),
    ("composed_full", [("prefetch.budget", 4, 8)]),
])
def test_adapt_rules_fire_as_documented_when_routing_is_unpredictable(name, expected):
    # uniform routing over 64 experts: hit rate and prefetch accuracy stay near zero
    rt = uniform_run(mpl.load(stdlib_file(name)))
    log = [(e["key"], e["old"], e["new"]) for e in rt.stats()["adapt_log"]]
    assert log == expected


def test_fixed_policies_never_adapt():
    rt = uniform_run(mpl.load(stdlib_file("lfu_history")))
    assert rt.stats()["adapt_log"] == []


# ---------------------------------------------------------------- the engines' rules
def test_crf_per_layer_keeps_a_keys_count_across_its_eviction():
    policy = mpl.load(stdlib_file("crf_per_layer"))
    assert policy.ir["cache.eviction"] == "crf" and policy.ir["cache.crf_half_life"] == 128
    with forced("pure"):                 # (the reference store's table, read directly)
        rt, plans = run(policy, steps=30, **DEEPSEEK)
    evicted = {key for p in plans for key, _ in p.evicted}
    assert evicted
    table = rt._impl.caches[0].store.table
    assert any(k in table.crf for k in evicted if k[0] == 0)


def test_layer_aware_beats_lru_on_a_shared_cache_smaller_than_a_step():
    """DeepSeek's shape: 27 layers x top-6 = 162 keys a step against 64 slots."""
    aware, _ = run(mpl.load(stdlib_file("layer_aware")), steps=30, **DEEPSEEK)
    lru, _ = run(mpl.loads("policy p { cache { capacity = 64 } }"), steps=30, **DEEPSEEK)
    assert aware.stats()["hit_rate"] > lru.stats()["hit_rate"] + 0.02


def test_classlru_shared_streams_rather_than_evict_this_steps_keys():
    rt, _ = run(mpl.load(stdlib_file("classlru_shared")), steps=20, **DEEPSEEK)
    assert rt.stats()["streamed"] > 0


def test_learned_prefetch_prefetches_a_predictable_pattern():
    policy = mpl.load(stdlib_file("learned_prefetch"))
    rt = policy.runtime(**SMALL)
    # each layer cycles through 6 sets of 4 experts (24 > its 8 slots), each fixed by the
    # previous layer's set in the same step
    for step in range(80):
        for layer in range(SMALL["num_layers"]):
            base = 3 * layer + 4 * (step % 6)
            rt.dispatch(layer, [(base + i) % 32 for i in range(4)])
    stats = rt.stats()
    assert stats["prefetch_loads"] > 0 and stats["prefetch_accuracy"] > 0.5

