"""Model-aware rules (MPL5xx): checked only when the model's shape is known (``--model``,
attach, a trace header), except the no-slot case of MPL507, which a written
``cache.expert_size_gb`` is enough for. Each check is the function below its explanation,
a pure function of :class:`~mpl.rules.base.Facts` (``f.model`` is the shape).
"""

from __future__ import annotations

from mpl import schema
from mpl.rules.base import E, Facts, Violation, W, expert_gb, fmt_num, ok, rule, size_at_most, size_text


MPL501 = rule("MPL501", E, "model", "pinned expert does not exist", """
With a model shape (`mplc check --model`, or at attach), a pinned expert id must exist: ids
run from 0 to the number of routed experts per layer minus one. This holds for `pin` and for
the `experts` of a `pin layers = ...` item alike.
""", """
policy fast {
    cache {
        capacity = 160
        pin = [64]
    }
}
""", """
policy fast {
    cache {
        capacity = 160
        pin = [3]
    }
}
""", model="deepseek-v2-lite")


def check_pins_exist(f: Facts) -> list[Violation]:
    """MPL501: a pinned expert id beyond the model's experts."""
    m, pins = f.model, f.get("cache.pin")
    if not ok(pins):
        return []
    bad = [e for e in pins if e >= m.num_experts]
    if not bad:
        return []
    return [Violation("MPL501", f"expert {bad[0]} does not exist: {m.name} has {m.num_experts} experts per "
                      f"layer (ids 0..{m.num_experts - 1}); remove it from pin", ("cache.pin",),
                      item=list(pins).index(bad[0]))]


MPL502 = rule("MPL502", W, "model", "capacity below top-k", """
The capacity is below the model's top-k: a single dispatch needs more experts than the cache
holds, so some are streamed through a transient buffer on every dispatch. It works (output is
unchanged) but is slow.
""", """
policy fast {
    cache { capacity = 4 }
    per_layer { allocation = uniform }
}
""", """
policy fast {
    cache { capacity = 8 }
    per_layer { allocation = uniform }
}
""", model="deepseek-v2-lite")


def check_top_k(f: Facts) -> list[Violation]:
    """MPL502: fewer slots than the experts one dispatch selects."""
    m, cap = f.model, f.cap
    if cap is None or cap >= m.top_k:
        return []
    raise_ = (f"raise total_budget to {m.top_k * m.num_moe_layers} or more" if f.cap_derived
              else f"raise capacity to {m.top_k} or more")
    return [Violation("MPL502", f"{f.cap_words()} is below {m.name}'s top-k of {m.top_k}: every dispatch "
                      f"streams at least {m.top_k - cap} expert{'s' if m.top_k - cap != 1 else ''}; "
                      f"{raise_}", ("cache.capacity", "per_layer.total_budget"))]


MPL503 = rule("MPL503", W, "model", "cache holds every expert", """
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
""", model="deepseek-v2-lite")


def check_holds_every_expert(f: Facts) -> list[Violation]:
    """MPL503: a cache (a layer's with per_layer) that holds every expert."""
    m, cap, layers = f.model, f.cap, f.model.num_moe_layers
    size = f.size
    if f.per_layer:
        total = f.total
        per = (total // layers if total is not None and layers else cap)
        if per is None or per < m.num_experts:
            return []
        held = (f"{_bytes_text(size.bytes)} per layer = {per} slots" if size is not None and per == cap
                else f"{per} slots")
        return [Violation("MPL503", f"every layer's cache ({held}) holds all {m.num_experts} experts of "
                          f"{m.name}: the policy cannot matter, and the slot pool is capped at {layers} x "
                          f"{m.num_experts} = {m.total_experts} slots (only those are allocated); lower the "
                          f"budget or load the model without offloading",
                          ("per_layer.total_budget", "cache.capacity"))]
    if cap is None or cap < m.total_experts:
        return []
    written = f"{_bytes_text(size.bytes)} = {cap} slots" if size is not None else f"{cap}"
    return [Violation("MPL503", f"capacity {written} holds all {m.total_experts} experts of {m.name} "
                      f"({layers} layers x {m.num_experts}): the policy cannot matter, and the slot pool "
                      f"is capped at {m.total_experts} slots (only those are allocated); lower capacity or "
                      f"load the model without offloading", ("cache.capacity",))]


MPL504 = rule("MPL504", W, "model", "cache does not fit the device", """
With a known device memory (`--device-memory`, or the device at attach), the slot pool the
policy allocates does not fit in what the device leaves for experts, or the memory budget of
the memory-pressure trigger is above the device's memory. The pool is what the runtime
allocates: the shared cache's capacity, or with `per_layer` the per-layer total (layers x
capacity, or `total_budget`, within layers x `min_capacity` .. layers x `max_capacity`), in
both cases at most every expert of the model. What the device leaves for experts is its
memory less the model's skeleton (everything but the routed experts: embeddings, attention,
dense and shared MLPs, the LM head) and a reserve for the KV cache and activations (10% of the
device, at least 1 GiB; `mplc check --kv-reserve SIZE` states another). The message gives
every size and a capacity that fits.
""", """
policy fast {
    cache { capacity = 48 }
    per_layer { allocation = uniform }
}
""", """
policy fast {
    cache { eviction = lru }
    per_layer { total_budget = 10GiB }
}
""", model="deepseek-v2-lite", device_memory_gb=16)


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.1f} GB"


