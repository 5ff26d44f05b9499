"""Per-layer budgets: splitting ``total_budget`` slots across the MoE layers.

``uniform`` gives every layer the same share; ``entropy`` is proportional to each layer's
routing entropy and ``frequency`` to the number of distinct experts it used, both measured
over the layer's last ``entropy_window`` dispatches (:class:`Signal`). Every capacity is
clamped to ``[min_capacity, max_capacity]`` and the sum never exceeds the budget.
"""

from __future__ import annotations

import math
from collections import deque


class BudgetError(ValueError):
    pass


def allocate(weights: list[float], budget: int, lo: int, hi: int) -> list[int]:
    """Integer capacities proportional to ``weights``, clamped to [lo, hi], sum <= budget.

    Water-filling: layers whose proportional share falls outside [lo, hi] are fixed at the
    bound and the rest re-split; the fractional remainders are handed out largest first (ties:
    lower layer). Equal or all-zero weights give the uniform split.
    """
    n = len(weights)
    if n == 0:
        return []
    if lo * n > budget:
        raise BudgetError(f"per_layer.total_budget = {budget} is below layers x min_capacity "
                          f"= {n} x {lo}: lower min_capacity or raise total_budget")
    w = [max(0.0, float(x)) for x in weights]
    if sum(w) <= 0:
        w = [1.0] * n
    fixed: dict[int, float] = {}
    while True:
        free = [i for i in range(n) if i not in fixed]
        rest = budget - sum(fixed.values())
        tw = sum(w[i] for i in free)
        share = {i: (rest * w[i] / tw if tw > 0 else rest / max(1, len(free))) for i in free}
        over = [i for i in free if share[i] > hi]
        under = [] if over else [i for i in free if share[i] < lo]
        for i in over:
            fixed[i] = hi
        for i in under:
            fixed[i] = lo
        if not over and not under:
            break
    exact = [fixed[i] if i in fixed else share[i] for i in range(n)]
    caps = [min(hi, max(lo, int(math.floor(x)))) for x in exact]
    left = budget - sum(caps)
    order = sorted(range(n), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
    for i in order:
        if left <= 0:
            break
        if caps[i] < hi and i not in fixed:
            caps[i] += 1
            left -= 1
    return caps


class Signal:
    """Per-layer routing statistics over the last ``window`` dispatches of each layer."""

    __slots__ = ("window", "win", "cnt", "total")

    def __init__(self, num_layers: int, window: int):
        self.window = window
        self.win = [deque() for _ in range(num_layers)]
        self.cnt = [dict() for _ in range(num_layers)]
        self.total = [0] * num_layers

    def observe(self, layer: int, experts) -> None:
        cnt = self.cnt[layer]
        for e in experts:
            cnt[e] = cnt.get(e, 0) + 1
        self.total[layer] += len(experts)
        win = self.win[layer]
        win.append(tuple(experts))
        while len(win) > self.window:
            old = win.popleft()
            self.total[layer] -= len(old)
            for e in old:
                c = cnt[e] - 1
                if c:
                    cnt[e] = c
                else:
                    del cnt[e]

    def entropy(self, layer: int) -> float:
        """Shannon entropy (nats) of the layer's expert-selection distribution."""
        t = self.total[layer]
        if not t:
            return 0.0
        h = 0.0
        for c in self.cnt[layer].values():
            p = c / t
            h -= p * math.log(p)
        return h

    def distinct(self, layer: int) -> int:
        return len(self.cnt[layer])

    def weights(self, allocation: str) -> list[float]:
        n = len(self.win)
        if allocation == "entropy":
            return [self.entropy(i) for i in range(n)]
        if allocation == "frequency":
            return [float(self.distinct(i)) for i in range(n)]
        return [1.0] * n
