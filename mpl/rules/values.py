"""Types and values (MPL2xx): one written value against its schema entry, checked by
:mod:`mpl.checker.values` and :mod:`mpl.checker.structure`.
"""

from __future__ import annotations

from mpl.rules.base import E, W, rule


RULES = (
    rule("MPL201", E, "value", "type mismatch", """
A value has the wrong type: a name where a number is expected, a fraction where an integer
is expected, a string where a name is expected, a single value where a list is expected. The
message says what the parameter takes; where the fix is mechanical (remove the quotes, wrap
in brackets, drop `.0`) it is offered.
""", """
policy fast {
    cache { capacity = 8.5 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL202", E, "value", "unknown enum value", """
A name is not one of the parameter's allowed values. The message suggests the closest one;
docs/MANUAL.md lists every value with what it does.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lruu
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lru
    }
}
"""),
    rule("MPL203", E, "value", "value out of range", """
A number is outside the parameter's range (for example a decay factor above 1 or a capacity
of 0). Every integer and real parameter has a range a real deployment can use, with its
reason in docs/MANUAL.md: windows are held in memory (at most 10^6 accesses, or 100,000
dispatches of a layer), intervals, TTLs and an adapt rule's `for N` duration count up to
10^9, `memory_budget_gb` stops at 100,000 GB (more memory than any device or host has) and
an expert at 1,000 GB. The same range holds for a value an adapt action or a conditional value sets, and
for a size unit the range is in the parameter's base unit (GB, ms). Where the range has a
closed bound the quick fix clamps the value to it.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
        frequency_decay = 1.5
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
        frequency_decay = 1
    }
}
"""),
    rule("MPL204", E, "value", "unknown or misplaced unit", """
A unit is unknown or does not fit the parameter: sizes (`GB`, `GiB`, `MB`, `MiB`) go with
capacities and `*_gb` parameters, times (`ms`, `us`) with `offload_threshold_ms` and
`stall_ms` conditions, counts (`accesses`, `steps`, `tokens`) with windows, `ttl` and rule
durations. Each parameter's units are listed in docs/MANUAL.md.
""", """
policy fast {
    cache {
        capacity = 8
        ttl = 500 ms
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        ttl = 500 steps
    }
}
"""),
    rule("MPL205", E, "value", "unknown metric", """
A condition (of a rule or a conditional value) names a metric that does not exist, so it
cannot be evaluated. Known metrics: hit_rate, miss_rate, eviction_rate, prefetch_accuracy,
transfer_rate, stall_ms. (An unknown name in `monitor.metrics` only goes unrecorded: that is
the warning MPL407.)
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hitrate < 0.4 { eviction = lfu }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.4 { eviction = lfu }
    }
}
"""),
    rule("MPL206", E, "value", "conditional value not allowed", """
A conditional value `a : b when cond` is written for a parameter that cannot change at runtime
(the pin list, the overlap flag, the expert size). Only parameters that adapt rules may set
accept a conditional value; docs/MANUAL.md marks them "adaptable".
""", """
policy fast {
    cache {
        capacity = 8
        pin = [0] : [0, 1] when hit_rate < 0.5
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        pin = [0]
    }
}
"""),
    rule("MPL207", E, "value", "invalid adapt action", """
An adapt action is not valid: it sets a parameter that does not exist or cannot change at
runtime, names an unknown trigger (known: memory_pressure, ttl, flush), or rebalances by an
unknown allocation rule (known: uniform, entropy, frequency).
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.2 { trigger flushh }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.2 { trigger flush }
    }
}
"""),
    rule("MPL208", E, "value", "fallback not allowed", """
`a | b` (a segmented cache: `a` manages 2/3 of the slots and demotes its victims into `b`)
is only meaningful for `eviction`; no other parameter takes a fallback. Each side is a
single-queue rule: `lru`, `lfu`, `score` or `frequency_threshold`. `fallback` itself is
already the pair `lfu | lru`; `arc`, `s3fifo` and `lfru` are complete multi-queue policies of
their own (write them alone: `eviction = arc`); `belady` is the offline optimum over the whole
cache. None of them can be one side of a pair; the quick fix keeps the rule alone (or the
single side, for `belady`).
""", """
policy fast {
    cache { capacity = 8 }
    prefetch { strategy = history | affinity }
}
""", """
policy fast {
    cache { capacity = 8 }
    prefetch { strategy = history }
}
"""),
    rule("MPL209", W, "value", "duplicate list element", """
A list names the same element twice (an expert pinned twice, a metric listed twice). The
element counts once, as in the original, which accepted such lists; the quick fix removes
the duplicate.
""", """
policy fast {
    cache {
        capacity = 8
        pin = [1, 1]
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        pin = [1]
    }
}
"""),

    # ---- memory tiers
    rule("MPL210", E, "value", "invalid weighted_sum", """
`eviction = weighted_sum(RULE = WEIGHT, ...)` (in a hierarchy, a band or a tier) ranks the
victims by the weighted sum of the named rules' normalised ranks. It weighs at least two
single-queue rules (`lru`, `lfu`, `score`, `frequency_threshold`), each named once, with a
weight in (0, 1]; only the weights' ratios matter. An unknown rule or call name gets a
did-you-mean and its quick fix.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        eviction = weighted_sum(lru = 0.5, arc = 0.5)
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        eviction = weighted_sum(lru = 0.5, lfu = 0.5)
    }
}
"""),
    rule("MPL211", E, "value", "range runs backwards", """
A range `FIRST..LAST` includes both ends and runs upwards: its first number must not be
above its last. The quick fix swaps them.
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 7..0 { tier hot { location = gpu  capacity = 8 } }
    }
}
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..7 { tier hot { location = gpu  capacity = 8 } }
    }
}
"""),
    rule("MPL212", E, "value", "unknown transition", """
A transition is `on promote(LOWER -> UPPER)` (a key served from a tier is loaded into the
tier above) or `on demote(UPPER -> LOWER)` (a key evicted from a tier goes to the tier
below). The quick fix replaces a misspelt event.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promot(ram -> hot) { trigger_threshold = 0.5 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promote(ram -> hot) { trigger_threshold = 0.5 }
    }
}
"""),
    rule("MPL213", E, "value", "dtype ladder out of order", """
`dtype_ladder` lists precisions from the highest to the lowest, each lower than the one
before it (`[fp16, int8, int4]`): a tier keeps each expert at the highest one that fits.
Where the order alone is wrong, the quick fix sorts the ladder.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier warm { location = cpu  dtype_ladder = [fp16, fp32] }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier warm { location = cpu  dtype_ladder = [fp32, fp16] }
    }
}
"""),
)

