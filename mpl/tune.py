"""The autotuner: search policies for a trace and a slot budget, in parallel; write the winner
as a checked, formatted ``.moe`` file.

Two searches (``search=``, ``mplc tune --search``):

* ``"halving"`` (the default; :mod:`mpl.tune_search`): successive halving on prefixes of the
  trace over cache structure (shared, per-layer with each allocation), every live eviction
  rule of the schema (the serving engines' rules included, with a second CRF half-life),
  static pins chosen from the trace (the experts it uses most; per layer in per-layer caches,
  as KTransformers places hot experts), every prefetch strategy with several budgets, and every schedule mode; the
  candidates that survive are replayed on the whole trace.
* ``"grid"``: the staged grid of earlier versions (54 candidates: structure x the eight
  original eviction rules, then prefetch on the best three, then schedule on the best two),
  every candidate on the whole trace; kept for comparison (``benchmarks/bench_policies.py
  --tune`` times both in one run).

Both replay plain LRU (shared and per-layer) and the engines' rules in the structure each
engine uses (the reference rows) at their best schedule on the whole trace, and choose the
winner alike (:func:`mpl.tune_search.choose`): the best by the objective among the plain
caches at least as fast as every reference row and with at least the demand hit rate of
every one, when there is such a candidate (else the objective's best), so it is never slower
than LRU at the same budget nor behind an engine's rule on the tuner's own trace.

Every candidate is a .moe text built with :mod:`mpl.dsl` and checked by the checker; all
candidates of a round are replayed at once on a process pool (``jobs``). The score is the
replay's simulated tokens/s (``objective="tokens_per_s"``, the default: what a user runs
for) or its hit rate (``objective="hit_rate"``); the other metric breaks ties. Hit rate
alone favours aggressive prefetching, whose extra transfers can make a policy slower, so with
``hit_rate`` the winner is the most hits among the candidates at least as fast as plain LRU.
Every row carries the Belady optimum of its cache structure on the part of the trace it was
replayed on, and its gap to it.
"""

from __future__ import annotations

import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from mpl import schema
from mpl.workers import quiet_interrupt, stop_pool
from mpl.syntax.lexer import policy_name_problem  # noqa: F401  (mplc tune checks --name with it)
from mpl.trace import Trace, has_predictions

#: what tune() maximises: simulated tokens/s (the default) or hit rate
OBJECTIVES = ("tokens_per_s", "hit_rate")
DEFAULT_OBJECTIVE = "tokens_per_s"
#: older spellings still accepted (``--objective tok_s``)
OBJECTIVE_ALIASES = {"tok_s": "tokens_per_s"}


def objective_name(objective: str) -> str:
    """The objective's canonical name (an alias resolved); ValueError for an unknown one."""
    name = OBJECTIVE_ALIASES.get(objective, objective)
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    return name


