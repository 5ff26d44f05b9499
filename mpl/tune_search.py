"""The tuner's search: successive halving on prefixes of the trace (``mplc tune``'s default;
see :mod:`mpl.tune` for the whole).

A round replays its candidates on a prefix of the trace; the best fifth (at least a few) go
on to a prefix four times longer, the best of those to the whole trace. A prefix is cut
at a step boundary and is at least :data:`MIN_PREFIX` dispatches (a short trace is replayed
whole at once). Three stages, each halving on its own:

1. **structure x eviction**: one shared cache of the budget, per-layer caches splitting it
   (uniform / entropy / frequency allocation), crossed with every live eviction rule of the
   schema, ``crf`` and ``classlru`` with a second half-life (:data:`HALF_LIVES`); the three
   best of the first round also get a twin with **static pins** in that round: the expert ids
   the trace uses most over all layers (``cache.pin`` holds ids pinned in every layer), as
   many as take a quarter of a cache;
2. **prefetch** on the best policy of stage 1: every strategy of the schema
   (``lookahead`` only when the trace carries predictions) with budgets 1, 2 and 4 (at most
   the per-cache capacity), ``learned`` at budget 2 and :data:`LEARNED_CONFIDENCE`;
3. **schedule**: every other schedule mode on the two best whole-trace candidates so far and
   the one with the most hits, on the longest prefix, the best two of them on the whole
   trace.

In stages 2 and 3 a candidate goes on to a longer prefix only while it beats the policy it
extends (its base, without the prefetch or the schedule) on the same prefix.

Before the stages, the **reference rows** are replayed on the whole trace: plain LRU, shared
and per-layer (the floor: the tuner never recommends a policy slower than it), and each
serving engine's rule in the structure the engine uses (llama.cpp: ``crf`` and ``classlru``
per layer, ``classlru`` shared; vLLM: ``vllm_lfru`` per layer) and the layer-aware
``farthest_layer`` on the shared cache. They are part of the leaderboard like any candidate.
"""

from __future__ import annotations

from mpl import schema

#: the shortest prefix a round replays (shorter traces are replayed whole)
MIN_PREFIX = 1000
#: crf / classlru are also tried with this half-life (steps), besides the schema default
HALF_LIVES = (32,)
#: the confidence the learned predictor is tried with
LEARNED_CONFIDENCE = 0.4
#: each round keeps this share of its candidates (and at least KEEP_MIN)
KEEP_SHARE = 0.2
KEEP_MIN = 6


def _live_rules() -> list[str]:
    return [e.name for e in schema.param("cache.eviction").enum if not e.replay_only]


def _copy(blocks: dict) -> dict:
    return {k: dict(v) for k, v in blocks.items()}


