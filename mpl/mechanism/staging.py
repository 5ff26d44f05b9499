"""Host-to-device uploads of the small per-dispatch tensors (slot ids, masks, eager index
lists, CPU results) without a blocking copy and without a device allocation per step.

Per dtype, a ring of host buffers (pinned on CUDA) and one device buffer per ring entry,
allocated once and grown (doubling) only when a larger dispatch arrives. ``upload`` writes
the values into the next host buffer, copies it ``non_blocking`` on the current (compute)
stream into the matching device buffer, records an event, and returns a view. A host buffer
is rewritten only after the copy out of it has completed: with ``RING`` entries and one
blocking read per dispatch on the compute stream, it always has (a wait that would block is
counted in ``ops.reads``). On a device without queues (``SyncOps``: the device is host
memory) an upload is just the tensor, and the slot ids of the lean decode path
(``upload_like``) are written into one held tensor per shape.
"""

from __future__ import annotations

import torch

RING = 4
try:
    import numpy as _np
except ImportError:          # torch runs without numpy: a tensor per dispatch then
    _np = None


class _Slot:
    __slots__ = ("host", "dev", "event")

    def __init__(self) -> None:
        self.host = self.dev = self.event = None


class Staging:
    def __init__(self, ops) -> None:
        self.ops = ops
        self._rings: dict = {}
        self._next: dict = {}
        self._held: dict = {}        # (shape, dtype) -> (tensor, its flat numpy view): CPU only

    def _slot(self, dtype, numel: int) -> _Slot:
        ring = self._rings.get(dtype)
        if ring is None:
            ring = self._rings[dtype] = [_Slot() for _ in range(RING)]
            self._next[dtype] = 0
        i = self._next[dtype]
        self._next[dtype] = (i + 1) % RING
        s = ring[i]
        ops = self.ops
        if s.event is not None:
            if not ops.query(s.event):
                ops.reads += 1               # would block: counted as a host synchronisation
                ops.synchronize(s.event)
            s.event = None
        if s.host is None or s.host.numel() < numel:
            # grow every entry of the ring at once, so a shape seen once never allocates again
            n = max(numel, 2 * (s.host.numel() if s.host is not None else 0), 64)
            for r in ring:
                if r.event is not None:
                    ops.synchronize(r.event)      # growth only: never in a steady state
                    r.event = None
                r.host = ops.host_buffer(n, dtype)
                r.dev = ops.alloc((n,), dtype)
        return s

    def upload_like(self, values: list, like: torch.Tensor) -> torch.Tensor:
        """A device tensor of ``like``'s shape and dtype holding ``values`` (row-major):
        the slot ids of a dispatch, shaped like its ``top_k_index``, for one call of an
        experts function.

        On a device without queues (the CPU) the experts function has finished with the
        tensor when it returns, so one held tensor per shape is rewritten in place through
        its numpy view (creating a tensor per dispatch costs about twice as much in a
        decode step); while autograd records, a fresh tensor (one it saves must not
        change)."""
        if self.ops.cuda:
            return self.upload(values, like.dtype).view(like.shape)
        if _np is not None and not torch.is_grad_enabled():
            key = (like.shape, like.dtype)
            held = self._held.get(key)
            if held is None:
                t = torch.empty(like.shape, dtype=like.dtype)
                held = self._held[key] = (t, t.numpy().reshape(-1))
            held[1][:] = values
            return held[0]
        return torch.tensor(values, dtype=like.dtype).view(like.shape)

    def upload(self, values, dtype) -> torch.Tensor:
        """A device tensor holding ``values`` (a list, or a host tensor)."""
        if not self.ops.cuda:            # the device is host memory (the CPU): nothing to stage
            if isinstance(values, torch.Tensor):
                return values
            return torch.tensor(values, dtype=dtype)
        if isinstance(values, torch.Tensor):
            n = values.numel()
            s = self._slot(dtype, n)
            s.host[:n].view(values.shape).copy_(values)
            shape = values.shape
        else:
            n = len(values)
            s = self._slot(dtype, n)
            s.host[:n] = torch.tensor(values, dtype=dtype) if n else s.host[:0]
            shape = (n,)
        ops = self.ops
        dev = s.dev[:n]
        ops.copy(dev, s.host[:n], non_blocking=True, tag=("upload", None))
        if ops.cuda:
            s.event = ops.event()
            ops.record(s.event)
        return dev.view(shape)