@dataclass
class Candidate:
    name: str
    blocks: dict[str, dict[str, Any]]       # block -> {param: value}
    stage: int = 1
    hit_rate: float | None = None
    tokens_per_s: float | None = None
    belady: float | None = None             # optimum of its structure on what it replayed
    stall_ms_per_step: float | None = None
    error: str | None = None
    text: str = ""
    dispatches: int = 0                     # dispatches it was replayed on (0: unknown)
    fraction: float = 1.0                   # ... as a share of the trace
    role: str = ""                          # "lru" / "anchor": replayed whatever the search
    prefetch_loads: int | None = None
    layers: int = 0                         # the trace's MoE layers (0: unknown)
    # the replay's counts: accesses, hits (keys that had arrived), late prefetches, first
    # uses of prefetched keys, simulated ms, tokens (None: not replayed)
    counts: dict | None = None
    # (hit rate, tok/s) on the dispatches after the warm-up (the cache filled), which a
    # search round ranks prefixes on (None: ranked on the whole replay)
    warm: tuple | None = None

    @property
    def demand_hit_rate(self) -> float | None:
        """The hits a demand-only cache of the same structure could also have had, as a
        share of the accesses: hits on keys that had arrived, less the first use of each
        prefetched key (on time or late). At most the Belady optimum of the structure,
        whatever the candidate prefetches; equal to ``hit_rate`` without a prefetch."""
        n = self.counts
        if n is None or not n["accesses"]:
            return self.hit_rate
        return max(n["hits"] - n["prefetch_useful"], 0) / n["accesses"]

    @property
    def of_belady(self) -> float | None:
        """The demand hit rate as a share of the structure's Belady optimum (at most 1)."""
        d = self.demand_hit_rate
        if self.belady is None or d is None or not self.belady:
            return None
        return d / self.belady

    @property
    def gap(self) -> float | None:
        """Belady's hit rate minus the candidate's demand hit rate (>= 0)."""
        d = self.demand_hit_rate
        if self.belady is None or d is None:
            return None
        return self.belady - d

    def describe(self) -> str:
        from mpl.tune_tiers import HIERARCHY, describe as describe_tiers
        if HIERARCHY in self.blocks:
            parts = [describe_tiers(self.blocks[HIERARCHY])]
            pf = self.blocks.get("prefetch")
            if pf:
                parts.append(f"prefetch={pf.get('strategy')}/{pf.get('budget')}")
            sc = self.blocks.get("schedule")
            if sc:
                parts.append(f"schedule={sc.get('mode')}")
            return " ".join(parts)
        c = self.blocks.get("cache", {})
        ev = f"eviction={c.get('eviction')}"
        tuned = [f"{k}={v}" for k, v in c.items()
                 if k not in ("capacity", "eviction", "pin", "layer_pins")]
        if tuned:
            ev += "(" + ",".join(tuned) + ")"
        parts = [ev]
        if c.get("pin"):
            parts.append(f"pin={len(c['pin'])}")
        if c.get("layer_pins"):
            parts.append(f"pins/layer={max(len(e) for _, e in c['layer_pins'])}")
        pl = self.blocks.get("per_layer")
        if pl:
            per, total = c.get("capacity"), pl.get("total_budget")
            size = f"{per}/layer"
            if self.layers and total is not None and per is not None and total != per * self.layers:
                size = f"{per}-{per + 1}/layer ({total} slots)"
            parts.insert(0, f"per_layer({pl.get('allocation')}) {size}")
        else:
            parts.insert(0, f"shared {c.get('capacity')}")
        pf = self.blocks.get("prefetch")
        if pf:
            extra = f"/p{pf['confidence']}" if "confidence" in pf else ""
            parts.append(f"prefetch={pf.get('strategy')}/{pf.get('budget')}{extra}")
        sc = self.blocks.get("schedule")
        if sc:
            parts.append(f"schedule={sc.get('mode')}")
        return " ".join(parts)

    def score(self, objective: str) -> tuple:
        """(objective, the other metric, fewer blocks): the other metric breaks ties, then the
        simpler policy; errors rank last."""
        if self.error:
            return (float("-inf"), float("-inf"), 0)
        hr, ts = self.warm if self.warm is not None else (self.hit_rate, self.tokens_per_s)
        hr, ts = hr or 0.0, ts or 0.0
        simple = -sum(len(v) for v in self.blocks.values())
        return (hr, ts, simple) if objective_name(objective) == "hit_rate" else (ts, hr, simple)


@dataclass
class TuneResult:
    best: Candidate
    leaderboard: list[Candidate]
    objective: str
    budget: int
    evaluated: int
    text: str = ""                          # the winner's .moe file content
    belady: float | None = None             # optimum of the winner's structure
    expert_bytes: int = 0                   # the expert size replays used (see below)
    expert_bytes_source: str = ""           # mpl.sim.tracemodel.expert_size_source
    search: str = "halving"
    lru: Candidate | None = None            # the faster plain LRU at this budget (whole trace,
                                            # default schedule)
    # the objective's own winner when another was recommended: it was slower than that LRU
    # (hit_rate objective), or it did not match every reference row on both metrics while
    # another candidate did
    set_aside: Candidate | None = None
    # whether the winner is at least as fast, with at least as many hits, as every reference
    # row (None: the search had none, as the grid)
    dominates: bool | None = None
    predictors: list = field(default_factory=list)   # mpl.tune_predict.Score per strategy
    replayed: float = 0.0                   # whole-trace replays the search cost, in total
    requested: int = 0                      # the budget asked for, in slots (budget: at most
    every_expert: int = 0                   # every expert of the trace's model, this many)
    tiers: Any = None                       # the memory-tier search (mpl.tune_tiers.TierReport)

    @property
    def holds_every_expert(self) -> bool:
        """The budget holds every expert: nothing needs offloading (every policy gets the
        cold misses only, and the tuner ran at every expert)."""
        return bool(self.every_expert) and self.budget >= self.every_expert

    def budget_note(self) -> str | None:
        """What to say about the budget (None: nothing): it holds every expert."""
        if not self.holds_every_expert:
            return None
        asked = (f"the budget ({self.requested:,} slots)" if self.requested > self.budget
                 else "the budget")
        return (f"{asked} holds all {self.every_expert:,} experts of the trace's model: nothing "
                f"needs offloading (load the model without a policy); every policy gets only the "
                f"cold misses, and the tuner ran at {self.budget:,} slots")

    def to_dict(self) -> dict:
        def c(x: Candidate | None):
            if x is None:
                return None
            return {"name": x.name, "description": x.describe(), "stage": x.stage,
                    "hit_rate": x.hit_rate, "tokens_per_s": x.tokens_per_s,
                    "stall_ms_per_step": x.stall_ms_per_step, "error": x.error,
                    "demand_hit_rate": x.demand_hit_rate, "of_belady": x.of_belady,
                    "late_prefetches": (x.counts or {}).get("late_prefetches"),
                    "belady": x.belady, "gap": x.gap, "fraction": x.fraction,
                    "dispatches": x.dispatches, "role": x.role}
        return {"objective": self.objective, "budget_slots": self.budget,
                "budget_requested_slots": self.requested or self.budget,
                "holds_every_expert": self.holds_every_expert, "note": self.budget_note(),
                "evaluated": self.evaluated, "search": self.search, "best": c(self.best),
                "belady": self.belady, "expert_bytes": self.expert_bytes,
                "expert_bytes_source": self.expert_bytes_source, "lru": c(self.lru),
                "set_aside": c(self.set_aside), "replayed_traces": self.replayed,
                "dominates_references": self.dominates,
                "predictors": [p.to_dict() for p in self.predictors],
                "leaderboard": [c(x) for x in self.leaderboard], "policy_text": self.text,
                **({"tiers": self.tier_dict(c)} if self.tiers is not None else {})}

    def tier_rows(self) -> list[Candidate]:
        """The hierarchy candidates replayed on the whole trace, best first."""
        from mpl.tune_tiers import HIERARCHY
        return [x for x in self.leaderboard
                if HIERARCHY in x.blocks and not x.error and x.fraction >= 1.0]

    def plain_best(self) -> Candidate | None:
        """The best candidate without memory tiers on the whole trace (the objective's)."""
        from mpl.tune_tiers import HIERARCHY
        return next((x for x in self.leaderboard if HIERARCHY not in x.blocks
                     and not x.error and x.fraction >= 1.0), None)

    def tier_dict(self, row) -> dict:
        out = self.tiers.to_dict()
        out["hierarchies"] = [dict(row(x), approximate_computes=(x.counts or {}).get("approximate"))
                              for x in self.tier_rows()]
        out["plain_best"] = row(self.plain_best())
        return out


