"""The long explanation of every diagnostic code, with a wrong and a fixed example.

``docs/diagnostics.md`` is generated from this table (``python -m mpl.diagnostic_docs >
docs/diagnostics.md``; a test keeps the committed file in sync), and ``mplc explain CODE``
prints the code's section. Tests check that every wrong example triggers its code and every
fixed example is clean.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from mpl.diagnostics import ADAPT_STATE_LIMIT, CODES


@dataclass(frozen=True)
class Explanation:
    code: str
    text: str                      # the explanation (markdown paragraphs)
    wrong: str                     # a .moe file that triggers the code
    fixed: str                     # the same file, fixed
    model: str | None = None       # a model preset the example is checked with
    device_memory_gb: float | None = None
    filename: str = "policy.moe"   # the name the examples are saved under (imports)


def _e(code, text, wrong, fixed, **kw) -> Explanation:
    return Explanation(code, text.strip(), wrong.strip("\n") + "\n", fixed.strip("\n") + "\n", **kw)


_ALL = (
    # ---------------------------------------------------------------- syntax
    _e("MPL001", """
The text contains a character that is not part of the language: only names, numbers (with an
optional unit), strings, `{ } [ ] = | : , ; .`, comparison operators and `#` comments may
appear. The parser skips the character and goes on.
""", """
policy fast {
    cache { capacity = 8 $ }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    _e("MPL002", """
A token appears where the grammar does not allow it; the message lists what was expected
(for example the `=` between a parameter name and its value). The parser recovers at the next
line, `;` or closing brace and reports every other error of the file as well.
""", """
policy fast {
    cache { capacity 8 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    _e("MPL003", """
The file ends inside a policy, block or rule: a closing `}` is missing. The message names the
construct that is still open.
""", """
policy fast {
    cache { capacity = 8 }
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    _e("MPL004", """
A number or string is malformed: a number with two decimal points, a number too large to
represent, or a string without its closing quote on the same line.
""", """
policy fast {
    cache { capacity = 8.0.1 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
"""),
    # ---------------------------------------------------------------- structure
    _e("MPL100", """
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
    _e("MPL101", """
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
    _e("MPL102", """
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
    _e("MPL103", """
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
    _e("MPL104", """
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
    _e("MPL105", """
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
    _e("MPL106", """
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
    _e("MPL107", """
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
    _e("MPL108", """
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
    _e("MPL109", """
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
    _e("MPL110", """
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
    _e("MPL111", """
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
    _e("MPL112", """
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
    _e("MPL113", """
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
    # ---------------------------------------------------------------- values
    _e("MPL201", """
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
    _e("MPL202", """
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
    _e("MPL203", """
A number is outside the parameter's range (for example a decay factor above 1 or a capacity
of 0). Where the range has a closed bound the quick fix clamps the value to it.
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
    _e("MPL204", """
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
    _e("MPL205", """
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
    _e("MPL206", """
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
    _e("MPL207", """
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
    _e("MPL208", """
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
    _e("MPL209", """
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
    # ---------------------------------------------------------------- cross-field
    _e("MPL301", """
Pinned experts occupy cache slots and are never evicted, so there must be at least as many
slots as pinned experts: in the cache (`capacity`), and with `per_layer` in every layer
(`min_capacity`). With a model (`--model`), MPL506 also counts the MoE layers of a shared
cache.
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
"""),
    _e("MPL302", """
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
"""),
    _e("MPL303", """
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
"""),
    _e("MPL304", """
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
"""),
    _e("MPL305", """
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
"""),
    _e("MPL306", """
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
"""),
    _e("MPL307", """
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
"""),
    _e("MPL308", """
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
"""),
    _e("MPL309", """
The per-layer budget cannot give every layer its `min_capacity`: `total_budget` is below
`min_capacity`, or (without a `total_budget`) the per-layer default `capacity` is below
`min_capacity`. With a model (`--model`), MPL505 checks layers x min_capacity exactly.
""", """
policy fast {
    cache { capacity = 8 }
    per_layer { total_budget = 1 }
}
""", """
policy fast {
    cache { capacity = 8 }
    per_layer { total_budget = 64 }
}
"""),
    # ---------------------------------------------------------------- warnings
    _e("MPL401", """
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
    _e("MPL402", """
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
    _e("MPL403", """
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
    _e("MPL404", """
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
    _e("MPL405", """
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
    _e("MPL406", """
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
    _e("MPL407", """
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
    # ---------------------------------------------------------------- model-aware
    _e("MPL408", """
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
    _e("MPL501", """
With a model shape (`mplc check --model`, or at attach), a pinned expert id must exist: ids
run from 0 to the number of routed experts per layer minus one.
""", """
policy fast {
    cache {
        capacity = 32
        pin = [64]
    }
}
""", """
policy fast {
    cache {
        capacity = 32
        pin = [3]
    }
}
""", model="deepseek-v2-lite"),
    _e("MPL502", """
The capacity is below the model's top-k: a single dispatch needs more experts than the cache
holds, so some are streamed through a transient buffer on every dispatch. It works (output is
unchanged) but is slow.
""", """
policy fast {
    cache { capacity = 4 }
}
""", """
policy fast {
    cache { capacity = 8 }
}
""", model="deepseek-v2-lite"),
    _e("MPL503", """
The cache holds every expert of the model (all MoE layers x experts, or every expert of a
layer with per_layer), so nothing is ever evicted and the policy cannot matter; load the model
without offloading or lower the capacity. The slot pool is capped at the model's experts, so a
capacity above them (a size such as `10GiB` on a small model) allocates only every expert once.
""", """
policy fast {
    cache { capacity = 2000 }
}
""", """
policy fast {
    cache { capacity = 512 }
}
""", model="deepseek-v2-lite"),
    _e("MPL504", """
With a known device memory (`--device-memory`, or the device at attach), the memory budget
of the memory-pressure trigger, or the cache itself (capacity x expert size), is larger than
the device.
""", """
policy fast {
    cache {
        capacity = 8
        memory_threshold = 0.9
        memory_budget_gb = 80
    }
}
""", """
policy fast {
    cache {
        capacity = 8
        memory_threshold = 0.9
        memory_budget_gb = 12
    }
}
""", model="deepseek-v2-lite", device_memory_gb=16),
    _e("MPL505", """
With per-layer caches, `total_budget` must give every MoE layer at least `min_capacity`
slots: it must be at least layers x min_capacity.
""", """
policy fast {
    cache { capacity = 8 }
    per_layer {
        total_budget = 40
        min_capacity = 2
    }
}
""", """
policy fast {
    cache { capacity = 8 }
    per_layer {
        total_budget = 104
        min_capacity = 2
    }
}
""", model="deepseek-v2-lite"),
    _e("MPL506", """
`pin` pins experts in every MoE layer. In one shared cache that takes pins x layers slots,
which must fit in the capacity.
""", """
policy fast {
    cache {
        capacity = 16
        pin = [0, 1]
    }
}
""", """
policy fast {
    cache {
        capacity = 64
        pin = [0, 1]
    }
}
""", model="deepseek-v2-lite"),
    _e("MPL507", """
A size as `capacity` means as many slots as experts fit in it, so once the expert size is known
(the model with `--model` or at attach, the trace in replay, or `cache.expert_size_gb`) it is
checked like a slot count: a size smaller than one expert gives no slot (it is never rounded up
to one), and the slots a cache can use (at most every expert it can hold: a layer's with
`per_layer`, every MoE layer's otherwise) must be within the range of `capacity`. A size above
every expert is fine: the slot pool is capped at the model's experts (MPL503 says so).
""", """
policy fast {
    cache { capacity = 1MiB }
}
""", """
policy fast {
    cache { capacity = 2GiB }
}
""", model="deepseek-v2-lite"),
)

EXPLANATIONS: Mapping[str, Explanation] = MappingProxyType({e.code: e for e in _ALL})


def normalize_code(text: str) -> str:
    """``mpl102`` / ``102`` / ``MPL102`` -> ``MPL102``."""
    t = text.strip().upper()
    if t.isdigit():
        t = "MPL" + t.zfill(3)
    return t


def section(code: str) -> str:
    """The markdown section of one code (what ``mplc explain`` prints)."""
    info = CODES[code]
    e = EXPLANATIONS[code]
    lines = [f"## {code}: {info.title}", "",
             f"Severity: {info.severity.value} · group: {info.group}", "", e.text, ""]
    if e.model:
        cond = f"`--model {e.model}`"
        if e.device_memory_gb:
            cond += f" and `--device-memory {e.device_memory_gb:g}GB`"
        lines += [f"Model-aware: the examples are checked with {cond}.", ""]
    if e.filename != "policy.moe":
        lines += [f"The examples are saved as `{e.filename}`.", ""]
    lines += ["Wrong:", "", "```moe", e.wrong.rstrip("\n"), "```", "",
              "Fixed:", "", "```moe", e.fixed.rstrip("\n"), "```"]
    return "\n".join(lines)


_GROUPS = (("syntax", "Syntax"), ("structure", "Structure"), ("value", "Types and values"),
           ("cross-field", "Cross-field rules"), ("warning", "Warnings"), ("model", "Model-aware"))


CROSS_FIELD_NOTE = """\
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


def generate() -> str:
    """The whole of docs/diagnostics.md."""
    out = ["# Diagnostics", "",
           "<!-- Generated by `python -m mpl.diagnostic_docs > docs/diagnostics.md`; edit "
           "mpl/diagnostic_docs.py instead. -->", "",
           "Every diagnostic of `mplc check`, the language server and `mpl.check` has a stable "
           "code. `mplc explain CODE` prints the section below. Errors stop a policy from "
           "loading; warnings and hints do not.", "",
           "| Code | Severity | Group | Title |", "|---|---|---|---|"]
    for c, info in CODES.items():
        out.append(f"| [{c}](#{c.lower()}) | {info.severity.value} | {info.group} | {info.title} |")
    for group, heading in _GROUPS:
        out += ["", f"# {heading}"]
        if group == "cross-field":
            out += ["", CROSS_FIELD_NOTE]
        for c, info in CODES.items():
            if info.group != group:
                continue
            out += ["", f'<a id="{c.lower()}"></a>', "", section(c)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(generate())
