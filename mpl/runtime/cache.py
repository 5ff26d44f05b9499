"""The global slot pool and the caches that draw from it.

One :class:`SlotFreeList` of ``num_slots`` device slots serves every cache of a runtime (the
shared cache, or the per-layer caches), so the mechanism pre-allocates once. A
:class:`Cache` maps resident keys to slots, enforces its capacity and asks its eviction
store for victims. Pinned keys (``(layer, expert)``: the policy's ``pin`` ids in every layer,
and its per-layer pins; :func:`mpl.runtime.core.pinned_keys`) occupy slots of the cache they
belong to but never enter the store, so they are never chosen as victims.
"""

from __future__ import annotations


class SlotFreeList:
    """Free-list of device slot indices ``0 .. size-1`` (lowest index handed out first).

    It hands out slot *numbers* only (a runtime's ``pool``); the device tensors those numbers
    index belong to the mechanism (``mpl.mechanism.pool.SlotPool``)."""

    __slots__ = ("size", "free")

    def __init__(self, size: int):
        self.size = size
        self.free = list(range(size - 1, -1, -1))

    @property
    def used(self) -> int:
        return self.size - len(self.free)

    def take(self) -> int:
        if not self.free:
            raise RuntimeError("slot pool exhausted: the runtime sized it too small (a bug)")
        return self.free.pop()

    def give(self, slot: int) -> None:
        self.free.append(slot)


class Cache:
    """One cache: ``capacity`` slots, a resident map key -> slot, and an eviction store."""

    __slots__ = ("capacity", "resident", "store", "pool", "pins", "layer")

    def __init__(self, capacity: int, store, pool: SlotFreeList, pins: frozenset, layer=None):
        self.capacity = capacity
        self.resident: dict = {}
        self.store = store
        self.pool = pool
        self.pins = pins
        self.layer = layer

    def admit(self, key, w, exclude):
        """Make room for ``key`` and make it resident: ``(slot, victim)`` or ``None`` when
        no slot can be freed (every resident key is pinned or excluded)."""
        res = self.resident
        # full, or the pool is (per-layer caches holding pinned keys beyond their capacity
        # can use up the shared pool): make room inside this cache
        if len(res) >= self.capacity or not self.pool.free:
            victim = self.store.evict(exclude, key)
            if victim is None:
                return None
            slot = res.pop(victim)
        else:
            victim = None
            slot = self.pool.take()
        res[key] = slot
        if key not in self.pins:
            self.store.insert(key, w)
        return slot, victim

    def evict_one(self, exclude):
        """Evict the store's victim (for triggers): ``(key, slot)`` or ``None``."""
        v = self.store.evict(exclude)
        if v is None:
            return None
        slot = self.resident.pop(v)
        self.pool.give(slot)
        return v, slot

    def remove(self, key):
        """Evict a given unpinned key (TTL, flush): its slot."""
        slot = self.resident.pop(key)
        self.store.discard(key)
        self.pool.give(slot)
        return slot

    def set_capacity(self, capacity: int, exclude) -> list:
        """Change the capacity in place; a cut evicts victims down to it. -> evicted."""
        self.capacity = capacity
        self.store.resize(capacity)
        out = []
        while len(self.resident) > capacity:
            r = self.evict_one(exclude)
            if r is None:
                break
            out.append(r)
        return out

    def replace_store(self, store) -> None:
        """Switch the eviction rule without flushing: residents migrate cold -> hot."""
        for key in self.store.keys():
            store.insert(key, 0.0)
        self.store = store
