"""A dispatch beyond the transient entries, computed over groups of rows
(``mpl.mechanism.execute.row_groups``, ``LiveExecutor(row_passes=...)``): the way vLLM's live
offload keeps its bits with a bounded transient area, since its kernels add each token's
top-k outputs inside (a pass over some experts rounds a partial sum). The CPU kernel computes
a token the same whatever other tokens it is given (``ALONE``: a call on the group's rows);
a kernel whose tiling follows the number of rows keeps it with every row in every call, the
other rows' experts the zero entry (``IN_PLACE``); ``row_probe`` tells them apart.

Without vLLM: bfloat16 MoE layers and a kernel that does what vLLM's CPU kernel does with
them (each row's top-k outputs added in float32 in top-k order, rounded once), real
runtimes as the vLLM worker builds them, memory tiers of every kind the live executor runs
(host memory, a host tier over a disk tier read through the bounce record, a low-precision
gpu tier, a second full-precision gpu tier, experts in parts). Two transient entries give
every output of a run with one entry per expert, bit for bit, and the same runtime and
mechanism counts; passes over experts do not (the test can fail)."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, strategies as st  # noqa: E402

import mpl  # noqa: E402
from mpl.mechanism.execute import first_fit_groups, group_entries, row_groups  # noqa: E402
from mpl.mechanism.live import ALONE, IN_PLACE, LiveExecutor, row_probe, silu_experts  # noqa: E402
from mpl.mechanism.shadow import policy_runtime  # noqa: E402
from mpl.mechanism.tiered import TierBuild  # noqa: E402
from mpl.trace import TraceHeader  # noqa: E402

import tier_helpers  # noqa: E402
from property_profiles import prop  # noqa: E402
from live_layers import E, H, I, K, L, dispatch_steps, random_layers  # noqa: E402

torch.set_num_threads(1)


# ---------------------------------------------------------------------------- the groups
def _copies_made(groups, slots):
    return sum(map(len, group_entries(groups, slots)))


@prop(300)
@given(st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=4), min_size=1, max_size=40),
       st.sets(st.integers(0, 11)), st.integers(1, 6))
def test_row_groups_cover_every_row_once_within_the_entries(rows, streamed, slots):
    groups = row_groups(rows, streamed, slots)
    need_of = [[e for e in dict.fromkeys(r) if e in streamed] for r in rows]
    if any(len(n) > slots for n in need_of):
        assert groups is None
        return
    assert sorted(i for idx, _ in groups for i in idx) == list(range(len(rows)))
    for idx, need in groups:
        assert idx == sorted(idx) and len(need) == len(set(need)) <= slots
        assert set(need) == {e for i in idx for e in need_of[i]}
    # never more copies than placing the rows first fit
    assert _copies_made(groups, slots) <= _copies_made(first_fit_groups(rows, streamed, slots),
                                                       slots)


@prop(300)
@given(st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=4), min_size=1, max_size=40),
       st.integers(4, 8))
def test_group_entries_hold_each_calls_experts_together(rows, slots):
    # every call's experts in the entries at once, nothing copied that an entry holds, no
    # entry overwritten while its expert is needed by the call
    groups = row_groups(rows, set(range(12)), slots)
    entries: dict[int, int] = {}            # entry -> expert
    first = set()
    for (_, need), made in zip(groups, group_entries(groups, slots)):
        for e, i in made:
            assert 0 <= i < slots and e not in entries.values()
            assert entries.get(i) not in need
            entries[i] = e
            first.add(e)
        assert set(need) <= set(entries.values())
    assert first == {e for _, need in groups for e in need}


def test_row_groups_place_rows_first_fit_when_experts_are_few():
    rows = [[0, 1], [2, 3], [1, 0], [4, 5], [2, 9]]
    # (expert 9 is resident: row 4 needs only 2, which the second call has); each streamed
    # expert copied once
    assert row_groups(rows, {0, 1, 2, 3, 4, 5}, 2) == [([0, 2], [0, 1]), ([1, 4], [2, 3]),
                                                       ([3], [4, 5])]
    assert first_fit_groups(rows, {0, 1, 2, 3, 4, 5}, 2) == row_groups(rows, {0, 1, 2, 3, 4, 5}, 2)
    assert row_groups([[0, 1, 2]], {0, 1, 2}, 2) is None
    assert first_fit_groups([[0, 1, 2]], {0, 1, 2}, 2) is None


def test_row_groups_build_calls_that_share_experts_when_routing_spreads():
    # 512 tokens, each 8 of 128 experts at random, 32 entries: first fit copies an expert
    # again and again; calls built one after another, each from the token that shares most
    # with the call before, copy about a third less
    rng = random.Random(0)
    rows = [rng.sample(range(128), 8) for _ in range(512)]
    groups = row_groups(rows, set(range(128)), 32)
    built = _copies_made(groups, 32)
    fit = _copies_made(first_fit_groups(rows, set(range(128)), 32), 32)
    assert built < 0.8 * fit, (built, fit)
    assert sorted(i for idx, _ in groups for i in idx) == list(range(len(rows)))


def _entries_by_scan(groups, slots):
    """group_entries written plainly: at each copy with no entry free, every expert held
    that the call does not need is looked at, and the one needed again furthest ahead (the
    first held of those tied) gives way."""
    from bisect import bisect_right
    uses = {}
    for n, (_, need) in enumerate(groups):
        for e in need:
            uses.setdefault(e, []).append(n)

    def next_use(e, n):
        u = uses[e]
        j = bisect_right(u, n)
        return u[j] if j < len(u) else len(groups)

    held, free, out = {}, list(range(slots - 1, -1, -1)), []
    for n, (_, need) in enumerate(groups):
        made = []
        for e in need:
            if e not in held:
                if not free:
                    victim = max((h for h in held if h not in need), key=lambda h: next_use(h, n))
                    free.append(held.pop(victim))
                held[e] = free.pop()
                made.append((e, held[e]))
        out.append(made)
    return out


@prop(300)
@given(st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=5), min_size=1, max_size=60),
       st.integers(1, 8), st.booleans())
def test_group_entries_are_the_plain_scans(rows, slots, first_fit):
    # the heap group_entries keeps gives the very copies and entries of looking at every
    # expert held at each copy (ties included: many experts are never needed again)
    make = first_fit_groups if first_fit else row_groups
    groups = make(rows, set(range(16)), slots)
    if groups is None:
        return
    plain = [(list(idx), list(need)) for idx, need in groups]
    assert group_entries(plain, slots) == _entries_by_scan(plain, slots)


def test_the_grouping_kept_carries_the_copies_it_was_chosen_by(monkeypatch):
    # row_groups counts each grouping's copies to choose; the executor's group_entries of
    # the grouping kept gives those very copies without working them out again, and works
    # them out afresh for another number of entries
    from mpl.mechanism import execute
    rng = random.Random(1)
    rows = [rng.sample(range(64), 4) for _ in range(96)]
    groups = row_groups(rows, set(range(64)), 8)
    plain = [(list(idx), list(need)) for idx, need in groups]
    worked = []
    real = execute._entries
    monkeypatch.setattr(execute, "_entries", lambda g, n: worked.append(n) or real(g, n))
    assert group_entries(groups, 8) == real(plain, 8) and worked == []
    assert group_entries(groups, 9) == real(plain, 9) and worked == [9]
    assert group_entries(plain, 8) == real(plain, 8) and worked == [9, 8]


def test_row_groups_stay_linear_in_a_large_step():
    # a thousand tokens with experts of their own: a call each, in order; a token with no
    # streamed expert joins a call (the first of the last ROW_GROUP_WINDOW calls, or the call
    # being built)
    rows = [[2 * i, 2 * i + 1] for i in range(1000)] + [[9998, 9999]]
    groups = row_groups(rows, set(range(2000)), 2)
    assert len(groups) == 1000
    assert [need for _, need in groups] == [[2 * i, 2 * i + 1] for i in range(1000)]
    assert sorted(i for idx, _ in groups for i in idx) == list(range(1001))


# ---------------------------------------------------------------------------- the executor
def fused_kernel(ordinal, x, tensors, weights, ids, first, shared):
    """vLLM's CPU kernel in miniature: each row's top-k outputs added in float32, in top-k
    order, inside the call, the sum rounded to the layers' dtype once."""
    w = {n: t.float() for n, t in tensors.items()}
    return silu_experts(x.float(), w, weights.float(), ids).to(x.dtype)


