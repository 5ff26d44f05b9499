"""Memory tiers in the pure runtime (SPEC §12): :class:`TieredRuntime`, the base class of a
tiered policy's generated module. docs/runtime.md, "Memory tiers", says what it does and why.

It extends :class:`mpl.runtime.core.PureRuntime` rather than standing beside it: the top tier
of each set of tiers *is* the device cache of the pure runtime (a :class:`Cache` in the one
slot pool: hits, the schedule's loads, prefetches, triggers, the monitor, adapt rules and the
Plan's ``loads`` / ``evicted`` work on it unchanged), and the tiers below it are more caches
that the miss path (``_tmiss``, the runtime's ``_miss``), the eviction bookkeeping (``_gone``:
a key leaving the top tier is demoted) and the prefetcher (``_issue``) consult. A tiered
policy whose only tier below its device cache is host memory therefore makes exactly the
decisions of the same ``cache`` policy (``tests/test_runtime_tiers.py`` holds the Plans and
statistics equal).

The rules, in one place:

* an access is served by the fastest tier holding its key; gpu tiers hold a key at most once
  between them (a promotion or a demotion moves it), host caches keep what they hold when
  the key is loaded to the device (weights are read-only: a host copy is dropped, never
  written back, unless a demotion copies a key into a host cache that lost it);
* a key served from host memory (or read from disk into the host tier first) goes where the
  schedule says: computed on the CPU (``cpu_fallback``, ``hybrid``'s CPU side) with a
  background load, else loaded into the highest gpu tier its promotions reach (each
  ``promote(A -> B)`` on the way up must admit it: ``trigger_threshold``) that can take it;
  a key served from a lower gpu tier climbs the same way or is computed from that tier's
  copy (``Plan.where`` ``LOWER``, a SERVE step);
* a key evicted from a tier is demoted into the next cache tier below it (skipping tiers
  whose residency is ``always``), by its ``on demote`` mechanism; the last tier holds every
  expert, so a key demoted into it moves nothing;
* ``residency = always``: filled by the first keys promoted into it, never evicted from;
* a tier with a ``dtype_ladder`` (:mod:`mpl.runtime.ladder`) holds each key at one rung of
  it, within its size: what moves into it lands at the rung the ladder gives, the residents
  it pushes down a rung are REQUANT steps inside the tier, and every step, serve and count
  names the precision the key is held at.
"""

from __future__ import annotations

from collections import deque

from mpl.runtime.cache import Cache, SlotFreeList
from mpl.runtime.core import PureRuntime
from mpl.runtime.eviction import make_tier_store
from mpl.runtime.eviction_basic import LRU
from mpl.runtime.ladder import LadderCache
from mpl.runtime.plan import (BACKGROUND, CPU, DEMAND, DEMOTE, LEAVE, LOWER, PREFETCH, PROMOTE,
                              READ, REQUANT, SERVE, STREAM, Step)


class Fixed(LRU):
    """The store of a tier whose residency is ``always``: it admits keys while it has room
    and never gives a victim."""

    name = "always"

    def evict(self, exclude, incoming=None):
        return None


class TierStats:
    """What one tier did (``stats()["tiers"]``)."""

    __slots__ = ("hits", "approximate", "promotions", "demotions", "evictions", "reads",
                 "bytes_read", "requants", "at")

    def __init__(self):
        self.hits = self.approximate = self.promotions = self.demotions = 0
        self.evictions = self.reads = self.requants = 0
        self.bytes_read = 0.0
        self.at: dict = {}       # a ladder tier: dtype -> accesses it served at that rung


class LevelState:
    """One set of tiers at run time: its caches (None for the last tier), the device cache
    its layers dispatch to, and its statistics."""

    __slots__ = ("spec", "caches", "device", "stats", "clocked")

    def __init__(self, spec, caches, device):
        self.spec = spec
        self.caches = caches
        self.device = device
        self.stats = [TierStats() for _ in spec.tiers]
        # the caches whose store keeps a clock (the device cache's is the runtime's own; a
        # set without a gpu tier has none, and its first tier is clocked here)
        self.clocked = [c for c in caches if c is not None and c is not device and c.store.clocked]


