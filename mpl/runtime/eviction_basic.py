"""The store protocol and the basic eviction rules (lru, lfu, score, frequency_threshold):
replacement structures over resident keys (no slots, no data movement). The rules by name,
and ``make_store``, are in :mod:`mpl.runtime.eviction`.

Every store implements the same small protocol, used by :class:`mpl.runtime.cache.Cache`:

* ``hit(key, w)`` — an access of a resident key (``w``: router weight);
* ``miss(key, w)`` — an access of a non-resident key, before any admission decision
  (only called when ``needs_miss`` is true: frequency windows, ARC's adaptation, decay clocks);
* ``admits(key)`` — admission filter (``frequency_threshold`` only; ``filters`` is true);
* ``evict(exclude, incoming=None)`` — choose a victim among the store's keys not in
  ``exclude``, remove it and return it; ``None`` when every key is excluded;
* ``insert(key, w)`` — a new resident key (a load or a prefetch arrival);
* ``discard(key)`` — forget a key removed from outside (trigger, flush);
* ``keys()`` — resident keys from coldest to hottest (used to migrate residents when an adapt
  rule switches the eviction rule: the new store admits them in this order);
* ``resize(capacity)`` — the cache's capacity changed (segment sizes follow);
* ``set_param(key, value)`` — an adaptable schema parameter changed;
* ``begin(step, layer)`` — a dispatch starts (only stores with ``clocked`` set use it: the
  MoE-aware rules of :mod:`mpl.runtime.eviction_moe`).

Each rule has a compiled twin (mpl/runtime/c/store_*.c) that makes the same decisions;
``tests/test_store_backends.py`` runs one behaviour suite on both.

Pinned keys never enter a store, so a store never proposes them. The basic rules (lru, lfu,
score) select victims in O(1) / O(log n) amortised: an ``OrderedDict`` for LRU and binary
heaps with lazy invalidation for LFU and score. Excluded keys (the dispatch's own, and a
prefetch round's proposals) met at the top of the heap are set aside and stay aside while
they are excluded: the next ``evict`` pushes back only those no longer excluded, so a
thrashing cache does not pop and push the same in-use entries for every victim.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from heapq import heapify, heappop, heappush


class Store:
    """Base class: the protocol with its default (no-op) hooks."""

    name = "?"
    needs_miss = False
    filters = False
    clocked = False      # begin(step, layer) before each dispatch's accesses (see below)

    def begin(self, step: int, layer: int) -> None:
        """A dispatch of ``layer`` in step ``step`` starts (called by the generated dispatch
        for the rules whose decisions depend on the step or the layer the forward pass is
        at: ``clocked``; a no-op for the others)."""

    def miss(self, key, w):  # pragma: no cover - overridden where needed
        pass

    def admits(self, key) -> bool:
        return True

    def resize(self, capacity: int) -> None:
        self.capacity = capacity

    def set_param(self, key: str, value) -> None:
        pass


class LRU(Store):
    """Least recently used. A prefetch arrival counts as an access (it is inserted MRU)."""

    name = "lru"
    __slots__ = ("od", "capacity")

    def __init__(self, capacity: int, params=None):
        self.od: OrderedDict = OrderedDict()
        self.capacity = capacity

    def __len__(self):
        return len(self.od)

    def __contains__(self, key):
        return key in self.od

    def hit(self, key, w):
        self.od.move_to_end(key)

    def insert(self, key, w):
        self.od[key] = None

    def discard(self, key):
        self.od.pop(key, None)

    def evict(self, exclude, incoming=None):
        od = self.od
        if not exclude:
            if od:
                return od.popitem(last=False)[0]
            return None
        for key in od:          # at most len(exclude) keys are skipped
            if key not in exclude:
                del od[key]
                return key
        return None

    def keys(self):
        return list(self.od)


class LFU(Store):
    """Least frequently used with periodic decay.

    +1 per access; a new key starts at 1; every ``decay_interval`` accesses to this cache
    (hits and misses) every frequency is multiplied by ``frequency_decay``; ties go to the
    least recently accessed key. Decay is a global rescaling, so it is applied lazily: the
    stored value is ``f / scale`` and an increment adds ``1 / scale`` (``inc``); the heap
    order is unchanged by a decay. Values are renormalised before they overflow.
    """

    name = "lfu"
    needs_miss = True
    __slots__ = ("cur", "heap", "aside", "inc", "tick", "clock", "decay", "interval", "capacity")

    def __init__(self, capacity: int, params):
        self.capacity = capacity
        self.cur: dict = {}          # key -> [stored_f, tick, key] (the live heap entry)
        self.heap: list = []
        self.aside: list = []        # live entries popped while excluded (see evict)
        self.inc = 1.0
        self.tick = 0
        self.clock = 0               # accesses since the last decay
        self.decay = float(params["cache.frequency_decay"])
        self.interval = int(params["cache.decay_interval"])

    def __len__(self):
        return len(self.cur)

    def __contains__(self, key):
        return key in self.cur

    def set_param(self, key, value):
        if key == "cache.frequency_decay":
            self.decay = float(value)
        elif key == "cache.decay_interval":
            self.interval = int(value)

    def _clock(self):
        self.clock += 1
        if self.clock >= self.interval:
            self.clock = 0
            self.inc /= self.decay
            if self.inc > 1e150:
                self._renormalise()

    def _renormalise(self):
        f = 1.0 / self.inc
        self.inc = 1.0
        self.heap = []
        self.aside = []
        for key, ent in self.cur.items():
            new = [ent[0] * f, ent[1], key]
            self.cur[key] = new
            self.heap.append(new)
        heapify(self.heap)

    def hit(self, key, w):
        self.tick += 1
        cur = self.cur
        old = cur[key]
        ent = [old[0] + self.inc, self.tick, key]
        old[2] = None                # invalidate the old heap entry
        cur[key] = ent
        heap = self.heap
        heappush(heap, ent)
        self.clock += 1              # the decay clock (see _clock), inlined
        if self.clock >= self.interval:
            self.clock = 0
            self.inc /= self.decay
            if self.inc > 1e150:
                self._renormalise()
        if len(heap) > 2 * len(cur) + 64:
            self._compact()

    def miss(self, key, w):
        self._clock()

    def insert(self, key, w):
        self.tick += 1
        ent = [self.inc, self.tick, key]
        self.cur[key] = ent
        heappush(self.heap, ent)

    def discard(self, key):
        ent = self.cur.pop(key, None)
        if ent is not None:
            ent[2] = None

    def _compact(self):
        self.heap = list(self.cur.values())    # every live entry, the aside ones included
        self.aside = []
        heapify(self.heap)

    def evict(self, exclude, incoming=None):
        heap = self.heap
        aside = self.aside
        if aside:
            # entries set aside by earlier calls: those still excluded stay aside (they
            # cannot be chosen now either), the others go back into the heap first
            keep = []
            for ent in aside:
                key = ent[2]
                if key is None:                  # went stale while aside
                    continue
                if exclude and key in exclude:
                    keep.append(ent)
                else:
                    heappush(heap, ent)
            self.aside = aside = keep
        if not exclude:
            exclude = ()
        while heap:
            ent = heappop(heap)
            key = ent[2]
            if key is None:          # stale entry
                continue
            if key in exclude:       # in use: set aside
                aside.append(ent)
                continue
            del self.cur[key]
            return key
        return None

    def frequency(self, key) -> float:
        """The key's current (decayed) frequency."""
        return self.cur[key][0] / self.inc

    def keys(self):
        return [e[2] for e in sorted(self.cur.values(), key=lambda e: (e[0], e[1]))]


