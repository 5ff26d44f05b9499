"""Replay and the cost model of memory tiers (SPEC §12; docs/simulation.md "Memory tiers"):
disk profiles from spec sheets, a disk-bound replay's time against bytes / bandwidth +
reads x latency on every profile, computing from a lower-precision copy, host memory,
``mplc replay`` and ``mplc sweep`` over a tier's capacity as a user runs them, and bad input
(a line, never a traceback)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

import mpl
from mpl.sim import synthesize
from mpl.timemodel import hardware as hw
from cli_helpers import clean, mplc
from property_profiles import prop
from tier_helpers import malformed

DISK_BOUND = """policy d {
    hierarchy {
        tier hot { location = gpu  capacity = 6 }
        tier ram { location = cpu  capacity = 6 }
        tier ssd { location = disk }
    }
}
"""


@pytest.fixture(scope="module")
def deepseek():
    return synthesize("deepseek-v2-lite", steps=12, seed=7)


def test_the_disk_profiles_are_the_spec_sheets():
    assert hw.DISKS["nvme-gen4"]["disk_read_gbps"] == 7.45       # Samsung 990 PRO, PCIe 4.0 x4
    assert hw.DISKS["nvme-gen5"]["disk_read_gbps"] == 14.8       # Samsung 9100 PRO, PCIe 5.0 x4
    assert {p.disk for p in hw.PROFILES.values()} == {"nvme-gen4", "nvme-gen5"}
    for p in hw.PROFILES.values():      # a PCIe 5.0 platform gets a PCIe 5.0 drive
        assert p.disk == ("nvme-gen5" if p.link == "pcie5" else "nvme-gen4")
        assert p.host_memory_gb >= 64
    prof = hw.resolve({"base": "rtx-4090", "disk": "nvme-gen5", "host_memory_gb": 128})
    assert (prof.disk_read_gbps, prof.host_memory_gb) == (14.8, 128)
    with pytest.raises(hw.HardwareError, match="unknown disk 'sata'"):
        hw.resolve({"base": "rtx-4090", "disk": "sata"})


def test_a_profiles_dict_is_every_field_as_dataclasses_gives_it():
    """Profile.to_dict (a replay report's "hardware") is a flat copy: every field a number or
    a string, so it equals dataclasses.asdict, a custom profile too."""
    from dataclasses import asdict
    custom = hw.resolve({"base": "rtx-4090", "disk": "nvme-gen5", "host_memory_gb": 128})
    for p in (*hw.PROFILES.values(), custom):
        d = p.to_dict()
        assert d == asdict(p) and all(isinstance(v, (int, float, str)) for v in d.values())
        d["name"] = "changed"
        assert p.to_dict()["name"] == p.name


@pytest.mark.parametrize("profile", sorted(hw.PROFILES))
def test_a_disk_bound_replay_takes_bytes_over_bandwidth_plus_reads_times_latency(profile, deepseek):
    rep = mpl.loads(DISK_BOUND).replay(deepseek, hardware=profile)
    s, p = rep.sim, hw.PROFILES[profile]
    reads = s["disk_reads"]
    assert reads == rep.stats["tiers"][2]["reads"] and reads > 0.9 * rep.stats["accesses"]
    formula_ms = s["disk_bytes"] / (p.disk_read_gbps * 1e9) * 1e3 + reads * p.disk_latency_us * 1e-3
    assert s["disk_bytes"] == pytest.approx(reads * rep.trace["expert_bytes"])
    assert s["disk_busy_ms"] == pytest.approx(formula_ms, rel=1e-9)
    # the disk is the bottleneck: the whole replay is within 15% of its reads
    assert formula_ms <= s["total_ms"] <= 1.15 * formula_ms


def test_computing_from_a_lower_precision_copy_reads_fewer_bytes():
    c = hw.costs_for(hw.resolve("h100"), model="deepseek-v2-lite")
    full = c.expert_ms_at(c.expert_bytes)
    assert full == pytest.approx(c.gpu_expert_ms(1))
    int4 = c.expert_ms_at(c.expert_bytes / 4)
    launch = c.profile.kernel_launch_us * 1e-3
    assert int4 - launch == pytest.approx((full - launch) / 4)      # decode: memory-bound
    # many tokens: the arithmetic decides, the same from any copy
    assert c.expert_ms_at(c.expert_bytes / 4, 4096) == pytest.approx(c.expert_ms_at(c.expert_bytes, 4096))


def test_an_int4_top_tier_moves_and_reads_a_quarter_of_the_bytes(deepseek):
    fp = mpl.loads("policy a { hierarchy { tier hot { location = gpu  capacity = 40 } } }").replay(deepseek)
    q = mpl.loads("policy a { hierarchy { tier hot { location = gpu  capacity = 40  dtype = int4 } } }").replay(deepseek)
    assert q.stats["hits"] == fp.stats["hits"] and q.stats["loads"] == fp.stats["loads"]
    assert q.stats["bytes_loaded"] == pytest.approx(fp.stats["bytes_loaded"] / 4, rel=1e-6)
    assert q.stats["approximate_computes"] == q.stats["accesses"] - q.stats["streamed"]
    assert q.sim["total_ms"] < fp.sim["total_ms"]


def test_a_host_tier_larger_than_the_machines_memory_is_noted():
    t = synthesize("mixtral-8x7b", steps=3, seed=1)          # 32 x 8 experts of 352 MB: 90 GB
    text = "policy m { hierarchy { tier hot { location = gpu  capacity = 16 } } }"
    rep = mpl.loads(text).replay(t, hardware="rtx-4090")      # a 64 GB desktop
    assert any("more than the host memory of rtx-4090 (64 GB)" in n and "disk tier" in n
               for n in rep.notes), rep.notes
    assert not mpl.loads(text).replay(t, hardware="h100").notes       # 2 TB
    disk = "policy m { hierarchy { tier hot { location = gpu  capacity = 16 }  tier ram { location = cpu  capacity = 32GiB }  tier ssd { location = disk } } }"
    assert not mpl.loads(disk).replay(t, hardware="rtx-4090").notes


# ------------------------------------------------------------------ as a user runs them
@pytest.fixture
def work(tmp_path):
    (tmp_path / "d.moe").write_text(DISK_BOUND)
    out = mplc("trace", "synth", "--preset", "deepseek-v2-lite", "--steps", "6", "-o", "t.mpltrace",
               cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return tmp_path


def test_mplc_replay_reports_every_tier(work):
    out = mplc("replay", "d.moe", "--trace", "t.mpltrace", "--hardware", "rtx-5080", cwd=work)
    clean(out)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "memory tiers:" in text and "disk " in text and "reads," in text
    for name in ("hot", "ram", "ssd"):
        assert any(line.split()[:1] == [name] for line in text.splitlines()), name
    assert "Belady" in text and "top tier 6 slots" in text
    from mpl.runtime import compiled
    if compiled.available():           # the compiled engine holds these tiers: no reason to give
        assert "runtime       pure" not in text
    out = mplc("replay", "d.moe", "--trace", "t.mpltrace", "--json", "--capacity", "12", cwd=work)
    rep = json.loads(out.stdout)
    assert [r["tier"] for r in rep["stats"]["tiers"]] == ["hot", "ram", "ssd"]
    assert rep["stats"]["tiers"][0]["capacity"] == 12 and rep["belady"]["capacities"] == [12]
    assert rep["notes"] == ["capacity 12 is the capacity of the top tier 'hot'"]
    assert rep["tiers"][0]["tiers"][2]["location"] == "disk"
    assert rep["sim"]["disk_reads"] == rep["stats"]["tiers"][2]["reads"]
    assert rep["runtime"]["backend"] == ("compiled" if compiled.available() else "pure")


def test_mplc_sweep_over_a_lower_tiers_capacity(work):
    out = mplc("sweep", "d.moe", "--trace", "t.mpltrace", "--param", "tier.ram.capacity=4,64,400",
               "--json", "--no-progress", cwd=work)
    clean(out)
    assert out.returncode == 0, out.stderr
    points = json.loads(out.stdout)["points"]
    assert [p["params"]["tier.ram.capacity"] for p in points] == [4, 64, 400]
    # a larger host cache: fewer disk reads, faster; the top tier and its optimum unchanged
    tps = [p["tokens_per_s"] for p in points]
    assert tps[0] <= tps[1] <= tps[2] and tps[0] < tps[2]
    assert len({p["hit_rate"] for p in points}) == 1 and len({p["belady"] for p in points}) == 1
    out = mplc("sweep", "d.moe", "--trace", "t.mpltrace", "--capacity", "6,24", "--no-progress", cwd=work)
    assert out.returncode == 0, out.stderr
    assert "Belady" in out.stdout and len(out.stdout.strip().splitlines()) == 6


@pytest.mark.parametrize("args, message", [
    (("sweep", "d.moe", "--param", "tier.nvme.capacity=4,8"), "policy d has no tier 'nvme' (its tiers: hot, ram, ssd)"),
    (("sweep", "d.moe", "--param", "tier.ram.capacity=0"), "'capacity' must be in [1, 4194304]"),
    (("sweep", "d.moe", "--param", "tier.ram.size=4"), "write tier.NAME.PARAM"),
    (("replay", "bands.moe"), "bands.moe:1:12: policy b does not fit the trace's model "
                              "(deepseek-v2-lite): MoE layers 13..26 of deepseek-v2-lite are in "
                              "no band"),
    (("replay", "tiny.moe"), "tiny.moe:1:62: policy t does not fit the trace's model "
                             "(deepseek-v2-lite): tier 'hot': capacity 1 MiB is smaller than one "
                             "expert"),
])
def test_bad_input_is_one_line_and_exit_1(work, args, message):
    (work / "bands.moe").write_text("policy b { per_layer_hierarchy {\n  band layers = 1..12 { tier hot { location = gpu  capacity = 4 } }\n} }\n")
    (work / "tiny.moe").write_text("policy t { hierarchy { tier hot { location = gpu  capacity = 1MiB } } }\n")
    out = mplc(*args, "--trace", "t.mpltrace", "--no-progress", cwd=work)
    clean(out)
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@prop(60, deadline=None)
@given(malformed())
def test_malformed_tier_text_replays_or_fails_with_a_value_error(text):
    t = synthesize("olmoe", steps=2, seed=1)
    try:
        rep = mpl.replay(text, t)
    except ValueError as e:           # PolicyLoadError, ReplayError, RuntimeConfigError, ...
        assert str(e).strip()
        return
    assert rep.stats["accesses"] == sum(len(d.distinct()) for d in t.dispatches)


def test_a_prefetch_into_another_bands_tiers_is_timed_with_that_bands_tiers(deepseek):
    # per_layer_hierarchy whose bands have different tiers (a disk tier in the first, the
    # device cache over host memory in the second): the last layer's dispatch prefetches the
    # first layer's experts of the next token, whose READ steps name the first band's disk
    # tier; the replay times each step with the tiers of its key's band
    layers = deepseek.header.num_layers
    half = layers // 2
    policy = mpl.loads(f"""policy b {{
    per_layer_hierarchy {{
        band layers = 0..{half - 1} {{
            tier hot {{ location = gpu  capacity = 4 }}
            tier ram {{ location = cpu  capacity = 6 }}
            tier ssd {{ location = disk }}
            eviction = lru
        }}
        band layers = {half}..{layers - 1} {{
            tier hot {{ location = gpu  capacity = 4 }}
            eviction = lru
        }}
    }}
    prefetch {{ strategy = history  budget = 2 }}
}}""")
    rep = policy.replay(deepseek, belady=False)
    disk = next(r for r in rep.stats["tiers"] if r["location"] == "disk")
    assert disk["reads"] > 0 and rep.stats["prefetch_loads"] > 0
    assert rep.sim["disk_reads"] == disk["reads"]
