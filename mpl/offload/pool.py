"""The device slot pool: a fixed set of pre-allocated expert slots, filled from the host
store on a copy stream.

Layout: one device tensor per expert parameter name, ``[num_slots + stream_slots + 1, ...]``:

* ``0 .. num_slots-1``: the runtime's global slot pool (``runtime.num_slots``); the Plan's
  slot numbers index it directly;
* ``num_slots .. num_slots+stream_slots-1``: the transient buffer for STREAM placements
  (computed on the device, not admitted); one dispatch needs at most one entry per expert
  of a layer, so ``stream_slots`` defaults to the number of experts per layer;
* the last entry is all zeros: experts computed on the CPU are routed to it (with a zero
  routing weight) in the device pass, so they add exactly nothing there.

Nothing is allocated after construction: a miss copies into an existing slot.

CUDA: copies run on a dedicated copy stream with ``non_blocking`` transfers from pinned
memory. Every copy records a *ready* event; compute waits (on the GPU, not the host) only
for the events of the slots it reads. Every compute that read a slot records a *free*
event; a later copy into that slot first makes the copy stream wait for it, so a slot is
never overwritten while queued compute still reads it.

CPU (no CUDA): the same calls copy synchronously into the same kind of slots; events are
not needed because everything runs in order.
"""

from __future__ import annotations

import time

import torch

DEMAND, BACKGROUND, PREFETCH, STREAMED = "demand", "background", "prefetch", "stream"


class SlotPool:
    def __init__(self, template: dict[str, torch.Tensor], num_slots: int, stream_slots: int,
                 device: torch.device) -> None:
        if num_slots < 1:
            raise ValueError("the slot pool needs at least one slot")
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.num_slots = int(num_slots)
        self.stream_base = self.num_slots
        self.stream_slots = int(stream_slots)
        self.size = self.num_slots + self.stream_slots + 1
        self.zero = self.size - 1
        self.names = tuple(template)
        self.tensors: dict[str, torch.Tensor] = {
            name: torch.zeros((self.size, *t.shape[1:]), dtype=t.dtype, device=self.device)
            for name, t in template.items()}
        self.entry_bytes = sum(t[0].numel() * t.element_size() for t in self.tensors.values())
        self.content: list[tuple[int, int] | None] = [None] * self.size
        self.ready: list = [None] * self.size       # CUDA events: last copy into the entry
        self.free: list = [None] * self.size        # CUDA events: last compute reading it
        self._pending_stalls: list = []
        if self.cuda:
            self.copy_stream = torch.cuda.Stream(device=self.device)
            torch.cuda.synchronize(self.device)     # the zero-fill must be done before copies
        else:
            self.copy_stream = None
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
                key: tuple[int, int], kind: str) -> float:
        """Copy expert ``expert`` of a layer's host tensors into pool entry ``index``.
        Returns the host milliseconds the copy blocked (CPU path; 0 on CUDA)."""
        self.copies[kind] += 1
        self.bytes_copied += self.entry_bytes
        self.content[index] = key if kind != STREAMED else None
        if self.cuda:
            stream = self.copy_stream
            with torch.cuda.stream(stream):
                free = self.free[index]
                if free is not None:
                    stream.wait_event(free)
                for name, t in self.tensors.items():
                    t[index].copy_(host[name][expert], non_blocking=True)
                ev = torch.cuda.Event(enable_timing=True)
                ev.record(stream)
            self.ready[index] = ev
            return 0.0
        t0 = time.perf_counter()
        for name, t in self.tensors.items():
            t[index].copy_(host[name][expert])
        ms = (time.perf_counter() - t0) * 1e3
        self.copy_ms += ms
        return ms

    def stage(self, src: int, dst: int) -> None:
        """Device-to-device copy of pool entry ``src`` into the transient entry ``dst``
        (CPU-path staging; see Engine._stage_in_id_order)."""
        self.staged += 1
        for t in self.tensors.values():
            t[dst].copy_(t[src])
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
        compute = torch.cuda.current_stream(self.device)
        for i in indices:
            ev = self.ready[i]
            if ev is None:
                continue
            if ev.query():                       # already arrived: no wait, no stall
                self.ready[i] = None
                continue
            mark = torch.cuda.Event(enable_timing=True)
            mark.record(compute)
            compute.wait_event(ev)
            self._pending_stalls.append((mark, ev))
            self.ready[i] = None

    def release(self, indices) -> None:
        """Record that queued compute reads ``indices``: a later copy into any of them waits
        for this point of the compute stream."""
        if not self.cuda:
            return
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(self.device))
        for i in indices:
            self.free[i] = ev

    def collect_stalls(self, block: bool = False) -> float:
        """Milliseconds the compute stream waited for transfers, for the waits whose events
        have completed (all of them with ``block``). Measured with CUDA timing events: the
        time from the compute stream reaching the wait to the copy finishing."""
        if not self._pending_stalls:
            return 0.0
        total = 0.0
        keep = []
        for mark, ev in self._pending_stalls:
            if block:
                ev.synchronize()
                mark.synchronize()
            if mark.query() and ev.query():
                total += max(0.0, mark.elapsed_time(ev))
            else:
                keep.append((mark, ev))
        self._pending_stalls = keep
        return total

    def synchronize(self) -> None:
        if self.cuda:
            self.copy_stream.synchronize()
            torch.cuda.current_stream(self.device).synchronize()
