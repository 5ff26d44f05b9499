"""Prefetch predictors: the routing history and the online affinity table.

Both only *predict*; :class:`mpl.runtime.core.Runtime` turns proposals into PREFETCH loads.

* :class:`History` — per layer, how often each expert was selected in the last
  ``history_window`` steps (one entry per dispatch of that layer). Counts change by one per
  entering or leaving expert, so experts are kept in buckets by count: an update is two set
  operations, a bit mask marks the non-empty buckets, and the top-``b`` (count desc, then
  expert id) visits only non-empty buckets from the highest down.
* :class:`Affinity` — transition counts ``(e at L) -> (e' at L+d)`` for ``d = 1 ..
  lookahead``, learned online from consecutive dispatches of the same step (``L+d`` wraps into
  the next step). ``P(e' | e) = count(e -> e') / count(e)``; a target expert's probability is
  the maximum over the current dispatch's experts; proposals keep ``P >= threshold``.
"""

from __future__ import annotations

from collections import deque


class History:
    __slots__ = ("window", "win", "cnt", "bk", "mask")

    def __init__(self, num_layers: int, window: int, num_experts: int):
        self.window = window
        self.win = [deque() for _ in range(num_layers)]
        self.cnt = [[0] * num_experts for _ in range(num_layers)]   # expert -> count
        self.bk = [[set()] for _ in range(num_layers)]     # bk[c]: experts with count c
        self.mask = [0] * num_layers                       # bit c set: bk[c] is not empty

    def observe(self, layer: int, experts) -> None:
        """One dispatch of ``layer`` selected ``experts`` (distinct ids)."""
        win = self.win[layer]
        new = experts if type(experts) is tuple else tuple(experts)
        win.append(new)
        if len(win) <= self.window:
            old = ()
        else:
            old = win.popleft()
            if len(win) > self.window:          # the window shrank (an adapt rule)
                gone = [old]
                while len(win) > self.window:
                    gone.append(win.popleft())
                self._apply(layer, new, gone)
                return
        if len(new) > 16 or len(old) > 16:      # wide (prefill) dispatches: set lookups
            sn, so = set(new), set(old)
        else:
            sn, so = new, old
        cnt = self.cnt[layer]
        bk = self.bk[layer]
        mask = self.mask[layer]
        for e in new:
            if e in so:
                continue                        # in and out of the window: no change
            c = cnt[e]
            if c:
                s = bk[c]
                s.discard(e)
                if not s:
                    mask ^= 1 << c
            c += 1
            cnt[e] = c
            if len(bk) <= c:
                bk.append(set())
            s = bk[c]
            if not s:
                mask |= 1 << c
            s.add(e)
        for e in old:
            if e in sn:
                continue
            c = cnt[e]
            s = bk[c]
            s.discard(e)
            if not s:
                mask ^= 1 << c
            c -= 1
            cnt[e] = c
            if c:
                s = bk[c]
                if not s:
                    mask |= 1 << c
                s.add(e)
        self.mask[layer] = mask

    def _apply(self, layer: int, new, gone) -> None:
        """General update: ``new`` entered and the rows ``gone`` left the window."""
        delta: dict = {}
        for e in new:
            delta[e] = delta.get(e, 0) + 1
        for row in gone:
            for e in row:
                delta[e] = delta.get(e, 0) - 1
        cnt = self.cnt[layer]
        bk = self.bk[layer]
        for e, d in delta.items():
            if not d:
                continue
            c = cnt[e]
            if c:
                bk[c].discard(e)
            c += d
            cnt[e] = c
            if c > 0:
                while len(bk) <= c:
                    bk.append(set())
                bk[c].add(e)
        self._set_mask(layer)

    def _set_mask(self, layer: int) -> None:
        mask = 0
        for c, s in enumerate(self.bk[layer]):
            if s:
                mask |= 1 << c
        self.mask[layer] = mask

    def load(self, layer: int, rows, counts: list, buckets: int) -> None:
        """Set ``layer``'s window ``rows`` and per-expert ``counts`` (as the compiled live
        dispatch hands them back), with ``buckets`` count buckets (the length the
        incremental updates had grown them to)."""
        self.win[layer] = deque(rows)
        self.cnt[layer] = counts
        bk = [set() for _ in range(buckets)]
        for e, c in enumerate(counts):
            if c > 0:
                bk[c].add(e)
        self.bk[layer] = bk
        self._set_mask(layer)

    def top(self, layer: int, b: int) -> list:
        """Up to ``b`` experts of ``layer``, most often selected first (ties: lower id)."""
        out: list = []
        if b <= 0:
            return out
        bk = self.bk[layer]
        mask = self.mask[layer]
        while mask:
            c = mask.bit_length() - 1           # the highest non-empty bucket
            s = bk[c]
            if len(s) == 1:
                out.extend(s)
            else:
                out.extend(sorted(s))
            if len(out) >= b:
                return out[:b] if len(out) > b else out
            mask ^= 1 << c
        return out

    def count(self, layer: int, expert: int) -> int:
        return self.cnt[layer][expert]


