"""Lookahead pre-gating: apply the routers of the next MoE layers to the current hidden
state to predict which experts they will select, before they run.

The experts of layer L receive the (normalised) hidden state that layer L's router saw; the
residual stream changes little from one layer to the next, so the next layers' routers
applied to it are a good guess of their choices (the "pre-gating" of Pre-gated MoE and
MoE-Infinity). Used only when the policy prefetches with ``strategy = lookahead`` (or
``learned``, which reads the picks as a feature): it costs one small matmul per predicted
layer; the live engine reads the picks in the same host synchronisation as the routing ids.
Engine-neutral: a router is any callable from hidden states to the top-k ids (HuggingFace's
router modules, or vLLM's gate and router: ``mpl.vllm.capture``).
"""

from __future__ import annotations

import torch


class Lookahead:
    def __init__(self, routers: list, distance: int) -> None:
        """``routers[ordinal]``: the router of each MoE layer (None where unknown): hidden
        states ``[T, H]`` -> the top-k ids ``[T, K]`` (or a tuple whose third item they are);
        ``distance``: predict layers L+1 .. L+distance (within the same step)."""
        self.routers = routers
        self.distance = max(1, int(distance))
        self.calls = 0

    def picks(self, ordinal: int, hidden: torch.Tensor):
        """(target ordinals, their routers' picks as one device tensor ``[n*T*K]``), or None
        when there is nothing to predict. Nothing is read to the host here: the engine reads
        the picks together with the routing ids, in its one synchronisation."""
        targets = [t for t in range(ordinal + 1, min(ordinal + 1 + self.distance, len(self.routers)))
                   if self.routers[t] is not None]
        if not targets:
            return None
        self.calls += 1
        with torch.no_grad():
            picks = []
            for t in targets:
                out = self.routers[t](hidden)
                idx = out[2] if isinstance(out, tuple) else out
                picks.append(idx.reshape(-1))
            return targets, (torch.cat(picks) if len(picks) > 1 else picks[0])

    @staticmethod
    def decode(targets, host_picks: torch.Tensor, tokens: int) -> dict[int, list[int]]:
        """``{ordinal: [ids]}`` from the host copy of :meth:`picks`, best first (most tokens
        first, then the router's rank order)."""
        flat = host_picks.tolist()
        per = len(flat) // len(targets)
        preds: dict[int, list[int]] = {}
        for i, t in enumerate(targets):
            count: dict[int, int] = {}
            for e in flat[i * per:(i + 1) * per]:     # token-major, rank order within a token
                count[e] = count.get(e, 0) + 1
            # stable sort: ties keep first-seen (router rank) order
            preds[t] = sorted(count, key=lambda e: -count[e])
        return preds

    def predict(self, ordinal: int, hidden: torch.Tensor) -> dict[int, list[int]] | None:
        """Predicted expert ids of the next layers (see :meth:`decode`); None when there is
        nothing to predict. Reads the picks to the host (one synchronisation)."""
        got = self.picks(ordinal, hidden)
        if got is None:
            return None
        return self.decode(got[0], got[1].to("cpu"), hidden.shape[0])
