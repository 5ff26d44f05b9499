"""The policy runtime: state and the slow paths a compiled policy module calls.

A compiled module (``mpl.codegen``) subclasses :class:`Runtime` and defines ``dispatch``:
straight-line code specialised to its policy (which eviction store, which schedule, whether
there is a prefetcher, triggers, a monitor, adapt rules, per-layer caches) that handles the
hot path itself — hits — and calls the methods below for misses, prefetching, triggers, the
monitor and adapt firings. Everything here is pure Python: no torch, no compiler.

Semantics are those of SPEC §5; where the spec is silent the decision is documented in
docs/runtime.md.
"""

from __future__ import annotations

import logging
import operator
from collections import OrderedDict

from mpl.runtime import args as _args
from mpl.runtime.adapt import ACTIONS as ADAPT_ACTIONS
from mpl.runtime.args import STEP_MAX, TOKENS_MAX  # noqa: F401  (re-exported)
from mpl.runtime.budgets import Signal, allocate
from mpl.runtime.cache import Cache, SlotFreeList
from mpl.runtime.cost import CostModel
from mpl.runtime.errors import DispatchError, RuntimeConfigError  # noqa: F401  (re-exported)
from mpl.runtime.eviction import make_store, rule_error
from mpl.runtime.guard import Guard, RuntimeBusyError  # noqa: F401  (re-exported)
from mpl.runtime.monitor import Monitor
from mpl.runtime.plan import BACKGROUND, CPU, DEMAND, PREFETCH, STREAM
from mpl.runtime.prefetch import Affinity, History, Learned
from mpl.runtime.routing import distinct  # noqa: F401  (the generated modules import it from here)
from mpl.runtime.tier_layout import layer_id_list, stored_bits_of, tier_layout
from mpl.schema import SLOT_POOL_MAX, factor_slots, missing_required

log = logging.getLogger("mpl.runtime")

DEFAULT_EXPERT_GB = 1.2   # SPEC §3: cache.expert_size_gb "from the model, else 1.2"


# Model shapes beyond these are refused (no MoE model comes near them; the .mpltrace format
# and the schema's capacity range stop at the same size).
MAX_SHAPE = 65536