def _enum(key: str, *, live: bool = True) -> list[str]:
    return [e.name for e in schema.param(key).enum if not (live and e.replay_only)]


def budget_slots(budget: str | int, expert_bytes: int) -> int:
    """``"864"`` -> 864 slots; ``"12GiB"`` -> as many experts of ``expert_bytes`` as fit."""
    if isinstance(budget, int):
        n = budget
    else:
        t = str(budget).strip()
        if t.endswith(schema.SIZE_UNITS):
            size = schema.parse_size(t)
            if size is None:                       # 0, below a byte, nan, inf, 1e400, "xGiB"
                raise ValueError(f"--budget '{budget}': not a size ({schema.SIZE_RULE})")
            if expert_bytes <= 0:
                raise ValueError("a size budget needs the expert size (the trace header has none)")
            n = size // expert_bytes
        else:
            try:
                n = int(t)
            except ValueError:
                raise ValueError(f"--budget '{budget}': give slots (e.g. 864) or a size (e.g. 12GiB)") from None
    if n < 1:
        raise ValueError(f"the budget holds {n} experts: it must hold at least one")
    return n


# ------------------------------------------------------------------ candidates
def _structures(budget: int, layers: int, top_k: int) -> list[dict]:
    """Cache blocks for the budget: shared, and per-layer splits when each layer gets >= 1.
    Every structure uses the whole budget: a per-layer split gives ``budget % layers`` layers
    one slot more (``total_budget = budget``); its ``cache.capacity`` (``budget // layers``)
    is the tuner's note of the smallest layer's capacity (prefetch budgets, the leaderboard)
    and is not written (total_budget decides the layers' capacities)."""
    out = [{"cache": {"capacity": budget}}]
    per = budget // layers
    if per >= 1:
        most = -(-budget // layers)                  # a layer's share, rounded up
        lo = min(int(schema.param("per_layer.min_capacity").default), per)
        hi = max(int(schema.param("per_layer.max_capacity").default), most)
        for alloc in _enum("per_layer.allocation"):
            pl = {"allocation": alloc, "total_budget": budget, "min_capacity": lo,
                  "max_capacity": hi}
            if alloc != "uniform":
                pl["max_capacity"] = max(hi, min(2 * per, budget))
            out.append({"cache": {"capacity": per}, "per_layer": pl})
    return out


#: the grid search's eviction rules and prefetch strategies (``search="grid"``, the reference
#: the other searches are measured against): the schema's values marked ``grid``
GRID_EVICTIONS = tuple(e.name for e in schema.param("cache.eviction").enum if e.grid)
GRID_STRATEGIES = tuple(e.name for e in schema.param("prefetch.strategy").enum if e.grid)


def _stage1(budget, layers, top_k) -> list[dict]:
    out = []
    for st in _structures(budget, layers, top_k):
        for ev in GRID_EVICTIONS:
            blocks = {k: dict(v) for k, v in st.items()}
            blocks["cache"]["eviction"] = ev
            out.append(blocks)
    return out


def _per_cache_capacity(blocks) -> int:
    return int(blocks["cache"]["capacity"])


def _stage2(bases: list[dict], predictions: bool) -> list[dict]:
    out = []
    for base in bases:
        cap = _per_cache_capacity(base)
        for strat in GRID_STRATEGIES:
            if strat == "lookahead" and not predictions:
                continue
            for b in sorted({1, 2, 4}):
                if b > cap:
                    continue
                blocks = {k: dict(v) for k, v in base.items()}
                blocks["prefetch"] = {"strategy": strat, "budget": b}
                out.append(blocks)
    return out


def _stage3(bases: list[dict]) -> list[dict]:
    out = []
    default = schema.param("schedule.mode").default
    for base in bases:
        for mode in _enum("schedule.mode"):
            if mode == default:
                continue
            blocks = {k: dict(v) for k, v in base.items()}
            blocks["schedule"] = {"mode": mode}
            out.append(blocks)
    return out


def _renamed(text: str, name: str) -> str:
    """``render("c", blocks)`` as ``render(name, blocks)``: the policy's name replaced."""
    return text.replace("policy c {", f"policy {name} {{", 1)


def _with_layer_pins(text: str, pins) -> str:
    """``text`` with per-layer pins (:data:`mpl.tune_search.LAYER_PINS`) as the cache
    block's ``pin layers = ...`` items (:func:`mpl.sim.placement.to_moe`)."""
    from mpl.sim.placement import LayerPlacement, Placement, to_moe

    items = to_moe(Placement(max(len(e) for _, e in pins),
                             tuple(LayerPlacement(layer, tuple(e), ()) for layer, e in pins)),
                   indent=" " * 8)
    head = "\n    cache {\n"
    if "\n    cache {}\n" in text:      # every cache parameter at its default
        return text.replace("\n    cache {}\n", "\n    cache {\n" + items + "    }\n", 1)
    if head not in text:         # no cache block: one of pins alone
        at = text.index(" {\n", text.index("\npolicy ")) + 3
        return text[:at] + "    cache {\n" + items + "    }\n" + text[at:]
    at = text.index(head) + len(head)
    end = text.index("\n    }\n", at) + 1
    return text[:end] + items + text[end:]


def render(name: str, blocks: dict, comment: str | None = None) -> str:
    """Canonical .moe text for ``blocks`` (built with mpl.dsl, formatted by mpl.fmt)."""
    from mpl import dsl
    from mpl.tune_search import LAYER_PINS
    from mpl.tune_tiers import HIERARCHY, hierarchy_text

    b = dsl.policy(name)
    budgeted = "total_budget" in blocks.get("per_layer", {})
    for block in schema.BLOCK_ORDER:
        if block in blocks and block != HIERARCHY:
            vals = {k: v for k, v in blocks[block].items()
                    if k != LAYER_PINS and ((k == "capacity" and not budgeted)
                    or (k != "capacity" and schema.param(f"{block}.{k}").default != v))}
            b.block(block, **vals)
    text = b.to_moe()               # canonical already (the builder's contract)
    if HIERARCHY in blocks:          # memory tiers: written as text (the builder has none)
        at = text.index(" {", text.index("policy ")) + 2
        rest = text[at:].lstrip("}\n")
        text = text[:at] + "\n" + hierarchy_text(blocks[HIERARCHY]) + (rest or "}\n")
    pins = blocks.get("cache", {}).get(LAYER_PINS)
    if pins:
        text = _with_layer_pins(text, pins)
    if pins or HIERARCHY in blocks:  # what was written beside the builder is formatted
        from mpl.fmt import format_text
        text = format_text(text)
    if comment:
        text = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines()) + text
    return text


