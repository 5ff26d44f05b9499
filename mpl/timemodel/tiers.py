"""Simulated time of a tiered policy's Plans (SPEC §12): :class:`TieredTimeline`, the
:class:`~mpl.timemodel.timeline.Timeline` with two more resources and the Plan's tier steps.
Formulas in docs/simulation.md, "Memory tiers".

Resources, each with its clock: the compute stream, the copy stream (host to device), the
**disk** (reads one after another: ``latency + bytes / read bandwidth`` each) and the copy
stream's other direction (**device to host**: demotions copied from a gpu tier into a host
cache; they delay nothing on the way up). Per dispatch:

* disk reads (READ steps) start when the dispatch starts (a prefetch's when it ends), on the
  disk clock; the transfer of that key to the device waits for its read;
* moves inside device memory (a requantization in place, a copy between gpu tiers, a
  promotion copied from a gpu tier at the target's precision or better) run on the compute
  stream before the dispatch's experts: ``2 x bytes / memory bandwidth`` each;
* transfers over the link move the bytes of the precision they land at (a quantized copy is
  made once from the checkpoint and kept beside it in host memory);
* an expert is computed from the copy it is served from: ``launch + max(bytes / memory
  bandwidth, tokens x FLOPs / throughput)`` with that copy's bytes (an int4 copy reads a
  quarter of an fp16 one; the arithmetic is the same), on the CPU from host memory after its
  host copy is there.

A tier with a ``dtype_ladder`` holds each key at a rung: every step names it (``dtype``), and
the bytes moved, copied and computed from are that rung's (a step down inside the tier, a
REQUANT whose source and target are the tier, reads the rung above and writes the new one in
device memory; in host memory it costs nothing: the quantized copies are made once).

A dispatch with no tier step, of a set of tiers whose top tier holds the checkpoint's
precision in whole experts, is timed by the Timeline itself: a policy whose only tier below
the device cache is host memory is timed exactly as the same ``cache`` policy.
"""

from __future__ import annotations

from mpl.runtime.plan import (BACKGROUND, CPU, DEMAND, DEMOTE, LOWER, PREFETCH, PROMOTE, READ,
                              REQUANT, SERVE, STREAM)
from mpl.timemodel.timeline import Timeline, compute_end


