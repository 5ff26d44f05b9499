"""IR -> a readable, deterministic Python module specialised to one policy.

The module imports only ``mpl.runtime``. It records the policy name, the source hash, the
``mpl`` version and the IR (JSON), and defines a ``Runtime`` subclass whose ``dispatch`` is
straight-line code assembled for this policy (``replay_records`` wraps the same body, emitted
by the same code, in a loop over trace records for the replayer): only the features the policy can reach (given
its initial values *and* every value an adapt rule can set) appear, constants are inlined,
and the adapt rules are compiled into one method with one block per rule. Nothing from the
source text is evaluated: the policy name becomes an identifier only after sanitising, and
otherwise appears only inside ``repr()`` string literals.
"""

from __future__ import annotations

import keyword
import re
from contextlib import contextmanager
from dataclasses import dataclass

from mpl import ir as _ir
from mpl import schema
from mpl.codegen.tables import require_values, source, source_tables
from mpl.features import Features, features, reachable  # noqa: F401  (re-exported)

GENERATOR_VERSION = 10


# ---------------------------------------------------------------- values
def class_name(pir: _ir.PolicyIR) -> str:
    """The name of the generated module's runtime class (its pure backend) for ``pir``."""
    return "Policy_" + identifier(pir.name)


def identifier(name: str) -> str:
    """A safe Python identifier derived from a policy name."""
    s = re.sub(r"\W", "_", name, flags=re.ASCII)
    if not s or s[0].isdigit():
        s = "_" + s
    if keyword.iskeyword(s) or not s.isidentifier():
        s = "_" + s
    return s


# ---------------------------------------------------------------- emitters
class _W:
    def __init__(self):
        self.lines: list[str] = []
        self.base = 0            # the current block's indent (see indent())
        self.replay = False      # writing replay_records (not dispatch): see _emit_replay

    def __call__(self, indent: int, text: str = "") -> None:
        """Write ``text`` ``indent`` levels below the current block."""
        self.lines.append(("    " * (indent + self.base) + text) if text else "")

    @contextmanager
    def indent(self, levels: int = 1):
        """Nest what is written inside the ``with`` by ``levels`` (emitters write relative
        to the block they are given, so one emitter serves dispatch and the replay loop)."""
        self.base += levels
        try:
            yield
        finally:
            self.base -= levels

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _emit_dispatch(w: _W, f: Features, pir: _ir.PolicyIR) -> None:
    w(1, "def dispatch(self, layer, experts, weights=None, tokens=1, *, step=None, predictions=None):")
    w(2, '"""One MoE layer\'s routing -> Plan (see mpl.runtime.plan). The arguments are checked')
    w(2, "and converted first (DispatchError before anything changes), then the decisions run")
    w(2, "holding the runtime's lock (mpl.runtime.guard); the monitor's log records go to the")
    w(2, 'logger after it is released."""')
    # Bad arguments raise DispatchError (a ValueError) before the lock is taken; the common
    # case costs a few type tests, a range test, a type test per expert id and per weight
    # and one subset test of the ids. What a conversion may run (__index__, __float__) runs
    # here, on copies: it cannot change what the decisions read.
    w(2, "if type(layer) is not int or layer < 0 or layer >= self.num_layers:")
    w(3, "layer = self._check_layer(layer)")
    w(2, "if type(experts) is not list:")
    w(3, "experts = self._check_list(experts)")
    w(2, "n = len(experts)")
    w(2, "for e in experts:   # ints only: 4.0 and True would pass the set test below")
    w(3, "if type(e) is not int:")
    w(4, "experts = self._check_ids(experts)   # converts numpy integers, refuses the rest")
    w(4, "break")
    w(2, "if n and not self._ids.issuperset(experts):")
    w(3, "self._bad_experts(experts)")
    w(2, "if weights is not None:")
    w(3, "if type(weights) is not list or len(weights) != n:")
    w(4, "experts = list(experts)   # (a copy: a weight's __float__ cannot change the ids)")
    w(4, "weights = self._check_weights(weights, n)")
    w(3, "else:")
    w(4, "for x in weights:")
    w(5, "if type(x) is not float or x - x != 0.0:   # not a finite float: convert them all")
    w(6, "experts = list(experts)")
    w(6, "weights = self._check_weights(weights, n)")
    w(6, "break")
    w(2, "if type(tokens) is not int or tokens < 1 or tokens > 9007199254740992:")
    w(3, "tokens = self._check_tokens(tokens, n)")
    w(2, "if step is not None and (type(step) is not int or step < 0 or step > 4611686018427387904):")
    w(3, "step = self._check_step(step)")
    w(2, "if predictions:")
    w(3, "predictions = self._check_predictions(predictions)")
    w(2, "guard = self._guard")
    w(2, "guard.begin('a dispatch')")
    w(2, "try:")
    w(3, "plan = self._body(layer, experts, weights, tokens, step, predictions)")
    w(2, "finally:")
    w(3, "guard.end()")
    if f.monitor:
        w(2, "if self._log_emitted < len(self.monitor.log):")
        w(3, "self._emit_logs()")
    w(2, "return plan")
    w(0)
    w(1, "def _body(self, layer, experts, weights, tokens, step, predictions):")
    w(2, '"""The decisions of dispatch(), its arguments checked, holding the lock."""')
    w(2, "if step is None and layer <= self._last_layer and self.step >= _STEP_MAX:")
    w(3, "raise _DispatchError('the step counter would pass 2**62: give steps explicitly (step=...) below it')")
    w(2, "n = len(experts)")
    with w.indent(2):
        _emit_body(w, f)


