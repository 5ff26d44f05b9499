"""Live offload inside a serving engine whose MoE kernel runs over a tensor of experts with
the router's ids: the policy's Plans executed on a fixed slot pool before each MoE layer's
kernel runs, the kernel run on the pool with the ids remapped to pool entries.
Engine-neutral (torch and the rest of ``mpl.mechanism``; no engine import): an adapter (the
vLLM one: ``mpl.vllm.offload``) hands it each layer's expert tensors in the layout the
engine's kernel expects and a ``kernel`` callable, and calls :meth:`LiveExecutor.plan` with
each dispatch the router produced and :meth:`LiveExecutor.forward` in place of the layer's
expert computation. The transfers, the placement checks and the passes are
``mpl.mechanism.execute``'s, shared with the HuggingFace engine.

Memory: one host store (every MoE layer's experts, one arena; page-locked on CUDA) and one
device pool of ``runtime.num_slots`` cache slots (the runtime's global slot numbers, shared or
per-layer caches alike) + ``stream_slots`` transient entries + one all-zero entry, allocated
once. Each layer's kernel runs on the whole pool with its ids remapped to pool entries;
experts the dispatch does not use on the device map to the zero entry (an exact zero).

Per planned dispatch:

1. the Plan's evictions (bookkeeping) and loads (copies from the host store into the slots
   it names: demand on the demand copy stream, prefetch and background on the prefetch
   stream on CUDA; plain copies on the CPU);
2. experts the Plan STREAMs (no slot could be freed: a step whose distinct experts exceed
   the cache) go through the transient entries; when there are more than ``stream_slots``,
   the dispatch is computed in **passes**: with ``row_passes`` (a kernel that adds each
   row's top-k outputs inside, so a pass over some experts would round a partial sum) over
   groups of rows (``execute.row_groups``), each call with all of its rows' experts in
   place, the rows' outputs put together, so every row is computed as in one call: the
   kernel on the group's rows only (:data:`ALONE`: a kernel that computes a row the same
   whatever other rows it is given, as vLLM's CPU kernel does), or on every row with the
   other rows' experts the zero entry (:data:`IN_PLACE`: the call's shape unchanged, for a
   kernel whose tiling follows the number of rows, as vLLM's GPU kernels' tiling does);
   else over ranges of expert ids (``execute.passes``: each with at most ``stream_slots``
   streamed experts and the resident ones of its range), the passes' outputs summed;
3. the kernel runs on the pool (compute waits only for the copies into the entries it
   reads; a later copy into one of them waits for this compute);
4. experts the Plan places on the CPU (``cpu_fallback`` / ``hybrid``) are computed by
   ``cpu_kernel`` from the host store, for the rows that selected them, and added.

A forward without a Plan (an engine's warm-up or memory-profiling run, outside any
scheduled step) is computed the same way with every expert streamed, and counted apart: it
never touches the policy's runtime or the copy counts that must equal its loads.

**Memory tiers** (SPEC §12; a policy with a ``hierarchy`` that
``mpl.mechanism.preflight.not_live_yet`` lets through for vLLM): the adapter builds a
:class:`mpl.mechanism.tiered.TierBuild` (the disk tiers' files written from the engine's
tensors) and passes it as ``tiers``. The host store then holds only the layers whose last
tier is host memory; each disk tier's host cache holds its host tier's slots; a
:class:`mpl.mechanism.tiered.TierExecutor` (the one HuggingFace attach runs) carries out each
Plan's evictions, tier steps and Loads in the runtime's order, checked against the runtime
(disk reads into host-cache records by reader threads, promotions into device slots from
those records, demotions device -> host record, prefetch copies whose read is still running
deferred to the next forward, the device areas of a low-precision or second full-precision
gpu tier), and streams an expert from the host tier that holds it. An expert the Plan
computes from a lower gpu tier (``LOWER``: dequantised, or copied from the second
full-precision tier) or as parts (``granularity_split``: the device cache is the tiers'
:class:`mpl.mechanism.parts.PartPool`, the pool holds transient entries only) goes through a
transient entry like a streamed one (``TierExecutor.source_copy``). A CPU-placed expert of a
layer on disk is computed from the host tier's record its READ filled
(``TierExecutor.cpu_rows``).
"""

