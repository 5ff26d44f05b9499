"""A second ``gpu`` tier at the checkpoint's precision (SPEC §12: an access it serves is a hit,
computed bit-identically; docs/offload.md, "A second full-precision gpu tier live"): the
experts it holds, whole and unconverted, in one pre-allocated device area of the tier's
slots, right under the device cache.

:class:`FullArea`: one device tensor per expert parameter ``[slots + 1, ...]`` (the last
entry the **stash**, below), the key each slot holds, and per entry the events of the last
write into it (``ready``) and the last read out of it (``free``). The Plan's steps:

* ``DEMOTE``/``REQUANT`` device cache -> this tier (a victim of the device cache, by ``copy``
  or ``in_place_requant``: at the same precision both are a move): the evicted pool entry
  copied device to device into the slot the step names (:meth:`FullArea.demote`), before the
  Load that reuses the entry;
* ``PROMOTE`` host memory -> this tier: the host store's expert copied into the slot
  (:meth:`FullArea.fill_from_host`, over the link);
* ``PROMOTE`` this tier -> the device cache: the Plan's Load of the key is a device-to-device
  copy out of its slot (:meth:`FullArea.copy_out`; the runtime counts it as a read of this
  tier, no bytes over the link), then the key leaves the area;
* ``SERVE`` (``Plan.where`` ``LOWER``): computed from the slot, copied into the transient
  entry the engine streams the expert through (:meth:`FullArea.copy_out`);
* over a host tier with a capacity and a disk tier: ``PROMOTE`` host -> this tier copies the
  host tier's record holding the key (:meth:`FullArea.fill_from_host` on the records), and
  ``DEMOTE`` this tier -> the host tier copies the slot into the record the step names
  (:meth:`FullArea.to_host`), before the slot is rewritten;
* with ``granularity_split``: the area is built on the part pool (``pool`` a
  ``mpl.mechanism.parts.PartPool``): each slot one part, the same steps on part keys, a fill
  from host memory the part's runs (:meth:`FullArea.fill_runs`), and a part computed from a
  slot copied by the gather (``PartPool.gather``'s ``LOWER`` places).

**The stash.** When a promotion out of this tier frees a slot that the device cache's victim
is demoted into in the same dispatch (the runtime swaps the two keys), the demotion would
overwrite the promoted key's copy before its Load reads it: the mechanism first copies that
slot into the stash entry (:meth:`FullArea.stash`) and the Load reads the stash.

CUDA ordering, the pool's rules extended to the area: every copy runs on the pool's copy
streams (demand, or prefetch for a prefetch's or a background load's) after the events that
order it: a write into an entry after its last write and its last read; a read after the
write into it; the pool entry a demotion reads after the copy that filled it, and its next
copy after the demotion (its free event); a copy out into a pool entry after the compute that
last read that entry, its event the entry's ready event.
"""

from __future__ import annotations

from .disk import KeyedRecords
from .pool import BACKGROUND, PREFETCH, STREAMED


class DeviceArea(KeyedRecords):
    """A gpu tier's device slots below the device cache (this module's full-precision area,
    ``mpl.mechanism.lowprec.LowPrecArea``): which key each slot holds, and the pool stream a
    copy of a given kind runs on."""

    def drop(self, key) -> None:
        """``key`` left the tier (promoted): its slot keeps its bytes until rewritten."""
        slot = self.where.pop(key, None)
        if slot is not None:
            self.content[slot] = None

    def _stream(self, kind):
        pool = self.pool
        return pool.prefetch_stream if kind in (PREFETCH, BACKGROUND) else pool.demand_stream


