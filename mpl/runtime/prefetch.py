"""Prefetch predictors: the routing history and the online affinity table.

Both only *predict*; :class:`mpl.runtime.core.Runtime` turns proposals into PREFETCH loads.

* :class:`History` — per layer, how often each expert was selected in the last
  ``history_window`` steps (one entry per dispatch of that layer). Counts change by one per
  entering or leaving expert, so experts are kept in buckets by count: an update is two set
  operations, a bit mask marks the non-empty buckets, and the top-``b`` (count desc, then
  expert id) visits only non-empty buckets from the highest down. The counts are a dict per
  layer holding the experts in the window (never ``num_experts`` entries up front: a trace
  whose header declares 65,536 experts costs what its dispatches select), and the window
  grows with the dispatches it holds.
* :class:`Affinity` — transition counts ``(e at L) -> (e' at L+d)`` for ``d = 1 ..
  lookahead``, learned online from consecutive dispatches of the same step (``L+d`` wraps into
  the next step). ``P(e' | e) = count(e -> e') / count(e)``; a target expert's probability is
  the maximum over the current dispatch's experts; proposals keep ``P >= threshold``.
"""

from __future__ import annotations

import math
from collections import deque
from operator import index


class History:
    __slots__ = ("window", "win", "cnt", "bk", "mask", "num_experts")

    def __init__(self, num_layers: int, window: int, num_experts: int):
        self.window = window
        self.num_experts = num_experts
        self.win = [deque() for _ in range(num_layers)]
        self.cnt = [{} for _ in range(num_layers)]         # expert -> count (> 0 only)
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
            c = cnt.get(e, 0)
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
            if c:
                cnt[e] = c
                s = bk[c]
                if not s:
                    mask |= 1 << c
                s.add(e)
            else:
                del cnt[e]
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
            c = cnt.get(e, 0)
            if c:
                bk[c].discard(e)
            c += d
            if c > 0:
                cnt[e] = c
                while len(bk) <= c:
                    bk.append(set())
                bk[c].add(e)
            else:
                cnt.pop(e, None)
        self._set_mask(layer)

    def _set_mask(self, layer: int) -> None:
        mask = 0
        for c, s in enumerate(self.bk[layer]):
            if s:
                mask |= 1 << c
        self.mask[layer] = mask

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
        return self.cnt[layer].get(expert, 0)


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
        """A source's row from its observations ``n`` and target counts: the watermark at 1,
        so every target is a candidate until a prediction raises it."""
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


def _dot(a, b) -> float:
    """The dot product, added left to right (as the compiled predictor adds it)."""
    z = 0.0
    for x, y in zip(a, b):
        z += x * y
    return z


