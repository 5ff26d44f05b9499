"""Published replacement algorithms beyond the original: ARC, S3-FIFO, LFRU, and SpecMD's
Least-Stale (a reconstruction: the paper's method section was not available).

Each follows its paper for a cache that is kept full by demand loads; the adaptations to
this runtime (keys in use by the current dispatch cannot be evicted, triggers may free slots
while ghosts exist, one victim per load) are stated in each class docstring and in
docs/runtime.md.
"""

from __future__ import annotations

from collections import OrderedDict

from mpl.runtime.eviction_basic import Store


def _first_free(od: OrderedDict, exclude):
    """The first key of ``od`` (LRU end) that is not excluded, or None."""
    if not exclude:
        return next(iter(od), None)
    for k in od:
        if k not in exclude:
            return k
    return None


class ARC(Store):
    """Adaptive Replacement Cache — N. Megiddo, D. S. Modha, "ARC: A Self-Tuning, Low
    Overhead Replacement Cache", USENIX FAST 2003 (Fig. 4).

    ``t1``/``t2`` are the resident recency/frequency lists, ``b1``/``b2`` their ghosts, ``p``
    the adaptive target size of ``t1``. Adaptations: REPLACE skips keys in use (taking the
    next one of the chosen list, then the other list); REPLACE runs only when the cache is
    full (triggers can free slots while the ghosts are populated); a key removed by a trigger
    is forgotten (no ghost entry).
    """

    name = "arc"
    needs_miss = True

    def __init__(self, capacity: int, params=None):
        self.c = capacity
        self.capacity = capacity
        self.p = 0.0
        self.t1: OrderedDict = OrderedDict()
        self.t2: OrderedDict = OrderedDict()
        self.b1: OrderedDict = OrderedDict()
        self.b2: OrderedDict = OrderedDict()

    def __len__(self):
        return len(self.t1) + len(self.t2)

    def __contains__(self, key):
        return key in self.t1 or key in self.t2

    def resize(self, capacity):
        self.c = self.capacity = capacity
        self.p = min(self.p, float(capacity))
        while len(self.b1) + len(self.b2) > capacity:
            (self.b1 if self.b1 else self.b2).popitem(last=False)

    def hit(self, key, w):           # case I
        if key in self.t1:
            del self.t1[key]
        else:
            del self.t2[key]
        self.t2[key] = None

    def miss(self, key, w):
        """Cases II-IV prologue: adapt p (ghost hit) or trim the ghosts (new key)."""
        c = self.c
        b1, b2 = self.b1, self.b2
        if key in b1:
            d = 1.0 if len(b1) >= len(b2) else len(b2) / len(b1)
            self.p = min(float(c), self.p + d)
        elif key in b2:
            d = 1.0 if len(b2) >= len(b1) else len(b1) / len(b2)
            self.p = max(0.0, self.p - d)
        else:
            l1 = len(self.t1) + len(b1)
            if l1 >= c:
                if len(self.t1) < c and b1:
                    b1.popitem(last=False)
            elif l1 + len(self.t2) + len(b2) >= c and l1 + len(self.t2) + len(b2) >= 2 * c and b2:
                b2.popitem(last=False)

    def _replace(self, exclude, incoming):
        t1, t2 = self.t1, self.t2
        n1 = len(t1)
        if n1 and (n1 > self.p or (incoming is not None and incoming in self.b2 and n1 == self.p)):
            order = ((t1, self.b1), (t2, self.b2))
        else:
            order = ((t2, self.b2), (t1, self.b1))
        for t, b in order:
            v = _first_free(t, exclude)
            if v is not None:
                del t[v]
                b[v] = None
                return v
        return None

    def evict(self, exclude, incoming=None):
        if (incoming is not None and incoming not in self.b1 and incoming not in self.b2
                and len(self.t1) >= self.c):
            # case IV(A), |T1| = c: the LRU page of T1 leaves without a ghost entry
            v = _first_free(self.t1, exclude)
            if v is not None:
                del self.t1[v]
                return v
        return self._replace(exclude, incoming)

    def insert(self, key, w):
        if key in self.b1:
            del self.b1[key]
            self.t2[key] = None
        elif key in self.b2:
            del self.b2[key]
            self.t2[key] = None
        else:
            self.t1[key] = None

    def discard(self, key):
        self.t1.pop(key, None)
        self.t2.pop(key, None)

    def keys(self):
        return list(self.t1) + list(self.t2)


