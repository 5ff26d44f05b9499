"""One expert's math, and the experts the Plan places on the CPU.

:class:`ExpertMath` is the experts module's own per-expert computation, described by the
flags of transformers' ``use_experts_implementation`` (``has_gate``, ``has_bias``,
``is_transposed``, ``has_post_expert_norm``) and its ``_apply_gate``: exactly the body of
the eager loop of every family. The engine's eager path runs it on the device (weights from
pool slots); :class:`CpuExperts` runs it on the CPU from the host copy.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from .view import ExpertsView


class ExpertMath:
    """``expert(x, rows)``: one expert's output for rows ``x`` (no routing weight), from
    ``rows[param_name]`` (that expert's weight row of each parameter)."""

    def __init__(self, module, view=None) -> None:
        self.has_gate = bool(getattr(module, "has_gate", True))
        self.has_bias = bool(getattr(module, "has_bias", False))
        self.transposed = bool(getattr(module, "is_transposed", False))
        self.post_norm = bool(getattr(module, "has_post_expert_norm", False))
        self.view = view if view is not None else module
        self.apply_gate = type(module)._apply_gate if self.has_gate else None
        self.up_name = "gate_up_proj" if self.has_gate else "up_proj"

    def _linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w if self.transposed else F.linear(x, w)

    def expert(self, x: torch.Tensor, rows) -> torch.Tensor:
        up = self.up_name
        y = self._linear(x, rows[up])
        if self.has_bias:
            y = y + rows[up + "_bias"]
        y = self.apply_gate(self.view, y) if self.has_gate else self.view.act_fn(y)
        y = self._linear(y, rows["down_proj"])
        if self.has_bias:
            y = y + rows["down_proj_bias"]
        if self.post_norm:
            y = self.view.post_expert_norm(y)
        return y


class _Row:
    """``rows[name]`` -> ``tensors[name][index]`` without building a dict."""

    __slots__ = ("tensors", "index")

    def __init__(self, tensors, index) -> None:
        self.tensors = tensors
        self.index = index

    def __getitem__(self, name):
        return self.tensors[name][self.index]


class CpuExperts:
    """One per MoE layer: computes selected experts of a dispatch on the CPU, from the host
    store's tensors ``host``, or for a layer whose experts are on a disk tier from
    ``rows(e)`` (the record of expert ``e`` the host tier holds, read from the disk:
    ``mpl.mechanism.tiered.TierExecutor.cpu_rows``), asked for as each expert is computed."""

    def __init__(self, module, host: dict[str, torch.Tensor] | None, rows=None) -> None:
        self.module = module
        self.host = host
        self.rows = rows
        over = {}
        # submodules used by the math, copied to the CPU when the module lives elsewhere
        for name in ("act_fn", "post_expert_norm"):
            sub = getattr(module, name, None)
            if isinstance(sub, torch.nn.Module):
                dev = next((p.device for p in sub.parameters()), None)
                if dev is not None and dev.type != "cpu":
                    sub = copy.deepcopy(sub).to("cpu")
                over[name] = sub
        self.math = ExpertMath(module, ExpertsView(module, over))

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """One expert's output for rows ``x`` (no routing weight)."""
        return self.math.expert(x, self.rows(e) if self.rows is not None else _Row(self.host, e))

    def compute(self, experts, hidden: torch.Tensor, positions: dict, weights: torch.Tensor) -> torch.Tensor:
        """Sum over ``experts`` (in id order, like the eager loop) of weight x expert(x) for
        the tokens routed to them. ``positions[e]`` = (token ids, top-k positions) as host
        lists; ``hidden``/``weights`` are host tensors."""
        out = torch.zeros_like(hidden)
        for e in sorted(experts):
            tok, pos = positions.get(e, ((), ()))
            if not tok:
                continue
            tok = torch.tensor(tok)
            y = self.expert(e, hidden[tok]) * weights[tok, torch.tensor(pos), None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out


def positions_of(flat: list[int], top_k: int) -> dict[int, tuple[list[int], list[int]]]:
    """``{expert: (token ids, top-k positions)}`` of a dispatch's flattened ``[T, K]`` ids,
    each expert's pairs in the order of the eager loop's ``torch.where(mask[e])`` over the
    ``[K, T]`` one-hot mask: by top-k position, then token."""
    per: dict[int, tuple[list[int], list[int]]] = {}
    for k in range(top_k):
        for t, e in enumerate(flat[k::top_k]):
            p = per.get(e)
            if p is None:
                per[e] = p = ([], [])
            p[0].append(t)
            p[1].append(k)
    return per