class Learned:
    """An online predictor of the next layers' experts from more than the previous layer.

    For a target layer ``t`` every candidate expert ``e`` gets a feature vector:

    * ``a_1 .. a_D``: cross-layer evidence from the ``D`` (``context``) nearest layers before
      ``t`` whose dispatch of the current pass is known: ``sum_x w_x P_d(e at t | x at t-d)``
      over that layer's experts ``x`` with their router weights ``w_x`` (normalised; equal
      without weights). ``P_d`` are transition counts learned online, per (distance, source
      layer, source expert) a row of targets cut back to its ``row_cap`` largest counts when
      it exceeds twice that, and halved when it has seen ``2 x window`` observations, so the
      table follows a change of topic and its memory is bounded by layers x distances x
      experts x 2 row_cap;
    * ``r``: 1 if ``e`` was selected at ``t`` in the previous pass (the same layer's recent
      step);
    * ``f``: how often ``t`` selected ``e`` lately (a moving average over ``window`` passes);
    * ``g``: 1 if the caller's speculative predictions for ``t`` (a pre-gate lookahead live, or
      the trace's recorded predictions in replay) name ``e``;
    * a constant.

    A logistic model ``p = 1 / (1 + exp(-theta . features))`` shared by every layer turns them
    into a probability that ``t`` uses ``e``; ``theta`` is learned online by one step of
    logistic-loss gradient descent per candidate when ``t``'s routing arrives, at the
    features and probability the last prediction for ``t`` gave it. ``predict`` returns the candidates with
    ``p >= confidence``, most probable first.
    """

    __slots__ = ("L", "E", "context", "window", "confidence", "row_cap", "maxd", "rows", "cur",
                 "prev", "freq", "fscale", "theta", "pending", "rate", "gate")

    #: the learning rate of the logistic model
    RATE = 0.05

    def __init__(self, num_layers: int, num_experts: int, context: int, window: int,
                 confidence: float, depth: int, row_cap: int = 16):
        self.L = num_layers
        self.E = num_experts
        self.context = max(1, int(context))
        self.window = max(1, int(window))
        self.confidence = float(confidence)
        self.row_cap = max(1, int(row_cap))
        # a prediction for L+d (d <= depth, prefetch.lookahead) reads the sources d .. d +
        # context - 1 layers back: the table keeps those distances
        self.maxd = min(num_layers, max(1, int(depth)) + self.context - 1)
        # (distance, source layer) -> {source expert: [n, {target: count}]}; distances up to
        # the prefetch depth + context - 1
        self.rows: dict = {}
        self.cur: list = [None] * num_layers      # layer -> (step, experts, weights) now
        self.prev: list = [None] * num_layers     # layer -> experts of its previous dispatch
        self.freq: list = [dict() for _ in range(num_layers)]   # layer -> {e: f * fscale}
        self.fscale = [1.0] * num_layers
        n = self.context + 4
        self.theta = [0.0] * n
        self.theta[0] = 2.0            # prior: the nearest layer's transitions, the last pass
        self.theta[self.context] = 1.0
        self.theta[-1] = -2.0
        self.pending: dict = {}                   # target layer -> (step, {e: features})
        self.rate = self.RATE
        self.gate: dict = {}                      # target layer -> (step, set of predicted)

    # ------------------------------------------------------------------ learning
    def observe(self, layer: int, step: int, experts, weights=None, predictions=None) -> None:
        """``layer``'s dispatch of ``step`` selected ``experts`` (distinct ids, with their
        router weights or None; ``predictions``: the caller's speculative ones for later
        layers)."""
        L = self.L
        experts = tuple(experts)
        got = set(experts)
        pend = self.pending.pop(layer, None)
        if pend is not None and pend[0] == step:
            self._learn(pend[1], pend[2], got)
        for d in range(1, self.maxd + 1):
            src = layer - d
            src_step = step
            if src < 0:
                src += L
                src_step = step - 1
            c = self.cur[src]
            if c is not None and c[0] == src_step:
                self._count(d, src, c[1], experts)
        self._frequency(layer, experts)
        old = self.cur[layer]
        self.prev[layer] = old[1] if old is not None else None
        if weights is not None:
            total = 0.0                # left to right (sum() compensates on Python 3.12+;
            for x in weights:          # the compiled predictor adds as this does)
                total += x
            ws = tuple(float(x) / total for x in weights) if total > 0 else None
        else:
            ws = None
        self.cur[layer] = (step, experts, ws)
        if predictions:
            for t, ids in predictions.items():
                st = step if t > layer else step + 1
                self.gate[t] = (st, tuple(dict.fromkeys(ids)))   # distinct, in their order

    def _count(self, d: int, src: int, sources, targets) -> None:
        tab = self.rows.get((d, src))
        if tab is None:
            tab = self.rows[(d, src)] = {}
        cap = self.row_cap
        half = self.window
        for x in sources:
            row = tab.get(x)
            if row is None:
                row = tab[x] = [0, {}]
            row[0] += 1
            cnt = row[1]
            get = cnt.get
            for e in targets:
                cnt[e] = get(e, 0) + 1
            if len(cnt) > 2 * cap:     # keep the cap largest counts (ties: lower id)
                keep = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[:cap]
                cnt.clear()
                cnt.update(keep)
            if row[0] >= 2 * half:     # forget half: follow a change of topic
                row[0] //= 2
                for e in list(cnt):
                    v = cnt[e] / 2
                    if v < 0.5:
                        del cnt[e]
                    else:
                        cnt[e] = v

    def _frequency(self, layer: int, experts) -> None:
        a = 1.0 / self.window
        f = self.freq[layer]
        if a >= 1.0:                   # a window of one pass: the pass itself
            f.clear()
            for e in experts:
                f[e] = 1.0
            self.fscale[layer] = 1.0
            return
        s = self.fscale[layer] / (1.0 - a)
        for e in experts:
            f[e] = f.get(e, 0.0) + a * s
        if s > 1e12:                   # renormalise (and drop what has faded)
            for e in list(f):
                v = f[e] / s
                if v < 1e-4:
                    del f[e]
                else:
                    f[e] = v
            s = 1.0
        self.fscale[layer] = s

    def _learn(self, feats: dict, probs: dict, got: set) -> None:
        """One gradient step of the logistic loss per candidate, at the probability the
        prediction gave it (predict, then learn: the usual online order). A candidate
        predicted below 2% that was not selected moves theta by less than 0.1% of the
        rate: it is skipped."""
        th = self.theta
        rate = self.rate
        n = len(th)
        for e, f in feats.items():
            p = probs[e]
            if e in got:
                g = rate * (p - 1.0)
            elif p < 0.02:
                continue
            else:
                g = rate * p
            for j in range(n):
                v = f[j]
                if v:
                    th[j] -= g * v

    # ------------------------------------------------------------------ predicting
    def features(self, target: int, step: int) -> dict:
        """Candidate expert -> feature vector for ``target`` in pass ``step`` (see the class
        docstring)."""
        L = self.L
        D = self.context
        n = D + 4
        acc: list = []                 # per context rank: {e: evidence}
        for d in range(1, self.maxd + 1):
            if len(acc) >= D:
                break
            src = target - d
            src_step = step
            if src < 0:
                src += L
                src_step = step - 1
            c = self.cur[src]
            if c is None or c[0] != src_step:
                continue
            a: dict = {}
            acc.append(a)
            tab = self.rows.get((d, src))
            if not tab:
                continue
            experts, ws = c[1], c[2]
            k = len(experts)
            get = a.get
            for i, x in enumerate(experts):
                row = tab.get(x)
                if row is None or not row[0]:
                    continue
                w = (ws[i] if ws is not None else 1.0 / k) / row[0]
                for e, cnt in row[1].items():
                    a[e] = get(e, 0.0) + w * cnt
        out: dict = {}
        for rank, a in enumerate(acc):
            for e, v in a.items():
                f = out.get(e)
                if f is None:
                    f = out[e] = [0.0] * n
                f[rank] = v
        last = self.cur[target]       # the same layer's previous pass
        recent = last[1] if last is not None and last[0] < step else self.prev[target]
        if recent:
            for e in recent:
                f = out.get(e)
                if f is None:
                    f = out[e] = [0.0] * n
                f[D] = 1.0
        g = self.gate.get(target)
        if g is not None and g[0] == step:
            for e in g[1]:
                f = out.get(e)
                if f is None:
                    f = out[e] = [0.0] * n
                f[D + 2] = 1.0
        fr = self.freq[target]
        s = self.fscale[target]
        for e, f in out.items():
            f[D + 1] = fr.get(e, 0.0) / s
            f[D + 3] = 1.0
        return out

    def probability(self, f) -> float:
        """The model's probability for one feature vector."""
        z = _dot(self.theta, f)
        return 1.0 / (1.0 + math.exp(-z)) if z > -40 else 0.0

    def predict(self, layer: int, step: int, d: int, top=None) -> list:
        """Experts predicted for ``layer + d`` (wrapping into the next pass), most probable
        first (ties: lower id), those with probability >= ``confidence`` (``top``: the first
        ``top`` of them); the features and probabilities of every candidate are kept for
        learning when that layer's routing arrives."""
        if top is not None:
            top = index(top)
            if top < 0:
                raise ValueError("Learned.predict: top must be at least 0")
        L = self.L
        t = layer + d
        st = step
        while t >= L:
            t -= L
            st += 1
        feats = self.features(t, st)
        th = self.theta
        exp = math.exp
        probs: dict = {}
        for e, f in feats.items():
            z = _dot(th, f)
            probs[e] = 1.0 / (1.0 + exp(-z)) if z > -40 else 0.0
        self.pending[t] = (st, feats, probs)
        thr = self.confidence
        good = [(-p, e) for e, p in probs.items() if p >= thr]
        good.sort()
        return [e for _, e in (good if top is None else good[:top])]

    def dump(self) -> dict:
        """The whole state in one canonical form (the compiled predictor's ``dump()`` gives
        the same for the same calls): rows in their targets' order, features and
        probabilities of the pending predictions in their candidates' order."""
        return {
            "theta": list(self.theta), "window": self.window, "confidence": self.confidence,
            "rate": self.rate,
            "rows": sorted(((d, src, x), row[0], tuple(row[1].items()))
                           for (d, src), tab in self.rows.items() for x, row in tab.items()),
            "cur": [None if c is None else (c[0], tuple(c[1]), c[2]) for c in self.cur],
            "prev": [None if p is None else tuple(p) for p in self.prev],
            "freq": [tuple(sorted(f.items())) for f in self.freq],
            "fscale": list(self.fscale),
            "pending": {t: (st, tuple((e, tuple(f), probs[e]) for e, f in feats.items()))
                        for t, (st, feats, probs) in self.pending.items()},
            "gate": {t: (st, tuple(ids)) for t, (st, ids) in self.gate.items()},
        }


def learned(num_layers: int, num_experts: int, context: int, window: int, confidence: float,
            depth: int, row_cap: int = 16):
    """A learned predictor on its own: the compiled one (``_engine.Learned``,
    mpl/runtime/c/learned.c: the same predictions and state as :class:`Learned`, which is
    its reference) when the compiled engine is built and the shape fits its tables, else
    :class:`Learned`. (A runtime makes its own, on its backend.)"""
    from mpl.runtime import compiled

    C = getattr(compiled.engine, "Learned", None)
    if C is not None:
        maxd = min(num_layers, max(1, int(depth)) + max(1, int(context)) - 1)
        if 1 <= num_layers * num_experts and \
                maxd * num_layers * num_experts <= compiled.engine.LEARNED_MAX_KEYS and context <= 1024:
            return C(num_layers, num_experts, context, window, confidence, depth, row_cap)
    return Learned(num_layers, num_experts, context, window, confidence, depth, row_cap)
