"""Warnings no original rule gives (MPL4xx), checked by :mod:`mpl.checker.policy`,
:mod:`mpl.checker.values` and :mod:`mpl.checker.structure`.
"""

from __future__ import annotations

from mpl.rules.base import H, W, rule


RULES = (
    rule("MPL401", W, "warning", "parameter has no effect", """
A parameter has no effect under this configuration: it tunes a feature the policy does not
use (`frequency_decay` with `eviction = lru`, `lookahead` with `strategy = history`,
`offload_threshold_ms` outside the hybrid schedule, `memory_headroom` without a
`memory_threshold`, ...). An adapt rule that can switch the feature on counts as a use. The
quick fix removes the parameter.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lru
        frequency_decay = 0.9
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
        frequency_decay = 0.9
    }
}
"""),
    rule("MPL402", W, "warning", "condition can never hold", """
A condition can never hold because the metric never takes such values (rates lie in
[0, 1], `stall_ms` and `transfer_rate` are never negative), so the rule never fires.
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0 { eviction = lfu }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.3 { eviction = lfu }
    }
}
"""),
    rule("MPL403", W, "warning", "adapt rules fight over a parameter", """
Two adapt rules set the same parameter to different values and their conditions can hold at
the same time, so which value wins depends on firing order. Make the conditions exclusive or
let one rule set the parameter.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
    adapt {
        when hit_rate < 0.4 { eviction = lru }
        when hit_rate < 0.2 { eviction = arc }
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
    adapt {
        when hit_rate < 0.4 { eviction = lru }
        when hit_rate > 0.8 { eviction = lfu }
    }
}
"""),
    rule("MPL404", H, "warning", "deprecated alias", """
The adapt action uses a name of the original 1.3 language (`lfu_decay`, `prefetch_strategy`,
`prefetch_budget`, `schedule_mode`). It is still accepted; the quick fix writes the
parameter's current name.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
    adapt {
        when hit_rate < 0.4 { lfu_decay = 0.8 }
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
    adapt {
        when hit_rate < 0.4 { frequency_decay = 0.8 }
    }
}
"""),
    rule("MPL405", W, "warning", "condition always holds", """
A condition always holds (for example `hit_rate <= 1`), so the rule fires once at the start
and the conditional part is pointless. Set the value directly or fix the threshold.
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate <= 1 { eviction = lfu }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.5 { eviction = lfu }
    }
}
"""),
    rule("MPL406", W, "warning", "action sets the value already in force", """
An adapt action sets a parameter to the value it already has, and no other rule changes that
parameter, so firing the rule changes nothing.
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lru
    }
    adapt {
        when hit_rate < 0.4 { eviction = lru }
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lru
    }
    adapt {
        when hit_rate < 0.4 { eviction = lfu }
    }
}
"""),
    rule("MPL407", W, "warning", "unknown metric in monitor", """
`monitor.metrics` lists a name that is not one of the metrics this toolchain computes
(hit_rate, miss_rate, eviction_rate, prefetch_accuracy, transfer_rate, stall_ms). The original
recorded any name, so the file is accepted; the name is not recorded. When the name is close
to a known metric, the quick fix replaces it. (In a condition an unknown metric cannot be
evaluated and is the error MPL205.)
""", """
policy fast {
    cache { capacity = 8 }
    monitor { metrics = [hit_rate, latency] }
}
""", """
policy fast {
    cache { capacity = 8 }
    monitor { metrics = [hit_rate, stall_ms] }
}
"""),
    rule("MPL408", W, "warning", "adapt action has no effect", """
An adapt action sets a parameter that a running policy cannot change: `overlap` (the copy
stream is set up once, when the policy is attached, and a replay models the whole run with
one setting) or `expert_size_gb` (the size of an expert's weights is the model's). The
original accepts these actions, so this is a warning and the action is left out; set the
parameter in its block instead, or remove the action (the quick fix).
""", """
policy fast {
    cache { capacity = 8 }
    adapt {
        when hit_rate < 0.3 { overlap = false }
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    schedule { overlap = false }
}
"""),
    rule("MPL409", W, "warning", "capacity overridden by total_budget", """
With `per_layer`, `total_budget` decides every layer's capacity (split by `allocation`), so a
`cache.capacity` written beside it has no effect: it is neither the per-layer capacity nor
part of the total, whatever its value (a slot count or a size), and an adapt action setting
`capacity` changes nothing either. `capacity` is not needed when `total_budget` is given. The
quick fix removes `capacity`; to size each layer instead, remove `total_budget` (the total is
then layers x capacity).
""", """
policy fast {
    cache {
        capacity = 16
        eviction = lfu
    }
    per_layer { total_budget = 416 }
}
""", """
policy fast {
    cache { eviction = lfu }
    per_layer { total_budget = 416 }
}
"""),

    # ---- memory tiers (checked by mpl.checker.tiers)
    rule("MPL420", H, "warning", "tier below the checkpoint's precision", """
A tier holds experts at a lower precision than the checkpoint's (`int8`, `int4`, or with a
model whose checkpoint is fp32 any 16-bit type; a `dtype_ladder` with such a rung): what it
serves is computed from a weight-only quantized copy, approximately, and the statistics
count those accesses. SPEC §12 makes that an explicit trade: the policy still loads and runs,
and this hint, naming the tier, says so. Where the output must not change, promote to a tier
at the checkpoint's precision before computing (or use tiers at that precision only).
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier warm { location = gpu  dtype = int4  capacity = 64 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier warm { location = cpu  capacity = 64 }
    }
}
"""),
    rule("MPL421", W, "warning", "tier parameter has no effect", """
A parameter of a tier or a transition has no effect where it is: `path` on a tier that is not
on disk, `capacity` on the disk tier (it holds every expert), `eviction` on the last tier or
on a tier whose residency is `always` (nothing is evicted from them), `trigger_threshold` on
a demotion (it admits promoted keys). The quick fix removes it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16  path = "/models/x" }
        tier ram { location = cpu }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
    }
}
"""),
    rule("MPL422", W, "warning", "adapt action on a cache the policy does not have", """
An adapt action sets a `cache` parameter, but the policy has memory tiers (`hierarchy`,
`per_layer_hierarchy`) instead of a cache block, so it has no effect; tiers are not changed
by adapt rules. The quick fix removes the action.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
    }
    adapt {
        when hit_rate < 0.4 { capacity = 32 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 32 }
    }
}
"""),
)

