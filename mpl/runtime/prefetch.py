"""Prefetch predictors: the routing history and the online affinity table.

Both only *predict*; :class:`mpl.runtime.core.Runtime` turns proposals into PREFETCH loads.

* :class:`History` — per layer, how often each expert was selected in the last
  ``history_window`` steps (one entry per dispatch of that layer), with an incrementally
  sorted ranking (count desc, then expert id) so the top-``b`` costs O(b).
* :class:`Affinity` — transition counts ``(e at L) -> (e' at L+d)`` for ``d = 1 ..
  lookahead``, learned online from consecutive dispatches of the same step (``L+d`` wraps into
  the next step). ``P(e' | e) = count(e -> e') / count(e)``; a target expert's probability is
  the maximum over the current dispatch's experts; proposals keep ``P >= threshold``.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque


_M = 1 << 32   # rank entries are ints ``expert - count * _M``: ascending = count desc, id asc


class History:
    __slots__ = ("window", "win", "cnt", "rank")

    def __init__(self, num_layers: int, window: int):
        self.window = window
        self.win = [deque() for _ in range(num_layers)]
        self.cnt = [dict() for _ in range(num_layers)]
        self.rank = [[] for _ in range(num_layers)]   # sorted ints (see _M)

    def observe(self, layer: int, experts) -> None:
        cnt = self.cnt[layer]
        rank = self.rank[layer]
        win = self.win[layer]
        win.append(tuple(experts))
        delta: dict = {}
        for e in experts:
            delta[e] = delta.get(e, 0) + 1
        while len(win) > self.window:
            for e in win.popleft():
                delta[e] = delta.get(e, 0) - 1
        for e, d in delta.items():
            if not d:
                continue                  # in and out of the window: no change
            c = cnt.get(e, 0)
            if c:
                del rank[bisect_left(rank, e - c * _M)]
            c += d
            if c > 0:
                cnt[e] = c
                insort(rank, e - c * _M)
            else:
                del cnt[e]

    def top(self, layer: int, b: int) -> list:
        return [v % _M for v in self.rank[layer][:b]]

    def count(self, layer: int, expert: int) -> int:
        return self.cnt[layer].get(expert, 0)


class Affinity:
    __slots__ = ("num_layers", "depth", "threshold", "last", "table")

    def __init__(self, num_layers: int, depth: int, threshold: float):
        self.num_layers = num_layers
        self.depth = depth
        self.threshold = threshold
        self.last: list = [None] * num_layers          # layer -> (step, experts)
        self.table: dict = {}                          # (d, src layer) -> {e: [n, {e2: c}]}

    def observe(self, layer: int, step: int, experts) -> None:
        L = self.num_layers
        for d in range(1, min(self.depth, L) + 1):
            src = layer - d
            src_step = step
            if src < 0:
                src += L
                src_step = step - 1
            prev = self.last[src]
            if prev is None or prev[0] != src_step:
                continue
            tab = self.table.get((d, src))
            if tab is None:
                tab = self.table[(d, src)] = {}
            for e in prev[1]:
                row = tab.get(e)
                if row is None:
                    row = tab[e] = [0, {}]
                row[0] += 1
                nxt = row[1]
                for e2 in experts:
                    nxt[e2] = nxt.get(e2, 0) + 1
        self.last[layer] = (step, tuple(experts))

    def probabilities(self, layer: int, experts, d: int) -> dict:
        """Target expert -> P(target at layer+d | an expert of ``experts`` at ``layer``)."""
        tab = self.table.get((d, layer))
        best: dict = {}
        if not tab:
            return best
        for e in experts:
            row = tab.get(e)
            if row is None:
                continue
            n = row[0]
            for e2, c in row[1].items():
                p = c / n
                if p > best.get(e2, -1.0):
                    best[e2] = p
        return best

    def predict(self, layer: int, experts, d: int) -> list:
        """Experts predicted at ``layer + d``, most probable first (ties: lower id)."""
        probs = self.probabilities(layer, experts, d)
        thr = self.threshold
        good = [(-p, e) for e, p in probs.items() if p >= thr]
        good.sort()
        return [e for _, e in good]