def pool_slots(f: Facts) -> int | None:
    """The slots the runtime's slot pool allocates for this policy on ``f.model`` (as
    mpl.runtime.core does: a shared cache's capacity; per-layer caches' total, within layers x
    min_capacity .. layers x max_capacity; at most every expert), None when unknown."""
    m = f.model
    L = m.num_moe_layers
    if f.per_layer:
        mn, mx = f.get("per_layer.min_capacity"), f.get("per_layer.max_capacity")
        total = f.total if f.total is not None else (L * f.cap if f.cap is not None else None)
        if total is None or not ok(mn, mx):
            return None
        requested = max(L * mn, min(total, L * mx))
    else:
        requested = f.cap
    return None if requested is None else min(requested, m.total_experts)


def check_device_memory(f: Facts) -> list[Violation]:
    """MPL504: a memory budget above the device, or a slot pool above what the device leaves
    for experts (its memory less the skeleton and the KV reserve)."""
    m = f.model
    dev = m.device_memory_bytes
    if not dev:
        return []
    out = []
    budget = f.get("cache.memory_budget_gb")
    if "cache.memory_budget_gb" in f.given and ok(budget) and budget * 1e9 > dev:
        out.append(Violation("MPL504", f"memory_budget_gb {fmt_num(budget)} is above the device's memory "
                             f"({_gb(dev)}); set it to at most {dev / 1e9:.1f}", ("cache.memory_budget_gb",)))
    eb = _expert_bytes(f)
    pool = pool_slots(f)
    if pool is None or not eb:
        return out
    room = m.expert_memory
    need = pool * eb
    if need <= room:
        return out
    L = m.num_moe_layers
    every = " (every expert of the model)" if pool == m.total_experts else ""
    held = (f"the slot pool of {pool:,} experts{every} x {_bytes_text(eb)} = {_bytes_text(need)}")
    left = (f"{_bytes_text(max(room, 0))} that a {_bytes_text(dev)} device leaves for experts after "
            f"the skeleton ({_bytes_text(m.skeleton_bytes)}) and the KV-cache reserve "
            f"({_bytes_text(m.kv_reserve)})")
    keys = ("per_layer.total_budget", "cache.capacity") if f.per_layer else ("cache.capacity",)
    fit = int(room // eb) if room > 0 else 0
    if fit < 1:
        return out + [Violation("MPL504", f"{held} does not fit: the skeleton "
                                f"({_bytes_text(m.skeleton_bytes)}) and the KV-cache reserve "
                                f"({_bytes_text(m.kv_reserve)}) alone fill the {_bytes_text(dev)} "
                                f"device; use a larger device or a smaller --kv-reserve", keys)]
    written = f.get("per_layer.total_budget")
    if f.per_layer and ok(written):
        what = f"total_budget {_bytes_text(written.bytes) if hasattr(written, 'bytes') else fmt_num(written)}"
    else:
        what = f.cap_words() if (f.per_layer or f.size is not None) else ""
    what = f" ({what})" if what else ""
    if f.per_layer:
        mn = f.get("per_layer.min_capacity")
        how = (f"set total_budget = {fit} ({fit // L} per layer over {L} layers) or "
               f"total_budget = {size_at_most(fit * eb)}")
        if ok(mn) and fit < L * mn:
            how += f", and lower min_capacity to at most {max(1, fit // L)}"
    else:
        how = f"lower capacity to at most {fit}, or capacity = {size_at_most(fit * eb)}"
    out.append(Violation("MPL504", f"{held}{what} is more than the {left}; {how}", keys))
    return out


MPL505 = rule("MPL505", E, "model", "per-layer budget below the minimum", """
With per-layer caches, `total_budget` must give every MoE layer at least `min_capacity`
slots: it must be at least layers x min_capacity.
""", """
policy fast {
    cache { eviction = lru }
    per_layer {
        total_budget = 200
        min_capacity = 8
    }
}
""", """
policy fast {
    cache { eviction = lru }
    per_layer {
        total_budget = 208
        min_capacity = 8
    }
}
""", model="deepseek-v2-lite")


def check_per_layer_minimum(f: Facts) -> list[Violation]:
    """MPL505: total_budget below layers x min_capacity."""
    m, layers = f.model, f.model.num_moe_layers
    total, mn = f.total, f.get("per_layer.min_capacity")
    if not f.per_layer or total is None or not ok(mn) or total >= layers * mn:
        return []
    return [Violation("MPL505", f"total_budget {total} is below {layers} MoE layers x min_capacity {mn} = "
                      f"{layers * mn} for {m.name}; raise total_budget to {layers * mn} or lower "
                      f"min_capacity", ("per_layer.total_budget", "per_layer.min_capacity"))]


MPL506 = rule("MPL506", E, "model", "pinned experts do not fit", """
`pin` pins experts in every MoE layer. In one shared cache that takes pins x layers slots,
which must fit in the capacity. With `pin layers = ...` items, the slots are counted layer by
layer: the experts pinned in every layer and those of the layer's item, over every MoE layer.
""", """
policy fast {
    cache {
        capacity = 160
        pin = [0, 1, 2, 3, 4, 5, 6]
    }
}
""", """
policy fast {
    cache {
        capacity = 192
        pin = [0, 1, 2, 3, 4, 5, 6]
    }
}
""", model="deepseek-v2-lite")


def check_pins_fit_layers(f: Facts) -> list[Violation]:
    """MPL506: the pins of every MoE layer in one shared cache."""
    m, cap, layers, pins = f.model, f.cap, f.model.num_moe_layers, f.get("cache.pin")
    if f.per_layer or cap is None or not ok(pins) or not pins or len(pins) * layers <= cap:
        return []
    return [Violation("MPL506", f"{len(pins)} pinned experts in each of {m.name}'s {layers} MoE layers need "
                      f"{len(pins) * layers} slots of the shared cache of {cap}; raise capacity to "
                      f"{len(pins) * layers} or pin fewer experts", ("cache.pin", "cache.capacity"))]


MPL507 = rule("MPL507", E, "model", "size capacity outside the slot range", """
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
    cache { capacity = 4GiB }
}
""", model="deepseek-v2-lite")


_bytes_text = size_text


def _expert_bytes(f: Facts) -> float:
    return expert_gb(f.values, f.model) * schema.UNITS["GB"].factor


def effective_slots(slots: int, per_layer: bool, model) -> int:
    """The slots a cache of ``slots`` can ever use on ``model`` (a ModelShape): a layer's
    cache holds at most that layer's experts, the shared cache every MoE layer's (the
    runtime's pool stops there)."""
    return min(slots, model.num_experts if per_layer else model.total_experts)


def check_no_slot(f: Facts) -> list[Violation]:
    """MPL507 (with or without a model): a size capacity that holds no expert (the runtime
    never rounds it up)."""
    if f.slots is None or f.slots >= _CAPACITY.min:
        return []
    whose = (f"of {f.model.name}" if f.model is not None and not ok(f.get("cache.expert_size_gb"))
             else "(cache.expert_size_gb)")
    eb = _expert_bytes(f)
    return [Violation("MPL507", f"capacity {_bytes_text(f.size.bytes)} is smaller than one expert {whose} "
                      f"({_bytes_text(eb)}): it gives no slot; write at least {_bytes_text(eb)} or a "
                      f"slot count", ("cache.capacity",))]


def check_slot_range(f: Facts) -> list[Violation]:
    """MPL507 (with a model): a size capacity that gives more slots than a cache can have."""
    size = f.size
    if f.cap is None or size is None:
        return []
    n = effective_slots(f.cap, f.per_layer, f.model)
    if n <= _CAPACITY.max:
        return []
    per = " per layer" if f.per_layer else ""
    return [Violation("MPL507", f"capacity {_bytes_text(size.bytes)}{per} gives {n} slots{per} of {f.model.name}'s "
                      f"experts, more than the {_CAPACITY.max} a cache can have; lower it to at most "
                      f"{_bytes_text(_CAPACITY.max * _expert_bytes(f))}", ("cache.capacity",))]


_CAPACITY = schema.PARAMS["cache.capacity"]


MPL508 = rule("MPL508", W, "model", "shared cache below one step's accesses", """
One shared cache smaller than one step's accesses (MoE layers x top-k: 26 x 6 = 156 for
DeepSeek-V2-Lite) thrashes: every key comes back exactly one step later, after every other
layer's keys have gone through the cache, the cyclic pattern that defeats recency and
frequency alike, so LRU and LFU hit close to nothing while the optimum still hits a quarter of
the accesses or more (docs/choosing-a-policy.md, sections 1 and 2). Raise the capacity above
one step's accesses, use one cache per layer at the same budget (`per_layer`, which cannot
thrash across layers), or the layer-aware rule (`eviction = farthest_layer`, which this
warning leaves alone). A capacity below top-k is MPL502; with prefetching, MPL509.
""", """
policy fast {
    cache { capacity = 64 }
}
""", """
policy fast {
    cache {
        capacity = 64
        eviction = farthest_layer
    }
}
""", model="deepseek-v2-lite")


# ---- memory tiers: checked by mpl.checker.tiers over a policy's resolved tiers

MPL515 = rule("MPL515", E, "model", "bands and the model's layers", """
With a model, the bands of `per_layer_hierarchy` must fit its layers: a band that names
layers the model does not have is an error, and without a `hierarchy` block every MoE layer
must be in a band (MPL325 finds a gap between two bands without a model; this one also finds
the layers before the first band and after the last). Layers are the model's decoder-layer
ids, as in traces.
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..15 { tier hot { location = gpu  capacity = 8 } }
    }
}
""", """
policy tiers {
    per_layer_hierarchy {
        band layers = 0..15 { tier hot { location = gpu  capacity = 8 } }
        band layers = 16..26 { tier hot { location = gpu  capacity = 12 } }
    }
}
""", model="deepseek-v2-lite")

MPL516 = rule("MPL516", W, "model", "gpu tiers exceed the device memory", """
With a known device memory (`--device-memory`, or the device at attach), the `gpu` tiers on
one device (capacity x the expert's size at each tier's precision; every band's tiers
together) need more memory than the device has.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 1200 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 200 }
    }
}
""", model="deepseek-v2-lite", device_memory_gb=16)

MPL517 = rule("MPL517", W, "model", "tier holds every expert", """
A tier other than the last holds every expert of the model (of its band's layers, with
`per_layer_hierarchy`): nothing ever reaches the tiers below it. Lower its capacity, or
remove the tiers below it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 2000 }
        tier ram { location = cpu }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 512 }
        tier ram { location = cpu }
    }
}
""", model="deepseek-v2-lite")

MPL518 = rule("MPL518", E, "model", "last tier too small", """
The last tier holds every expert. When it is host memory with a capacity, that capacity must
hold all the model's experts (of its band's layers); for a model larger than host memory, add
a disk tier below it.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 64 }
        tier ram { location = cpu  capacity = 8GiB }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 64 }
        tier ram { location = cpu  capacity = 8GiB }
        tier ssd { location = disk }
    }
}
""", model="deepseek-v2-lite")

MPL519 = rule("MPL519", E, "model", "tier size below one expert", """
A tier's capacity written as a size means as many experts, at the tier's precision, as fit:
a size smaller than one expert gives no slot (it is never rounded up). Write at least one
expert's size, or a slot count.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 4MiB }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 256MiB }
    }
}
""", model="deepseek-v2-lite")

MPL520 = rule("MPL520", W, "model", "top tier below top-k", """
The top tier (a `gpu` tier) holds fewer slots than the model's top-k: a single dispatch needs
more experts than it holds, so some are streamed on every dispatch. It works (the output is
unchanged) but is slow. The cache block's rule is MPL502.
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 4 }
    }
}
""", """
policy tiers {
    hierarchy {
        tier hot { location = gpu  capacity = 8 }
    }
}
""", model="deepseek-v2-lite")


MPL509 = rule("MPL509", W, "model", "every hit would be a prefetch", """
A prefetching policy whose shared cache is smaller than one step's accesses (MoE layers x
top-k) keeps no key until its layer comes back: every key is evicted by the other layers'
accesses first. Its only hits would be prefetched experts that land before their layer runs
(one still in flight is a late prefetch, not a hit), so its hit rate measures the prefetcher
and the link, not the cache, and stays flat as the capacity grows (until one step's accesses
fit); each wrong prefetch costs a transfer that the misses need (docs/choosing-a-policy.md,
sections 2 and 4). Raise the capacity above one step's accesses,
or use one cache per layer (`per_layer`).
""", """
policy fast {
    cache { capacity = 16 }
    prefetch { strategy = history }
}
""", """
policy fast {
    cache { eviction = lru }
    per_layer { total_budget = 416 }
    prefetch { strategy = history }
}
""", model="deepseek-v2-lite")


#: eviction rules made for a shared cache smaller than a step (or that know the future)
_STEP_SAFE_EVICTIONS = ("farthest_layer", "belady")


def check_below_one_step(f: Facts) -> list[Violation]:
    """MPL508 / MPL509: a shared cache below one step's accesses (thrashing; with a
    prefetcher, every hit a prefetch)."""
    m, cap = f.model, f.cap
    step = m.num_moe_layers * m.top_k
    if f.per_layer or cap is None or cap < m.top_k or cap >= step:
        return []
    strategy = f.get("prefetch.strategy")
    where = (f"a shared cache of {f.cap_words()} is below one step's accesses of {m.name} "
             f"({m.num_moe_layers} MoE layers x top-{m.top_k} = {step})")
    if ok(strategy) and strategy != "none":
        return [Violation("MPL509", f"{where}: every key is evicted before its layer comes back, so every "
                          f"hit would be a prefetch and the hit rate stays flat as capacity grows below "
                          f"{step}; raise capacity above {step} or use per_layer caches",
                          ("cache.capacity", "prefetch.strategy"))]
    ev = f.get("cache.eviction")
    if not ok(ev) or any(e in _STEP_SAFE_EVICTIONS for e in str(ev).split("|")):
        return []
    return [Violation("MPL508", f"{where}: it thrashes (each key comes back after every other layer's keys "
                      f"have evicted it, so LRU and LFU hit close to nothing); raise capacity above {step}, "
                      f"use per_layer caches at the same budget, or eviction = farthest_layer",
                      ("cache.capacity",))]


#: the checks that need a model, in the order their violations are reported (MPL507's no-slot
#: check runs first among the cross-field ones: see mpl.rules.CROSS_FIELD_CHECKS)
CHECKS = (check_slot_range, check_pins_exist, check_top_k, check_holds_every_expert,
          check_per_layer_minimum, check_pins_fit_layers, check_device_memory, check_below_one_step)

MPL521 = rule("MPL521", E, "model", "pinned layer is not a MoE layer", """
With a model, the layers of a `pin layers = FIRST..LAST { ... }` item must be MoE layers of
the model: a layer it does not have, or a dense layer (which has no experts to pin), is an
error. Layers are the model's decoder-layer ids, as in traces and bands (DeepSeek-V2-Lite's
layer 0 is dense: its MoE layers are 1..26).
""", """
policy profiled {
    cache {
        capacity = 160
        pin layers = 0..3 { experts = [3, 7] }
    }
}
""", """
policy profiled {
    cache {
        capacity = 160
        pin layers = 1..3 { experts = [3, 7] }
    }
}
""", model="deepseek-v2-lite")

RULES = (MPL501, MPL502, MPL503, MPL504, MPL505, MPL506, MPL507, MPL508, MPL509,
         MPL515, MPL516, MPL517, MPL518, MPL519, MPL520, MPL521)