def _counts_only(w: _W, f: Features) -> bool:
    """The replay loop of a policy that only ever makes demand loads (gpu_only, no
    prefetch): it times a one-token dispatch from its counts, with the timeline's formula
    inline (``_emit_timeline``), and keeps no load list (the timeline reads only background
    and prefetch loads from a Plan)."""
    return w.replay and f.modes == ("gpu_only",) and not f.prefetch and not f.tiers


def _lean(w: _W, f: Features) -> bool:
    """A counts-only replay loop with no monitor: nothing reads a dispatch's per-expert
    outcome (no Plan, no monitor window), so it counts hits and keeps no where/hit/evicted
    lists; a record of several tokens (the timeline needs its Plan) goes through dispatch()."""
    return _counts_only(w, f) and not f.monitor


_CLOCKS = "now, link, tl_stall, tl_gpu, tl_xfer"


def _local_step(w: _W, f: Features) -> bool:
    """The lean loop keeps the step counter in locals (nothing in it reads ``self.step``
    but a TTL counted in steps)."""
    return _lean(w, f) and not f.ttl


def _emit_replay(w: _W, f: Features) -> None:
    """``replay_records``: the dispatch body in a loop over trace records, each played on
    the simulated timeline at once. The decisions are the same code as ``dispatch`` (the
    same emitter); only the argument checks are left out (a trace is validated when read)."""
    w(1, "def replay_records(self, records, tl, tick=None, every=0):")
    w(2, '"""Dispatch every record and play it on ``tl`` (mpl.timemodel.timeline.Timeline); adds')
    w(2, "the simulated stalls to the stats. records: (layer, experts, weights, tokens, step,")
    w(2, "predictions, tokens_of) with distinct-or-not expert ids as dispatch() takes them;")
    w(2, "tokens_of is None for one token. ``tick(i)`` is called every ``every`` records.")
    w(2, "No argument checks: the records come from a trace validated when it was read")
    w(2, "(mpl.sim.replay.records_of); live callers use dispatch(). Returns the record count.")
    w(2, "Holds the runtime's lock for the whole replay; around its callbacks (the tick, log")
    w(2, 'handlers) the state is whole and frozen (mpl.runtime.guard)."""')
    w(2, "guard = self._guard")
    w(2, "guard.begin('a replay')")
    w(2, "try:")
    w(3, "return self._replay_records(records, tl, tick, every)")
    w(2, "finally:")
    w(3, "guard.end()")
    w(0)
    w(1, "def _replay_records(self, records, tl, tick, every):")
    w(2, '"""replay_records() inside the guard."""')
    w.replay = True
    w(2, "guard = self._guard")
    w(2, "tl_dispatch = tl.dispatch")
    counts_only = _counts_only(w, f)
    lean = _lean(w, f)
    if counts_only:
        w(2, "dense1, gpu1, txf = tl.unit_costs()")
        w(2, "wait_all = not tl.overlap   # overlap off: compute waits for every transfer")
        w(2, "link_bound = txf >= gpu1")
        w(2, f"{_CLOCKS} = tl.clocks()")
        w(2, "nx = 0   # transfers since the clocks were last handed back")
    if lean:   # no adapt rules: no cache, map or store is replaced during the replay
        touch = "c.store.od.move_to_end" if f.lru_only else "c.store.hit"
        w(2, f"views = [(c, c.resident, {touch}) for c in self.caches]")
        w(2, "l_acc = self.l_acc")
        w(2, "l_hit = self.l_hit")
        w(2, "rstall = self.stall")
        w(2, "r_nd = r_nst = r_nev = 0   # demand loads, streams, evictions (added at the end)")
    if _local_step(w, f):
        w(2, "cur_step = self.step")
        w(2, "last_layer = self._last_layer")
    w(2, "count = 0")
    if counts_only:
        w(2, "try:")
    with w.indent(1 if counts_only else 0):
        w(2, "for layer, experts, weights, tokens, step, predictions, tokens_of in records:")
        if lean:
            w(3, "if tokens_of is not None:   # several tokens: the timeline plays dispatch()'s Plan")
            _emit_general_timeline(w, f, 4, "self._body(layer, experts, weights, tokens, step, "
                                            "predictions)")
            w(4, "if stall > 0:")
            w(5, "rstall += stall")
            _emit_count(w, f, 4)
            w(4, "continue")
        w(3, "n = len(experts)")
        with w.indent(3):
            _emit_body(w, f)
        if counts_only:
            w(1, "finally:")
            w(2, f"tl.set_clocks({_CLOCKS}, nx)")
            if lean:
                w(2, "self.stall = rstall")
                w(2, "self.demand_loads += r_nd")
                w(2, "self.streamed += r_nst")
                w(2, "self.evictions += r_nev")
            if _local_step(w, f):
                w(2, "self.step = cur_step")
                w(2, "self._last_layer = last_layer")
    w(2, "return count")
    w.replay = False


