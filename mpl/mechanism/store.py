"""The host store: every offloaded expert's weights, one tensor per parameter name and MoE
layer, on the offload device (the CPU), in the model's own layout ``[E, ...]``.

All of them are views of **one** host arena (``Ops.host_arena``), each starting at an
``ALIGN``-byte boundary, so the arena exceeds the experts' bytes by less than ``ALIGN`` per
tensor. On CUDA the arena is an ordinary allocation page-locked in place
(``cudaHostRegister``), so copies into device slots are asynchronous DMA transfers and the
locked RAM is exactly the arena; ``pin_memory=True`` per tensor would round each tensor up to
a power of two in the caching host allocator (a 704 MiB tensor would lock 1 GiB). Without
CUDA the arena is plain host memory.
"""

from __future__ import annotations

import torch

from .device import ALIGN, SyncOps


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class HostStore:
    """``layers[ordinal][param_name]`` is the ``[E, ...]`` host tensor of that MoE layer."""

    def __init__(self, ops: SyncOps | None = None) -> None:
        self.ops = ops or SyncOps(torch.device("cpu"))
        self.layers: list[dict[str, torch.Tensor]] = []
        self.arena: torch.Tensor | None = None

    def build(self, layers: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        """Copy every layer's expert tensors into the arena; returns the host tensors now
        holding them (the caller points the original parameters at them)."""
        sizes = [[_aligned(t.numel() * t.element_size()) for t in params.values()] for params in layers]
        self.arena = self.ops.host_arena(sum(map(sum, sizes)))
        off = 0
        for params, sz in zip(layers, sizes):
            host: dict[str, torch.Tensor] = {}
            for (name, t), n in zip(params.items(), sz):
                t = t.detach()
                nbytes = t.numel() * t.element_size()
                h = self.arena[off:off + nbytes].view(t.dtype).view(t.shape)
                h.copy_(t)
                host[name] = h
                off += n
            self.layers.append(host)
        return self.layers

    def release(self) -> None:
        """Unlock the arena (its memory stays valid while views of it are alive)."""
        if self.arena is not None:
            self.ops.release_arena(self.arena)
            self.arena = None

    def expert_bytes(self, ordinal: int = 0) -> int:
        """Bytes of one expert of a layer (every parameter's row ``[e]``)."""
        return sum(t[0].numel() * t.element_size() for t in self.layers[ordinal].values())

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer.values())

    @property
    def arena_bytes(self) -> int:
        return 0 if self.arena is None else self.arena.numel()
