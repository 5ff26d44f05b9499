"""A low-precision gpu tier over a host tier and a disk tier live (SPEC §12; docs/offload.md,
"Low-precision tiers over a disk tier"): an int8, int4 or ``dtype_ladder = [int8, int4]``
warm tier under the full-precision device cache, over a host tier with a capacity over a
disk tier, in HuggingFace attach. A promotion from the host tier into the warm tier is
quantised from the record the Plan's READ filled (or the bounce record of a READ the host
tier did not admit); a demotion from the device cache, by copy or in place, is quantised
from the evicted entry on the device; a promotion from the warm tier to the device cache is
the Plan's Load from the host tier's record; a warm tier's victim that the host tier takes
is read from the disk into the record the Plan names (the tier holds no full-precision copy
to give). generate() gives, bit for bit, the tokens and logits of the same gpu tiers over
host memory holding every expert, on every experts implementation; the approximate computes
(by precision), the keys held at each rung, the disk reads and the fills equal the
runtime's per-tier statistics and a replay's of the trace recorded in the same run; the host
memory held is the host tier's records, one bounce record and one staging record; CUDA's
ordering rules hold on the CUDA-semantics double; the runtime and the mechanism are checked
to agree; the estimate counts the host tier's records and the warm tier's area; a model whose
experts are 4x the host tier generates with the process's resident memory within the host
tier, the skeleton, the warm tier's area and the stated overhead."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402
from mpl.offload.recorder import Recorder  # noqa: E402

from offload_helpers import (  # noqa: E402
    IMPLS, assert_a_disagreement_is_caught, generate, replayed, row)

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Approximate on the device, exact on the disk.")])

WARMS = ("dtype = int8", "dtype = int4", "dtype_ladder = [int8, int4]")


def text(folder, warm="dtype = int8", hot=1, cap=3, ram="2", mechanism="copy", threshold=None,
         disk=True, path=True, extra="prefetch { strategy = history  budget = 1 }"):
    """The policy: ``disk`` False puts host memory holding every expert under the gpu tiers
    (the run a disk-tier run is compared with)."""
    where = f'  path = "{folder}"' if path else ""
    below = (f"tier ram  {{ location = cpu  capacity = {ram} }}\n"
             f"    tier ssd  {{ location = disk{where} }}") if disk else \
        "tier ram  { location = cpu }"
    promote = (f"\n    on promote(warm -> hot) {{ trigger_threshold = {threshold} }}"
               if threshold is not None else "")
    return f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = {hot} }}
    tier warm {{ location = gpu  {warm}  capacity = {cap} }}
    {below}
    on demote(hot -> warm) {{ mechanism = {mechanism} }}{promote}
    eviction = lru
  }}
  {extra}
}}'''


def gen(model, n=6):
    return generate(model, PROMPT, n)


def run(model, policy):
    h = policy.attach(model)
    with Recorder(model) as rec:
        out = gen(model)
    st = h.get_stats()
    h.detach()
    return out, st, replayed(policy, rec.trace(), h.shape)


def check_counts(st, rs, ladder: bool) -> None:
    mech = st["mechanism"]
    tiers = mech["tiers"]
    low = tiers["lowprec"][0]
    w, r, d = row(st, "warm"), row(st, "ram"), row(st, "ssd")
    # the per-tier statistics, and the run's, equal a replay's of the recorded trace
    assert rs["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "evictions", "streamed", "bytes_loaded",
              "approximate_computes", "approximate_by_dtype"):
        assert rs[k] == st[k], k
    # computed from the quantised copies: overall, per tier, by precision
    assert st["approximate_computes"] == tiers["approximate"] == w["approximate"] > 0
    assert tiers["approximate_by_dtype"] == st["approximate_by_dtype"]
    if ladder:
        assert low["resident_at"] == w["resident_at"]
        assert low["approximate_at"] == {dt: st["approximate_by_dtype"].get(dt, 0)
                                         for dt in ("int8", "int4")}
        assert tiers["rung_requants"] == w["requantized"]
    assert 0 < w["resident"] <= low["slots"]
    # into the warm tier: the device cache's victims quantised on the device, promotions
    # from the host tier's records quantised on the host
    assert tiers["requants"] == w["demotions"] > 0
    assert tiers["quantized_from_host"] == w["promotions"] > 0
    # the disk: the Plan's READs, and the warm tier's victims read into the host tier
    assert tiers["disk_reads"] == d["reads"] > 0
    # (a warm victim's record is read from the disk when first used: never, when the host
    # tier rewrites it first)
    assert tiers["demotions"] + tiers["low_demotions"] == r["demotions"]
    assert tiers["demotion_reads"] <= tiers["low_demotions"]
    assert mech["copies"] == st["loads"] and mech["stream_copies"] == st["streamed"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_the_run_over_host_memory_bit_for_bit_and_counts_equal_the_runtime(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    # (1 over 3 over 2 records: every miss evicts in every tier, reads the disk, uses the
    # bounce record; a threshold: accesses computed from the warm tier's copy while the
    # host tier's records turn over)
    for warm, mechanism, thr in ((WARMS[0], "copy", None), (WARMS[1], "in_place_requant", 0.3),
                                 (WARMS[2], "copy", 0.3), (WARMS[2], "in_place_requant", None)):
        want = gen(_attached(model, text(tmp_path, warm, mechanism=mechanism, threshold=thr,
                                         disk=False)))
        model._mpl_handle.detach()
        policy = mpl.loads(text(tmp_path, warm, mechanism=mechanism, threshold=thr))
        out, st, rs = run(model, policy)
        assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1]), (warm, mechanism)
        assert not torch.equal(out[1], ref[1])          # approximate computes happened
        check_counts(st, rs, "ladder" in warm)
        assert os.listdir(tmp_path) == []
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)
    assert torch.equal(gen(model)[1], ref[1])


def _attached(model, body):
    mpl.loads(body).attach(model)
    return model


def test_a_warm_tier_victim_is_read_back_into_the_host_tier(tmp_path):
    # a warm tier of 2 under a device cache of 1: its victims go into the host tier's
    # records (the runtime's DEMOTE warm -> ram), read from the disk
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    out, st, rs = run(model, mpl.loads(text(tmp_path, cap=2, ram="3", mechanism="copy")))
    tiers = st["mechanism"]["tiers"]
    assert tiers["low_demotions"] == row(st, "ram")["demotions"] > 0
    assert 0 < tiers["demotion_reads"] <= tiers["low_demotions"]
    assert tiers["demotions"] == 0          # nothing was copied device to host
    check_counts(st, rs, False)


def test_host_memory_stays_the_host_tiers_records(tmp_path):
    # a host tier of 3 records, far below the experts: the host holds its records and one
    # bounce record (plus the warm tier's one staging record), never an expert more
    model = build_model("tiny-olmoe", layers=2)
    template = {n: p.data for n, p in
                next(m for n, m in model.named_modules() if n.endswith("mlp.experts"))
                ._parameters.items()}
    from mpl.mechanism.disk import RecordLayout
    from mpl.mechanism.lowprec import QuantLayout
    stride = RecordLayout(template).stride
    experts = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                  if ".experts." in n)
    assert experts >= 4 * 3 * stride
    policy = mpl.loads(text(tmp_path, "dtype_ladder = [int8, int4]", hot=2, cap=5, ram="3"))
    h = policy.attach(model)
    gen(model, 4)
    st = h.get_stats()
    h.detach()
    tiers = st["mechanism"]["tiers"]
    assert tiers["host_cache_slots"] == 3 and tiers["disk_reads"] > 0
    assert tiers["bounce_reads"] > 0 and tiers["low_demotions"] > 0
    assert tiers["host_cache_bytes"] == stride * (3 + 1)
    # no host store: the records and the bounce record, their arenas aligned (less than
    # one expert more)
    assert st["memory"]["store_peak_bytes"] == st["memory"]["store_bytes"]
    assert tiers["host_cache_bytes"] <= st["memory"]["store_bytes"] < tiers["host_cache_bytes"] + stride
    low = tiers["lowprec"][0]
    # (a ladder's slots: every key it can hold at its lowest rung, each the first rung's)
    assert low["record_bytes"] == QuantLayout(template, "int8").stride
    assert st["memory"]["lowprec_bytes"] == low["slots"] * low["record_bytes"]
    assert os.listdir(tmp_path) == []


def test_cpu_fallback_computes_from_the_host_tiers_records(tmp_path):
    model = build_model("tiny-mixtral", layers=2, experts_implementation="batched_mm")
    want = gen(_attached(model, text(tmp_path, disk=False, extra="schedule { mode = cpu_fallback }")))
    model._mpl_handle.detach()
    policy = mpl.loads(text(tmp_path, extra="schedule { mode = cpu_fallback }"))
    out, st, rs = run(model, policy)
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    assert st["cpu_computes"] == st["mechanism"]["cpu_computes"] > 0
    assert st["mechanism"]["tiers"]["cpu_from_records"] == st["cpu_computes"]
    assert rs["tiers"] == st["tiers"] and rs["cpu_computes"] == st["cpu_computes"]


def test_the_checkpoints_own_files_serve_the_host_tier(tmp_path):
    from transformers import AutoModelForCausalLM

    build_model("tiny-mixtral", layers=2).save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path), local_files_only=True).eval()
    listing = sorted(os.listdir(tmp_path))
    want = gen(_attached(model, text(tmp_path, WARMS[1], disk=False)))
    model._mpl_handle.detach()
    out, st, rs = run(model, mpl.loads(text(tmp_path, WARMS[1], path=False)))
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    check_counts(st, rs, False)
    assert sorted(os.listdir(tmp_path)) == listing


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion, slot_write_while_read)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    for warm, mechanism in ((WARMS[0], "copy"), (WARMS[2], "in_place_requant")):
        policy = mpl.loads(text(tmp_path, warm, mechanism=mechanism, threshold=0.3))
        want = gen(_attached(model, text(tmp_path, warm, mechanism=mechanism, threshold=0.3)))
        model._mpl_handle.detach()
        out, st, ops = generate_on_double(policy, model, gen)
        assert torch.equal(want[0], out[0]) and torch.equal(want[1], out[1])
        assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                                   host_record_rewritten_in_flight,
                                   slot_reused_before_demotion) == {}
        assert slot_write_while_read(ops.log) == []
        tiers = st["mechanism"]["tiers"]
        # not vacuous: quantised fills from the records, requants, victims read back
        assert tiers["quantized_from_host"] > 0 and tiers["requants"] > 0
        assert tiers["demotion_reads"] > 0
        assert sum(op.kind == "host_write" and op.tag[0] == "read" for op in ops.log) == \
            tiers["disk_reads"] + tiers["demotion_reads"] > 2
        assert any(op.kind == "copy" and op.tag[0] == "quantize" and op.non_blocking
                   for op in ops.log)
    assert os.listdir(tmp_path) == []


def test_the_mechanism_checks_that_the_runtime_agrees(tmp_path):
    pol = mpl.loads(text(tmp_path, extra=""))
    assert_a_disagreement_is_caught(build_model("tiny-mixtral", layers=2), pol,
                                    lambda h: h.engine.tiers.areas[0], gen)
    assert os.listdir(tmp_path) == []


def test_the_estimate_counts_the_records_and_the_area(monkeypatch, tmp_path):
    model = build_model("tiny-olmoe", layers=2)
    policy = mpl.loads(text(tmp_path, WARMS[1], hot=2, cap=5, ram="3"))
    h = policy.attach(model)
    gen(model, 2)
    st = h.get_stats()
    h.detach()
    low = st["mechanism"]["tiers"]["lowprec"][0]
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert "host tier cache +" in msg and "int4 staging record +" in msg
    assert os.listdir(tmp_path) == []
    assert low["bytes"] == 5 * low["record_bytes"]


def test_it_runs_live_in_both_engines(tmp_path):
    # (vLLM's: tests/vllm_suite/test_vllm_more_tiers.py)
    from mpl.api import not_live_yet
    for warm in WARMS:
        ir = mpl.loads(text(tmp_path, warm)).ir
        assert not_live_yet(ir, "huggingface") is None
        assert not_live_yet(ir, "vllm") is None


def test_bands_each_run_their_own_tiers(tmp_path):
    # a band with an int4 warm tier over a disk tier beside a band with a ladder over host
    # memory; the last layer's prefetches reach the first band's tiers
    def bands(disk):
        below = (f"tier ram {{ location = cpu  capacity = 2 }}\n"
                 f"       tier ssd {{ location = disk  path = \"{tmp_path}\" }}") if disk else \
            "tier ram { location = cpu }"
        return f'''policy t {{
  per_layer_hierarchy {{
    band layers = 0..0 {{ tier hot {{ location = gpu  capacity = 1 }}
       tier warm {{ location = gpu  dtype = int4  capacity = 3 }}
       {below}
       eviction = lru }}
    band layers = 1..1 {{ tier hot {{ location = gpu  capacity = 2 }}
       tier warm {{ location = gpu  dtype_ladder = [int8, int4]  capacity = 2 }}
       eviction = lfu }}
  }}
  prefetch {{ strategy = history  budget = 1 }}
}}'''
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="batched_mm")
    want = gen(_attached(model, bands(False)))
    model._mpl_handle.detach()
    policy = mpl.loads(bands(True))
    out, st, rs = run(model, policy)
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    assert rs["tiers"] == st["tiers"]
    for k in ("accesses", "loads", "approximate_computes", "approximate_by_dtype"):
        assert rs[k] == st[k], k
    tiers = st["mechanism"]["tiers"]
    assert st["approximate_computes"] == tiers["approximate"] > 0
    assert [a["dtype"] for a in tiers["lowprec"]] == ["int4", "int8"]
    d = next(r for r in st["tiers"] if r["location"] == "disk")
    assert tiers["disk_reads"] == d["reads"] > 0
    assert os.listdir(tmp_path) == []


def test_acceptance_experts_four_times_the_host_tier_with_an_int4_warm_tier(tmp_path):
    """~288 MiB of experts, a 64 MiB host tier, an int4 warm tier of 12 under a device cache
    of 4 (tests/disk_tier_acceptance.py, in a process of its own): the approximate computes
    and per-tier statistics equal a replay's, and the process's resident memory grows by at
    most the host tier + the skeleton + the warm tier's area and staging record + the
    overhead test_offload_disk_tier.py states, never by the experts."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here),
                                                       os.environ.get("PYTHONPATH", "")]),
               MALLOC_MMAP_THRESHOLD_="131072", MALLOC_ARENA_MAX="2")
    proc = subprocess.run([sys.executable, os.path.join(here, "disk_tier_acceptance.py"),
                           str(tmp_path), "int4"], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["experts_bytes"] >= 4 * r["host_cap"]
    assert r["replay_tiers"] == r["live_tiers"] and r["replay"]["loads"] == r["live"]["loads"]
    a = r["approximate"]
    assert a["live"] == a["mechanism"] == a["replay"] > 0
    disk = next(t for t in r["live_tiers"] if t["location"] == "disk")
    assert r["disk_reads"] == disk["reads"] > 0
    assert r["host_cache_bytes"] <= r["host_cap"]
    KiB, MiB = 1024, 1 << 20
    growth = (r["peak_kib"] - r["base_kib"]) * KiB
    # (on a CPU-only machine the device's slot pool and the warm tier's area are host memory)
    overhead = r["pool_bytes"] + r["compute_kib"] * KiB + 48 * MiB
    bound = (r["host_cap"] + r["skeleton_bytes"] + r["lowprec_bytes"] + r["staging_bytes"]
             + overhead)
    msg = (f"resident growth {growth / MiB:.1f} MiB; bound {bound / MiB:.1f} MiB = host tier "
           f"{r['host_cap'] / MiB:.0f} + skeleton {r['skeleton_bytes'] / MiB:.1f} + warm area "
           f"{r['lowprec_bytes'] / MiB:.1f} + staging {r['staging_bytes'] / MiB:.2f} + pool "
           f"{r['pool_bytes'] / MiB:.1f} + compute {r['compute_kib'] / KiB:.1f} + 48; experts "
           f"{r['experts_bytes'] / MiB:.0f} MiB")
    assert growth <= bound, msg
    assert growth < r["experts_bytes"], msg
    assert os.listdir(tmp_path) == []


def test_over_a_host_tier_without_a_disk_tier_the_host_tier_holds_every_expert(tmp_path):
    # without a disk tier the host tier is the last tier and holds every expert (SPEC §12):
    # with a capacity that does, the warm tier runs over it as over host memory; one that
    # does not is refused, located (MPL518), before the model changes
    from mpl.diagnostics import PolicyError
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="eager")
    def capped(n):
        body = text(tmp_path, disk=False).replace("tier ram  { location = cpu }",
                                                  f"tier ram  {{ location = cpu  capacity = {n} }}")
        assert f"capacity = {n} }}" in body
        return body

    over_all = mpl.loads(capped(64))
    want = gen(_attached(model, text(tmp_path, disk=False)))
    model._mpl_handle.detach()
    out, st, rs = run(model, over_all)
    assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])
    assert rs["tiers"] == st["tiers"] and st["approximate_computes"] > 0
    path = tmp_path / "p.moe"
    path.write_text(capped(2))
    with pytest.raises(PolicyError, match="MPL518") as err:
        mpl.load(str(path)).attach(model)
    assert str(path) in str(err.value)
    assert not hasattr(model, "_mpl_handle")