def _emit_general_timeline(w: _W, f: Features, d: int, plan: str) -> None:
    """At indent ``d``, in a loop that keeps the clocks (and the lean loop's step counter) in
    locals: hand them back, play the Plan ``plan`` on the timeline's general path (``stall``),
    take them again."""
    w(d, f"tl.set_clocks({_CLOCKS}, nx)")
    w(d, "nx = 0")
    if _local_step(w, f):
        w(d, "self.step = cur_step")
        w(d, "self._last_layer = last_layer")
    w(d, f"stall = tl_dispatch({plan}, tokens_of, tokens)")
    w(d, f"{_CLOCKS} = tl.clocks()")
    if _local_step(w, f):
        w(d, "cur_step = self.step")
        w(d, "last_layer = self._last_layer")


def _emit_count(w: _W, f: Features, d: int) -> None:
    """One more record played; its log records to the logger and the progress callback
    every ``every`` records, the state frozen meanwhile (user code runs: mpl.runtime.guard)."""
    w(d, "count += 1")
    if f.monitor:
        w(d, "if self._log_emitted < len(self.monitor.log):")
        w(d + 1, "with guard.frozen():")
        w(d + 2, "self._emit_logs()")
    w(d, "if every and count % every == 0:")
    if _counts_only(w, f):
        # the clocks are in locals: the timeline gets them first (a tick may read it)
        w(d + 1, f"tl.set_clocks({_CLOCKS}, nx)")
        w(d + 1, "nx = 0")
    if _lean(w, f):
        # so are the lean loop's counters and stall: the runtime gets them (a tick may read
        # its stats: the state is whole around a callback)
        w(d + 1, "self.stall = rstall")
        w(d + 1, "self.demand_loads += r_nd")
        w(d + 1, "self.streamed += r_nst")
        w(d + 1, "self.evictions += r_nev")
        w(d + 1, "r_nd = r_nst = r_nev = 0")
        if _local_step(w, f):
            w(d + 1, "self.step = cur_step")
            w(d + 1, "self._last_layer = last_layer")
    w(d + 1, "with guard.frozen():")
    w(d + 2, "tick(count)")


def _emit_timeline(w: _W, d: int) -> None:
    """Timeline.demand's formula at indent ``d`` on the loop's local clocks (``m`` transfers,
    all issued at the dispatch's start); leaves the dispatch's stall in ``stall``."""
    w(d, "t0 = now + dense1")
    w(d, "busy = n * gpu1")
    w(d, "t = t0 + busy")
    w(d, "if m:")
    w(d + 1, "s0 = t0 if t0 > link else link")
    w(d + 1, "link = s0 + m * txf")
    w(d + 1, "if wait_all:")
    w(d + 2, "last = link + busy")
    w(d + 1, "elif link_bound:")
    w(d + 2, "last = link + gpu1")
    w(d + 1, "else:")
    w(d + 2, "last = s0 + txf + m * gpu1")
    w(d + 1, "if last > t:")
    w(d + 2, "t = last")
    w(d + 1, "nx += m")
    w(d + 1, "tl_xfer += m * txf")
    w(d, "stall = t - t0 - busy")
    w(d, "tl_gpu += busy + dense1")
    w(d, "tl_stall += stall")
    w(d, "now = t")


@dataclass(frozen=True)
class _Body:
    """What the body's emitters share: derived once from the features and the writer."""
    modes: tuple
    single: bool          # one reachable schedule mode: the miss path is inlined
    need_w: bool          # the loop binds ``w`` (a store or a miss path reads the weight)
    replay: bool
    counts_only: bool
    lean: bool
    local_step: bool
    ev: str               # where triggers and cuts put what they evict
    counters: str         # the inlined miss path's counters ("" when not inlined)


_COUNTERS = {"gpu_only": "nd = nev = nst = 0", "cpu_fallback": "nbg = ncpu = nev = 0",
             "hybrid": "nd = nev = nst = nbg = ncpu = 0"}