def rung_sizes(n: int) -> list:
    """Prefix lengths of the rounds: a sixteenth and a quarter of the trace (at least
    MIN_PREFIX), then the whole trace (None); rounds longer than the trace are dropped."""
    out = []
    for share in (16, 4):
        size = max(MIN_PREFIX, n // share)
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


def pins_for(blocks: dict, layers: int) -> int:
    """How many ids to pin in a cache of ``blocks``: a quarter of a cache (a shared cache
    pins an id in every layer)."""
    cap = int(blocks["cache"]["capacity"])
    return cap // 4 if "per_layer" in blocks else cap // (4 * layers)


def structure_rules(structures: list[dict]) -> list[dict]:
    out = []
    for st in structures:
        for ev in _live_rules():
            b = _copy(st)
            b["cache"]["eviction"] = ev
            out.append(b)
            if ev in ("crf", "classlru"):
                for hl in HALF_LIVES:
                    v = _copy(b)
                    v["cache"]["crf_half_life"] = hl
                    out.append(v)
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


def schedule_variants(bases: list[dict]) -> list[dict]:
    default = schema.param("schedule.mode").default
    out = []
    for base in bases:
        for mode in schema.param("schedule.mode").enum_names():
            if mode == default:
                continue
            blocks = _copy(base)
            blocks["schedule"] = {"mode": mode}
            out.append(blocks)
    return out


def references(structures: list[dict]) -> list[tuple[str, dict]]:
    """(role, blocks) of the rows every search replays on the whole trace."""
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


def _base_key(runner, blocks: dict, drop: tuple) -> str:
    return runner.key({k: v for k, v in blocks.items() if k not in drop})


def _halve(runner, stage: int, blocks: list[dict], sizes: list, keep: int, extra=None,
           bases: list[dict] | None = None, drop: tuple = ()) -> list:
    """Successive halving of ``blocks`` over the prefix ``sizes`` (the last: the whole trace);
    ``extra(best)`` adds candidates to the first round, made from its best. With ``bases`` (the policies
    the candidates extend by the blocks ``drop``: a prefetch or a schedule), each round
    replays the bases too, and a candidate goes on only while it beats its base on the same
    prefix (an extension that does not pay on a prefix is not worth a longer replay). A
    prefetching candidate that loaded nothing is its base over again: it goes no further.
    -> the last round, best first."""
    obj = runner.objective

    def keep_better(cands, size):
        if not bases:
            return cands
        ref = {_base_key(runner, c.blocks, drop): c for c in runner.run(stage, bases, size)}
        out = []
        for c in cands:
            b = ref.get(_base_key(runner, c.blocks, drop))
            if b is None or b.error or c.score(obj)[:2] > b.score(obj)[:2]:
                out.append(c)
        return out

    cands = runner.run(stage, blocks, sizes[0])
    if extra is not None:
        more = extra([c.blocks for c in _top(cands, KEEP_MIN)])
        if more:
            cands = sorted(cands + runner.run(stage, more, sizes[0]),
                           key=lambda c: c.score(obj), reverse=True)
    cands = keep_better(cands, sizes[0])
    for size in sizes[1:]:
        live = [c for c in cands if not ("prefetch" in c.blocks and c.prefetch_loads == 0)]
        n = max(keep if size is None else KEEP_MIN, int(len(live) * KEEP_SHARE))
        surv = [c.blocks for c in _top(live, n)]
        if not surv:
            return []
        cands = keep_better(runner.run(stage, surv, size), size)
    return cands


def halving(runner, trace, structures: list[dict], *, predictions: bool, keep: int = 3) -> None:
    """Run the search (module doc) on ``runner`` (an :class:`mpl.tune.Runner`) from the cache
    ``structures`` for the budget (``mpl.tune._structures``: shared first)."""
    h = trace.header
    L = h.num_moe_layers
    sizes = rung_sizes(len(trace))
    for role, blocks in references(structures):
        runner.run(0, [blocks], None, role=role)

    ids = pin_ids(trace, max(pins_for(st, L) for st in structures))

    def pinned(survivors):
        out = []
        for b in survivors[:3]:
            n = pins_for(b, L)
            if n >= 1 and not b["cache"].get("pin"):
                v = _copy(b)
                v["cache"]["pin"] = tuple(ids[:n])
                out.append(v)
        return out

    s1 = _halve(runner, 1, structure_rules(structures), sizes, keep, extra=pinned)
    bases = [c.blocks for c in _top(s1, 1)]
    s2 = _halve(runner, 2, prefetch_variants(bases, predictions), sizes, 2, bases=bases,
                drop=("prefetch",)) if bases else []
    whole = sorted((c for c in runner.all if c.fraction >= 1.0 and not c.error),
                   key=lambda c: c.score(runner.objective), reverse=True)
    tops = [c.blocks for c in _top(whole, 2)]
    most = max(whole, key=lambda c: (c.hit_rate, c.tokens_per_s)) if whole else None
    if most is not None and most.blocks not in tops:
        tops.append(most.blocks)     # the most hits, made faster by the schedule
    if tops:
        _halve(runner, 3, schedule_variants(tops), sizes[-2:], 2, bases=tops,
               drop=("schedule",))
    return s2