class FullArea(DeviceArea):
    """The device area of one full-precision gpu tier under the device cache (see the module
    docstring). ``template``: the pool's tensors (their row shapes and dtypes);
    ``label``/``tier``/``index``: the set's label, the tier's name and index."""

    #: a full-precision tier: the rung checks of a low-precision tier's steps do not apply
    ladder = None

    def __init__(self, template: dict, slots: int, pool, *, label: str, tier: str,
                 index: int, stash: bool = True) -> None:
        self.slots = int(slots)
        self.pool = pool
        self.ops = ops = pool.ops
        self.label, self.tier, self.index = label, tier, index
        self.dtype = None
        # (``stash`` False: no stash entry, for an area whose owner keeps a spare slot
        # instead: a dtype ladder's full-precision rung, mpl.mechanism.lowprec)
        n = self.slots + (1 if stash else 0)
        self.tensors = {name: ops.alloc((n, *t.shape[1:]), t.dtype)
                        for name, t in template.items()}
        self.stash_entry = self.slots if stash else None
        self.entry_bytes = sum(t[0].numel() * t.element_size() for t in self.tensors.values())
        DeviceArea.__init__(self, self.slots)
        self.held: list = [None] * self.slots
        self.ready: list = [None] * n
        self.free: list = [None] * n
        self.demotions = 0          # device cache -> this tier, device to device
        self.host_fills = 0         # host memory -> this tier, over the link
        self.host_bytes = 0
        self.promotions = 0         # this tier -> the device cache, device to device
        self.serves = 0             # computed from a slot (copied into a transient entry)
        self.stashes = 0
        self.host_demotions = 0     # this tier -> the host tier over a disk, device to host
        #: the device cache holds parts (``pool`` a mechanism.parts.PartPool): so does this
        #: tier, one part per slot, and its copies name part slots
        self.parts = hasattr(pool, "parts")

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def _copy(self, stream, dst_waits, src_waits, pairs, tag, *, reads=(), host=False):
        """Copies ``pairs`` on ``stream`` after the events given (``reads``: pool entries
        the stream reads; ``host``: the sources are host memory, copied asynchronously);
        returns its event."""
        ops, pool = self.ops, self.pool
        with ops.use(stream):
            if pool.cuda:
                for ev in (*dst_waits, *src_waits):
                    if ev is not None:
                        ops.wait(stream, ev)
            if reads:
                ops.compute(list(reads))
            for dst, src in pairs:
                ops.copy(dst, src, non_blocking=pool.cuda and host, tag=tag)
            if not pool.cuda:
                return None
            ev = ops.event(timing=True)
            ops.record(ev, stream)
            return ev

    # ------------------------------------------------------------------ writes
    def demote(self, slot: int, entry: int, key) -> None:
        """Pool entry ``entry`` (the key's copy, about to be reused) copied into ``slot``."""
        pool = self.pool
        self.put(slot, key)
        self.demotions += 1
        ev = self._copy(pool.demand_stream, (self.ready[slot], self.free[slot]),
                        (pool.ready[entry], pool.free[entry]),
                        [(t[slot], pool.tensors[n][entry]) for n, t in self.tensors.items()],
                        ("gpu-tier", (self.tier, slot)),
                        reads=(("part", entry) if self.parts else entry,))
        if ev is not None:
            pool.free[entry] = ev          # the entry's next copy waits for this read
            self.ready[slot] = ev

    def fill_from_host(self, slot: int, host: dict, expert: int, key, kind=None) -> None:
        """Expert ``expert`` of the host store's tensors ``host`` copied into ``slot``."""
        self.put(slot, key)
        self.host_fills += 1
        self.host_bytes += self.entry_bytes
        ev = self._copy(self._stream(kind), (self.ready[slot], self.free[slot]), (),
                        [(t[slot], host[n][expert]) for n, t in self.tensors.items()],
                        ("gpu-tier-fill", (self.tier, slot)), host=True)
        if ev is not None:
            self.ready[slot] = ev

    def fill_runs(self, slot: int, runs: dict, key, nbytes: int, kind=None) -> None:
        """A part copied into ``slot`` from the host: ``runs`` name -> its source run (the
        host store's, or a host tier's part record's), ``nbytes`` its bytes over the link."""
        self.put(slot, key)
        self.host_fills += 1
        self.host_bytes += int(nbytes)
        ev = self._copy(self._stream(kind), (self.ready[slot], self.free[slot]), (),
                        [(self.tensors[n][slot][:r.numel()], r) for n, r in runs.items()
                         if r.numel()],
                        ("gpu-tier-fill", (self.tier, slot)), host=True)
        if ev is not None:
            self.ready[slot] = ev

    def stash(self, slot: int) -> None:
        """The copy in ``slot`` kept in the stash entry before the slot is rewritten."""
        s = self.stash_entry
        self.stashes += 1
        ev = self._copy(self.pool.demand_stream, (self.ready[s], self.free[s]),
                        (self.ready[slot],),
                        [(t[s], t[slot]) for t in self.tensors.values()],
                        ("gpu-tier", (self.tier, s)))
        if ev is not None:
            self.ready[s] = ev
            self.free[slot] = ev

    def to_host(self, slot: int, records: dict, j: int):
        """The copy in ``slot`` into host record ``j`` of ``records`` (a demotion into the host
        tier over a disk tier), after the write into the slot; the slot's next write waits
        for it. Returns its event (None on the CPU: the copy is done)."""
        self.host_demotions += 1
        # (after the slot's earlier reads too: its free event then orders every one of them)
        ev = self._copy(self.pool.demand_stream, (), (self.ready[slot], self.free[slot]),
                        [(records[n][j], t[slot]) for n, t in self.tensors.items()],
                        ("demote", "host"), host=True)
        if ev is not None:
            self.free[slot] = ev
        return ev

    # ------------------------------------------------------------------ the read
    def copy_out(self, src: int, entry: int, kind: str, count: bool = True) -> None:
        """Entry ``src`` of the area (a slot, or the stash) copied into pool entry ``entry``:
        a Load into the device cache (``kind`` its transfer kind, counted as the pool's copy
        with no bytes over the link), or with ``kind`` STREAMED a transient entry the expert
        is computed from (a SERVE; ``count`` False for the same SERVE made again in the same
        dispatch)."""
        pool = self.pool
        if kind == STREAMED:
            self.serves += count
            pool.content[entry] = None
        else:
            self.promotions += 1
            pool.copies[kind] += 1
        stream = self._stream(kind)
        tag = ("part-" + kind, ("part", entry)) if self.parts else (kind, entry)
        ev = self._copy(stream, (pool.free[entry], pool.ready[entry]), (self.ready[src],),
                        [(pool.tensors[n][entry], t[src]) for n, t in self.tensors.items()],
                        tag)
        if ev is not None:
            pool.ready[entry] = ev
            pool.ready_kind[entry] = kind
            self.free[src] = ev

    def dequant(self, slot: int, entry: int, count: bool = True) -> None:
        """A SERVE's copy (the low-precision area's name for it): :meth:`copy_out`."""
        self.copy_out(slot, entry, STREAMED, count=count)

    def release(self) -> None:
        self.tensors = {}
        self.ready = [None] * len(self.ready)
        self.free = [None] * len(self.free)
