"""Parts over a disk tier live (SPEC §12 ``granularity_split`` with a host tier and a disk tier;
docs/offload.md, "Parts over a disk tier"): the host tier holds part records, each part read
from the disk tier's files as its runs of the expert's record, copied into the part slots
of the device cache, demoted back into part records, and each expert put together from its
parts before it is computed. generate() gives the unmodified model's tokens and logits bit
for bit on every experts implementation; the disk reads, demotions and copies equal the
runtime's per-tier statistics and a replay's of the trace recorded in the same run; CUDA's
ordering rules hold on the CUDA-semantics double; the runtime and the mechanism are checked
to agree; the memory estimate counts the part records; what does not run live is refused,
located."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism import footprint  # noqa: E402
from mpl.mechanism.disk import PartLayout, RecordLayout, part_layout, part_pieces  # noqa: E402
from mpl.mechanism.execute import LiveError  # noqa: E402
from mpl.offload.errors import AttachError  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

from offload_helpers import IMPLS, assert_replay_agrees, generate, row, run_recorded  # noqa: E402

torch.set_num_threads(1)

PROMPT = torch.tensor([encode("Read in parts, put together.")])


def text(folder, gpu=3, ram=5, n=2, extra="prefetch { strategy = history  budget = 1 }",
         path=True):
    where = f'  path = "{folder}"' if path else ""
    return f'''policy t {{
  hierarchy {{
    tier g {{ location = gpu  capacity = {gpu} }}
    tier r {{ location = cpu  capacity = {ram} }}
    tier d {{ location = disk{where} }}
    granularity_split = {n}
    eviction = lru
  }}
  {extra}
}}'''


def gen(model, n=6):
    return generate(model, PROMPT, n)


def run(model, policy):
    return run_recorded(model, policy, PROMPT)


def check_counts(st, rs, ram, n):
    mech = st["mechanism"]
    tiers = mech["tiers"]
    assert_replay_agrees(st, rs)
    assert mech["copies"] == st["loads"] > 0
    assert mech["stream_copies"] == st["streamed"]
    assert tiers["disk_reads"] == row(st, "d")["reads"] > 0
    assert tiers["demotions"] == row(st, "r")["demotions"]
    assert tiers["disk_bytes_read"] == tiers["disk_reads"] * tiers["record_bytes"]
    assert tiers["host_cache_slots"] == row(st, "r")["capacity"] == ram * n


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("family", ["tiny-mixtral", "tiny-qwen2-moe", "tiny-gpt-oss"])
def test_bit_identical_and_counts_equal_the_runtime_and_a_replay(tmp_path, family, impl):
    model = build_model(family, layers=2, experts_implementation=impl)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ref = gen(model)
    # (capacity 1 over 2 host experts in 4 parts: every miss evicts, demotes, reads, and
    # parts the host tier does not admit are read into the bounce records)
    for gpu, ram, n in ((3, 5, 2), (1, 2, 4)):
        policy = mpl.loads(text(tmp_path, gpu, ram, n))
        out, st, rs = run(model, policy)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1]), (gpu, ram, n)
        check_counts(st, rs, ram, n)
        parts = st["mechanism"]["tiers"]["parts"]
        assert parts["split"] == n and parts["gathers"] > 0
        if ram == 2:
            assert st["mechanism"]["tiers"]["bounce_reads"] > 0
        assert os.listdir(tmp_path) == []            # detach removed the files
    after = dict(model.named_parameters())
    assert all(torch.equal(after[k].detach(), before[k]) for k in before)


def test_the_checkpoints_own_files_are_read_in_parts(tmp_path):
    from transformers import AutoModelForCausalLM

    build_model("tiny-qwen2-moe", layers=2).save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path), local_files_only=True).eval()
    listing = sorted(os.listdir(tmp_path))
    ref = gen(model)
    policy = mpl.loads(text(tmp_path, 2, 3, 2, path=False))
    out, st, rs = run(model, policy)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    check_counts(st, rs, 3, 2)
    assert sorted(os.listdir(tmp_path)) == listing          # nothing written


def test_a_part_read_is_its_runs_of_the_experts_record(tmp_path):
    from mpl.mechanism.disk import DiskStore

    g = torch.Generator().manual_seed(1)
    layer = {"w": torch.randn(3, 5, 3, generator=g), "b": torch.randn(3, 5, generator=g)}
    lay = RecordLayout(layer)
    rec = part_layout(layer, 4)
    store = DiskStore(str(tmp_path), lay, [(0, 7)], 3)
    store.write({0: layer})
    store.open(direct=False)
    try:
        ranges = PartLayout(layer, 4).ranges
        for e in range(3):
            got = {"w": [], "b": []}
            for p in range(4):
                buf = torch.zeros(rec.stride, dtype=torch.uint8)
                n = store.read_part(0, e, part_pieces(lay, rec, ranges[p]), buf)
                views = rec.views(buf, 0, 1)
                assert n == sum(k for _s, _d, k in part_pieces(lay, rec, ranges[p]))
                for name in got:
                    a, b = ranges[p][name]
                    got[name].append(views[name][0][:b - a])
            for name, t in layer.items():
                assert torch.equal(torch.cat(got[name]), t[e].reshape(-1))
    finally:
        store.remove()


def test_cuda_ordering_on_the_double(tmp_path):
    from offload_cuda_double import (copies_out_of_order, generate_on_double,
                                     host_buffer_reused_in_flight,
                                     host_record_rewritten_in_flight, ordering_violations,
                                     slot_reused_before_demotion)
    model = build_model("tiny-mixtral", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    out, st, ops = generate_on_double(mpl.loads(text(tmp_path, 1, 2, 4)), model, gen)
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1])
    assert ordering_violations(ops, host_buffer_reused_in_flight, copies_out_of_order,
                               host_record_rewritten_in_flight, slot_reused_before_demotion) == {}
    tiers = st["mechanism"]["tiers"]
    log = ops.log
    # not vacuous: records were rewritten by reads, part slots demoted, parts gathered
    assert sum(op.kind == "host_write" for op in log) == tiers["disk_reads"] > 2
    assert tiers["demotions"] > 0 and tiers["parts"]["gathers"] > 0
    assert any(op.kind == "copy" and op.tag == ("demote", "host") and op.non_blocking
               for op in log)
    assert any(op.kind == "copy" and op.tag[0] == "gather" for op in log)


def test_the_mechanism_checks_that_the_runtime_agrees(tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    h = mpl.loads(text(tmp_path, 1, 2, 2, extra="")).attach(model)
    try:
        gen(model, 2)
        cache = h.engine.tiers.levels[0].cache
        j = next(i for i, k in enumerate(cache.content) if k is not None)
        k = cache.content[j]
        cache.put(j, (k[0], k[1], 1 - k[2]))       # the record holds the other part
        with pytest.raises(LiveError, match="disagree"):
            gen(model, 4)
    finally:
        h.detach()
    assert os.listdir(tmp_path) == []


def test_the_estimate_counts_the_part_records(monkeypatch, tmp_path):
    model = build_model("tiny-mixtral", layers=2)
    policy = mpl.loads(text(tmp_path, 2, 3, 4))
    h = policy.attach(model)
    gen(model, 2)
    tiers = h.get_stats()["mechanism"]["tiers"]
    h.detach()
    template = {n: p.data for n, p in h.layers[0].module._parameters.items()}
    stride = part_layout(template, 4).stride
    assert tiers["record_bytes"] == stride
    assert stride < RecordLayout(template).stride // 3          # a part, not an expert
    # the host tier's part records and one bounce record per part
    assert tiers["host_cache_bytes"] == stride * (3 * 4 + (4 if tiers["bounce_reads"] else 0))
    monkeypatch.setattr(footprint, "host_available", lambda: 1)
    with pytest.raises(AttachError) as err:
        policy.attach(model)
    msg = str(err.value)
    assert "host tier cache +" in msg and "disk bounce records (4 parts) +" in msg
    kib = float(msg.split("host tier cache +")[1].split(" KiB")[0].replace(",", ""))
    assert abs(kib * 1024 - (stride * 12 + 4096)) < 1024
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode,ram", [("cpu_fallback", 5), ("cpu_fallback", 2), ("hybrid", 3)])
def test_the_cpu_computes_an_expert_put_together_from_its_part_records(tmp_path, mode, ram):
    model = build_model("tiny-qwen2-moe", layers=2, experts_implementation="grouped_mm")
    ref = gen(model)
    # (hybrid: every transfer estimated above a microsecond goes to the CPU)
    sched = f"schedule {{ mode = {mode} }}" if mode == "cpu_fallback" else \
        f"schedule {{ mode = {mode}  offload_threshold_ms = 0.001 }}"
    policy = mpl.loads(text(tmp_path, 3, ram, 2, extra=sched))
    out, st, rs = run(model, policy)
    # (on a CPU-only machine the CPU's compute is the model's own)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    tiers = st["mechanism"]["tiers"]
    assert st["cpu_computes"] == st["mechanism"]["cpu_computes"] == tiers["cpu_from_records"] > 0
    assert tiers["disk_reads"] == row(st, "d")["reads"] > 0
    if mode == "cpu_fallback":
        check_counts(st, rs, ram, 2)
        assert rs["cpu_computes"] == st["cpu_computes"]
    assert os.listdir(tmp_path) == []


def test_what_does_not_run_live_is_refused_located(tmp_path):
    from mpl.api import not_live_yet
    ir = mpl.loads(text(tmp_path)).ir
    assert not_live_yet(ir, "huggingface") is None
    assert not_live_yet(ir, "vllm") is None          # vLLM runs it too