# ------------------------------------------------------------------ evaluation
def prefix(trace: Trace, n: int | None) -> Trace:
    """The first ``n`` dispatches of ``trace``, cut at the end of a step (None or the whole
    length: the trace itself)."""
    d = trace.dispatches
    if n is None or n >= len(d):
        return trace
    if hasattr(d, "step_cut"):      # a lazily read trace: a head of its columns
        return Trace(trace.header, d.head(d.step_cut(n)))
    out = []
    last = None
    for i, x in enumerate(d):
        if i >= n and x.step != last:
            break
        out.append(x)
        last = x.step
    return Trace(trace.header, out)


def structure_of(pol, trace: Trace):
    """The cache structure a replay's Belady optimum is for: ``("shared", slots)``,
    ``("per_layer", capacities)`` (the runtime's initial split) or ``("bands", ((ordinals,
    slots), ...))`` (the tuner's per-layer bands: each band's top tier a shared cache of its
    MoE layers)."""
    h = trace.header
    key = (h.num_moe_layers, h.num_experts, h.top_k, h.expert_bytes, tuple(h.moe_layers), h.shape)
    memo = pol.__dict__.setdefault("_structures", {})     # (a candidate replays in each round)
    got = memo.get(key)
    if got is None:
        got = memo[key] = _structure_of(pol, trace)
    return got


def _structure_of(pol, trace: Trace):
    from mpl.sim.sweep import _initial_caps, _shared_slots

    if pol.ir.tiered and pol.ir.hierarchy is None:      # the tuner's bands
        ids = trace.header.moe_layers
        return ("bands", tuple((tuple(o for o, x in enumerate(ids) if x in b.layers),
                                int(b.hierarchy.tiers[0].capacity)) for b in pol.ir.bands))
    if pol.ir.tiered:               # the tuner's hierarchies: one top tier over every layer
        return ("shared", int(pol.ir.hierarchy.tiers[0].capacity))
    if pol.ir.per_layer:
        return ("per_layer", tuple(_initial_caps(pol, trace)))
    return ("shared", _shared_slots(pol, trace))


