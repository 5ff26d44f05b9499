"""Experts moved and cached as parts (SPEC §12, ``granularity_split = N``): the device slot
pool of a set of tiers whose every tier caches parts, and the gather that puts an expert's
parts back together for compute.

* A **part** ``p`` of an expert (``0 <= p < N``) is, for every expert parameter, the ``p``-th
  of ``N`` equal runs of its row's elements in memory order (``ceil(numel / N)`` elements;
  the last run shorter when ``N`` does not divide the row, a run past the row empty): the
  parts of an expert together are its bytes, each once, so moving parts moves ``1/N`` of an
  expert each.
* :class:`PartPool`: the runtime's slots of the top tier, ``runtime.num_slots`` part slots
  (the runtime counts the device cache in parts), one device tensor per parameter name
  ``[slots + 1, ceil(numel / N)]`` (the last entry unused, the pool's zero entry), filled
  from the host store by the Plan's Loads of part keys ``(layer, expert, part)`` on the
  compute pool's copy streams (:meth:`PartPool.copy_in`), or over a disk tier from the host
  tier's part record holding the part (:meth:`PartPool.copy_record`).
* :meth:`PartPool.gather`: before an expert is computed, each of its parts is copied into
  its place in a transient entry of the compute pool (:class:`mpl.mechanism.pool.SlotPool`),
  device to device from its part slot, or from the host for a part the Plan streams
  (``STREAM``: not admitted): the host store, or over a disk tier the host tier's part
  record its READ filled (``mpl.mechanism.disk.part_layout``), or device to device from the
  slot of a second full-precision gpu tier holding the part (``LOWER``, a SERVE step: that
  tier's area is built on this pool, ``mpl.mechanism.gpu_tier.FullArea``). The entry then holds the expert's rows exactly (the same
  bytes), and the experts function computes it as a streamed expert: bit-identical to the
  unmodified model (an expert is never computed from a partial sum).

CUDA ordering, the pool's: a copy into a part slot waits for the last gather that read it
(its free event) and the last copy into it; a gather runs on the demand stream after the
copies into its part slots and after the compute that last read its transient entry, and
its event is the entry's ready event (compute waits for it) and the free event of every
part slot it read.
"""

from __future__ import annotations

import time

import torch

from mpl.runtime.plan import LOWER, STREAM

from .disk import PartLayout
from .pool import _URGENT, STREAMED, SlotPool


