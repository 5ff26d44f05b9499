"""The backend switch and the glue of the compiled replay kernel (``mpl.runtime._fast``).

The pure-Python runtime (``mpl.runtime.core`` and the generated modules) is the reference
and the fallback. When the C extension ``mpl.runtime._fast`` is importable (it is built by
``pip install`` where a C compiler is present, see setup.py) and ``MPL_PURE`` is not set, a
replay of a policy the kernel covers runs whole in C: the records are packed into arrays
(:func:`pack`; once per trace while a sweep or a tune holds it, :func:`hold`), the kernel makes the same decisions as the pure
path (same victims, same slots, same float sums in the same order) and plays each dispatch
on the simulated timeline, and the results are written back into the Runtime and the
Timeline. ``tests/test_fast_equivalence.py`` holds the two backends equal.

The kernel covers policies without prefetch (:func:`unsupported` says why one is not
covered): one schedule mode (``gpu_only``, ``cpu_fallback`` or ``hybrid``); no prefetch; no monitor block and no adapt rules; eviction ``lru``,
``lfu``, ``score``, ``frequency_threshold``, ``arc``, ``s3fifo``, ``lfru`` or a segmented
``a | b``; TTL and memory-pressure triggers; a shared cache or
per-layer caches whose capacities do not move (uniform allocation); pins; priority routing;
records of one or several tokens. Everything else replays on the pure path.

Live ``dispatch()``: where :func:`live_unsupported` allows (one schedule mode; every eviction
rule of the kernel; pins, TTL and memory triggers, history/lookahead/affinity prefetch, the monitor
and adapt rules, shared or per-layer caches) ``Runtime.__init__`` installs
``_fast.LiveState`` as the instance's ``dispatch`` (:func:`install_live`): the generated
dispatch in C with the state held in C (the kernel's stores). :func:`_live_take` moves the
pure structures into it and :func:`live_sync` back, exactly; ``Runtime.__getattr__`` syncs on
any read of the state. Every unusual argument, predictions, an adapt rule firing and a
rebalance the pure path refuses go to the pure path on the synced state. A replay the kernel
does not cover runs through the live dispatch (:func:`_live_replay`).

After a compiled replay the runtime's counters, statistics, residents, slot pool and
stores are those of the pure path (each store loaded from the kernel's dump of it).
"""

from __future__ import annotations

import importlib
import os
from array import array
from contextlib import contextmanager
from functools import lru_cache

from mpl.runtime.routing import distinct
from mpl.runtime.eviction import SEGMENT_RULES, make_store

ENV_PURE = "MPL_PURE"
#: the calling convention of _fast.replay; _fast.c's ABI constant must match (a stale build of
#: an older source is not used)
KERNEL_ABI = 7


def _import_kernel():
    """(the C extension module or None, why it is not used)."""
    if os.environ.get(ENV_PURE, "") not in ("", "0"):
        return None, f"{ENV_PURE} is set"
    try:
        mod = importlib.import_module("mpl.runtime._fast")
        if getattr(mod, "ABI", None) != KERNEL_ABI:
            return None, ("the built mpl.runtime._fast is out of date for this source "
                          "(rebuild it: pip install -e .)")
        return mod, None
    except ModuleNotFoundError as e:
        if e.name == "mpl.runtime._fast":
            return None, ("the C extension mpl.runtime._fast is not built (no C compiler at "
                          "install time?)")
        return None, f"the C extension mpl.runtime._fast does not load ({e})"
    except ImportError as e:           # built for another Python, a broken file, ...
        return None, f"the C extension mpl.runtime._fast does not load ({e})"


_kernel, _WHY = _import_kernel()

_forced_pure = False

#: replays the kernel has run in this process (the tests check that it was used)
kernel_runs = 0
#: replays run through the live dispatch (:func:`_live_replay`)
live_replays = 0
#: ... of which LiveState.replay ran the record loop in C
live_loops_in_c = 0

#: eviction rule -> the kernel's code
RULES = {"lru": 0, "lfu": 1, "score": 2, "arc": 3, "s3fifo": 4, "lfru": 5,
         "frequency_threshold": 6, "crf": 8, "classlru": 9, "vllm_lfru": 10, "farthest_layer": 11}
MODES = {"gpu_only": 0, "cpu_fallback": 1, "hybrid": 2}
SEGMENTED = 7            # "a | b" with a and b single-queue rules (eviction.SEGMENT_RULES)


def rule_code(rule: str) -> tuple[int, int, int] | None:
    """(kernel rule, side a, side b) for an eviction rule as the IR spells it; None if the
    kernel does not have it."""
    if "|" in rule:
        a, b = (x.strip() for x in rule.split("|", 1))
        if a in SEGMENT_RULES and b in SEGMENT_RULES:
            return SEGMENTED, RULES[a], RULES[b]
        return None
    code = RULES.get(rule)
    return None if code is None else (code, 0, 0)

#: rules whose stores' dumps name layers and expert ids besides keys: the kernel's results for
#: a renumbered (wide) shape are not read back into them
_RAW_IDS = ("frequency_threshold", "farthest_layer")
MAX_KEYS = 1 << 26       # layers x experts the kernel accepts (its per-key tables)
LIVE_MAX_KEYS = 1 << 22  # ... and the live dispatch, which keeps its tables between calls
#: The replay kernel's tables take about 90 bytes per key (layers x experts it is given):
#: beyond REMAP_KEYS keys of the model's shape it is given only the layers and experts the
#: records name (see "Keys that occur" below), and beyond KERNEL_KEYS even then (760 MB)
#: the replay takes the pure path, whose memory grows with the keys that occur
REMAP_KEYS = 1 << 20
KERNEL_KEYS = 1 << 23
#: The live dispatch allocates its history and signal windows up front (16 bytes per layer
#: and window row): beyond LIVE_RING_ROWS rows (64 MiB) the pure dispatch holds them
LIVE_RING_ROWS = 1 << 22


def _half_life(p) -> float:
    """cache.crf_half_life in steps (the crf and classlru rules)."""
    v = p.get("cache.crf_half_life", 128)
    return float(getattr(v, "n", v))


def make_guard():
    """A runtime's guard (mpl.runtime.guard): the compiled one where the extension is built
    (the compiled live dispatch takes it without calling Python), else the pure one."""
    from mpl.runtime.guard import Guard, RuntimeBusyError
    g = getattr(_kernel, "Guard", None)
    return g(RuntimeBusyError) if g is not None else Guard()