class TieredTimeline(Timeline):
    """The timeline of a tiered policy: ``layout`` is its runtime's
    :class:`mpl.runtime.tier_layout.TierLayout` (``rt.tier_layout``)."""

    def __init__(self, costs, *, overlap: bool = True, layout):
        super().__init__(costs, overlap=overlap)
        self.layout = layout
        self.disk_free = 0.0         # disk clock
        self.d2h_free = 0.0          # device-to-host clock
        self.disk_ms = 0.0           # busy times
        self.d2h_ms = 0.0
        self.device_copy_ms = 0.0
        self.disk_reads = 0
        self.disk_bytes = 0.0
        self.host_ready: dict = {}   # key -> when its disk read lands in host memory
        self.held: dict = {}         # (set, tier, key) -> a unit's bytes in a ladder tier

    def _plain(self, lv, plan) -> bool:
        top = lv.tiers[0]
        return not plan.steps and lv.split == 1 and (top.exact or top.kind != "gpu")

    def dispatch(self, plan, tokens_of: dict | None = None, tokens: int = 1) -> float:
        lay = self.layout
        lv = lay.levels[lay.level_of[plan.layer]]
        if self._plain(lv, plan):
            return super().dispatch(plan, tokens_of, tokens)
        return self._tiered(lv, plan, tokens_of, tokens)

    # ---------------------------------------------------------------- the general path
    def _xfer(self, nbytes: float) -> float:
        p = self.c.profile
        return p.transfer_latency_us * 1e-3 + nbytes / (p.effective_link_gbps * 1e9) * 1e3

    def _read(self, at: float, nbytes: float) -> float:
        """A disk read issued at ``at``: when it lands."""
        start = at if at > self.disk_free else self.disk_free
        d = self.c.disk_read_ms(nbytes)
        self.disk_free = start + d
        self.disk_ms += d
        self.disk_reads += 1
        self.disk_bytes += nbytes
        return self.disk_free

    def _tiered(self, lv, plan, tokens_of, tokens) -> float:
        c = self.c
        tiers = lv.tiers
        top = tiers[0]
        dense = self._dense1 if tokens == 1 else c.dense_ms(tokens)
        t0 = self.now + dense
        arrival = self.arrival
        host = self.host_ready
        steps = plan.steps
        # disk reads needed now, device moves, copies back to host
        dev = 0.0
        device_copied = set()        # keys a promotion copies inside device memory
        serve = {}                   # key -> the bytes it is computed from (SERVE)
        landed = {}                  # key -> a unit's bytes as it lands in the top tier
        lower_loads = []             # (key, bytes, kind) transfers into a lower gpu tier
        held = self.held
        level = lv.index
        lay = self.layout
        for s in steps:
            op = s.op
            if s.key[0] not in lv.layers:
                # (a prefetch into another set of tiers, per_layer_hierarchy: its own tiers)
                other = lay.levels[lay.level_of[s.key[0]]]
                tiers, level = other.tiers, other.index
            else:
                tiers, level = lv.tiers, lv.index
            if op == READ:
                if s.kind != PREFETCH:
                    host[s.key] = self._read(t0, tiers[s.source].unit_bytes)
                if tiers[s.target].rungs is not None and s.slot >= 0:
                    held[(level, s.target, s.key)] = tiers[s.target].bytes_at(s.dtype)
            elif op == SERVE:
                serve[s.key] = tiers[s.source].bytes_at(s.dtype)
            elif op == PROMOTE:
                src, dst = tiers[s.source], tiers[s.target]
                nb = dst.bytes_at(s.dtype)
                sb = held.pop((level, s.source, s.key), src.unit_bytes)
                if dst.rungs is not None:
                    held[(level, s.target, s.key)] = nb
                if s.target == 0:
                    landed[s.key] = nb
                if src.kind == "gpu" and sb >= nb:
                    device_copied.add(s.key)
                    if s.kind != PREFETCH:
                        dev += c.device_copy_ms(sb + nb) / 2
                elif s.target > 0:
                    lower_loads.append((s.key, nb, s.kind))
            elif op in (DEMOTE, REQUANT):
                src, dst = tiers[s.source], tiers[s.target]
                nb = dst.bytes_at(s.dtype)
                if s.source == s.target:             # a step down a ladder, in place
                    sb = src.rungs[src.rung_of(s.dtype) - 1].unit_bytes
                else:
                    sb = held.pop((level, s.source, s.key), src.unit_bytes)
                if dst.rungs is not None:
                    held[(level, s.target, s.key)] = nb
                if src.kind == "gpu" and dst.kind == "gpu":
                    dev += c.device_copy_ms(sb + nb) / 2
                elif src.kind == "gpu":              # into a host cache: device to host
                    x = self._xfer(nb)
                    start = t0 if t0 > self.d2h_free else self.d2h_free
                    self.d2h_free = start + x
                    self.d2h_ms += x
        tiers, level = lv.tiers, lv.index
        self.device_copy_ms += dev
        ts = t0 + dev                # the compute stream after the device moves
        link = self.link_free
        nx = 0
        nbytes = 0.0
        xfer_ms = 0.0

        def transfer(key, b, at):
            nonlocal link, nx, nbytes, xfer_ms
            start = at if at > link else link
            h = host.get(key)
            if h is not None and h > start:
                start = h
            x = self._xfer(b)
            link = start + x
            nx += 1
            nbytes += b
            xfer_ms += x
            return link

        loaded = {}                  # key -> when its demand load lands
        top_bytes = top.unit_bytes
        for ld in plan.raw_loads:
            if ld[3] == DEMAND:
                loaded[ld[0]] = (ts if ld[0] in device_copied else
                                 transfer(ld[0], landed.get(ld[0], top_bytes), t0))
        for key, nb, kind in lower_loads:
            if kind == DEMAND:
                loaded[key] = transfer(key, nb, t0)
        n_parts = lv.split
        stored_unit = (tiers[lv.disk].unit_bytes if lv.disk is not None
                       else tiers[lv.last_tier].unit_bytes)
        early = 0.0
        late = None
        unsorted = False
        cpu_t = t0
        cpu_busy = 0.0
        layer = plan.layer
        n_late = 0
        arriving = False
        for e, where, was_hit in zip(plan.experts, plan.where, plan.hit):
            n = tokens_of.get(e, 1) if tokens_of else 1
            units = ((layer, e),) if n_parts == 1 else tuple((layer, e, p) for p in range(n_parts))
            if where == CPU:
                ready = t0
                for u in units:
                    h = host.get(u)
                    if h is not None and h > ready:
                        ready = h
                d = c.cpu_expert_ms(n)
                cpu_t = (ready if ready > cpu_t else cpu_t) + d
                cpu_busy += d
                continue
            places = where if type(where) is tuple else (where,)
            ready = ts
            b = 0.0
            for u, place in zip(units, places):
                if place == STREAM:
                    r = transfer(u, stored_unit, t0)
                    b += stored_unit
                elif place == LOWER:
                    r = loaded.get(u, ts)
                    b += serve.get(u, tiers[1].unit_bytes)
                else:
                    r = loaded.get(u)
                    if r is None:
                        r = arrival.get(u, ts) if arrival else ts
                        if was_hit and r > ts:
                            arriving = True
                    # (a ladder top tier: the rung it is held at, served or landed at)
                    b += serve.get(u) or landed.get(u) or top_bytes
                if r > ready:
                    ready = r
            if arriving:             # a hit still in flight: a late prefetch (SPEC §5)
                n_late += 1
                arriving = False
            comp = c.expert_ms_at(b, n)
            if ready <= ts:
                early += comp
            elif late is None:
                late = [(ready, comp)]
            else:
                if ready < late[-1][0]:
                    unsorted = True
                late.append((ready, comp))
        # background transfers start with the dispatch (the CPU computes meanwhile)
        for ld in plan.raw_loads:
            if ld[3] == BACKGROUND:
                arrival[ld[0]] = (ts if ld[0] in device_copied else
                                  transfer(ld[0], landed.get(ld[0], top_bytes), t0))
        for key, nb, kind in lower_loads:
            if kind == BACKGROUND:
                arrival[key] = transfer(key, nb, t0)
        t, busy = compute_end(ts, early, late, unsorted, self.overlap)
        stall = t - ts - busy
        end = t if t >= cpu_t else cpu_t
        if cpu_busy:
            self.cpu_wait_ms += end - t
            self.cpu_ms += cpu_busy
        self.gpu_ms += busy + dense + dev
        self.stall_ms += stall
        # prefetches when the dispatch ends: their disk reads, then their transfers
        for s in steps:
            if s.op == READ and s.kind == PREFETCH:
                of = lay.levels[lay.level_of[s.key[0]]]
                host[s.key] = self._read(end, of.tiers[s.source].unit_bytes)
        for ld in plan.raw_loads:
            if ld[3] == PREFETCH:
                arrival[ld[0]] = (end if ld[0] in device_copied else
                                  transfer(ld[0], landed.get(ld[0], top_bytes), end))
        for key, nb, kind in lower_loads:
            if kind == PREFETCH:
                arrival[key] = transfer(key, nb, end)
        for key, _slot in plan.evicted:
            arrival.pop(key, None)
        if len(arrival) > 4096:
            self.arrival = {k: v for k, v in arrival.items() if v > end}
        if len(host) > 4096:
            self.host_ready = {k: v for k, v in host.items() if v > end}
        self.link_free = link
        if n_late:
            self.count_late(layer, n_late)
        self.transfers += nx
        self.transfer_ms += xfer_ms
        self.bytes += int(nbytes)
        self.now = end
        return stall

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.update(disk_busy_ms=self.disk_ms, disk_reads=self.disk_reads,
                   disk_bytes=int(self.disk_bytes), d2h_busy_ms=self.d2h_ms,
                   device_copy_ms=self.device_copy_ms)
        return out