def belady_of(structure, trace: Trace) -> float:
    from mpl.sim.belady import belady

    h = trace.header
    kind, caps = structure
    if kind == "bands":              # each band's optimum on its layers' dispatches
        hits = accesses = 0
        for ordinals, slots in caps:
            mine = set(ordinals)
            r = belady([x for x in trace.dispatches if x.layer in mine], h.num_experts,
                       capacity=int(slots), num_layers=h.num_moe_layers)
            hits, accesses = hits + r.hits, accesses + r.accesses
        return hits / accesses if accesses else 0.0
    if kind == "shared":
        return belady(trace.dispatches, h.num_experts, capacity=int(caps),
                      num_layers=h.num_moe_layers).hit_rate
    return belady(trace.dispatches, h.num_experts, capacities=list(caps)).hit_rate


#: candidate text -> its compiled Policy, per process: the halving search replays a survivor
#: again in each later round, and the reference rows in every schedule (a candidate is
#: compiled under the name of its text without one, :meth:`Runner.key`, so that every
#: round's candidate of the same policy shares the module and the replay's memo of its fit
#: to the trace's model)
_POLICIES: dict = {}
_POLICIES_MAX = 512


def _policy(text: str, name, header):
    """The compiled policy of a candidate's text, checked with the trace's model once
    (the replays of every round read that check: :attr:`mpl.api.Policy.fits`)."""
    from mpl.api import load_for_replay
    from mpl.sim.replay import shape_of

    key = (text, name)
    pol = _POLICIES.get(key)
    if pol is None:
        if len(_POLICIES) >= _POLICIES_MAX:
            _POLICIES.clear()
        pol = _POLICIES[key] = load_for_replay(text, name=name, model=shape_of(header))
    return pol


def _evaluate(args) -> tuple:
    """Replay one candidate: (hit rate, tok/s, stall ms per step, error, Belady of its
    structure on the same dispatches, prefetch loads, counts (:attr:`Candidate.counts`))."""
    text, name, trace, hardware, memo = args[:5]
    head = args[5] if len(args) > 5 else None
    from mpl.sim.replay import replay

    try:
        pol = _policy(text, name, trace.header)
        # the warm-up's counts are the prefix replay's at the warm-up's end (its checkpoint)
        r = replay(pol, trace, hardware=hardware, belady=False, checkpoint=head)
        key = (structure_of(pol, trace), len(trace))
        b = memo.get(key) if memo is not None else None
        if b is None:
            b = belady_of(key[0], trace)
            if memo is not None:
                memo[key] = b
    except Exception as e:
        return (None, None, None, str(e).splitlines()[0] if str(e) else type(e).__name__,
                None, None, None, None)
    steps = max(r.sim["steps"], 1)
    s = r.stats
    counts = _counts_of(s, r.sim)
    warm = None
    if r.checkpoint is not None:    # ranked on what came after the warm-up
        first = _counts_of(r.checkpoint["stats"], r.checkpoint["sim"])
        acc, ms = counts["accesses"] - first["accesses"], counts["ms"] - first["ms"]
        warm = ((counts["hits"] - first["hits"]) / acc if acc else 0.0,
                (counts["tokens"] - first["tokens"]) / (ms / 1e3) if ms > 0 else 0.0)
    return (s["hit_rate"], r.sim["tokens_per_s"], r.sim["stall_ms"] / steps, None, b,
            s["prefetch_loads"], counts, warm)


def _counts(r) -> dict:
    """A replay report's counts (:attr:`Candidate.counts`)."""
    return _counts_of(r.stats, r.sim)


def _counts_of(s: dict, sim: dict) -> dict:
    """The counts (:attr:`Candidate.counts`) of a replay's ``stats`` and ``sim`` (a report's,
    or its checkpoint's)."""
    return {"accesses": s["accesses"], "hits": s["hits"],
            "late_prefetches": s.get("late_prefetches", 0),
            "prefetch_useful": s["prefetch_useful"], "ms": sim["total_ms"],
            "tokens": sim["tokens"], "approximate": s.get("approximate_computes", 0)}


_POOL_TRACE: Trace | None = None
_POOL_PREFIXES: dict = {}
_POOL_BELADY: dict = {}


def _init_worker(trace):
    global _POOL_TRACE
    quiet_interrupt()
    _POOL_TRACE = trace
    _POOL_PREFIXES.clear()
    _POOL_BELADY.clear()
    from mpl.sim import tracepack as packing
    packing.hold(trace)        # the worker's trace never changes: pack it once


def _prefix_held(trace, n, cache: dict):
    """``prefix(trace, n)``, made once per process and held (packed once) from then on."""
    if n is None or n >= len(trace):
        return trace
    t = cache.get(n)
    if t is None:
        from mpl.sim import tracepack as packing
        t = cache[n] = prefix(trace, n)
        packing.hold(t)
    return t


