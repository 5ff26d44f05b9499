"""Windowed metrics over the last ``monitor.window`` accesses.

Per access the window holds whether it hit. The other events of a dispatch — loads,
evictions (its victims, prefetch victims, trigger evictions, capacity cuts), prefetch loads,
useful prefetches and reported stalls — are attributed to the dispatch's last access. Each
metric is O(1): running sums over a ring (hits) and a deque of event records.
"""

from __future__ import annotations

from collections import deque

METRIC_NAMES = ("hit_rate", "miss_rate", "eviction_rate", "prefetch_accuracy",
                "transfer_rate", "stall_ms")


class Monitor:
    __slots__ = ("window", "ring", "acc", "hits", "events", "ev", "ld", "pfl", "pfu",
                 "stall", "log_interval", "metrics", "log", "seen", "skipped")

    def __init__(self, window: int, log_interval: int, metrics=("hit_rate",)):
        self.window = window
        self.ring = bytearray(window)
        self.acc = 0                 # accesses pushed so far
        self.hits = 0                # hits in the window
        self.events: deque = deque()  # (access index, ev, ld, pfl, pfu, stall)
        self.ev = self.ld = self.pfl = self.pfu = 0
        self.stall = 0.0
        self.log_interval = log_interval
        self.metrics = tuple(metrics)
        self.log: list = []
        self.seen = [0, 0, 0, 0, 0.0]   # runtime totals at the last event record
        self.skipped = 0             # accesses before the window was last resized (set_window)

    def total(self) -> int:
        """Accesses pushed so far (``acc`` restarts when the window is resized)."""
        return self.acc + self.skipped

    def restart(self) -> None:
        """An empty window (the warm-up ended): what it held counts as skipped."""
        self.ring = bytearray(self.window)
        self.hits = 0
        self.events = deque()
        self.ev = self.ld = self.pfl = self.pfu = 0
        self.stall = 0.0
        self.skipped += self.acc
        self.acc = 0

    def set_window(self, window: int) -> None:
        """Resize the window in place (an adapt rule): it keeps the most recent accesses the
        new window can hold (all it knows when it grows: the metrics then cover those and
        widen as accesses come, up to the new length), with their events."""
        old = self.window
        keep = min(self.n, window)
        start = self.acc - keep
        ring = bytearray(window)
        for j in range(keep):
            ring[j] = self.ring[(start + j) % old]
        self.ring = ring
        self.window = window
        self.hits = sum(ring)
        self.skipped += start
        self.acc = keep
        # events in the new numbering; those of accesses no longer kept leave the window
        # (numbered <= 0 = acc - window when it shrank; growing, none is that old)
        self.events = deque((a - start, *rest) for a, *rest in self.events)
        self.expire()

    @property
    def n(self) -> int:
        return self.acc if self.acc < self.window else self.window

    def push(self, hit: bool) -> None:
        i = self.acc % self.window
        old = self.ring[i]
        h = 1 if hit else 0
        self.ring[i] = h
        self.hits += h - old
        self.acc += 1

    def push_events(self, ev, ld, pfl, pfu, stall) -> None:
        if ev or ld or pfl or pfu or stall:
            self.events.append((self.acc, ev, ld, pfl, pfu, stall))
            self.ev += ev
            self.ld += ld
            self.pfl += pfl
            self.pfu += pfu
            self.stall += stall
        self.expire()

    def expire(self) -> None:
        """Drop the event records that left the window."""
        lo = self.acc - self.window
        ev_q = self.events
        while ev_q and ev_q[0][0] <= lo:
            _, a, b, c, d, s = ev_q.popleft()
            self.ev -= a
            self.ld -= b
            self.pfl -= c
            self.pfu -= d
            self.stall -= s
        if not ev_q:
            self.stall = 0.0         # no float drift once the window is clear

    # ------------------------------------------------------------- metric values
    def hit_rate(self) -> float:
        n = self.n
        return self.hits / n if n else 0.0

    def miss_rate(self) -> float:
        n = self.n
        return 1.0 - self.hits / n if n else 0.0

    def eviction_rate(self) -> float:
        n = self.n
        return self.ev / n if n else 0.0

    def transfer_rate(self) -> float:
        n = self.n
        return self.ld / n if n else 0.0

    def prefetch_accuracy(self):
        """Useful / loaded prefetches in the window; None when none was loaded."""
        if self.pfl <= 0:
            return None
        return min(1.0, self.pfu / self.pfl)

    def stall_ms(self) -> float:
        return self.stall

    def value(self, name: str):
        return getattr(self, name)()

    def snapshot(self) -> dict:
        return {m: self.value(m) for m in METRIC_NAMES}