def _layers():
    return [{n: t.to(torch.bfloat16) for n, t in layer.items()} for layer in random_layers()]


EXPERT_BYTES = (2 * I * H + H * I) * 2


def _steps():
    return [(layer, x.to(torch.bfloat16), w, ids, d)
            for _, layer, x, w, ids, d in dispatch_steps(12, 3)]


def _policies(folder):
    disk = tier_helpers.disk_policy(folder, 2, 2, "")
    return {
        "host": "policy h { hierarchy { tier g { location = gpu  capacity = 2 }\n"
                "tier r { location = cpu } } }\n",
        "disk": disk,
        "int8": "policy w { hierarchy { tier hot { location = gpu  capacity = 2 }\n"
                "tier warm { location = gpu  dtype = int8  capacity = 3 }\n"
                "tier ram { location = cpu }\n"
                "on demote(hot -> warm) { mechanism = in_place_requant } } }\n",
        "gpu2": "policy g { hierarchy { tier g { location = gpu  capacity = 2 }\n"
                "tier g2 { location = gpu  capacity = 3 }\ntier r { location = cpu } } }\n",
        "split-disk": disk.replace("\n    }\n", "\n        granularity_split = 2\n    }\n", 1),
    }


def _start(text, slots, row_passes, kernel=fused_kernel, ops=None):
    """(executor, runtime, its tiers, layers) as vLLM's Offload builds them."""
    policy = mpl.loads(text)
    header = TraceHeader("tiny", L, tuple(range(L)), E, K, EXPERT_BYTES, "test")
    _, _, rt = policy_runtime(policy, header)
    layers = _layers()
    build = TierBuild(rt, layers, list(range(L)), ir=policy.ir)
    ex = LiveExecutor(rt, layers, "cpu", kernel=kernel, stream_slots=slots, tiers=build,
                      readers=2, ops=ops, row_passes=row_passes)
    return ex, rt, build, layers


