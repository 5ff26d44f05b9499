"""What a policy can reach: one frozen :class:`Features`, computed once from the IR.

A feature is reachable when the policy's initial values *or any value an adapt rule can set*
need it (``reachable`` lists those values for one parameter). The code generator emits only
the code paths a policy's features name; the HuggingFace adapter (``mpl.offload.hf``) builds
only the machinery they need (a lookahead over the routers, CPU experts, routing weights);
the replayer (``mpl.sim.replay``) reads them to decide what a trace replay needs.

The runtime never imports this module (it imports only ``mpl.runtime`` and ``mpl.schema``): a
compiled module passes it the plain dict :meth:`Features.runtime_dict` returns (the
``FEATURES`` table of the generated module), which ``mpl.runtime.core`` reads with
``features.get(name)``. The fields marked ``runtime=False`` serve the compiler's clients only
and are not part of that dict.

Imports only :mod:`mpl.ir` and :mod:`mpl.schema` (no compiler, no lark, no torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from mpl import ir as _ir
from mpl import schema as _schema


#: eviction rules whose store needs ``begin(step, layer)`` before each dispatch's accesses:
#: the schema's ``clocked`` values (the stores' ``clocked``; a test keeps the two in step)
CLOCKED_EVICTIONS = tuple(e.name for e in _schema.param("cache.eviction").enum if e.clocked)


def reachable(pir: _ir.PolicyIR, key: str) -> list:
    """The values ``key`` can take: the initial one, then those adapt rules set (in order)."""
    vals = [pir.values[key]]
    for rule in pir.adapt:
        for a in rule.actions:
            if isinstance(a, _ir.SetAction) and a.key == key and a.value not in vals:
                vals.append(a.value)
            if (key == "per_layer.allocation" and isinstance(a, _ir.RebalanceAction)
                    and a.allocation not in vals):
                vals.append(a.allocation)
    return vals


def _triggers(pir) -> set:
    return {a.trigger for r in pir.adapt for a in r.actions if isinstance(a, _ir.TriggerAction)}


def _client(default=False):
    """A field for the compiler's clients only (not passed to the runtime)."""
    return field(default=default, metadata={"runtime": False})


