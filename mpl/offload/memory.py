"""The mechanism's memory as measured figures (``handle.get_stats()["memory"]``).

``pool_bytes`` is what the device slot pool's tensors take (``runtime.num_slots`` slots, the
transient STREAM entries and the zero entry), ``store_bytes`` what the host store holds: its
one host arena (the experts' weights copied in, each tensor aligned; mpl/mechanism/store.py),
or the experts' bytes where no arena is held. Both are allocated
at attach and sized from the runtime's capped slot count, so they never grow; the peaks are
still measured (at attach and at every ``get_stats``), not assumed. With low-precision gpu
tiers, ``lowprec_bytes`` is what their device areas take (allocated at attach too), and
``peak_bytes`` includes it. With ``granularity_split`` the pool is the part slots and the
transient entries of whole experts (mpl/mechanism/parts.py), both in ``pool_bytes``. A second
gpu tier at the checkpoint's precision: ``gpu_tier_bytes`` (its area, mpl/mechanism/gpu_tier.py).
"""

from __future__ import annotations


class MemoryMeter:
    """Current and peak bytes of a handle's slot pool and host store."""

    def __init__(self, pool, store, lowprec=(), parts=None, gpu_tiers=()) -> None:
        self.pool = pool
        self.parts = parts                  # a PartPool (granularity_split): pool memory too
        self.store = store
        self.lowprec = list(lowprec)        # LowPrecArea objects (device memory)
        self.gpu_tiers = list(gpu_tiers)    # FullArea objects (device memory)
        self.pool_peak = self.store_peak = self.lowprec_peak = self.gpu_tier_peak = 0
        self.sample()

    def sample(self) -> tuple[int, int]:
        p, s = int(self.pool.nbytes), int(self.store.arena_bytes or self.store.nbytes)
        if self.parts is not None:
            p += int(self.parts.nbytes)
        self.pool_peak = max(self.pool_peak, p)
        self.store_peak = max(self.store_peak, s)
        if self.lowprec:
            self.lowprec_peak = max(self.lowprec_peak, sum(a.nbytes for a in self.lowprec))
        if self.gpu_tiers:
            self.gpu_tier_peak = max(self.gpu_tier_peak, sum(a.nbytes for a in self.gpu_tiers))
        return p, s

    def stats(self) -> dict:
        p, s = self.sample()
        out = {"pool_bytes": p, "store_bytes": s, "pool_peak_bytes": self.pool_peak,
               "store_peak_bytes": self.store_peak,
               "peak_bytes": self.pool_peak + self.store_peak + self.lowprec_peak
               + self.gpu_tier_peak}
        if self.lowprec:
            out["lowprec_bytes"] = sum(a.nbytes for a in self.lowprec)
            out["lowprec_peak_bytes"] = self.lowprec_peak
        if self.gpu_tiers:
            out["gpu_tier_bytes"] = sum(a.nbytes for a in self.gpu_tiers)
            out["gpu_tier_peak_bytes"] = self.gpu_tier_peak
        return out
