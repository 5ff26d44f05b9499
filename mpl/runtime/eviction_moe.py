"""Eviction rules of MoE serving engines, and a layer-aware rule for shared caches.

* :class:`CRF` (``crf``) and :class:`ClassLRU` (``classlru``): the two rules of llama.cpp's
  expert cache (``--moe-cache-mib``). Every key has a CRF (combined recency and frequency): at
  each step that uses the key, ``crf = crf * 2^(-(now - last) / H) + 1`` (``H`` =
  ``cache.crf_half_life`` steps, ``last`` = the step of the previous use); it is kept across
  evictions. ``crf`` evicts the resident with the lowest CRF decayed to now; ``classlru``
  gives each key the class ``min(7, floor(log2 CRF))`` at its use and evicts, among
  residents not used in the current step, the one with the largest ``age / 2^class``
  (``age`` = steps since its last use).
* :class:`VLLMLFRU` (``vllm_lfru``): the LFRU of vLLM's expert cache
  (``CachedWeightProvider``): per cache one clock that advances by one per access; a key's
  score is ``freq / (clock - last + 1)`` (``freq``: 1 on load, +1 per hit); the lowest score
  is evicted, ties to the earliest loaded.
* :class:`FarthestLayer` (``farthest_layer``): in a shared cache the forward pass visits the
  layers in order, so the resident needed last is the one of the layer the pass reaches last
  from where it is now (the current layer's other keys, then the previous layer's, ...):
  that layer's least recent key is evicted. A per-layer cache sees one layer: it is LRU.

These rules need to know the step (and the layer the pass is at): a store with ``clocked``
set gets ``begin(step, layer)`` before the accesses of every dispatch (the generated
dispatch calls it). Sources and the decisions where the engines' code is silent are in
docs/runtime.md ("Eviction rules of serving engines").
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from heapq import heapify, heappop, heappush

from mpl.runtime.eviction_basic import Store


#: classlru: the highest class
MAX_CLASS = 7


def _half_life(params) -> float:
    v = params["cache.crf_half_life"]
    return float(getattr(v, "n", v))


_FLOAT_MAX = sys.float_info.max


def _pow2(x: float) -> float:
    """2 ** x, an infinity where it overflows (as C's pow: the compiled stores agree)."""
    try:
        return 2.0 ** x
    except OverflowError:
        return math.inf


class _CRFTable:
    """Per key its CRF and the step of its last use; kept for every key ever used (bounded by
    layers x experts), resident or not."""

    __slots__ = ("crf", "last", "h")

    def __init__(self, half_life: float):
        self.crf: dict = {}
        self.last: dict = {}
        self.h = half_life

    def use(self, key, now: int) -> float:
        """A use of ``key`` at step ``now`` (at most one per step: a key is accessed once per
        dispatch, and a shared cache sees each layer once per step). -> the new CRF, saturated
        at the largest finite float (a step that went back far enough makes 2^x overflow: an
        infinite CRF would decay to NaN, inf * 0, and have no class)."""
        last = self.last.get(key)
        if last is None:
            c = 1.0
        elif last == now:
            return self.crf[key]
        else:
            c = self.crf[key] * _pow2((last - now) / self.h) + 1.0
            if c > _FLOAT_MAX:
                c = _FLOAT_MAX
        self.crf[key] = c
        self.last[key] = now
        return c

    def value(self, key, now: int) -> float:
        """The key's CRF decayed to step ``now`` (0 for a key never used)."""
        last = self.last.get(key)
        if last is None:
            return 0.0
        return self.crf[key] * _pow2(-(now - last) / self.h)


class CRF(Store):
    """llama.cpp's CRF eviction: the lowest decayed CRF among residents not in use; ties go to
    the least recently used, then the earliest loaded. A prefetch arrival is not a use (the
    CRF counts uses).

    Between two uses a key's CRF decays by the same factor as every other key's, so the order
    of ``log2(crf at last use) + last / H`` is the order of the decayed values: residents sit
    in a heap on that key (lazy invalidation, keys in use set aside as in LFU). The victim is
    then decided on the decayed values themselves, among the heap's front entries within
    1e-9 of the smallest key (float rounding cannot reorder keys farther apart), so the
    choice is exactly the lowest decayed CRF of the description. An entry is
    ``[g, last, seq, made, key]``: two live entries never tie on ``seq``; a key's stale
    entry can tie with its live one on ``(g, last, seq)`` (a step that went back, ``g``
    rounded), and ``made``, the entry's creation number, breaks that tie before the key
    (None in a stale entry) is compared."""

    name = "crf"
    clocked = True
    needs_miss = True
    __slots__ = ("table", "res", "heap", "aside", "now", "seq", "made", "capacity")

    def __init__(self, capacity: int, params):
        self.capacity = capacity
        self.table = _CRFTable(_half_life(params))
        self.res: dict = {}          # resident key -> its live heap entry [g, last, seq, made, key]
        self.heap: list = []
        self.aside: list = []
        self.now = 0
        self.seq = 0
        self.made = 0

    def __len__(self):
        return len(self.res)

    def __contains__(self, key):
        return key in self.res

    def set_param(self, key, value):
        if key == "cache.crf_half_life":
            self.table.h = float(getattr(value, "n", value))
            self._rebuild()

    def begin(self, step, layer):
        self.now = step

    def _entry(self, key, seq):
        t = self.table
        last = t.last.get(key)
        self.made += 1
        if last is None:
            return [float("-inf"), -1, seq, self.made, key]
        return [math.log2(t.crf[key]) + last / t.h, last, seq, self.made, key]

    def _push(self, key):
        old = self.res.get(key)
        seq = old[2] if old is not None else self.seq
        if old is not None:
            old[4] = None
        ent = self._entry(key, seq)
        self.res[key] = ent
        heappush(self.heap, ent)
        if len(self.heap) > 2 * len(self.res) + 64:
            self._rebuild()

    def _rebuild(self):
        self.heap = []
        self.aside = []
        for key, old in list(self.res.items()):
            ent = self._entry(key, old[2])
            self.res[key] = ent
            self.heap.append(ent)
        heapify(self.heap)

    def hit(self, key, w):
        if self.table.last.get(key) == self.now:
            return                   # a second use in a step changes neither CRF nor entry
        self.table.use(key, self.now)
        self._push(key)

    def miss(self, key, w):
        self.table.use(key, self.now)

    def insert(self, key, w):
        self.seq += 1
        ent = self._entry(key, self.seq)
        self.res[key] = ent
        heappush(self.heap, ent)

    def discard(self, key):
        ent = self.res.pop(key, None)
        if ent is not None:
            ent[4] = None

    def _order(self, key):
        t = self.table
        return (t.value(key, self.now), t.last.get(key, -1), self.res[key][2])

    def evict(self, exclude, incoming=None):
        heap = self.heap
        aside = self.aside
        if aside:
            keep = []
            for ent in aside:
                if ent[4] is None:
                    continue
                if exclude and ent[4] in exclude:
                    keep.append(ent)
                else:
                    heappush(heap, ent)
            self.aside = aside = keep
        window: list = []            # live, evictable front entries within 1e-9 of the first
        while heap:
            ent = heap[0]
            key = ent[4]
            if key is None:
                heappop(heap)
                continue
            if exclude and key in exclude:
                aside.append(heappop(heap))
                continue
            if window and ent[0] > window[0][0] + 1e-9:
                break
            window.append(heappop(heap))
        if not window:
            return None
        if len(window) == 1:
            best = window[0]
        else:
            best = min(window, key=lambda e: self._order(e[4]))
            for ent in window:
                if ent is not best:
                    heappush(heap, ent)
        key = best[4]
        del self.res[key]
        return key

    def keys(self):
        return sorted(self.res, key=self._order)


def _table_of(entries, key, h) -> _CRFTable:
    t = _CRFTable(float(h))
    for k, c, last in entries:
        kk = key(k)
        t.crf[kk] = c
        t.last[kk] = last
    return t


class ClassLRU(Store):
    """llama.cpp's ClassLRU: per class an LRU list of the residents whose class (at their last
    use) it is; the victim, among residents not used in the current step (and not in use),
    has the largest ``age / 2^class``: the oldest key of each class is a candidate, so a
    victim costs at most one look per class (plus the keys skipped at a list's head).
    Decisions: ties (equal ``age / 2^class``) go to the lower class; a key loaded without a
    use (a prefetch arrival) joins its class as of its last use (0 if never used) with the
    arrival step as its last use, so it is protected for the rest of that step."""

    name = "classlru"
    clocked = True
    needs_miss = True
    __slots__ = ("table", "lists", "cls", "stamp", "now", "capacity")

    def __init__(self, capacity: int, params):
        self.capacity = capacity
        self.table = _CRFTable(_half_life(params))
        self.lists = [OrderedDict() for _ in range(MAX_CLASS + 1)]   # class -> key -> None
        self.cls: dict = {}          # resident key -> its class
        self.stamp: dict = {}        # resident key -> the step of its last use (or arrival)
        self.now = 0

    def __len__(self):
        return len(self.cls)

    def __contains__(self, key):
        return key in self.cls

    def set_param(self, key, value):
        if key == "cache.crf_half_life":
            self.table.h = float(getattr(value, "n", value))

    def begin(self, step, layer):
        self.now = step

    @staticmethod
    def class_of(crf: float) -> int:
        if crf < 1.0:
            return 0
        c = math.frexp(crf)[1] - 1         # floor(log2 crf), exactly
        return c if c < MAX_CLASS else MAX_CLASS

    def _place(self, key, c):
        old = self.cls.get(key)
        if old is not None:
            del self.lists[old][key]
        self.cls[key] = c
        self.lists[c][key] = None
        self.stamp[key] = self.now

    def hit(self, key, w):
        self._place(key, self.class_of(self.table.use(key, self.now)))

    def miss(self, key, w):
        self.table.use(key, self.now)

    def insert(self, key, w):
        crf = self.table.crf.get(key)     # its CRF as of its last use (this step after a miss)
        self._place(key, 0 if crf is None else self.class_of(crf))

    def discard(self, key):
        c = self.cls.pop(key, None)
        if c is not None:
            del self.lists[c][key]
            del self.stamp[key]

    def _head(self, od, exclude):
        """The least recent key of one class that may be evicted (used before this step,
        not in use), or None."""
        now = self.now
        stamp = self.stamp
        for key in od:
            if stamp[key] >= now:
                return None          # this key and every later one were used this step
            if exclude and key in exclude:
                continue
            return key
        return None

    def evict(self, exclude, incoming=None):
        best = None
        best_age = 0
        best_c = 0
        now = self.now
        for c, od in enumerate(self.lists):
            if not od:
                continue
            key = self._head(od, exclude)
            if key is None:
                continue
            age = now - self.stamp[key]
            # age / 2^c > best_age / 2^best_c, in integers
            if best is None or age << best_c > best_age << c:
                best, best_age, best_c = key, age, c
        if best is not None:
            del self.lists[best_c][best]
            del self.cls[best]
            del self.stamp[best]
        return best

    def keys(self):
        now = self.now
        return sorted(self.cls, key=lambda k: (-(now - self.stamp[k]) / (1 << self.cls[k]),
                                               self.cls[k]))


class VLLMLFRU(Store):
    """vLLM's expert-cache LFRU (``CachedWeightProvider``): one clock per cache, +1 per access
    (a hit, or a load when the key is inserted); ``score = freq / (clock - last + 1)``; the
    lowest score among residents not in use is evicted, ties to the earliest loaded (vLLM
    scans its dict, which keeps load order). A prefetch arrival is a load (freq 1)."""

    name = "vllm_lfru"
    __slots__ = ("ent", "clock", "capacity")

    def __init__(self, capacity: int, params=None):
        self.capacity = capacity
        self.ent: dict = {}          # key -> [freq, last]; insertion order = load order
        self.clock = 0

    def __len__(self):
        return len(self.ent)

    def __contains__(self, key):
        return key in self.ent

    def hit(self, key, w):
        self.clock += 1
        e = self.ent[key]
        e[0] += 1
        e[1] = self.clock

    def insert(self, key, w):
        self.clock += 1
        self.ent[key] = [1, self.clock]

    def discard(self, key):
        self.ent.pop(key, None)

    def evict(self, exclude, incoming=None):
        clock = self.clock
        best = None
        best_s = 0.0
        for key, (f, last) in self.ent.items():
            if exclude and key in exclude:
                continue
            s = f / (clock - last + 1)
            if best is None or s < best_s:
                best, best_s = key, s
        if best is not None:
            del self.ent[best]
        return best

    def keys(self):
        clock = self.clock
        order = {k: i for i, k in enumerate(self.ent)}
        return sorted(self.ent, key=lambda k: (self.ent[k][0] / (clock - self.ent[k][1] + 1),
                                               order[k]))


class FarthestLayer(Store):
    """Layer-aware eviction: per layer an LRU list; from the layer ``cur`` the pass is at, the
    layers are needed again in the order cur+1, cur+2, ..., (wrapping) ..., cur, so the
    victim is the least recent evictable key of the first non-empty layer in the order cur,
    cur-1, ..., 0, then the highest layer down to cur+1. A victim costs one look per layer
    (plus the keys in use skipped)."""

    name = "farthest_layer"
    clocked = True
    __slots__ = ("by_layer", "n", "cur", "capacity")

    def __init__(self, capacity: int, params=None):
        self.capacity = capacity
        self.by_layer: dict = {}     # layer -> OrderedDict of its resident keys (LRU first)
        self.n = 0
        self.cur = 0

    def __len__(self):
        return self.n

    def __contains__(self, key):
        od = self.by_layer.get(key[0])
        return od is not None and key in od

    def begin(self, step, layer):
        self.cur = layer

    def hit(self, key, w):
        self.by_layer[key[0]].move_to_end(key)

    def insert(self, key, w):
        od = self.by_layer.get(key[0])
        if od is None:
            od = self.by_layer[key[0]] = OrderedDict()
        od[key] = None
        self.n += 1

    def discard(self, key):
        od = self.by_layer.get(key[0])
        if od is not None and key in od:
            del od[key]
            self.n -= 1

    def _layers(self):
        cur = self.cur
        return sorted((l for l, od in self.by_layer.items() if od),
                      key=lambda l: (l > cur, -l))

    def evict(self, exclude, incoming=None):
        by = self.by_layer
        od = by.get(self.cur)      # the usual case: the current layer has a spare key
        if od:
            for key in od:
                if exclude and key in exclude:
                    continue
                del od[key]
                self.n -= 1
                return key
        for layer in self._layers():
            od = by[layer]
            for key in od:
                if exclude and key in exclude:
                    continue
                del od[key]
                self.n -= 1
                return key
        return None

    def keys(self):
        out = []
        for layer in self._layers():
            out.extend(self.by_layer[layer])
        return out           # coldest (the next victim) first


MOE = {"crf": CRF, "classlru": ClassLRU, "vllm_lfru": VLLMLFRU, "farthest_layer": FarthestLayer}