def _parts(f: Features) -> bool:
    """A set of tiers caches experts as parts (granularity_split > 1): the hit test and the
    keys in use are the parts' (mpl.runtime.tiers)."""
    return any(level[3] > 1 for level in f.tiers)


def _ladder(f: Features) -> bool:
    """A tier with a dtype_ladder of several precisions: a top-tier hit is counted at the
    key's rung, and computed from a lower one (mpl.runtime.tiers ``_rung_hit``)."""
    return any(len(t[4]) > 1 for level in f.tiers for t in level[4])


def _body(w: _W, f: Features) -> _Body:
    # memory tiers: every miss goes through the runtime's tiered miss path (mpl.runtime.tiers)
    single = len(f.modes) == 1 and not f.tiers
    lean = _lean(w, f)
    return _Body(modes=f.modes, single=single, need_w=not (f.lru_only and single),
                 replay=w.replay, counts_only=_counts_only(w, f), lean=lean,
                 local_step=_local_step(w, f),
                 ev="[]" if lean else "evicted",   # lean: nothing reads what a trigger or a cut evicts
                 counters=_COUNTERS[f.modes[0]] if single else "")


def _emit_body(w: _W, f: Features) -> None:
    """The decisions of one dispatch at the writer's indent (``n`` is the number of experts):
    ``dispatch``'s body after its argument checks and, with ``w.replay``, the body of the
    replay loop (see _emit_replay). Each part has its emitter, each writing relative to the
    indent it is given."""
    b = _body(w, f)
    _emit_step(w, b)
    _emit_locals(w, f, b)
    if f.tiers:   # the dispatch's moves between tiers (Plan.steps); lower tiers' clocks, windows
        w(0, "steps = self._tier_begin(layer, experts)")
    _emit_loop_head(w, f, b)
    with w.indent():
        _emit_hit(w, f, b)
        _emit_miss(w, f, b)
    _emit_stats(w, f, b)
    _emit_prefetch(w, f, b)
    _emit_triggers(w, f, b)
    _emit_result(w, f, b)


def _emit_needed(w: _W, *lines: tuple[bool, str]) -> None:
    """Each ``(needed, line)``'s line, in order, where it is needed."""
    for needed, line in lines:
        if needed:
            w(0, line)


def _emit_step(w: _W, b: _Body) -> None:
    """Step inference (a layer at or below the previous one starts a step) and distinct ids."""
    cur, last = ("cur_step", "last_layer") if b.local_step else ("self.step", "self._last_layer")
    w(0, "if step is None:")
    w(1, f"if layer <= {last}:")
    w(2, f"{cur} += 1")
    w(0, "else:")
    w(1, f"{cur} = step")
    w(0, f"{last} = layer")
    w(0, "if n > 1 and len(set(experts)) != n:")
    w(1, "experts, weights = _distinct(experts, weights)")
    w(1, "n = len(experts)")


def _emit_locals(w: _W, f: Features, b: _Body) -> None:
    """The layer's cache and the dispatch's outcome lists, bound once before the loop."""
    if b.lean:
        w(0, "cache, res, touch = views[layer]")
    else:
        w(0, "cache = self.caches[layer]")
        w(0, "res = cache.resident")
        if f.lru_only:
            w(0, "touch = cache.store.od.move_to_end   # lru: a hit moves the key to the MRU end")
        else:
            w(0, "touch = cache.store.hit")
    if not b.single:
        w(0, "miss = self._miss   # schedule.mode can change (adapt)")
    if b.lean:
        w(0, "hits = 0")
    else:
        w(0, "where = [0] * n")
        w(0, "hit = [False] * n")
    if f.clocked:   # crf, classlru, farthest_layer read the step and the layer the pass is at
        w(0, f"cache.store.begin({'cur_step' if b.local_step else 'self.step'}, layer)")
    _emit_needed(w, (not b.counts_only, "loads = []"), (not b.lean, "evicted = []"),
                 (True, "inuse = None"), (b.need_w, "wdef = self.w_default"),
                 (f.prefetch, "pf = self._pf"), (f.ttl, "ttl = self._ttl"),
                 (f.pins, "pins = self.pins   # pinned keys (layer, expert)"))


def _emit_loop_head(w: _W, f: Features, b: _Body) -> None:
    """The loop over the dispatch's experts (heaviest first under priority routing)."""
    if f.priority:
        w(0, "if self.priority and weights is not None:   # priority_routing: heaviest first")
        w(1, "order = sorted(range(n), key=weights.__getitem__, reverse=True)")
        w(0, "else:")
        w(1, "order = range(n)")
        w(0, "for i in order:")
    elif b.lean and not f.weighted:   # nothing is stored per position
        w(0, "for e in experts:")
    else:
        w(0, "for i in range(n):")


