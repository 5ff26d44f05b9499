"""The tuner's search: successive halving on prefixes of the trace (``mplc tune``'s default;
see :mod:`mpl.tune` for the whole).

**Rounds.** A round replays its candidates on a prefix of the trace (cut at a step boundary)
and ranks them on the part of it **after the cache filled** (:func:`warm_point`: the first
step by which the trace has used as many distinct keys as the budget holds, and every layer
its share): until then every rule holds everything it saw and the rules differ only in how
fast they warm up, which a short prefix overweights (a rule that admits by frequency, or one
with a long memory, starts slowly and ends well). The first round is a sixteenth of the trace
and at least :data:`MIN_PREFIX` dispatches after the warm-up, the second an eighth; the
survivors go on to the whole trace, ranked there on all of it (what the user runs).

Three stages:

1. **structure x eviction x parameters**: one shared cache of the budget, per-layer caches
   splitting it (uniform / entropy / frequency allocation), crossed with every live eviction
   rule of the schema at its defaults; then, on the same prefix, each rule in its best
   structure with every value the schema lists for the tuner (``Param.tune``: crf /
   classlru half-lives, the frequency_threshold admission share, the LFU decay), one
   parameter at a time; the three best of the first round also get a twin
   with **static pins**, a quarter of a cache (a shared cache: the ids the trace uses most,
   pinned in every layer; per-layer caches: each layer's own most used experts). The first
   round runs every candidate under the schedule mode that wins for plain LRU on the same
   prefix (:func:`probe_mode`: the schedule is mostly a matter of the hardware and the miss
   rate); from the second round on every survivor is replayed in **every schedule mode**.
   Each round keeps its best :data:`KEEP_MIN` and the **best of each rule family** (the
   eviction rule, whatever its structure, parameters and schedule): every rule reaches the
   whole trace at its best, so no rule is lost to a prefix;
2. **prefetch** on the best policy of stage 1: every strategy of the schema (``lookahead``
   only when the trace carries predictions) with budgets 1, 2 and 4 (at most the per-cache
   capacity), ``learned`` at budget 2 and :data:`LEARNED_CONFIDENCE`;
3. **schedule**: every other schedule mode on the two best whole-trace candidates so far and
   the one with the most hits (a prefetcher may want another mode than its base); then, on
   the whole trace, around the winner :func:`choose` picks (:func:`polish`): its budget-1
   prefetches, and when it is not the objective's best, its other structures.

4. **memory tiers** (``mplc tune --device-memory``; :mod:`mpl.tune_tiers`): the hierarchies
   made from the best candidates so far go through the same rounds (:func:`tier_halving`).

In stages 2 and 3 a candidate goes on to a longer prefix only while it beats the policy it
extends (its base, without the prefetch or the schedule) on the same prefix.

Before the stages, the **reference rows** are replayed (:func:`replay_references`, the grid
search too): plain LRU, shared and per-layer, and each serving engine's rule in the structure
the engine uses (llama.cpp: ``crf`` and ``classlru`` per layer, ``classlru`` shared; vLLM:
``vllm_lfru`` per layer) and the layer-aware ``farthest_layer`` on the shared cache, each in
every schedule mode on the first prefix and at its best mode on the whole trace: a rule is
compared at its best schedule. The winner (:func:`choose`, both searches) is the objective's
best plain cache at least as fast as every reference row and with at least the demand hit
rate of every one, when there is one.
"""

from __future__ import annotations

from mpl import schema
from mpl.tune_tiers import HIERARCHY

#: the shortest window a round ranks on, after the warm-up (shorter traces are replayed whole)
MIN_PREFIX = 1000
#: the rounds' prefixes as shares of the trace (1/16, then 1/8), before the whole trace
ROUND_SHARES = (16, 8)
#: the confidence the learned predictor is tried with
LEARNED_CONFIDENCE = 0.4
#: each round keeps its best this many candidates, besides the best of each rule family
KEEP_MIN = 6


