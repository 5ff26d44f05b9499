"""Per-layer budgets: splitting ``total_budget`` slots across the MoE layers.

``uniform`` gives every layer the same share; ``entropy`` is proportional to each layer's
routing entropy and ``frequency`` to the number of distinct experts it used, both measured
over the layer's last ``entropy_window`` dispatches (:class:`Signal`). Every capacity is
clamped to ``[min_capacity, max_capacity]`` and the sum never exceeds the budget.
"""

from __future__ import annotations

import math
from collections import deque
from itertools import repeat


class BudgetError(ValueError):
    pass


def allocate(weights: list[float], budget: int, lo: int, hi: int) -> list[int]:
    """Integer capacities proportional to ``weights``, clamped to [lo, hi], sum <= budget.

    Water-filling: the exact split gives every layer ``clamp(x * w, lo, hi)`` for the one
    scale ``x`` at which they sum to the budget (or every layer ``hi``, when even that is
    within it). Each round splits what is left over the free layers in proportion; when some
    shares fall outside [lo, hi], the side whose total excess is larger is fixed at its bound
    (its layers are outside at the final scale too: the shares above ``hi`` exceed it by
    more than those below ``lo`` miss it, so the scale can only grow, and the other way
    round), then the rest is re-split. Layers of weight zero sit at ``lo`` until every
    weighted layer is fixed, then share what is left equally. The fractional remainders are
    handed out largest first (ties: lower layer). Equal or all-zero weights give the uniform
    split.

    The work grows with the layers whose weight is not zero, not with the layers: equal
    weights (the uniform split) and the layers of weight zero (a per-layer signal's layers no
    dispatch has reached, on a trace whose header declares many) are handled as one block
    each, with the same float operations, in the same order, as :func:`_allocate_each`
    (which a test holds it equal to)."""
    n = len(weights)
    if n == 0:
        return []
    if lo * n > budget:
        raise BudgetError(f"per_layer.total_budget = {budget} is below layers x min_capacity "
                          f"= {n} x {lo}: lower min_capacity or raise total_budget")
    w = [max(0.0, float(x)) for x in weights]
    nz = [i for i, x in enumerate(w) if x > 0]
    if not nz or (len(nz) == n and w.count(w[0]) == n):
        return _allocate_equal(w[0] if nz else 1.0, n, budget, lo, hi)
    if 2 * len(nz) > n:
        return _allocate_each(w, budget, lo, hi)
    return _allocate_sparse(w, nz, budget, lo, hi)


def _allocate_each(w: list[float], budget: int, lo: int, hi: int) -> list[int]:
    """:func:`allocate`, layer by layer (``w``: the weights, each >= 0, not all zero)."""
    n = len(w)
    if sum(w) <= 0:
        w = [1.0] * n
    fixed: dict[int, float] = {}
    while True:
        free = [i for i in range(n) if i not in fixed]
        rest = budget - sum(fixed.values())
        tw = sum(w[i] for i in free)
        share = {i: (rest * w[i] / tw if tw > 0 else rest / max(1, len(free))) for i in free}
        over = [i for i in free if share[i] > hi]
        under = [i for i in free if share[i] < lo]
        if not over and not under:
            break
        if _fix_over(over and math.fsum([share[i] - hi for i in over]),
                     under and math.fsum([lo - share[i] for i in under])):
            for i in over:
                fixed[i] = hi
        else:
            for i in under:
                fixed[i] = lo
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


def _fix_over(excess, deficit) -> bool:
    """Whether a round of the water-filling fixes the shares above ``hi`` (their summed
    ``excess``; falsy: none) rather than those below ``lo`` (``deficit``). The sums are
    math.fsum's, exact to one rounding whatever their order, so the per-layer and the block
    versions of the split decide alike."""
    if not excess:
        return False
    return not deficit or excess >= deficit


def _allocate_equal(v: float, n: int, budget: int, lo: int, hi: int) -> list[int]:
    """:func:`_allocate_each` for ``n`` layers of one weight ``v`` > 0: every share is the
    same, so every layer is fixed at a bound together, or none is."""
    tw = sum(repeat(v, n))                # the same additions as the per-layer sum
    share = budget * v / tw
    if share > hi or share < lo:          # all fixed at the bound: nothing handed out
        return [min(hi, max(lo, hi if share > hi else lo))] * n
    c = min(hi, max(lo, int(math.floor(share))))
    left = budget - n * c
    if left <= 0 or c >= hi:
        return [c] * n
    m = min(left, n)                      # one each, lowest layers first (equal fractions)
    return [c + 1] * m + [c] * (n - m)