def _emit_hit(w: _W, f: Features, b: _Body) -> None:
    """One expert's key, weight and hit test; a hit refreshes the store (pins excepted)."""
    if f.priority or not b.lean or f.weighted:
        w(0, "e = experts[i]")
    w(0, "key = (layer, e)")
    if f.weighted:
        w(0, "w = weights[i] if weights is not None else wdef")
    elif b.need_w:
        w(0, "w = wdef")
    if f.ttl:
        w(0, "self.accesses += 1")
    if b.lean:   # a hit's slot is not needed
        w(0, "if key in res:")
        w(1, "hits += 1")
    elif _parts(f):   # parts: a hit when every part is in the top tier (where: their slots)
        w(0, "slot = res.get(key) if self._split[layer] == 1 else self._part_slots(res, layer, e)")
        w(0, "if type(slot) is tuple:")
        w(1, "where[i] = slot")
        w(1, "hit[i] = True")
        w(1, "self._part_hit(cache, layer, e, w)")
        w(0, "elif slot is not None:")
        w(1, "where[i] = slot")
        w(1, "hit[i] = True")
        if _ladder(f):
            w(1, "self._rung_hit(cache, key, slot)   # a dtype ladder: the key's rung")
    else:
        w(0, "slot = res.get(key)")
        w(0, "if slot is not None:")
        w(1, "where[i] = slot")
        w(1, "hit[i] = True")
        if _ladder(f):
            w(1, "self._rung_hit(cache, key, slot)   # a dtype ladder: the key's rung")
    with w.indent():
        call = "touch(key)" if f.lru_only else "touch(key, w)"
        if f.pins:
            w(0, "if key not in pins:")
        with w.indent(1 if f.pins else 0):
            w(0, call)
            if f.ttl:
                w(0, "ttl[key] = self._stamp()")
                w(0, "ttl.move_to_end(key)")
        if f.prefetch:
            w(0, "if pf and key in pf:   # a prefetched key used before its eviction")
            w(1, "del pf[key]")
            w(1, "self.prefetch_useful += 1")


def _emit_miss(w: _W, f: Features, b: _Body) -> None:
    """A miss: the first one binds the miss path; one reachable mode is inlined."""
    w(0, "else:")
    with w.indent():
        w(0, "if inuse is None:   # the first miss of the dispatch: bind the miss path")
        if f.lru_only and b.single:
            w(1, "inuse = True   # lru tests 'in use' against the dispatch's experts directly")
        else:
            w(1, _inuse(f))
        if b.single:
            with w.indent():
                lru = f.lru_only
                _emit_needed(w, (b.modes[0] == "hybrid", "to_cpu = tokens < self._cpu_limit"),
                             (True, "store = cache.store"), (True, "free = cache.pool.free"),
                             (lru, "od = store.od"), (not lru, "evict = store.evict"),
                             (not lru, "insert = store.insert"),
                             (not lru, "smiss = store.miss if store.needs_miss else None"),
                             (f.filters, "admits = store.admits if store.filters else None"),
                             (True, b.counters))
            _emit_inline_miss(w, f, b.modes[0])
        else:
            w(0, "where[i] = miss(cache, key, w, tokens, inuse, loads, evicted)")


def _emit_stats(w: _W, f: Features, b: _Body) -> None:
    """The dispatch's counts into the stats, and what the signals observe."""
    if b.single:
        w(0, "if inuse is not None:   # there was a miss")
        for var, attr in (("nd", "demand_loads"), ("nst", "streamed"), ("nbg", "background_loads"),
                          ("ncpu", "cpu_computes"), ("nev", "evictions")):
            if var in b.counters:
                w(1, f"r_{var} += {var}" if b.lean else f"self.{attr} += {var}")
    if b.counts_only:   # the transfers the timeline plays: demand loads and streams
        w(1, "m = nd + nst")
        w(0, "else:")
        w(1, "m = 0")
    if b.lean:
        w(0, "l_acc[layer] += n")
        w(0, "l_hit[layer] += hits")
    else:
        w(0, "self.l_acc[layer] += n")
        w(0, "self.l_hit[layer] += hit.count(True)")
    _emit_needed(w, (f.rebalance, "self.dispatches += 1"),
                 (f.history, "self.history.observe(layer, experts)"),
                 (f.affinity, "self.affinity.observe(layer, self.step, experts)"),
                 (f.learned, "self.learned.observe(layer, self.step, experts, weights, predictions)"),
                 (f.signal, "self.signal.observe(layer, experts)"))
    if f.prefetch or f.ttl or f.memory or f.rebalance or f.monitor:   # what follows needs inuse
        if f.lru_only and b.single:
            w(0, "inuse = {(layer, x) for x in experts}")
        else:
            w(0, "if inuse is None:")
            w(1, _inuse(f))


