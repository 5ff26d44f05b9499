"""A low-precision ``gpu`` tier on the device (SPEC §12; docs/offload.md, "Low-precision
tiers live"): weight-only quantised copies of experts (``mpl.mechanism.quant``) in one
pre-allocated device area of the tier's slots, filled and read as the Plans' steps say.

* :class:`QuantLayout`: one expert as one **record** of bytes: for every 2-D floating
  expert parameter its codes and float32 scales (quantised as ``[output, input]``: a
  transposed family's matrix is quantised transposed), every other parameter (biases) at
  its own precision; each part 64-byte aligned.
* :class:`LowPrecArea`: ``slots`` records in one device tensor (``Ops.alloc``, once), the
  key each holds and the precision it holds it at, and per slot the events of the last
  write into it (``ready``) and of the last read out of it (``free``). A tier with a
  ``dtype_ladder`` of several low precisions (``[int8, int4]``) has one :class:`QuantLayout`
  per rung and every slot is as long as the longest rung's record, so that a key changes
  rung where it is (:meth:`LowPrecArea.requant_down`) and a slot takes a key at any rung
  without moving another: the area is ``slots`` (the most keys the tier holds, every one at
  the lowest rung) times the first rung's record, more than the tier's size, which the
  runtime counts in the rungs' bits. A ladder whose first rung is the checkpoint's own
  precision (``[fp32, int8, int4]``) holds its keys at that rung whole in a
  ``mpl.mechanism.gpu_tier.FullArea`` (``full``: the most keys the tier holds at that rung,
  and one entry more), copied in and out exactly, quantised from there into the key's slot
  when it steps down. Three ways in, one way down, one way out:

  - :meth:`LowPrecArea.requant`: quantised on the device from a slot of the pool (the
    evicted full-precision copy of an ``in_place_requant`` demotion): no host transfer;
  - :meth:`LowPrecArea.fill_from_host`: quantised on the host from the host store's
    weights into one pinned staging record, then copied to the device (a demotion by
    ``copy``, a promotion from host memory into the tier): the quantised bytes cross the
    link;
  - :meth:`LowPrecArea.requant_down`: a ladder's step down a rung: the slot's codes
    dequantised (float32) and quantised at the lower rung into the same slot, on the
    device (the runtime's REQUANT step inside the tier);
  - :meth:`LowPrecArea.dequant`: the record dequantised into an entry of the pool (a
    transient entry), in the expert's dtype, where the experts function computes from it
    exactly as from a streamed expert.

CUDA ordering, the pool's rules extended to the area: every write and read of the area
runs on the pool's copy streams (demand, or prefetch for a prefetch's or background load's
fill) after waiting for the events that order it: a write into a slot after the last write
and the last read of it; a requant after the copy that filled the pool entry it reads, and
the entry's next copy after the requant (its free event); a dequant after the write into its
slot and after the compute that last read its transient entry, its event the entry's ready
event (compute waits for it as for a streamed copy). The staging record is rewritten by the
host only after its last copy has completed (a host wait on its event). Without CUDA
(``SyncOps``) every call runs in order and events are None.

Quantising and dequantising use temporaries of one expert matrix (torch's caching allocator
on CUDA); the area and the staging record are the only memory held.
"""

from __future__ import annotations

import torch

from . import quant
from .gpu_tier import DeviceArea
from .pool import STREAMED

from .footprint import QUANT_ALIGN as _ALIGN   # bytes: each part of a record starts here


def _up(n: int, a: int = _ALIGN) -> int:
    return (n + a - 1) // a * a


def _place_quant(spec, off: int) -> tuple[int, int, int]:
    """Where a quantised matrix of ``spec`` sits in a record from byte ``off``: its packed
    bytes, then its fp32 scales, each aligned; ``(bytes, scales, the offset after them)``."""
    q = off
    off = _up(off + spec.qshape[0] * spec.qshape[1])
    n = 1
    for d in spec.sshape:
        n *= d
    return q, off, _up(off + 4 * n)


class _Part:
    __slots__ = ("name", "spec", "shape", "dtype", "q", "s", "raw", "nbytes")

    def __init__(self, name, spec, shape, dtype) -> None:
        self.name, self.spec, self.shape, self.dtype = name, spec, shape, dtype
        self.q = self.s = self.raw = None
        self.nbytes = 0