def available() -> bool:
    """True when the compiled kernel is importable and not switched off."""
    return _kernel is not None and not _forced_pure


def belady_kernel():
    """The compiled Belady optimum (``_fast.belady``, mpl/runtime/_belady.c) when the
    compiled backend is in use, else None (mpl.sim.belady then runs its pure reference)."""
    return getattr(_kernel, "belady", None) if available() else None


def jsonl_kernel():
    """The compiled JSONL row reader (``_fast.jsonl_rows``, mpl/runtime/_jsonl.c) when the
    compiled backend is in use, else None (mpl.tracecols then leaves a JSONL trace to
    mpl.traceio's reader)."""
    return getattr(_kernel, "jsonl_rows", None) if available() else None


def backend() -> str:
    """``"compiled"`` (the C replay kernel is in use where it covers a policy) or ``"pure"``."""
    return "compiled" if available() else "pure"


def backend_info() -> dict:
    """What ``mplc doctor`` prints: the backend, why it is pure, what the kernel covers."""
    why = None
    if _kernel is None:
        why = _WHY
    elif _forced_pure:
        why = "forced by mpl.runtime.fast.pure()"
    return {"backend": backend(), "reason": why,
            "covers": "replay of policies without prefetch, monitor or adapt (any one "
                      "schedule mode; eviction " + ", ".join(RULES) + ", segmented a | b; TTL and "
                      "memory triggers; "
                      "shared or static per-layer caches; pins; priority routing); "
                      "live dispatch() (and the replay of what the kernel does not cover) of "
                      "one-mode policies with any of those stores (pins, TTL and memory "
                      "triggers, history/lookahead/affinity prefetch, monitor, adapt rules, "
                      "shared or per-layer caches); other live dispatch() is pure Python; "
                      "the Belady optimum (mpl.sim.belady)"}


@contextmanager
def pure():
    """Run the enclosed code on the pure-Python path (tests compare the two backends)."""
    global _forced_pure
    old = _forced_pure
    _forced_pure = True
    try:
        yield
    finally:
        _forced_pure = old


def unsupported(rt, packed: "Packed | None" = None) -> str | None:
    """Why the kernel cannot replay this runtime (over these packed records; None: it can)."""
    if not available():
        return "the compiled backend is not in use"
    f = rt.features
    if f.get("monitor") or f.get("rules"):
        return "a monitor block or adapt rules (the kernel has no monitor window)"
    if len(tuple(f.get("modes", ()))) != 1 or rt.mode not in MODES:
        return "a schedule.mode that changes"
    if f.get("prefetch"):
        return "prefetch"
    if f.get("signal"):
        return "per-layer capacities that rebalance on a signal"
    rule = rt.p["cache.eviction"]
    if rule_code(rule) is None:
        return f"eviction {rule!r}"
    L, keys = _kernel_keys(rt, packed)
    if keys > KERNEL_KEYS:
        return "more keys (layers x experts) than the kernel's tables hold"
    if rt.num_layers * rt.num_experts > REMAP_KEYS and \
            any(r.strip() in _RAW_IDS for r in rule.split("|")):
        return (f"eviction {rule!r} on a model shape the kernel renumbers (its store names "
                "layers and experts, not only keys)")
    if rt.step != -1 or any(rt.l_acc) or rt.dispatches or any(c.resident for c in rt._distinct_caches()):
        return "the runtime has already dispatched (the kernel starts from a fresh runtime)"
    if "frequency_threshold" in rule and L * int(rt.p["cache.freq_window"]) * \
            (L if rt.per_layer else 1) > MAX_KEYS:
        return "frequency_threshold windows larger than the kernel's tables"
    if packed is not None and packed.weights_mixed and _reads_weights(rt):
        return "records with and without router weights, for a rule or order that reads them"
    return None


def _reads_weights(rt) -> bool:
    """The router weights matter: a score store (alone or a side) or priority routing."""
    return rt.priority or "score" in (x.strip() for x in rt.p["cache.eviction"].split("|"))


class Packed:
    """Trace records as arrays: per record its layer, step (-1: None), token count and the
    offset of its distinct experts (router order) in ``experts``/``weights``; ``multi``: the
    records of several tokens with their tokens-per-expert (for the timeline's costs)."""

    __slots__ = ("layers", "offs", "experts", "weights", "steps", "tokens", "multi",
                 "weights_mixed", "records")

    def __init__(self):
        self.layers = array("i")
        self.offs = array("i", [0])
        self.experts = array("i")
        self.weights = array("d")
        self.steps = array("q")
        self.tokens = array("i")
        self.multi: list = []           # (record index, {expert: tokens})
        self.weights_mixed = False      # some records with weights, some without
        self.records = 0

    def __len__(self):
        return self.records


def pack(records, num_experts: int) -> Packed:
    """Pack ``(layer, experts, weights, tokens, step, predictions, tokens_of)`` records
    (mpl.sim.replay.records_of). Expert ids out of range raise ValueError."""
    p = Packed()
    layers, offs, exps, ws, steps, toks = p.layers, p.offs, p.experts, p.weights, p.steps, p.tokens
    with_w = without_w = 0
    off = 0
    for i, (layer, experts, weights, tokens, step, _pred, tokens_of) in enumerate(records):
        n = len(experts)
        if n > 1 and len(set(experts)) != n:
            experts, weights = distinct(experts, weights)
            n = len(experts)
        layers.append(layer)
        exps.extend(experts)
        off += n
        offs.append(off)
        if weights is None:
            without_w += 1
        else:
            with_w += 1
            ws.extend(weights)
        steps.append(-1 if step is None else step)
        toks.append(tokens if tokens_of is not None else 1)
        if tokens_of is not None:
            p.multi.append((i, tokens_of))
    p.records = len(layers)
    if with_w and without_w:
        p.weights_mixed = True
    if not with_w:
        p.weights = None
    if exps and (min(exps) < 0 or max(exps) >= num_experts):
        raise ValueError("an expert id out of range in the records")
    return p


