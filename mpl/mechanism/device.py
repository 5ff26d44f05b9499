"""The device operations the mechanism uses, behind one small interface.

Everything the engine, the pool and the store do with streams, events, host<->device copies,
pinned memory and blocking host reads goes through an ``Ops`` object:

* :class:`CudaOps`: real CUDA (``torch.cuda`` streams and events, ``non_blocking`` copies,
  one page-locked arena registered with ``cudaHostRegister``);
* :class:`SyncOps`: a device without queues (the CPU): copies are synchronous, events are
  ``None`` and every wait is a no-op, because everything already runs in order.

Tests run the mechanism against a CUDA-semantics double of this interface
(``tests/offload_cuda_double.py``), which logs every call and checks the ordering
invariants on the CPU; it subclasses :class:`CudaOps` and replaces only its CUDA
primitives, so ``CudaOps.fetch``/``read_ids`` run in the tests as on a GPU. ``reads``
counts the blocking host synchronisations: the engine makes exactly one per MoE dispatch
(:meth:`Ops.fetch`, or :meth:`Ops.read_ids` for the ids alone).
"""

from __future__ import annotations

import contextlib

import torch

from .footprint import ALIGN   # bytes: every tensor carved from the pinned arena starts at this alignment
from .hostmem import advise_huge


class SyncOps:
    """A device that runs everything in issue order (the CPU, or a CUDA-less machine)."""

    cuda = False

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.reads = 0              # blocking host synchronisations (fetch)
        self.allocations = 0        # device tensors allocated through alloc()

    # ---------------------------------------------------------------- streams and events
    def stream(self, priority: int = 0):
        return None

    def current_stream(self):
        return None

    def use(self, stream):
        return contextlib.nullcontext()

    def event(self, timing: bool = False):
        return None

    def record(self, event, stream=None) -> None:
        pass

    def wait(self, stream, event) -> None:
        pass

    def query(self, event) -> bool:
        return True

    def elapsed_ms(self, start, end) -> float:
        return 0.0

    def synchronize(self, event=None) -> None:
        pass

    # ---------------------------------------------------------------- memory and copies
    def alloc(self, shape, dtype) -> torch.Tensor:
        """A zero-filled device tensor (the pool, the staging buffers: never per step)."""
        self.allocations += 1
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def host_arena(self, nbytes: int, huge_pages: bool = False) -> torch.Tensor:
        """One host allocation of ``nbytes`` bytes (uint8) for the whole store; page-locked
        where the device copies from it by DMA. ``huge_pages``: backed by transparent huge
        pages where the kernel has them (``mpl.mechanism.hostmem``: the disk tier's host
        cache, read with O_DIRECT in larger requests)."""
        arena = torch.empty(max(1, int(nbytes)), dtype=torch.uint8)
        if huge_pages:
            advise_huge(arena.data_ptr(), arena.numel())
        return arena

    def release_arena(self, arena: torch.Tensor) -> None:
        pass

    def host_buffer(self, numel: int, dtype) -> torch.Tensor:
        """A small reusable host buffer (pinned on CUDA) for index/mask uploads and reads."""
        return torch.empty(int(numel), dtype=dtype)

    def is_pinned(self, t: torch.Tensor) -> bool:
        return False

    def copy(self, dst: torch.Tensor, src: torch.Tensor, *, non_blocking: bool = False,
             tag=None) -> None:
        """``dst.copy_(src)`` on the current stream (``tag`` names what is copied, for the
        test double's log)."""
        dst.copy_(src)

    def compute(self, reads) -> None:
        """Marks the point where queued compute reads the pool entries ``reads`` (for the
        test double's log; nothing to do on a real device)."""

    def host_write(self, t: torch.Tensor, tag=None) -> None:
        """Marks the point from which the host (a disk reader thread) writes the bytes of the
        host tensor ``t`` (for the test double's log; nothing to do on a real device): every
        device copy touching them must have completed, as the host knows it, before this."""

    def fetch(self, tensors) -> list[torch.Tensor]:
        """Host copies of device ``tensors``: the one blocking host synchronisation. The
        results are valid until the next ``fetch`` or ``read_ids``."""
        self.reads += 1
        return [t if t.device.type == "cpu" else t.to("cpu") for t in tensors]

    def read_ids(self, t: torch.Tensor) -> list[int]:
        """The values of the integer device tensor ``t``, flattened, as a host list: the
        common case of :meth:`fetch` (one blocking host synchronisation)."""
        self.reads += 1
        if t.dim() != 2:
            return t.reshape(-1).tolist()
        rows = t.tolist()          # [T, K]: cheaper than reshape(-1) first
        return rows[0] if len(rows) == 1 else [x for r in rows for x in r]