class QuantLayout:
    """Where each expert parameter sits in a quantised record (see the module docstring).
    ``template``: the ``[E, ...]`` expert tensors of one MoE layer (their row shapes and
    dtypes); ``dtype``: ``int8`` or ``int4``; ``transposed``: the family applies its
    matrices as ``x @ w`` (``[input, output]``) instead of ``F.linear``."""

    def __init__(self, template: dict, dtype: str, *, transposed: bool = False,
                 group: int = quant.DEFAULT_GROUP) -> None:
        self.dtype = dtype
        self.transposed = bool(transposed)
        self.group = group
        self.parts: list[_Part] = []
        off = 0
        for name, t in template.items():
            row = t[0]
            shape = tuple(row.shape)
            if row.dim() == 2 and row.is_floating_point():
                rows, cols = (shape[1], shape[0]) if self.transposed else shape
                p = _Part(name, quant.spec(int(rows), int(cols), dtype, group), shape, row.dtype)
                p.q, p.s, off = _place_quant(p.spec, off)
            else:
                p = _Part(name, None, shape, row.dtype)
                p.raw = off
                off = _up(off + row.numel() * row.element_size())
            self.parts.append(p)
        self.stride = max(_ALIGN, off)
        self.quantized = [p.name for p in self.parts if p.spec is not None]

    def views(self, record: torch.Tensor) -> list[tuple]:
        """Per part of ``record`` (a uint8 ``[stride]`` tensor, host or device): ``(part,
        codes, scales)`` for a quantised one, ``(part, tensor, None)`` for one kept whole."""
        out = []
        for p in self.parts:
            if p.spec is None:
                n = 1
                for d in p.shape:
                    n *= d
                size = torch.tensor([], dtype=p.dtype).element_size()
                raw = record[p.raw:p.raw + n * size].view(p.dtype).view(p.shape)
                out.append((p, raw, None))
                continue
            s = p.spec
            q = record[p.q:p.q + s.qshape[0] * s.qshape[1]].view(s.qdtype).view(s.qshape)
            n = 1
            for d in s.sshape:
                n *= d
            sc = record[p.s:p.s + 4 * n].view(torch.float32).view(s.sshape)
            out.append((p, q, sc))
        return out

    def matrix(self, p: _Part, row: torch.Tensor) -> torch.Tensor:
        """An expert's row of parameter ``p`` as the ``[output, input]`` matrix quantised."""
        return row.t() if self.transposed else row


def _host_copy(dst, src, tag=None) -> None:
    """A copy on the host (the staging record's writes: no stream, no event)."""
    dst.copy_(src)


