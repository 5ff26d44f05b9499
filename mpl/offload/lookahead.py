"""Lookahead pre-gating: apply the routers of the next MoE layers to the current hidden
state to predict which experts they will select, before they run.

The experts of layer L receive the (normalised) hidden state that layer L's router saw; the
residual stream changes little from one layer to the next, so the next layers' routers
applied to it are a good guess of their choices (the "pre-gating" of Pre-gated MoE and
MoE-Infinity). Used only when the policy prefetches with ``strategy = lookahead``: it costs
one small matmul per predicted layer and one host sync.
"""

from __future__ import annotations

import torch


class Lookahead:
    def __init__(self, routers: list, distance: int) -> None:
        """``routers[ordinal]``: the router module of each MoE layer (None where unknown);
        ``distance``: predict layers L+1 .. L+distance (within the same step)."""
        self.routers = routers
        self.distance = max(1, int(distance))
        self.calls = 0

    def predict(self, ordinal: int, hidden: torch.Tensor) -> dict[int, list[int]] | None:
        """Predicted expert ids of the next layers, best first (most tokens first, then the
        router's rank order), as ``{ordinal: [ids]}``; None when there is nothing to predict."""
        targets = [t for t in range(ordinal + 1, min(ordinal + 1 + self.distance, len(self.routers)))
                   if self.routers[t] is not None]
        if not targets:
            return None
        self.calls += 1
        with torch.no_grad():
            picks = []
            for t in targets:
                router = self.routers[t]
                out = router(hidden)
                idx = out[2] if isinstance(out, tuple) else out
                picks.append(idx.reshape(hidden.shape[0], -1))
            rows = torch.stack(picks).tolist() if len(picks) > 1 else [picks[0].tolist()]
        preds: dict[int, list[int]] = {}
        for t, tok_rows in zip(targets, rows):
            count: dict[int, int] = {}
            for row in tok_rows:
                for e in row:
                    count[e] = count.get(e, 0) + 1
            # stable sort: ties keep first-seen (router rank) order
            preds[t] = sorted(count, key=lambda e: -count[e])
        return preds
