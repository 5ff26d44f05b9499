"""Cross-field rules (MPL3xx): two or more fields of one policy that must agree.

Each rule's check is the function below its explanation: a pure function of
:class:`~mpl.rules.base.Facts` (a policy's effective values) returning
:class:`~mpl.rules.base.Violation` objects naming the keys involved (the first is where the
problem is reported); :mod:`mpl.checker.policy` places them on the source and runs the same
checks on the values an adapt rule would produce (MPL306). The relations of
:data:`mpl.schema.RELATIONS` (pin count vs capacity, budget vs capacity, headroom vs
threshold, min vs max) are compared by :meth:`Facts.broken`; the rules here word them.

Where the original validator's 20 rules went: :data:`NOTE` (also in docs/diagnostics.md).
"""

from __future__ import annotations

from typing import Callable

from mpl import schema
from mpl.rules.base import LIVE, E, Facts, Violation, W, fmt_num, ok, rule, size_text


#: MPL306 explores the combinations of adapt values that firing sequences of three or more
#: rules reach, up to this many (the checker, the manual and the explanation below use it)
ADAPT_STATE_LIMIT = 256


#: the introduction of the cross-field section of docs/diagnostics.md
NOTE = """\
The original 1.3 validator had "20 semantic rules" (its README names the number, not the
list). Where they went here: per-value rules (capacity >= 1, every range, enum value, metric
and unit) are schema-driven checks MPL201-205; the rules that relate two fields are the codes
below: pinned experts vs capacity (MPL301; MPL506 with a model), prefetch budget vs capacity
(MPL302), hybrid needs overlap (MPL303), memory headroom vs threshold (MPL304), min vs max
capacity (MPL305), per-layer budget vs min_capacity (MPL309; MPL505 with a model), rebalance
and per_layer.* actions need per_layer (MPL308), replay-only eviction (MPL307), and every
adapt action checked against all of them (MPL306). One rule of the original is dropped on purpose: it refused
`capacity = 1` without a prefetcher, but any capacity >= 1 must work (the runtime streams what
does not fit)."""


def relation_check(code: str, low: str, message: Callable[..., str]) -> Callable[[Facts], list[Violation]]:
    """The check of the schema relation that bounds ``low``: ``code`` where it is broken,
    worded by ``message(facts, low_value, high_value)`` (each relation has one rule here)."""
    rel = next(r for r in schema.RELATIONS if r.low == low)

    def check(f: Facts) -> list[Violation]:
        broken = f.broken(rel)
        return [] if broken is None else [Violation(code, message(f, *broken), f.relation_keys(rel))]
    return check


MPL301 = rule("MPL301", E, "cross-field", "pinned experts fill the cache", """
Pinned experts occupy cache slots and are never evicted, so there must be at least as many
slots as pinned experts: in the cache (`capacity`), and with `per_layer` in every layer
(`min_capacity`). With a model (`--model`), MPL506 also counts the MoE layers of a shared
cache. Per-layer pins (`pin layers = FIRST..LAST { experts = [...] }`) are counted the same
way: in a layer's cache, that layer's pins (with those of `pin`); in a shared cache, the pins
of every layer the items name.
""", """
policy fast {
    cache {
        capacity = 2
        pin = [0, 1, 2]
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        pin = [0, 1, 2]
    }
}
""")


def _slots(n: int) -> str:
    return f"{n} slot" + ("" if n == 1 else "s")


_pins_in_cache = relation_check(
    "MPL301", "cache.pin", lambda f, n, cap: f"{n} pinned experts do not fit in a cache of {_slots(cap)}"
                                             f"{' per layer' if f.per_layer else ''}; raise capacity to "
                                             f"at least {n} or pin fewer experts")


