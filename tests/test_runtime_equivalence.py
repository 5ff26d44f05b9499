"""Decision-by-decision equivalence: for every eviction rule, a tiny hand-written reference
replays a random trace alongside the generated module; every hit, miss, victim and stream
must agree."""

from __future__ import annotations

from collections import deque

import pytest

from mpl.runtime.plan import STREAM
from runtime_helpers import runtime_for, zipf_trace


def outcomes(plan):
    """Per expert: ('hit',) | ('load', victim) | ('stream',)."""
    loads = {ld.key: ld for ld in plan.loads}
    out = []
    for e, h, w in zip(plan.experts, plan.hit, plan.where):
        if h:
            out.append(("hit",))
        elif w == STREAM:
            out.append(("stream",))
        else:
            out.append(("load", loads[(plan.layer, e)].victim))
    return out


# ----------------------------------------------------------------- references
class Ref:
    """Generic demand cache: subclasses say how to pick a victim and track metadata."""

    def __init__(self, cap):
        self.cap = cap
        self.res = set()
        self.tick = 0

    def dispatch(self, layer, experts, weights, k):
        inuse = {(layer, e) for e in experts}
        out = []
        for i, e in enumerate(experts):
            key = (layer, e)
            w = weights[i] if weights else 1.0 / k
            self.tick += 1
            if key in self.res:
                self.on_hit(key, w)
                out.append(("hit",))
                continue
            self.on_miss(key, w)
            if not self.admit_ok(key):
                out.append(("stream",))
                continue
            victim = None
            if len(self.res) >= self.cap:
                victim = self.pick(inuse, key)
                if victim is None:
                    out.append(("stream",))
                    continue
                self.res.discard(victim)
                self.forget(victim)
            self.res.add(key)
            self.add(key, w)
            out.append(("load", victim))
        return out

    def on_miss(self, key, w):
        pass

    def admit_ok(self, key):
        return True


class RefLRU(Ref):
    def __init__(self, cap):
        super().__init__(cap)
        self.order = []

    def on_hit(self, key, w):
        self.order.remove(key)
        self.order.append(key)

    def pick(self, inuse, incoming):
        return next((k for k in self.order if k not in inuse), None)

    def forget(self, key):
        self.order.remove(key)

    def add(self, key, w):
        self.order.append(key)


class RefLFU(Ref):
    def __init__(self, cap, decay, interval):
        super().__init__(cap)
        self.f, self.last = {}, {}
        self.decay, self.interval, self.count = decay, interval, 0

    def clock(self):
        self.count += 1
        if self.count % self.interval == 0:
            for k in self.f:
                self.f[k] *= self.decay

    def on_hit(self, key, w):
        self.f[key] += 1
        self.last[key] = self.tick
        self.clock()

    def on_miss(self, key, w):
        self.clock()

    def pick(self, inuse, incoming):
        cand = [k for k in self.f if k not in inuse]
        return min(cand, key=lambda k: (self.f[k], self.last[k]), default=None)

    def forget(self, key):
        del self.f[key], self.last[key]

    def add(self, key, w):
        self.f[key] = 1.0
        self.last[key] = self.tick


class RefScore(Ref):
    def __init__(self, cap, alpha):
        super().__init__(cap)
        self.s, self.last, self.a = {}, {}, alpha

    def on_hit(self, key, w):
        self.s[key] = self.a * w + (1 - self.a) * self.s[key]
        self.last[key] = self.tick

    def pick(self, inuse, incoming):
        cand = [k for k in self.s if k not in inuse]
        return min(cand, key=lambda k: (self.s[k], self.last[k]), default=None)

    def forget(self, key):
        del self.s[key], self.last[key]

    def add(self, key, w):
        self.s[key] = w
        self.last[key] = self.tick


class RefFT(Ref):
    def __init__(self, cap, thr, window):
        super().__init__(cap)
        self.thr, self.window = thr, window
        self.win = {}
        self.last = {}

    def see(self, key):
        self.win.setdefault(key[0], deque(maxlen=self.window)).append(key[1])

    def share(self, key):
        w = self.win.get(key[0])
        return w.count(key[1]) / len(w) if w else 0.0

    def on_hit(self, key, w):
        self.see(key)
        self.last[key] = self.tick

    def on_miss(self, key, w):
        self.see(key)

    def admit_ok(self, key):
        return self.share(key) >= self.thr

    def pick(self, inuse, incoming):
        cand = [k for k in self.last if k not in inuse]
        return min(cand, key=lambda k: (self.share(k), self.last[k]), default=None)

    def forget(self, key):
        del self.last[key]

    def add(self, key, w):
        self.last[key] = self.tick