def _live_rules() -> list[str]:
    return [e.name for e in schema.param("cache.eviction").enum if not e.replay_only]


def _copy(blocks: dict) -> dict:
    return {k: dict(v) for k, v in blocks.items()}


def warm_point(trace, slots: int) -> int:
    """The dispatches up to the end of the step in which the trace has used ``slots``
    distinct keys (a shared cache of the budget is full) and every MoE layer ``slots //
    layers`` of its own (each layer's cache of a per-layer split is full); 0 when the trace
    never does (every cache holds everything it sees: nothing to discount)."""
    from mpl.sim import tracepack as packing

    h = trace.header
    E, L = h.num_experts, h.num_moe_layers
    pk = packing.pack_trace(trace, E)
    layers, offs, experts, steps = pk.layers, pk.offs, pk.experts, pk.steps
    per = slots // L
    seen: set = set()
    per_layer = [0] * L
    short = L if per >= 1 else 0            # layers still below their share
    n = len(pk)
    for i in range(n):
        lay = layers[i]
        base = lay * E
        for j in range(offs[i], offs[i + 1]):
            k = base + experts[j]
            if k not in seen:
                seen.add(k)
                per_layer[lay] += 1
                if per_layer[lay] == per:
                    short -= 1
        if len(seen) >= slots and short <= 0:
            step = steps[i]
            while i + 1 < n and steps[i + 1] == step:
                i += 1
            return i + 1
    return 0