def check_pins_fit(f: Facts) -> list[Violation]:
    """MPL301: the schema relation pin count <= capacity; with per_layer, also <= min_capacity
    (the smallest cache a layer may get)."""
    out = _pins_in_cache(f)
    pins, mn = f.get("cache.pin"), f.get("per_layer.min_capacity")
    if f.per_layer and ok(pins, mn) and len(pins) > mn:
        out.append(Violation("MPL301", f"{len(pins)} pinned experts do not fit in a layer of min_capacity "
                             f"{mn}{f.default_note('per_layer.min_capacity')}; raise min_capacity "
                             f"to at least {len(pins)} or pin fewer experts",
                             ("cache.pin", "per_layer.min_capacity")))
    return out


MPL302 = rule("MPL302", E, "cross-field", "prefetch budget exceeds capacity", """
A prefetcher proposes up to `budget` keys after each dispatch; with a budget above the cache
capacity, prefetched keys would evict each other before use. Set `budget` to at most the
capacity (the default budget is 4).
""", """
policy fast {
    cache { capacity = 2 }
    prefetch {
        strategy = history
        budget = 4
    }
}
""", """
policy fast {
    cache { capacity = 2 }
    prefetch {
        strategy = history
        budget = 2
    }
}
""")


#: MPL302: the schema relation prefetch.budget <= cache.capacity (while prefetching)
check_prefetch_budget = relation_check(
    "MPL302", "prefetch.budget",
    lambda f, budget, cap: f"prefetch budget {budget}{f.default_note('prefetch.budget')} exceeds the cache "
                           f"{f.cap_words(cap)}; set budget to at most {cap}")


MPL303 = rule("MPL303", E, "cross-field", "hybrid schedule needs overlap", """
The hybrid schedule computes some misses on the CPU while transfers proceed on a copy
stream; it cannot work with `overlap = false`.
""", """
policy fast {
    cache { capacity = 8 }
    schedule {
        mode = hybrid
        overlap = false
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    schedule {
        mode = hybrid
        overlap = true
    }
}
""")


def check_hybrid_overlap(f: Facts) -> list[Violation]:
    """MPL303: the hybrid schedule needs overlap."""
    mode, overlap = f.get("schedule.mode"), f.get("schedule.overlap")
    if ok(mode, overlap) and mode == "hybrid" and overlap is False:
        return [Violation("MPL303", "the hybrid schedule needs overlap = true (it overlaps transfers "
                          "with CPU compute); set overlap = true or use mode = cpu_fallback",
                          ("schedule.overlap", "schedule.mode"))]
    return []


MPL304 = rule("MPL304", E, "cross-field", "memory headroom above threshold", """
The memory-pressure trigger fires when resident bytes reach `memory_threshold` of the budget
and evicts down to `memory_headroom`. A headroom above the threshold would make it fire
without evicting anything (the default headroom is 0.7).
""", """
policy fast {
    cache {
        capacity = 8
        memory_threshold = 0.6
        memory_headroom = 0.8
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        memory_threshold = 0.6
        memory_headroom = 0.5
    }
}
""")


#: MPL304: the schema relation memory_headroom <= memory_threshold
check_memory_headroom = relation_check(
    "MPL304", "cache.memory_headroom",
    lambda f, head, thr: f"memory_headroom {fmt_num(head)}{f.default_note('cache.memory_headroom')} is above "
                         f"memory_threshold {fmt_num(thr)}: the trigger must evict down to a level below the "
                         f"one that fires it; set memory_headroom <= {fmt_num(thr)}")


MPL305 = rule("MPL305", E, "cross-field", "min_capacity above max_capacity", """
`per_layer.min_capacity` must not be above `per_layer.max_capacity`: no capacity would satisfy
both bounds.
""", """
policy fast {
    cache { capacity = 8 }
    per_layer {
        min_capacity = 8
        max_capacity = 4
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    per_layer {
        min_capacity = 4
        max_capacity = 16
    }
}
""")


