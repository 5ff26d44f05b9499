"""A memory tier with a ``dtype_ladder`` (SPEC §12): :class:`LadderCache`, the cache of such a
tier in the pure runtime (:mod:`mpl.runtime.tiers`). docs/runtime.md, "Memory tiers", states
the rule; in short:

* the tier has a size (its ``capacity``: a size, or slots at the ladder's first rung) and
  holds each key at one rung of its ladder (a precision); a unit at rung ``r`` costs
  ``cost[r]`` of the size (the rung's bits: exact integer accounting);
* a key that enters the tier enters at the **first rung**, and room is made for it **from
  the cold end**: walking the resident keys the dispatch does not use from the coldest to the
  hottest (the tier's eviction rule's order, ``store.keys()``), each is requantized one rung
  down, or, when it is at the lowest rung already, evicted (and demoted below the tier, as
  any victim); the walk stops as soon as the key fits at the first rung, and starts again
  from the coldest when one pass was not enough. A key therefore loses precision as it grows
  cold and leaves the tier only from the lowest rung: the hottest keys are at the highest
  precision, and the tier holds more keys than it would at the first rung alone;
* when the keys the dispatch uses fill so much of the tier that the key does not fit at the
  first rung even with every other key gone, it enters at the highest rung that fits then;
  when it fits at no rung, nothing changes and it is not admitted;
* a resident key's rung only goes down: it regains a higher one by leaving the tier and
  entering again (a requantization upwards needs the full copy again);
* a tier whose residency is ``always`` never changes what it holds: a key enters at the
  highest rung that fits in the room left, else not at all.

Nothing here moves data: the runtime turns each step down into a REQUANT step (source and
target the tier itself; :attr:`LadderCache.note`) and a key's rung into its steps' ``dtype``.
"""

from __future__ import annotations

from mpl.runtime.cache import Cache


class LadderCache(Cache):
    """A :class:`Cache` whose keys are held at rungs of a dtype ladder within a size
    (``budget``, in the units of ``cost``); ``capacity`` is the most keys it can hold (every
    one at the lowest rung). ``rung``: key -> its rung; ``used``: the size they take;
    ``also``: the victims of the last :meth:`admit` after the first, ``(key, slot)`` (their
    slots are back in the pool); ``note``: called with ``(key, rung)`` for each step down as
    it is made (the runtime's REQUANT step)."""

    __slots__ = ("cost", "budget", "used", "rung", "also", "fixed", "note")

    def __init__(self, capacity: int, store, pool, cost: tuple, budget: int, fixed: bool):
        super().__init__(capacity, store, pool, frozenset())
        self.cost = tuple(cost)
        self.budget = budget
        self.used = 0
        self.rung: dict = {}
        self.also: list = []
        self.fixed = fixed
        self.note = None

    def _fit(self, room: int):
        """The first rung a unit fits at in ``room`` (None: none)."""
        for r, c in enumerate(self.cost):
            if c <= room:
                return r
        return None

    def admit(self, key, w, exclude):
        """Make ``key`` resident (the rule in the module doc): ``(slot, victim)`` (``victim``
        the first key evicted, whose slot it takes; the others in :attr:`also`), or None when
        it fits at no rung (then nothing changed)."""
        cost = self.cost
        low = len(cost) - 1
        rung = self.rung
        res = self.resident
        self.also = []
        room = self.budget - self.used
        if room < cost[0] and not self.fixed:
            # what stays whatever happens: the keys the dispatch uses
            kept = sum(cost[rung[k]] for k in exclude if k in rung) if exclude else 0
            if self._fit(self.budget - kept) is None:
                return None
            store = self.store
            note = self.note
            gone = []
            while room < cost[0]:
                moved = False
                for k in store.keys():             # coldest first
                    if exclude and k in exclude:
                        continue
                    r = rung[k]
                    if r < low:
                        rung[k] = r + 1
                        room += cost[r] - cost[r + 1]
                        self.used -= cost[r] - cost[r + 1]
                        if note is not None:
                            note(k, r + 1)
                    else:
                        store.discard(k)
                        del rung[k]
                        room += cost[r]
                        self.used -= cost[r]
                        gone.append((k, res.pop(k)))
                    moved = True
                    if room >= cost[0]:
                        break
                if not moved:
                    break
            at = self._fit(room)
            if gone:
                victim, slot = gone[0]
                for k, s in gone[1:]:
                    self.pool.give(s)
                self.also = gone[1:]
            else:
                victim, slot = None, self.pool.take()
        else:
            at = self._fit(room)
            if at is None:                        # (a fixed tier's room is gone)
                return None
            victim, slot = None, self.pool.take()
        res[key] = slot
        rung[key] = at
        self.used += cost[at]
        self.store.insert(key, w)
        return slot, victim

    def evict_one(self, exclude):
        r = super().evict_one(exclude)
        if r is not None:
            self.used -= self.cost[self.rung.pop(r[0])]
        return r

    def remove(self, key):
        self.used -= self.cost[self.rung.pop(key)]
        return super().remove(key)