def _evaluate_in_worker(args):
    text, name, hardware, n, start = args
    tr = _prefix_held(_POOL_TRACE, n, _POOL_PREFIXES)
    head = _prefix_held(_POOL_TRACE, start, _POOL_PREFIXES) if start else None
    return _evaluate((text, name, tr, hardware, _POOL_BELADY, head))


class Runner:
    """Replays candidates on the whole trace or a prefix, in parallel when ``jobs > 1``; the
    candidates evaluated so far are in ``all``; ``replayed`` sums the dispatches replayed, as
    a number of whole traces."""

    def __init__(self, trace: Trace, hardware, objective: str, jobs: int, progress=None):
        self.trace = trace
        self.hardware = hardware
        self.objective = objective
        self.progress = progress
        self.all: list[Candidate] = []
        self.replayed = 0.0
        self._n = 0
        self._prefixes: dict = {}
        self._belady: dict = {}
        self._seen: dict = {}          # (text without the name, dispatches) -> Candidate
        self.warm = 0                  # the dispatches prefix rounds rank after (the warm-up)
        self._texts: dict = {}         # repr of the blocks -> canonical text (key)
        self.pool = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker,
                                        initargs=(trace,)) if jobs > 1 else None

    def key(self, blocks: dict) -> str:
        """What identifies a candidate: its canonical text (the name aside; rendered once
        per candidate)."""
        k = repr(sorted((b, sorted(v.items())) for b, v in blocks.items()))
        text = self._texts.get(k)
        if text is None:
            text = self._texts[k] = render("c", blocks)
        return text

    def close(self, interrupted: bool = False) -> None:
        from mpl.sim import tracepack as packing
        for t in self._prefixes.values():
            packing.release(t)
        self._prefixes.clear()
        if self.pool is not None:
            if interrupted:
                stop_pool(self.pool)
                self.pool = None
            else:
                self.pool.shutdown()

    def run_window(self, stage: int, blocks_list: list[dict], start: int,
                   n: int | None) -> list[Candidate]:
        """:meth:`run` on the first ``n`` dispatches, each candidate ranked on those after
        the first ``start`` (its :attr:`Candidate.warm`: the counts at the warm-up's end are
        read from the same replay, its checkpoint); ``start`` 0 or ``n`` None: :meth:`run`."""
        return self.run(stage, blocks_list, n, start=start if n is not None else 0)

    def run(self, stage: int, blocks_list: list[dict], n: int | None = None,
            role: str = "", start: int = 0) -> list[Candidate]:
        """Replay ``blocks_list`` on the first ``n`` dispatches (None: all); -> the
        candidates, best first (a candidate already replayed on the same dispatches is not
        replayed again: the earlier one is returned). ``start``: rank on the dispatches
        after the first ``start`` (:meth:`run_window`)."""
        total = len(self.trace)
        tr = _prefix_held(self.trace, n, self._prefixes)
        size = len(tr)
        head = _prefix_held(self.trace, start, self._prefixes) if 0 < start < size else None
        if head is not None and len(head) >= size:
            head = None
        cands, fresh = [], []
        for blocks in blocks_list:
            body = self.key(blocks)
            old = self._seen.get((body, size))
            if old is not None:
                if role and not old.role:
                    old.role = role
                if old not in cands:
                    cands.append(old)
                continue
            self._n += 1
            c = Candidate(f"c{self._n}", blocks, stage, role=role,
                          layers=self.trace.header.num_moe_layers)
            c.text = _renamed(body, c.name)
            c.dispatches, c.fraction = size, size / total if total else 1.0
            self._seen[(body, size)] = c
            cands.append(c)
            fresh.append(c)
        first = len(head) if head is not None else 0
        # each candidate is replayed as its text without a name (one compiled module per
        # policy, whichever round replays it)
        work = [(self.key(c.blocks), "c", self.hardware, n if size < total else None, first)
                for c in fresh]
        if self.pool is not None:
            results = self.pool.map(_evaluate_in_worker, work)
        else:
            results = (_evaluate((t, nm, tr, hw_, self._belady, head))
                       for t, nm, hw_, _n, _s in work)
        for i, (c, res) in enumerate(zip(fresh, results)):
            (c.hit_rate, c.tokens_per_s, c.stall_ms_per_step, c.error, c.belady,
             c.prefetch_loads, c.counts, c.warm) = res
            if c.error:                  # (it names the policy it replayed: the candidate)
                c.error = c.error.replace("policy c ", f"policy {c.name} ", 1)
            if self.progress:
                self.progress(stage, i + 1, len(fresh))
        self.replayed += len(fresh) * size / max(total, 1)
        self.all.extend(fresh)
        return sorted(cands, key=lambda c: c.score(self.objective), reverse=True)