def rung_sizes(n: int, warm: int = 0) -> list:
    """Prefix lengths of the rounds: a sixteenth and an eighth of the trace, each at least
    ``warm + MIN_PREFIX`` (a window after the warm-up to rank on), then the whole trace
    (None); rounds as long as the trace are dropped."""
    out = []
    for share in ROUND_SHARES:
        size = max(warm + MIN_PREFIX, n // share)
        if size < n and size not in out:
            out.append(size)
    return out + [None]


def pin_ids(trace, count: int) -> list[int]:
    """The ``count`` expert ids the trace uses most over all layers (ties: lower id)."""
    if count < 1:
        return []
    from collections import Counter

    from mpl.sim import tracepack as packing
    # the pack holds each dispatch's distinct experts (cached on the trace, which the
    # tuner holds: every candidate's replay uses it)
    uses = Counter(packing.pack_trace(trace, trace.header.num_experts).experts)
    return [e for e, _ in sorted(uses.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


#: a candidate's per-layer pins (cache block key, not a schema parameter): ((decoder-layer
#: id, (expert ids...)), ...), written as the cache's ``pin layers = ...`` items
LAYER_PINS = "layer_pins"


def layer_placement(trace, count: int) -> tuple:
    """Each MoE layer's ``count`` most used experts (:func:`mpl.sim.placement.place`), as
    :data:`LAYER_PINS` holds them."""
    from mpl.sim.placement import place

    return tuple(sorted(place(trace, count).by_layer().items()))


def pins_for(blocks: dict, layers: int) -> int:
    """How many ids to pin in a cache of ``blocks``: a quarter of a cache (a shared cache
    pins an id in every layer)."""
    cap = int(blocks["cache"]["capacity"])
    return cap // 4 if "per_layer" in blocks else cap // (4 * layers)


def rule_params(rule: str) -> list:
    """The cache parameters of ``rule`` that the schema gives the tuner values for
    (``Param.tune``; the rule is in the parameter's ``only_with``)."""
    out = []
    for p in schema.block("cache").params:
        ow = p.only_with
        if p.tune and ow is not None and ow[0] == "cache.eviction" and rule in ow[1]:
            out.append(p)
    return out


def param_variants(blocks: dict) -> list[dict]:
    """``blocks`` with each tuned value of each parameter of its rule (one at a time)."""
    out = []
    for p in rule_params(family(blocks)):
        for v in p.tune:
            if v != p.default:
                var = _copy(blocks)
                var["cache"][p.name] = v
                out.append(var)
    return out


def structure_rules(structures: list[dict], params: bool = True) -> list[dict]:
    """Every structure x every live rule, at its defaults and (``params``) with each tuned
    value of each of its parameters (one parameter at a time)."""
    out = []
    for st in structures:
        for ev in _live_rules():
            b = _copy(st)
            b["cache"]["eviction"] = ev
            out.append(b)
            if params:
                out.extend(param_variants(b))
    return out


def prefetch_variants(bases: list[dict], predictions: bool) -> list[dict]:
    out = []
    for base in bases:
        cap = int(base["cache"]["capacity"])
        for strat in schema.param("prefetch.strategy").enum_names():
            if strat == "none" or (strat == "lookahead" and not predictions):
                continue
            # the learned predictor (pure Python, the costliest to replay) at budget 2 only
            for b in ((2,) if strat == "learned" else (1, 2, 4)):
                if b > cap:
                    continue
                blocks = _copy(base)
                blocks["prefetch"] = {"strategy": strat, "budget": b}
                if strat == "learned":
                    blocks["prefetch"]["confidence"] = LEARNED_CONFIDENCE
                out.append(blocks)
    return out


def mode_of(blocks: dict) -> str:
    return blocks.get("schedule", {}).get("mode", schema.param("schedule.mode").default)


def with_mode(blocks: dict, mode: str) -> dict:
    """``blocks`` with schedule mode ``mode`` (the default mode: no schedule block)."""
    b = _copy(blocks)
    if mode == schema.param("schedule.mode").default:
        b.pop("schedule", None)
    else:
        b["schedule"] = {"mode": mode}
    return b


def schedule_variants(bases: list[dict]) -> list[dict]:
    """Each base in every schedule mode but its own."""
    out = []
    for base in bases:
        for mode in schema.param("schedule.mode").enum_names():
            if mode != mode_of(base):
                out.append(with_mode(base, mode))
    return out


def every_mode(blocks_list: list[dict]) -> list[dict]:
    """Each of ``blocks_list`` in every schedule mode (its own first)."""
    return [x for b in blocks_list for x in [b] + schedule_variants([b])]


def references(structures: list[dict]) -> list[tuple[str, dict]]:
    """(role, blocks) of the rows every search replays on the whole trace (default mode)."""
    shared = structures[0]
    per = next((s for s in structures[1:] if s["per_layer"]["allocation"] == "uniform"), None)
    out = []

    def add(role, st, ev):
        if st is not None:
            b = _copy(st)
            b["cache"]["eviction"] = ev
            out.append((role, b))

    add("lru", shared, "lru")
    add("lru", per, "lru")
    for ev in ("crf", "classlru", "vllm_lfru"):
        add("anchor", per, ev)
    add("anchor", shared, "classlru")
    add("anchor", shared, "farthest_layer")
    return out


def replay_references(runner, structures: list[dict], warm: int, size) -> None:
    """The reference rows on ``runner`` (every search replays them): each in every schedule
    mode on the first ``size`` dispatches (None: the whole trace), ranked after ``warm``, and
    at its best mode on the whole trace; plain LRU in the default mode too (the floor of the
    ``hit_rate`` objective)."""
    for role, blocks in references(structures):
        if role == "lru":
            runner.run(0, [blocks], None, role=role)
        got = runner.run_window(0, every_mode([blocks]), warm, size)
        best = _top(got, 1)
        if best:
            runner.run(0, [best[0].blocks], None, role=role)


def family(blocks: dict) -> str:
    """The rule family of a candidate: its eviction rule."""
    return str(blocks["cache"]["eviction"])


def _top(cands, k: int):
    """The ``k`` best candidates without an error, one of each outcome: a candidate whose
    replay gave exactly the numbers of a better-ranked (or simpler) one behaved the same
    on those dispatches (per-layer allocations that split alike, schedule modes that decide
    alike) and is not replayed further."""
    out, seen = [], set()
    for c in cands:
        if c.error:
            continue
        sig = (c.hit_rate, c.tokens_per_s, c.stall_ms_per_step, c.prefetch_loads)
        if sig in seen:
            continue
        seen.add(sig)
        out.append(c)
        if len(out) >= k:
            break
    return out


def _survivors(cands, k: int, families: bool) -> list:
    """The best ``k`` (:func:`_top`) and, with ``families``, the best of each rule family."""
    out = _top(cands, k)
    if families:
        have = {family(c.blocks) for c in out}
        for c in cands:                          # best first
            f = family(c.blocks)
            if not c.error and f not in have:
                have.add(f)
                out.append(c)
    return out


def _base_key(runner, blocks: dict, drop: tuple) -> str:
    return runner.key({k: v for k, v in blocks.items() if k not in drop})


def _halve(runner, stage: int, blocks: list[dict], sizes: list, keep: int, extra=None,
           bases: list[dict] | None = None, drop: tuple = (), warm: int = 0,
           families: bool = False, modes: bool = False) -> list:
    """Successive halving of ``blocks`` over the prefix ``sizes`` (the last: the whole trace),
    each prefix ranked on its dispatches after ``warm``; ``extra(best)`` adds candidates to
    the first round, made from its best. ``families``: the best of each rule family goes on
    too. ``modes``: the survivors of the first round are replayed in every schedule mode
    (on the second round's prefix, or again on the first's when it is the only one). With
    ``bases`` (the policies the candidates extend by the blocks ``drop``: a prefetch or a
    schedule), each round replays the bases too, and a candidate goes on only while it beats
    its base on the same prefix (an extension that does not pay on a prefix is not worth a
    longer replay). A prefetching candidate that loaded nothing is its base over again: it
    goes no further. -> the last round, best first."""
    obj = runner.objective

    def run(bl, size):
        return runner.run_window(stage, bl, warm if size is not None else 0, size)

    def keep_better(cands, size):
        if not bases:
            return cands
        ref = {_base_key(runner, c.blocks, drop): c for c in run(bases, size)}
        out = []
        for c in cands:
            b = ref.get(_base_key(runner, c.blocks, drop))
            if b is None or b.error or c.score(obj)[:2] > b.score(obj)[:2]:
                out.append(c)
        return out

    cands = run(blocks, sizes[0])
    if extra is not None:
        more = extra([c.blocks for c in _top(cands, KEEP_MIN)])
        if more:
            cands = sorted(cands + run(more, sizes[0]), key=lambda c: c.score(obj), reverse=True)
    cands = keep_better(cands, sizes[0])
    rounds = list(sizes[1:])
    if modes and not rounds:
        rounds = [sizes[0]]                      # one round only: the modes on it again
    for i, size in enumerate(rounds):
        live = [c for c in cands if not ("prefetch" in c.blocks and c.prefetch_loads == 0)]
        surv = [c.blocks for c in _survivors(live, keep if size is None else KEEP_MIN,
                                             families)]
        if not surv:
            return []
        if modes and i == 0:
            surv = every_mode(surv)
        cands = keep_better(run(surv, size), size)
    return cands


def probe_mode(runner, structures: list[dict], size, warm: int) -> str:
    """The schedule mode under which plain LRU (shared and per-layer uniform) does best on
    the prefix ``size``: the mode the first round ranks every candidate in."""
    lrus = [b for role, b in references(structures) if role == "lru"]
    cands = runner.run_window(1, every_mode(lrus), warm, size)
    ok = [c for c in cands if not c.error]
    return mode_of(ok[0].blocks) if ok else schema.param("schedule.mode").default


def halving(runner, trace, structures: list[dict], *, predictions: bool, keep: int = 3,
            slots: int | None = None) -> None:
    """Run the search (module doc) on ``runner`` (an :class:`mpl.tune.Runner`) from the cache
    ``structures`` for the budget (``mpl.tune._structures``: shared first; ``slots``: the
    budget, default the shared structure's capacity)."""
    h = trace.header
    L = h.num_moe_layers
    slots = slots if slots is not None else int(structures[0]["cache"]["capacity"])
    warm = warm_point(trace, slots)
    sizes = rung_sizes(len(trace), warm)
    if len(sizes) == 1:
        warm = 0                                 # the whole trace only: ranked on all of it
    runner.warm = warm
    replay_references(runner, structures, warm, sizes[0])

    ids = pin_ids(trace, max(pins_for(st, L) for st in structures))
    placed: dict = {}                 # pins per layer -> that placement (made once)

    def pinned(survivors):
        """Static placement from the trace for the best survivors: a shared cache pins the
        ids the trace uses most in every layer; per-layer caches pin each layer's own
        hottest experts (frequency placement per layer, as KTransformers places them)."""
        out = []
        for b in survivors[:3]:
            if b["cache"].get("pin") or b["cache"].get(LAYER_PINS):
                continue
            n = pins_for(b, L)
            v = _copy(b)
            if "per_layer" in b:
                # within every layer's capacity, whatever the allocation gives it
                n = min(n, int(b["per_layer"].get("min_capacity", n)), trace.header.num_experts)
                if n < 1:
                    continue
                if n not in placed:
                    placed[n] = layer_placement(trace, n)
                v["cache"][LAYER_PINS] = placed[n]
            elif n >= 1:
                v["cache"]["pin"] = tuple(ids[:n])
            else:
                continue
            out.append(v)
        return out

    # the first round: every structure x rule at its defaults, then each rule's parameter
    # values in that rule's best structure (same prefix), under the probed schedule mode
    mode = probe_mode(runner, structures, sizes[0], warm)
    plain = [with_mode(b, mode) for b in structure_rules(structures, params=False)]
    bests: dict = {}
    for c in runner.run_window(1, plain, warm, sizes[0]):
        if not c.error:
            bests.setdefault(family(c.blocks), c.blocks)
    first = plain + [v for b in bests.values() for v in param_variants(b)]
    s1 = _halve(runner, 1, first, sizes, keep, extra=pinned, warm=warm, families=True,
                modes=True)
    bases = [c.blocks for c in _top(s1, 1)]
    s2 = _halve(runner, 2, prefetch_variants(bases, predictions), sizes, 2, bases=bases,
                drop=("prefetch",), warm=warm) if bases else []
    whole = sorted((c for c in runner.all if c.fraction >= 1.0 and not c.error),
                   key=lambda c: c.score(runner.objective), reverse=True)
    tops = [c.blocks for c in _top(whole, 2)]
    most = max(whole, key=lambda c: (c.hit_rate, c.tokens_per_s)) if whole else None
    if most is not None and most.blocks not in tops:
        tops.append(most.blocks)     # the most hits, made faster by the schedule
    if tops:
        _halve(runner, 3, schedule_variants(tops), sizes[-2:], 2, bases=tops,
               drop=("schedule",), warm=warm)
    polish(runner, structures, predictions)
    return s2


def choose(ok: list, objective: str) -> tuple:
    """(winner, plain LRU row, whether the winner matches every reference row) among ``ok``,
    the rows replayed on the whole trace, best first by ``objective``.

    Never slower than plain LRU on the default schedule (the floor of the ``hit_rate``
    objective). A plain cache wins only if it is at least as fast as every reference rule
    at its best schedule (plain LRU and the engines' rules, plain caches too) and has at
    least the demand hit rate of every one, when some plain candidate is (a reference row
    that is both the fastest and the most hitting of them is one); memory-tier candidates,
    whose accesses a lower tier may serve, compete by the objective."""
    lrus = [c for c in ok if c.role == "lru" and "schedule" not in c.blocks]
    lru = max(lrus, key=lambda c: (c.tokens_per_s, c.hit_rate)) if lrus else None
    floor = [c for c in ok if lru is None or c.tokens_per_s >= lru.tokens_per_s] or ok
    refs = best_per_reference(ok, objective)
    if not refs:
        return floor[0], lru, None
    need_t = max(c.tokens_per_s for c in refs)
    need_h = max(c.demand_hit_rate for c in refs)

    def matches(c):
        return c.tokens_per_s >= need_t and c.demand_hit_rate >= need_h
    best = floor[0]
    if any(matches(c) for c in floor if HIERARCHY not in c.blocks):
        best = next(c for c in floor if HIERARCHY in c.blocks or matches(c))
    return best, lru, matches(best)


def best_per_reference(rows, objective: str) -> list:
    """Each reference rule of ``rows`` (plain LRU and the engines' rules, by rule and
    structure) at its best schedule on the whole trace, best first by ``objective``."""
    best: dict = {}
    for c in rows:
        if c.role and not c.error and c.fraction >= 1.0:
            k = (c.role, _structure_key(c.blocks))
            if k not in best or c.score(objective) > best[k].score(objective):
                best[k] = c
    return sorted(best.values(), key=lambda c: c.score(objective), reverse=True)


def _structure_key(blocks: dict) -> str:
    """A candidate without its schedule: the same rule in the same structure."""
    return repr(sorted((b, sorted(v.items())) for b, v in blocks.items() if b != "schedule"))


def _winner(runner, aside_only: bool = False):
    """The plain-cache winner so far (:func:`choose` over the candidates replayed
    on the whole trace), or None (none yet, or a memory-tier winner; ``aside_only``: or the
    objective's best itself, which the earlier stages extended)."""
    whole = sorted((c for c in runner.all if c.fraction >= 1.0 and not c.error),
                   key=lambda c: c.score(runner.objective), reverse=True)
    if not whole:
        return None
    best = choose(whole, runner.objective)[0]
    if aside_only and best is whole[0]:
        return None
    return best.blocks if "cache" in best.blocks and HIERARCHY not in best.blocks else None


def polish(runner, structures: list[dict], predictions: bool) -> None:
    """The end of stage 3, around the winner, on the whole trace: its lightest prefetch of each
    strategy (budget 1: a small gain shows on the whole trace only); then, when the winner
    is not the objective's best (the fastest plain cache at least as good as every reference
    rule, which the earlier stages did not extend: a faster one with fewer hits led them),
    the winner in each other cache structure of its kind (shared, or per-layer with each
    allocation), its rule, parameters, prefetch and schedule kept, without pins (a structure
    that lost on the first prefix can win on the whole trace by a little)."""
    w = _winner(runner)
    if w is None:
        return
    if "prefetch" not in w:
        # the lightest prefetch of each strategy (budget 1: one transfer a dispatch at most),
        # whose small gain shows on the whole trace only
        runner.run(3, [v for v in prefetch_variants([w], predictions)
                       if v["prefetch"]["budget"] == 1], None)
    w = _winner(runner, aside_only=True)
    if w is None:
        return
    out = []
    for st in structures:
        if ("per_layer" in st) != ("per_layer" in w):
            continue                         # (the structures of the winner's kind)
        v = _copy(w)
        v.pop("per_layer", None)
        v["cache"].pop("pin", None)          # (pins are placed for a structure: not moved)
        v["cache"].pop(LAYER_PINS, None)
        v["cache"]["capacity"] = st["cache"]["capacity"]
        if "per_layer" in st:
            v["per_layer"] = dict(st["per_layer"])
        if v != w:
            out.append(v)
    runner.run(3, out, None)


def tier_halving(runner, trace, cands: list[dict], *, keep: int = 3, slots: int) -> list:
    """Stage 4: the memory-tier candidates (:mod:`mpl.tune_tiers`) through the rounds of
    :func:`halving` (the same prefixes, ranked after the same warm-up of a cache of
    ``slots``), the survivors on the whole trace; -> the last round, best first."""
    if not cands:
        return []
    warm = warm_point(trace, slots)
    sizes = rung_sizes(len(trace), warm)
    if len(sizes) == 1:
        warm = 0
    return _halve(runner, 4, cands, sizes, keep, warm=warm)