#: MPL305: the schema relation per_layer.min_capacity <= per_layer.max_capacity
check_min_max_capacity = relation_check(
    "MPL305", "per_layer.min_capacity",
    lambda f, mn, mx: f"min_capacity {mn} is above max_capacity {mx}"
                      f"{f.default_note('per_layer.max_capacity')}; make min_capacity <= max_capacity")


MPL306 = rule("MPL306", E, "cross-field", "adapt action makes the policy invalid", """
Every `set` action of an adapt rule (and the alternative of every conditional value) is
checked at compile time against the rest of the policy, as if the rule had fired: an action
that would break a cross-field rule (for example a capacity below the number of pinned
experts, or a prefetch budget above the new capacity) is an error now rather than a failure
in the middle of inference. Because a fired rule's values stay in force, every ordered pair of
rules is checked too (the second one's actions applied after the first's), whatever their
conditions, and so are longer firing sequences: a cross-field rule over three parameters
(prefetch budget, strategy and capacity) can be broken by values three different rules set.
The combinations of values reachable by firing rules in any order are explored breadth first
(each through a shortest sequence), up to """ + str(ADAPT_STATE_LIMIT) + """ combinations, and a violation is reported once,
on the action of the last rule of the sequence, with the earlier rules' actions as notes.
""", """
policy fast {
    cache {
        capacity = 4
        pin = [0, 1]
    }
    adapt {
        when hit_rate < 0.3 { capacity = 1 }
    }
}
""", """
policy fast {
    cache {
        capacity = 4
        pin = [0, 1]
    }
    adapt {
        when hit_rate < 0.3 { capacity = 2 }
    }
}
""")


# MPL306 applies every check above to the values adapt rules produce: see
# mpl.checker.policy (it needs the rules' actions and their places in the source).


MPL307 = rule("MPL307", E, "cross-field", "replay-only value in a live policy", """
`eviction = belady` evicts the key used farthest in the future, which only a trace replay
knows. It is accepted by `mplc replay` and `analyze(..., purpose="replay")`, and refused when
the policy is compiled or attached to a live model.
""", """
policy oracle {
    cache {
        capacity = 8
        eviction = belady
    }
}
""", """
policy oracle {
    cache {
        capacity = 8
        eviction = lfu
    }
}
""")


def check_replay_only(f: Facts) -> list[Violation]:
    """MPL307: an eviction that needs the future, in a live policy."""
    ev = f.get("cache.eviction")
    if f.purpose != LIVE or not ok(ev) or not isinstance(ev, str):
        return []
    replay_only = [n for n in ev.split("|")
                   if (e := _EVICTION.enum_value(n)) is not None and e.replay_only]
    if not replay_only:
        return []
    return [Violation("MPL307", f"eviction '{replay_only[0]}' needs the future and only works in "
                      f"trace replay; use it with 'mplc replay' or choose lru, lfu, arc, ...",
                      ("cache.eviction",))]


_EVICTION = schema.PARAMS["cache.eviction"]


MPL308 = rule("MPL308", W, "cross-field", "per-layer action without per_layer", """
`rebalance NAME` re-splits the per-layer budget, and an action that sets a `per_layer`
parameter (`per_layer.allocation = entropy`, or `allocation = entropy`) changes how it is
split; a policy without a `per_layer` block has one shared cache, so there is nothing to
rebalance and such an action has no effect. The original accepts it, so this is a warning
and the action is left out; add a `per_layer` block (the default
`per_layer { allocation = uniform }` is enough) or remove the action (the quick fix).
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.3 { rebalance entropy }
        when stall_ms > 20 { per_layer.allocation = frequency }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    per_layer { allocation = uniform }
    adapt {
        when hit_rate < 0.3 { rebalance entropy }
        when stall_ms > 20 { per_layer.allocation = frequency }
    }
}
""")


# MPL308 is reported on the adapt actions themselves: see mpl.checker.policy.