@dataclass(frozen=True)
class Features:
    """What the generated dispatch must contain (and the runtime must track)."""

    per_layer: bool
    modes: tuple                 # schedule.mode values, initial first
    lru_only: bool               # every reachable eviction is plain lru
    weighted: bool               # a score eviction (needs the routing weights)
    filters: bool                # a frequency_threshold admission filter
    pins: bool
    prefetch: bool               # some strategy other than none
    history: bool                # history or lookahead prefetch (history as fallback)
    affinity: bool
    learned: bool                # the learned predictor (mpl.runtime.prefetch.Learned)
    history_next_only: bool      # history/lookahead one layer ahead only
    lookahead_strategy: bool
    affinity_depth: int          # the largest prefetch.lookahead
    ttl: bool
    memory: bool
    monitor: bool
    rules: bool
    signal: bool                 # per-layer entropy/frequency allocation
    rebalance: bool
    # an adapt rule can set the interval to 0 (never) while the runtime runs
    rebalance_off: bool
    priority: bool
    evictions: tuple             # cache.eviction values, initial first
    strategies: tuple            # prefetch.strategy values, initial first
    allocations: tuple           # per_layer.allocation values (per-layer caches), initial first
    capacities: tuple            # cache.capacity values adapt rules set
    # per-layer budgets and bounds adapt rules set (the slot pool holds the largest split)
    budgets: tuple
    min_capacities: tuple
    max_capacities: tuple
    # memory tiers (SPEC §12): the resolved tiers as plain data (:func:`tiers_table`), () for
    # a policy with a cache block; the runtime builds its tiers from it (mpl.runtime.tiers)
    tiers: tuple = ()
    # the cache's per-layer pins as plain data: ``(first, last, expert ids)`` per
    # ``pin layers = first..last`` item (decoder-layer ids), by first layer; the runtime
    # resolves them with ``cache.pin`` into pinned keys (mpl.runtime.core.pinned_keys)
    layer_pins: tuple = ()
    # an eviction rule that reads the step or the layer the pass is at (CLOCKED_EVICTIONS)
    clocked: bool = _client()
    # an adapt rule (or a conditional value) sets cache.capacity (even to its initial value)
    adapts_capacity: bool = _client()
    # prefetch.strategy can be none (initially or by an adapt rule): dispatch tests it
    prefetch_off: bool = _client()

    @property
    def reads_weights(self) -> bool:
        """Whether a decision reads the router weights (a score eviction, the learned
        predictor, priority routing): a live engine hands them to the runtime then."""
        return self.weighted or self.learned or self.priority

    def runtime_dict(self) -> dict:
        """The plain dict the runtime receives (the generated module's ``FEATURES``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.metadata.get("runtime", True)}


def _eviction_data(ev):
    """A tier's eviction as the runtime takes it: a rule name, or ``("weighted_sum",
    ((rule, weight), ...))``; None for a tier that evicts nothing."""
    if isinstance(ev, _ir.WeightedSum):
        return (_schema.WEIGHTED_SUM, tuple((r, float(w)) for r, w in ev.weights))
    return ev


def _level_data(label: str, first, last, h: _ir.Hierarchy) -> tuple:
    names = [t.name for t in h.tiers]
    tiers = tuple((t.name, t.location.kind, t.location.index, t.dtype, tuple(t.dtype_ladder),
                   t.capacity, t.residency, _eviction_data(t.eviction), t.path, t.implicit)
                  for t in h.tiers)
    moves = tuple((m.event, names.index(m.source), names.index(m.target), m.mechanism,
                   None if m.trigger_threshold is None else float(m.trigger_threshold))
                  for m in h.transitions)
    return (label, first, last, int(h.granularity_split), tiers, moves)


def tiers_table(pir: _ir.PolicyIR) -> tuple:
    """The policy's memory tiers as plain data for the runtime (which does not import the
    IR): one entry per set of tiers, the hierarchy's first (its layers None: every layer no
    band holds), then each band's: ``(label, first layer, last layer, granularity_split,
    tiers, transitions)``; a tier ``(name, location kind, device index, dtype, dtype_ladder,
    capacity, residency, eviction, path, implicit)``; a transition ``(event, source index,
    target index, mechanism, trigger_threshold)``. () for a policy without tiers."""
    out = []
    if pir.hierarchy is not None:
        out.append(_level_data("hierarchy", None, None, pir.hierarchy))
    for b in pir.bands:
        out.append(_level_data(f"layers {b.layers}", b.layers.first, b.layers.last, b.hierarchy))
    return tuple(out)


def _tier_rules(pir: _ir.PolicyIR) -> list[str]:
    """Every single rule a tier of the policy evicts by (a weighted sum's rules included)."""
    out = []
    for h in ([pir.hierarchy] if pir.hierarchy is not None else []) + [b.hierarchy for b in pir.bands]:
        for t in h.tiers:
            ev = t.eviction
            names = [r for r, _ in ev.weights] if isinstance(ev, _ir.WeightedSum) else [ev] if ev else []
            out += [r for r in names if r not in out]
    return out


def features(pir: _ir.PolicyIR) -> Features:
    """The features of ``pir`` (see the module docstring)."""
    ev = reachable(pir, "cache.eviction")
    if pir.tiered:            # the tiers' rules (a tiered policy has no cache block to adapt)
        ev = _tier_rules(pir)
    rules = [p for v in ev for p in str(v).split("|")]
    strategies = [s for s in reachable(pir, "prefetch.strategy") if s != "none"]
    per_layer = pir.per_layer
    allocs = reachable(pir, "per_layer.allocation") if per_layer else []
    trig = _triggers(pir)
    return Features(
        per_layer=per_layer,
        modes=tuple(reachable(pir, "schedule.mode")),
        lru_only=all(r == "lru" for r in rules) and not any("|" in str(v) for v in ev),
        weighted=any(r == "score" for r in rules),
        filters=any(r == "frequency_threshold" for r in rules),
        pins=bool(pir.values["cache.pin"]) or bool(pir.layer_pins),
        prefetch=bool(strategies),
        history=any(s in ("history", "lookahead") for s in strategies),
        affinity="affinity" in strategies,
        learned="learned" in strategies,
        history_next_only=(strategies in (["history"], ["lookahead"])
                           and reachable(pir, "prefetch.lookahead") == [1]),
        lookahead_strategy="lookahead" in strategies,
        affinity_depth=max(int(x) for x in reachable(pir, "prefetch.lookahead")),
        ttl=(not pir.tiered and any(v is not None for v in reachable(pir, "cache.ttl"))) or "ttl" in trig,
        memory=not pir.tiered and any(v is not None for v in reachable(pir, "cache.memory_threshold")),
        monitor="monitor" in pir.blocks or bool(pir.adapt),
        rules=bool(pir.adapt),
        signal=per_layer and any(a in ("entropy", "frequency") for a in allocs),
        rebalance=per_layer and any(int(v) > 0 for v in reachable(pir, "per_layer.rebalance_interval")),
        rebalance_off=per_layer and 0 in reachable(pir, "per_layer.rebalance_interval"),
        priority=any(bool(v) for v in reachable(pir, "schedule.priority_routing")),
        evictions=tuple(str(v) for v in ev),
        strategies=tuple(reachable(pir, "prefetch.strategy")),
        allocations=tuple(allocs),
        # (a tiered policy's adapt actions on the cache have no effect: MPL422)
        capacities=() if pir.tiered else tuple(v for v in reachable(pir, "cache.capacity")[1:]),
        budgets=tuple(reachable(pir, "per_layer.total_budget")[1:]) if per_layer else (),
        min_capacities=tuple(reachable(pir, "per_layer.min_capacity")[1:]) if per_layer else (),
        max_capacities=tuple(reachable(pir, "per_layer.max_capacity")[1:]) if per_layer else (),
        clocked=any(r in CLOCKED_EVICTIONS for r in rules),
        adapts_capacity=not pir.tiered and any(isinstance(a, _ir.SetAction) and a.key == "cache.capacity"
                                               for r in pir.adapt for a in r.actions),
        prefetch_off="none" in reachable(pir, "prefetch.strategy"),
        tiers=tiers_table(pir),
        layer_pins=tuple((p.layers.first, p.layers.last, tuple(p.experts)) for p in pir.layer_pins),
    )