class LowPrecArea(DeviceArea):
    """The device area of one low-precision tier of one set of tiers (see the module
    docstring). ``layout``: its :class:`QuantLayout`, or one per rung of its dtype ladder
    (highest precision first); ``label``/``tier``: the set's label and the tier's name
    (statistics)."""

    def __init__(self, layout, slots: int, pool, *, label: str, tier: str,
                 index: int, full=None, full_dtype: str | None = None) -> None:
        layouts = list(layout) if isinstance(layout, (list, tuple)) else [layout]
        self.layouts = {q.dtype: q for q in layouts}
        self.layout = max(layouts, key=lambda q: q.stride)      # (the record's length)
        self.stride = self.layout.stride
        self.slots = int(slots)
        self.pool = pool
        self.ops = ops = pool.ops
        self.label, self.tier, self.index = label, tier, index
        self.dtype = layouts[0].dtype
        self.ladder = [q.dtype for q in layouts] if len(layouts) > 1 else None
        #: a ladder whose first rung is the checkpoint's precision (``full_dtype``): the keys
        #: at that rung are held whole in ``full`` (a mpl.mechanism.gpu_tier.FullArea of
        #: the most keys the tier holds at that rung, and one more for a key whose Load out
        #: of the tier is pending while its slot is rewritten), the others in this area
        self.full, self.full_dtype = full, full_dtype
        if full is not None:
            self.ladder = [full_dtype] + [q.dtype for q in layouts]
        self._full_of: dict = {}          # slot -> the full area's entry its key is in
        self._full_free = list(range(full.slots - 1, -1, -1)) if full is not None else []
        self._loading: set = set()        # full entries a pending Load reads
        self.full_serves = 0              # computed at the full rung (exact: a copy)
        self.data = ops.alloc((self.slots, self.stride), torch.uint8)
        self._slot_views = [{d: q.views(self.data[j]) for d, q in self.layouts.items()}
                            for j in range(self.slots)]
        DeviceArea.__init__(self, self.slots)
        self.held: list = [None] * self.slots    # the precision each slot's record is at
        self.ready: list = [None] * self.slots   # events: the last write into the slot
        self.free: list = [None] * self.slots    # events: the last read out of it
        self._staging = None                     # pinned host record (the first host fill)
        self._staging_views = None
        self._staging_ev = None
        self.requants = 0              # quantised on the device from a pool entry
        self.rung_requants = 0         # a ladder's steps down a rung, on the device
        self.host_fills = 0            # quantised on the host, copied to the device
        self.host_bytes = 0
        self.dequants = 0              # computed from (dequantised into a transient entry)
        self.dequants_at: dict = {}    # ... by the precision computed from

    # ------------------------------------------------------------------ the full rung
    def _take_full(self, slot: int) -> int:
        """A free entry of the full area for the key written into ``slot`` at the full
        rung."""
        self._unmap(slot)
        if not self._full_free:
            from .execute import LiveError
            raise LiveError(f"the plan holds more keys of tier '{self.tier}' at "
                            f"{self.full_dtype} than its full-precision area has entries while "
                            f"Loads out of it are pending, which the live mechanism cannot "
                            f"order")
        f = self._full_free.pop()
        self._full_of[slot] = f
        return f

    def _unmap(self, slot: int) -> None:
        """``slot``'s full entry, if any, leaves it: free again unless a pending Load reads
        it (:meth:`loaded` frees it then)."""
        f = self._full_of.pop(slot, None)
        if f is not None and f not in self._loading:
            self._free_full(f)

    def _free_full(self, f: int) -> None:
        k = self.full.content[f]
        if k is not None:
            self.full.drop(k)
        self._full_free.append(f)

    def full_entry(self, key):
        """The full area's entry holding ``key`` at the full rung (None: not there)."""
        slot = self.where.get(key)
        if slot is None or self.held[slot] != self.full_dtype:
            return None
        return self._full_of.get(slot)

    def loading(self, f: int) -> None:
        """A Load of this Plan copies full entry ``f`` out: it stays until :meth:`loaded`."""
        self._loading.add(f)

    def loaded(self, f: int) -> None:
        """The Load out of full entry ``f`` is issued: the entry is free again."""
        self._loading.discard(f)
        if f not in self._full_of.values():
            self._free_full(f)

    def _set_full(self, slot: int, key) -> int:
        f = self._take_full(slot)
        self.put(slot, key)
        self.held[slot] = self.full_dtype
        return f

    def to_host(self, slot: int, records: dict, j: int):
        """The full-rung copy in ``slot`` into host record ``j`` (a demotion into the host
        tier over a disk tier); the entry is free again. Returns the copy's event."""
        f = self._full_of[slot]
        ev = self.full.to_host(f, records, j)
        self._unmap(slot)
        return ev

    def leave(self, key) -> None:
        """``key`` left the tier (LEAVE, or a promotion out): its slot, and its full entry
        unless a pending Load reads it, are free again."""
        slot = self.where.get(key)
        if slot is not None:
            self._unmap(slot)
        self.drop(key)

    def _layout(self, dtype):
        """The layout of ``dtype`` (None: the tier's one precision)."""
        if dtype is None:
            return self.layouts[self.dtype]
        q = self.layouts.get(dtype)
        if q is None:
            from .execute import LiveError
            raise LiveError(f"the plan holds an expert at {dtype} in tier '{self.tier}', which "
                            f"holds {', '.join(self.layouts)}: the runtime and the mechanism "
                            f"disagree")
        return q

    @property
    def nbytes(self) -> int:
        """The area's bytes, with the full rung's area of a ladder that has one."""
        full = self.full.nbytes if getattr(self, "full", None) is not None else 0
        return (0 if self.data is None else self.data.numel()) + full

    # ------------------------------------------------------------------ writes
    def requant(self, slot: int, entry: int, key, dtype=None) -> None:
        """Pool entry ``entry`` (the key's full-precision copy, about to be reused)
        quantised into ``slot`` on the device at ``dtype`` (a rung; None: the tier's
        precision): no host transfer."""
        if dtype is not None and dtype == self.full_dtype:     # a device copy, whole
            self.full.demote(self._set_full(slot, key), entry, key)
            return
        self._unmap(slot)
        self._requant_entry(slot, entry, key, dtype, reads_entry=True)

    def _requant_entry(self, slot: int, entry: int, key, dtype, *, reads_entry: bool) -> None:
        """Entry ``entry`` of the pool (a part slot of the part pool, for a tier of parts)
        quantised into ``slot`` on the demand stream, after the entry's and the slot's last
        writes and reads; the entry's next copy waits for it. ``reads_entry``: mark the read
        for the CUDA double's log as compute reading the entry."""
        pool, ops = self.pool, self.ops
        lay = self._layout(dtype)
        self.put(slot, key)
        self.held[slot] = lay.dtype
        self.requants += 1
        stream = pool.demand_stream
        tag = ("requant", (self.tier, slot))
        with ops.use(stream):
            if pool.cuda:
                for ev in (pool.ready[entry], pool.free[entry], self.ready[slot], self.free[slot]):
                    if ev is not None:
                        ops.wait(stream, ev)
            if reads_entry:
                ops.compute([entry])           # this stream reads the pool entry
            self._write(self._record_views(slot, lay.dtype), lay,
                        {name: t[entry] for name, t in pool.tensors.items()}, ops.copy, tag)
            if pool.cuda:
                ev = ops.event()
                ops.record(ev, stream)
                pool.free[entry] = ev           # the entry's next copy waits for this read
                self.ready[slot] = ev

    def _record_views(self, slot: int, dtype: str) -> list:
        """``(part, codes, scales)`` of the record in ``slot`` laid out at ``dtype`` (a part
        kept whole: ``(part, tensor, None)``)."""
        return self._slot_views[slot][dtype]

    def _staged_views(self, lay, key) -> list:
        """The views of the host staging record laid out as ``lay``, for ``key``."""
        if self._staging_views is None:
            self._staging_views = {d: q.views(self._staging) for d, q in self.layouts.items()}
        return self._staging_views[lay.dtype]

    @staticmethod
    def _write(views, lay, rows: dict, copy, tag) -> None:
        """``rows`` (name -> the expert's row) quantised into ``views`` with ``copy``."""
        for p, a, b in views:
            row = rows[p.name]
            if p.spec is None:
                copy(a, row, tag=tag)
                continue
            q, s = quant.quantize(lay.matrix(p, row), p.spec)
            copy(a, q, tag=tag)
            copy(b, s, tag=tag)

    def fill_from_host(self, slot: int, host: dict, expert: int, key, kind=None,
                       dtype=None) -> None:
        """Expert ``expert`` of the host store's tensors ``host`` quantised on the host into
        the staging record at ``dtype`` (a rung; None: the tier's precision), then copied
        into ``slot`` (``kind``: the Plan's transfer kind; a prefetch's or background load's
        fill goes on the prefetch stream)."""
        if dtype is not None and dtype == self.full_dtype:     # the expert's bytes, whole
            self.full.fill_from_host(self._set_full(slot, key), host, expert, key, kind)
            return
        self._unmap(slot)
        self.fill_staged(slot, {name: t[expert] for name, t in host.items()}, key, kind, dtype)

    def fill_staged(self, slot: int, rows: dict, key, kind=None, dtype=None) -> None:
        """``rows`` (name -> the key's row on the host, or its part's runs) quantised on the
        host into the staging record at ``dtype``, then copied into ``slot`` (``kind``: the
        Plan's transfer kind; a prefetch's or background load's fill goes on the prefetch
        stream)."""
        pool, ops = self.pool, self.ops
        lay = self._layout(dtype)
        self.put(slot, key)
        self.held[slot] = lay.dtype
        self.host_fills += 1
        self.host_bytes += lay.stride
        if self._staging is None:
            self._staging = ops.host_buffer(self.stride, torch.uint8).zero_()   # (padding)
        if self._staging_ev is not None:       # its last copy has completed before rewriting
            ops.synchronize(self._staging_ev)
            self._staging_ev = None
        ops.host_write(self._staging, ("quantize", self.tier))
        self._write(self._staged_views(lay, key), lay, rows, _host_copy, None)
        stream = self._stream(kind)
        with ops.use(stream):
            if pool.cuda:
                for ev in (self.ready[slot], self.free[slot]):
                    if ev is not None:
                        ops.wait(stream, ev)
            ops.copy(self.data[slot, :lay.stride], self._staging[:lay.stride],
                     non_blocking=pool.cuda, tag=("quantize", (self.tier, slot)))
            if pool.cuda:
                ev = ops.event()
                ops.record(ev, stream)
                self.ready[slot] = ev
                self._staging_ev = ev

    def requant_down(self, slot: int, dtype: str) -> None:
        """A ladder's step down: the record in ``slot`` dequantised (float32) and quantised
        at ``dtype`` (a lower rung) into the same slot, on the device: no host transfer.
        Every part is computed before any is written (the rungs' parts overlap)."""
        pool, ops = self.pool, self.ops
        if self.held[slot] == self.full_dtype:
            self._requant_from_full(slot, dtype)
            return
        src = self._layout(self.held[slot])
        dst = self._layout(dtype)
        self.held[slot] = dst.dtype
        self.rung_requants += 1
        stream = pool.demand_stream
        tag = ("requant", (self.tier, slot))
        with ops.use(stream):
            if pool.cuda:
                for ev in (self.ready[slot], self.free[slot]):
                    if ev is not None:
                        ops.wait(stream, ev)
            out = []
            for (p, a, b), (p2, c, d) in zip(self._record_views(slot, src.dtype),
                                             self._record_views(slot, dst.dtype)):
                if p.spec is None:
                    out.append((c, a.clone()))
                    continue
                # (the codes are [output, input] whatever the family's layout)
                w = quant.dequantize(a, b, p.spec, torch.float32)
                q, s = quant.quantize(w, p2.spec)
                out.append((c, q))
                out.append((d, s))
            for t, v in out:
                ops.copy(t, v, tag=tag)
            if pool.cuda:
                ev = ops.event()
                ops.record(ev, stream)
                self.ready[slot] = ev
                self.free[slot] = ev

    def _requant_from_full(self, slot: int, dtype: str) -> None:
        """The full rung's step down: the key's whole copy in the full area quantised at
        ``dtype`` into ``slot`` on the device; its full entry is free again."""
        pool, ops, full = self.pool, self.ops, self.full
        f = self._full_of[slot]
        lay = self._layout(dtype)
        self.held[slot] = lay.dtype
        self.rung_requants += 1
        stream = pool.demand_stream
        tag = ("requant", (self.tier, slot))
        with ops.use(stream):
            if pool.cuda:
                for ev in (full.ready[f], self.ready[slot], self.free[slot]):
                    if ev is not None:
                        ops.wait(stream, ev)
            self._write(self._record_views(slot, lay.dtype), lay,
                        {name: t[f] for name, t in full.tensors.items()}, ops.copy, tag)
            if pool.cuda:
                ev = ops.event()
                ops.record(ev, stream)
                self.ready[slot] = ev
                full.free[f] = ev               # the entry's next write waits for this read
        self._unmap(slot)

    # ------------------------------------------------------------------ the read
    def dequant(self, slot: int, entry: int, count: bool = True) -> None:
        """Record ``slot`` dequantised into pool entry ``entry`` (a transient entry), in the
        experts' dtype and layout: compute reads it as a streamed expert. A key at the full
        rung is copied, exactly. ``count``: False for the same SERVE's expert made again in
        the same dispatch (calls over groups of rows), which is not another approximate
        compute."""
        pool, ops = self.pool, self.ops
        if self.held[slot] == self.full_dtype:
            self.full_serves += count
            self.full.copy_out(self._full_of[slot], entry, STREAMED, count=count)
            return
        lay = self._layout(self.held[slot])
        if count:
            self.dequants += 1
            self.dequants_at[lay.dtype] = self.dequants_at.get(lay.dtype, 0) + 1
        pool.content[entry] = None
        stream = pool.demand_stream
        tag = (STREAMED, entry)
        with ops.use(stream):
            if pool.cuda:
                for ev in (pool.free[entry], pool.ready[entry], self.ready[slot]):
                    if ev is not None:
                        ops.wait(stream, ev)
            for p, a, b in self._record_views(slot, lay.dtype):
                dst = pool.tensors[p.name][entry]
                if p.spec is None:
                    ops.copy(dst, a, tag=tag)
                    continue
                w = quant.dequantize(a, b, p.spec, p.dtype)
                ops.copy(dst, w.t() if lay.transposed else w, tag=tag)
            if pool.cuda:
                ev = ops.event(timing=True)
                ops.record(ev, stream)
                pool.ready[entry] = ev
                pool.ready_kind[entry] = STREAMED
                self.free[slot] = ev

    def resident_at(self) -> dict:
        """A ladder's keys held now, by the rung their slot holds them at (every rung
        named): the slots whose key the tier holds (``where``), as the steps left them."""
        out = {d: 0 for d in (self.ladder or [self.dtype])}
        for j, key in enumerate(self.content):
            if key is not None and self.where.get(key) == j:
                out[self.held[j]] = out.get(self.held[j], 0) + 1
        return out

    def release(self) -> None:
        if self.full is not None:
            self.full.release()
        self.data = None
        self.held = [None] * self.slots
        self._slot_views = []
        self._staging = self._staging_views = self._staging_ev = None
        self.ready = [None] * self.slots
        self.free = [None] * self.slots