class PartPool(SlotPool):
    """The part slots of the device cache (see the module docstring). ``pool``: the compute
    pool, whose copy streams the part copies share."""

    def __init__(self, template: dict, n: int, num_slots: int, pool: SlotPool) -> None:
        self.parts = PartLayout(template, n)
        shaped = {name: torch.empty((1, self.parts.chunk[name]), dtype=t.dtype)
                  for name, t in template.items()}
        super().__init__(shaped, num_slots, 0, pool.device, pool.ops)
        self.demand_stream = pool.demand_stream
        self.prefetch_stream = pool.prefetch_stream
        self._elem = {name: t.element_size() for name, t in template.items()}
        self.gathers = 0            # experts put together in a transient entry
        self.gathered_parts = 0     # part copies device to device
        self.streamed_parts = 0     # part copies from the host into a transient entry
        self.lowered_parts = 0      # part copies from a second gpu tier's slot

    def _pairs(self, index: int, host: dict, expert: int, p: int):
        for name, t in self.tensors.items():
            a, b = self.parts.ranges[p][name]
            if b > a:
                yield t[index][:b - a], host[name][expert].reshape(-1)[a:b]

    def part_bytes(self, p: int) -> int:
        return sum((b - a) * self._elem[name] for name, (a, b) in self.parts.ranges[p].items())

    def copy_in(self, index: int, host: dict, expert: int, key: tuple, kind: str,
                count: bool = True) -> float:
        """Copy part ``key[2]`` of expert ``expert`` (the host store's tensors ``host``) into
        part slot ``index``; as :meth:`SlotPool.copy_in`."""
        return self._copy_part(index, self._pairs(index, host, expert, key[2]), key, kind, count)

    def copy_record(self, index: int, records: dict, j: int, key: tuple, kind: str) -> float:
        """Copy part ``key[2]`` from part record ``j`` of ``records`` (the host tier's part
        records over a disk tier, ``mpl.mechanism.disk.part_layout``: name ->
        ``[records, chunk]``) into part slot ``index``; as :meth:`copy_in`."""
        return self._copy_part(index, self._record_pairs(index, records, j, key[2]), key, kind,
                               True)

    def _record_pairs(self, index: int, records: dict, j: int, p: int):
        for name, t in self.tensors.items():
            a, b = self.parts.ranges[p][name]
            if b > a:
                yield t[index][:b - a], records[name][j][:b - a]

    def run(self, p: int, records: dict, j: int) -> dict:
        """Part ``p``'s runs in part record ``j`` of ``records``: name -> its source run
        (what :meth:`gather` copies for a streamed part)."""
        return {name: records[name][j][:b - a] for name, (a, b) in self.parts.ranges[p].items()}

    def host_run(self, p: int, host: dict, expert: int) -> dict:
        """Part ``p``'s runs in the host store's row of ``expert`` (``host``: name ->
        ``[E, ...]``): name -> its source run."""
        return {name: host[name][expert].reshape(-1)[a:b]
                for name, (a, b) in self.parts.ranges[p].items()}

    def _copy_part(self, index: int, pairs, key: tuple, kind: str, count: bool) -> float:
        p = key[2]
        if count:
            self.copies[kind] += 1
            self.bytes_copied += self.part_bytes(p)
        self.content[index] = key
        ops = self.ops
        if self.cuda:
            stream = self.demand_stream if kind in _URGENT else self.prefetch_stream
            with ops.use(stream):
                for ev in (self.free[index], self.ready[index]):
                    if ev is not None:
                        ops.wait(stream, ev)
                for dst, src in pairs:
                    ops.copy(dst, src, non_blocking=True, tag=("part-" + kind, ("part", index)))
                ev = ops.event(timing=True)
                ops.record(ev, stream)
            self.ready[index] = ev
            self.ready_kind[index] = kind
            return 0.0
        t0 = time.perf_counter()
        for dst, src in pairs:
            ops.copy(dst, src, tag=("part-" + kind, ("part", index)))
        ms = (time.perf_counter() - t0) * 1e3
        if count:
            self.copy_ms += ms
        return ms

    def gather(self, pool: SlotPool, entry: int, where: tuple, key: tuple, streamed,
               lowered=None, waits=(), count: bool = True) -> float:
        """Expert ``key`` (``(layer, expert)``) put together in the compute pool's transient
        entry ``entry`` from its parts: ``where[p]`` the part slot of part ``p`` (checked to
        hold it: else :class:`mpl.mechanism.execute.LiveError`), or ``STREAM`` (copied from
        ``streamed[p]``, name -> the part's source run: :meth:`host_run` of the host store,
        or :meth:`run` of the host tier's record holding it, ready to be read), or ``LOWER``
        (copied device to device from ``lowered[p]``, its run in the slot of a second gpu
        tier that holds it; ``waits``: the events that slot's copy waits for). ``count``:
        False for the same gather made again within its dispatch (no part or copy counted
        again). Returns the host ms it blocked (CPU path)."""
        from .execute import LiveError

        for p, s in enumerate(where):
            if s >= 0 and self.content[s] != (*key, p):
                raise LiveError(f"the plan computes part {p} of expert {key[1]} of MoE layer "
                                f"{key[0]} from part slot {s}, but the slot holds "
                                f"{self.content[s]}: the runtime and the mechanism disagree")
            if s == LOWER and (lowered is None or p not in lowered):
                raise LiveError(f"the plan computes part {p} of expert {key[1]} of MoE layer "
                                f"{key[0]} from a lower gpu tier that does not hold it: the "
                                f"runtime and the mechanism disagree")
            if s < 0 and s not in (STREAM, LOWER):
                raise LiveError(f"the plan places part {p} of expert {key[1]} of MoE layer "
                                f"{key[0]} at {s}, which the live mechanism does not compute "
                                f"from")
        self.gathers += count
        ops = self.ops
        pool.content[entry] = None
        rows = {name: t[entry].view(-1) for name, t in pool.tensors.items()}
        ranges = self.parts.ranges
        t0 = time.perf_counter()
        stream = pool.demand_stream
        tag = (STREAMED, entry)
        with ops.use(stream):
            if self.cuda:
                before = [pool.free[entry], pool.ready[entry], *waits] + \
                    [self.ready[s] for s in where if s >= 0]
                for ev in before:
                    if ev is not None:
                        ops.wait(stream, ev)
            for p, s in enumerate(where):
                if s >= 0:
                    self.gathered_parts += count
                    for name, t in self.tensors.items():
                        a, b = ranges[p][name]
                        if b > a:
                            ops.copy(rows[name][a:b], t[s][:b - a], tag=("gather", entry))
                elif s == LOWER:
                    self.lowered_parts += count
                    src = lowered[p]
                    for name in self.tensors:
                        a, b = ranges[p][name]
                        if b > a:
                            ops.copy(rows[name][a:b], src[name], tag=("gather", entry))
                else:
                    if count:
                        self.streamed_parts += 1
                        pool.copies[STREAMED] += 1
                        pool.bytes_copied += self.part_bytes(p)
                    src = streamed[p]
                    for name in self.tensors:
                        a, b = ranges[p][name]
                        if b > a:
                            ops.copy(rows[name][a:b], src[name], non_blocking=self.cuda, tag=tag)
            if self.cuda:
                used = [s for s in where if s >= 0]
                ev = ops.event(timing=True)
                ops.record(ev, stream)
                pool.ready[entry] = ev
                pool.ready_kind[entry] = STREAMED
                for s in used:
                    self.free[s] = ev
                return 0.0
        return (time.perf_counter() - t0) * 1e3
