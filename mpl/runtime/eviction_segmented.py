"""The segmented ``a | b`` cache (``fallback`` = ``lfu | lru``).

Segment ``a`` manages ``capacity - capacity // 3`` slots (2/3, rounded up), segment ``b`` the
rest. A new key enters ``a``; when ``a`` is over its share its victim is *demoted* into ``b``
(no transfer: the weights stay in their slot). A hit in ``b`` promotes the key back into ``a``.
Only ``b``'s victims leave the device; when ``b`` has no evictable key (empty, or every key
in use) the victim is taken from ``a`` directly. Each side is a single-queue rule
(:data:`SEGMENT_RULES`); anything else is a ValueError naming it.
"""

from __future__ import annotations

from mpl.runtime.eviction_basic import BASIC, Store
from mpl.schema import param as _param


#: the rules one side of a segmented ``a | b`` can be: single-queue rules. ``fallback`` is
#: itself a pair, arc / s3fifo / lfru and the engines' rules (eviction_moe) are complete
#: policies with their own queues or tables and belady is the
#: offline optimum over the whole cache; the checker refuses them as a side (MPL208).
SEGMENT_RULES = tuple(BASIC)


def segment_side_error(rule: str, side: str) -> str | None:
    """Why ``side`` cannot be one side of the segmented eviction ``rule`` (None: it can)."""
    if side in BASIC:
        return None
    return (f"eviction {rule!r}: {side!r} cannot be one side of a segmented pair 'a | b'; "
            f"each side must be one of {', '.join(SEGMENT_RULES)} ({', '.join(_COMPLETE)} are "
            f"complete policies: use them alone)")


#: the rules that are whole policies of their own (the schema's eviction values that are
#: neither a side of a pair nor replay-only)
_COMPLETE = tuple(e.name for e in _param("cache.eviction").enum
                  if not e.segment and not e.replay_only)


def split(capacity: int) -> tuple[int, int]:
    """(a slots, b slots) for a segmented cache of ``capacity`` slots."""
    b = capacity // 3
    return capacity - b, b


class Segmented(Store):
    needs_miss = True

    def __init__(self, a: str, b: str, capacity: int, params):
        self.name = f"{a}|{b}"
        for side in (a, b):
            why = segment_side_error(self.name, side)
            if why is not None:
                raise ValueError(why)
        self.a = BASIC[a](capacity, params)
        self.b = BASIC[b](capacity, params)
        self.filters = self.a.filters
        self.capacity = capacity
        self.a_cap, self.b_cap = split(capacity)

    def __len__(self):
        return len(self.a) + len(self.b)

    def __contains__(self, key):
        return key in self.a or key in self.b

    def resize(self, capacity):
        self.capacity = capacity
        self.a_cap, self.b_cap = split(capacity)
        self._demote()

    def set_param(self, key, value):
        self.a.set_param(key, value)
        self.b.set_param(key, value)

    def _demote(self, protect=None):
        a, b = self.a, self.b
        while len(a) > self.a_cap:
            v = a.evict({protect} if protect is not None else None)
            if v is None:
                break
            b.insert(v, 0.0)

    def hit(self, key, w):
        if key in self.a:
            self.a.hit(key, w)
            return
        self.b.discard(key)          # promotion: b -> a (the access still counts in a)
        if self.a.needs_miss:
            self.a.miss(key, w)
        self.a.insert(key, w)
        self._demote(protect=key)

    def miss(self, key, w):
        if self.a.needs_miss:
            self.a.miss(key, w)

    def admits(self, key):
        return self.a.admits(key)

    def insert(self, key, w):
        self.a.insert(key, w)
        self._demote(protect=key)

    def discard(self, key):
        if key in self.a:
            self.a.discard(key)
        else:
            self.b.discard(key)

    def evict(self, exclude, incoming=None):
        v = self.b.evict(exclude)
        if v is None:
            v = self.a.evict(exclude)
        return v

    def keys(self):
        return self.b.keys() + self.a.keys()

    def segment_of(self, key) -> str | None:
        if key in self.a:
            return "a"
        if key in self.b:
            return "b"
        return None