def _allocate_sparse(w: list[float], nz: list[int], budget: int, lo: int, hi: int) -> list[int]:
    """:func:`_allocate_each` where most weights are zero: the layers ``nz`` of nonzero
    weight one by one, the others (``zero``) as one block whose share is always the same. A
    zero adds nothing to a float sum, so ``tw`` is the sum over the nonzero free layers."""
    n = len(w)
    nzset = set(nz)
    zcount = n - len(nz)
    fixed: dict[int, float] = {}
    zfixed = None                         # the zero block's bound once it is fixed
    while True:
        free = [i for i in nz if i not in fixed]
        nfree = len(free) + (zcount if zfixed is None else 0)
        rest = budget - (sum(fixed.values()) + (zcount * zfixed if zfixed is not None else 0))
        tw = sum(w[i] for i in free)
        if tw > 0:
            share = {i: rest * w[i] / tw for i in free}
            zshare = rest * 0.0 / tw
        else:
            share = {i: rest / max(1, nfree) for i in free}
            zshare = rest / max(1, nfree)
        zfree = zfixed is None
        over = [i for i in free if share[i] > hi]
        zover = zfree and zshare > hi
        under = [i for i in free if share[i] < lo]
        zunder = zfree and zshare < lo
        if not (over or zover or under or zunder):
            break
        # (the zero block's share exceeds hi only when it is alone, tw = 0, so its excess
        # never meets a deficit; below lo its deficit is lo - 0.0 per layer, lo x zcount in
        # all, an exact float, so fsum gives the per-layer sum's value)
        excess = (over or zover) and math.fsum([share[i] - hi for i in over]
                                          + ([(zshare - hi) * zcount] if zover else []))
        deficit = (under or zunder) and math.fsum([lo - share[i] for i in under]
                                             + ([float(lo * zcount)] if zunder else []))
        if _fix_over(excess, deficit):
            for i in over:
                fixed[i] = hi
            if zover:
                zfixed = hi
        else:
            for i in under:
                fixed[i] = lo
            if zunder:
                zfixed = lo
    zexact = zfixed if zfixed is not None else zshare
    zcap = min(hi, max(lo, int(math.floor(zexact))))
    exact = {i: (fixed[i] if i in fixed else share[i]) for i in nz}
    caps = [zcap] * n
    for i in nz:
        caps[i] = min(hi, max(lo, int(math.floor(exact[i]))))
    left = budget - (sum(caps[i] for i in nz) + zcount * zcap)
    if left <= 0:
        return caps
    # the remainders, largest fraction first, ties to the lower layer: the nonzero layers
    # one by one; the zero block, all of one fraction, in layer order
    frac = {i: exact[i] - math.floor(exact[i]) for i in nz}
    cand = sorted((i for i in nz if caps[i] < hi and i not in fixed), key=lambda i: (-frac[i], i))
    zf = zexact - math.floor(zexact)
    zcand = zfixed is None and zcap < hi
    k = 0
    while k < len(cand) and left > 0 and (not zcand or frac[cand[k]] > zf):
        caps[cand[k]] += 1
        left -= 1
        k += 1
    if zcand and left > 0:          # the zero block's fraction, then the ones below it
        tied = []
        while k < len(cand) and frac[cand[k]] == zf:
            tied.append(cand[k])
            k += 1
        t = 0
        for i in range(n):          # layer order through the tie: zero layers and tied ones
            if left <= 0:
                break
            if i in nzset:
                if t < len(tied) and tied[t] == i:
                    caps[i] += 1
                    left -= 1
                    t += 1
                continue
            caps[i] += 1
            left -= 1
        while k < len(cand) and left > 0:
            caps[cand[k]] += 1
            left -= 1
            k += 1
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
        if allocation not in ("entropy", "frequency"):
            return [1.0] * n
        out = [0.0] * n                   # a layer without accesses in its window weighs 0
        f = self.entropy if allocation == "entropy" else (lambda i: float(self.distinct(i)))
        for i, t in enumerate(self.total):
            if t:
                out[i] = f(i)
        return out