class Score(Store):
    """Lowest exponential moving average of the router weight: ``s = a*w + (1-a)*s``; a new
    key starts at its weight (``1/top_k`` without weights); ties go to the least recent."""

    name = "score"
    __slots__ = ("cur", "heap", "aside", "tick", "alpha", "capacity")

    def __init__(self, capacity: int, params):
        self.capacity = capacity
        self.cur: dict = {}
        self.heap: list = []
        self.aside: list = []
        self.tick = 0
        self.alpha = float(params["cache.score_ema_alpha"])

    def __len__(self):
        return len(self.cur)

    def __contains__(self, key):
        return key in self.cur

    def set_param(self, key, value):
        if key == "cache.score_ema_alpha":
            self.alpha = float(value)

    def hit(self, key, w):
        self.tick += 1
        old = self.cur[key]
        a = self.alpha
        ent = [a * w + (1.0 - a) * old[0], self.tick, key]
        old[2] = None
        self.cur[key] = ent
        heappush(self.heap, ent)
        if len(self.heap) > 2 * len(self.cur) + 64:
            self._compact()

    def insert(self, key, w):
        self.tick += 1
        ent = [float(w), self.tick, key]
        self.cur[key] = ent
        heappush(self.heap, ent)

    discard = LFU.discard
    evict = LFU.evict
    _compact = LFU._compact

    def score(self, key) -> float:
        return self.cur[key][0]

    def keys(self):
        return [e[2] for e in sorted(self.cur.values(), key=lambda e: (e[0], e[1]))]