class Affinity:
    """Per source ``(d, e at L)`` a row ``[n, cnt, cand, w]``: ``n`` observations of the
    source, ``cnt[e2]`` of them followed by ``e2`` at ``L+d``, and the candidate set ``cand``
    = every target with ``cnt >= w``. The watermark ``w`` stays at or below ``threshold * n``
    (less one, against rounding), so ``cand`` holds every target a prediction can keep
    (``cnt / n >= threshold``): an observation adds a target to it when its count reaches
    ``w`` (one comparison), and a prediction reads ``cand``, not every target ever seen,
    raising ``w`` (a rescan of the row) only when it lags a quarter behind."""
    __slots__ = ("num_layers", "depth", "threshold", "last", "table")

    def __init__(self, num_layers: int, depth: int, threshold: float):
        self.num_layers = num_layers
        self.depth = depth
        self.threshold = threshold
        self.last: list = [None] * num_layers          # layer -> (step, experts)
        self.table: dict = {}                          # (d, src layer) -> {e: row}

    @staticmethod
    def row(n: int, counts: dict) -> list:
        """A source's row from its observations ``n`` and target counts (as the compiled
        live dispatch hands the table back): the watermark at 1, so every target is a
        candidate until a prediction raises it."""
        return [n, counts, set(counts), 1]

    def observe(self, layer: int, step: int, experts) -> None:
        L = self.num_layers
        experts = tuple(experts)
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
                    row = tab[e] = self.row(0, {})
                row[0] += 1
                cnt = row[1]
                w = row[3]
                for e2 in experts:
                    c = cnt.get(e2, 0) + 1
                    cnt[e2] = c
                    if c == w:
                        row[2].add(e2)
        self.last[layer] = (step, experts)

    def probabilities(self, layer: int, experts, d: int) -> dict:
        """Target expert -> P(target at layer+d | an expert of ``experts`` at ``layer``): the
        maximum over ``experts`` of ``count(e -> target) / count(e)``, over every target seen."""
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
        """Experts predicted at ``layer + d``, most probable first (ties: lower id): those of
        :meth:`probabilities` with ``P >= threshold`` (the same quotients, read from each
        source's candidates only, so the same set and order)."""
        tab = self.table.get((d, layer))
        if not tab:
            return []
        thr = self.threshold
        best: dict = {}
        for e in experts:
            row = tab.get(e)
            if row is None:
                continue
            n, cnt, cand, w = row
            target = int(thr * n) - 1
            if target < 1:
                target = 1
            if w > target or 4 * (target - w) > target:     # threshold fell, or w lags
                row[3] = w = target
                cand = row[2] = {e2 for e2, c in cnt.items() if c >= w}
            for e2 in cand:
                p = cnt[e2] / n
                if p >= thr and p > best.get(e2, -1.0):
                    best[e2] = p
        good = [(-p, e) for e, p in best.items()]
        good.sort()
        return [e for _, e in good]