def _run(text, slots, row_passes, kernel=fused_kernel):
    ex, rt, build, _ = _start(text, slots, row_passes, kernel)
    try:
        outs = []
        for layer, x, w, ids, d in _steps():
            ex.plan(d)
            outs.append(ex.forward(layer, x, w, ids))
        ex.flush_stalls()
        return outs, rt.stats(), ex.stats()
    finally:
        ex.release()
        build.remove()


#: what two runs may differ in besides the decisions: timings, and the files' names (a new
#: folder per run); a copy again within a dispatch that reads a record again is an unplanned
#: read, counted apart
WORK = ("unplanned_reads", "read_wait_ms", "read_busy_ms", "files")


def _decisions(m: dict) -> dict:
    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in WORK}
        if isinstance(d, list):
            return [strip(v) for v in d]
        return d
    keep = {k: v for k, v in m.items() if k in (
        "dispatches", "copies", "demand_copies", "background_copies", "prefetch_copies",
        "stream_copies", "bytes_copied", "cpu_computes")}
    keep["tiers"] = strip(m["tiers"])
    return keep


CASES = ("host", "disk", "int8", "gpu2", "split-disk")


@pytest.mark.parametrize("mode", [ALONE, IN_PLACE])
@pytest.mark.parametrize("case", CASES)
def test_two_entries_over_groups_of_rows_give_one_calls_bits(tmp_path, case, mode):
    text = _policies(str(tmp_path))[case]
    one, rt_one, m_one = _run(text, E, row_passes=mode)
    rows, rt_rows, m_rows = _run(text, 2, row_passes=mode)
    assert m_one["multi_pass_dispatches"] == 0
    assert m_rows["row_pass_dispatches"] == m_rows["multi_pass_dispatches"] > 0
    for n, (a, b) in enumerate(zip(one, rows)):
        assert torch.equal(a, b), (case, n)
    drop = ("stall_ms",)
    assert ({k: v for k, v in rt_one.items() if k not in drop}
            == {k: v for k, v in rt_rows.items() if k not in drop})
    assert _decisions(m_one) == _decisions(m_rows), case
    assert m_rows["passes"] > m_rows["dispatches"]