def _emit_prefetch(w: _W, f: Features, b: _Body) -> None:
    """Prefetch proposals after the demand path (guarded only where an adapt rule or the
    initial value can make the strategy none)."""
    if not f.prefetch:
        return
    guard = f.prefetch_off
    if f.history_next_only:
        if guard:
            w(0, "if self.strategy != 'none':   # one layer ahead")
        else:
            w(0, "# one layer ahead")
        with w.indent(1 if guard else 0):
            w(0, "t = layer + 1")
            w(0, "if t == self.num_layers:")
            w(1, "t = 0")
            if f.lookahead_strategy:
                w(0, "if predictions and t in predictions:   # lookahead: the caller's predictions")
                w(1, "props = [(t, e) for e in dict.fromkeys(predictions[t])][:self.budget]")
                w(0, "else:   # no prediction for the target: history")
                w(1, "props = [(t, e) for e in self.history.top(t, self.budget)]")
            else:
                w(0, "props = [(t, e) for e in self.history.top(t, self.budget)]")
            w(0, "if props:")
            w(1, f"self._issue(props, inuse, loads, {b.ev})")
    else:
        if guard:
            w(0, "if self.strategy != 'none':")
        w(1 if guard else 0, f"self._prefetch(layer, experts, predictions, inuse, loads, {b.ev})")


def _emit_triggers(w: _W, f: Features, b: _Body) -> None:
    """TTL expiry, memory pressure, rebalancing, the monitor, and a pending capacity cut:
    each ``(needed, set-up line, test, action)`` where the policy can reach it."""
    ev = b.ev
    every = "self.dispatches % self.rebalance_interval == 0"
    for needed, setup, test, action in (
            (f.ttl, None, "self.ttl_n is not None", f"self._ttl_sweep(inuse, {ev})"),
            (f.memory, "thr = self.mem_threshold",
             "thr is not None and self.pool.used * self.expert_bytes >= thr * self.mem_budget",
             f"self._pressure(inuse, {ev})"),
            (f.rebalance, None, f"self.rebalance_interval and {every}",
             f"self._rebalance(self.allocation, inuse, {ev})"),
            (f.monitor, None, "n", "self._observe(hit, tokens, inuse, evicted)"),
            (True, None, "len(res) > cache.capacity   # a capacity cut that met keys in use completes now",
             f"self._trim(cache, layer, experts, {ev})")):
        if needed:
            if setup:
                w(0, setup)
            cond, _, note = test.partition("   # ")
            w(0, f"if {cond}:" + (f"   # {note}" if note else ""))
            w(1, action)


def _emit_result(w: _W, f: Features, b: _Body) -> None:
    """dispatch returns the Plan; the replay loop plays it on the timeline and counts it."""
    plan = f"_Plan(self.step, layer, experts, where, hit, loads, evicted{', steps' if f.tiers else ''})"
    if not b.replay:
        w(0, f"return {plan}")
        return
    if b.lean:   # one token (several went through dispatch() at the top of the loop)
        _emit_timeline(w, 0)
        w(0, "if stall > 0:")
        w(1, "rstall += stall")
    else:
        if b.counts_only:
            w(0, "if tokens_of is None:   # one token: every miss a demand load or a stream")
            _emit_timeline(w, 1)
            w(0, "else:")
            _emit_general_timeline(w, f, 1, "_Plan(self.step, layer, experts, where, hit, [], evicted)")
        else:
            w(0, f"stall = tl_dispatch({plan}, tokens_of, tokens)")
        w(0, "if stall > 0:")
        w(1, "self.stall += stall")
    _emit_count(w, f, 0)


def _inuse(f: Features) -> str:
    """The statement binding ``inuse``, the keys of the dispatch (its parts' with parts)."""
    if _parts(f):
        return "inuse = self._inuse(layer, experts)"
    return "inuse = {(layer, x) for x in experts}"


def _emit_admit(w: _W, f: Features, d: int, kind: str, on_fail: list[str]) -> None:
    """Inline admission at indent ``d``: filter, victim (never a key in use), slot, load.
    ``on_fail`` are the statements when the key cannot be admitted (they end the access)."""
    if f.filters:
        w(d, "if admits is not None and not admits(key):   # admission filter")
        for line in on_fail:
            w(d + 1, line)
    w(d, "if len(res) >= cache.capacity or not free:   # full (or the shared pool is)")
    if f.lru_only:
        w(d + 1, "for victim in od:   # lru: the least recent key not in use by this dispatch")
        w(d + 2, "if victim[0] != layer or victim[1] not in experts:")
        w(d + 3, "del od[victim]")
        w(d + 3, "break")
        w(d + 1, "else:")
        w(d + 2, "victim = None")
    else:
        w(d + 1, "victim = evict(inuse, key)")
    w(d + 1, "if victim is None:   # nothing evictable")
    for line in on_fail:
        w(d + 2, line)
    w(d + 1, "slot = res.pop(victim)")
    if not _lean(w, f):
        w(d + 1, "evicted.append((victim, slot))")
    w(d + 1, "nev += 1")
    if f.prefetch:
        w(d + 1, "if pf:")
        w(d + 2, "pf.pop(victim, None)")
    if f.ttl:
        w(d + 1, "ttl.pop(victim, None)")
    w(d, "else:")
    w(d + 1, "victim = None")
    w(d + 1, "slot = cache.pool.take()")
    w(d, "res[key] = slot")
    ins = "od[key] = None" if f.lru_only else "insert(key, w)"
    if f.pins:
        w(d, "if key not in pins:")
        w(d + 1, ins)
        if f.ttl:
            w(d + 1, "ttl[key] = self._stamp()")
    else:
        w(d, ins)
        if f.ttl:
            w(d, "ttl[key] = self._stamp()")
    if not _counts_only(w, f):
        w(d, f"loads.append((key, slot, victim, {kind!r}))   # a Load (Plan.raw_loads)")


