"""The eviction rules by name: the one registry the runtime builds its stores from.

The rules live in five modules that import nothing of each other but the protocol:
:mod:`mpl.runtime.eviction_basic` (the ``Store`` protocol and the single-queue rules lru, lfu,
score, frequency_threshold), :mod:`mpl.runtime.eviction_published` (arc, s3fifo, lfru,
least_stale),
:mod:`mpl.runtime.eviction_moe` (the serving engines' rules crf, classlru, vllm_lfru and the
layer-aware farthest_layer) and :mod:`mpl.runtime.eviction_segmented` (a segmented pair
``a | b`` of single-queue rules) and :mod:`mpl.runtime.eviction_weighted` (a memory tier's
``weighted_sum`` of single-queue rules). This module imports all five and is imported by none
of them, so the eviction modules form no cycle. ``make_store(rule, capacity, params)`` is what
the runtime (and an adapt action that switches the rule) calls; ``rule_error(rule)`` says why
a rule cannot be one (both backends refuse it with that message).
"""

from __future__ import annotations

from types import MappingProxyType

from mpl.runtime.eviction_basic import BASIC, Store
from mpl.runtime.eviction_moe import MOE
from mpl.runtime.eviction_published import PUBLISHED
from mpl.runtime.eviction_segmented import SEGMENT_RULES, Segmented, segment_side_error
from mpl.runtime.eviction_weighted import WeightedSum

__all__ = ["RULES", "SEGMENT_RULES", "Store", "make_store", "make_tier_store", "segment_side_error"]

#: eviction rule name (as the IR spells it) -> its store class; ``"a|b"`` is a segmented pair
RULES = MappingProxyType({**BASIC, **PUBLISHED, **MOE})


def rule_error(rule: str) -> str | None:
    """Why a runtime cannot have the eviction rule ``rule`` as the IR spells it (None: it can);
    both backends refuse it with this message (mpl.runtime.core.layout)."""
    if "|" in rule:
        a, b = (side.strip() for side in rule.split("|", 1))
        for side in (a, b):
            why = segment_side_error(f"{a}|{b}", side)
            if why is not None:
                return why
        return None
    if rule in RULES:
        return None
    if rule == "belady":
        return ("eviction = belady is the offline optimum: it needs the future and only runs "
                "in trace replay (mpl.sim.replay / mplc replay)")
    return f"unknown eviction rule {rule!r}"


def make_store(rule: str, capacity: int, params):
    """The store for an eviction rule as the IR spells it (``"lfu|lru"`` is segmented)."""
    why = rule_error(rule)
    if why is not None:
        raise ValueError(why)
    if "|" in rule:
        a, b = (side.strip() for side in rule.split("|", 1))
        return Segmented(a, b, capacity, params)
    return RULES[rule](capacity, params)


def make_tier_store(rule, capacity: int, params):
    """A memory tier's store: a rule name as :func:`make_store` takes it, or
    ``("weighted_sum", ((rule, weight), ...))`` (:mod:`mpl.runtime.eviction_weighted`)."""
    if isinstance(rule, tuple):
        return WeightedSum(rule[1], capacity, params)
    return make_store(rule, capacity, params)
