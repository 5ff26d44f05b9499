"""A trace as a runtime replays it: its dispatches packed (mpl.runtime.packing.Packed) or as
records, made once per trace and kept while it is unchanged, and :func:`replay_trace`, which
gives a runtime the form its backend reads.

:func:`hold` / :func:`release` / :func:`reusing` memoise what is derived from a trace (its
pack, its step count, its records) while a sweep or a tune replays it many times.
"""

from __future__ import annotations

from array import array
from contextlib import contextmanager

from mpl.runtime import compiled
from mpl.runtime.packing import Packed, pack
from mpl.trace import record_list, records_of


def replay_trace(rt, trace, tl, tick=None, every=0) -> int:
    """``rt.replay_records`` of a trace's dispatches: the compiled backend reads their pack,
    the pure one their records, each made once while the trace is held (:func:`hold`).
    Returns the record count."""
    if rt.backend == "compiled":
        return rt.replay_packed(pack_trace(trace, rt.num_experts), tl, tick, every)
    records = per_trace(trace, ("records",), lambda: record_list(trace.dispatches))
    return rt.replay_records(records, tl, tick, every)


def pack_dispatches(dispatches, num_experts: int) -> Packed:
    """Pack trace Dispatches (mpl.trace) directly: the records ``records_of`` would give,
    without building them. The compiled packer takes the common shapes (exact ints, lists,
    float weights, no predictions); anything else, and the pure backend, packs here."""
    fast = compiled.kernel("pack_dispatches")
    if fast is not None:
        got = fast(dispatches, num_experts)
        if got is not None:
            p = Packed()
            for name, code, raw in zip(("layers", "offs", "experts", "weights", "steps", "tokens"),
                                       "iiidqi", got):
                setattr(p, name, None if raw is None else array(code, raw))
            p.multi, p.weights_mixed = got[6], got[7]
            p.has_w = None if got[8] is None else array("b", got[8])
            p.records = len(p.layers)
            return p
    return pack(records_of(dispatches), num_experts)


# ------------------------------------------------------------------ per-trace reuse
_HELD: dict = {}        # id(trace.dispatches) -> [dispatches, depth, {key: derived value}]


def hold(trace) -> None:
    """From now until :func:`release`, values derived from ``trace`` (its pack, its step
    count) are computed once: the caller promises not to change the trace meanwhile (a sweep
    or a tune replays one trace many times). Holding keeps the trace alive. The values
    depend only on the dispatches, so a copy of the trace with another header (a replay
    fills in the model: mpl.sim.tracemodel.with_model) that shares them shares them too."""
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is not None and ent[0] is d:
        ent[1] += 1
    else:
        _HELD[id(d)] = [d, 1, {}]


def release(trace) -> None:
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is not None and ent[0] is d:
        ent[1] -= 1
        if ent[1] <= 0:
            del _HELD[id(d)]


@contextmanager
def reusing(trace):
    """``hold(trace)`` for the enclosed block."""
    hold(trace)
    try:
        yield trace
    finally:
        release(trace)


def per_trace(trace, key, make):
    """``make()``, memoised under ``key`` while ``trace`` is held (computed afresh otherwise)."""
    d = trace.dispatches
    ent = _HELD.get(id(d))
    if ent is None or ent[0] is not d:
        return make()
    memo = ent[2]
    if key not in memo:
        memo[key] = make()
    return memo[key]


def pack_trace(trace, num_experts: int) -> Packed:
    """The pack of a Trace's dispatches, computed once per trace (:func:`derived`); a trace
    read lazily (mpl.tracecols) brings its columns: no Dispatch is built."""
    return derived(trace, ("pack", num_experts), lambda: pack_of(trace.dispatches, num_experts))


def cached_pack(trace, num_experts: int) -> "Packed | None":
    """The pack :func:`pack_trace` keeps for ``trace``, if it has made it (None: not made,
    or the dispatches changed since)."""
    store = getattr(trace, "derived", None)
    ident = _identity(trace.dispatches)
    if store is not None and ident is not None:
        got = store.get(("pack", num_experts))
        if got is not None and got[0] == ident:
            return got[1]
    ent = _HELD.get(id(trace.dispatches))
    if ent is not None and ent[0] is trace.dispatches:
        return ent[2].get(("pack", num_experts))
    return None


def derived(trace, key, make):
    """``make()``, kept in ``trace.derived`` (mpl.trace.Trace) for as long as the trace's
    dispatches are the same list, unchanged (``Dispatches.version``; a lazily read trace's
    never change); a trace without that record memoises only while held."""
    store = getattr(trace, "derived", None)
    ident = _identity(trace.dispatches)
    if store is None or ident is None:
        return per_trace(trace, key, make)
    got = store.get(key)
    if got is not None and got[0] == ident:
        return got[1]
    value = per_trace(trace, key, make)
    store[key] = (ident, value)
    return value


def _identity(dispatches):
    """What a value derived from ``dispatches`` is valid for (None: nothing tells)."""
    version = getattr(dispatches, "version", None)
    if version is not None:                      # mpl.trace.Dispatches
        return (id(dispatches), version)
    if hasattr(dispatches, "columns"):           # mpl.tracecols.LazyDispatches: immutable
        return (id(dispatches),)
    return None


def pack_of(dispatches, num_experts: int) -> Packed:
    """:func:`pack_dispatches`, or the columns of a lazily read trace's dispatches
    (mpl.tracecols) as they are."""
    cols = getattr(dispatches, "columns", None)
    if cols is None or cols.num_experts != num_experts:
        return pack_dispatches(dispatches, num_experts)
    p = Packed()
    for name in Packed.__slots__:
        setattr(p, name, getattr(cols, name, None))
    if p.multi is None:
        p.multi = []
    return p
