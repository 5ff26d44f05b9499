"""A dispatch that streams more experts than the pool's transient entries (``attach(...,
stream_slots=N)`` below the experts per layer, a cache smaller than a prefill's working set)
is computed in passes, as vLLM's live executor computes it: the same steps
(``mpl.mechanism.execute.passes``: ascending ranges of expert ids, each with at most N
streamed experts). The eager loop adds expert by expert in id order into one output across
the passes; the other implementations compute each pass's (token, k) pairs as rows of their
own and weight and sum them once, in the kernel's order: every implementation stays
bit-identical to the unmodified model. Copies still equal the runtime's loads and streamed
experts. On the CPU without memory tiers (the device is host memory, and the host store holds
every expert) the implementations other than eager compute such a dispatch from the host
store's own layer tensors in one call instead (the host window): the passes of those are run
here on CUDA's operations (the test double)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mpl  # noqa: E402
from mpl.mechanism.execute import passes  # noqa: E402
from mpl.offload.hf import attach  # noqa: E402
from mpl.offload.models import build_model, encode  # noqa: E402

torch.set_num_threads(1)
PROMPT = torch.tensor([encode("Passes over the transient entries, please.")])


def gen(model, n=4):
    with torch.no_grad():
        out = model.generate(PROMPT, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def _run(preset, impl, body="cache { capacity = 2 }", stream_slots=2):
    model = build_model(preset, experts_implementation=impl)
    ref = gen(model)
    h = attach(mpl.loads("policy p {\n" + body + "\n}"), model, stream_slots=stream_slots)
    try:
        got = gen(model)
        st = h.get_stats()
    finally:
        h.detach()
    assert torch.equal(gen(model)[0], ref[0])          # detach restores the model
    return ref, got, st


def test_passes_are_ascending_id_ranges_with_at_most_n_streamed():
    resident = [(6, 10), (1, 11)]
    streamed = [7, 0, 3, 5, 2]
    assert passes(resident, streamed, 5) == [(resident, streamed)]       # fits: one call
    calls = passes(resident, streamed, 2)
    assert calls == [([(1, 11)], [0, 2]), ([(6, 10)], [3, 5]), ([], [7])]
    flat = [e for res, grp in calls for e in sorted([x for x, _ in res] + grp)]
    assert flat == sorted(flat)                                          # id ranges, in order
    # staged: every device expert takes a transient entry
    staged = passes(resident, streamed, 3, stage=True)
    assert all(len(r) + len(g) <= 3 for r, g in staged) and len(staged) == 3
    assert passes([], [], 1) == [([], [])]                               # all on the CPU


@pytest.mark.parametrize("preset", ["tiny-mixtral", "tiny-qwen3-moe", "tiny-gpt-oss"])
def test_eager_in_passes_is_bit_identical(preset):
    (ref_seq, ref_logits), (seq, logits), st = _run(preset, "eager")
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    m = st["mechanism"]
    assert m["multi_pass_dispatches"] > 0                  # the prefill needed passes
    assert m["copies"] == st["loads"] and m["stream_copies"] == st["streamed"] > 0
    assert m["stream_slots"] == 2


@pytest.mark.parametrize("impl", ["batched_mm", "grouped_mm"])
@pytest.mark.parametrize("preset", ["tiny-qwen3-moe", "tiny-mixtral", "tiny-gpt-oss"])
def test_other_implementations_in_passes_are_bit_identical(impl, preset):
    from offload_cuda_double import generate_on_double, ordering_violations

    model = build_model(preset, experts_implementation=impl)
    ref = gen(model)
    (seq, logits), st, ops = generate_on_double(mpl.loads("policy p {\n cache { capacity = 2 }\n}"),
                                                model, gen, stream_slots=2)
    assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1])
    m = st["mechanism"]
    assert m["multi_pass_dispatches"] > 0 and m["host_window_dispatches"] == 0
    assert m["copies"] == st["loads"] and m["stream_copies"] == st["streamed"]
    assert not ordering_violations(ops)


@pytest.mark.parametrize("impl", ["batched_mm", "grouped_mm"])
@pytest.mark.parametrize("preset", ["tiny-qwen3-moe", "tiny-mixtral", "tiny-gpt-oss"])
def test_on_the_cpu_a_dispatch_over_the_transient_entries_reads_the_host_store(impl, preset):
    (ref_seq, ref_logits), (seq, logits), st = _run(preset, impl)
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    m = st["mechanism"]
    assert m["host_window_dispatches"] > 0 and m["multi_pass_dispatches"] == 0
    # a dispatch within the transient entries streams through them; the others copy none
    assert m["copies"] == st["loads"] and m["host_window_streamed"] > 0
    assert m["stream_copies"] + m["host_window_streamed"] == st["streamed"]


@pytest.mark.parametrize("impl", ["batched_mm", "grouped_mm"])
def test_on_the_cpu_the_bounded_default_is_bit_identical_under_two_threads(impl):
    # 64 experts a layer, two threads: the default transient area is bounded (TRANSIENT_MIN
    # entries) and a prefill streams more, computed from the host store in one call (passes
    # of multi-threaded CPU grouped_mm changed the last bits on this shape)
    from mpl.mechanism.footprint import TRANSIENT_MIN

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = build_model("tiny-mixtral", experts_implementation=impl, num_local_experts=64)
        ref = gen(model)
        h = attach(mpl.loads("policy p {\n cache { capacity = 4 }\n}"), model)
        try:
            seq, logits = gen(model)
            st = h.get_stats()
        finally:
            h.detach()
    finally:
        torch.set_num_threads(old)
    assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1])
    m = st["mechanism"]
    assert m["stream_slots"] == TRANSIENT_MIN < 64
    assert m["host_window_dispatches"] > 0 and m["multi_pass_dispatches"] == 0
    assert m["stream_copies"] + m["host_window_streamed"] == st["streamed"]


def test_grouped_mm_with_two_threads_stages_each_pass_within_the_transient_entries():
    # CPU grouped_mm with several threads stages every device expert of a pass in the
    # transient entries in id order: a pass then holds at most stream_slots experts in all
    # (memory tiers: the host store does not hold every expert, so the CPU runs passes too)
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (ref_seq, ref_logits), (seq, logits), st = _run(
            "tiny-qwen3-moe", "grouped_mm", stream_slots=3,
            body="hierarchy {\n tier gpu { location = gpu  capacity = 6 }\n"
                 " tier host { location = cpu }\n}")
    finally:
        torch.set_num_threads(old)
    assert torch.equal(seq, ref_seq) and torch.equal(logits, ref_logits)
    m = st["mechanism"]
    assert m["staging_copies"] > 0 and m["multi_pass_dispatches"] > 0


def test_the_default_transient_area_is_bounded():
    # a few entries per routed expert, at least TRANSIENT_MIN, never more than E; on a GPU
    # and on the CPU, with memory tiers or without
    from mpl.mechanism.footprint import TRANSIENT_MIN, TRANSIENT_PER_TOP_K, default_stream_slots
    assert default_stream_slots(8, 2) == 8
    assert default_stream_slots(256, 8) == max(TRANSIENT_MIN, 8 * TRANSIENT_PER_TOP_K)
    assert default_stream_slots(256, 2) == TRANSIENT_MIN


@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
def test_on_the_cpu_with_memory_tiers_the_bounded_default_runs_in_passes_bit_identically(
        impl, tmp_path):
    # 40 experts a layer, two threads, every family: with memory tiers the host store does
    # not compute (a disk tier: it does not even hold every expert), so a prefill that
    # streams more experts than the default area holds is computed in passes, on the CPU
    # as on a GPU; the tokens and logits are the unmodified model's, bit for bit. Where the
    # kernel computes a row by its place in its group (CPU grouped_mm under two threads on
    # some machines), passes could change the bits: the default is then one entry per
    # expert, and no pass runs
    from mpl.mechanism.footprint import TRANSIENT_MIN
    from mpl.offload.engine import rows_keep_their_bits
    from mpl.offload.hf import discover
    from mpl.offload.models import PRESETS, with_experts

    disk = ("hierarchy {\n tier gpu { location = gpu  capacity = 3 }\n"
            " tier ram { location = cpu  capacity = 24 }\n"
            f' tier ssd {{ location = disk  path = "{tmp_path}" }}\n}}')
    host = "hierarchy {\n tier gpu { location = gpu  capacity = 3 }\n tier ram { location = cpu }\n}"
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for i, preset in enumerate(PRESETS):
            model = build_model(preset, experts_implementation=impl, **with_experts(preset, 40))
            keeps = impl == "eager" or rows_keep_their_bits(discover(model)[0], (impl,))
            ref = gen(model)
            h = attach(mpl.loads("policy p {\n" + (disk if i % 2 else host) + "\n}"), model)
            try:
                seq, logits = gen(model)
                st = h.get_stats()
            finally:
                h.detach()
            assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1]), preset
            m = st["mechanism"]
            if keeps:
                assert m["stream_slots"] == TRANSIENT_MIN and m["multi_pass_dispatches"] > 0, preset
            else:
                assert m["stream_slots"] == 40 and m["multi_pass_dispatches"] == 0, preset
            assert m["host_window_dispatches"] == 0
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("impl", ["eager", "batched_mm", "grouped_mm"])
def test_a_model_with_many_experts_runs_in_passes_by_default_bit_identically(impl):
    # 40 experts per layer, CUDA's operations (the test double): the default transient area
    # is TRANSIENT_MIN entries, the prefill streams more in one dispatch, in passes
    from offload_cuda_double import generate_on_double, ordering_violations
    from mpl.mechanism.footprint import TRANSIENT_MIN

    model = build_model("tiny-mixtral", experts_implementation=impl, num_local_experts=40)
    ref = gen(model)
    (seq, logits), st, ops = generate_on_double(mpl.loads("policy p {\n cache { capacity = 2 }\n}"),
                                                model, gen)
    assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1])
    m = st["mechanism"]
    assert m["stream_slots"] == TRANSIENT_MIN and m["multi_pass_dispatches"] > 0
    assert m["copies"] == st["loads"] and m["stream_copies"] == st["streamed"]
    assert not ordering_violations(ops)


@pytest.mark.parametrize("probe", ["forced", "measured"])
def test_grouped_mm_passes_with_too_few_entries_below_keep_the_bits(probe, monkeypatch):
    # CPU grouped_mm under two threads, 40 experts a layer, a transient area the caller
    # names (3 entries) over memory tiers: a pass has fewer pool entries below it than the
    # dispatch has experts below it, so the ordered window cannot lie in the pool. Where the
    # kernel computes a row by its place in its group it gathers the window (zeros for the
    # experts below, then the pass's entries): the bits stay the unmodified model's.
    # "forced": the probe says the kernel does, whatever this machine's kernel does
    from mpl.offload.engine import Engine
    from mpl.offload.models import with_experts

    if probe == "forced":
        monkeypatch.setattr(Engine, "_rows_keep_bits", lambda self, *a: False)
    body = "hierarchy {\n tier gpu { location = gpu  capacity = 3 }\n tier ram { location = cpu }\n}"
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for preset in ("tiny-mixtral", "tiny-qwen3-moe"):
            model = build_model(preset, experts_implementation="grouped_mm",
                                **with_experts(preset, 40))
            ref = gen(model)
            h = attach(mpl.loads("policy p {\n" + body + "\n}"), model, stream_slots=3)
            try:
                seq, logits = gen(model)
                m = h.get_stats()["mechanism"]
            finally:
                h.detach()
            assert torch.equal(seq, ref[0]) and torch.equal(logits, ref[1]), preset
            assert m["multi_pass_dispatches"] > 0, preset
            if probe == "forced":
                assert m["gathered_passes"] > 0, preset
    finally:
        torch.set_num_threads(old)
