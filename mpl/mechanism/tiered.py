"""Carrying out a tiered Plan's moves (SPEC §12) on the slot pool, the host tier's cache and
the disk tier: the runtime decides, this executes in the Plan's order and checks that it
agrees (as :func:`mpl.mechanism.execute.placements` checks slots).

Which steps run live (the rest are a :class:`LiveError`, and attach refuses the policies that
make them: ``mpl.mechanism.preflight.not_live_yet``):

* ``READ`` (disk -> the host tier): the record is read into the host cache record the step
  names, by a reader thread; a READ into a transient buffer (slot -1: the host tier did not
  admit the key) is read when its copy to the device is issued, into a one-record bounce
  buffer;
* a Load into the top tier (the PROMOTE host -> device): ``SlotPool.copy_in`` from the host
  cache record holding the key (or the bounce buffer, or the host store for a set of tiers
  whose last tier is host memory); a prefetch whose read has not finished is **deferred**:
  its copy is issued when the next dispatch starts (:meth:`TierExecutor.settle`), so the read
  overlaps the compute of the layer that proposed it;
* ``DEMOTE`` (device -> the host tier): a device-to-host copy of the evicted slot into the
  record the step names, before the load that reuses the slot;
* eviction from the host tier: the victim a READ or DEMOTE names leaves its record (checked
  to be the key the record holds);
* ``granularity_split`` over a disk tier: the keys of those steps are parts
  ``(layer, expert, part)`` and the host tier's records part records
  (:func:`mpl.mechanism.disk.part_layout`): a READ reads the part's runs of the expert's
  record (``read_part``), a Load copies a part record into a part slot
  (``PartPool.copy_record``), a DEMOTE copies a part slot back into a part record, and a
  streamed part is gathered from the record its READ filled;
* a low-precision gpu tier (``int8``/``int4``, right under the top tier; its device area a
  :class:`mpl.mechanism.lowprec.LowPrecArea`): REQUANT (top -> it) is the evicted pool entry
  quantised on the device before the Load that reuses the entry; DEMOTE (top -> it, by
  copy) and PROMOTE (host memory -> it) are quantised from the host store's weights;
  PROMOTE (it -> top) takes the key out of the area (the full copy is the Plan's Load);
  SERVE records the slot a key is computed from, and :meth:`TierExecutor.source_copy`
  dequantises it into the transient entry the engine streams that expert through. A tier
  with a ``dtype_ladder`` of int8 and int4: each of those steps at the rung its ``dtype``
  names, REQUANT inside the tier (a resident pushed one rung down) requantised in its
  slot on the device, and LEAVE (a further victim of a write) freeing its slot. Over a
  host tier with a capacity and a disk tier: a DEMOTE by copy is quantised from the evicted
  pool entry too (the host tier need not hold the expert; the entry holds the same bytes);
  PROMOTE (host tier -> it) is quantised from the record the Plan's READ filled, or the
  bounce record; PROMOTE (it -> top) is the Load from the host tier's record the Plan's
  READ filled; DEMOTE (it -> the host tier) reads the key from the disk into the record the
  step names when the record is first used (the tier holds no full-precision copy;
  ``demotion_reads``; a record rewritten before any use is never read). With
  ``granularity_split`` the tier holds parts (:class:`mpl.mechanism.lowprec_parts.PartArea`):
  the same steps on part keys, a fill from the part's runs, and a part SERVE dequantised by
  the gather into its place in the expert's transient entry;
* a second full-precision gpu tier (:class:`mpl.mechanism.gpu_tier.FullArea`) over host memory
  or over a host tier and a disk tier: DEMOTE/REQUANT (top -> it) a device-to-device copy,
  PROMOTE (host -> it) a copy from the host store or the host tier's record, PROMOTE (it ->
  top) the Load copied out of its slot, DEMOTE (it -> the host tier) its slot copied into the
  record the step names, SERVE computed from its slot.

Order: a tiered Plan lists its Loads and its steps apart; the runtime makes a key's READ and
its victim's DEMOTE before the Load that needs them, so :func:`ordered` interleaves them that
way: each Load after the steps up to its own key's READ and its victim's DEMOTE.

Hazards, all handled by the thread that executes Plans: the host writes a record (a disk
read) only after every device copy that read or wrote it has completed (its events waited
for on the host, ``Ops.host_write`` marks the point), a device copy reads a record only after
the read into it has been waited for, and a device-to-host copy of a slot runs after the
copy that filled the slot and before any later copy into it (the slot's free event).
"""

from __future__ import annotations

import time

import torch

from mpl.runtime.plan import DEMOTE, LEAVE, LOWER, PROMOTE, READ, REQUANT, SERVE, STREAM

from .disk import HostCache
from .execute import LiveError
from .footprint import host_tier_records
from .pool import DEMAND, PREFETCH, STREAMED


def ordered(plan, entry=None) -> list:
    """The Plan's steps and Loads interleaved in the order the runtime made them: a list of
    ``("step", Step)`` and ``("load", (key, slot, victim, kind))``. A Load comes after its
    key's READ, after its victim's move out of the device (DEMOTE or REQUANT), and after the
    move of the key that last left the device entry it fills (a victim, or a key a trigger
    or a cut evicted; ``entry(key, slot)``: the pool entry of a key in a slot, default the
    slot), so a move reads the entry before the Load overwrites it."""
    steps = plan.steps
    read_at: dict = {}
    demote_at: dict = {}
    for i, s in enumerate(steps):
        if s.op == READ:
            read_at.setdefault(s.key, i)
        elif s.op in (DEMOTE, REQUANT) and s.source == 0:
            demote_at.setdefault(s.key, i)
    left: dict = {}           # pool entry -> the keys that left it, in order
    if demote_at:
        for key, slot in plan.evicted:
            left.setdefault(entry(key, slot) if entry else slot, []).append(key)
    out = []
    pos = 0
    for load in plan.raw_loads:
        key, slot, victim, _kind = load
        need = max(read_at.get(key, -1), demote_at.get(victim, -1) if victim is not None else -1)
        q = left.get(entry(key, slot) if entry else slot) if left else None
        if q:
            gone = victim if victim in q else q[0]
            q.remove(gone)
            need = max(need, demote_at.get(gone, -1))
        while pos <= need:
            out.append(("step", steps[pos]))
            pos += 1
        out.append(("load", tuple(load)))
    out.extend(("step", s) for s in steps[pos:])
    return out


class LevelMech:
    """What the mechanism holds for one set of tiers: its host cache and disk (both None
    when its last tier is host memory, which the host store holds), the tier indices, and
    its low-precision gpu tier's device area (``low``, a
    :class:`mpl.mechanism.lowprec.LowPrecArea`; None without one)."""

    __slots__ = ("cache", "disk", "host_tier", "disk_tier", "low")

    def __init__(self, cache, disk, host_tier, disk_tier, low=None) -> None:
        self.cache, self.disk = cache, disk
        self.host_tier, self.disk_tier = host_tier, disk_tier
        self.low = low


