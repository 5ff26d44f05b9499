"""The Plan: what one dispatch decided. The only thing the mechanism (offload/) and the
replayer (sim/) consume. Plain data, no logic.

Keys are ``(layer, expert)`` where ``layer`` is the MoE-layer ordinal ``0 .. num_layers-1``
(the mechanism maps model layer ids to ordinals). Slots are indices into one global pool of
``runtime.num_slots`` device slots shared by every cache of the runtime (a shared cache or
the per-layer caches), so the mechanism can pre-allocate the pool once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[int, int]

# Plan.where values other than a slot index
CPU = -1      # compute on the CPU from the host copy
STREAM = -2   # compute on the device from a transient buffer; not admitted

# Load.kind
DEMAND = "demand"          # needed now by this dispatch (compute waits for it)
BACKGROUND = "background"  # cpu_fallback / hybrid: computed on the CPU now, loaded for later
PREFETCH = "prefetch"      # proposed by the prefetcher for a later layer


@dataclass(slots=True)
class Load:
    key: Key
    slot: int
    victim: Key | None      # the key that occupied ``slot`` and leaves the device, if any
    kind: str               # DEMAND | BACKGROUND | PREFETCH


@dataclass(slots=True)
class Plan:
    step: int
    layer: int
    experts: list[int]                # distinct experts of the dispatch, in router order
    where: list[int]                  # per expert: slot >= 0, CPU or STREAM
    hit: list[bool]                   # per expert: resident when the dispatch started
    loads: list[Load] = field(default_factory=list)     # transfers to issue, in order
    evicted: list[tuple[Key, int]] = field(default_factory=list)
    # ^ every (key, slot) that left the device during this dispatch, in order: victims of
    #   loads, trigger evictions, capacity cuts by adapt/rebalance. A load's victim appears
    #   here too. Demotions inside a segmented cache move no data and do not appear.

    def slot_of(self, expert: int) -> int:
        return self.where[self.experts.index(expert)]
