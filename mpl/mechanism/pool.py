"""The device slot pool: a fixed set of pre-allocated expert slots, filled from the host
store on copy streams.

Layout: one device tensor per expert parameter name, ``[num_slots + stream_slots + 1, ...]``:

* ``0 .. num_slots-1``: the runtime's global slot pool (``runtime.num_slots``); the Plan's
  slot numbers index it directly;
* ``num_slots .. num_slots+stream_slots-1``: the transient buffer for STREAM placements
  (computed on the device, not admitted); one dispatch needs at most one entry per expert
  of a layer; ``stream_slots`` defaults to fewer (``mpl.mechanism.footprint.default_stream_slots``), and a
  dispatch that streams more is computed in passes;
* the last entry is all zeros: experts computed on the CPU are routed to it (with a zero
  routing weight) in the device pass, so they add exactly nothing there.

Nothing is allocated after construction: a miss copies into an existing slot.

Every operation goes through an ``Ops`` object (``mpl.mechanism.device``). With CUDA:

* two copy streams: **demand** loads and streamed experts on a high-priority stream,
  **prefetch** and background loads on a low-priority one, so a demand load never queues
  behind speculative prefetches (it waits only for a copy into the *same* slot);
* copies are ``non_blocking`` from the page-locked host arena; every copy records a *ready*
  event; compute waits (on the GPU, not the host) only for the events of the slots it
  reads;
* every compute that read a slot records a *free* event; a later copy into that slot first
  makes its copy stream wait for it, so a slot is never overwritten while queued compute
  still reads it.

Without CUDA (``SyncOps``) the same calls copy synchronously; events are ``None``.
"""

from __future__ import annotations

import time

import torch

from .device import SyncOps

DEMAND, BACKGROUND, PREFETCH, STREAMED = "demand", "background", "prefetch", "stream"
_URGENT = (DEMAND, STREAMED)
_AHEAD = (BACKGROUND, PREFETCH)      # copies issued before the dispatch that reads them


