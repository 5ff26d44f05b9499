"""Structure (MPL1xx): files, imports, blocks, parameters and policies; checked by
:mod:`mpl.checker.resolve` (files, imports, extends), :mod:`mpl.checker.structure` (blocks and
parameters of one policy) and :mod:`mpl.checker.policy` (MPL105).
"""

from __future__ import annotations

from mpl.rules.base import E, W, rule


RULES = (
    rule("MPL100", E, "structure", "file cannot be read", """
A file could not be read: it does not exist, is a directory, is binary (contains NUL bytes),
is not UTF-8 text, or is larger than 16 MiB (an endless device such as `/dev/zero` or
`/dev/urandom` is refused as soon as it is seen to be binary or too large, so a read always
ends). `mplc check` reports it for a file named on the command line, and the
checker for an `import` that names such a path. Text given as a string (`mpl.loads`, the
Python DSL, an editor buffer) that holds a lone surrogate (a code point U+D800-U+DFFF, which
is not a character and has no UTF-8 form) is reported the same way, at the first surrogate;
none of that text's policies load.
""", """
import "."

policy fast {
    cache { capacity = 8 }
}
""", """
import "std/lru_basic"

policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL101", E, "structure", "unknown block", """
A block name is not one of `cache`, `prefetch`, `schedule`, `monitor`, `per_layer` or
`adapt`. The message suggests the closest name, and the quick fix renames the block. The
parameters of an unknown block are not checked.
""", """
policy fast {
    cache { capacity = 8 }
    prefech { strategy = history }
}
""", """
policy fast {
    cache { capacity = 8 }
    prefetch { strategy = history }
}
"""),
    rule("MPL102", E, "structure", "unknown parameter", """
A parameter is not part of its block. The message suggests the closest parameter of that
block (or names the block the parameter belongs to), and the quick fix renames it. See
docs/MANUAL.md for every block's parameters.
""", """
policy fast {
    cache {
        capacity = 8
        evicton = lfu
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
}
"""),
    rule("MPL103", E, "structure", "duplicate block", """
A policy has the same block twice. Only the first block's parameters would be used; merge
the two blocks. The quick fix removes the duplicate block (move its parameters first).
""", """
policy fast {
    cache { capacity = 8 }
    cache { eviction = lfu }
}
""", """
policy fast {
    cache {
        capacity = 8
        eviction = lfu
    }
}
"""),
    rule("MPL104", E, "structure", "duplicate parameter", """
A block sets the same parameter twice. The first value is the one that counts; the quick fix
removes the duplicate.
""", """
policy fast {
    cache {
        capacity = 8
        capacity = 16
    }
}
""", """
policy fast {
    cache {
        capacity = 16
    }
}
"""),
    rule("MPL105", E, "structure", "missing required block or parameter", """
Every policy needs a `cache` block with a `capacity`, written directly or inherited through
`extends`: without them there is nothing to run.
""", """
policy fast {
    prefetch { strategy = history }
}
""", """
policy fast {
    cache { capacity = 8 }
    prefetch { strategy = history }
}
"""),
    rule("MPL106", E, "structure", "duplicate policy name", """
Two policies visible in one file (defined in it or brought in by `import`) have the same
name, so `extends` and `mpl.load(..., policy=NAME)` would be ambiguous. Rename one of them.
""", """
policy fast {
    cache { capacity = 8 }
}
policy fast {
    cache { capacity = 16 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
policy faster {
    cache { capacity = 16 }
}
"""),
    rule("MPL107", E, "structure", "unknown parent policy", """
`extends` names a policy that is neither defined in this file nor imported. Define it, import
the file that defines it (`import "base.moe"` or `import "std/NAME"`), or fix the name.
""", """
policy base {
    cache { capacity = 8 }
}
policy tuned extends basee {
    cache { eviction = lfu }
}
""", """
policy base {
    cache { capacity = 8 }
}
policy tuned extends base {
    cache { eviction = lfu }
}
"""),
    rule("MPL108", E, "structure", "import not found", """
An `import` names a file that does not exist. A relative path is resolved against the
directory of the importing file; `std/NAME` names a policy of the standard library
(`stdlib/NAME.moe`). The `.moe` extension may be left out.
""", """
import "missing.moe"

policy fast {
    cache { capacity = 8 }
}
""", """
import "std/lru_basic"

policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL109", E, "structure", "import cycle", """
Files import each other in a circle (here: a file that imports itself). Imports must form a
tree; move the shared policies into a file that both import.
""", """
import "cycle.moe"

policy fast {
    cache { capacity = 8 }
}
""", """
import "std/lru_basic"

policy fast {
    cache { capacity = 8 }
}
""", filename="cycle.moe"),
    rule("MPL110", E, "structure", "extends cycle", """
Policies extend each other in a circle, so none of them has a definite set of parameters.
Remove one `extends`.
""", """
policy a extends b {
    cache { capacity = 8 }
}
policy b extends a {
    cache { eviction = lfu }
}
""", """
policy a {
    cache { capacity = 8 }
}
policy b extends a {
    cache { eviction = lfu }
}
"""),
    rule("MPL111", E, "structure", "unsupported version", """
The `version` line names a language version this toolchain does not implement. Supported
versions are listed in the message; version 1 is the original language.
""", """
version 3

policy fast {
    cache { capacity = 8 }
}
""", """
version 1

policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL112", W, "structure", "file defines no policy", """
The file parses but defines no policy, so there is nothing to load or attach. Add a
`policy NAME { ... }`.
""", """
version 1
# nothing here yet
""", """
version 1

policy fast {
    cache { capacity = 8 }
}
"""),
    rule("MPL113", E, "structure", "misplaced rule or parameter", """
A rule or a parameter is in the wrong kind of block: `when` rules belong in `adapt`, and
`adapt` holds only rules (a parameter is set in its own block, or changed at runtime by a
rule's action).
""", """
policy fast {
    cache {
        capacity = 8
        when hit_rate < 0.4 { eviction = lfu }
    }
}
""", """
policy fast {
    cache {
        capacity = 8
    }
    adapt {
        when hit_rate < 0.4 { eviction = lfu }
    }
}
"""),

    # ---- memory tiers (checked by mpl.checker.tiers)
    rule("MPL114", E, "structure", "blocks that exclude each other", """
A memory hierarchy (`hierarchy` or `per_layer_hierarchy`) replaces the `cache` block: its
top tier is the device cache, so a policy has one or the other, as in the original. And
`per_layer` splits the cache block's capacity between layers: with memory tiers, give a band
of layers its own tiers (`per_layer_hierarchy`) instead.
""", """
policy tiers {
    cache { capacity = 8 }
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
    }
}
"""),
    rule("MPL115", E, "structure", "unknown or misplaced item", """
A nested item (`KIND head { ... }`) is of an unknown kind, is written where it does not
belong, or has the wrong head. A `hierarchy` holds `tier NAME { ... }` and
`on promote|demote(A -> B) { ... }`; a `per_layer_hierarchy` holds
`band layers = FIRST..LAST { ... }`, which holds tiers and transitions; no other block and
no tier or transition holds items. The message suggests the closest kind, and the quick fix
renames it.
""", """
policy tiers {
    hierarchy {
        tyer hot { location = gpu  capacity = 16 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
    }
}
"""),
    rule("MPL116", E, "structure", "duplicate tier or band", """
Two tiers of one hierarchy (or band) have the same name, or two bands the same layers. A
tier's name is how transitions, bands and `extends` refer to it, so it must be unique; merge
the two and remove one (the quick fix removes the second).
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier hot { location = cpu }
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
    rule("MPL117", E, "structure", "duplicate transition", """
A hierarchy (or band) has two `on EVENT(A -> B)` items for the same event and tiers. Merge
their parameters into the first; the quick fix removes the second.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promote(ram -> hot) { trigger_threshold = 0.5 }
        on promote(ram -> hot) { mechanism = copy }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promote(ram -> hot) {
            mechanism = copy
            trigger_threshold = 0.5
        }
    }
}
"""),
    rule("MPL118", E, "structure", "memory tiers without a tier", """
A `hierarchy` needs at least one tier, and a `per_layer_hierarchy` at least one band; a band
needs a tier of its own unless the policy also has a `hierarchy`, whose tiers it starts
from. Without one there is nowhere to keep an expert.
""", """
policy tiers {
    hierarchy {
        eviction = lfu
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        eviction = lfu
    }
}
"""),
    rule("MPL119", E, "structure", "unknown tier in a transition", """
A transition `on EVENT(A -> B)` names a tier that the hierarchy (or band) does not have. The
message suggests the closest tier name, and the quick fix replaces it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 16 }
        tier ram { location = cpu }
        on promote(rma -> hot) { trigger_threshold = 0.5 }
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
    rule("MPL120", E, "structure", "tier without a location or capacity", """
Every tier needs a `location` (written or inherited). A `gpu` tier needs a `capacity` (slots,
or a size), and so does a `cpu` tier with tiers below it (host memory is then a cache); the
last tier holds every expert and needs none.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu }
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
)