MPL309 = rule("MPL309", E, "cross-field", "per-layer budget too small", """
The per-layer budget cannot give every layer its `min_capacity`: `total_budget` is below
`min_capacity`, or (without a `total_budget`) the per-layer default `capacity` is below
`min_capacity`. With a model (`--model`), MPL505 checks layers x min_capacity exactly.
""", """
policy fast {
    cache { eviction = lru }
    per_layer { total_budget = 1 }
}
""", """
policy fast {
    cache { eviction = lru }
    per_layer { total_budget = 64 }
}
""")


def check_per_layer_budget(f: Facts) -> list[Violation]:
    """MPL309: total_budget (or layers x capacity without one) below min_capacity."""
    if not f.per_layer:
        return []
    out = []
    written, total, mn = f.get("per_layer.total_budget"), f.total, f.get("per_layer.min_capacity")
    note = f.default_note("per_layer.min_capacity")
    if total is not None and ok(mn) and total < mn:
        shown = (f"{size_text(written.bytes)} ({total} slots)" if getattr(written, "bytes", None)
                 else f"{total}")
        out.append(Violation("MPL309", f"total_budget {shown} is below min_capacity {mn}{note}: not even one "
                             f"layer gets its minimum; raise total_budget or lower min_capacity",
                             ("per_layer.total_budget", "per_layer.min_capacity")))
    if written is None and f.cap is not None and ok(mn) and f.cap < mn:
        out.append(Violation("MPL309", f"the per-layer budget (layers x {f.cap_words()}) is below layers "
                             f"x min_capacity {mn}{note}; raise capacity to {mn}, lower min_capacity, or "
                             f"set total_budget",
                             ("cache.capacity", "per_layer.min_capacity", "per_layer.total_budget")))
    return out


#: the checks, in the order their violations are reported
CHECKS = (check_pins_fit, check_prefetch_budget, check_hybrid_overlap, check_memory_headroom,
          check_min_max_capacity, check_replay_only, check_per_layer_budget)


# ---- memory tiers: checked by mpl.checker.tiers over a policy's resolved tiers (they need
# the tiers' structure, not only the policy's values)

MPL320 = rule("MPL320", E, "cross-field", "transition skips or reverses tiers", """
A transition joins two adjacent tiers: `demote(A -> B)` moves a key from tier A to the tier
right below it, `promote(B -> A)` from tier B to the tier right above it. A transition that
goes the other way, skips a tier or joins a tier to itself is an error; the quick fix names
the other event, or the adjacent tier.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on demote(ram -> hot) { mechanism = copy }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promote(ram -> hot) { mechanism = copy }
    }
}
""")

MPL321 = rule("MPL321", E, "cross-field", "two disk tiers", """
The disk tier holds every expert (the checkpoint's files, or a folder written once), so a
hierarchy has at most one, and it is the last tier.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  capacity = 24GiB }
        tier ssd { location = disk }
        tier hdd { location = disk }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  capacity = 24GiB }
        tier ssd { location = disk }
    }
}
""")

MPL322 = rule("MPL322", E, "cross-field", "tiers out of order", """
Tiers are ordered as written, fastest first: `gpu` tiers, then `cpu` (host memory), then the
disk tier, which holds every expert and is the last.
""", """
policy tiers {
    hierarchy {
        tier ram { location = cpu  capacity = 24GiB }
        tier hot { location = gpu  capacity = 16 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  capacity = 24GiB }
    }
}
""")

MPL323 = rule("MPL323", E, "cross-field", "in_place_requant where it cannot work", """
`mechanism = in_place_requant` quantizes a key where it is, with no transfer: it is a
demotion between two tiers on one device (the same `location`), into a lower precision. A
promotion, two tiers on different devices, or a target tier that is not at a lower precision
need `mechanism = copy` (the quick fix).
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on demote(hot -> ram) { mechanism = in_place_requant }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on demote(hot -> ram) { mechanism = copy }
    }
}
""")