class TierExecutor:
    """Executes the tier steps of every Plan (see the module docstring). ``levels``: per
    MoE-layer ordinal its :class:`LevelMech`; ``hosts``: per ordinal the host store's
    tensors (``{}`` for a layer on disk); ``readers``: the reader threads
    (:class:`mpl.mechanism.disk.Readers`); ``overlap``: defer prefetch copies whose read
    has not finished (False: wait for every read when its copy is issued)."""

    def __init__(self, pool, levels: list, hosts: list, layout, readers, *, overlap: bool = True):
        self.pool = pool
        self.ops = pool.ops
        self.levels = levels
        self.hosts = hosts
        self.layout = layout                 # RecordLayout (None: no disk tier)
        #: granularity_split over a disk tier: per part its runs in an expert's record and
        #: in a part record (mpl.mechanism.disk.part_pieces); None: the records are experts
        self.pieces: list | None = None
        self.whole = None                   # an expert's RecordLayout (a split's CPU rows)
        self._cpu_scratch = None            # name -> one expert's rows on the host
        #: one whole-expert record a forward no Plan drove puts a split expert together in
        self._assembled: HostCache | None = None
        self.readers = readers
        self.overlap = overlap and readers is not None and readers.threads > 0
        self.bounce: HostCache | None = None
        self._bounce_key = None             # the key the bounce record holds
        self.cpu_rows_read = 0              # CPU computes from a record the disk filled
        self._transient: dict = {}          # key -> its level, read when its copy is issued
        self._deferred: list = []           # (entry, level, record, key, kind) copies not issued
        self.disk_reads = 0
        self.disk_bytes = 0
        self.bounce_reads = 0
        self.demotions = 0                  # device -> host copies
        self.low_demotions = 0              # a low-precision tier's victims into records
        self.demotion_reads = 0             # ... of them read from the disk (first used)
        #: (id(host cache), record) -> (level, key): a low-precision tier's victim demoted
        #: into the record, not read from the disk yet (read when first used)
        self._unread: dict = {}
        self.host_evictions = 0
        self.deferred_copies = 0
        self.unplanned_reads = 0            # disk reads of forwards no Plan drove
        self.wait_ms = 0.0                  # the engine thread waited for reads
        self._served: dict = {}             # key -> (area, slot): computed from a low tier
        #: the device cache of parts (granularity_split: mpl.mechanism.parts.PartPool), the
        #: Loads' target; None: the Loads fill the pool
        self.parts = None
        self._gather: dict = {}             # key -> its parts' places (this dispatch's)
        from .gpu_tier import FullArea

        lows = list({id(lv.low): lv.low for lv in levels
                     if lv is not None and lv.low is not None}.values())
        #: the low-precision tiers' device areas, and the full-precision gpu tiers' under
        #: the device cache (mpl.mechanism.gpu_tier)
        self.areas = [a for a in lows if not isinstance(a, FullArea)]
        self.fulls = [a for a in lows if isinstance(a, FullArea)]
        self._from_tier: dict = {}          # key -> (area, slot): a Load copied out of a tier
        #: key -> (low-precision area, full entry): a Load out of a ladder's full rung
        self._from_rung: dict = {}
        self._ladder_full = any(getattr(a, "full", None) is not None for a in self.areas)
        self._stashed = None                # the key whose copy the stash holds, Load pending

    # ------------------------------------------------------------------ records
    def _ready_to_write(self, lv: LevelMech, j: int) -> None:
        """Before anything writes record ``j``: its deferred copies issued, its read waited
        for, every device copy touching it completed (host wait)."""
        c = lv.cache
        if self._unread:            # rewritten before anything read it: no read is needed
            self._unread.pop((id(c), j), None)
        if self._deferred and any(d[1] is lv and d[2] == j for d in self._deferred):
            self.settle()
        self._wait_read(c, j)
        for ev in c.users[j]:
            self.ops.synchronize(ev)
        c.users[j] = []

    def _host_readable(self, c: HostCache, j: int) -> None:
        """Before the host reads record ``j`` (a CPU compute, a split expert put together on
        the host): its read waited for, and every device copy touching it completed (a
        demotion into it may still be running on CUDA)."""
        self._wait_read(c, j)
        for ev in c.users[j]:
            self.ops.synchronize(ev)
        c.users[j] = []

    def _wait_read(self, c: HostCache, j: int, fill: bool = True) -> None:
        """Record ``j``'s read waited for; a record a low-precision tier's victim was demoted
        into is read now, unless ``fill`` is False (a drain: nothing reads it)."""
        if fill and self._unread and (id(c), j) in self._unread:
            self._read_demoted(c, j)
        fut = c.pending[j]
        if fut is None:
            return
        c.pending[j] = None
        t0 = time.perf_counter()
        try:
            fut.result()
        except Exception as e:
            raise LiveError(f"the disk tier could not be read: {e}") from None
        finally:
            self.wait_ms += (time.perf_counter() - t0) * 1e3

    def _read_demoted(self, c: HostCache, j: int) -> None:
        """Start the read of record ``j``, which a low-precision tier's victim was demoted
        into (the tier held no full-precision copy): its first use is here. Nothing has
        touched the record since the demotion waited for its earlier users."""
        lv, key = self._unread.pop((id(c), j))
        self._read_into(lv, key, j)
        self.demotion_reads += 1

    def _read_into(self, lv: LevelMech, key, j: int) -> None:
        """Read ``key`` from the disk into record ``j`` by a reader thread (its earlier
        users done with it)."""
        c = lv.cache
        rec = c.record(j)
        self.ops.host_write(rec, ("read", j))
        if len(key) == 3:       # a part (granularity_split): its runs into a part record
            c.pending[j] = self.readers.submit(lv.disk.read_part, key[0], key[1],
                                               self.pieces[key[2]], rec)
        else:
            c.pending[j] = self.readers.submit(lv.disk.read, key[0], key[1], rec)

    def _submit_read(self, lv: LevelMech, key, j: int) -> None:
        """A READ of the Plan's: ``key`` into record ``j``, once its users are done."""
        self._ready_to_write(lv, j)
        self._read_into(lv, key, j)
        self.disk_reads += 1
        self.disk_bytes += lv.cache.layout.stride

    def _bounce_read(self, lv: LevelMech, key, planned: bool = True) -> tuple:
        """A transient READ: the record read now into the bounce buffer (one record,
        allocated the first time one is needed). ``planned``: False for a read no Plan
        made (:meth:`unplanned_copy`), counted apart from the runtime's disk reads."""
        if self.bounce is None:     # one record, or one per part (a split reads parts)
            self.bounce = HostCache(self.layout, len(self.pieces or (0,)), self.ops)
        i = key[2] if len(key) == 3 else 0
        users = self.bounce.users[i]
        for ev in users:
            self.ops.synchronize(ev)
        users.clear()
        rec = self.bounce.record(i)
        self._bounce_key = key
        self.ops.host_write(rec, ("read", "bounce"))
        t0 = time.perf_counter()
        try:
            if len(key) == 3:
                lv.disk.read_part(key[0], key[1], self.pieces[key[2]], rec)
            else:
                lv.disk.read(key[0], key[1], rec)
        except Exception as e:
            raise LiveError(f"the disk tier could not be read: {e}") from None
        self.wait_ms += (time.perf_counter() - t0) * 1e3
        if not planned:
            self.unplanned_reads += 1
            return self.bounce.tensors, i
        self.disk_reads += 1
        self.bounce_reads += 1
        self.disk_bytes += self.layout.stride
        return self.bounce.tensors, i

    def _bounce_again(self, lv: LevelMech, key) -> tuple:
        """The bounce record holding ``key`` for a copy no Plan counts: as it is when it
        still holds it (a record is rewritten only by the next read), else read again (an
        unplanned read)."""
        if self._bounce_key == key:
            return self.bounce.tensors, (key[2] if len(key) == 3 else 0)
        return self._bounce_read(lv, key, planned=False)

    def _copy(self, entry: int, lv: LevelMech, j: int, key, kind: str) -> float:
        """Host cache record ``j`` -> pool entry ``entry`` (its read waited for first); a
        part key's record into part slot ``entry``."""
        c = lv.cache
        self._wait_read(c, j)
        if len(key) == 3:
            pool = self.parts
            ms = pool.copy_record(entry, c.tensors, j, key, kind)
        else:
            pool = self.pool
            ms = pool.copy_in(entry, c.tensors, j, key, kind)
        ev = pool.ready[entry]
        if ev is not None:
            c.users[j].append(ev)
        return ms

    def _part_load(self, entry: int, key, kind: str) -> float:
        """A Load of part key ``key`` into part slot ``entry``: from the host store, the host
        tier's part record holding it, or the bounce record of a READ the host tier did
        not admit."""
        lv = self.levels[key[0]]
        if lv.cache is None:
            return self.parts.copy_in(entry, self.hosts[key[0]], key[1], key, kind)
        j = lv.cache.where.get(key)
        if j is not None:
            return self._copy(entry, lv, j, key, kind)
        if self._transient.pop(key, None) is not None:
            tensors, i = self._bounce_read(lv, key)
            ms = self.parts.copy_record(entry, tensors, i, key, kind)
            ev = self.parts.ready[entry]
            if ev is not None:
                self.bounce.users[i].append(ev)
            return ms
        raise LiveError(f"the plan copies part {key[2]} of expert {key[1]} of MoE layer "
                        f"{key[0]} to the device, but no host tier holds it: the runtime and "
                        f"the mechanism disagree")

    def _gather_into(self, entry: int, where: tuple, key, again: bool = False) -> float:
        """Expert ``key`` put together in transient entry ``entry`` from its parts
        (:meth:`mpl.mechanism.parts.PartPool.gather`); a part the Plan streams is read from
        the host store, the host tier's part record or the bounce record, and every record
        read keeps the gather's event (it is not rewritten before the gather completes).
        ``again``: the same gather once more in the dispatch (:meth:`source_copy`)."""
        pp = self.parts
        lv = self.levels[key[0]]
        streamed: dict = {}
        lowered: dict = {}
        waits: list = []
        areas: list = []
        users: list = []
        approx = None               # (area, the lowest rung) of parts dequantised
        for p, s in enumerate(where):
            if s == LOWER:          # a part computed from a lower gpu tier's slot (SERVE)
                served = self._served.get((key[0], key[1], p))
                if served is not None:
                    a, slot = served
                    areas.append((a, slot))
                    if a.dtype is not None:     # a low-precision tier: dequantised
                        lowered[p] = a.dequant_runs(slot, count=not again)
                        r = a.held[slot]
                        if approx is None or _bits(r) < _bits(approx[1]):
                            approx = (a, r)
                        continue
                    lowered[p] = pp.run(p, a.tensors, slot)
                    waits += [a.ready[slot], a.free[slot]]
                    a.serves += not again
                continue
            if s != STREAM:
                continue
            if lv.cache is None:
                streamed[p] = pp.host_run(p, self.hosts[key[0]], key[1])
                continue
            part = (key[0], key[1], p)
            c = lv.cache
            j = c.where.get(part)
            if j is not None:
                self._wait_read(c, j)
                streamed[p] = pp.run(p, c.tensors, j)
                users.append(c.users[j])
            elif again or self._transient.pop(part, None) is not None:
                tensors, i = self._bounce_again(lv, part) if again else self._bounce_read(lv, part)
                streamed[p] = pp.run(p, tensors, i)
                users.append(self.bounce.users[i])
            else:
                raise LiveError(f"the plan streams part {p} of expert {key[1]} of MoE layer "
                                f"{key[0]}, but no host tier holds it: the runtime and the "
                                f"mechanism disagree")
        if approx is not None and not again:    # computed approximately (as the runtime
            a, r = approx           # counts it: at the lowest precision among its parts)
            a.dequants += 1
            a.dequants_at[r] = a.dequants_at.get(r, 0) + 1
        ms = pp.gather(self.pool, entry, where, key, streamed, lowered, waits, count=not again)
        ev = self.pool.ready[entry]
        if ev is not None:
            for u in users:
                u.append(ev)
            for a, slot in areas:       # the slot's next write waits for the gather
                a.free[slot] = ev
        return ms

    def source_copy(self, entry: int, ordinal: int, expert: int, kind: str = STREAMED,
                    again: bool = False) -> float:
        """Copy expert ``expert`` of MoE layer ``ordinal`` into pool entry ``entry`` from the
        host tier that holds it (a streamed expert's copy, or a Load's). ``again``: a streamed
        expert of this dispatch copied once more (its transient entry was given to another
        expert in between: calls over groups of rows), from the same source, counted nowhere
        the runtime's statistics are compared (no copy, serve, approximate compute or disk
        read again: a READ's record that is gone is read again as an unplanned read)."""
        key = (ordinal, expert)
        if self._gather:
            where = self._gather.get(key)
            if where is not None:       # put together from its parts
                return self._gather_into(entry, where, key, again=again)
        served = self._served.get(key)
        if served is not None:          # computed from its low-precision copy (a SERVE step)
            served[0].dequant(served[1], entry, count=not again)
            return 0.0
        if again:
            self.unplanned_copy(entry, ordinal, expert)
            return 0.0
        lv = self.levels[ordinal]
        if lv.cache is None:
            return self.pool.copy_in(entry, self.hosts[ordinal], expert, key, kind)
        j = lv.cache.where.get(key)
        if j is not None:
            return self._copy(entry, lv, j, key, kind)
        if self._transient.pop(key, None) is not None:
            tensors, i = self._bounce_read(lv, key)
            ms = self.pool.copy_in(entry, tensors, i, key, kind)
            ev = self.pool.ready[entry]
            if ev is not None:
                self.bounce.users[i].append(ev)
            return ms
        raise LiveError(f"the plan copies expert {expert} of MoE layer {ordinal} to the device, "
                        f"but no host tier holds it: the runtime and the mechanism disagree")

    def cpu_rows(self, ordinal: int, expert: int):
        """The weight rows of expert ``expert`` of MoE layer ``ordinal`` for a CPU compute
        (``cpu_fallback``, ``hybrid``): the host store's, or the host tier's record the
        Plan's READ put it in (its read waited for; with a split, its parts' records put
        together on the host), or the bounce record of a READ the host tier did not admit (read again, counted in ``unplanned_reads``, when another
        transient read has reused the record since)."""
        key = (ordinal, expert)
        lv = self.levels[ordinal]
        if lv.cache is None:
            return _rows(self.hosts[ordinal], expert)
        if self.pieces is not None:
            return self._cpu_rows_of_parts(lv, ordinal, expert)
        c = lv.cache
        j = c.where.get(key)
        if j is not None:
            self._host_readable(c, j)
            self.cpu_rows_read += 1
            return _rows(c.tensors, j)
        if self._transient.pop(key, None) is not None:
            tensors, i = self._bounce_read(lv, key)
        else:
            tensors, i = self._bounce_again(lv, key)
        self.cpu_rows_read += 1
        return _rows(tensors, i)

    def _cpu_rows_of_parts(self, lv: LevelMech, ordinal: int, expert: int) -> dict:
        """A CPU compute's rows of an expert whose host tier holds parts: each part's runs
        copied from the part record its READ filled (or its bounce record, read now) into
        one host scratch expert, reused by the next (the CPU computes one expert at a time
        and is done with its rows before it asks for the next)."""
        out = self._parts_on_host(lv, ordinal, expert)
        self.cpu_rows_read += 1
        return out

    def _parts_on_host(self, lv: LevelMech, ordinal: int, expert: int,
                       planned: bool = True, out: dict | None = None) -> dict:
        """The rows of an expert whose host tier holds parts, each part's runs copied into
        one host scratch expert (reused by the next call; ``out``: into these rows instead)
        from the part record holding it, or the bounce record (a READ of this dispatch's
        Plan the host tier did not admit; else read again, counted apart; ``planned``
        False: always counted apart)."""
        pp = self.parts
        if out is None:
            if self._cpu_scratch is None:
                self._cpu_scratch = {name: torch.empty(row, dtype=dtype)
                                     for name, row, dtype, _o, _n in self.whole.params}
            out = self._cpu_scratch
        c = lv.cache
        for p in range(pp.parts.n):
            key = (ordinal, expert, p)
            j = c.where.get(key)
            if j is not None:
                self._host_readable(c, j)
                tensors, i = c.tensors, j
            elif planned and self._transient.pop(key, None) is not None:
                tensors, i = self._bounce_read(lv, key)
            else:           # a part no READ of this dispatch brought: read again, apart
                tensors, i = self._bounce_read(lv, key, planned=False)
            for name, (a, b) in pp.parts.ranges[p].items():
                if b > a:
                    out[name].view(-1)[a:b].copy_(tensors[name][i][:b - a])
        return out

    def unplanned_copy(self, entry: int, ordinal: int, expert: int) -> None:
        """Copy expert ``expert`` of MoE layer ``ordinal`` into the transient pool entry
        ``entry`` for a forward no Plan drove (an engine's warm-up or profiling run): from
        the host tier holding it, else read from the disk into the bounce record. Counted
        nowhere the runtime's statistics are compared (no copy, no disk read of the
        policy's: ``unplanned_reads``), and no record of the host tier changes."""
        key = (ordinal, expert)
        pool = self.pool
        lv = self.levels[ordinal]
        if lv.cache is None:
            pool.copy_in(entry, self.hosts[ordinal], expert, key, STREAMED, count=False)
            return
        c = lv.cache
        j = c.where.get(key)
        if self.pieces is not None:
            # its parts put together on the host in one whole-expert record (page-locked on
            # CUDA, allocated on the first such forward), then copied
            if self._assembled is None:
                self._assembled = HostCache(self.whole, 1, self.ops)
            a = self._assembled
            for ev in a.users[0]:       # the last copy out of it has completed
                self.ops.synchronize(ev)
            a.users[0] = []
            self.ops.host_write(a.record(0), ("read", "assembled"))
            self._parts_on_host(lv, ordinal, expert, planned=False,
                                out={name: t[0] for name, t in a.tensors.items()})
            pool.copy_in(entry, a.tensors, 0, key, STREAMED, count=False)
            users = a.users[0]
        elif j is not None:
            self._wait_read(c, j)
            pool.copy_in(entry, c.tensors, j, key, STREAMED, count=False)
            users = c.users[j]
        else:
            tensors, i = self._bounce_again(lv, key)
            pool.copy_in(entry, tensors, i, key, STREAMED, count=False)
            users = self.bounce.users[i]
        ev = pool.ready[entry]
        if ev is not None:
            users.append(ev)

    # ------------------------------------------------------------------ a Plan
    def settle(self) -> None:
        """Issue the deferred prefetch copies (each after its read): before any compute of
        the next dispatch reads the pool, and before the records they read are rewritten."""
        if not self._deferred:
            return
        pending, self._deferred = self._deferred, []
        for entry, lv, j, key, kind in pending:
            self._copy(entry, lv, j, key, kind)

    def transfers(self, plan, *, home: int = 0, resident: list | None = None) -> float:
        """Carry out ``plan``: device evictions (bookkeeping), then its steps and Loads in
        the runtime's order (:func:`ordered`). Returns the host milliseconds demand work
        blocked plus the CUDA stalls measured since the last call."""
        self.settle()
        stall = self.pool.collect_stalls() if self.pool.cuda else 0.0
        self._transient.clear()
        self._served.clear()
        parts = self.parts
        pool = parts if parts is not None else self.pool     # where the Loads go
        if parts is not None:
            self._gather = {(plan.layer, e): w for e, w in zip(plan.experts, plan.where)
                            if type(w) is tuple}
        content = pool.content

        def entry(key, slot):
            return key[0] * home + key[1] if home else slot

        gone = {}
        for key, slot in plan.evicted:
            gone[key] = entry(key, slot)
        seq = ordered(plan, entry) if plan.steps else [("load", tuple(x)) for x in plan.raw_loads]
        low_moves = self._check_low(seq, gone, content) \
            if (self.areas or self.fulls) and plan.steps else ()
        self._from_tier = {}
        self._stashed = None
        if self._from_rung:
            raise LiveError("a Load out of a tier's full-precision rung was never issued: the "
                            "runtime and the mechanism disagree")
        if self._ladder_full and plan.steps:
            # Loads copied out of a ladder's full-precision rung (device to device): the
            # entry stays until its Load is issued, whatever rewrites the slot first
            for _what, x in seq:
                if _what == "step" and x.op == PROMOTE and x.target == 0:
                    a = self.levels[x.key[0]].low
                    if a is not None and getattr(a, "full", None) is not None \
                            and x.source == a.index:
                        f = a.full_entry(x.key)
                        if f is not None:
                            a.loading(f)
                            self._from_rung[x.key] = (a, f)
        if self.fulls and plan.steps:       # Loads copied out of a full-precision gpu tier
            self._full_sources(seq)
        # ---- checks first (nothing has moved yet): every step is one this mechanism runs,
        #      and the records and slots it names hold what the runtime says
        first: dict = {}              # (level, record) -> index of the first op touching it
        sim: dict = {}                # (level, record) -> key, as the steps leave it
        simwhere: dict = {}           # key -> (level, record), as the steps leave it
        for n, (what, x) in enumerate(seq):
            if what == "load":
                lv = self.levels[x[0][0]]
                if lv.cache is not None:          # the record a Load reads is touched too
                    rid = simwhere.get(x[0])
                    if rid is None and x[0] in lv.cache.where:
                        rid = (id(lv), lv.cache.where[x[0]])
                    if rid is not None and sim.get(rid, lv.cache.content[rid[1]]) == x[0]:
                        first.setdefault(rid, n)
                continue
            if n in low_moves:
                lv = self.levels[x.key[0]]
                if x.op == PROMOTE and lv.cache is not None and x.source == lv.host_tier:
                    # a fill of a gpu tier reads the host tier's record holding the key
                    rid = simwhere.get(x.key)
                    if rid is None and x.key in lv.cache.where:
                        rid = (id(lv), lv.cache.where[x.key])
                    if rid is not None and sim.get(rid, lv.cache.content[rid[1]]) == x.key:
                        first.setdefault(rid, n)
                continue
            # (a part key (granularity_split) moves between the disk, the host tier's part
            # records and the part slots as an expert's key does)
            lv = self.levels[x.key[0]] if len(x.key) == 2 or (
                len(x.key) == 3 and self.pieces is not None) else None
            from_area = x.op == DEMOTE and lv is not None and lv.low is not None \
                and x.source == lv.low.index and x.source != 0
            if lv is None or lv.cache is None or x.op not in (READ, DEMOTE) \
                    or x.target != lv.host_tier or (x.op == READ and x.source != lv.disk_tier) \
                    or (x.op == DEMOTE and x.source != 0 and not from_area):
                raise LiveError(f"the plan moves {x.key} by {x.op} from tier {x.source} to tier "
                                f"{x.target}, which the live mechanism does not carry out")
            if x.slot < 0:
                if x.op != READ:
                    raise LiveError(f"the plan demotes {x.key} into no record of the host tier")
                continue
            rid = (id(lv), x.slot)
            held = sim.get(rid, lv.cache.content[x.slot])
            if held != x.victim:
                raise LiveError(
                    f"the plan puts {x.key} into record {x.slot} of the host tier in place of "
                    f"{x.victim}, but the record holds {held}: the runtime and the mechanism "
                    f"disagree")
            sim[rid] = x.key
            simwhere[x.key] = rid
            first.setdefault(rid, n)
            if x.op == DEMOTE and not from_area:
                i = gone.get(x.key)
                if i is None or content[i] != x.key:
                    raise LiveError(f"the plan demotes {x.key} from the device, but it left no "
                                    f"slot of the pool: the runtime and the mechanism disagree")
        # ---- device evictions (bookkeeping: a demoted slot keeps its bytes until reused)
        for key, slot in plan.evicted:
            i = gone[key]
            if resident is not None:
                held = content[i]
                if held is not None:
                    resident[held[0]] -= 1
            pool.evict(i)
        # ---- the reads that are the first use of their record start at once, in parallel
        started = set()
        for n, (what, x) in enumerate(seq):
            if what == "step" and x.op == READ and x.slot >= 0:
                lv = self.levels[x.key[0]]
                if first.get((id(lv), x.slot)) == n:
                    self._start_read(lv, x)
                    started.add(n)
            elif self._unread and (what == "load" or n in low_moves):
                # a record a low-precision tier's victim was demoted into, first read here:
                # its read starts now, beside the others
                key = x[0] if what == "load" else x.key
                lv = self.levels[key[0]]
                c = lv.cache
                j = c.where.get(key) if c is not None else None
                if j is not None and (id(c), j) in self._unread and first.get((id(lv), j)) == n:
                    self._read_demoted(c, j)
        # ---- then everything in order
        for n, (what, x) in enumerate(seq):
            if what == "step":
                lv = self.levels[x.key[0]]
                if n in low_moves:
                    self._low_move(lv, x, gone)
                elif x.op == READ:
                    if x.slot < 0:
                        self._transient[x.key] = lv
                    elif n not in started:
                        self._start_read(lv, x)
                elif x.source != 0:
                    self._demote_from_area(lv, x)
                else:
                    self._demote(lv, x, gone[x.key])
                continue
            key, slot, _victim, kind = x
            i = entry(key, slot)
            if resident is not None:
                held = content[i]
                if held is not None:
                    resident[held[0]] -= 1
                resident[key[0]] += 1
            lv = self.levels[key[0]]
            # (a Load copied device to device out of a gpu tier below reads no record)
            j = lv.cache.where.get(key) if lv.cache is not None and not (
                key in self._from_tier or (self._from_rung and key in self._from_rung)) else None
            if j is not None and kind == PREFETCH and self.overlap \
                    and lv.cache.pending[j] is not None and not lv.cache.pending[j].done():
                # the read is still running: the copy waits for the next dispatch
                content[i] = key
                self._deferred.append((i, lv, j, key, kind))
                self.deferred_copies += 1
                continue
            t0 = time.perf_counter()
            if self._from_rung and key in self._from_rung:    # a ladder's full rung
                a, f = self._from_rung.pop(key)
                content[i] = key
                a.full.copy_out(f, i, kind)
                a.loaded(f)
            elif key in self._from_tier:     # device to device, out of the tier below
                a, s = self._from_tier.pop(key)
                if self._stashed == key:
                    s = a.stash_entry
                    self._stashed = None
                content[i] = key
                a.copy_out(s, i, kind)
            elif parts is not None:       # a part into its part slot
                self._part_load(i, key, kind)
            else:
                self.source_copy(i, key[0], key[1], kind)
            if kind == DEMAND:     # the host blocked: the read waited for, the copy (CPU)
                stall += (time.perf_counter() - t0) * 1e3
        return stall

    # ------------------------------------------------------------------ gpu tiers below
    def _full_sources(self, seq) -> None:
        """The slot of a full-precision gpu tier each Load promoted out of it copies from
        (``_from_tier``), as the Plan's earlier steps leave the tier: a key the Plan demotes
        into the tier and a prefetch then promotes back is read where the demotion put it.
        A :class:`LiveError` when the tier does not hold the key at its Load."""
        promoted: dict = {}           # key -> its full-precision tier, PROMOTEd to the device
        for what, x in seq:
            if what == "step" and x.op == PROMOTE and x.target == 0:
                a = self.levels[x.key[0]].low
                if a is not None and a.ladder is None and a.dtype is None \
                        and x.source == a.index:
                    promoted[x.key] = a
        if not promoted:
            return
        moved: dict = {}              # (tier, key) -> its slot as the steps so far leave it
        for what, x in seq:
            if what == "load":
                a = promoted.get(x[0])
                if a is not None:
                    k = (id(a), x[0])
                    s = moved[k] if k in moved else a.where.get(x[0])
                    if s is None:
                        raise LiveError(f"the plan promotes {x[0]} out of tier '{a.tier}', "
                                        f"which does not hold it: the runtime and the "
                                        f"mechanism disagree")
                    self._from_tier[x[0]] = (a, s)
                continue
            a = self.levels[x.key[0]].low
            if a is None or a.ladder is not None or a.dtype is not None:
                continue
            if x.target == a.index and x.op in (DEMOTE, REQUANT, PROMOTE):
                moved[(id(a), x.key)] = x.slot            # into the tier (a victim, a fill)
            elif x.source == a.index and x.op in (DEMOTE, PROMOTE):
                if x.op == PROMOTE and x.target == 0 and x.key not in self._from_tier:
                    raise LiveError(f"the plan promotes {x.key} out of tier '{a.tier}' before "
                                    f"its Load copies it: the runtime and the mechanism "
                                    f"disagree")
                moved[(id(a), x.key)] = None              # out of it

    # ------------------------------------------------------------------ low-precision tiers
    def _check_low(self, seq, gone, content) -> set:
        """The positions in ``seq`` of the steps that move a key into, out of or compute it
        from a low-precision gpu tier, checked before anything moves: each is one this
        mechanism carries out, and the slots it names hold what the runtime says (a
        :class:`LiveError` otherwise). A slot is written in place of the key a later
        PROMOTE of this Plan takes out of the tier (the runtime frees it first)."""
        out = set()
        leaving = set()
        victims = set()       # the keys a write into a gpu tier's slot names as its victim
        for what, x in seq:
            if what != "step":
                continue
            if x.op == PROMOTE:
                a = self.levels[x.key[0]].low
                if a is not None and x.source == a.index:
                    leaving.add(x.key)
                if a is not None and x.target == a.index and x.victim is not None:
                    victims.add(x.victim)
            elif x.op in (DEMOTE, REQUANT) and x.victim is not None:
                a = self.levels[x.key[0]].low
                if a is not None and x.target == a.index:
                    victims.add(x.victim)
        sim: dict = {}        # (area, slot) -> key, as the steps leave it
        rung: dict = {}       # (area, slot) -> the precision it holds, as the steps leave it
        where: dict = {}      # (area, key) -> slot; -1: overwritten, promoted later; None: out
        served: set = set()   # (area, slot) computed from by this dispatch

        def slot_of(a, key):
            k = (id(a), key)
            return where[k] if k in where else a.where.get(key)

        def write(a, x) -> None:
            if not 0 <= x.slot < a.slots:
                raise LiveError(f"the plan puts {x.key} into slot {x.slot} of tier '{a.tier}', "
                                f"which has {a.slots} slots: the runtime and the mechanism "
                                f"disagree")
            rid = (id(a), x.slot)
            held = sim.get(rid, a.content[x.slot])
            if held is not None and slot_of(a, held) != x.slot:
                held = None          # (a stale record: its key was written elsewhere since)
            # (a ladder evicts several keys to make room for one: the first is the step's
            # victim, the others leave by LEAVE steps before it, their slots free again)
            if held != x.victim and not (x.victim is None and held in leaving):
                raise LiveError(
                    f"the plan puts {x.key} into slot {x.slot} of tier '{a.tier}' in place of "
                    f"{x.victim}, but the slot holds {held}: the runtime and the mechanism "
                    f"disagree")
            if rid in served:
                raise LiveError(
                    f"the plan computes from slot {x.slot} of tier '{a.tier}' and rewrites the "
                    f"slot in the same dispatch (with {x.key}), which the live mechanism "
                    f"cannot order")
            if held is not None:
                where[(id(a), held)] = -1 if (x.victim is None and held in leaving) else None
            sim[rid] = x.key
            rung[rid] = x.dtype
            where[(id(a), x.key)] = x.slot

        for n, (what, x) in enumerate(seq):
            if what != "step" or (len(x.key) != 2 and self.parts is None):
                continue
            lv = self.levels[x.key[0]]
            a = lv.low
            if a is None or a.index not in (x.source, x.target):
                continue
            t = a.index
            if x.op in (REQUANT, DEMOTE) and x.source == 0 and x.target == t:
                i = gone.get(x.key)
                if i is None or content[i] != x.key:
                    raise LiveError(f"the plan moves {x.key} from the device into tier "
                                    f"'{a.tier}', but it left no slot of the pool: the runtime "
                                    f"and the mechanism disagree")
                write(a, x)
            elif x.op == PROMOTE and x.target == t and x.source == lv.host_tier:
                write(a, x)
            elif x.op == DEMOTE and x.source == t and lv.cache is not None \
                    and x.target == lv.host_tier:
                # a gpu tier's victim into the host tier over a disk: the area side checked
                # here, the record it writes by the host tier's checks (a full-precision
                # tier's slot is copied into it; a low-precision tier's record is read from
                # the disk, which holds the full-precision bytes)
                cur = slot_of(a, x.key)
                if cur is None or cur < 0 or sim.get((id(a), cur), a.content[cur]) != x.key:
                    raise LiveError(f"the plan demotes {x.key} out of tier '{a.tier}', which "
                                    f"does not hold it: the runtime and the mechanism disagree")
                if a.dtype is None and (id(a), cur) in served:
                    raise LiveError(f"the plan computes from slot {cur} of tier '{a.tier}' and "
                                    f"demotes it in the same dispatch, which the live "
                                    f"mechanism cannot order")
                if a.ladder and x.key not in victims:
                    # a ladder's further victim (not the victim of the write that follows):
                    # its slot is free again, as after a LEAVE
                    where[(id(a), x.key)] = None
                    sim[(id(a), cur)] = None
                continue
            elif x.op == PROMOTE and x.source == t and x.target == 0:
                cur = slot_of(a, x.key)
                if cur is None:
                    raise LiveError(f"the plan promotes {x.key} out of tier '{a.tier}', which "
                                    f"does not hold it: the runtime and the mechanism disagree")
                where[(id(a), x.key)] = None
                if cur >= 0 and sim.get((id(a), cur), a.content[cur]) == x.key:
                    sim[(id(a), cur)] = None
            elif x.op == LEAVE and x.source == t and x.target == t and a.ladder:
                # a ladder's further victim: it leaves its slot, nothing moves
                if slot_of(a, x.key) != x.slot or x.slot < 0 or \
                        sim.get((id(a), x.slot), a.content[x.slot]) != x.key:
                    raise LiveError(f"the plan says {x.key} leaves slot {x.slot} of tier "
                                    f"'{a.tier}', which does not hold it: the runtime and the "
                                    f"mechanism disagree")
                where[(id(a), x.key)] = None
                sim[(id(a), x.slot)] = None
            elif x.op == REQUANT and x.source == t and x.target == t and a.ladder:
                # a ladder's resident pushed one rung down, where it is
                if slot_of(a, x.key) != x.slot:
                    raise LiveError(f"the plan requantizes {x.key} in slot {x.slot} of tier "
                                    f"'{a.tier}', which does not hold it: the runtime and the "
                                    f"mechanism disagree")
                rid = (id(a), x.slot)
                was = rung.get(rid, a.held[x.slot])
                if was not in a.ladder or x.dtype not in a.ladder \
                        or a.ladder.index(x.dtype) != a.ladder.index(was) + 1:
                    raise LiveError(f"the plan requantizes {x.key} in tier '{a.tier}' from "
                                    f"{was} to {x.dtype}, not one rung of its ladder "
                                    f"({', '.join(a.ladder)}) down: the runtime and the "
                                    f"mechanism disagree")
                if rid in served:
                    raise LiveError(
                        f"the plan computes from slot {x.slot} of tier '{a.tier}' and "
                        f"requantizes it in the same dispatch, which the live mechanism "
                        f"cannot order")
                rung[rid] = x.dtype
            elif x.op == SERVE and x.source == t:
                if 0 <= x.slot < a.slots and x.dtype is not None and a.dtype is not None and \
                        rung.get((id(a), x.slot), a.held[x.slot]) != x.dtype:
                    raise LiveError(f"the plan computes {x.key} from tier '{a.tier}' at "
                                    f"{x.dtype}, but its slot holds it at "
                                    f"{rung.get((id(a), x.slot), a.held[x.slot])}: the runtime "
                                    f"and the mechanism disagree")
                if slot_of(a, x.key) != x.slot:
                    raise LiveError(f"the plan computes {x.key} from slot {x.slot} of tier "
                                    f"'{a.tier}', but the slot holds "
                                    f"{sim.get((id(a), x.slot), a.content[x.slot]) if 0 <= x.slot < a.slots else None}"
                                    f": the runtime and the mechanism disagree")
                served.add((id(a), x.slot))
            else:
                raise LiveError(f"the plan moves {x.key} by {x.op} from tier {x.source} to tier "
                                f"{x.target}, which the live mechanism does not carry out")
            out.add(n)
        return out

    def _low_move(self, lv: LevelMech, x, gone) -> None:
        """Carry out one step :meth:`_check_low` accepted."""
        a = lv.low
        if a.dtype is None and a.ladder is None:        # a full-precision gpu tier
            if x.op in (REQUANT, DEMOTE) and x.target == a.index:
                held = a.content[x.slot]
                if held is not None and held in self._from_tier \
                        and self._from_tier[held][1] == x.slot:
                    # the runtime swaps the promoted key and the victim: keep the promoted
                    # key's copy for its Load before the slot is rewritten
                    if self._stashed is not None:
                        raise LiveError(f"the plan rewrites the copies of {self._stashed} and "
                                        f"{held} in tier '{a.tier}' before their Loads read "
                                        f"them, which the live mechanism cannot order")
                    a.stash(x.slot)
                    self._stashed = held
                a.demote(x.slot, gone[x.key], x.key)
            elif x.op == PROMOTE and x.target == a.index:
                pp = self.parts if len(x.key) == 3 else None
                if lv.cache is None:
                    if pp is not None:      # a part: its runs of the host store's row
                        p = x.key[2]
                        a.fill_runs(x.slot, pp.host_run(p, self.hosts[x.key[0]], x.key[1]),
                                    x.key, pp.part_bytes(p), x.kind)
                    else:
                        a.fill_from_host(x.slot, self.hosts[x.key[0]], x.key[1], x.key, x.kind)
                else:           # from the host tier's record (or the bounce record)
                    tensors, j, users = self._record_of(lv, x.key)
                    if pp is not None:
                        p = x.key[2]
                        a.fill_runs(x.slot, pp.run(p, tensors, j), x.key, pp.part_bytes(p),
                                    x.kind)
                    else:
                        a.fill_from_host(x.slot, tensors, j, x.key, x.kind)
                    if a.ready[x.slot] is not None:
                        users.append(a.ready[x.slot])
            elif x.op == PROMOTE:
                if x.key in self._from_tier:
                    raise LiveError(f"the plan promotes {x.key} out of tier '{a.tier}' before "
                                    f"its Load copies it: the runtime and the mechanism "
                                    f"disagree")
                a.drop(x.key)
            else:
                self._served[x.key] = (a, x.slot)
            return
        if x.op == LEAVE:               # a ladder's further victim: its slot is free
            a.leave(x.key)
        elif x.op == REQUANT and x.source == a.index:     # a ladder's step down, where it is
            a.requant_down(x.slot, x.dtype)
        elif x.op == REQUANT or (x.op == DEMOTE and (lv.cache is not None
                                                      or x.dtype == a.full_dtype)):
            # quantised where it is: from the evicted pool entry or part slot (over a disk
            # tier a demotion by copy too: the host tier need not hold the expert, and the
            # entry holds the same bytes); at a ladder's full rung a device copy, whole
            a.requant(x.slot, gone[x.key], x.key, x.dtype)
        elif x.op == PROMOTE and x.target == a.index and lv.cache is not None:
            # a promotion from the host tier over a disk: quantised from the record holding
            # the key (its READ waited for; or the bounce record of a READ the host tier did
            # not admit), on the host, before the record can be rewritten
            tensors, j, users = self._record_of(lv, x.key)
            if len(x.key) == 3:         # a part record: the part's runs
                a.fill_runs(x.slot, self.parts.run(x.key[2], tensors, j), x.key, x.kind,
                            x.dtype)
            else:
                a.fill_from_host(x.slot, tensors, j, x.key, x.kind, x.dtype)
                if x.dtype == a.full_dtype:     # copied whole, asynchronously: a user
                    ev = a.full.ready[a._full_of[x.slot]]
                    if ev is not None:
                        users.append(ev)
        elif len(x.key) == 3 and (x.op == DEMOTE or (x.op == PROMOTE and x.target == a.index)):
            # a part: its runs of the host store's row
            a.fill_runs(x.slot, self.parts.host_run(x.key[2], self.hosts[x.key[0]], x.key[1]),
                        x.key, x.kind if x.op == PROMOTE else None, x.dtype)
        elif x.op == DEMOTE or (x.op == PROMOTE and x.target == a.index):
            # a demotion by copy, a promotion from host memory: from the host store's weights
            a.fill_from_host(x.slot, self.hosts[x.key[0]], x.key[1], x.key,
                             x.kind if x.op == PROMOTE else None, x.dtype)
        elif x.op == PROMOTE:           # out of the tier (its full copy is the Plan's Load)
            a.leave(x.key)
        else:                           # SERVE: computed from the slot (source_copy)
            self._served[x.key] = (a, x.slot)

    def _record_of(self, lv: LevelMech, key) -> tuple:
        """The host record holding ``key`` for a device copy out of it, its read waited for:
        ``(tensors, index, users)`` of the host tier's record, or of the bounce record a READ
        the host tier did not admit is read into now; ``users`` takes the copy's event."""
        c = lv.cache
        j = c.where.get(key)
        if j is not None:
            self._wait_read(c, j)
            return c.tensors, j, c.users[j]
        if self._transient.pop(key, None) is not None:
            tensors, i = self._bounce_read(lv, key)
            return tensors, i, self.bounce.users[i]
        raise LiveError(f"the plan copies {key} out of the host tier, which does not hold it: "
                        f"the runtime and the mechanism disagree")

    def _demote_from_area(self, lv: LevelMech, x) -> None:
        """A full-precision gpu tier's victim (its slot) -> host record ``x.slot``, before
        the slot is rewritten (the area's free event). A low-precision tier's victim: the
        record is read from the disk (the tier holds no full-precision copy to give, and
        the host tier's records hold the checkpoint's bytes) when something first reads it
        (:meth:`_read_demoted`, counted in ``demotion_reads`` apart from the Plan's READs;
        ``low_demotions`` counts the demotions)."""
        a = lv.low
        s = a.where.get(x.key)
        if s is None:
            raise LiveError(f"the plan demotes {x.key} out of tier '{a.tier}', which does not "
                            f"hold it: the runtime and the mechanism disagree")
        c = lv.cache
        j = x.slot
        if a.dtype is not None and a.held[s] != a.full_dtype:
            # the record is read from the disk when something first reads it (a Load, a
            # fill, a CPU compute): a record rewritten before that is never read
            self._ready_to_write(lv, j)
            if c.content[j] is not None:
                self.host_evictions += 1
            c.put(j, x.key)
            self.low_demotions += 1
            self._unread[(id(c), j)] = (lv, x.key)
            a.drop(x.key)
            return
        self._ready_to_write(lv, j)
        if c.content[j] is not None:
            self.host_evictions += 1
        c.put(j, x.key)
        self.demotions += 1
        ev = a.to_host(s, c.tensors, j)     # (a ladder's full rung: its full entry's copy)
        a.drop(x.key)
        if ev is not None:
            c.users[j].append(ev)

    def _start_read(self, lv: LevelMech, x) -> None:
        c = lv.cache
        if c.content[x.slot] is not None:
            self.host_evictions += 1
        c.put(x.slot, x.key)
        self._submit_read(lv, x.key, x.slot)

    def _demote(self, lv: LevelMech, x, i: int) -> None:
        """Device slot ``i`` -> host record ``x.slot`` (before the slot is reused)."""
        c = lv.cache
        j = x.slot
        # (a part key leaves a part slot: the part's row into a part record)
        pool, ops = (self.parts if len(x.key) == 3 else self.pool), self.ops
        self._ready_to_write(lv, j)
        if c.content[j] is not None:
            self.host_evictions += 1
        c.put(j, x.key)
        self.demotions += 1
        if not pool.cuda:
            for name, t in pool.tensors.items():
                ops.copy(c.tensors[name][j], t[i], tag=("demote", "host"))
            return
        stream = pool.demand_stream
        with ops.use(stream):
            for ev in (pool.free[i], pool.ready[i]):
                if ev is not None:      # compute reading the slot, the copy that filled it
                    ops.wait(stream, ev)
            for name, t in pool.tensors.items():
                ops.copy(c.tensors[name][j], t[i], non_blocking=True, tag=("demote", "host"))
            ev = ops.event()
            ops.record(ev, stream)
        pool.free[i] = ev              # a later copy into the slot waits for this one
        c.users[j].append(ev)

    # ------------------------------------------------------------------ the end
    def drain(self) -> None:
        """Every deferred copy issued and every read waited for (stats, detach)."""
        self.settle()
        seen = set()
        for lv in self.levels:
            c = lv.cache
            if c is None or id(c) in seen:
                continue
            seen.add(id(c))
            for j in range(c.slots):
                self._wait_read(c, j, fill=False)

    def stats(self) -> dict:
        caches = {id(lv.cache): lv.cache for lv in self.levels if lv.cache is not None}
        disks = {id(lv.disk): lv.disk for lv in self.levels if lv.disk is not None}
        return {
            "disk_reads": self.disk_reads,
            "disk_bytes_read": self.disk_bytes,
            "bounce_reads": self.bounce_reads,
            "demotions": self.demotions,
            "low_demotions": self.low_demotions,
            "demotion_reads": self.demotion_reads,
            "host_evictions": self.host_evictions,
            "deferred_copies": self.deferred_copies,
            "unplanned_reads": self.unplanned_reads,
            "cpu_from_records": self.cpu_rows_read,
            "read_wait_ms": self.wait_ms,
            "read_busy_ms": self.readers.busy_ms if self.readers is not None else 0.0,
            "readers": self.readers.threads if self.readers is not None else 0,
            "host_cache_slots": sum(c.slots for c in caches.values()),
            "host_cache_bytes": sum(c.nbytes for c in caches.values())
            + (self.bounce.nbytes if self.bounce is not None else 0),
            "record_bytes": self.layout.stride if self.layout is not None else 0,
            "page_cache": ", ".join(sorted({d.page_cache for d in disks.values()})) or None,
            "files": sorted({f for d in disks.values() for f in d.files.values()}),
            "approximate": sum(a.dequants for a in self.areas),
            "approximate_by_dtype": _summed(a.dequants_at for a in self.areas),
            "requants": sum(a.requants for a in self.areas),
            "rung_requants": sum(a.rung_requants for a in self.areas),
            "quantized_from_host": sum(a.host_fills for a in self.areas),
            "quantized_bytes_from_host": sum(a.host_bytes for a in self.areas),
            "lowprec_bytes": sum(a.nbytes for a in self.areas),     # (with any full rung)
            "gpu_tier_bytes": sum(a.nbytes for a in self.fulls),
            "gpu_tiers": [{"set": a.label, "tier": a.tier, "slots": a.slots,
                           "entry_bytes": a.entry_bytes, "bytes": a.nbytes,
                           "demotions": a.demotions, "filled_from_host": a.host_fills,
                           "bytes_from_host": a.host_bytes, "promotions": a.promotions,
                           "serves": a.serves, "stashes": a.stashes,
                           "demoted_to_host": a.host_demotions} for a in self.fulls],
            "parts": None if self.parts is None else {
                "split": self.parts.parts.n, "slots": self.parts.num_slots,
                "bytes": self.parts.nbytes, "gathers": self.parts.gathers,
                "gathered_parts": self.parts.gathered_parts,
                "streamed_parts": self.parts.streamed_parts,
                "lowered_parts": self.parts.lowered_parts},
            "lowprec": [{"set": a.label, "tier": a.tier, "dtype": a.dtype, "slots": a.slots,
                         "record_bytes": a.stride, "bytes": a.nbytes,
                         "approximate": a.dequants, "requants": a.requants,
                         "quantized_from_host": a.host_fills,
                         **({"dequantized_parts": a.dequantized_parts}
                            if hasattr(a, "dequantized_parts") else {}),
                         **({"full_rung": {"dtype": a.full_dtype, "entries": a.full.slots,
                                           "bytes": a.full.nbytes, "serves": a.full_serves,
                                           "demotions": a.full.demotions,
                                           "filled_from_host": a.full.host_fills,
                                           "promotions": a.full.promotions}}
                            if getattr(a, "full", None) is not None else {}),
                         **({"dtype_ladder": list(a.ladder),
                             "approximate_at": {d: a.dequants_at.get(d, 0) for d in a.ladder},
                             "resident_at": a.resident_at(),
                             "requantized": a.rung_requants} if a.ladder else {})}
                        for a in self.areas],
        }

    def release(self) -> None:
        """Wait for everything in flight, stop the readers, unlock the records."""
        self.drain()
        if self.readers is not None:
            self.readers.shutdown()
        if self.pool.cuda:
            self.ops.synchronize()
        for lv in self.levels:
            if lv.cache is not None:
                lv.cache.release()
        if self.bounce is not None:
            self.bounce.release()
        if self._assembled is not None:
            self._assembled.release()
        for a in self.areas + self.fulls:
            a.release()
        if self.parts is not None:
            self.parts.clear()