def tune(trace: Trace, budget: str | int | None = None, *, hardware=None,
         objective: str = DEFAULT_OBJECTIVE, jobs: int | None = None, keep: int = 3,
         name: str = "tuned", progress: Callable[[int, int, int], None] | None = None,
         model=None, search: str = "halving", device_memory=None, host_memory=None,
         disk: str | None = None, kv_reserve=None, tier_families=None) -> TuneResult:
    """Search policies for ``trace`` within ``budget`` slots (or a size); see the module doc.
    ``objective``: ``"tokens_per_s"`` (default) or ``"hit_rate"``. ``model``: the trace's
    model (preset name, config.json path or ModelShape) when its header names no preset: it
    gives the expert size (size budgets, transfer times) and the shape (the cost model).
    ``search``: ``"halving"`` (default) or ``"grid"``.

    ``device_memory`` (a size, instead of ``budget``), ``host_memory`` (a size; default the
    hardware profile's) and ``disk`` (a disk profile name; default the hardware profile's):
    the memory-tier search of :mod:`mpl.tune_tiers` (halving only): where the experts fit,
    and hierarchies ranked beside the plain cache (``result.tiers``); ``device_memory`` is the
    device's whole memory: the skeleton, ``kv_reserve`` (a size; default 10% of the device,
    at least 1 GiB) and the mechanism's transient entries come out of it. ``tier_families``:
    which of :data:`mpl.tune_tiers.FAMILIES` the tier search adds (default: all)."""
    from mpl.sim.tracemodel import trace_expert_size, with_model

    objective = objective_name(objective)
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, not {search!r}")
    why = policy_name_problem(name)
    if why is not None:                   # before the search, not after it
        raise ValueError(f"name: {why}")
    trace = with_model(trace, model)
    h = trace.header
    from mpl.timemodel import hardware as hw
    profile = hw.resolve(hardware)          # fail early on a bad profile
    tier_plan = None
    if (device_memory is not None or host_memory is not None or disk is not None
            or kv_reserve is not None):
        from mpl import tune_tiers
        if device_memory is None:
            raise ValueError("--host-memory, --disk and --kv-reserve go with --device-memory "
                             "(the memory-tier search)")
        if budget is not None:
            raise ValueError("give --budget or --device-memory, not both (--device-memory is "
                             "the device's memory: the budget is what it leaves for experts)")
        if search != "halving":
            raise ValueError("the memory-tier search (--device-memory) runs with --search halving")
        tier_plan = tune_tiers.plan(h, device_memory, host_memory, disk, profile,
                                    kv_reserve=kv_reserve)
        hardware = tune_tiers.profile_for(tier_plan, profile)
        budget = min(tier_plan.device_slots, tier_plan.every)
    elif budget is None:
        raise ValueError("give --budget (slots or a size) or --device-memory")
    asked = budget_slots(budget, h.expert_bytes or hw.DEFAULT_EXPERT_BYTES)
    L = h.num_moe_layers
    every = L * h.num_experts
    slots = min(asked, every)     # a cache never holds more than every expert
    predictions = has_predictions(trace.dispatches)
    jobs = jobs or os.cpu_count() or 1

    from mpl.sim import tracepack as packing
    packing.hold(trace)              # every candidate replays this trace: pack it once
    runner = Runner(trace, hardware, objective, jobs, progress)
    scores = []
    try:
        if search == "grid":
            from mpl.tune_search import replay_references
            replay_references(runner, _structures(slots, L, h.top_k), 0, None)
            run = runner.run
            s1 = run(1, _stage1(slots, L, h.top_k))
            top1 = [c for c in s1 if not c.error][:keep]
            s2 = run(2, _stage2([c.blocks for c in top1], predictions)) if top1 else []
            best2 = sorted(top1 + [c for c in s2 if not c.error], key=lambda c: c.score(objective),
                           reverse=True)[: max(1, keep - 1)]
            run(3, _stage3([c.blocks for c in best2])) if best2 else []
        else:
            from mpl.tune_search import halving
            halving(runner, trace, _structures(slots, L, h.top_k), predictions=predictions,
                    keep=keep, slots=slots)
            if tier_plan is not None and tier_plan.case != "device":
                from mpl import tune_tiers
                from mpl.tune_search import tier_halving
                fams = tune_tiers.FAMILIES if tier_families is None else tuple(tier_families)
                curves = tune_tiers.layer_curves(trace) if "bands" in fams else None
                tier_halving(runner, trace, tune_tiers.candidates(
                    tier_plan, _tier_bases(runner), curves, fams), keep=keep, slots=slots)
            from mpl import tune_predict
            scores = tune_predict.evaluate_all(prefix(trace, PREDICTOR_DISPATCHES),
                                               budgets=(1, 2, 4))
    except KeyboardInterrupt:
        runner.close(interrupted=True)
        raise
    finally:
        runner.close()
        packing.release(trace)
    result = _result(runner, objective, slots, search,
                     tiered_only=tier_plan is not None and tier_plan.case == "disk")
    if tier_plan is not None:
        result.tiers = _tier_report(tier_plan, result, trace, hardware)
    result.requested = asked
    result.every_expert = every
    result.predictors = scores
    eb, source = trace_expert_size(h)
    result.expert_bytes, result.expert_bytes_source = eb, source
    return result