MPL324 = rule("MPL324", E, "cross-field", "bands overlap", """
Every layer is in at most one band of `per_layer_hierarchy`: two bands that share a layer
would give it two sets of tiers.
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..7 { tier hot { location = gpu  capacity = 4 } }
        band layers = 6..23 { tier hot { location = gpu  capacity = 8 } }
    }
}
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..7 { tier hot { location = gpu  capacity = 4 } }
        band layers = 8..23 { tier hot { location = gpu  capacity = 8 } }
    }
}
""")

MPL325 = rule("MPL325", E, "cross-field", "layers left out between bands", """
Without a `hierarchy` block every MoE layer needs a band, so layers between two bands would
have no tiers. (With a `hierarchy` block, the layers outside every band use its tiers.) With
a model (`--model`), MPL515 also checks the layers before the first band and after the last.
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..7 { tier hot { location = gpu  capacity = 4 } }
        band layers = 10..23 { tier hot { location = gpu  capacity = 8 } }
    }
}
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..9 { tier hot { location = gpu  capacity = 4 } }
        band layers = 10..23 { tier hot { location = gpu  capacity = 8 } }
    }
}
""")

MPL326 = rule("MPL326", E, "cross-field", "dtype and dtype_ladder disagree", """
A `dtype_ladder`'s first rung is the tier's precision: a tier that has both a `dtype` and a
ladder starting elsewhere holds its experts at two precisions. Remove `dtype`, or start the
ladder at it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  dtype = bf16  dtype_ladder = [fp32, fp16] }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  dtype_ladder = [fp32, fp16] }
    }
}
""")

MPL327 = rule("MPL327", E, "cross-field", "disk tier without a host tier", """
An expert on the disk tier is read into host memory first (whose eviction rule applies),
then served as from the cpu tier: a hierarchy with a disk tier needs a `cpu` tier, with a
capacity, above it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ssd { location = disk  path = "/models/experts" }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu  capacity = 24GiB }
        tier ssd { location = disk  path = "/models/experts" }
    }
}
""")

MPL328 = rule("MPL328", E, "cross-field", "prefetch budget exceeds the top tier", """
Prefetches load into the top tier of a hierarchy (each band's, with `per_layer_hierarchy`):
with a budget above its capacity, prefetched keys would evict each other before use (the
default budget is 4). The `cache` block's rule is MPL302.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 2 }
    }
    prefetch { strategy = history }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 2 }
    }
    prefetch {
        strategy = history
        budget = 2
    }
}
""")

MPL329 = rule("MPL329", E, "cross-field", "capacity and capacity_factor", """
`capacity` and `capacity_factor` are two ways to give the cache's size (slots or a size, or a
fraction of the experts it can hold): a cache has one of them. The quick fix removes the one
written last.
""", """
policy fast {
    cache {
        capacity = 16
        capacity_factor = 0.25
    }
}
""", """
policy fast {
    cache {
        capacity_factor = 0.25
    }
}
""")

MPL330 = rule("MPL330", E, "cross-field", "per-layer pins overlap", """
The `pin layers = FIRST..LAST { experts = [...] }` items of a cache give the experts pinned in
their layers; two items whose ranges share a layer would give it two lists. Write each layer in
one item (merge the lists, or split a range). Experts pinned in every layer go in `pin = [...]`.
""", """
policy profiled {
    cache {
        capacity = 64
        pin layers = 0..7 { experts = [3, 7] }
        pin layers = 6..9 { experts = [5] }
    }
}
""", """
policy profiled {
    cache {
        capacity = 64
        pin layers = 0..5 { experts = [3, 7] }
        pin layers = 6..9 { experts = [5] }
    }
}
""")

RULES = (MPL301, MPL302, MPL303, MPL304, MPL305, MPL306, MPL307, MPL308, MPL309,
         MPL320, MPL321, MPL322, MPL323, MPL324, MPL325, MPL326, MPL327, MPL328, MPL329, MPL330)