# ---------------------------------------------------------------------------- building
#: the precisions of a low-precision gpu tier (weight-only quantised copies on the device)
LOW_DTYPES = ("int8", "int4")


def is_low(spec) -> bool:
    """Whether a tier of the runtime's layout holds keys below the checkpoint's precision: an
    int8 / int4 tier, or a dtype ladder with such a rung (its first rung may be the
    checkpoint's own precision)."""
    return spec.dtype in LOW_DTYPES or any(d in LOW_DTYPES for d in tier_dtypes(spec))


def _bits(dtype: str) -> int:
    """The bits of a low precision (``int8``, ``int4``)."""
    return 8 if dtype == "int8" else 4


def _rows(tensors: dict, i: int) -> dict:
    """Record ``i`` of ``tensors`` (name -> ``[records, ...]``): name -> its row."""
    return {name: t[i] for name, t in tensors.items()}


def part_split(tier_layout) -> int:
    """The ``granularity_split`` of a live run's sets of tiers (1: experts move whole); every
    set a layer uses has the same (``not_live_yet`` refuses a policy whose sets differ)."""
    splits = {lv.split for lv in tier_layout.levels if lv.layers} if tier_layout else set()
    if len(splits) > 1:
        raise LiveError(f"the sets of tiers split experts into different numbers of parts "
                        f"({', '.join(map(str, sorted(splits)))}), which live execution does "
                        f"not run")
    return splits.pop() if splits else 1


