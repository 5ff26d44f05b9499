"""CPU execution of the experts the Plan places on the CPU: computed on the CPU, from the
host copy of the weights, with the experts module's own math described by the flags of
transformers' ``use_experts_implementation`` (``has_gate``, ``has_bias``, ``is_transposed``,
``has_post_expert_norm``) and its ``_apply_gate``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from .view import ExpertsView


class CpuExperts:
    """One per MoE layer: computes selected experts of a dispatch on the CPU."""

    def __init__(self, module, host: dict[str, torch.Tensor]) -> None:
        self.module = module
        self.host = host
        self.has_gate = bool(getattr(module, "has_gate", True))
        self.has_bias = bool(getattr(module, "has_bias", False))
        self.transposed = bool(getattr(module, "is_transposed", False))
        self.post_norm = bool(getattr(module, "has_post_expert_norm", False))
        over = {}
        # submodules used by the math, copied to the CPU when the module lives elsewhere
        for name in ("act_fn", "post_expert_norm"):
            sub = getattr(module, name, None)
            if isinstance(sub, torch.nn.Module):
                dev = next((p.device for p in sub.parameters()), None)
                if dev is not None and dev.type != "cpu":
                    sub = copy.deepcopy(sub).to("cpu")
                over[name] = sub
        self.view = ExpertsView(module, over)
        self.apply_gate = type(module)._apply_gate if self.has_gate else None
        self.up_name = "gate_up_proj" if self.has_gate else "up_proj"

    def _linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w if self.transposed else F.linear(x, w)

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """One expert's output for rows ``x`` (no routing weight)."""
        h = self.host
        y = self._linear(x, h[self.up_name][e])
        if self.has_bias:
            y = y + h[self.up_name + "_bias"][e]
        y = self.apply_gate(self.view, y) if self.has_gate else self.view.act_fn(y)
        y = self._linear(y, h["down_proj"][e])
        if self.has_bias:
            y = y + h["down_proj_bias"][e]
        if self.post_norm:
            y = self.view.post_expert_norm(y)
        return y

    def compute(self, experts: list[int], hidden: torch.Tensor, index: torch.Tensor,
                weights: torch.Tensor) -> torch.Tensor:
        """Sum over ``experts`` (in id order, like the eager loop) of weight x expert(x) for
        the tokens routed to them. ``hidden``/``index``/``weights`` are CPU tensors."""
        out = torch.zeros_like(hidden)
        for e in sorted(experts):
            tok, pos = torch.where(index == e)
            if tok.numel() == 0:
                continue
            y = self.expert(e, hidden[tok]) * weights[tok, pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out