def _shape_int(value, name: str) -> int:
    """A model-shape argument of make_runtime: an integer in 1..MAX_SHAPE (RuntimeConfigError
    otherwise)."""
    if isinstance(value, bool):
        raise RuntimeConfigError(f"{name} must be an integer >= 1, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise RuntimeConfigError(f"{name} must be an integer >= 1, got {value!r}") from None
    if v < 1:
        raise RuntimeConfigError(f"{name} must be >= 1, got {v}")
    if v > MAX_SHAPE:
        raise RuntimeConfigError(f"{name} must be at most {MAX_SHAPE}, got {v}")
    return v


def _finite(x) -> bool:
    """A real number that is neither NaN nor an infinity (bool is not a number here)."""
    if isinstance(x, bool):
        return False
    try:
        f = float(x)
    except (TypeError, ValueError):
        return False
    return f - f == 0.0


class _Rule:
    """Mutable state of one adapt rule (the rule itself is compiled into the module)."""
    __slots__ = ("armed", "held", "mark")

    def __init__(self, armed: bool):
        self.armed = armed
        self.held = 0
        self.mark = None      # last step / token count the held counter advanced at


def pinned_keys(every, per_layer, num_layers: int, num_experts: int, layer_ids=None) -> frozenset:
    """The pinned keys ``(layer, expert)`` of a runtime (layer: the MoE-layer ordinal its
    dispatches name): the ids of ``every`` (``cache.pin``) in each MoE layer, and for each
    ``(first, last, ids)`` of ``per_layer`` (``FEATURES["layer_pins"]``, the cache's
    ``pin layers = first..last`` items, which name decoder-layer ids) its ids in those layers.
    ``layer_ids``: the MoE layers' decoder-layer ids (None: the ordinals themselves).
    RuntimeConfigError for an expert or a layer the model does not have."""
    L, E = num_layers, num_experts
    ids = list(range(L)) if layer_ids is None else [int(x) for x in layer_ids]
    ordinal = {x: i for i, x in enumerate(ids)}
    keys = {(layer, e) for layer in range(L) for e in every}
    for first, last, experts in per_layer:
        bad = sorted(e for e in experts if not 0 <= e < E)
        if bad:
            raise RuntimeConfigError(f"pin layers = {first}..{last} lists expert {bad[0]}, but the "
                                     f"model has {E} experts per layer (ids 0..{E - 1})")
        if last - first >= len(ids) or any(x not in ordinal for x in range(first, last + 1)):
            x = next(x for x in range(first, last + 1) if x not in ordinal)
            raise RuntimeConfigError(f"pin layers = {first}..{last} names layer {x}, which is not "
                                     f"a MoE layer of the model (its MoE layers: "
                                     f"{_id_runs(ids)})")
        keys.update((ordinal[x], e) for x in range(first, last + 1) for e in experts)
    return frozenset(keys)


def _id_runs(ids) -> str:
    xs, out, i = sorted(ids), [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}..{xs[j]}")
        i = j + 1
    return ", ".join(out)


class Layout:
    """A runtime's shape and slots, computed once from the policy's values for a model shape
    (:func:`layout`): what both backends are built from, so they agree on every slot."""

    __slots__ = ("num_layers", "num_experts", "top_k", "expert_bytes", "cost", "pins",
                 "per_layer", "capacity", "requested_slots", "pool_size", "capacities",
                 "total_budget", "budget_derived", "min_cap", "max_cap", "cpu_limit", "tiers")

    def slots(self, capacity) -> int:
        """The slots of a capacity (a count, or a size: as many experts as fit)."""
        return capacity_slots(capacity, self.expert_bytes)


def layout(params: dict, features: dict, num_layers, num_experts, top_k, *, expert_bytes=None,
           cost=None, layer_ids=None, stored_bits=None) -> Layout:
    """The :class:`Layout` of a policy (its lowered ``params`` and ``features``) on a model
    shape; RuntimeConfigError for a shape, an expert size, a cost model, pins or a budget the
    runtime cannot take. ``layer_ids`` (the MoE layers' decoder-layer ids, which the bands of
    ``per_layer_hierarchy`` name) and ``stored_bits`` (the checkpoint's precision) matter to
    memory tiers only (:mod:`mpl.runtime.tier_layout`)."""
    lay = Layout()
    lay.num_layers = L = _shape_int(num_layers, "num_layers")
    lay.num_experts = E = _shape_int(num_experts, "num_experts")
    lay.top_k = top_k = _shape_int(top_k, "top_k")
    if top_k > E:
        raise RuntimeConfigError(f"top_k ({top_k}) is larger than num_experts ({E})")
    if expert_bytes is None:
        gb = params.get("cache.expert_size_gb")
        expert_bytes = (gb if gb is not None else DEFAULT_EXPERT_GB) * 1e9
    try:
        lay.expert_bytes = float(expert_bytes)
    except (TypeError, ValueError):
        raise RuntimeConfigError(f"expert_bytes must be a number of bytes, got {expert_bytes!r}") from None
    if not lay.expert_bytes > 0 or lay.expert_bytes == float("inf"):
        raise RuntimeConfigError(f"expert_bytes must be a positive number of bytes, got {expert_bytes!r}")
    bad_pins = sorted(e for e in params["cache.pin"] if not 0 <= e < E)
    if bad_pins:
        raise RuntimeConfigError(f"cache.pin lists expert {bad_pins[0]}, but the model has "
                                 f"{E} experts per layer (ids 0..{E - 1})")
    if cost is not None and not isinstance(cost, CostModel):
        raise RuntimeConfigError(f"cost must be an mpl.runtime CostModel (or None), got {cost!r}")
    lay.cost = cost if cost is not None else CostModel()
    for rule in (params["cache.eviction"], *features.get("evictions", ())):
        why = rule_error(str(rule))
        if why is not None:
            raise RuntimeConfigError(why)
    lay.tiers = None
    if features.get("tiers"):
        lay.pins = frozenset()
        return _tiered(lay, params, features, layer_ids, stored_bits)
    # (checked as for a tiered policy; the layer ids map per-layer pins to MoE-layer ordinals)
    stored_bits_of(stored_bits)
    ids = None if layer_ids is None else layer_id_list(layer_ids, "layer_ids", L)
    lay.pins = pinned_keys(params["cache.pin"], features.get("layer_pins", ()), L, E, ids)
    per_layer = bool(features.get("per_layer"))
    # cache.capacity, unless per_layer.total_budget gives it (mpl.schema.missing_required)
    missing = missing_required(lambda k: params.get(k) is not None and (
        per_layer or not k.startswith("per_layer.")))
    if missing:
        raise RuntimeConfigError(f"{missing[0]} is required and the parameters have none")
    # [total_budget given, cache.capacity not] each layer's default capacity is its share of
    # the budget (a size budget: as many experts as fit, over every layer); [capacity_factor]
    # the fraction of the experts the cache can hold (one layer's with per_layer, else every
    # MoE layer's), rounded up: a slot count like any other from here on
    first = capacity_of(params, L, E, per_layer)
    if first is None:
        first = max(1, lay.slots(params["per_layer.total_budget"]) // L)
    reachable = (first, *features.get("capacities", ()))
    slots = [lay.slots(c) for c in reachable]
    lay.capacity = cap = slots[0]
    # a cache never holds more keys than the model has experts (a layer's cache: that layer's;
    # the shared cache: every MoE layer's), so the slot pool stops there: the requested slots
    # drive every decision, the pool (and the mechanism's device memory, num_slots) is only
    # what can ever be occupied
    max_slots = L * E
    lay.per_layer = per_layer
    if lay.per_layer:
        lay.min_cap = int(params["per_layer.min_capacity"])
        lay.max_cap = int(params["per_layer.max_capacity"])
        tb = params.get("per_layer.total_budget")
        lay.budget_derived = tb is None
        # (total_budget may be a size: slots through capacity_slots, as capacity's)
        lay.total_budget = L * cap if tb is None else lay.slots(tb)
        totals = [lay.total_budget] + [lay.slots(b) for b in features.get("budgets", ())]
        if lay.budget_derived:       # an adapt rule setting capacity moves the budget
            totals += [L * c for c in slots[1:]]
        # allocations never exceed the budget nor layers x max_capacity (adapt rules can move
        # all three: the pool holds the largest split they reach)
        lo = max([lay.min_cap] + [int(x) for x in features.get("min_capacities", ())])
        hi = max([lay.max_cap] + [int(x) for x in features.get("max_capacities", ())])
        lay.requested_slots = max(L * lo, min(max(totals), L * hi))
        _pool_size(lay, max_slots, f"{L} MoE layers' caches")
        try:
            lay.capacities = allocate([1.0] * L, lay.total_budget, lay.min_cap, lay.max_cap)
        except ValueError as e:
            raise RuntimeConfigError(str(e)) from None
    else:
        lay.requested_slots = max(slots)
        _pool_size(lay, max_slots, "the shared cache")
        lay.capacities = [cap]
        lay.total_budget = None
        lay.budget_derived = True
        lay.min_cap = lay.max_cap = 0
    lay.cpu_limit = lay.cost.cpu_token_limit(lay.expert_bytes,
                                             float(params["schedule.offload_threshold_ms"]))
    return lay


def _tiered(lay: Layout, params: dict, features: dict, layer_ids, stored_bits) -> Layout:
    """A tiered policy's layout: its tiers on the shape (``lay.tiers``), one device cache per
    set of tiers (its top tier when that is a gpu tier, else none: 0 slots), all drawing from
    one slot pool of the top tiers' slots (in units: parts with granularity_split), each
    capped at the keys of its layers as a shared cache's is."""
    E = lay.num_experts
    t = lay.tiers = tier_layout(features["tiers"], lay.num_layers, E, lay.expert_bytes,
                                layer_ids=layer_ids, stored_bits=stored_bits)
    tops = [lv.tiers[0].slots if lv.tiers[0].kind == "gpu" else 0 for lv in t.levels]
    lay.per_layer = False
    lay.capacities = tops
    lay.capacity = tops[t.level_of[0]]
    lay.total_budget, lay.budget_derived, lay.min_cap, lay.max_cap = None, True, 0, 0
    used = [i for i, lv in enumerate(t.levels) if lv.layers]
    lay.requested_slots = sum(tops[i] for i in used)
    lay.pool_size = sum(min(tops[i], len(t.levels[i].layers) * E * t.levels[i].split) for i in used)
    if lay.pool_size > SLOT_POOL_MAX:
        raise RuntimeConfigError(
            f"the policy's top tiers ask for {lay.pool_size:,} slots on a model of "
            f"{lay.num_layers:,} MoE layers x {E:,} experts, more than the {SLOT_POOL_MAX:,} "
            f"slots a runtime's slot pool holds: lower the top tiers' capacities")
    lay.cpu_limit = lay.cost.cpu_token_limit(lay.expert_bytes,
                                             float(params["schedule.offload_threshold_ms"]))
    return lay


def capacity_of(params: dict, num_layers: int, num_experts: int, per_layer: bool):
    """``cache.capacity`` as the policy gives it (slots, or a Size), or the slots of
    ``cache.capacity_factor`` on this shape (:func:`mpl.schema.factor_slots`: of one layer's
    experts with per-layer caches, else of every MoE layer's); None when neither is given
    (``per_layer.total_budget`` sizes the caches)."""
    cap = params.get("cache.capacity")
    if cap is not None:
        return cap
    factor = params.get("cache.capacity_factor")
    if factor is None:
        return None
    return factor_slots(factor, num_experts if per_layer else num_layers * num_experts)


def _pool_size(lay: Layout, max_slots: int, what: str) -> None:
    """The slot pool: the slots the policy asks for, at most every key of the model, and at
    most SLOT_POOL_MAX (a free list the runtime holds, and device memory the mechanism
    allocates): RuntimeConfigError beyond, naming both numbers."""
    n = min(lay.requested_slots, max_slots)
    if n > SLOT_POOL_MAX:
        raise RuntimeConfigError(
            f"the policy asks for {lay.requested_slots:,} slots for {what} on a model of "
            f"{lay.num_layers:,} MoE layers x {lay.num_experts:,} experts, more than the "
            f"{SLOT_POOL_MAX:,} slots a runtime's slot pool holds: lower cache.capacity "
            f"(or per_layer.total_budget, per_layer.max_capacity)")
    lay.pool_size = n


class PureRuntime:
    """The pure-Python runtime of one policy for a model shape (the reference backend). A
    compiled policy module subclasses it with its specialised ``dispatch`` and
    ``replay_records``; users hold it through :class:`mpl.runtime.backend.Runtime`."""

    def __init__(self, lay: Layout, params: dict, features: dict, rules=()):
        self._guard = Guard()          # one dispatcher at a time (mpl.runtime.guard)
        self.p = dict(params)
        self.features = dict(features)
        self.num_layers = L = lay.num_layers
        self.num_experts = lay.num_experts
        self.top_k = lay.top_k
        self._ids = frozenset(range(lay.num_experts))     # the valid expert ids (dispatch checks)
        self.expert_bytes = lay.expert_bytes
        self.cost = lay.cost
        self.pins = lay.pins
        self.w_default = 1.0 / self.top_k

        # ---- counters (stats)
        self.step = -1                # the first dispatch starts step 0
        self._last_layer = 1 << 60
        self.accesses = 0
        self.evictions = 0
        self.demand_loads = self.background_loads = self.prefetch_loads = 0
        self.prefetch_useful = 0
        self.cpu_computes = self.streamed = 0
        self.stall = 0.0
        self.dispatches = 0
        self.l_acc = [0] * L
        self.l_hit = [0] * L
        self.adapt_log: list = []

        # ---- caches
        self.per_layer = lay.per_layer
        self.capacity = lay.capacity
        self.requested_slots = lay.requested_slots
        self.pool = SlotFreeList(lay.pool_size)
        if self.per_layer:
            self.min_cap = lay.min_cap
            self.max_cap = lay.max_cap
            self.budget_derived = lay.budget_derived
            self.total_budget = lay.total_budget
            self.allocation = params["per_layer.allocation"]
            self.rebalance_interval = int(params["per_layer.rebalance_interval"])
            self.signal = Signal(L, int(params["per_layer.entropy_window"])) if features.get("signal") else None
            self.caches = [Cache(c, make_store(params["cache.eviction"], c, self.p), self.pool,
                                 self.pins, layer=i) for i, c in enumerate(lay.capacities)]
        else:
            cap = lay.capacity
            shared = Cache(cap, make_store(params["cache.eviction"], cap, self.p), self.pool, self.pins)
            self.caches = [shared] * L
            self.signal = None

        # ---- schedule
        self.mode = params["schedule.mode"]
        self.offload_ms = float(params["schedule.offload_threshold_ms"])
        self.priority = bool(params["schedule.priority_routing"])
        self._cpu_limit = lay.cpu_limit
        self._miss = self._miss_for(self.mode)

        # ---- prefetch
        self.strategy = params["prefetch.strategy"]
        self.budget = int(params["prefetch.budget"])
        self.lookahead = int(params["prefetch.lookahead"])
        self.history = (History(L, int(params["prefetch.history_window"]), self.num_experts)
                        if features.get("history") else None)
        self.affinity = (Affinity(L, int(features.get("affinity_depth", self.lookahead)),
                                  float(params["prefetch.affinity_threshold"]))
                         if features.get("affinity") else None)
        self.learned = (Learned(L, self.num_experts, int(params["prefetch.context_layers"]),
                                int(params["prefetch.history_window"]),
                                float(params["prefetch.confidence"]),
                                int(features.get("affinity_depth", self.lookahead)))
                        if features.get("learned") else None)
        self._pf: dict = {}          # prefetched keys not yet accessed

        # ---- triggers
        self.mem_threshold = params["cache.memory_threshold"]
        self.mem_headroom = float(params["cache.memory_headroom"])
        self.mem_budget = float(params["cache.memory_budget_gb"]) * 1e9
        self._set_ttl(params["cache.ttl"])
        self._ttl = OrderedDict() if features.get("ttl") else None

        # ---- monitor + adapt
        self.monitor = (Monitor(int(params["monitor.window"]), int(params["monitor.log_interval"]),
                                params["monitor.metrics"]) if features.get("monitor") else None)
        # the warm-up (monitor.warmup): adapt rules are evaluated from the first eviction on
        # (a policy without rules has nothing to wait for)
        self._warm = params.get("monitor.warmup", "first_eviction") != "first_eviction" or not rules
        self._log_emitted = 0        # monitor log records handed to the logger
        self.rules = [_Rule(armed=inv is None) for inv in rules]
        self._rule_inverse = list(rules)          # rule index -> inverse_of (or None)
        self._partner = {inv: i for i, inv in enumerate(rules) if inv is not None}

    # ------------------------------------------------------------------ argument checks
    # The generated dispatch tests its arguments cheaply and calls these only when a test
    # fails (or an argument has an unusual type); mpl.runtime.args converts what is usable
    # and raises DispatchError for the rest (the compiled engine's slow path is the same
    # module's normalize()).
    def _check_layer(self, layer) -> int:
        return _args.layer(layer, self.num_layers)

    _check_list = staticmethod(_args.id_list)
    _check_ids = staticmethod(_args.ids)
    _check_weights = staticmethod(_args.weights)
    _check_tokens = staticmethod(_args.tokens)
    _check_step = staticmethod(_args.step)

    def _bad_experts(self, experts) -> None:
        _args.bad_experts(experts, self.num_experts)

    def _check_predictions(self, predictions) -> dict:
        return _args.predictions(predictions, self.num_layers, self.num_experts)

    # ------------------------------------------------------------------ helpers
    def _slots(self, capacity) -> int:
        return capacity_slots(capacity, self.expert_bytes)

    def _set_ttl(self, ttl) -> None:
        if ttl is None:
            self.ttl_n, self.ttl_steps = None, False
        else:
            self.ttl_n = int(getattr(ttl, "n", ttl))
            self.ttl_steps = getattr(ttl, "unit", "accesses") == "steps"

    def _miss_for(self, mode):
        return {"gpu_only": self._miss_gpu, "cpu_fallback": self._miss_cpu,
                "hybrid": self._miss_hybrid}[mode]

    def _stamp(self):
        return self.step if self.ttl_steps else self.accesses

    def _gone(self, key, slot, evicted) -> None:
        """Bookkeeping for a key that left the device (any reason)."""
        evicted.append((key, slot))
        self.evictions += 1
        if self._pf:
            self._pf.pop(key, None)
        if self._ttl is not None:
            self._ttl.pop(key, None)

    def _arrived(self, key) -> None:
        if self._ttl is not None and key not in self.pins:
            self._ttl[key] = self._stamp()

    # ------------------------------------------------------------------ misses
    def _load(self, cache, key, w, inuse, loads, evicted, kind) -> int | None:
        store = cache.store
        if store.filters and not store.admits(key):
            return None
        r = cache.admit(key, w, inuse)
        if r is None:
            return None
        slot, victim = r
        if victim is not None:
            self._gone(victim, slot, evicted)
        loads.append((key, slot, victim, kind))   # a Load (see Plan.raw_loads)
        self._arrived(key)
        return slot

    def _miss_gpu(self, cache, key, w, tokens, inuse, loads, evicted) -> int:
        store = cache.store
        if store.needs_miss and key not in self.pins:
            store.miss(key, w)
        slot = self._load(cache, key, w, inuse, loads, evicted, DEMAND)
        if slot is None:
            self.streamed += 1
            return STREAM
        self.demand_loads += 1
        return slot

    def _miss_cpu(self, cache, key, w, tokens, inuse, loads, evicted) -> int:
        store = cache.store
        if store.needs_miss and key not in self.pins:
            store.miss(key, w)
        self.cpu_computes += 1
        if self._load(cache, key, w, inuse, loads, evicted, BACKGROUND) is not None:
            self.background_loads += 1
        return CPU

    def _miss_hybrid(self, cache, key, w, tokens, inuse, loads, evicted) -> int:
        if tokens < self._cpu_limit:
            return self._miss_cpu(cache, key, w, tokens, inuse, loads, evicted)
        return self._miss_gpu(cache, key, w, tokens, inuse, loads, evicted)

    # ------------------------------------------------------------------ prefetch
    def _proposals(self, layer, experts, predictions) -> list:
        L = self.num_layers
        strategy = self.strategy
        per_target = []
        for d in range(1, min(self.lookahead, L) + 1):
            t = (layer + d) % L
            if strategy == "affinity":
                cand = self.affinity.predict(layer, experts, d)
            elif strategy == "learned":
                cand = self.learned.predict(layer, self.step, d)
            elif strategy == "lookahead" and predictions and t in predictions:
                cand = list(predictions[t])
            else:                      # history, and lookahead's fallback
                cand = self.history.top(t, self.budget) if self.history is not None else []
            per_target.append((t, cand))
        out = []
        seen = set()
        b = self.budget
        rank = 0
        while len(out) < b:
            progressed = False
            for t, cand in per_target:
                if rank < len(cand):
                    progressed = True
                    key = (t, cand[rank])
                    if key not in seen:
                        seen.add(key)
                        out.append(key)
                        if len(out) >= b:
                            break
            if not progressed:
                break
            rank += 1
        return out

    def _prefetch(self, layer, experts, predictions, inuse, loads, evicted) -> None:
        props = self._proposals(layer, experts, predictions)
        if props:
            self._issue(props, inuse, loads, evicted)

    def _issue(self, props, inuse, loads, evicted) -> None:
        """Turn proposals into PREFETCH loads; never evict keys in use or proposed now."""
        protect = None
        w = self.w_default
        caches = self.caches
        pf = self._pf
        pins = self.pins
        ttl = self._ttl
        n = 0
        for key in props:
            cache = caches[key[0]]
            res = cache.resident
            if key in res:
                continue
            if len(res) > cache.capacity:
                continue        # over capacity (a deferred cut): no prefetch into it
            store = cache.store
            if store.filters and not store.admits(key):
                continue
            if len(res) >= cache.capacity or not cache.pool.free:
                if protect is None:
                    protect = inuse.union(props)
                victim = store.evict(protect, key)
                if victim is None:
                    continue
                slot = res.pop(victim)
                evicted.append((victim, slot))
                self.evictions += 1
                pf.pop(victim, None)
                if ttl is not None:
                    ttl.pop(victim, None)
            else:
                victim = None
                slot = cache.pool.take()
            res[key] = slot
            if key not in pins:
                store.insert(key, w)
                if ttl is not None:
                    ttl[key] = self._stamp()
            loads.append((key, slot, victim, PREFETCH))
            n += 1
            pf[key] = True
        self.prefetch_loads += n

    # ------------------------------------------------------------------ triggers
    def _used_bytes(self) -> float:
        return self.pool.used * self.expert_bytes

    def _distinct_caches(self):
        return self.caches if self.per_layer else self.caches[:1]

    def _evict_some(self, inuse, evicted) -> bool:
        """Evict one victim (for memory pressure): from the cache with the most evictable
        residents (per-layer: ties to the lower layer)."""
        best = None
        for c in self._distinct_caches():
            n = len(c.store)
            if n and (best is None or n > len(best.store)):
                best = c
        if best is None:
            return False
        r = best.evict_one(inuse)
        if r is None:
            # the largest store only holds keys in use: try the others
            for c in self._distinct_caches():
                if c is not best and len(c.store):
                    r = c.evict_one(inuse)
                    if r is not None:
                        break
        if r is None:
            return False
        self._gone(r[0], r[1], evicted)
        return True

    def _pressure(self, inuse, evicted, force=False) -> None:
        thr = self.mem_threshold
        if not force and (thr is None or self._used_bytes() < thr * self.mem_budget):
            return
        target = self.mem_headroom * self.mem_budget
        while self._used_bytes() > target:
            if not self._evict_some(inuse, evicted):
                break

    def _ttl_sweep(self, inuse, evicted) -> None:
        if self.ttl_n is None or self._ttl is None:
            return
        limit = self._stamp() - self.ttl_n
        od = self._ttl
        expired = []
        for key, t in od.items():
            if t > limit:
                break
            if key not in inuse:
                expired.append(key)
        for key in expired:
            slot = self.caches[key[0]].remove(key)
            self._gone(key, slot, evicted)

    def _flush(self, inuse, evicted) -> None:
        for c in self._distinct_caches():
            for key in c.store.keys():
                if key not in inuse:
                    slot = c.remove(key)
                    self._gone(key, slot, evicted)

    def _trim(self, cache, layer, experts, evicted) -> None:
        """The cache is over its capacity (a cut or a rebalance could not evict keys that
        were in use): evict down to it now, still sparing the keys of this dispatch."""
        inuse = {(layer, x) for x in experts}
        for key, slot in cache.set_capacity(cache.capacity, inuse):
            self._gone(key, slot, evicted)

    # ------------------------------------------------------------------ per-layer budgets
    def _rebalance(self, allocation, inuse, evicted) -> None:
        weights = (self.signal.weights(allocation) if self.signal is not None
                   else [1.0] * self.num_layers)
        # an adapt rule may have moved the budget or the bounds (the checker refuses splits
        # that cannot work for a known model; without one, the bounds give way to the budget)
        lo = min(self.min_cap, self.total_budget // self.num_layers)
        caps = allocate(weights, self.total_budget, lo, max(lo, self.max_cap))
        # shrink first (frees slots), then grow: the pool is never over-committed
        for c, n in zip(self.caches, caps):
            if n < c.capacity:
                for key, slot in c.set_capacity(n, inuse):
                    self._gone(key, slot, evicted)
        for c, n in zip(self.caches, caps):
            if n >= c.capacity:   # a cache still above its capacity (a cut that met keys in
                for key, slot in c.set_capacity(n, inuse):   # use) finishes its cut here
                    self._gone(key, slot, evicted)

    # ------------------------------------------------------------------ adapt
    def set_value(self, key, value, inuse, evicted) -> None:
        """Apply one adapt action ``key = value`` in place (its action:
        :data:`mpl.runtime.adapt.ACTIONS`)."""
        self.p[key] = value
        action = ADAPT_ACTIONS.get(key)
        if action is not None:
            action(self, key, value, inuse, evicted)

    def _current(self, key):
        if key == "cache.capacity":
            return self.capacity
        return self.p.get(key)

    def _fire(self, index, line, actions, inuse, evicted) -> None:
        """A rule fired: apply its actions in place, log each, arm its inverse."""
        base = {"step": self.step, "access": self.monitor.total() if self.monitor else self.accesses,
                "rule": f"rule{index}", "line": line}
        for kind, key, value in actions:
            if kind == "set":
                old = self._current(key)
                self.set_value(key, value, inuse, evicted)
                self.adapt_log.append({**base, "key": key, "old": _plain(old), "new": _plain(value)})
            elif kind == "trigger":
                if key == "memory_pressure":
                    self._pressure(inuse, evicted, force=True)
                elif key == "ttl":
                    self._ttl_sweep(inuse, evicted)
                else:
                    self._flush(inuse, evicted)
                self.adapt_log.append({**base, "key": "trigger", "old": None, "new": key})
            else:                               # rebalance
                old = self.allocation if self.per_layer else None
                self.set_value("per_layer.allocation", value, inuse, evicted)
                self.adapt_log.append({**base, "key": "per_layer.allocation", "old": old,
                                       "new": value})
        partner = self._partner.get(index)
        if partner is not None:                 # a conditional pair: arm the restoring half
            self.rules[partner].armed = True
        inv = self._rule_inverse[index]
        if inv is not None:                     # the restoring half fired: re-arm the first
            self.rules[inv].armed = True

    def _advance(self, r: _Rule, unit: str, n: int, tokens: int) -> bool:
        """The condition holds at this access: advance the rule's counter; True to fire."""
        if unit == "accesses":
            r.held += 1
        elif unit == "steps":
            if r.mark != self.step:
                if r.mark is not None:
                    r.held += 1
                r.mark = self.step
        else:                                   # tokens: tokens of each new step
            if r.mark != self.step:
                if r.mark is not None:
                    r.held += tokens
                r.mark = self.step
        return r.held >= n

    # ------------------------------------------------------------------ monitor
    def _observe(self, hit, tokens, inuse, evicted) -> None:
        """Push this dispatch into the monitor window; evaluate the adapt rules per access;
        a log record every log_interval accesses (handed to the logger after the dispatch,
        :meth:`_emit_logs`). Until the warm-up ends (``monitor.warmup``: the cache has filled
        once, unless the policy says ``none``) the rules are not evaluated; the dispatch that
        ends it (by the end of its accesses, prefetches and triggers an eviction happened or
        every slot of the pool is occupied) clears the window, so the rules judge only what
        came after the cold start."""
        m = self.monitor
        seen = m.seen
        loads = self.demand_loads + self.background_loads + self.prefetch_loads
        ev = self.evictions - seen[0]
        ld = loads - seen[1]
        pfl = self.prefetch_loads - seen[2]
        pfu = self.prefetch_useful - seen[3]
        st = self.stall - seen[4]
        last = len(hit) - 1
        rules = self.rules if self._warm else None
        for j, h in enumerate(hit):
            window = m.window            # (read at every access: an adapt rule may resize it)
            i = m.acc % window
            v = 1 if h else 0
            ring = m.ring
            m.hits += v - ring[i]
            ring[i] = v
            m.acc += 1
            events = m.events
            if events and events[0][0] <= m.acc - window:
                m.expire()
            if j == last:
                m.push_events(ev, ld, pfl, pfu, st)
                m.seen = [self.evictions, loads, self.prefetch_loads, self.prefetch_useful,
                          self.stall]
            if rules:
                self._eval_rules(tokens, inuse, evicted)
            if (m.acc + m.skipped) % m.log_interval == 0:
                rec = {"access": m.acc + m.skipped, "step": self.step}
                for name in m.metrics:
                    rec[name] = m.value(name)
                m.log.append(rec)
        if not self._warm and (self.evictions or not self.pool.free):   # the warm-up ends:
            # the cache filled (an eviction, or the slot pool is full: it holds every expert
            # it can); the window starts afresh
            self._warm = True
            m.restart()

    def _eval_rules(self, tokens, inuse, evicted) -> None:  # pragma: no cover - generated
        pass

    def _emit_logs(self) -> None:
        """The monitor's new log records to the logger (after a dispatch released the lock;
        the compiled engine does the same)."""
        m = self.monitor
        new = m.log[self._log_emitted:]
        self._log_emitted += len(new)
        if new and log.isEnabledFor(logging.DEBUG):
            for rec in new:
                log.debug("monitor %s", dict(rec))

    # ------------------------------------------------------------------ public
    @property
    def num_slots(self) -> int:
        return self.pool.size

    def hits(self, layer, experts, weights=None, tokens=1, *, step=None, predictions=None):
        """dispatch() for a caller that needs no Plan when every access hit and the dispatch
        moved nothing (the offload engine on a pool that holds the model): True then, else
        the Plan."""
        plan = self.dispatch(layer, experts, weights, tokens, step=step, predictions=predictions)
        if not plan.raw_loads and not plan.evicted and all(plan.hit):
            return True
        return plan

    def add_stall(self, ms: float) -> None:
        """The mechanism reports a measured (or the replayer a simulated) stall, in ms:
        a finite number >= 0 (anything else is a DispatchError and changes nothing)."""
        if not _finite(ms) or ms < 0:
            raise DispatchError(f"a stall must be a finite number of milliseconds >= 0, got {ms!r}")
        g = self._guard
        g.begin("a stall report")
        try:
            self.stall += float(ms)
        finally:
            g.end()

    def set(self, key, value) -> list:
        """An adapt action applied between dispatches (mpl.runtime.backend.Runtime.set, which
        checks the value): what it evicted, as (key, slot) pairs."""
        g = self._guard
        g.begin("a change")
        try:
            evicted: list = []
            self.set_value(key, value, frozenset(), evicted)
            return evicted
        finally:
            g.end()

    # The readers below hold the guard: another thread's dispatch finishes first, so they
    # see the state between two dispatches (mpl.runtime.guard).
    def capacities(self) -> list:
        with self._guard.read():
            if self.per_layer:
                return [c.capacity for c in self.caches]
            return [self.caches[0].capacity]

    def resident(self) -> dict:
        with self._guard.read():
            out = {}
            for c in self._distinct_caches():
                out.update(c.resident)
            return dict(sorted(out.items()))

    def store_keys(self) -> list:
        """Per cache its resident keys as its eviction store orders them, coldest first."""
        with self._guard.read():
            return [list(c.store.keys()) for c in self._distinct_caches()]

    def metrics(self) -> dict:
        """The windowed metrics now (needs a monitor block or adapt rules)."""
        with self._guard.read():
            return self.monitor.snapshot() if self.monitor is not None else {}

    def monitor_log(self) -> list:
        """The monitor's log records so far."""
        with self._guard.read():
            return [dict(r) for r in self.monitor.log] if self.monitor is not None else []

    def values(self) -> dict:
        """The adaptable parameters' values now, as the adapt log shows them."""
        with self._guard.read():
            return {k: (self.capacity if k == "cache.capacity" else _plain(self.p.get(k)))
                    for k in ADAPT_ACTIONS}

    def learned_dump(self):
        """The learned predictor's state (None without one)."""
        with self._guard.read():
            return self.learned.dump() if self.learned is not None else None

    def stats(self) -> dict:
        with self._guard.read():
            return self._stats()

    def _stats(self) -> dict:
        loads = self.demand_loads + self.background_loads + self.prefetch_loads
        acc = sum(self.l_acc)
        hits = sum(self.l_hit)
        if self.per_layer:
            caps = [c.capacity for c in self.caches]
        else:
            caps = [0] * self.num_layers
            for key in self.caches[0].resident:
                caps[key[0]] += 1
        return {
            "accesses": acc,
            "hits": hits,
            "misses": acc - hits,
            "hit_rate": hits / acc if acc else 0.0,
            "evictions": self.evictions,
            "loads": loads,
            "demand_loads": self.demand_loads,
            "background_loads": self.background_loads,
            "prefetch_loads": self.prefetch_loads,
            "bytes_loaded": int((loads + self.streamed) * self.expert_bytes),
            "requested_slots": self.requested_slots,
            "num_slots": self.pool.size,
            "prefetch_issued": self.prefetch_loads,
            "prefetch_useful": self.prefetch_useful,
            "prefetch_accuracy": (self.prefetch_useful / self.prefetch_loads
                                  if self.prefetch_loads else 0.0),
            "cpu_computes": self.cpu_computes,
            "streamed": self.streamed,
            "stall_ms": self.stall,
            "per_layer": [{"layer": i, "accesses": self.l_acc[i], "hits": self.l_hit[i],
                           "hit_rate": self.l_hit[i] / self.l_acc[i] if self.l_acc[i] else 0.0,
                           "capacity": caps[i]} for i in range(self.num_layers)],
            "adapt_log": [dict(e) for e in self.adapt_log],
        }

    get_stats = stats


#: a size's slots saturate here (2^31 - 1, the stores' largest capacity): a cache this large
#: holds every key of any shape the compiled engine takes (2^22) with room for the stores'
#: smallest share of it (s3fifo's small queue, a tenth) to hold them all too, so it decides as
#: any larger one would; far beyond every device's memory
CAPACITY_SLOTS_MAX = (1 << 31) - 1


def capacity_slots(capacity, expert_bytes: float) -> int:
    """The slots of a capacity: a count as it is, a size as many experts of ``expert_bytes``
    as fit; RuntimeConfigError when a size holds no expert (never silently one slot)."""
    b = getattr(capacity, "bytes", None)
    if b is None:
        return int(capacity)
    n = int(b // expert_bytes)
    if n < 1:
        raise RuntimeConfigError(f"cache.capacity of {int(b)} bytes is smaller than one expert "
                                 f"({int(expert_bytes)} bytes): it gives no slot; give at least "
                                 f"one expert's size or a slot count")
    return min(n, CAPACITY_SLOTS_MAX)


def _plain(v):
    """A log-friendly value (sizes and counts as their numbers)."""
    if hasattr(v, "bytes"):
        return f"{v.bytes}B"
    if hasattr(v, "n") and hasattr(v, "unit"):
        return v.n
    return v