def pack_dispatches(dispatches, num_experts: int) -> Packed:
    """Pack trace Dispatches (mpl.trace) directly: the records ``records_of`` would give,
    without building them. The compiled packer takes the common shapes (exact ints, lists,
    float weights); anything else, and the pure backend, packs here (one-token dispatches
    take the short path)."""
    if available():
        got = _kernel.pack_dispatches(dispatches, num_experts)
        if got is not None:
            p = Packed()
            for name, code, raw in zip(("layers", "offs", "experts", "weights", "steps", "tokens"),
                                       "iiidqi", got):
                setattr(p, name, None if raw is None else array(code, raw))
            p.multi, p.weights_mixed = got[6], got[7]
            p.records = len(p.layers)
            return p
    p = Packed()
    layers, offs, exps, ws, steps, toks = p.layers, p.offs, p.experts, p.weights, p.steps, p.tokens
    multi = []
    with_w = without_w = 0
    off = 0
    for d in dispatches:
        rows = d.experts
        wrows = d.weights
        if len(rows) == 1:
            experts = rows[0]
            weights = wrows[0] if wrows is not None else None
            n = len(experts)
            if n > 1 and len(set(experts)) != n:
                experts, weights = distinct(experts, weights)
                n = len(experts)
            toks.append(1)
        else:
            fe = [e for row in rows for e in row]
            fw = [w for row in wrows for w in row] if wrows is not None else None
            experts, weights = distinct(fe, fw)
            n = len(experts)
            tokens_of: dict = {}
            for row in rows:
                for e in set(row):
                    tokens_of[e] = tokens_of.get(e, 0) + 1
            multi.append((len(layers), tokens_of))
            toks.append(len(rows))
        layers.append(d.layer)
        exps.extend(experts)
        off += n
        offs.append(off)
        steps.append(d.step)
        if weights is None:
            without_w += 1
        else:
            with_w += 1
            ws.extend(weights)
    p.multi = multi
    p.records = len(layers)
    p.weights_mixed = bool(with_w and without_w)
    if not with_w:
        p.weights = None
    if exps and (min(exps) < 0 or max(exps) >= num_experts):
        raise ValueError("an expert id out of range in the dispatches")
    return p


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


def steps_and_tokens_of(p: Packed) -> tuple[int, int]:
    """mpl.trace.steps_and_tokens of the dispatches ``p`` packs, from its step and token
    arrays (a step of None is packed as -1)."""
    if _kernel is not None:
        return _kernel.steps_tokens(p.steps, p.tokens)
    per: dict = {}
    for s, t in zip(p.steps, p.tokens):
        if per.get(s, 0) < t:
            per[s] = t
    return len(per), sum(per.values())


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
        setattr(p, name, getattr(cols, name))
    return p


def replay_packed(rt, p: Packed, tl, tick=None, every=0, *, _protect=True,
                  _record=None) -> int | None:
    """Run the packed records through ``rt`` on timeline ``tl`` in the kernel; the record
    count, or None (nothing changed) when the kernel does not cover this runtime.
    ``_protect=False`` is a test-only mode without in-use protection (a victim may be a key
    of the same dispatch), to compare with simulators that have none (libCacheSim).
    ``_record``: a :class:`Decisions` the kernel fills with every access's decision (the
    tests compare them with the pure path's Plans). Holds the runtime's guard (a replay)."""
    with _replaying(rt):
        return _replay_packed(rt, p, tl, tick, every, _protect=_protect, _record=_record)


@contextmanager
def _replaying(rt):
    """A replay of ``rt`` from outside: its guard held and busy (mpl.runtime.guard) for the
    whole replay, the state in the pure structures at the start (the kernel reads them)."""
    g = rt._guard
    g.begin("a replay")
    try:
        _sync_held(rt)
        yield
    finally:
        g.end()