def test_copies_again_are_counted_apart_and_passes_over_experts_lose_bits(tmp_path):
    text = _policies(str(tmp_path))["disk"]
    one, _, _ = _run(text, E, row_passes=ALONE)
    _, _, m_rows = _run(text, 2, row_passes=ALONE)
    experts, _, m_exp = _run(text, 2, row_passes=None)
    assert m_rows["restream_copies"] > 0 and m_exp["restream_copies"] == 0
    assert m_exp["row_pass_dispatches"] == 0 < m_exp["multi_pass_dispatches"]
    # a pass over some experts rounds a partial sum: the bits move
    assert any(not torch.equal(a, b) for a, b in zip(one, experts))


def test_a_row_beyond_the_entries_runs_in_passes_over_experts(tmp_path):
    # one transient entry, two experts per token: a token whose two experts both stream has
    # no group of rows; the dispatch runs over experts (the result rounded per pass)
    text = _policies(str(tmp_path))["host"]
    _, _, m = _run(text, 1, row_passes=ALONE)
    assert m["multi_pass_dispatches"] > m["row_pass_dispatches"]


def tiled_kernel(ordinal, x, tensors, weights, ids, first, shared):
    """A kernel whose arithmetic follows the number of rows in the call (as a GPU kernel's
    tiling does): rows computed in bfloat16 from four rows on, in float32 below."""
    if x.shape[0] >= 4:
        return silu_experts(x, tensors, weights.to(x.dtype), ids)
    return fused_kernel(ordinal, x, tensors, weights, ids, first, shared)


def test_the_probe_tells_which_groups_of_rows_keep_a_kernels_bits():
    layer = _layers()[0]
    assert row_probe(fused_kernel, layer, H, K, ALONE)
    assert row_probe(fused_kernel, layer, H, K, IN_PLACE)
    assert not row_probe(tiled_kernel, layer, H, K, ALONE)
    assert row_probe(tiled_kernel, layer, H, K, IN_PLACE)
    # (the probe changes nothing the layer holds)
    assert all(torch.equal(a, b) for a, b in zip(layer.values(), _layers()[0].values()))


def test_a_kernel_tiled_by_its_rows_keeps_its_bits_in_place(tmp_path):
    # every call keeps the dispatch's shape: the tiling, and so each row, as in one call;
    # on the group's rows alone the tiling changes and so do the bits
    text = _policies(str(tmp_path))["disk"]
    one, _, _ = _run(text, E, IN_PLACE, kernel=tiled_kernel)
    in_place, _, m = _run(text, 2, IN_PLACE, kernel=tiled_kernel)
    alone, _, _ = _run(text, 2, ALONE, kernel=tiled_kernel)
    assert m["row_pass_dispatches"] > 0
    assert all(torch.equal(a, b) for a, b in zip(one, in_place))
    assert any(not torch.equal(a, b) for a, b in zip(one, alone))


@pytest.mark.parametrize("mode", [ALONE, IN_PLACE])
def test_groups_of_rows_keep_cuda_ordering_on_the_double(tmp_path, mode):
    from offload_cuda_double import (FakeCudaOps, compute_before_copy, foreign_waits,
                                     host_record_rewritten_in_flight, slot_write_while_read,
                                     unpinned_async_copies)

    ops = FakeCudaOps()
    ex, _, build, layers = _start(_policies(str(tmp_path))["disk"], 2, mode, ops=ops)
    try:
        for layer, x, w, ids, d in _steps():
            ex.plan(d)
            got = ex.forward(layer, x, w, ids)
            assert torch.equal(got, fused_kernel(layer, x, layers[layer], w, ids, True, None))
        ex.flush_stalls()
        m = ex.stats()
        assert m["row_pass_dispatches"] > 0 and m["restream_copies"] > 0
        log = ops.log
        assert host_record_rewritten_in_flight(log) == []
        assert slot_write_while_read(log) == []
        assert compute_before_copy(log) == []
        assert foreign_waits(log, ops.compute_stream) == []
        assert unpinned_async_copies(log) == []
    finally:
        ex.release()
        build.remove()