class SlotPool:
    def __init__(self, template: dict[str, torch.Tensor], num_slots: int, stream_slots: int,
                 device: torch.device, ops: SyncOps | None = None, *,
                 transient_only: bool = False) -> None:
        # (transient_only: no resident slots, every expert computed through a transient
        # entry: the compute pool of a device cache of parts, mpl.mechanism.parts)
        if num_slots < (0 if transient_only else 1):
            raise ValueError("the slot pool needs at least one slot")
        self.device = torch.device(device)
        self.ops = ops = ops or SyncOps(self.device)
        self.cuda = ops.cuda
        self.num_slots = int(num_slots)
        self.stream_base = self.num_slots
        self.stream_slots = int(stream_slots)
        self.size = self.num_slots + self.stream_slots + 1
        self.zero = self.size - 1
        self.names = tuple(template)
        self.tensors: dict[str, torch.Tensor] = {
            name: ops.alloc((self.size, *t.shape[1:]), t.dtype) for name, t in template.items()}
        self.entry_bytes = sum(t[0].numel() * t.element_size() for t in self.tensors.values())
        self.content: list[tuple[int, int] | None] = [None] * self.size
        self.ready: list = [None] * self.size       # events: last copy into the entry
        self.free: list = [None] * self.size        # events: last compute reading it
        self.ready_kind: list = [None] * self.size  # the kind of that last copy
        # late prefetches (SPEC §5): a prefetched or background-loaded entry whose copy had
        # not landed when compute waited for it; per MoE layer (mpl.runtime.arrival)
        self.late = 0
        self.late_layers: dict = {}
        self._pending_stalls: list = []
        # demand first: a higher priority (lower number) than the prefetch stream
        self.demand_stream = ops.stream(priority=-1)
        self.prefetch_stream = ops.stream(priority=0)
        self.copies = {DEMAND: 0, BACKGROUND: 0, PREFETCH: 0, STREAMED: 0}
        self.bytes_copied = 0
        self.staged = 0              # device-to-device staging copies (not transfers)
        self.copy_ms = 0.0           # host time spent in synchronous (CPU-path) copies

    # ------------------------------------------------------------------ memory
    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def data_ptrs(self) -> tuple[int, ...]:
        return tuple(t.data_ptr() for t in self.tensors.values())

    # ------------------------------------------------------------------ copies
    def copy_in(self, index: int, host: dict[str, torch.Tensor], expert: int,
                key: tuple[int, int], kind: str, count: bool = True) -> float:
        """Copy expert ``expert`` of a layer's host tensors into pool entry ``index``.
        Returns the host milliseconds the copy blocked (CPU path; 0 on CUDA). ``count``:
        add it to ``copies``/``bytes_copied`` (False for a forward no Plan drove: an
        engine's warm-up or memory-profiling run, counted by the engine itself)."""
        if count:
            self.copies[kind] += 1
            self.bytes_copied += self.entry_bytes
        self.content[index] = key if kind != STREAMED else None
        ops = self.ops
        if self.cuda:
            stream = self.demand_stream if kind in _URGENT else self.prefetch_stream
            with ops.use(stream):
                free = self.free[index]
                if free is not None:            # queued compute still reads the entry
                    ops.wait(stream, free)
                prev = self.ready[index]
                if prev is not None:            # an earlier copy into it, maybe on the other stream
                    ops.wait(stream, prev)
                for name, t in self.tensors.items():
                    ops.copy(t[index], host[name][expert], non_blocking=True, tag=(kind, index))
                ev = ops.event(timing=True)
                ops.record(ev, stream)
            self.ready[index] = ev
            self.ready_kind[index] = kind
            return 0.0
        t0 = time.perf_counter()
        for name, t in self.tensors.items():
            ops.copy(t[index], host[name][expert], tag=(kind, index))
        ms = (time.perf_counter() - t0) * 1e3
        if count:
            self.copy_ms += ms
        return ms

    def stage(self, src: int, dst: int) -> None:
        """Device-to-device copy of pool entry ``src`` into the transient entry ``dst``
        (CPU-path staging; see Engine._stage_in_id_order)."""
        self.staged += 1
        for t in self.tensors.values():
            self.ops.copy(t[dst], t[src], tag=("stage", dst))
        self.content[dst] = None

    def evict(self, index: int) -> None:
        """Bookkeeping only: the entry's content left the device (its memory is reused by
        the next copy)."""
        self.content[index] = None

    # ------------------------------------------------------------------ compute sync
    def wait_for(self, indices) -> None:
        """Make the compute (current) stream wait for the copies into ``indices``. Only
        those: loads and prefetches for other slots keep running."""
        if not self.cuda:
            return
        ops = self.ops
        compute = ops.current_stream()
        for i in indices:
            ev = self.ready[i]
            if ev is None:
                continue
            if ops.query(ev):                    # already arrived: no wait, no stall
                self.ready[i] = None
                continue
            if self.ready_kind[i] in _AHEAD:      # loaded ahead, still in flight: late
                key = self.content[i]
                if key is not None:
                    self.late += 1
                    self.late_layers[key[0]] = self.late_layers.get(key[0], 0) + 1
            mark = ops.event(timing=True)
            ops.record(mark, compute)
            ops.wait(compute, ev)
            self._pending_stalls.append((mark, ev))
            self.ready[i] = None

    def release(self, indices) -> None:
        """Record that queued compute reads ``indices``: a later copy into any of them waits
        for this point of the compute stream."""
        ops = self.ops
        ops.compute(indices)
        if not self.cuda:
            return
        ev = ops.event()
        ops.record(ev, ops.current_stream())
        for i in indices:
            self.free[i] = ev

    def collect_stalls(self, block: bool = False) -> float:
        """Milliseconds the compute stream waited for transfers, for the waits whose events
        have completed (all of them with ``block``). Measured with timing events: the time
        from the compute stream reaching the wait to the copy finishing."""
        if not self._pending_stalls:
            return 0.0
        ops = self.ops
        total = 0.0
        keep = []
        for mark, ev in self._pending_stalls:
            if block:
                ops.synchronize(ev)
                ops.synchronize(mark)
            if ops.query(mark) and ops.query(ev):
                total += max(0.0, ops.elapsed_ms(mark, ev))
            else:
                keep.append((mark, ev))
        self._pending_stalls = keep
        return total

    def flush_stalls(self) -> float:
        """Every pending stall measurement, waiting for the copies they measure: the
        milliseconds (``collect_stalls(block=True)``) not yet collected, each counted once.
        0.0 without CUDA, where copies are synchronous and their blocking time is what
        ``copy_in`` returns. The caller adds it to its own stall count and the runtime's."""
        if not self.cuda:
            return 0.0
        return self.collect_stalls(block=True)

    def synchronize(self) -> None:
        self.ops.synchronize()

    def clear(self) -> None:
        """Drop every device tensor and event (detach)."""
        self.tensors.clear()
        self.ready = [None] * self.size
        self.free = [None] * self.size
        self.ready_kind = [None] * self.size
        self._pending_stalls = []
        self.demand_stream = self.prefetch_stream = None