SEARCHES = ("halving", "grid")
#: the predictors' accuracy in the report is measured on this many dispatches (at most)
PREDICTOR_DISPATCHES = 4000


def _tier_bases(runner: Runner) -> list[dict]:
    """What the memory-tier candidates take their eviction, prefetch and schedule from: the
    best plain candidate on the whole trace by the objective, and plain LRU (shared) at its
    best schedule."""
    whole = sorted((c for c in runner.all if c.fraction >= 1.0 and not c.error),
                   key=lambda c: c.score(runner.objective), reverse=True)
    out = [c.blocks for c in whole[:1]]
    lru = next((c for c in whole if c.role == "lru" and "per_layer" not in c.blocks), None)
    if lru is not None and lru.blocks not in out:
        out.append(lru.blocks)
    return out


def _tier_report(plan, result: TuneResult, trace: Trace, hardware):
    """The tier search's part of the report: the winner's per-tier rows (one more replay of
    it, when it has tiers)."""
    from mpl.api import not_live_yet
    from mpl.mechanism.footprint import DEVICE
    from mpl.sim.replay import replay
    from mpl.tune_tiers import HIERARCHY, TierReport, device_need, family

    rep = TierReport(plan, plain_feasible=plan.case != "disk")
    b = result.best
    if HIERARCHY in b.blocks:
        pol = _policy(b.text, b.name, trace.header)
        r = replay(pol, trace, hardware=hardware, belady=False)
        s = r.stats
        rep.winner_tiered = True
        rep.winner_family = family(b.blocks[HIERARCHY])
        why = not_live_yet(pol.ir)        # "<text>:LINE: tier ... of policy 'cN' ..."
        rep.winner_live = (why.split(": ", 1)[-1].replace(f" of policy '{b.name}'", "")
                           if why else None)
        fp = device_need(plan, b.blocks[HIERARCHY])
        rep.winner_device = {pt.what: pt.nbytes for pt in fp.parts if pt.where == DEVICE}
        rep.winner_device["total"] = fp.peak(DEVICE)
        rep.winner_rows = s["tiers"]
        rep.approximate = s["approximate_computes"]
        rep.approximate_by_dtype = s["approximate_by_dtype"]
        rep.accesses = s["accesses"]
    return rep


def _result(runner: Runner, objective: str, slots: int, search: str,
            tiered_only: bool = False) -> TuneResult:
    """The leaderboard (candidates replayed on the whole trace first, best first, then the
    ones the search left on a prefix, by how much of the trace they saw) and the winner.
    ``tiered_only``: the winner has memory tiers (the plain cache needs host memory the
    machine does not have; those rows stay on the leaderboard, for comparison)."""
    from mpl.tune_tiers import HIERARCHY

    board = sorted(runner.all, key=lambda c: (c.fraction >= 1.0, c.fraction) +
                   c.score(objective), reverse=True)
    ok = [c for c in board if not c.error and c.fraction >= 1.0]
    if tiered_only:
        ok = [c for c in ok if HIERARCHY in c.blocks] or ok
    if not ok:
        first = next((c.error for c in board if c.error), "no candidates")
        raise ValueError(f"no candidate policy could be replayed (first error: {first})")
    from mpl.tune_search import choose
    best, lru, dominates = choose(ok, objective)
    set_aside = ok[0] if best is not ok[0] else None
    res = TuneResult(best, board, objective, slots, len(runner.all), search=search, lru=lru,
                     set_aside=set_aside, replayed=runner.replayed, dominates=dominates)
    res.belady = best.belady
    return res


def reference_rows(result: TuneResult) -> list[Candidate]:
    """Each reference rule (plain LRU and the engines' rules, by structure) at its best
    schedule on the whole trace, best first by the objective."""
    from mpl.tune_search import best_per_reference
    return best_per_reference(result.leaderboard, result.objective)


def winner_text(result: TuneResult, trace_desc: str, command: str, name: str = "tuned") -> str:
    """The winner as a formatted .moe file with a comment recording the score and command;
    checked by the checker (raises ValueError if it were not clean)."""
    from mpl.checker import analyze

    why = policy_name_problem(name)
    if why is not None:
        raise ValueError(f"name: {why}")
    b = result.best
    lines = [f"Tuned by mplc tune for {trace_desc}",
             f"objective {result.objective}: hit rate {b.hit_rate:.4f}, "
             f"simulated {b.tokens_per_s:.2f} tok/s"
             + (f", Belady {result.belady:.4f}" if result.belady is not None else ""),
             f"budget {result.budget} slots; best of {result.evaluated} candidates",
             *([f"note: {result.budget_note()}"] if result.budget_note() else []),
             f"command: {command}"]
    text = render(name, b.blocks, comment="\n".join(lines))
    an = analyze(text)
    if an.errors:
        raise ValueError("the tuned policy does not check clean: " +
                         "; ".join(d.message for d in an.errors))
    result.text = text
    return text


def command_line(argv: list[str] | None = None) -> str:
    argv = sys.argv[1:] if argv is None else argv
    return "mplc " + " ".join(shlex.quote(a) for a in argv)