def tier_dtypes(spec) -> list:
    """The precisions a tier of the runtime's layout holds keys at: its dtype ladder's rungs
    (highest first), else its one precision."""
    return [r.dtype for r in spec.rungs] if spec.rungs is not None else [spec.dtype]


def _summed(dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def tier_sets(ir) -> list:
    """The sets of tiers of a policy's IR: its hierarchy's, then each band's."""
    return ([ir.hierarchy] if ir.hierarchy is not None else []) + [b.hierarchy for b in ir.bands]


def checkpoint_disk_misfit(ir) -> str | None:
    """Why the policy of ``ir`` cannot serve a model whose experts were never loaded
    (``mpl.offload.skeleton``; None: it can): every set of tiers must end on a disk tier
    without ``path`` (the checkpoint's files). Located, one line."""
    where = f"{ir.source_path or '<text>'}:{ir.source_line}: "
    sets = tier_sets(ir) if getattr(ir, "tiered", False) else []
    if not sets:
        return (f"{where}policy '{ir.name}' has no memory tiers: a model loaded without "
                f"its experts (never in host memory) needs a hierarchy ending on a disk tier "
                f"without path (the checkpoint's files serve the experts)")
    for h in sets:
        last = h.tiers[-1]
        kind = last.location.kind
        if kind != "disk" or last.path is not None:
            line = last.source_line or h.source_line or ir.source_line
            what = ("a disk tier with a path (its files would have to be written from the "
                    "experts)" if kind == "disk" else f"tier '{last.name}' ({kind})")
            return (f"{ir.source_path or '<text>'}:{line}: policy '{ir.name}' ends a set of "
                    f"tiers on {what}: a model loaded without its experts (never in host "
                    f"memory) needs every set to end on a disk tier without path (the "
                    f"checkpoint's files)")
    return None


def tier_dtype_misfit(ir, dtype) -> str | None:
    """Why a tier of policy ``ir`` cannot hold the checkpoint's bytes of experts stored at
    ``dtype`` (a torch dtype): one naming a floating-point precision other than the model's
    would hold converted copies. Located, one line; None when every tier fits (the
    low-precision tiers, which ``not_live_yet`` has placed, and the disk tier, which holds
    the checkpoint's bytes, are not asked)."""
    import torch

    own = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}.get(dtype)
    where = ir.source_path or "<text>"
    for h in tier_sets(ir):
        for t in h.tiers:
            if t.dtype in LOW_DTYPES:
                continue
            if t.dtype is not None and t.location.kind != "disk" and t.dtype != own:
                return (f"{where}:{t.source_line or h.source_line or ir.source_line}: tier "
                        f"'{t.name}' of policy '{ir.name}' holds experts at {t.dtype}, but the "
                        f"model's experts are {own or dtype}: live execution runs tiers at the "
                        f"checkpoint's precision; remove the tier's dtype"
                        + (f" or write dtype = {own}" if own else ""))
    return None