@pytest.mark.parametrize("mode", [ALONE, IN_PLACE])
def test_groups_of_a_call_with_padding_rows_are_made_from_its_ids(tmp_path, mode):
    # a call with more rows than the dispatch (padding rows the engine adds): the groups are
    # made from the ids the kernel would read
    ex, _, build, layers = _start(_policies(str(tmp_path))["host"], 2, mode)
    rnd = random.Random(5)
    try:
        for layer, x, w, ids, d in _steps():
            pad = rnd.randrange(3)
            if pad:
                x = torch.cat([x, x[:1].repeat(pad, 1)])
                w = torch.cat([w, w[:1].repeat(pad, 1)])
                ids = torch.cat([ids, ids[:1].repeat(pad, 1)])
            ex.plan(d)
            got = ex.forward(layer, x, w, ids)
            assert torch.equal(got, fused_kernel(layer, x, layers[layer], w, ids, True, None))
        assert ex.stats()["row_pass_dispatches"] > 0
    finally:
        ex.release()
        build.remove()


def test_the_vllm_default_transient_area_is_a_share_of_the_device_cache():
    # on a GPU and with memory tiers: a quarter of the cache (whole experts), at least the
    # decode floor HuggingFace attach uses, at most the experts of a layer
    from mpl.mechanism.footprint import TRANSIENT_CACHE_SHARE, default_stream_slots, live_stream_slots
    floor = default_stream_slots(256, 8)
    assert live_stream_slots(256, 8, 0) == floor
    assert live_stream_slots(256, 8, 8) == floor
    assert live_stream_slots(256, 8, 900) == -(-900 // TRANSIENT_CACHE_SHARE) < 256
    assert live_stream_slots(256, 8, 4096) == 256
    assert live_stream_slots(8, 2, 1000) == live_stream_slots(8, 2, 0) == 8   # Mixtral: every expert


@pytest.mark.parametrize("gpu,tiered", [(True, False), (True, True), (False, True), (False, False)])
def test_the_vllm_default_keeps_the_bits_where_the_probe_fails(gpu, tiered):
    # the default runs a step beyond its entries over groups of tokens where the start-up
    # probe passes, and falls back to one entry per expert where it fails (the CPU build
    # without tiers keeps its bounded area: a step beyond it is the host window); an area
    # the caller names stays as named (passes over experts where the probe fails)
    from mpl.mechanism.footprint import default_stream_slots, live_stream_slots
    from mpl.vllm.errors import VllmIntegrationError
    from mpl.vllm.offload import transient_area
    asked = []

    def probe(ok):
        def run(mode):
            asked.append(mode)
            return ok
        return run

    want_mode = IN_PLACE if gpu else ALONE
    bounded = (live_stream_slots(64, 8, 40) if gpu or tiered else default_stream_slots(64, 8))
    assert bounded < 64
    assert transient_area(64, 8, 40, None, gpu=gpu, tiered=tiered, probe=probe(True)) == (
        bounded, want_mode)
    window = not gpu and not tiered
    assert transient_area(64, 8, 40, None, gpu=gpu, tiered=tiered, probe=probe(False)) == (
        (bounded, None) if window else (64, None))
    assert transient_area(64, 8, 40, 5, gpu=gpu, tiered=tiered, probe=probe(False)) == (5, None)
    assert asked == [want_mode] * 3
    del asked[:]
    assert transient_area(8, 2, 40, None, gpu=gpu, tiered=tiered, probe=probe(True)) == (8, None)
    assert asked == []                       # every expert has its entry: nothing to probe
    with pytest.raises(VllmIntegrationError, match="at least 1"):
        transient_area(64, 8, 40, 0, gpu=gpu, tiered=tiered, probe=probe(True))
    assert asked == []