class S3FIFO(Store):
    """S3-FIFO — J. Yang, Y. Zhang, Z. Qiu, Y. Yue, K. V. Rashmi, "FIFO queues are all you
    need for cache eviction", SOSP 2023 (Algorithm 1).

    A small FIFO ``S`` (10% of the cache), a main FIFO ``M`` and a ghost FIFO ``G`` (as many
    entries as ``M``'s share); 2-bit frequencies capped at 3. A miss enters ``S`` (or ``M``
    when it is in ``G``). Eviction: while ``|S| >= 0.1 c`` the tail of ``S`` moves to ``M`` if
    its frequency is > 1, otherwise it leaves (into ``G``); else the tail of ``M`` is
    reinserted with frequency - 1 while its frequency is > 0, otherwise it leaves.
    Adaptations: one victim per load (moving a key into a full ``M`` during ``evictS``
    evicts from ``M`` and ends the eviction); a key in use is treated as if just accessed
    (moved on from ``S`` into ``M``, reinserted in ``M``) and a loop that only meets keys in
    use gives up (the miss is streamed).
    """

    name = "s3fifo"
    needs_miss = False

    def __init__(self, capacity: int, params=None):
        self.s: OrderedDict = OrderedDict()   # key -> None; first = tail (oldest)
        self.m: OrderedDict = OrderedDict()
        self.g: OrderedDict = OrderedDict()
        self.freq: dict = {}
        self.resize(capacity)

    def resize(self, capacity):
        self.capacity = capacity
        self.s_limit = 0.1 * capacity
        self.m_limit = capacity - self.s_limit
        self.g_cap = max(1, int(0.9 * capacity))
        while len(self.g) > self.g_cap:
            self.g.popitem(last=False)

    def __len__(self):
        return len(self.s) + len(self.m)

    def __contains__(self, key):
        return key in self.s or key in self.m

    def hit(self, key, w):
        f = self.freq[key]
        if f < 3:
            self.freq[key] = f + 1

    def insert(self, key, w):
        if key in self.g:
            del self.g[key]
            self.m[key] = None
        else:
            self.s[key] = None
        self.freq[key] = 0

    def discard(self, key):
        if self.freq.pop(key, None) is not None or key in self.s or key in self.m:
            self.s.pop(key, None)
            self.m.pop(key, None)

    def _ghost(self, key):
        self.g[key] = None
        if len(self.g) > self.g_cap:
            self.g.popitem(last=False)

    def _evict_m(self, exclude):
        m, freq = self.m, self.freq
        budget = 4 * len(m) + 1
        while m and budget:
            budget -= 1
            t = next(iter(m))
            del m[t]
            if exclude and t in exclude:
                m[t] = None
                continue
            f = freq[t]
            if f > 0:
                m[t] = None
                freq[t] = f - 1
            else:
                del freq[t]
                return t
        return None

    def _evict_s(self, exclude):
        s, freq = self.s, self.freq
        while s:
            t = next(iter(s))
            del s[t]
            if freq[t] > 1 or (exclude and t in exclude):
                self.m[t] = None
                if len(self.m) >= self.m_limit:
                    # "if M is full then evictM()" — that eviction is this load's victim
                    v = self._evict_m(exclude)
                    if v is not None:
                        return v
            else:
                del freq[t]
                self._ghost(t)
                return t
        return None

    def evict(self, exclude, incoming=None):
        v = None
        if len(self.s) >= self.s_limit:
            v = self._evict_s(exclude)
        if v is None:
            v = self._evict_m(exclude)
        if v is None and self.s:
            v = self._evict_s(exclude)
        return v

    def keys(self):
        return list(self.s) + list(self.m)