class CudaOps(SyncOps):
    """Real CUDA: streams, events, ``non_blocking`` copies from page-locked memory."""

    cuda = True

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self._registered: list[int] = []
        self._read_buf: torch.Tensor | None = None     # pinned, grow-only (fetch)

    def stream(self, priority: int = 0):
        return torch.cuda.Stream(device=self.device, priority=priority)

    def current_stream(self):
        return torch.cuda.current_stream(self.device)

    def use(self, stream):
        return torch.cuda.stream(stream)

    def event(self, timing: bool = False):
        return torch.cuda.Event(enable_timing=timing)

    def record(self, event, stream=None) -> None:
        event.record(stream if stream is not None else self.current_stream())

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def query(self, event) -> bool:
        return event.query()

    def elapsed_ms(self, start, end) -> float:
        return start.elapsed_time(end)

    def synchronize(self, event=None) -> None:
        if event is None:
            torch.cuda.synchronize(self.device)
        else:
            event.synchronize()

    def alloc(self, shape, dtype) -> torch.Tensor:
        t = super().alloc(shape, dtype)
        torch.cuda.synchronize(self.device)       # zero-filled before any copy stream uses it
        return t

    def host_arena(self, nbytes: int, huge_pages: bool = False) -> torch.Tensor:
        # an ordinary allocation, page-locked in place: pin_memory=True would go through the
        # caching host allocator, which rounds every block up to a power of two
        arena = SyncOps.host_arena(self, nbytes, huge_pages)    # advised before pinning
        rc = torch.cuda.cudart().cudaHostRegister(arena.data_ptr(), arena.numel(), 0)
        if int(getattr(rc, "value", rc)) == 0:        # cudaSuccess
            self._registered.append(arena.data_ptr())
        else:                      # cannot lock that much: copy it into a pinned block
            arena = torch.empty(arena.numel(), dtype=torch.uint8, pin_memory=True)
        return arena

    def release_arena(self, arena: torch.Tensor) -> None:
        ptr = arena.data_ptr()
        if ptr in self._registered:
            torch.cuda.cudart().cudaHostUnregister(ptr)
            self._registered.remove(ptr)

    def host_buffer(self, numel: int, dtype) -> torch.Tensor:
        return torch.empty(int(numel), dtype=dtype, pin_memory=True)

    def is_pinned(self, t: torch.Tensor) -> bool:
        return t.is_pinned()

    def copy(self, dst, src, *, non_blocking=False, tag=None) -> None:
        dst.copy_(src, non_blocking=non_blocking)

    def fetch(self, tensors) -> list[torch.Tensor]:
        """Every tensor into one reused pinned buffer with ``non_blocking`` copies on the
        current stream, then one event wait: one synchronisation for all of them, and no
        host allocation once the buffer has reached the largest size asked for (it grows,
        doubling, only then). Each tensor gets an ``ALIGN``-aligned part of the buffer; the
        results are views of it, valid until the next ``fetch``. The buffer is rewritten
        only by a later fetch, after this one's copies have completed (the event wait)."""
        self.reads += 1
        sizes = [t.numel() * t.element_size() for t in tensors]
        need = sum(-(-n // ALIGN) * ALIGN for n in sizes)
        buf = self._read_buf
        if buf is None or buf.numel() < need:
            grown = max(need, 2 * buf.numel() if buf is not None else 0, 4 * ALIGN)
            buf = self._read_buf = self.host_buffer(grown, torch.uint8)
        out = []
        off = 0
        for t, n in zip(tensors, sizes):
            o = buf[off:off + n].view(t.dtype).view(t.shape)
            self.copy(o, t, non_blocking=True, tag=("read", None))
            out.append(o)
            off += -(-n // ALIGN) * ALIGN
        ev = self.event()
        self.record(ev)
        self.synchronize(ev)
        return out

    def read_ids(self, t: torch.Tensor) -> list[int]:
        return self.fetch((t.reshape(-1),))[0].tolist()


def ops_for(device: torch.device) -> SyncOps:
    device = torch.device(device)
    return CudaOps(device) if device.type == "cuda" else SyncOps(device)