class TieredRuntime(PureRuntime):
    """The pure runtime of a policy with memory tiers (see the module docstring)."""

    def __init__(self, lay, params: dict, features: dict, rules=()):
        super().__init__(lay, params, features, rules)
        t = lay.tiers
        self._layout = t
        self._stored_bits = t.stored_bits
        E = self.num_experts
        states = []
        for lv in t.levels:
            caches = []
            keys = len(lv.layers) * E * lv.split
            for spec in lv.tiers:
                if not spec.cache:
                    caches.append(None)
                    continue
                store = (Fixed(spec.slots) if spec.always else
                         make_tier_store(spec.eviction or "lru", spec.slots, self.p))
                pool = self.pool if (spec.index == 0 and spec.kind == "gpu") else \
                    SlotFreeList(min(spec.slots, keys))
                if spec.rungs is not None:
                    caches.append(LadderCache(spec.slots, store, pool,
                                              tuple(r.bits for r in spec.rungs), spec.budget,
                                              spec.always))
                else:
                    caches.append(Cache(spec.slots, store, pool, frozenset()))
            if lv.tiers[0].kind == "gpu":
                device = caches[0]
            else:                    # no gpu tier: no device cache (nothing is admitted)
                device = Cache(0, LRU(0), self.pool, frozenset())
            st = LevelState(lv, caches, device)
            for j, c in enumerate(caches):
                if type(c) is LadderCache:
                    c.note = self._requant_note(st, j)
            states.append(st)
        self._states = states
        self._level = [states[i] for i in t.level_of]
        self._split = [states[i].spec.split for i in t.level_of]
        self.caches = [st.device for st in self._level]
        self._tops = [st.device for st in states if st.spec.layers and st.device.capacity]
        self.capacity = lay.capacity
        self._steps: list = []
        self._fetched: set = set()      # keys read from the disk in this dispatch
        self._now = None                # (layer, experts) of the dispatch in progress
        self._now_inuse = None
        self._vacating = None           # (state, tier, key): a promotion's source slot
        self._link: dict = {}           # (bits, split) -> units moved over the host link
        self.approx = 0                 # accesses computed from a lower-precision copy
        self._approx_at: dict = {}      # ... of them, by the precision computed from
        self._window = int(params["cache.freq_window"])
        self._win = [None] * self.num_layers    # per layer: (deque of experts, counts)

    # ------------------------------------------------------------------ the dispatch
    def _tier_begin(self, layer, experts) -> list:
        """A dispatch of ``layer`` starts (the generated dispatch calls this before its
        accesses): its steps list, the lower tiers' clocks, the promotion thresholds'
        window (the dispatch's accesses enter it before its decisions)."""
        steps = self._steps = []
        self._fetched = set()
        self._now = (layer, experts)
        self._now_inuse = None
        st = self._level[layer]
        for c in st.clocked:
            c.store.begin(self.step, layer)
        if st.spec.thresholds:
            win = self._win[layer]
            if win is None:
                win = self._win[layer] = (deque(), {})
            q, counts = win
            for e in experts:
                q.append(e)
                counts[e] = counts.get(e, 0) + 1
                while len(q) > self._window:
                    old = q.popleft()
                    c = counts[old] - 1
                    if c:
                        counts[old] = c
                    else:
                        del counts[old]
        return steps

    def _share(self, key) -> float:
        """The key's expert's share of its layer's last freq_window accesses."""
        win = self._win[key[0]]
        if win is None or not win[0]:
            return 0.0
        return win[1].get(key[1], 0) / len(win[0])

    def _units(self, layer, e) -> tuple:
        n = self._split[layer]
        return ((layer, e),) if n == 1 else tuple((layer, e, p) for p in range(n))

    def _inuse(self, layer, experts) -> set:
        """The keys of a dispatch: its experts', or their parts' (granularity_split)."""
        n = self._split[layer]
        if n == 1:
            return {(layer, x) for x in experts}
        return {(layer, x, p) for x in experts for p in range(n)}

    def _busy(self):
        """The keys of the dispatch in progress (never a lower tier's victim either)."""
        if self._now is None:
            return frozenset()
        if self._now_inuse is None:
            self._now_inuse = self._inuse(*self._now)
        return self._now_inuse

    def _part_slots(self, res, layer, e):
        """Every part of the expert in the device cache: their slots; else None."""
        out = []
        for u in self._units(layer, e):
            s = res.get(u)
            if s is None:
                return None
            out.append(s)
        return tuple(out)

    def _part_hit(self, cache, layer, e, w) -> None:
        """A hit of every part: each refreshes the store; a prefetched part is useful."""
        pf = self._pf
        units = self._units(layer, e)
        for u in units:
            cache.store.hit(u, w)
            if pf and u in pf:
                del pf[u]
                self.prefetch_useful += 1
            self._touched(u)
        if type(cache) is LadderCache:
            self._rung_hit(cache, units)

    # ------------------------------------------------------------------ dtype ladders
    def _rung_hit(self, cache, units, slot=None) -> None:
        """A hit in a top tier with a dtype ladder (the generated dispatch calls this for
        whole experts: ``units`` one key and its ``slot``): counted at the key's rung (the
        lowest of its parts'); a unit below the first rung is computed from that copy, a
        SERVE step whose source and target are the top tier."""
        if type(cache) is not LadderCache:
            return
        if slot is not None:
            units = (units,)
        st = self._level[units[0][0]]
        rungs = st.spec.tiers[0].rungs
        ranks = cache.rung
        low = 0
        for u in units:
            r = ranks[u]
            if r:
                self._steps.append(Step(SERVE, u, 0, 0, cache.resident[u], None, rungs[r].dtype,
                                        None))
                if r > low:
                    low = r
        s = st.stats[0]
        rung = rungs[low]
        s.at[rung.dtype] = s.at.get(rung.dtype, 0) + 1
        if not rung.exact:
            s.approximate += 1
            self._approximate(rung.dtype)

    def _approximate(self, dtype) -> None:
        """One access computed from a copy at ``dtype``, below the checkpoint's precision."""
        self.approx += 1
        self._approx_at[dtype] = self._approx_at.get(dtype, 0) + 1

    def _requant_note(self, st, t):
        """What a ladder tier calls for each resident key it pushes one rung down: the
        REQUANT step (source and target the tier itself; dtype the new rung)."""
        cache = st.caches[t]
        rungs = st.spec.tiers[t].rungs
        stats = st.stats[t]
        steps = self

        def note(key, r):
            steps._steps.append(Step(REQUANT, key, t, t, cache.resident[key], None,
                                     rungs[r].dtype, None))
            stats.requants += 1
        return note

    def _held(self, st, t, u) -> tuple:
        """``(dtype, bits, one unit's bytes, exact)`` of ``u`` as tier ``t`` holds it: at its
        rung in a tier with a dtype ladder, else at the tier's precision."""
        spec = st.spec.tiers[t]
        if spec.rungs is not None:
            r = spec.rungs[st.caches[t].rung[u]]
            return r.dtype, r.bits, r.unit_bytes, r.exact
        return spec.dtype, spec.bits, spec.unit_bytes, spec.exact

    def _touched(self, u) -> None:
        """A device-cache hit of ``u`` refreshes its TTL stamp (as the dispatch's hit path)."""
        ttl = self._ttl
        if ttl is not None:
            ttl[u] = self._stamp()
            ttl.move_to_end(u)

    def _trim(self, cache, layer, experts, evicted) -> None:
        for key, slot in cache.set_capacity(cache.capacity, self._inuse(layer, experts)):
            self._gone(key, slot, evicted)

    def _distinct_caches(self):
        return self._tops

    def _flush(self, inuse, evicted) -> None:
        """``trigger flush``: as the pure runtime's, sparing a top tier whose residency is
        always (never evicted from)."""
        for c in self._tops:
            if isinstance(c.store, Fixed):
                continue
            for key in c.store.keys():
                if key not in inuse:
                    slot = c.remove(key)
                    self._gone(key, slot, evicted)

    def _used_bytes(self) -> float:
        out = 0.0
        for st in self._states:
            c = st.device
            if not c.capacity:
                continue
            top = st.spec.tiers[0]
            if type(c) is LadderCache:       # bit-units -> bytes
                out += c.used * top.rungs[0].unit_bytes / top.rungs[0].bits
            else:
                out += len(c.resident) * top.unit_bytes
        return out

    # ------------------------------------------------------------------ the miss path
    def _miss_for(self, mode):
        return {"gpu_only": self._tmiss_gpu, "cpu_fallback": self._tmiss_cpu,
                "hybrid": self._tmiss_hybrid}[mode]

    def _tmiss_gpu(self, cache, key, w, tokens, inuse, loads, evicted):
        return self._tmiss(cache, key, w, inuse, loads, evicted, False)

    def _tmiss_cpu(self, cache, key, w, tokens, inuse, loads, evicted):
        return self._tmiss(cache, key, w, inuse, loads, evicted, True)

    def _tmiss_hybrid(self, cache, key, w, tokens, inuse, loads, evicted):
        return self._tmiss(cache, key, w, inuse, loads, evicted, tokens < self._cpu_limit)

    def _tmiss(self, cache, key, w, inuse, loads, evicted, to_cpu):
        """An access the device cache does not hold whole: the tiers below serve it."""
        layer, e = key
        st = self._level[layer]
        lv = st.spec
        units = self._units(layer, e)
        res = cache.resident
        pf = self._pf
        src = []                  # per unit: the tier it is found in (-1: the device cache)
        for u in units:
            if u in res:          # (a part the device holds: a hit of that part)
                cache.store.hit(u, w)
                if pf and u in pf:
                    del pf[u]
                    self.prefetch_useful += 1
                self._touched(u)
                src.append(-1)
            else:
                src.append(self._find(st, u, w))
        served = max(src)
        st.stats[served].hits += 1
        if lv.tiers[served].rungs is not None:     # a ladder tier: at which rung it served
            ranks = st.caches[served].rung
            dt = lv.tiers[served].rungs[max(ranks[u] for j, u in enumerate(units)
                                            if src[j] == served)].dtype
            at = st.stats[served].at
            at[dt] = at.get(dt, 0) + 1
        disk = lv.disk
        if disk is not None and disk in src:
            for j, u in enumerate(units):
                if src[j] == disk:
                    self._read(st, u, w, inuse, DEMAND)
        g = lv.gpu
        if to_cpu and any(s >= g for s in src):
            # computed on the CPU from host memory; what is not on the device is loaded in
            # the background for later accesses
            self.cpu_computes += 1
            for j, u in enumerate(units):
                if src[j] >= g:
                    start = lv.read_into if src[j] == disk else src[j]
                    if self._promote(st, u, start, w, inuse, loads, evicted, BACKGROUND) == 0:
                        self.background_loads += 1
            return CPU
        places = []
        low = None                # (tier, bits, dtype): the lowest precision computed from
        for j, u in enumerate(units):
            s = src[j]
            if s == -1:
                places.append(res[u])
                t = 0
            else:
                start = lv.read_into if s == disk else s
                t = self._promote(st, u, start, w, inuse, loads, evicted, DEMAND)
                if t == 0:
                    self.demand_loads += 1
                    places.append(res[u])
                elif t is None and s < g:
                    t = s             # computed from the lower gpu tier holding it
                if t is None:          # a transient device buffer, from host memory
                    self.streamed += 1
                    self._moved(self._stored_bits, lv.split)
                    h = st.stats[self._host_tier(st, u)]
                    h.reads += 1
                    h.bytes_read += lv.tiers[lv.last_tier].unit_bytes if lv.disk is None else \
                        lv.tiers[lv.disk].unit_bytes
                    places.append(STREAM)
                    continue
                if t > 0:
                    self._steps.append(Step(SERVE, u, t, t, st.caches[t].resident[u], None,
                                            self._held(st, t, u)[0], None))
                    places.append(LOWER)
            dt, bits, _b, exact = self._held(st, t, u)
            if not exact and (low is None or bits < low[1]):
                low = (t, bits, dt)
        if low is not None:
            st.stats[low[0]].approximate += 1
            self._approximate(low[2])
        return places[0] if len(units) == 1 else tuple(places)

    def _find(self, st, u, w) -> int:
        """The fastest tier below the device cache holding ``u`` (the last when none does):
        the stores it passes see a miss, the one holding it a hit."""
        dev = st.device.store
        if dev.needs_miss:
            dev.miss(u, w)
        caches = st.caches
        last = st.spec.last_tier
        for t in range(1 if st.spec.gpu else 0, last):
            c = caches[t]
            if u in c.resident:
                c.store.hit(u, w)
                return t
            if c.store.needs_miss:
                c.store.miss(u, w)
        return last

    def _where_now(self, st, u) -> int:
        """:meth:`_find` without touching any store (a prefetch is not an access)."""
        caches = st.caches
        last = st.spec.last_tier
        for t in range(1 if st.spec.gpu else 0, last):
            if u in caches[t].resident:
                return t
        return last

    def _host_tier(self, st, u) -> int:
        """The tier a host-to-device copy of ``u`` reads: the host cache holding it, else
        the host tier a disk read went to, else the last tier (host memory)."""
        lv = st.spec
        for t in range(lv.gpu, lv.last_tier):
            if u in st.caches[t].resident:
                return t
        return lv.read_into if lv.disk is not None else lv.last_tier

    def _moved(self, bits: int, split: int, n: int = 1) -> None:
        """``n`` units of ``bits`` crossed the host link into the device."""
        k = (bits, split)
        self._link[k] = self._link.get(k, 0) + n

    def _copied(self, st, u, source, bits: int, nbytes: float) -> None:
        """``u`` copied into a gpu tier at ``bits`` (``nbytes`` a unit: the precision it
        lands at): from the gpu tier ``source`` (a device copy), or, with ``source`` None,
        from host memory over the link. The tier it was read from counts it."""
        if source is None:
            self._moved(bits, st.spec.split)
            source = self._host_tier(st, u)
        s = st.stats[source]
        s.reads += 1
        s.bytes_read += nbytes

    def _read(self, st, u, w, inuse, kind) -> None:
        """``u`` read from the disk into the host tier above it (whose eviction rule applies,
        and the ``promote(disk -> host)`` threshold), else into a transient host buffer."""
        lv = st.spec
        h, disk = lv.read_into, lv.disk
        slot, victim = -1, None
        dtype = lv.tiers[h].dtype
        thr = lv.promote[h]
        if thr is None or self._share(u) >= thr:
            r = self._admit(st, h, u, w, inuse)
            if r is not None:
                slot, victim = r
                st.stats[h].promotions += 1
                dtype = self._held(st, h, u)[0]
        self._steps.append(Step(READ, u, disk, h, slot, victim, dtype, kind))
        self._fetched.add(u)
        st.stats[disk].reads += 1
        st.stats[disk].bytes_read += lv.tiers[disk].unit_bytes

    def _host_copy(self, st, u, w, inuse, kind) -> None:
        """A full-precision copy of ``u`` is needed from host memory: read it from the disk
        when no host tier holds it."""
        lv = st.spec
        if lv.disk is not None and u not in st.caches[lv.read_into].resident \
                and u not in self._fetched:
            self._read(st, u, w, inuse, kind)

    def _promote(self, st, u, start, w, inuse, loads, evicted, kind):
        """Load ``u``, found in tier ``start``, into the highest gpu tier above it that its
        promotions reach and that takes it: that tier's index, or None."""
        lv = st.spec
        tiers = lv.tiers
        cands = []
        t = start - 1
        while t >= 0:
            thr = lv.promote[t]
            if thr is not None and self._share(u) < thr:
                break
            if tiers[t].kind == "gpu":
                cands.append(t)
            t -= 1
        from_gpu = start < lv.gpu
        src_bits = self._held(st, start, u)[1] if from_gpu else 0
        for t in reversed(cands):
            # the copy comes from the source tier when it holds the key at the target's
            # precision or better (a device copy), else from host memory (over the link); a
            # ladder tier's precision is the rung the key lands at: known once it is in
            ladder = tiers[t].rungs is not None
            device_copy = from_gpu and src_bits >= tiers[t].bits
            if not device_copy and not ladder:
                self._host_copy(st, u, w, inuse, kind)
            if t == 0:
                self._vacating = (st, start, u) if from_gpu else None
                slot = self._load(st.device, u, w, inuse, loads, evicted, kind)
                self._vacating = None
                if slot is None:
                    continue
                victim = loads[-1][2]
            else:
                r = self._admit(st, t, u, w, inuse)
                if r is None:
                    continue
                slot, victim = r
            dtype, bits, nbytes, _exact = self._held(st, t, u)
            if ladder:
                device_copy = from_gpu and src_bits >= bits
                if not device_copy:
                    self._host_copy(st, u, w, inuse, kind)
            st.stats[t].promotions += 1
            if from_gpu:            # gpu tiers hold a key once: it leaves its source
                src = st.caches[start]
                if u in src.resident:
                    src.remove(u)
            if from_gpu or t > 0 or ladder:
                self._steps.append(Step(PROMOTE, u, start, t, slot, victim, dtype, kind))
            self._copied(st, u, start if device_copy else None, bits, nbytes)
            return t
        return None

    def _admit(self, st, t, u, w, inuse):
        """Make ``u`` resident in the lower cache tier ``t``: ``(slot, victim)`` or None (its
        eviction rule does not admit it, or nothing can be evicted); the victim is demoted."""
        c = st.caches[t]
        store = c.store
        if store.filters and not store.admits(u):
            return None
        r = c.admit(u, w, inuse)
        if r is None:
            return None
        slot, victim = r
        if victim is not None:
            st.stats[t].evictions += 1
            self._demote(st, victim, t, inuse)
        if type(c) is LadderCache:     # a ladder evicts from its lowest rung, maybe several
            for v, vslot in c.also:
                st.stats[t].evictions += 1
                n = len(self._steps)
                self._demote(st, v, t, inuse)
                if len(self._steps) == n and t > 0:
                    # nothing moved (no cache tier below takes it): the Plan still says the
                    # key left, so the mechanism's copy of the tier's contents stays exact
                    self._steps.append(Step(LEAVE, v, t, t, vslot, None, None, None))
        return r

    def _demote(self, st, u, t, inuse) -> None:
        """``u`` left tier ``t``: into the next cache tier below (not one whose residency is
        always; the last tier holds every expert: nothing moves), by ``on demote``'s
        mechanism, when that tier takes it."""
        lv = st.spec
        d = t + 1
        last = lv.last_tier
        while d < last and lv.tiers[d].always:
            d += 1
        if d >= last:
            return
        c = st.caches[d]
        if u in c.resident:          # a host cache that kept its copy: nothing moves
            return
        vac = self._vacating
        if vac is not None and vac[0] is st and vac[1] == d and vac[2] in c.resident \
                and (len(c.resident) >= c.capacity or type(c) is LadderCache):
            # the key promoted out of this tier makes room for it (a ladder tier: always,
            # so that the victim lands at the highest rung the room gives)
            c.remove(vac[2])
            self._vacating = None
        r = self._admit(st, d, u, self.w_default, inuse)
        if r is None:
            return
        slot, victim = r
        op = REQUANT if d == t + 1 and lv.demote[t] == "in_place_requant" else DEMOTE
        dtype, _bits, nbytes, _exact = self._held(st, d, u)
        self._steps.append(Step(op, u, t, d, slot, victim, dtype, None))
        st.stats[d].demotions += 1
        st.stats[t].reads += 1
        st.stats[t].bytes_read += nbytes

    # ------------------------------------------------------------------ the device cache
    def _load(self, cache, key, w, inuse, loads, evicted, kind):
        """The pure runtime's load into the device cache; a ladder top tier may have evicted
        more than the victim whose slot the key takes: they leave too."""
        slot = super()._load(cache, key, w, inuse, loads, evicted, kind)
        if slot is not None and type(cache) is LadderCache:
            for v, s in cache.also:
                self._gone(v, s, evicted)
        return slot

    def _gone(self, key, slot, evicted) -> None:
        """A key left the device cache (a victim, a trigger, a cut): demoted below it."""
        super()._gone(key, slot, evicted)
        st = self._level[key[0]]
        st.stats[0].evictions += 1
        if st.spec.gpu:
            self._demote(st, key, 0, self._busy())

    def _issue(self, props, inuse, loads, evicted) -> None:
        """Prefetch proposals into the device cache (the top tier): as the pure runtime's,
        for every part of an expert; a proposal held by a lower gpu tier is promoted from it,
        one only on disk is read into the host tier first."""
        protect = None
        w = self.w_default
        pf = self._pf
        ttl = self._ttl
        n = 0
        for key in props:
            layer = key[0]
            st = self._level[layer]
            if not st.spec.gpu:
                continue             # no device cache to load into
            lv = st.spec
            cache = st.device
            for u in self._units(layer, key[1]):
                res = cache.resident
                if u in res:
                    continue
                if len(res) > cache.capacity:
                    continue        # over capacity (a deferred cut): no prefetch into it
                store = cache.store
                if store.filters and not store.admits(u):
                    continue
                top = lv.tiers[0]
                ladder = type(cache) is LadderCache
                if ladder:           # its rung is the ladder's to give (mpl.runtime.ladder)
                    if protect is None:
                        protect = inuse.union(*(self._units(k[0], k[1]) for k in props))
                    r = cache.admit(u, w, protect)
                    if r is None:
                        continue
                    slot, victim = r
                    if victim is not None:
                        self._gone(victim, slot, evicted)
                    for v, vs in cache.also:
                        self._gone(v, vs, evicted)
                    dtype, bits, nbytes, _exact = self._held(st, 0, u)
                else:
                    if len(res) >= cache.capacity or not cache.pool.free:
                        if protect is None:
                            protect = inuse.union(*(self._units(k[0], k[1]) for k in props))
                        victim = store.evict(protect, u)
                        if victim is None:
                            continue
                        slot = res.pop(victim)
                        self._gone(victim, slot, evicted)
                    else:
                        victim = None
                        slot = cache.pool.take()
                    dtype, bits, nbytes = top.dtype, top.bits, top.unit_bytes
                s = self._where_now(st, u)
                from_gpu = 0 < s < lv.gpu
                device_copy = from_gpu and self._held(st, s, u)[1] >= bits
                if not device_copy:  # (a disk read spares the round's keys too)
                    if protect is None:
                        protect = inuse.union(*(self._units(k[0], k[1]) for k in props))
                    self._host_copy(st, u, w, protect, PREFETCH)
                if not ladder:
                    res[u] = slot
                    store.insert(u, w)
                if ttl is not None:
                    ttl[u] = self._stamp()
                loads.append((u, slot, victim, PREFETCH))
                n += 1
                pf[u] = True
                st.stats[0].promotions += 1
                if from_gpu:
                    st.caches[s].remove(u)
                if from_gpu or ladder:
                    self._steps.append(Step(PROMOTE, u, s, 0, slot, victim, dtype, PREFETCH))
                self._copied(st, u, s if device_copy else None, bits, nbytes)
        self.prefetch_loads += n

    # ------------------------------------------------------------------ adapt, set
    def set_value(self, key, value, inuse, evicted) -> None:
        """An adapt action; one on a cache parameter has no effect here (a tiered policy has
        no cache block: MPL422), its value is only recorded."""
        if key.startswith("cache."):
            self.p[key] = value
            return
        super().set_value(key, value, inuse, evicted)

    def set(self, key, value) -> list:
        g = self._guard
        g.begin("a change")
        try:
            self._steps = []
            self._fetched = set()
            self._now = None
            evicted: list = []
            self.set_value(key, value, frozenset(), evicted)
            return evicted
        finally:
            g.end()

    # ------------------------------------------------------------------ reads
    def capacities(self) -> list:
        with self._guard.read():
            return [st.device.capacity for st in self._states if st.spec.layers]

    def _stats(self) -> dict:
        out = super()._stats()
        L = self.num_layers
        caps = [0] * L
        for c in self._tops:
            for k in c.resident:
                caps[k[0]] += 1
        for i in range(L):
            out["per_layer"][i]["capacity"] = caps[i]
        eb, stored = self.expert_bytes, self._stored_bits
        out["bytes_loaded"] = int(sum(n * eb * bits / stored / split
                                      for (bits, split), n in self._link.items()))
        rows = []
        approx = self.approx
        approx_at = dict(self._approx_at)
        for st in self._states:
            lv = st.spec
            if not lv.layers:
                continue             # a set of tiers no layer of this model uses
            top_hits = sum(self.l_hit[i] for i in lv.layers)
            for spec, s, c in zip(lv.tiers, st.stats, st.caches):
                hits, a = s.hits, s.approximate
                if spec.index == 0 and spec.kind == "gpu":
                    hits += top_hits
                    # (a ladder's hits are counted at their rungs as they happen)
                    if not spec.exact and spec.rungs is None:
                        a += top_hits
                        approx += top_hits
                        approx_at[spec.dtype] = approx_at.get(spec.dtype, 0) + top_hits
                ladder = {}
                if spec.rungs is not None:
                    ladder = {"dtype_ladder": [r.dtype for r in spec.rungs],
                              "served_at": {r.dtype: s.at.get(r.dtype, 0) for r in spec.rungs},
                              "resident_at": {r.dtype: sum(1 for x in c.rung.values() if x == i)
                                              for i, r in enumerate(spec.rungs)},
                              "requantized": s.requants}
                rows.append({
                    "set": lv.label, "tier": spec.name,
                    "location": spec.kind if spec.device is None else f"{spec.kind}:{spec.device}",
                    "dtype": spec.dtype, "capacity": spec.slots,
                    "resident": len(c.resident) if c is not None else None,
                    "hits": hits, "approximate": a, "promotions": s.promotions,
                    "demotions": s.demotions, "evictions": s.evictions, "reads": s.reads,
                    "bytes_read": int(s.bytes_read), **ladder})
        out["approximate_computes"] = approx
        out["approximate_by_dtype"] = approx_at
        out["tiers"] = rows
        return out