class RefSegmented(Ref):
    """lfu | lru: LFU segment a (cap - cap//3), LRU segment b; demote a's victims into b."""

    def __init__(self, cap, decay, interval):
        super().__init__(cap)
        self.a = RefLFU(cap, decay, interval)
        self.b = []
        self.a_cap = cap - cap // 3

    def demote(self, protect):
        while len(self.a.f) > self.a_cap:
            v = self.a.pick({protect}, None)
            self.a.forget(v)
            self.b.append(v)

    def on_hit(self, key, w):
        if key in self.a.f:
            self.a.tick = self.tick
            self.a.on_hit(key, w)
        else:
            self.b.remove(key)
            self.a.clock()
            self.a.tick = self.tick
            self.a.add(key, w)
            self.demote(key)

    def on_miss(self, key, w):
        self.a.clock()

    def pick(self, inuse, incoming):
        v = next((k for k in self.b if k not in inuse), None)
        return v if v is not None else self.a.pick(inuse, incoming)

    def forget(self, key):
        if key in self.b:
            self.b.remove(key)
        else:
            self.a.forget(key)

    def add(self, key, w):
        self.a.tick = self.tick
        self.a.add(key, w)
        self.demote(key)


class RefARC(Ref):
    """Megiddo & Modha 2003, Fig. 4, literally (lists: index 0 = LRU)."""

    def __init__(self, cap):
        super().__init__(cap)
        self.t1, self.t2, self.b1, self.b2, self.p = [], [], [], [], 0.0

    def dispatch(self, layer, experts, weights, k):
        assert len(experts) == 1
        x = (layer, experts[0])
        c = self.cap
        if x in self.t1 or x in self.t2:
            (self.t1 if x in self.t1 else self.t2).remove(x)
            self.t2.append(x)
            return [("hit",)]
        if x in self.b1:
            self.p = min(c, self.p + max(1.0, len(self.b2) / len(self.b1)))
            v = self.replace(x)
            self.b1.remove(x)
            self.t2.append(x)
            return [("load", v)]
        if x in self.b2:
            self.p = max(0.0, self.p - max(1.0, len(self.b1) / len(self.b2)))
            v = self.replace(x)
            self.b2.remove(x)
            self.t2.append(x)
            return [("load", v)]
        v = None
        l1 = len(self.t1) + len(self.b1)
        total = l1 + len(self.t2) + len(self.b2)
        if l1 == c:
            if len(self.t1) < c:
                self.b1.pop(0)
                v = self.replace(x)
            else:
                v = self.t1.pop(0)
        elif l1 < c and total >= c:
            if total == 2 * c:
                self.b2.pop(0)
            v = self.replace(x)
        self.t1.append(x)
        return [("load", v)]

    def replace(self, x):
        if self.t1 and (len(self.t1) > self.p or (x in self.b2 and len(self.t1) == self.p)):
            v = self.t1.pop(0)
            self.b1.append(v)
        else:
            v = self.t2.pop(0)
            self.b2.append(v)
        return v


class RefS3FIFO(Ref):
    """Yang et al. SOSP'23 Algorithm 1 (lists: index 0 = tail/oldest), one victim per miss."""

    def __init__(self, cap):
        super().__init__(cap)
        self.S, self.M, self.G, self.freq = [], [], [], {}
        self.s_lim = 0.1 * cap
        self.m_lim = cap - self.s_lim
        self.g_cap = max(1, int(0.9 * cap))

    def dispatch(self, layer, experts, weights, k):
        x = (layer, experts[0])
        if x in self.freq:
            self.freq[x] = min(self.freq[x] + 1, 3)
            return [("hit",)]
        v = None
        if len(self.S) + len(self.M) >= self.cap:
            v = self.evict()
        if x in self.G:
            self.G.remove(x)
            self.M.append(x)
        else:
            self.S.append(x)
        self.freq[x] = 0
        return [("load", v)]

    def evict(self):
        v = self.evict_s() if len(self.S) >= self.s_lim else None
        if v is None:
            v = self.evict_m()
        if v is None and self.S:
            v = self.evict_s()
        return v

    def evict_s(self):
        while self.S:
            t = self.S.pop(0)
            if self.freq[t] > 1:
                self.M.append(t)
                if len(self.M) >= self.m_lim:
                    v = self.evict_m()
                    if v is not None:
                        return v
            else:
                del self.freq[t]
                self.G.append(t)
                if len(self.G) > self.g_cap:
                    self.G.pop(0)
                return t
        return None

    def evict_m(self):
        while self.M:
            t = self.M.pop(0)
            if self.freq[t] > 0:
                self.freq[t] -= 1
                self.M.append(t)
            else:
                del self.freq[t]
                return t
        return None


class RefLFRU(Ref):
    """Privileged LRU (cap - cap//3) over an unprivileged LFU partition (Bilal & Kang)."""

    def __init__(self, cap, decay, interval):
        super().__init__(cap)
        self.priv, self.un = [], {}
        self.p_cap = cap - cap // 3
        self.u_cap = cap // 3
        self.decay, self.interval, self.count, self.t = decay, interval, 0, 0

    def clock(self):
        self.count += 1
        if self.count >= self.interval:
            self.count = 0
            for v in self.un.values():
                v[0] *= self.decay

    def demote(self, protect):
        while len(self.priv) > self.p_cap:
            v = next(k for k in self.priv if k != protect)
            self.priv.remove(v)
            self.t += 1
            self.un[v] = [1.0, self.t]

    def dispatch(self, layer, experts, weights, k):
        x = (layer, experts[0])
        if x in self.un or x in self.priv:
            self.t += 1
            if x in self.priv:
                self.priv.remove(x)
                self.priv.append(x)
            else:
                del self.un[x]
                self.priv.append(x)
                self.demote(x)
            self.clock()
            return [("hit",)]
        self.clock()
        v = None
        if len(self.un) + len(self.priv) >= self.cap:
            if self.un:
                v = min(self.un, key=lambda q: tuple(self.un[q]))
                del self.un[v]
            else:
                v = self.priv.pop(0)
        self.t += 1
        if self.u_cap == 0:
            self.priv.append(x)
            self.demote(x)
        else:
            self.un[x] = [1.0, self.t]
        return [("load", v)]


