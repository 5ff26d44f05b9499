"""The host store: every offloaded expert's weights, one tensor per parameter name and MoE
layer, on the offload device (the CPU), in the model's own layout ``[E, ...]``.

Pinned (page-locked) when CUDA is available, so copies into device slots are asynchronous
DMA transfers; plain host memory otherwise (pinning needs a CUDA driver).
"""

from __future__ import annotations

import torch


class HostStore:
    """``layers[ordinal][param_name]`` is the ``[E, ...]`` host tensor of that MoE layer."""

    def __init__(self, pin: bool | None = None) -> None:
        self.pin = torch.cuda.is_available() if pin is None else pin
        self.layers: list[dict[str, torch.Tensor]] = []

    def add_layer(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Take a layer's expert tensors; returns the host tensors now holding them (the
        caller points the original parameters at them so nothing is duplicated)."""
        host: dict[str, torch.Tensor] = {}
        for name, t in params.items():
            h = t.detach()
            if self.pin and not h.is_pinned():
                # straight into page-locked memory: no pageable intermediate copy
                pinned = torch.empty(h.shape, dtype=h.dtype, pin_memory=True)
                pinned.copy_(h)
                h = pinned
            elif h.device.type != "cpu":
                h = h.to("cpu")
            host[name] = h
        self.layers.append(host)
        return host

    def expert_bytes(self, ordinal: int = 0) -> int:
        """Bytes of one expert of a layer (every parameter's row ``[e]``)."""
        return sum(t[0].numel() * t.element_size() for t in self.layers[ordinal].values())

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer.values())