class LFRU(Store):
    """Least Frequently Recently Used — M. Bilal, S.-G. Kang, "A Cache Management Scheme
    for Efficient Content Eviction and Replication in Cache Networks", IEEE Access 5, 2017.

    The cache is split into a privileged partition (LRU, ``capacity - capacity // 3``
    slots) and an unprivileged partition (approximated LFU, the rest). A new key enters the
    unprivileged partition; a hit there promotes it to the privileged partition, whose LRU
    key is demoted back into the unprivileged one when the privileged partition is over its
    share. Victims are the least frequently used unprivileged keys (ties: least recent);
    when none is evictable, the LRU privileged key. Frequencies: +1 per access, new and
    demoted keys start at 1, multiplied by ``frequency_decay`` every ``decay_interval``
    accesses. The unprivileged victim is found by a scan of that (small) partition.
    """

    name = "lfru"
    needs_miss = True

    def __init__(self, capacity: int, params):
        self.priv: OrderedDict = OrderedDict()
        self.unpriv: dict = {}                 # key -> [freq, tick]
        self.tick = 0
        self.clock = 0
        self.decay = float(params["cache.frequency_decay"])
        self.interval = int(params["cache.decay_interval"])
        self.resize(capacity)

    def resize(self, capacity):
        self.capacity = capacity
        self.u_cap = capacity // 3
        self.p_cap = capacity - self.u_cap
        self._demote(None)

    def set_param(self, key, value):
        if key == "cache.frequency_decay":
            self.decay = float(value)
        elif key == "cache.decay_interval":
            self.interval = int(value)

    def __len__(self):
        return len(self.priv) + len(self.unpriv)

    def __contains__(self, key):
        return key in self.priv or key in self.unpriv

    def _clock(self):
        self.clock += 1
        if self.clock >= self.interval:
            self.clock = 0
            d = self.decay
            for ent in self.unpriv.values():
                ent[0] *= d

    def _demote(self, protect):
        while len(self.priv) > self.p_cap:
            v = _first_free(self.priv, (protect,) if protect is not None else None)
            if v is None:
                break
            del self.priv[v]
            self.tick += 1
            self.unpriv[v] = [1.0, self.tick]

    def hit(self, key, w):
        self.tick += 1
        if key in self.priv:
            self.priv.move_to_end(key)
        else:
            del self.unpriv[key]
            self.priv[key] = None
            self._demote(key)
        self._clock()

    def miss(self, key, w):
        self._clock()

    def insert(self, key, w):
        self.tick += 1
        if self.u_cap == 0:
            self.priv[key] = None
            self._demote(key)
        else:
            self.unpriv[key] = [1.0, self.tick]

    def discard(self, key):
        self.priv.pop(key, None)
        self.unpriv.pop(key, None)

    def evict(self, exclude, incoming=None):
        best = None
        best_k = None
        for key, ent in self.unpriv.items():
            if exclude and key in exclude:
                continue
            k = (ent[0], ent[1])
            if best_k is None or k < best_k:
                best, best_k = key, k
        if best is not None:
            del self.unpriv[best]
            return best
        v = _first_free(self.priv, exclude)
        if v is not None:
            del self.priv[v]
        return v

    def keys(self):
        u = sorted(self.unpriv, key=lambda k: tuple(self.unpriv[k]))
        return u + list(self.priv)


class LeastStale(Store):
    """Least-Stale — D. Hoang, A. Jaiswal, M. Samragh, M. Cho, "SpecMD: A Comprehensive Study
    On Speculative Expert Prefetching", arXiv:2602.03921, 2026. A *reconstruction*: the paper's
    method section was not available; this is the rule as its independent readers describe it.

    The resident keys sit in two FIFO queues, ``current`` (touched, loaded or prefetched in the
    ongoing step) and ``stale``. When a new step begins (``begin`` with a step other than the
    last one seen; the first ``begin`` is one), every current key is appended to stale's tail,
    in current's order. A hit on a stale key moves it to current's tail; a hit on a current key
    leaves it where it is (FIFO: the order is that of entry into the step). A load or a
    prefetch arrival (``insert``) enters current's tail. The victim is stale's first key not
    excluded, else current's first key not excluded; ``incoming`` plays no part. Keys inserted
    before the first ``begin`` (an eviction switch's migration) are current until it.
    """

    name = "least_stale"
    clocked = True
    __slots__ = ("stale", "current", "step", "capacity")

    def __init__(self, capacity: int, params=None):
        self.capacity = capacity
        self.stale: OrderedDict = OrderedDict()      # key -> None, oldest first
        self.current: OrderedDict = OrderedDict()
        self.step = None                             # the step of the last begin

    def __len__(self):
        return len(self.stale) + len(self.current)

    def __contains__(self, key):
        return key in self.stale or key in self.current

    def begin(self, step, layer):
        if step != self.step:                        # a new step (the first begin is one)
            self.step = step
            if self.current:
                self.stale.update(self.current)      # appended in current's order
                self.current = OrderedDict()

    def hit(self, key, w):
        if key in self.stale:
            del self.stale[key]
            self.current[key] = None

    def insert(self, key, w):
        self.current[key] = None

    def discard(self, key):
        self.stale.pop(key, None)
        self.current.pop(key, None)

    def evict(self, exclude, incoming=None):
        for q in (self.stale, self.current):
            v = _first_free(q, exclude)
            if v is not None:
                del q[v]
                return v
        return None

    def keys(self):
        return list(self.stale) + list(self.current)


PUBLISHED = {"arc": ARC, "s3fifo": S3FIFO, "lfru": LFRU, "least_stale": LeastStale}