def _emit_inline_miss(w: _W, f: Features, mode: str) -> None:
    """The miss path for a policy with one reachable schedule mode, inlined (at the miss's indent)."""
    if not f.lru_only:
        if f.pins:
            w(0, "if smiss is not None and key not in pins:")
        else:
            w(0, "if smiss is not None:")
        w(1, "smiss(key, w)")
    lean = _lean(w, f)
    gpu_fail = ([] if lean else ["where[i] = _STREAM   # computed from a transient buffer, not admitted"]) + \
        ["nst += 1", "continue"]
    cpu_fail = ["continue"]

    def gpu(d):
        _emit_admit(w, f, d, "demand", gpu_fail)
        w(d, "nd += 1")
        if not lean:
            w(d, "where[i] = slot")

    def cpu(d):
        w(d, "where[i] = _CPU   # computed on the CPU; loaded in the background for later")
        w(d, "ncpu += 1")
        _emit_admit(w, f, d, "background", cpu_fail)
        w(d, "nbg += 1")

    if mode == "gpu_only":
        gpu(0)
    elif mode == "cpu_fallback":
        cpu(0)
    else:
        w(0, "if to_cpu:   # hybrid: the cost model chose the CPU for this token count")
        cpu(1)
        w(0, "else:")
        gpu(1)


# metric over the window; ``n`` (accesses in the window, >= 1 here) is computed once
_METRIC_EXPR = {
    "hit_rate": "m.hits / n",
    "miss_rate": "1.0 - m.hits / n",
    "eviction_rate": "m.ev / n",
    "prefetch_accuracy": "(min(1.0, m.pfu / m.pfl) if m.pfl > 0 else None)",
    "transfer_rate": "m.ld / n",
    "stall_ms": "m.stall",
}


def _emit_rules(w: _W, pir: _ir.PolicyIR) -> None:
    w(1, "def _eval_rules(self, tokens, inuse, evicted):")
    w(2, '"""The adapt rules, evaluated after every access on the windowed metrics."""')
    w(2, "m = self.monitor")
    w(2, "rules = self.rules")
    w(2, "n = m.acc if m.acc < m.window else m.window")
    for r in pir.adapt:
        c = r.condition
        if c.metric not in _METRIC_EXPR or c.op not in schema.COMPARISON_OPS:
            raise ValueError(f"bad adapt condition {c!r}")
        thr = float(c.threshold)
        unit = r.duration.unit
        if unit not in schema.RULE_DURATION_UNITS:
            raise ValueError(f"bad rule duration unit {unit!r}")
        n = int(r.duration.n)
        desc = f"when {c.metric} {c.op} {thr!r}" + (f" for {n} {unit}" if n else "")
        kind = "" if r.origin == "rule" else f" [{r.origin}{'' if r.inverse_of is None else f', restores rule{r.inverse_of}'}]"
        w(2, f"# rule{r.index} (line {int(r.source_line)}): {desc}{kind}")
        w(2, f"r = rules[{r.index}]")
        w(2, f"x = {_METRIC_EXPR[c.metric]}")
        w(2, f"if x is not None and x {c.op} {thr!r}:")
        if unit == "accesses":
            w(3, "if r.armed:")
            w(4, "r.held += 1")
            w(3, f"if r.armed and r.held >= {n}:")
        else:
            w(3, f"if r.armed and self._advance(r, {unit!r}, {n}, tokens):")
        w(4, "r.armed = False")
        w(4, "r.held = 0")
        w(4, "r.mark = None")
        w(4, f"self._fire({r.index}, {int(r.source_line)}, _ACTIONS[{r.index}], inuse, evicted)")
        w(4, "n = m.acc if m.acc < m.window else m.window   # (an action may resize the window)")
        w(2, "else:")
        w(3, "r.held = 0")
        w(3, "r.mark = None")
        if r.inverse_of is None:
            w(3, "r.armed = True   # edge-triggered: re-armed once the condition is false")