class TierBuild:
    """The memory tiers of one live run, built the same way for every engine adapter (the
    HuggingFace attach, vLLM's live offload), in two halves around the engine's own change
    of its layers:

    1. the constructor writes every disk tier's files (``mpl.mechanism.disk.DiskStore``),
       or for a disk tier without ``path`` checks how the ``checkpoint`` folder's
       safetensors make the experts (``mpl.mechanism.checkpoint.CheckpointStore``; ``known``:
       the recipes per decoder-layer id, when the experts were never loaded), from
       ``layers`` (per MoE-layer ordinal, ``{param name: [E, ...] tensor}`` as the
       engine holds them; ``layer_ids``: their decoder-layer ids, which name the files).
       Nothing else is allocated; a failure removes every file written and raises
       :class:`mpl.mechanism.disk.DiskError`, its message located at the tier when ``ir``
       (the policy's IR) is given;
    2. :meth:`open` opens the files and allocates each disk tier's host cache (the runtime's
       slots of its host tier: part records with ``granularity_split`` above 1, the files
       then opened buffered, as a part is read as runs of an expert's record); the adapter then builds the host store of :attr:`in_ram`
       (the layers whose last tier is host memory), allocates the slot pool and calls
       :meth:`executor` for the :class:`TierExecutor` that carries out the Plans' steps.

    The layers on disk keep no host copy: :meth:`read_layer` reads one back (detach), and
    :meth:`remove` deletes the files (detach, or a failed attach)."""

    def __init__(self, runtime, layers: list[dict], layer_ids, *, ir=None,
                 checkpoint: str | None = None, known: dict | None = None) -> None:
        from .checkpoint import CheckpointStore
        from .disk import DiskError, DiskStore, PartLayout, RecordLayout, part_layout, part_pieces

        lay = runtime.tier_layout
        if lay is None:
            raise LiveError("the runtime has no memory tiers")
        template = layers[0]
        self.E = E = int(next(iter(template.values())).shape[0])
        self.layout = RecordLayout(template)
        #: granularity_split (every set the same: part_split): the host tier over a disk
        #: tier holds part records, each read as runs of an expert's record
        self.split = part_split(lay)
        self.record = self.layout if self.split == 1 else part_layout(template, self.split)
        self.pieces = None if self.split == 1 else [
            part_pieces(self.layout, self.record, r)
            for r in PartLayout(template, self.split).ranges]
        self.levels: list = [None] * len(layers)
        self.disks: list = []
        #: (LevelSpec, its low-precision TierSpec, its LevelMech)
        self.lows: list = []
        #: (LevelSpec, its full-precision gpu tier under the device cache, its LevelMech)
        self.fulls: list = []
        src = {}
        if ir is not None:
            for h in tier_sets(ir):
                for t in h.tiers:
                    src.setdefault(t.name, t.source_line or h.source_line)
        try:
            for lv in lay.levels:
                if not lv.layers:
                    continue
                if lv.disk is None:
                    mech = LevelMech(None, None, lv.last_tier, None)
                    low = [t for t in lv.tiers if t.kind == "gpu" and is_low(t)]
                    if low:
                        self.lows.append((lv, low[0], mech))
                    full = [t for t in lv.tiers[1:] if t.kind == "gpu" and not is_low(t)]
                    if full:
                        self.fulls.append((lv, full[0], mech))
                else:
                    spec = lv.tiers[lv.disk]
                    pairs = [(o, int(layer_ids[o])) for o in lv.layers]
                    if spec.path is not None:
                        disk = DiskStore(spec.path, self.layout, pairs, E)
                    elif checkpoint is not None:     # the checkpoint's own files
                        disk = CheckpointStore(checkpoint, self.layout, pairs, E, known)
                    else:
                        where = ("" if ir is None else
                                 f"{ir.source_path or '<text>'}:{src.get(spec.name) or ir.source_line}: ")
                        of = "" if ir is None else f" of policy '{ir.name}'"
                        raise DiskError(
                            f"{where}the disk tier '{spec.name}'{of} has no path, and this "
                            f"model was not loaded from a folder of .safetensors files (it was "
                            f"built from a config, or loaded from .bin files): give the tier "
                            f"path = \"FOLDER\" (the experts are written there once)")
                    try:
                        disk.write({o: layers[o] for o in lv.layers})
                    except DiskError as e:
                        if ir is None:
                            raise DiskError(f"disk tier '{spec.name}': {e}") from None
                        where = ir.source_path or "<text>"
                        raise DiskError(f"{where}:{src.get(spec.name) or ir.source_line}: disk "
                                        f"tier '{spec.name}' of policy '{ir.name}': {e}") from None
                    self.disks.append(disk)
                    mech = LevelMech(None, disk, lv.read_into, lv.disk)
                    low = [t for t in lv.tiers if t.kind == "gpu" and is_low(t)]
                    if low:
                        self.lows.append((lv, low[0], mech))
                    full = [t for t in lv.tiers[1:] if t.kind == "gpu" and not is_low(t)]
                    if full:
                        self.fulls.append((lv, full[0], mech))
                for o in lv.layers:
                    self.levels[o] = mech
        except BaseException:
            self.remove()
            raise
        self._lay = lay
        self._num_slots = runtime.num_slots
        self._caches: list = []

    @property
    def on_disk(self) -> list[int]:
        """The MoE-layer ordinals whose experts the disk holds (no host copy)."""
        return [o for o, lv in enumerate(self.levels) if lv.disk is not None]

    @property
    def in_ram(self) -> list[int]:
        """The MoE-layer ordinals whose last tier is host memory (the host store's)."""
        return [o for o, lv in enumerate(self.levels) if lv.disk is None]

    def open(self, ops) -> None:
        """Open the files; one host cache per set of tiers over a disk."""
        from .disk import HostCache

        for d in self.disks:
            d.open(direct=self.split == 1)
        for lv in self._lay.levels:
            if not lv.layers or lv.disk is None:
                continue
            mech = self.levels[lv.layers[0]]
            mech.cache = HostCache(self.record, host_tier_records(lv, self.E), ops)
            self._caches.append(mech.cache)

    def executor(self, pool, hosts: list, readers: int, *, transposed: bool = False) -> TierExecutor:
        """The :class:`TierExecutor` over ``pool`` (``hosts``: per ordinal the host store's
        tensors, ``{}`` for a layer on disk; ``readers``: disk reader threads), with the
        device areas of the low-precision tiers (``transposed``: the engine's expert
        matrices are ``[in, out]``)."""
        from .disk import Readers
        from .lowprec import LowPrecArea, QuantLayout

        template = {n: t for n, t in pool.tensors.items()}
        parts = None
        if self.split > 1:      # the device cache of parts: the Loads' target
            from .parts import PartPool
            parts = PartPool(template, self.split, self._num_slots, pool)
        from .gpu_tier import FullArea

        for lv, spec, mech in self.lows:
            # the runtime's slots of that tier (capped at the keys of its layers; a ladder's:
            # every key at the lowest rung)
            slots = min(spec.slots, len(lv.layers) * self.E * self.split)
            if parts is not None:       # quantised parts, beside the part pool's slots
                from .lowprec_parts import PartArea, PartQuantLayout
                qlay = [PartQuantLayout(template, self.split, d, transposed=transposed)
                        for d in tier_dtypes(spec)]
                mech.low = PartArea(qlay, slots, parts, label=lv.label, tier=spec.name,
                                    index=spec.index)
                continue
            rungs = tier_dtypes(spec)
            qlay = [QuantLayout(template, d, transposed=transposed) for d in rungs
                    if d in LOW_DTYPES]
            full = None
            if rungs[0] not in LOW_DTYPES:
                # a ladder whose first rung is the checkpoint's precision: the keys at that
                # rung whole in a full-precision area of the most the tier holds at it, and
                # one entry more (a key whose Load out is pending while its slot is rewritten)
                most = min(spec.budget // spec.rungs[0].bits, len(lv.layers) * self.E)
                full = FullArea(template, most + 1, pool, label=lv.label, tier=spec.name,
                                index=spec.index, stash=False)
            mech.low = LowPrecArea(qlay, slots, pool, label=lv.label, tier=spec.name,
                                   index=spec.index, full=full,
                                   full_dtype=rungs[0] if full is not None else None)
        for lv, spec, mech in self.fulls:
            # (with a split the tier holds parts: part-sized slots beside the part pool's)
            keys = len(lv.layers) * self.E * self.split
            mech.low = FullArea(template if parts is None else parts.tensors,
                                min(spec.slots, keys), pool if parts is None else parts,
                                label=lv.label, tier=spec.name, index=spec.index)
        ex = TierExecutor(pool, self.levels, hosts, self.record if self.disks else None,
                          Readers(readers) if self.disks else None)
        ex.parts = parts
        if self.disks:
            ex.pieces = self.pieces
            ex.whole = self.layout
        return ex

    def read_layer(self, ordinal: int, template: dict) -> dict:
        """Every expert of MoE layer ``ordinal`` read back from its file, as fresh
        ``[E, ...]`` tensors named as ``template``'s."""
        return self.levels[ordinal].disk.read_layer(ordinal, template)

    def release(self) -> None:
        """Unlock the host caches and close the files (the executor, once made, does the
        same for what it holds; both may run)."""
        for c in self._caches:
            c.release()
        for lv in self.levels:
            if lv is not None and lv.low is not None:
                lv.low.release()

    def remove(self) -> None:
        """Close and delete every file written (detach, or a failed attach)."""
        for d in self.disks:
            d.remove()
