"""Memory tiers live (SPEC §12, docs/offload.md "Memory tiers live"): a disk tier under a
bounded host cache in HuggingFace attach. Greedy tokens and logits bit-identical to the
unmodified model (two families, three experts implementations), the mechanism's disk reads
and the runtime's per-tier statistics equal, a replay of the trace recorded in the same run
equal too, CUDA's ordering rules held on the CUDA-semantics double, the runtime and the
mechanism checked to agree, refusals located and leaving the model and the disk unchanged,
and the acceptance run (experts > 4x the host tier) within its memory bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import generate  # noqa: E402
from tier_helpers import disk_policy  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Offload me to disk, bit for bit!")])
HERE = os.path.dirname(os.path.abspath(__file__))


def tiered(folder, gpu=3, ram=5, extra=None):
    return mpl.loads(disk_policy(folder, gpu, ram, extra))


def gen(model, n=6):
    return generate(model, PROMPT, n)


def rows(stats):
    return {r["location"]: r for r in stats["tiers"]}


@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe"])
@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
def test_bit_identical_and_disk_reads_equal_the_runtimes(tmp_path, family, impl):
    model = build_model(family, layers=3, experts_implementation=impl)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref = gen(model)
    for gpu, ram in ((3, 5), (1, 2)):      # capacity 1: every miss evicts, demotes, reads
        h = tiered(tmp_path, gpu, ram).attach(model)
        assert not any(".experts." in n for n, _ in model.named_parameters())
        files = h.get_stats()["mechanism"]["tiers"]["files"]
        assert len(files) == 3 and all(os.path.isfile(f) for f in files)
        out = gen(model)
        stats = h.get_stats()
        h.detach()
        assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1]), (gpu, ram)
        mech = stats["mechanism"]["tiers"]
        t = rows(stats)
        assert mech["disk_reads"] == t["disk"]["reads"] > 0
        assert mech["disk_bytes_read"] == mech["disk_reads"] * mech["record_bytes"]
        assert mech["demotions"] == t["cpu"]["demotions"]
        assert mech["host_cache_slots"] == t["cpu"]["capacity"] == ram
        assert stats["mechanism"]["copies"] == stats["loads"]
        assert not any(os.path.exists(f) for f in files) and os.listdir(tmp_path) == []
    # detach put every parameter back, bit for bit
    after = dict(model.named_parameters())
    assert set(after) == set(before)
    assert all(torch.equal(after[n].detach(), before[n]) for n in before)
    assert torch.equal(gen(model)[1], ref[1])


def test_replay_of_the_recorded_trace_gives_the_same_tier_statistics(tmp_path):
    model = build_model("tiny-olmoe", layers=3, experts_implementation="batched_mm")
    policy = tiered(tmp_path, 2, 4)
    h = policy.attach(model)
    with Recorder(model) as rec:
        gen(model, 8)
    live = h.get_stats()
    h.detach()
    rep = policy.replay(rec.trace(), belady=False)
    stats = rep.stats if isinstance(getattr(rep, "stats", None), dict) else rep.to_dict()["stats"]
    assert stats["tiers"] == live["tiers"]
    for k in ("accesses", "loads", "evictions", "prefetch_issued", "bytes_loaded"):
        assert stats[k] == live[k], k
    assert live["mechanism"]["tiers"]["disk_reads"] == rows(stats)["disk"]["reads"]


def test_reads_in_the_calling_thread_give_the_same_run(tmp_path):
    # readers=0: nothing overlaps (no deferred prefetch copy), the same tokens and reads
    model = build_model("tiny-mixtral", layers=3, experts_implementation="grouped_mm")
    ref = gen(model)
    got = []
    for readers in (0, 2):
        h = tiered(tmp_path).attach(model, readers=readers)
        out = gen(model)
        got.append(h.get_stats()["mechanism"]["tiers"])
        h.detach()
        assert torch.equal(ref[1], out[1])
    assert got[0]["disk_reads"] == got[1]["disk_reads"]
    assert got[0]["deferred_copies"] == 0 and got[0]["readers"] == 0


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (generate_on_double, host_record_rewritten_in_flight,
                                     ordering_violations, slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=3, experts_implementation="batched_mm")
    ref = gen(model)
    out, stats, ops = generate_on_double(tiered(tmp_path, 1, 2), model, gen)
    stats = stats["mechanism"]
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    log = ops.log
    assert ordering_violations(ops, host_record_rewritten_in_flight, slot_reused_before_demotion) == {}
    # not vacuous: records were rewritten after copies out of them, slots demoted then reused
    assert sum(op.kind == "host_write" for op in log) == stats["tiers"]["disk_reads"] > 2
    assert stats["tiers"]["demotions"] > 0
    assert any(op.kind == "copy" and op.tag == ("demote", "host") and op.non_blocking for op in log)
    assert stats["host_syncs"] == stats["dispatches"]


def test_the_invariant_checks_catch_a_rewrite_in_flight():
    from offload_cuda_double import FakeCudaOps, host_record_rewritten_in_flight
    ops = FakeCudaOps()
    host = ops.host_arena(64)
    dev = torch.zeros(64, dtype=torch.uint8)
    with ops.use(ops.stream()):
        ops.copy(dev, host, non_blocking=True, tag=("demand", 0))
    ops.host_write(host[:16], ("read", 0))        # no wait for the copy: a hazard
    assert len(host_record_rewritten_in_flight(ops.log)) == 1


def test_the_mechanism_checks_that_the_runtime_agrees(tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    h = tiered(tmp_path, 1, 2, extra="").attach(model)
    try:
        gen(model, 2)
        cache = h.engine.tiers.levels[0].cache
        j = next(i for i, k in enumerate(cache.content) if k is not None)
        cache.put(j, (99, 99))                 # the record no longer holds what the runtime thinks
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 4)
    finally:
        h.detach()
    assert os.listdir(tmp_path) == []


def test_what_does_not_run_live_is_refused_located(tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def refused(text, match):
        path = tmp_path / "p.moe"
        path.write_text(text)
        with pytest.raises(AttachError, match=match) as err:
            mpl.load(str(path)).attach(model)
        assert str(err.value).startswith(f"{path}:") and "\n" not in str(err.value)
        assert not hasattr(model, "_mpl_handle")
        after = dict(model.named_parameters())
        assert all(torch.equal(after[n].detach(), before[n]) for n in before)
        assert sorted(os.listdir(tmp_path)) == ["p.moe"]        # no file written
        return str(err.value)

    head = "policy t {\n  hierarchy {\n    tier g { location = gpu  capacity = 2 }\n"
    msg = refused(head + "    tier r { location = cpu  capacity = 4 }\n    tier d { location = disk }\n"
                  "  }\n}\n", "no path")
    assert msg.startswith(f"{tmp_path / 'p.moe'}:5: the disk tier 'd'")
    # (a second gpu tier at the checkpoint's precision, or a low-precision one, runs over
    # host memory and over a host tier and a disk tier: tests/test_offload_gpu_tier.py,
    # tests/test_offload_gpu_tier_disk.py, tests/test_offload_lowprec_disk.py)
    refused(head.replace("capacity = 2", "capacity = 2  dtype = fp16") + "  }\n}\n",
            "fp16, but the model's experts are fp32")
    refused(head + f"    tier r {{ location = cpu  capacity = 4 }}\n    tier d {{ location = disk  "
            f"path = \"{tmp_path}/no/such\" }}\n  }}\n}}\n", "does not exist")
    # (computing on the CPU over a disk tier runs: tests/test_offload_disk_cpu.py)
    # vLLM's live offload runs the same full-precision tiers (tests/test_vllm_live_tiers.py)
    from mpl.api import not_live_yet
    pol = tiered(tmp_path)
    assert not_live_yet(pol.ir, "vllm") is None
    assert not_live_yet(pol.ir, "huggingface") is None


def test_a_gpu_over_host_policy_runs_as_its_cache_twin():
    # no disk: host memory holds every expert (the host store): the cache policy's run
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    pol = mpl.loads("policy t { hierarchy { tier g { location = gpu  capacity = 3 }\n"
                    "tier r { location = cpu } } }")
    h = pol.attach(model)
    out = gen(model)
    stats = h.get_stats()
    h.detach()
    twin = mpl.loads("policy c { cache { capacity = 3 } }").attach(model)
    gen(model)
    cstats = twin.get_stats()
    twin.detach()
    assert torch.equal(ref[1], out[1])
    assert stats["mechanism"]["tiers"]["disk_reads"] == 0
    for k in ("accesses", "hits", "loads", "evictions"):
        assert stats[k] == cstats[k], k


def test_acceptance_experts_four_times_the_host_tier(tmp_path):
    """~288 MiB of experts, a 64 MiB host tier: generate() finishes with the unmodified
    model's tokens and logits, disk reads equal the runtime's, a replay of the trace recorded
    in the run gives the same per-tier statistics, and the process's resident memory plus
    what the OS page cache holds of the expert files grows by at most the host tier + the
    skeleton + the overhead stated below, never by the experts: the reads leave no page of
    the files cached (mincore over each file after the run)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]),
               MALLOC_MMAP_THRESHOLD_="131072", MALLOC_ARENA_MAX="2")
    # (large blocks from mmap, so that the experts' memory freed at attach goes back to the OS)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "disk_tier_acceptance.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["experts_bytes"] >= 4 * r["host_cap"]
    assert r["tokens_equal"] and r["logits_equal"]
    disk = next(t for t in r["live_tiers"] if t["location"] == "disk")
    assert r["disk_reads"] == disk["reads"] > 0
    assert r["replay_tiers"] == r["live_tiers"] and r["replay"]["loads"] == r["live"]["loads"]
    assert r["host_cache_bytes"] <= r["host_cap"]
    KiB, MiB = 1024, 1 << 20
    # the page cache: none of the files after the run where the file system drops pages
    # (a tmpfs folder is its page cache: there the files stay cached, as written)
    assert 0 <= r["cached_after_run"] <= r["cached_after_attach"]
    growth = (r["peak_kib"] - r["base_kib"]) * KiB + r["cached_after_run"]
    # stated overhead: the device slot pool (host memory on a CPU-only machine), the compute
    # temporaries the unmodified model's generate took (measured in the same process), and
    # 48 MiB for the allocator, threads and Python objects
    overhead = r["pool_bytes"] + r["compute_kib"] * KiB + 48 * MiB
    bound = r["host_cap"] + r["skeleton_bytes"] + overhead
    msg = (f"resident growth + page cache {growth / MiB:.1f} MiB; bound {bound / MiB:.1f} MiB = host tier "
           f"{r['host_cap'] / MiB:.0f} + skeleton {r['skeleton_bytes'] / MiB:.1f} + pool "
           f"{r['pool_bytes'] / MiB:.1f} + compute {r['compute_kib'] / KiB:.1f} + 48; experts "
           f"{r['experts_bytes'] / MiB:.0f} MiB; page cache: {r['page_cache']}")
    assert growth <= bound, msg
    assert growth < r["experts_bytes"], msg