class FrequencyThreshold(Store):
    """Admission filter on recent share.

    Every access of layer L enters L's window of its last ``freq_window`` accesses. A missed
    key is admitted only if its share of that window (the current access included) is
    ``>= freq_threshold``; the victim is the resident key with the lowest share (ties: least
    recently accessed). Victim selection scans the residents (shares of every layer move with
    each access), which is acceptable here: it only runs on an admitted miss. The compiled
    store (store_ft.c) keeps one heap per layer instead, ordered by (count, last access),
    which within a layer is the order of (share, last access), and compares the layers' least.
    """

    name = "frequency_threshold"
    needs_miss = True
    filters = True
    __slots__ = ("windows", "counts", "last", "tick", "threshold", "window", "capacity")

    def __init__(self, capacity: int, params):
        self.capacity = capacity
        self.windows: dict = {}      # layer -> deque of experts
        self.counts: dict = {}       # layer -> {expert: count in window}
        self.last: dict = {}         # resident key -> last access tick
        self.tick = 0
        self.threshold = float(params["cache.freq_threshold"])
        self.window = int(params["cache.freq_window"])

    def __len__(self):
        return len(self.last)

    def __contains__(self, key):
        return key in self.last

    def set_param(self, key, value):
        if key == "cache.freq_threshold":
            self.threshold = float(value)
        elif key == "cache.freq_window":
            self.window = int(value)     # a shorter window drops its oldest entries as they come

    def _observe(self, key):
        layer, e = key[0], key[1]   # (a part of an expert: (layer, expert, part))
        win = self.windows.get(layer)
        if win is None:
            win = self.windows[layer] = deque()
            self.counts[layer] = {}
        cnt = self.counts[layer]
        win.append(e)
        cnt[e] = cnt.get(e, 0) + 1
        while len(win) > self.window:    # one entry, or more after freq_window shrank
            old = win.popleft()
            c = cnt[old] - 1
            if c:
                cnt[old] = c
            else:
                del cnt[old]

    def share(self, key) -> float:
        layer, e = key[0], key[1]   # (a part of an expert: (layer, expert, part))
        win = self.windows.get(layer)
        if not win:
            return 0.0
        return self.counts[layer].get(e, 0) / len(win)

    def hit(self, key, w):
        self._observe(key)
        self.tick += 1
        self.last[key] = self.tick

    def miss(self, key, w):
        self._observe(key)

    def admits(self, key):
        return self.share(key) >= self.threshold

    def insert(self, key, w):
        self.tick += 1
        self.last[key] = self.tick

    def discard(self, key):
        self.last.pop(key, None)

    def evict(self, exclude, incoming=None):
        best = None
        best_k = None
        for key, t in self.last.items():
            if exclude and key in exclude:
                continue
            k = (self.share(key), t)
            if best_k is None or k < best_k:
                best, best_k = key, k
        if best is not None:
            del self.last[best]
        return best

    def keys(self):
        return sorted(self.last, key=lambda k: (self.share(k), self.last[k]))


BASIC = {"lru": LRU, "lfu": LFU, "score": Score, "frequency_threshold": FrequencyThreshold}