# ----------------------------------------------------------------- the replay
def replay_both(values, ref, *, L, E, K, steps, seed, weights=False):
    rt = runtime_for(values, L=L, E=E, K=K)
    # two phases with different popularity: old favourites must age out (decay matters)
    trace = (zipf_trace(steps // 2, L, E, K, seed=seed, weights=weights)
             + zipf_trace(steps - steps // 2, L, E, K, seed=seed + 1000, weights=weights))
    decisions = 0
    for n, (layer, experts, w) in enumerate(trace):
        got = outcomes(rt.dispatch(layer, experts, w))
        want = ref.dispatch(layer, experts, w, K)
        assert got == want, f"dispatch {n} (layer {layer}, experts {experts}): {got} != {want}"
        decisions += len(got)
    st = rt.stats()
    assert st["accesses"] == decisions
    return st


CAPS = [1, 2, 5, 9, 16]


@pytest.mark.parametrize("cap", CAPS)
def test_lru_equivalence(cap):
    st = replay_both({"cache.capacity": cap, "cache.eviction": "lru"}, RefLRU(cap),
                     L=3, E=10, K=3, steps=150, seed=cap)
    assert st["evictions"] > 0


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize("decay,interval", [(0.5, 7), (0.9, 25), (1.0, 100)])
def test_lfu_equivalence(cap, decay, interval):
    replay_both({"cache.capacity": cap, "cache.eviction": "lfu", "cache.frequency_decay": decay,
                 "cache.decay_interval": interval},
                RefLFU(cap, decay, interval), L=3, E=10, K=3, steps=150, seed=cap + 1)


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize("weighted", [True, False])
def test_score_equivalence(cap, weighted):
    replay_both({"cache.capacity": cap, "cache.eviction": "score", "cache.score_ema_alpha": 0.4},
                RefScore(cap, 0.4), L=3, E=10, K=3, steps=150, seed=cap + 2, weights=weighted)


@pytest.mark.parametrize("cap", CAPS)
def test_frequency_threshold_equivalence(cap):
    st = replay_both({"cache.capacity": cap, "cache.eviction": "frequency_threshold",
                      "cache.freq_threshold": 0.12, "cache.freq_window": 20},
                     RefFT(cap, 0.12, 20), L=3, E=10, K=3, steps=150, seed=cap + 3)
    assert st["streamed"] > 0          # the admission filter rejected some misses


@pytest.mark.parametrize("cap", CAPS)
def test_segmented_equivalence(cap):
    replay_both({"cache.capacity": cap, "cache.eviction": "lfu|lru", "cache.frequency_decay": 0.5,
                 "cache.decay_interval": 11},
                RefSegmented(cap, 0.5, 11), L=3, E=10, K=3, steps=150, seed=cap + 4)


@pytest.mark.parametrize("cap", [1, 3, 8, 13])
def test_arc_equivalence(cap):
    replay_both({"cache.capacity": cap, "cache.eviction": "arc"}, RefARC(cap),
                L=3, E=12, K=1, steps=400, seed=cap + 5)


@pytest.mark.parametrize("cap", [1, 3, 8, 13, 20])
def test_s3fifo_equivalence(cap):
    replay_both({"cache.capacity": cap, "cache.eviction": "s3fifo"}, RefS3FIFO(cap),
                L=3, E=12, K=1, steps=400, seed=cap + 6)


@pytest.mark.parametrize("cap", [1, 3, 8, 13])
def test_lfru_equivalence(cap):
    replay_both({"cache.capacity": cap, "cache.eviction": "lfru", "cache.frequency_decay": 0.5,
                 "cache.decay_interval": 9},
                RefLFRU(cap, 0.5, 9), L=3, E=12, K=1, steps=400, seed=cap + 7)


@pytest.mark.parametrize("rule", ["arc", "s3fifo", "lfru"])
def test_published_rules_never_evict_keys_in_use(rule):
    """With top-k dispatches the published rules must respect in-use protection too."""
    rt = runtime_for({"cache.capacity": 4, "cache.eviction": rule}, L=3, E=10, K=3)
    for layer, experts, w in zip_trace(300):
        plan = rt.dispatch(layer, experts, w)
        inuse = {(layer, e) for e in experts}
        assert not any(k in inuse for k, _ in plan.evicted)
        assert len(rt.resident()) <= 4


def zip_trace(steps):
    return zipf_trace(steps, 3, 10, 3, seed=42)
