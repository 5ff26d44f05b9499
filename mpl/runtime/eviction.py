"""The eviction rules by name: the one registry the runtime builds its stores from.

The rules live in four modules that import nothing of each other but the protocol:
:mod:`mpl.runtime.eviction_basic` (the ``Store`` protocol and the single-queue rules lru, lfu,
score, frequency_threshold), :mod:`mpl.runtime.eviction_published` (arc, s3fifo, lfru),
:mod:`mpl.runtime.eviction_moe` (the serving engines' rules crf, classlru, vllm_lfru and the
layer-aware farthest_layer) and :mod:`mpl.runtime.eviction_segmented` (a segmented pair
``a | b`` of single-queue rules). This module imports all four and is imported by none of
them, so the eviction modules form no cycle. ``make_store(rule, capacity, params)`` is what the runtime (and an adapt action that
switches the rule) calls.
"""

from __future__ import annotations

from types import MappingProxyType

from mpl.runtime.eviction_basic import BASIC, Store
from mpl.runtime.eviction_moe import MOE
from mpl.runtime.eviction_published import PUBLISHED
from mpl.runtime.eviction_segmented import SEGMENT_RULES, Segmented, segment_side_error

__all__ = ["RULES", "SEGMENT_RULES", "Store", "make_store", "segment_side_error"]

#: eviction rule name (as the IR spells it) -> its store class; ``"a|b"`` is a segmented pair
RULES = MappingProxyType({**BASIC, **PUBLISHED, **MOE})


def make_store(rule: str, capacity: int, params):
    """The store for an eviction rule as the IR spells it (``"lfu|lru"`` is segmented)."""
    if "|" in rule:
        a, b = (side.strip() for side in rule.split("|", 1))
        return Segmented(a, b, capacity, params)
    cls = RULES.get(rule)
    if cls is None:
        if rule == "belady":
            raise ValueError("eviction = belady is the offline optimum: it needs the future "
                             "and only runs in trace replay (mpl.sim.replay / mplc replay)")
        raise ValueError(f"unknown eviction rule {rule!r}")
    return cls(capacity, params)