def _replay_packed(rt, p: Packed, tl, tick=None, every=0, *, _protect=True,
                   _record=None) -> int | None:
    """:func:`replay_packed` inside a replay that holds the guard."""
    if unsupported(rt, p) is not None:
        return None
    if tl.arrival:       # transfers in flight from an earlier replay on this timeline
        return None
    weighted = _reads_weights(rt)
    if p.records == 0:
        return 0
    comp = dense = None
    c = tl.c
    cpu1 = c.cpu_expert_ms(1)
    mode = MODES[rt.mode]
    if p.multi:       # the timeline's costs of the records of several tokens, per expert
        gpu1 = tl.unit_costs()[1]
        gpu = array("d", bytes(8 * len(p.experts)))
        cpu = array("d", bytes(8 * len(p.experts))) if mode else None
        dense = array("d", bytes(8 * p.records))
        memo: dict = {}
        offs = p.offs
        for r, tokens_of in p.multi:
            dense[r] = c.dense_ms(p.tokens[r])
            for a in range(offs[r], offs[r + 1]):
                k = tokens_of.get(p.experts[a], 1)
                if k == 1:
                    g, u = gpu1, cpu1
                else:
                    v = memo.get(k)
                    if v is None:
                        v = memo[k] = (c.gpu_expert_ms(k), c.cpu_expert_ms(k) if mode else 0.0)
                    g, u = v
                gpu[a] = g
                if cpu is not None:
                    cpu[a] = u
        comp = gpu if cpu is None else (gpu, cpu)
    E = rt.num_experts
    L = rt.num_layers
    caches = rt._distinct_caches()
    occ = _dense(rt, p)            # a wide model shape: the layers and experts that occur
    layers, experts = p.layers, p.experts
    if occ is not None:
        L, E, layers, experts = len(occ.layers), len(occ.experts), occ.lay, occ.exp
        if rt.per_layer:
            caches = [caches[layer] for layer in occ.layers]
    pins = bytearray(E)
    for e in rt.pins:
        if occ is None:
            pins[e] = 1
        elif e in occ.emap:
            pins[occ.emap[e]] = 1
    code, side_a, side_b = rule_code(rt.p["cache.eviction"])
    # the slots the kernel can hand out: on the dense keys no more than there are keys (a
    # pool larger than that is never filled; its slots beyond go back below the free list)
    psize = rt.pool.size if occ is None else min(rt.pool.size, L * E)
    cfg = (code, rt.per_layer, rt.priority, L, E,
           psize, float(rt.p["cache.frequency_decay"]), int(rt.p["cache.decay_interval"]),
           float(rt.p["cache.score_ema_alpha"]), rt.w_default, rt.step, rt._last_layer, rt.stall, _protect,
           rt.rebalance_interval if rt.features.get("rebalance") else 0, rt.dispatches,
           -1 if rt.ttl_n is None or rt._ttl is None else rt.ttl_n, rt.ttl_steps, rt.accesses,
           -1.0 if rt.mem_threshold is None else float(rt.mem_threshold), rt.mem_headroom,
           rt.mem_budget, rt.expert_bytes, side_a, side_b, float(rt.p["cache.freq_threshold"]),
           int(rt.p["cache.freq_window"]), mode, float(rt._cpu_limit), _half_life(rt.p))
    dense1, gpu1, txf = tl.unit_costs()
    clocks = (dense1, gpu1, txf, not tl.overlap) + tl.clocks() + (cpu1, tl.cpu_ms, tl.cpu_wait_ms)
    # the capacity as the stores see it (a segmented pair's split, ARC's target, S3-FIFO's
    # and LFRU's queue sizes derive from it, not from the slots the pool can fill), clamped
    # to the kernel's C long as LiveState's is: nothing beyond 2**62 can differ
    out = _kernel.replay(cfg, [min(c.capacity, 1 << 62) for c in caches], bytes(pins), layers, p.offs,
                         experts, p.weights if weighted else None, p.steps, p.tokens, comp, dense, clocks,
                         None if _record is None else _record.buffers(len(p.experts)))
    global kernel_runs
    kernel_runs += 1
    if occ is not None:
        _keys_back(rt, out, occ, _record)
        if psize < rt.pool.size:      # SlotPool hands out its lowest free slot first
            out["free"] = list(range(rt.pool.size - 1, psize - 1, -1)) + out["free"]
    _write_back(rt, out, p.records)
    tl.set_clocks(*out["clocks"], out["transfers"])
    tl.cpu_ms, tl.cpu_wait_ms = out["cpu_ms"], out["cpu_wait_ms"]
    E = rt.num_experts
    tl.arrival = {(k // E, k % E): t for k, t in out["arrival"].items()}
    if tick is not None and every:    # the progress ticks of the pure loop, after the fact
        for i in range(every, p.records + 1, every):
            tick(i)
    return p.records


# ------------------------------------------------------------ keys that occur (wide shapes)
# A trace header may declare 65,536 layers x 65,536 experts and hold one dispatch: the
# kernel's per-key tables must not follow the header. Beyond REMAP_KEYS keys the kernel is
# given the layers and experts the records name, numbered densely in their order (so every
# key keeps its place among the others: ties broken by key, the residents' order, the step
# inference from layer order are those of the model's numbering), and its results are
# numbered back. A cache of a layer no record names is never touched by the kernel (it has
# no prefetch), so it is left out.
class _Dense:
    """The layers and experts a pack's records name, sorted (``layers``, ``experts``), the
    expert -> dense id map (``emap``) and the pack's layer and expert arrays renumbered."""
    __slots__ = ("layers", "experts", "emap", "lay", "exp")


_dense_memo: list = [None, None]     # (the pack's experts array, its _Dense): the last pack


def _dense(rt, p) -> "_Dense | None":
    """None when rt's model shape fits the kernel's tables as it is (at most REMAP_KEYS keys),
    else the layers and experts ``p``'s records name (computed once for the last pack)."""
    if rt.num_layers * rt.num_experts <= REMAP_KEYS:
        return None
    if _dense_memo[0] is p.experts and len(_dense_memo[1].lay) == len(p.layers):
        return _dense_memo[1]
    d = _Dense()
    d.layers = sorted(set(p.layers)) or [0]
    d.experts = sorted(set(p.experts)) or [0]
    lmap = {x: i for i, x in enumerate(d.layers)}
    d.emap = emap = {x: i for i, x in enumerate(d.experts)}
    d.lay = array("i", [lmap[x] for x in p.layers])
    d.exp = array("i", [emap[x] for x in p.experts])
    _dense_memo[:] = [p.experts, d]
    return d


def _kernel_keys(rt, packed) -> tuple[int, int]:
    """(layers, keys) of the tables the kernel would build for rt (over ``packed``'s keys
    that occur, for a wide shape; without a pack a wide shape is judged on its records
    later: replay_packed asks again)."""
    L, keys = rt.num_layers, rt.num_layers * rt.num_experts
    if keys > REMAP_KEYS:
        if packed is None:
            return L, 0
        d = _dense(rt, packed)
        L, keys = len(d.layers), len(d.layers) * len(d.experts)
    return L, keys


def _keys_back(rt, out: dict, d: "_Dense", record) -> None:
    """The kernel's results over the dense layers and experts, in the model's numbering (as
    _write_back reads them: keys layer * num_experts + expert, one entry per layer)."""
    E2, E, L = len(d.experts), rt.num_experts, rt.num_layers
    lays, exps = d.layers, d.experts

    def key(k):
        return lays[k // E2] * E + exps[k % E2]
    for name in ("l_acc", "l_hit"):
        full = [0] * L
        for i, v in zip(lays, out[name]):
            full[i] = v
        out[name] = full

    def cache(entry):
        dump, resident = entry
        return dump, [(key(k), slot) for k, slot in resident]
    if rt.per_layer:            # (None: a layer no record names, its cache untouched)
        full = [None] * L
        for i, entry in zip(lays, out["caches"]):
            full[i] = cache(entry)
        out["caches"] = full
    else:
        out["caches"] = [cache(out["caches"][0])]
    out["dump_key"] = key       # the stores' dumps name dense keys
    out["ttl"] = [(key(k), stamp) for k, stamp in out["ttl"]]
    out["arrival"] = {key(k): t for k, t in out["arrival"].items()}
    if 0 <= out["last_layer"] < len(lays):
        out["last_layer"] = lays[out["last_layer"]]
    if record is not None:
        record.victim = [key(v) if v >= 0 else v for v in record.victim]


class Decisions:
    """Per packed access (router order within each record): ``outcome`` 1 hit, 2 load,
    0 streamed, 3 on the CPU with a background load, 4 on the CPU without; ``victim`` the
    evicted key as an int (-1 none); ``slot`` (-1 when nothing was loaded)."""

    def __init__(self):
        self.outcome = self.victim = self.slot = None

    def buffers(self, n: int):
        self.outcome = bytearray(n)
        self.victim = array("i", bytes(4 * n))
        self.slot = array("i", bytes(4 * n))
        return self.outcome, self.victim, self.slot


def _write_back(rt, out: dict, records: int) -> None:
    E = rt.num_experts
    for i, (a, h) in enumerate(zip(out["l_acc"], out["l_hit"])):
        rt.l_acc[i] += a
        rt.l_hit[i] += h
    rt.demand_loads += out["demand_loads"]
    rt.background_loads += out["background_loads"]
    rt.cpu_computes += out["cpu_computes"]
    rt.streamed += out["streamed"]
    rt.evictions += out["evictions"]
    rt.stall = out["stall"]
    rt.step = out["step"]
    rt._last_layer = out["last_layer"]
    if rt.features.get("rebalance"):
        rt.dispatches += records          # (uniform rebalances move nothing)
    rule = rt.p["cache.eviction"]
    key = ikey = _int_key(E)
    dense = out.get("dump_key")
    if dense is not None:
        key = lambda k: ikey(dense(k))      # noqa: E731
    for cache, entry in zip(rt._distinct_caches(), out["caches"]):
        if entry is None:
            continue
        dump, resident = entry
        cache.resident = {ikey(k): slot for k, slot in resident}
        store = make_store(rule, cache.capacity, rt.p)
        store.load(dump, key, cache.capacity)         # exactly the kernel's store
        cache.store = store
    rt.pool.free = out["free"]
    if rt._ttl is not None:        # the runtime counts accesses only for a TTL's stamps
        rt.accesses = out["accesses"]
        ttl = rt._ttl
        ttl.clear()
        for k, stamp in out["ttl"]:
            ttl[(k // E, k % E)] = stamp


def _int_key(E: int):
    """int key -> (layer, expert), for a runtime of E experts per layer."""
    return lambda k: (k // E, k % E)


def _key_int(E: int):
    """(layer, expert) -> int key."""
    return lambda k: k[0] * E + k[1]


def replay_records(rt, records, tl, tick=None, every=0):
    """The generated ``replay_records``' fast path: ``(count, records)``; count None when
    the kernel does not cover the runtime (``records``, possibly now a list, are then
    replayed on the pure path by the caller). The caller holds the runtime's guard (a
    replay); the state comes back from C first, as the kernel reads the pure structures."""
    _sync_held(rt)
    if unsupported(rt) is None:
        records = records if isinstance(records, list) else list(records)
        try:
            p = pack(records, rt.num_experts)
        except (TypeError, ValueError):     # unusual records: the pure path reports them
            p = None
        if p is not None:
            n = _replay_packed(rt, p, tl, tick, every)
            if n is not None:
                return n, records
    if live_backend(rt) == "compiled":
        records = records if isinstance(records, list) else list(records)
        if _live_replayable(records, rt.dispatch):
            return _live_replay(rt, records, tl, tick, every), records
    _pure_loop(rt)
    return None, records


def _live_replayable(records, d=None) -> bool:
    """Records the live dispatch takes in C, every one (lists of distinct ids, predictions
    a dict or none): each other record would sync and take the whole state. ``d``: the
    runtime's dispatch; a LiveState judges a list of record tuples in C."""
    judged = d.replayable(records) if hasattr(d, "replayable") else None
    if judged is not None:
        return judged
    for rec in records:
        experts, preds = rec[1], rec[5]
        if type(experts) is not list or (len(experts) > 1 and len(set(experts)) != len(experts)):
            return False
        if preds and type(preds) is not dict:
            return False
    return True


def _live_replay(rt, records, tl, tick, every) -> int:
    """The generated replay loop's decisions through the live dispatch (the same Plans: the
    generated dispatch in C) with the timeline in Python: for the policies the replay kernel
    does not cover and LiveState does (prefetch, the monitor and adapt rules)."""
    global live_replays, live_loops_in_c
    live_replays += 1
    d = rt.dispatch
    if _loop_in_c(d, tl):
        count = d.replay(records, tl, tick, every)
        if count is not None:
            live_loops_in_c += 1
            return count
    tl_dispatch = tl.dispatch
    held_call = d.held_call     # the dispatch without taking the guard the replay holds
    count = 0
    for layer, experts, weights, tokens, step, predictions, tokens_of in records:
        stall = tl_dispatch(held_call(layer, experts, weights, tokens, step=step, predictions=predictions),
                            tokens_of, tokens)
        if stall > 0:
            rt.stall += stall
        count += 1
        if every and count % every == 0:
            tick(count)
    return count


def _loop_in_c(d, tl) -> bool:
    """Whether ``LiveState.replay`` can run the loop: d the compiled live dispatch, tl a
    plain :class:`~mpl.timemodel.timeline.Timeline` (whose ``dispatch`` it carries in C; it
    still declines, returning None, a timeline whose state has unusual types)."""
    t = type(tl)      # (by name: the runtime layer does not import the time model)
    return (type(d).__name__ == "LiveState" and hasattr(d, "replay") and t.__name__ == "Timeline"
            and t.__module__ == "mpl.timemodel.timeline" and "dispatch" not in tl.__dict__)


def _pure_loop(rt) -> None:
    """The generated replay loop runs on the pure structures, holding them in locals while it
    hands several-token records to ``dispatch()``: a LiveState there would take the state
    from under it, so the runtime's live dispatch turns pure (synced) for good."""
    if type(rt.__dict__.get("dispatch")).__name__ == "LiveState":
        _sync_held(rt)
        _uninstall(rt, "a pure replay_records loop ran on this runtime")


def replay_trace(rt, trace, tl, tick=None, every=0) -> int | None:
    """Replay a Trace's dispatches in the kernel (its pack cached); None if not covered.
    Holds the runtime's guard (a replay)."""
    with _replaying(rt):
        if unsupported(rt) is not None:
            return None
        return _replay_packed(rt, pack_trace(trace, rt.num_experts), tl, tick, every)


# ---------------------------------------------------------------------- live dispatch
def _state_unsupported(rt) -> str | None:
    """Why LiveState does not hold rt's policy as it is now (None: it does)."""
    f = rt.features
    modes = tuple(f.get("modes", ()))
    if len(modes) != 1 or rt.mode != modes[0] or rt.mode not in MODES:
        return "a schedule.mode that changes (the live C dispatch holds one mode)"
    rule = rt.p["cache.eviction"]
    if rule_code(rule) is None:
        return f"eviction {rule!r} (the live C dispatch holds {', '.join(RULES)} and segmented a | b stores)"
    if f.get("prefetch") and rt.strategy not in ("history", "lookahead", "affinity", "learned", "none"):
        return f"prefetch strategy {rt.strategy!r}"
    if f.get("learned") or rt.strategy == "learned":
        # the predictor itself is held (its C functions called on it): the compiled one of
        # the runtime's shape; a Python one (a shape beyond its tables, or one set on the
        # runtime) is the pure dispatch's
        lr = rt.__dict__.get("learned")
        if not f.get("learned") or type(lr) is not getattr(_kernel, "Learned", None) or \
                lr.L != rt.num_layers or lr.E != rt.num_experts:
            return ("a learned predictor that is not the compiled one of the runtime's shape "
                    "(the live C dispatch calls _fast.Learned's C functions)")
    if f.get("prefetch") and rt.lookahead > 64:
        return "a lookahead beyond 64 layers (the live C dispatch's proposals)"
    if f.get("rules") and _rules_of(rt) is None:
        return "adapt rules the live C dispatch cannot evaluate"
    if rt.affinity is not None and \
            min(rt.affinity.depth, rt.num_layers) * rt.num_layers * rt.num_experts ** 2 > 1 << 23:
        return "an affinity table larger than the live C dispatch keeps (64 MiB)"
    for part in (rt.history, rt.signal):      # (their windows can move: asked at every take)
        if part is not None and rt.num_layers * (part.window + 1) > LIVE_RING_ROWS:
            return (f"a {type(part).__name__.lower()} window of layers x rows larger than the "
                    f"live C dispatch allocates up front (64 MiB)")
    return None


def live_unsupported(rt) -> str | None:
    """Why ``rt.dispatch`` cannot be the compiled live dispatch (``_fast.LiveState``); None: it
    can. It holds one schedule mode with every store of the kernel, pins, priority routing,
    TTL and memory triggers, history / lookahead / affinity / learned prefetch (the learned one through the
    runtime's compiled predictor, ``_fast.Learned``), the monitor and adapt rules, shared or
    per-layer caches with any allocation; see docs/internals.md, "Live dispatch"."""
    if not available():
        return "the compiled backend is not in use"
    if not hasattr(_kernel, "LiveState"):
        return "the built mpl.runtime._fast has no live dispatch (rebuild it: pip install -e .)"
    if rt.num_layers * rt.num_experts > LIVE_MAX_KEYS:
        return "more keys than the live dispatch's tables hold"
    return _state_unsupported(rt)


def install_live(rt) -> bool:
    """Make ``rt.dispatch`` the compiled live dispatch where it covers the policy (called at
    the end of Runtime.__init__). LiveState takes the state into C on its first call (and the
    first after every sync) and gives it back whenever anything reads it
    (``Runtime.__getattr__`` -> :func:`live_sync`). ``del rt.dispatch`` goes back to the pure
    dispatch at any point."""
    if live_unsupported(rt) is not None:
        return False
    from mpl.runtime.plan import Plan
    guard = rt.__dict__.get("_guard")
    if type(guard) is not getattr(_kernel, "Guard", None):
        return False           # (a runtime made while the pure backend was forced)
    pure_dispatch = type(rt)._dispatch.__get__(rt)     # the generated body, without the guard
    live = _kernel.LiveState(rt, pure_dispatch, Plan, rt.num_layers, rt.num_experts, _live_take,
                             _sync_held, _live_tail, guard)
    rt.__dict__["_live_held"] = None
    rt._live = live
    rt.dispatch = live
    return True


# ------------------------------------------------------------- LiveState: moving the state
#: the runtime attributes LiveState holds while it owns the state (absent from the instance
#: __dict__ then: a read reaches Runtime.__getattr__, which syncs). ``learned`` is the
#: compiled predictor itself, which LiveState holds a reference to and calls: its state
#: stays in it (nothing to move), and a predictor set on the runtime is taken at the next
#: dispatch (the write syncs first)
_OWNED = ("step", "_last_layer", "accesses", "evictions", "demand_loads", "background_loads",
          "prefetch_loads", "prefetch_useful", "cpu_computes", "streamed", "dispatches", "l_acc",
          "l_hit", "caches", "pool", "_pf", "_ttl", "history", "affinity", "signal", "monitor",
          "rules", "learned")
_COUNTERS = _OWNED[:11]
_CMP = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4, "!=": 5}
_UNITS = {"accesses": 0, "steps": 1, "tokens": 2}
_METRICS = ("hit_rate", "miss_rate", "eviction_rate", "prefetch_accuracy", "transfer_rate",
            "stall_ms")


def _rules_of(rt):
    """The adapt rules of rt's policy as LiveState evaluates them: per rule (metric, op,
    unit, re-armed when false, threshold, count), from the module's IR; None if unusual."""
    import sys
    mod = sys.modules.get(type(rt).__module__)
    ir = getattr(mod, "IR_JSON", None)
    if ir is None:
        return None
    out = _rules_in(ir)
    if out is None or len(out) != len(rt.rules):
        return None
    return out


@lru_cache(maxsize=64)
def _rules_in(ir_json: str):
    """:func:`_rules_of` from a module's IR text (parsed once per module: every take of the
    state into C asks again)."""
    import json
    out = []
    for r in json.loads(ir_json).get("adapt", ()):
        c, d = r["condition"], r["duration"]
        if c["metric"] not in _METRICS or c["op"] not in _CMP or d["unit"] not in _UNITS:
            return None
        out.append((_METRICS.index(c["metric"]), _CMP[c["op"]], _UNITS[d["unit"]],
                    r["inverse_of"] is None, float(c["threshold"]), int(d["count"])))
    return tuple(out)


def _uninstall(rt, why: str) -> None:
    """The policy left what LiveState holds (an adapt rule moved it): pure from now on."""
    d = rt.__dict__
    if type(d.get("dispatch")).__name__ == "LiveState":
        del d["dispatch"]
    d.pop("_live", None)
    d.pop("_live_held", None)
    d["_live_why"] = why
    _plain_class(rt)


def _signal_state(sig):
    """The per-layer signal as LiveState.load takes it (None without one)."""
    if sig is None:
        return None
    return (sig.window, [list(w) for w in sig.win], [list(c.items()) for c in sig.cnt],
            list(sig.total))


def _affinity_state(rt):
    """The affinity table as LiveState.load takes it (None without one)."""
    a = rt.affinity
    if a is None:
        return None
    tabs = [(d, src, [(e, row[0], list(row[1].items())) for e, row in tab.items()])
            for (d, src), tab in a.table.items()]
    lasts = [(layer, last[0], last[1]) for layer, last in enumerate(a.last) if last is not None]
    return (a.depth, float(a.threshold), rt.strategy == "affinity", tabs, lasts)


def _live_split(rt, weights):
    """The capacities Runtime._rebalance gives now: the water-filling split of the signal's
    weights (computed in C; None: uniform) within the budget and bounds, which LiveState does
    not hold; None where the pure rebalance raises (it then runs, and raises, on the synced
    state)."""
    from mpl.runtime.budgets import allocate
    if weights is None:
        weights = [1.0] * rt.num_layers
    lo = min(rt.min_cap, rt.total_budget // rt.num_layers)
    try:
        caps = allocate(weights, rt.total_budget, lo, max(lo, rt.max_cap))
    except ValueError:
        return None
    return [min(int(c), 1 << 62) for c in caps]


def _live_take(rt) -> None:
    """LiveState's first call (and the first after a sync): the pure structures into C."""
    d = rt.__dict__
    live = d.get("_live")
    if live is None:          # turned off (a caller kept the bound dispatch): the pure path
        return
    why = _state_unsupported(rt)
    caches = rt._distinct_caches()
    E = rt.num_experts
    codes = []
    if why is None:
        for c in caches:
            code = rule_code(getattr(c.store, "name", "?"))
            if code is None or not hasattr(c.store, "dump") or c.pins != rt.pins:
                why = f"a {type(c.store).__name__} store (the live C dispatch does not hold it)"
                break
            codes.append(code)
    if why is not None:
        _uninstall(rt, why)
        return
    f = rt.features
    key = _key_int(E)
    packed = [(*code, min(c.capacity, 1 << 62), [(key(k), slot) for k, slot in c.resident.items()],
               c.store.dump(key)) for code, c in zip(codes, caches)]
    mode = MODES[rt.mode]
    thr = rt.mem_threshold
    ttl_on = rt.ttl_n is not None and rt._ttl is not None
    cfg = (rt.per_layer, mode, bool(f.get("ttl")), bool(f.get("weighted")),
           bool(f.get("prefetch")) and rt.strategy != "none", bool(f.get("history_next_only")),
           rt.ttl_steps, rt.ttl_n if ttl_on else -1,
           float(thr) if (thr is not None and f.get("memory")) else -1.0, float(rt.mem_headroom),
           float(rt.mem_budget), float(rt.expert_bytes), float(rt.w_default), float(rt._cpu_limit),
           int(rt.budget), int(rt.lookahead), rt.pool.size, bool(f.get("rebalance")),
           bool(f.get("rebalance_off")), int(rt.rebalance_interval) if rt.per_layer else 0,
           _live_split, _affinity_state(rt),
           _signal_state(rt.signal),
           bool(f.get("lookahead_strategy")), rt.strategy == "lookahead",
           d["learned"] if f.get("learned") else None, rt.strategy == "learned",
           bool(rt.priority))
    pins = bytearray(E)
    for e in rt.pins:
        pins[e] = 1
    h = rt.history
    hist = None if h is None else (h.window, [list(w) for w in h.win],
                                   [h.counts(layer) for layer in range(len(h.cnt))],
                                   [len(b) - 1 for b in h.bk])
    m = rt.monitor
    mon = None if m is None else (m.window, bytes(m.ring), m.acc, m.hits, m.skipped, list(m.events),
                                  m.ev, m.ld, m.pfl, m.pfu, float(m.stall), tuple(m.seen),
                                  m.log_interval, tuple(m.metrics), m.log)
    rules = []
    if rt.rules:
        defs = _rules_of(rt)
        for (metric, cmp, unit, rearm, value, n), r in zip(defs, rt.rules):
            rules.append((metric, cmp, unit, rearm, value, n, r.armed, r.held,
                          -1 if r.mark is None else r.mark))
    ttl = [] if rt._ttl is None else [(k[0] * E + k[1], t) for k, t in rt._ttl.items()]
    live.load(cfg, packed, list(rt.pool.free), bytes(pins), tuple(getattr(rt, n) for n in _COUNTERS),
              list(rt.l_acc), list(rt.l_hit), [k[0] * E + k[1] for k in rt._pf], ttl, hist, mon, rules)
    # the held values are in place before they leave the __dict__: a read at any moment in
    # between (a finalizer) finds each of them in one of the two
    object.__setattr__(rt, "__class__", _owned_class(type(rt)))
    held = d["_live_held"] = {name: d[name] for name in _OWNED}
    for name in held:
        del d[name]
    live.mark_owned()


# ------------------------------------------------- LiveState: one owner, reads and writes
#: attributes LiveState reads from the runtime's __dict__ at every use: a write to one while
#: C holds the state needs no sync
_LIVE_READ = frozenset({"stall"})
_OWNED_CLASSES: dict = {}


def _owned_class(cls):
    """``cls`` while LiveState holds an instance's state in C: the same class with attribute
    writes and deletions that first bring the state back (:func:`_owned_setattr`), so that
    a value set on the runtime is what the next dispatch uses (the dispatch takes the state
    again), never silently ignored. An instance is of this class only between a take and
    the next sync, so the pure runtime's own writes never pay for it."""
    sub = _OWNED_CLASSES.get(cls)
    if sub is None:
        sub = _OWNED_CLASSES[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__setattr__": _owned_setattr, "__delattr__": _owned_delattr, "_live_plain": cls,
            "__doc__": cls.__doc__})
    return sub


def _plain_class(rt) -> None:
    """The runtime's own class again (the state is in the pure structures)."""
    plain = type(rt).__dict__.get("_live_plain")
    if plain is not None:
        object.__setattr__(rt, "__class__", plain)


def _owned_write(rt, name, what: str, write) -> None:
    g = rt._guard
    g.acquire()                      # another thread's dispatch finishes first
    try:
        if g.busy:
            from mpl.runtime.guard import RuntimeBusyError, refusal
            raise RuntimeBusyError(refusal(f"{what} {name!r}"))
        g.begin("changing the runtime")
        try:
            _sync_held(rt)
            write()
        finally:
            g.end()
    finally:
        g.release()


def _owned_setattr(rt, name, value) -> None:
    if name in _LIVE_READ:
        object.__setattr__(rt, name, value)
        return
    _owned_write(rt, name, "setting", lambda: object.__setattr__(rt, name, value))


def _owned_delattr(rt, name) -> None:
    _owned_write(rt, name, "deleting", lambda: object.__delattr__(rt, name))


def live_read(rt, name):
    """``Runtime.__getattr__`` of an attribute LiveState holds: the state comes back into
    the pure structures (waiting for another thread's dispatch to finish) and the attribute
    is read; from inside a dispatch of this thread (a callback it invoked: a logging
    handler, a finalizer, a tick) the state stays where it is and the value is read from a
    snapshot of it (:func:`_snapshot`) — a copy, so changing it changes nothing."""
    g = rt._guard
    g.acquire()
    try:
        if g.busy:
            return _snapshot(rt, name)
        g.begin("reading the runtime")
        try:
            _sync_held(rt)
        finally:
            g.end()
        return object.__getattribute__(rt, name)
    finally:
        g.release()


def _snapshot(rt, name):
    """The value of ``name`` as the state is now, read without moving it: in the middle of a
    take or a sync it is the held value itself; while C holds the state, a copy of the held
    structures with the C state written into it (``LiveState.dump(True)`` keeps the state);
    the learned predictor, which keeps its own state, is the runtime's own object."""
    d = rt.__dict__
    live = d.get("_live")
    held = d.get("_live_held")
    if held is not None and name in held:
        if live is None or not live.owns:
            return held[name]
        import copy
        lr = held.get("learned")      # (the compiled predictor is not copied: it is returned)
        snap = copy.deepcopy(held, {} if lr is None else {id(lr): lr})
        _apply_dump(rt, snap, live.dump(True))
        return snap[name]
    raise AttributeError(f"{type(rt).__name__!r} object has no attribute {name!r}")


def live_sync(rt) -> None:
    """Bring the state LiveState holds back into the pure structures (a no-op when nothing
    is held in C), waiting for another thread's dispatch to finish; RuntimeBusyError from
    inside a dispatch of this thread (a read there gets a snapshot: :func:`live_read`)."""
    g = rt._guard
    g.begin("moving the state out of the compiled dispatch")
    try:
        _sync_held(rt)
    finally:
        g.end()


def _sync_held(rt) -> None:
    """:func:`live_sync` for a caller that holds the guard (LiveState's own glue, a replay,
    a read): the state back into the pure structures (exactly: residents, slots, the store
    order or frequencies with their ticks, the free list, counters, the prefetched keys, TTL
    stamps, the history window, the monitor window, the rules' counters)."""
    d = rt.__dict__
    live = d.get("_live")
    if live is None or not live.owns:
        return
    out = live.dump()
    held = d["_live_held"]
    _apply_dump(rt, held, out)
    for name, v in held.items():       # an attribute set meanwhile keeps the value it was given
        d.setdefault(name, v)
    d["_live_held"] = None
    _plain_class(rt)


def _apply_dump(rt, held: dict, out: dict) -> None:
    """The pure structures ``held`` (the values of the owned attributes) rebuilt from
    ``LiveState.dump()``'s ``out``."""
    from collections import deque
    E = rt.num_experts
    key = _int_key(E)
    for name, v in zip(_COUNTERS, out["counters"]):
        held[name] = v
    held["l_acc"][:] = out["l_acc"]
    held["l_hit"][:] = out["l_hit"]
    held["pool"].free[:] = out["free"]
    caches = held["caches"] if rt.per_layer else held["caches"][:1]
    for c, (cap, res, data) in zip(caches, out["caches"]):
        if min(c.capacity, 1 << 62) != cap:     # a rebalance moved it (C clamps to 2**62)
            c.capacity = cap
        c.resident = {key(k): slot for k, slot in res}
        c.store.load(data, key, c.capacity)
    pf = held["_pf"]
    pf.clear()
    pf.update((key(k), True) for k in out["pf"])
    if held["_ttl"] is not None:
        held["_ttl"].clear()
        held["_ttl"].update((key(k), t) for k, t in out["ttl"])
    h = held["history"]
    if h is not None:
        rows, cnts, bks = out["hist"]
        for layer in range(rt.num_layers):
            h.load(layer, rows[layer], cnts[layer], bks[layer] + 1)
    sig = held["signal"]
    if sig is not None:
        rows, cnts, tots = out["sig"]
        sig.win = [deque(r) for r in rows]
        sig.cnt = [dict(c) for c in cnts]
        sig.total = tots
    a = held["affinity"]
    if a is not None:
        tabs, lasts = out["aff"]
        a.table = {(d, src): {e: a.row(n, nx) for e, n, nx in rows} for d, src, rows in tabs}
        a.last = [None] * rt.num_layers
        for layer, step, experts in lasts:
            a.last[layer] = (step, experts)
    m = held["monitor"]
    if m is not None:
        ring, m.acc, m.hits, m.skipped, events, m.ev, m.ld, m.pfl, m.pfu, m.stall, m.seen = out["mon"]
        m.ring = bytearray(ring)
        m.events = deque(events)
    for r, (armed, hold, mark) in zip(held["rules"], out["rules"]):
        r.armed, r.held, r.mark = armed, hold, None if mark == -1 else mark


def _live_tail(rt, rebalance, hit, tokens, layer, experts, evicted) -> None:
    """The end of a LiveState dispatch on the pure path, from the state as the dispatch left
    it (synced just before): a rebalance at its interval (``rebalance``), the monitor phase
    (an adapt rule fires in it), the trim of a cache over its capacity."""
    inuse = {(layer, x) for x in experts}
    if rebalance:
        rt._rebalance(rt.allocation, inuse, evicted)
    if rt.monitor is not None and hit:
        rt._observe(hit, tokens, inuse, evicted)
    cache = rt.caches[layer]
    if len(cache.resident) > cache.capacity:
        rt._trim(cache, layer, experts, evicted)


def live_backend(rt) -> str:
    """``"compiled"`` when ``rt.dispatch`` is the C live dispatch (LiveState), else ``"pure"``."""
    d = rt.__dict__.get("dispatch")
    return "compiled" if d is not None and type(d).__name__ == "LiveState" else "pure"