def generate(pir: _ir.PolicyIR, *, mpl_version: str | None = None) -> str:
    """The module source for ``pir`` (deterministic: the same IR gives the same text)."""
    if mpl_version is None:
        from mpl import __version__ as mpl_version
    require_values(pir)
    f = features(pir)
    t = source_tables(pir, f)
    ir_json = pir.to_json()
    source_hash = pir.source_hash or pir.fingerprint()
    cls = class_name(pir)
    w = _W()
    w(0, '"""A compiled MoE-PolicyLang policy (generated by mpl.codegen; do not edit).')
    w(0)
    w(0, "Import it and call make_runtime(num_layers, num_experts, top_k) for a runtime whose")
    w(0, "dispatch(layer, experts, weights=None, tokens=1) returns an mpl.runtime.Plan")
    w(0, "(replay_records is the same decisions in a loop over trace records, for mpl.sim).")
    w(0, "It needs only mpl.runtime (no compiler, no lark, no torch).")
    w(0, '"""')
    w(0)
    w(0, "from mpl.runtime.backend import make as _make")
    if f.tiers:   # memory tiers: the pure runtime's tiered subclass
        w(0, "from mpl.runtime.core import DispatchError as _DispatchError, STEP_MAX as _STEP_MAX, distinct as _distinct")
        w(0, "from mpl.runtime.tiers import TieredRuntime as _Runtime")
    else:
        w(0, "from mpl.runtime.core import DispatchError as _DispatchError, PureRuntime as _Runtime, STEP_MAX as _STEP_MAX, distinct as _distinct")
    w(0, "from mpl.runtime.plan import CPU as _CPU, STREAM as _STREAM, Plan as _Plan")
    w(0, "from mpl.runtime.values import Count as _Count, Size as _Size")
    w(0)
    w(0, f"POLICY_NAME = {pir.name!r}")
    w(0, f"SOURCE_HASH = {source_hash!r}")
    w(0, f"MPL_VERSION = {mpl_version!r}")
    w(0, f"GENERATOR_VERSION = {GENERATOR_VERSION}")
    w(0, f"IR_JSON = {ir_json!r}")
    w(0)
    w(0, "# Every schema parameter, as lowered (a size capacity in bytes, times in ms, *_gb in GB).")
    w(0, "PARAMS = {")
    for key, v in t.params.items():
        w(1, f"{key!r}: {source(v)},")
    w(0, "}")
    w(0)
    w(0, "# What this policy can reach (its values and every value an adapt rule can set).")
    w(0, "FEATURES = {")
    for k, v in t.features.items():
        w(1, f"{k!r}: {source(v)},")
    w(0, "}")
    w(0)
    w(0, "# Adapt rules: the inverse_of of each (the restoring half of a conditional pair).")
    w(0, f"_RULES = {source(t.rules)}")
    w(0, "_ACTIONS = (")
    for r, acts in zip(pir.adapt, t.actions):
        w(1, f"{source(acts)},   # rule{r.index}")
    w(0, ")")
    w(0, "# ... their conditions, for the compiled engine: (metric, op, threshold, for N, unit, line)")
    w(0, "_CONDITIONS = (")
    for r, cond in zip(pir.adapt, t.conditions):
        w(1, f"{source(cond)},   # rule{r.index}")
    w(0, ")")
    w(0)
    w(0)
    w(0, f"class {cls}(_Runtime):")
    w(1, f'"""Runtime of policy {identifier(pir.name)} (straight-line dispatch)."""')
    w(0)
    _emit_dispatch(w, f, pir)
    w(0)
    _emit_replay(w, f)
    if pir.adapt:
        w(0)
        _emit_rules(w, pir)
    w(0)
    w(0)
    w(0, "def make_runtime(num_layers, num_experts, top_k, *, expert_bytes=None, cost=None, backend=None,")
    w(0, "                 layer_ids=None, stored_bits=None):")
    w(1, '"""A fresh runtime for a model with this shape (MoE layers, experts per layer, top-k), on')
    w(1, 'the compiled engine where it covers the policy, else pure (``backend``: "pure" or')
    w(1, '"compiled" to ask for one; mpl.runtime.backend). ``layer_ids`` (the MoE layers\'')
    w(1, "decoder-layer ids) and ``stored_bits`` (the checkpoint's precision) size memory tiers.")
    w(1, '"""')
    w(1, f"return _make({cls}, PARAMS, FEATURES, _CONDITIONS, _ACTIONS, _RULES, num_layers, num_experts,")
    w(1, "             top_k, expert_bytes=expert_bytes, cost=cost, backend=backend, policy=POLICY_NAME,")
    w(1, "             layer_ids=layer_ids, stored_bits=stored_bits)")
    return w.text()