from __future__ import annotations

import time
import zlib

import torch

from mpl.trace import records_of

from .device import SyncOps
from .execute import LiveError, group_entries, passes, placements, row_groups, transfers
from .pool import DEMAND, STREAMED, SlotPool
from .staging import Staging
from .store import HostStore

__all__ = ["ALONE", "IN_PLACE", "LiveExecutor", "LiveError", "row_probe", "silu_experts"]


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def silu_experts(x: torch.Tensor, w: dict, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """A plain-torch MoE over ``w["w13_weight"] [E, 2I, H]`` (gate rows, then up rows) and
    ``w["w2_weight"] [E, H, I]`` with SiLU-and-mul: the layout of vLLM's unquantized GPU
    kernels. Per token, the sum over its top-k pairs of weight x expert(x), in top-k order.
    Used to compute CPU-placed experts on a GPU build, and as the reference kernel of the
    mechanism's own tests."""
    w13, w2 = w["w13_weight"], w["w2_weight"]
    out = torch.zeros_like(x)
    half = w13.shape[1] // 2
    for k in range(ids.shape[1]):
        sel = ids[:, k].long()
        h = torch.bmm(w13[sel], x.unsqueeze(-1)).squeeze(-1)
        h = torch.nn.functional.silu(h[:, :half]) * h[:, half:]
        y = torch.bmm(w2[sel], h.unsqueeze(-1)).squeeze(-1)
        out = out + y * weights[:, k:k + 1].to(y.dtype)
    return out


#: ``LiveExecutor(row_passes=...)``: each call the kernel on its group's rows only
ALONE = "alone"
#: each call the kernel on every row of the dispatch, the other rows' experts the zero entry,
#: the group's rows kept (the call's shape, and so a tiling that follows it, unchanged)
IN_PLACE = "in_place"


def row_probe(kernel, tensors: dict, hidden: int, top_k: int, mode: str, *, rows: int = 9,
              seed: int = 0) -> bool:
    """Whether calls over groups of rows in ``mode`` (:data:`ALONE`, :data:`IN_PLACE`) give
    ``kernel`` (:class:`LiveExecutor`'s signature) its one call's rows bit for bit, probed on
    ``tensors`` (a layer's experts as the kernel reads them): ``rows`` random rows over
    ``top_k + 1`` of the experts (copied, with an all-zero entry after them) in one call, then
    cut in two at two places. A guard on the kernel actually installed (its build, its
    instruction set), not a proof: a kernel whose arithmetic follows the number of rows
    could agree on a probe this small by chance."""
    first = next(iter(tensors.values()))
    n = min(int(first.shape[0]), top_k + 1)
    small = {name: torch.cat([t[:n], torch.zeros_like(t[:1])]) for name, t in tensors.items()}
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(n, generator=g)[:top_k] for _ in range(rows)])
    ids = ids.to(device=first.device, dtype=torch.int32)
    w = torch.softmax(torch.randn(rows, top_k, generator=g), dim=-1).to(first.device)
    x = torch.randn(rows, hidden, generator=g).to(device=first.device, dtype=first.dtype)
    whole = kernel(0, x, small, w, ids, False, None)
    for cut in (1, rows // 2):
        parts = []
        for a, b in ((0, cut), (cut, rows)):
            if mode == ALONE:
                parts.append(kernel(0, x[a:b], small, w[a:b], ids[a:b], False, None))
                continue
            masked = torch.full_like(ids, n)
            masked[a:b] = ids[a:b]
            parts.append(kernel(0, x, small, w, masked, False, None)[a:b])
        if not torch.equal(torch.cat(parts), whole):
            return False
    return True


class LiveExecutor:
    """``layers``: per MoE-layer ordinal, ``{param name: [E, ...] tensor}`` as the engine's
    kernel reads them (every layer the same names, shapes and dtypes). ``kernel(ordinal, x,
    tensors, weights, ids, first)`` runs the engine's kernel on ``tensors`` (the pool's, or
    the host store's for the CPU pass) and returns its output; ``first`` is True for the
    first call of a dispatch (the engine's shared experts run there once).
    ``cpu_kernel`` (same signature) computes CPU-placed experts from the host store; None
    when the policy never places experts on the CPU. ``tiers``: the memory tiers of a
    tiered runtime (a :class:`mpl.mechanism.tiered.TierBuild`, its files written; required
    exactly when ``runtime.tier_layout`` is set), with ``readers`` disk reader threads.
    ``row_passes`` (:data:`ALONE`, :data:`IN_PLACE`; :func:`row_probe` checks a kernel): a
    dispatch beyond the transient entries is computed over groups of rows (bit for bit one
    call's result, for a kernel that adds each row's top-k outputs inside) instead of over
    experts."""

    def __init__(self, runtime, layers: list[dict], device, *, kernel, cpu_kernel=None,
                 stream_slots: int, ops: SyncOps | None = None, tiers=None,
                 readers: int = 4, row_passes: str | None = None) -> None:
        self.runtime = runtime
        self.device = torch.device(device)
        self.ops = ops = ops or SyncOps(self.device)
        self.kernel = kernel
        self.cpu_kernel = cpu_kernel
        self.num_layers = len(layers)
        first = next(iter(layers[0].values()))
        self.num_experts = int(first.shape[0])
        if stream_slots < 1:
            raise LiveError(
                f"stream_slots = {stream_slots}: at least one transient slot is needed (a step "
                "whose distinct experts exceed the cache, and a warm-up run, stream experts "
                "through them, in passes when there are more experts than transient slots)")
        tiered = getattr(runtime, "tier_layout", None) is not None
        if tiered != (tiers is not None):
            raise LiveError("a runtime with memory tiers needs its tiers (tiers=TierBuild(...)), "
                            "and only such a runtime takes them" if tiered else
                            "tiers were given for a runtime without memory tiers")
        self.expert_bytes_total = sum(t.numel() * t.element_size()
                                      for layer in layers for t in layer.values())
        self.store = HostStore(ops)
        self.tiers = None
        try:
            if tiers is None:
                self.hosts = self.store.build(layers)
            else:
                tiers.open(ops)
                ram = tiers.in_ram
                self.hosts = [{} for _ in layers]
                if ram:         # (every layer on disk: no host store at all)
                    for o, host in zip(ram, self.store.build([layers[o] for o in ram])):
                        self.hosts[o] = host
            if tiers is not None and tiers.split > 1:
                # the device cache holds parts (the tiers' PartPool): the pool computes,
                # every expert put together in a transient entry
                self.pool = SlotPool(layers[0], 0, stream_slots, self.device, ops,
                                     transient_only=True)
            else:
                self.pool = SlotPool(layers[0], runtime.num_slots, stream_slots, self.device, ops)
            if tiers is not None:
                self.tiers = tiers.executor(self.pool, self.hosts, readers)
        except BaseException:
            if tiers is not None:
                tiers.release()
            self.store.release()
            raise
        self.staging = Staging(ops)
        self._plans: dict[int, object] = {}
        self.dispatches = 0
        self.passes = 0
        self.multi_pass_dispatches = 0
        if row_passes not in (None, ALONE, IN_PLACE):
            raise LiveError(f"row_passes = {row_passes!r}: one of {ALONE!r}, {IN_PLACE!r} or None")
        self.row_passes = row_passes
        self.row_pass_dispatches = 0
        self.restream_copies = 0       # a streamed expert copied again within its dispatch
        # the host window: on the CPU without memory tiers the device is host memory and the
        # host store holds every expert in the kernel's layout, so a dispatch that streams
        # more experts than the transient entries is the kernel on the host store, one call
        self.host_window = self.device.type == "cpu" and not ops.cuda and tiers is None
        self.host_window_dispatches = 0
        self.host_window_streamed = 0     # the STREAM experts it read where they are
        self.cpu_computes = 0
        self.cpu_tokens = 0
        self.stall_ms = 0.0
        self.unplanned_dispatches = 0
        self.unplanned_copies = 0
        self.mechanism_s = 0.0         # host time in forward() outside the kernel calls
        self.kernel_s = 0.0
        self.copy_free_calls = 0       # planned calls that copied nothing (every expert hit)
        self.copy_free_s = 0.0         # their host time outside the kernel
        self.digest = 0                # crc32 of every decision, in order (ranks compare it)
        self._cpu_this_call = False

    # ------------------------------------------------------------------ decisions
    def plan(self, d) -> None:
        """The router of MoE layer ``d.layer`` chose ``d``: ask the runtime for its Plan (the
        records a replay of the recorded trace feeds it)."""
        layer, experts, weights, tokens, step, predictions, _ = next(records_of((d,)))
        plan = self.runtime.dispatch(layer, experts, weights, tokens, step=step,
                                     predictions=predictions)
        self._plans[layer] = (plan, d.experts)
        self.digest = zlib.crc32(repr((plan.experts, plan.where, plan.raw_loads,
                                       plan.evicted)).encode(), self.digest)

    # ------------------------------------------------------------------ the hot path
    def forward(self, ordinal: int, x: torch.Tensor, topk_weights: torch.Tensor,
                topk_ids: torch.Tensor, shared=None) -> torch.Tensor:
        t0 = time.perf_counter()
        k0 = self.kernel_s
        if self.tiers is not None:      # deferred prefetch copies land before any compute
            self.tiers.settle()
        c0 = self.pool.bytes_copied
        got = self._plans.pop(ordinal, None)
        if got is None:
            out = self._unplanned(ordinal, x, topk_weights, topk_ids, shared)
        else:
            # the router's rows as the host read them: the slot ids are built on the host
            # when they cover every row of the call (no padding rows)
            rows = got[1] if len(got[1]) == topk_ids.shape[0] else None
            out = self._planned(ordinal, got[0], rows, x, topk_weights, topk_ids, shared)
        own = (time.perf_counter() - t0) - (self.kernel_s - k0)
        self.mechanism_s += own
        if got is not None and self.pool.bytes_copied == c0 and not self._cpu_this_call:
            self.copy_free_calls += 1
            self.copy_free_s += own
        return out

    def _run(self, ordinal, x, tensors, weights, ids, first, shared):
        t = time.perf_counter()
        out = self.kernel(ordinal, x, tensors, weights, ids, first, shared)
        self.kernel_s += time.perf_counter() - t
        return out

    def _planned(self, ordinal, plan, rows, x, topk_weights, topk_ids, shared):
        pool = self.pool
        self.dispatches += 1
        stall = (self.tiers.transfers(plan) if self.tiers is not None
                 else transfers(pool, plan, self.hosts))
        # (experts a lower gpu tier serves, and experts as parts, go through transient
        # entries: the tiers' source_copy dequantises, copies or gathers them there)
        resident, streamed, cpu = placements(plan, pool.content, ordinal,
                                             lower=self.tiers is not None)
        calls = passes(resident, streamed, pool.stream_slots)
        window = len(calls) > 1 and self.host_window and not cpu
        groups = None
        if len(calls) > 1 and self.row_passes and not window:
            if rows is None:
                flat = self.ops.read_ids(topk_ids)
                k = topk_ids.shape[1]
                rows = [flat[i:i + k] for i in range(0, len(flat), k)]
            groups = row_groups(rows, streamed, pool.stream_slots)
        out = None
        if window:
            # (the unmodified layer's computation: its kernel, its ids, the same values)
            self.host_window_dispatches += 1
            self.host_window_streamed += len(streamed)
            calls = []
            out = self._run(ordinal, x, self.hosts[ordinal], topk_weights, topk_ids, True, shared)
        elif groups is not None:
            self.row_pass_dispatches += 1
            self.multi_pass_dispatches += 1
            calls = []
            out = self._row_passes(ordinal, x, topk_weights, topk_ids, rows, groups, resident,
                                   shared)
        for i, (res, g) in enumerate(calls):
            part = self._pass(ordinal, x, topk_weights, topk_ids, res, g, i == 0, shared,
                              count=True, rows=rows)
            out = part if out is None else out + part
        if len(calls) > 1:
            self.multi_pass_dispatches += 1
        if stall:
            self.stall_ms += stall
            self.runtime.add_stall(stall)
        self._cpu_this_call = bool(cpu)
        if cpu:
            out = out + self._cpu_pass(ordinal, x, topk_weights, topk_ids, cpu)
        return out

    def _pass(self, ordinal, x, topk_weights, topk_ids, resident, streamed, first, shared,
              count: bool, rows=None):
        """One kernel call on the pool: ``resident`` (expert, slot) pairs and ``streamed``
        experts copied into the transient entries now; every other expert of the layer maps
        to the zero entry. ``rows``: the call's ids as host lists, when known (the slot ids
        are then written on the host and uploaded once; else the table is uploaded and
        indexed on the device)."""
        pool = self.pool
        lut = [pool.zero] * self.num_experts
        used = []
        for e, w in resident:
            lut[e] = w
            used.append(w)
        stall = 0.0
        for i, e in enumerate(streamed):
            idx = pool.stream_base + i
            ms = self._stream_in(ordinal, e, idx, count)
            if count:
                stall += ms
            else:
                self.unplanned_copies += 1
            lut[e] = idx
            used.append(idx)
        if stall:
            self.stall_ms += stall
            self.runtime.add_stall(stall)
        self.passes += 1
        if not used:                    # every expert of the dispatch is on the CPU
            return torch.zeros_like(x)
        if rows is not None:
            slot_ids = self.staging.upload_like([lut[e] for r in rows for e in r], topk_ids)
        else:
            table = self.staging.upload(lut, topk_ids.dtype)
            slot_ids = table[topk_ids.long()] if topk_ids.dtype != torch.long else table[topk_ids]
        reads = used + [pool.zero]
        pool.wait_for(used)
        out = self._run(ordinal, x, pool.tensors, topk_weights, slot_ids, first, shared)
        pool.release(reads)
        return out

    def _stream_in(self, ordinal, e, idx, count: bool = True, again: bool = False) -> float:
        """Expert ``e`` of MoE layer ``ordinal`` into transient entry ``idx``: a Plan's
        STREAM (``count``; from the host store, or the host tier holding it: a transient READ
        is the bounce record), a forward no Plan drove (not ``count``), or a STREAM's expert
        copied again within its dispatch (``again``: counted apart, ``restream_copies``).
        Returns the host milliseconds the copy blocked."""
        if again:
            self.restream_copies += 1
        if self.tiers is None:
            return self.pool.copy_in(idx, self.hosts[ordinal], e, (ordinal, e), STREAMED,
                                     count=count and not again)
        if not count:
            self.tiers.unplanned_copy(idx, ordinal, e)
            return 0.0
        return self.tiers.source_copy(idx, ordinal, e, STREAMED, again=again)

    def _row_passes(self, ordinal, x, topk_weights, topk_ids, rows, groups, resident, shared):
        """A dispatch computed in calls over groups of its rows (``execute.row_groups``):
        each call the kernel on its rows only (:data:`ALONE`), or on every row with the other
        rows' experts the zero entry (:data:`IN_PLACE`), with the group's streamed experts in
        transient entries and the resident experts in their slots; the group's rows of each
        call put together. An entry keeps its expert while it has room (when it has none,
        the expert needed again furthest ahead gives way). An expert's first copy is the
        Plan's STREAM; a copy again (its entry given to another in between) is counted
        apart."""
        pool = self.pool
        base = [pool.zero] * self.num_experts
        for e, w in resident:
            base[e] = w
        slots = [w for _, w in resident]
        copies = group_entries(groups, pool.stream_slots)
        held: dict[int, int] = {}      # expert -> its transient entry
        copied = set()
        stall = 0.0
        k = topk_ids.shape[1]
        out = None
        for n, (idx, need) in enumerate(groups):
            for e, i in copies[n]:
                entry = pool.stream_base + i
                stall += self._stream_in(ordinal, e, entry, again=e in copied)
                copied.add(e)
                held[e] = entry
            lut = base.copy()
            for e in need:
                lut[e] = held[e]
            sel = self.staging.upload(idx, torch.long)
            used = slots + [held[e] for e in need]
            if self.row_passes == IN_PLACE:
                # the group's rows looked up in the layer's table on the device, every other
                # row on the zero entry: the host writes the table and the group's rows, not
                # every row of the step
                table = self.staging.upload(lut, topk_ids.dtype)
                ids = topk_ids.new_full(topk_ids.shape, pool.zero)
                ids.index_copy_(0, sel, table[topk_ids.index_select(0, sel).long()])
                pool.wait_for(used)
                part = self._run(ordinal, x, pool.tensors, topk_weights, ids, n == 0,
                                 shared).index_select(0, sel)
            else:
                ids = self.staging.upload([lut[e] for i in idx for e in rows[i]],
                                          topk_ids.dtype).view(len(idx), k)
                pool.wait_for(used)
                part = self._run(ordinal, x.index_select(0, sel), pool.tensors,
                                 topk_weights.index_select(0, sel), ids, n == 0, shared)
            pool.release(used + [pool.zero])
            if out is None:
                out = part.new_empty((x.shape[0], *part.shape[1:]))
            out.index_copy_(0, sel, part)
        self.passes += len(groups)
        if stall:
            self.stall_ms += stall
            self.runtime.add_stall(stall)
        return out

    def _cpu_pass(self, ordinal, x, topk_weights, topk_ids, cpu_experts):
        """The CPU-placed experts of a dispatch, for the rows that selected them (their
        weight only; the row's other pairs weigh 0 here): from the host store, or for a
        layer on a disk tier from the records the Plan's READs filled (:meth:`_cpu_rows`)."""
        if self.cpu_kernel is None:
            raise LiveError("the plan places experts on the CPU but this engine has no CPU "
                            "expert kernel")
        got = self.ops.fetch([x, topk_weights, topk_ids])
        hx, hw, hid = (t.clone() for t in got)
        mask = torch.zeros(self.num_experts, dtype=torch.bool)
        mask[torch.tensor(cpu_experts)] = True
        sel = mask[hid.long()]
        rows = sel.any(dim=1).nonzero().flatten()
        w = hw[rows].masked_fill(~sel[rows], 0)
        self.cpu_computes += len(cpu_experts)
        self.cpu_tokens += int(sel.sum())
        if self.hosts[ordinal]:
            tensors, ids = self.hosts[ordinal], hid[rows]
        else:
            tensors, ids = self._cpu_rows(ordinal, cpu_experts, hid[rows])
        part = self._run(ordinal, hx[rows], tensors, w, ids, False, None)
        full = torch.zeros_like(hx)
        full.index_add_(0, rows, part.to(full.dtype))
        return self.staging.upload(full, full.dtype).to(x.dtype)

    def _cpu_rows(self, ordinal, cpu_experts, ids):
        """The CPU-placed experts of a layer on a disk tier as the kernel's ``[n + 1, ...]``
        tensors: entry ``i`` expert ``cpu_experts[i]``'s rows, copied from the host tier's
        record its READ filled (``TierExecutor.cpu_rows``: with a split, its parts put
        together on the host), the last entry zeros; and ``ids`` remapped to those entries
        (every other expert to the zero entry: its pairs weigh 0)."""
        n = len(cpu_experts)
        tensors = None
        for i, e in enumerate(cpu_experts):
            got = self.tiers.cpu_rows(ordinal, e)
            if tensors is None:
                tensors = {name: torch.zeros((n + 1, *self.pool.tensors[name].shape[1:]),
                                             dtype=self.pool.tensors[name].dtype)
                           for name in got}
            for name, row in got.items():     # (copied now: the rows may be reused next)
                tensors[name][i].copy_(row.reshape(tensors[name][i].shape))
        lut = torch.full((self.num_experts,), n, dtype=torch.long)
        lut[torch.tensor(cpu_experts, dtype=torch.long)] = torch.arange(n)
        return tensors, lut[ids.long()].to(ids.dtype)

    def _unplanned(self, ordinal, x, topk_weights, topk_ids, shared):
        """A forward outside any scheduled step (no Plan): every distinct expert streamed
        through the transient entries, in passes."""
        self.unplanned_dispatches += 1
        experts = sorted(set(self.ops.read_ids(topk_ids)))
        size = self.pool.stream_slots
        out = None
        first = True
        for g in chunks(experts, size):
            part = self._pass(ordinal, x, topk_weights, topk_ids, [], g, first, shared, count=False)
            out = part if out is None else out + part
            first = False
        return out if out is not None else torch.zeros_like(x)

    # ------------------------------------------------------------------ stats
    def flush_stalls(self) -> None:
        """Collect every pending CUDA stall measurement (waits for the copies; with memory
        tiers, every deferred copy issued and every disk read waited for first)."""
        if self.tiers is not None:
            self.tiers.drain()
        ms = self.pool.flush_stalls()
        if ms:
            self.stall_ms += ms
            self.runtime.add_stall(ms)

    def stats(self) -> dict:
        pool = self.pool
        c = dict(pool.copies)
        parts = self.tiers.parts if self.tiers is not None else None
        if parts is not None:           # the Loads are part copies into the part pool
            for k, n in parts.copies.items():
                c[k] += n
        calls = self.dispatches + self.unplanned_dispatches
        return {
            "dispatches": self.dispatches,
            "copies": c[DEMAND] + c["background"] + c["prefetch"],
            "demand_copies": c[DEMAND],
            "background_copies": c["background"],
            "prefetch_copies": c["prefetch"],
            "stream_copies": c[STREAMED],
            "bytes_copied": pool.bytes_copied + (parts.bytes_copied if parts is not None else 0),
            "passes": self.passes,
            "multi_pass_dispatches": self.multi_pass_dispatches,
            "row_passes": self.row_passes,
            "row_pass_dispatches": self.row_pass_dispatches,
            "restream_copies": self.restream_copies,
            "host_window_dispatches": self.host_window_dispatches,
            "host_window_streamed": self.host_window_streamed,
            "cpu_computes": self.cpu_computes,
            "cpu_tokens": self.cpu_tokens,
            "stall_ms": self.stall_ms,
            "copy_ms_host": pool.copy_ms + (parts.copy_ms if parts is not None else 0.0),
            "pool_slots": pool.size,
            "cache_slots": pool.num_slots if parts is None else parts.num_slots,
            "stream_slots": pool.stream_slots,
            "pool_bytes": pool.nbytes,
            "part_pool_bytes": parts.nbytes if parts is not None else 0,
            "expert_bytes": pool.entry_bytes,
            "expert_bytes_total": self.expert_bytes_total,
            "host_store_bytes": self.store.arena_bytes,
            "tiers": self.tiers.stats() if self.tiers is not None else None,
            "device": str(pool.device),
            "unplanned_dispatches": self.unplanned_dispatches,
            "unplanned_copies": self.unplanned_copies,
            "us_per_layer_call": (self.mechanism_s / calls * 1e6) if calls else 0.0,
            "us_per_copy_free_call": (self.copy_free_s / self.copy_free_calls * 1e6)
            if self.copy_free_calls else 0.0,
            "kernel_us_per_layer_call": (self.kernel_s / calls * 1e6) if calls else 0.0,
            "decision_digest": self.digest,
        }

    def release(self) -> None:
        """Wait for everything in flight, then free the pool, the host store and the tiers'
        host caches and reader threads (the disk tiers' files are the adapter's: it reads
        the layers back from them first, then ``TierBuild.remove``)."""
        self.flush_stalls()
        if self.tiers is not None:
            self.tiers.release()
        self.pool.clear()
        self.staging = None
        self.store.release()
