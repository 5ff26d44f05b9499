"""Adapt actions: how the runtime applies ``key = value`` in place when an adapt rule fires.

:data:`ACTIONS` maps each adaptable parameter (``mpl.schema``: ``Param.adaptable``) to a
function ``action(rt, key, value, inuse, evicted)`` run by :meth:`Runtime.set_value
<mpl.runtime.core.Runtime.set_value>` after it has recorded the new value in ``rt.p``.
``inuse`` are the keys of the current dispatch (never evicted), ``evicted`` collects the
victims for the dispatch's Plan. The runtime does not read the schema (a compiled module runs
with ``mpl.runtime`` alone), so ``tests/test_adapt_compat_actions.py`` holds the keys of
this table equal to the schema's adaptable parameters.
"""

from __future__ import annotations

from types import MappingProxyType

from mpl.runtime.eviction import make_store


def _capacity(rt, key, value, inuse, evicted) -> None:
    cap = rt._slots(value)
    rt.capacity = cap
    if rt.per_layer:
        if rt.budget_derived:
            rt.total_budget = max(rt.num_layers * rt.min_cap,
                                  min(rt.requested_slots, rt.num_layers * cap))
            rt._rebalance(rt.allocation, inuse, evicted)
    else:
        for k, slot in rt.caches[0].set_capacity(min(cap, rt.requested_slots), inuse):
            rt._gone(k, slot, evicted)


def _eviction(rt, key, value, inuse, evicted) -> None:
    for c in rt._distinct_caches():
        c.replace_store(make_store(value, c.capacity, rt.p))


def _store_param(rt, key, value, inuse, evicted) -> None:
    """A parameter the eviction store reads (its ``set_param``)."""
    for c in rt._distinct_caches():
        c.store.set_param(key, value)


def _sets(attr: str, convert=None):
    """The action that sets ``rt.<attr>`` to the value (through ``convert``)."""
    def action(rt, key, value, inuse, evicted) -> None:
        setattr(rt, attr, value if convert is None else convert(value))
    action.__name__ = f"set_{attr}"
    return action


def _sets_on(part: str, attr: str, convert=int):
    """The action that sets ``rt.<part>.<attr>`` when the runtime has that part."""
    def action(rt, key, value, inuse, evicted) -> None:
        obj = getattr(rt, part)
        if obj is not None:
            setattr(obj, attr, convert(value))
    action.__name__ = f"set_{part}_{attr}"
    return action


def _windows(rt, key, value, inuse, evicted) -> None:
    """prefetch.history_window: the history's window and the learned predictor's memory."""
    for part in (rt.history, rt.learned):
        if part is not None:
            part.window = int(value)


def _memory_budget(rt, key, value, inuse, evicted) -> None:
    rt.mem_budget = float(value) * 1e9


def _ttl(rt, key, value, inuse, evicted) -> None:
    rt._set_ttl(value)


def _mode(rt, key, value, inuse, evicted) -> None:
    rt.mode = value
    rt._miss = rt._miss_for(value)


def _offload_threshold(rt, key, value, inuse, evicted) -> None:
    rt.offload_ms = float(value)
    rt._cpu_limit = rt.cost.cpu_token_limit(rt.expert_bytes, rt.offload_ms)


def _monitor_window(rt, key, value, inuse, evicted) -> None:
    if rt.monitor is not None:
        rt.monitor.set_window(int(value))


def _per_layer(action):
    """Only with per-layer caches: without them the checker leaves these actions out
    (MPL308), and the runtime ignores them."""
    def guarded(rt, key, value, inuse, evicted) -> None:
        if rt.per_layer:
            action(rt, key, value, inuse, evicted)
    guarded.__name__ = action.__name__
    return guarded


def _allocation(rt, key, value, inuse, evicted) -> None:
    rt.allocation = value
    rt._rebalance(value, inuse, evicted)


def _total_budget(rt, key, value, inuse, evicted) -> None:
    rt.budget_derived = False
    rt.total_budget = min(rt._slots(value), rt.pool.size)     # a size: as many experts as fit
    rt._rebalance(rt.allocation, inuse, evicted)


def _rebalancing(attr: str):
    """The action that sets a per-layer bound ``rt.<attr>`` and rebalances at once."""
    def action(rt, key, value, inuse, evicted) -> None:
        setattr(rt, attr, int(value))
        rt._rebalance(rt.allocation, inuse, evicted)
    action.__name__ = f"set_{attr}"
    return action


#: adaptable parameter key -> its action
ACTIONS = MappingProxyType({
    "cache.capacity": _capacity,
    "cache.eviction": _eviction,
    "cache.frequency_decay": _store_param,
    "cache.decay_interval": _store_param,
    "cache.freq_threshold": _store_param,
    "cache.freq_window": _store_param,
    "cache.score_ema_alpha": _store_param,
    "cache.crf_half_life": _store_param,
    "cache.memory_threshold": _sets("mem_threshold"),
    "cache.memory_headroom": _sets("mem_headroom", float),
    "cache.memory_budget_gb": _memory_budget,
    "cache.ttl": _ttl,
    "prefetch.strategy": _sets("strategy"),
    "prefetch.budget": _sets("budget", int),
    "prefetch.lookahead": _sets("lookahead", int),
    "prefetch.affinity_threshold": _sets_on("affinity", "threshold", float),
    "prefetch.history_window": _windows,
    "prefetch.confidence": _sets_on("learned", "confidence", float),
    "schedule.mode": _mode,
    "schedule.offload_threshold_ms": _offload_threshold,
    "schedule.priority_routing": _sets("priority", bool),
    "monitor.window": _monitor_window,
    "monitor.log_interval": _sets_on("monitor", "log_interval"),
    "per_layer.allocation": _per_layer(_allocation),
    "per_layer.total_budget": _per_layer(_total_budget),
    "per_layer.min_capacity": _per_layer(_rebalancing("min_cap")),
    "per_layer.max_capacity": _per_layer(_rebalancing("max_cap")),
    "per_layer.rebalance_interval": _per_layer(_sets("rebalance_interval", int)),
    "per_layer.entropy_window": _per_layer(_sets_on("signal", "window")),
})
