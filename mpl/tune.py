"""The autotuner: search policies for a trace and a slot budget, in parallel; write the winner
as a checked, formatted ``.moe`` file.

The search is staged (each stage keeps the best few candidates of the previous one):

1. cache structure x eviction rule: one shared cache of ``budget`` slots, or per-layer caches
   splitting the same total budget (allocation uniform / entropy / frequency), crossed with
   every live eviction rule of the schema;
2. prefetching: every prefetch strategy of the schema (lookahead only when the trace carries
   predictions) with a few budgets, on the best structures of stage 1;
3. schedule: every schedule mode of the schema, on the best of stage 2.

Every candidate is a .moe text built with :mod:`mpl.dsl` and checked by the checker; all
candidates of a stage are replayed at once on a process pool (``jobs``). The score is the
replay's simulated tokens/s (``objective="tokens_per_s"``, the default: what a user runs
for) or its hit rate (``objective="hit_rate"``); the other metric breaks ties. Hit rate
alone favours aggressive prefetching, whose extra transfers can make a policy slower.
"""

from __future__ import annotations

import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from mpl import schema
from mpl.syntax.lexer import policy_name_problem  # noqa: F401  (mplc tune checks --name with it)
from mpl.trace import Trace

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
    belady: float | None = None
    stall_ms_per_step: float | None = None
    error: str | None = None
    text: str = ""

    def describe(self) -> str:
        c = self.blocks.get("cache", {})
        parts = [f"eviction={c.get('eviction')}"]
        pl = self.blocks.get("per_layer")
        if pl:
            parts.insert(0, f"per_layer({pl.get('allocation')}) {c.get('capacity')}/layer")
        else:
            parts.insert(0, f"shared {c.get('capacity')}")
        pf = self.blocks.get("prefetch")
        if pf:
            parts.append(f"prefetch={pf.get('strategy')}/{pf.get('budget')}")
        sc = self.blocks.get("schedule")
        if sc:
            parts.append(f"schedule={sc.get('mode')}")
        return " ".join(parts)

    def score(self, objective: str) -> tuple[float, float]:
        """(objective, the other metric as a tie-breaker); errors rank last."""
        if self.error:
            return (float("-inf"), float("-inf"))
        hr, ts = self.hit_rate or 0.0, self.tokens_per_s or 0.0
        return (hr, ts) if objective_name(objective) == "hit_rate" else (ts, hr)


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

    def to_dict(self) -> dict:
        def c(x: Candidate):
            return {"name": x.name, "description": x.describe(), "stage": x.stage,
                    "hit_rate": x.hit_rate, "tokens_per_s": x.tokens_per_s,
                    "stall_ms_per_step": x.stall_ms_per_step, "error": x.error}
        return {"objective": self.objective, "budget_slots": self.budget,
                "evaluated": self.evaluated, "best": c(self.best),
                "belady": self.belady, "expert_bytes": self.expert_bytes,
                "expert_bytes_source": self.expert_bytes_source,
                "leaderboard": [c(x) for x in self.leaderboard], "policy_text": self.text}


def _enum(key: str, *, live: bool = True) -> list[str]:
    return [e.name for e in schema.param(key).enum if not (live and e.replay_only)]


def budget_slots(budget: str | int, expert_bytes: int) -> int:
    """``"864"`` -> 864 slots; ``"12GiB"`` -> as many experts of ``expert_bytes`` as fit."""
    if isinstance(budget, int):
        n = budget
    else:
        t = str(budget).strip()
        n = None
        for unit in sorted(schema.SIZE_UNITS, key=len, reverse=True):
            if t.endswith(unit):
                try:
                    size = float(t[: -len(unit)]) * schema.UNITS[unit].factor
                except ValueError:
                    raise ValueError(f"--budget '{budget}': not a number of {unit}") from None
                if not size < float("inf"):            # nan, inf, 1e400
                    raise ValueError(f"--budget '{budget}': not a finite size")
                if expert_bytes <= 0:
                    raise ValueError("a size budget needs the expert size (the trace header has none)")
                n = int(size // expert_bytes)
                break
        if n is None:
            try:
                n = int(t)
            except ValueError:
                raise ValueError(f"--budget '{budget}': give slots (e.g. 864) or a size (e.g. 12GiB)") from None
    if n < 1:
        raise ValueError(f"the budget holds {n} experts: it must hold at least one")
    return n


# ------------------------------------------------------------------ candidates
def _structures(budget: int, layers: int, top_k: int) -> list[dict]:
    """Cache blocks for the budget: shared, and per-layer splits when each layer gets >= 1."""
    out = [{"cache": {"capacity": budget}}]
    per = budget // layers
    if per >= 1:
        lo = min(int(schema.param("per_layer.min_capacity").default), per)
        hi = max(int(schema.param("per_layer.max_capacity").default), per)
        for alloc in _enum("per_layer.allocation"):
            pl = {"allocation": alloc, "total_budget": per * layers, "min_capacity": lo,
                  "max_capacity": hi}
            if alloc != "uniform":
                pl["max_capacity"] = max(hi, min(2 * per, budget))
            out.append({"cache": {"capacity": per}, "per_layer": pl})
    return out


def _stage1(budget, layers, top_k) -> list[dict]:
    out = []
    for st in _structures(budget, layers, top_k):
        for ev in _enum("cache.eviction"):
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
        for strat in _enum("prefetch.strategy"):
            if strat == "none" or (strat == "lookahead" and not predictions):
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


def render(name: str, blocks: dict, comment: str | None = None) -> str:
    """Canonical .moe text for ``blocks`` (built with mpl.dsl, formatted by mpl.fmt)."""
    from mpl import dsl

    b = dsl.policy(name)
    for block in schema.BLOCK_ORDER:
        if block in blocks:
            vals = {k: v for k, v in blocks[block].items()
                    if k == "capacity" or schema.param(f"{block}.{k}").default != v}
            b.block(block, **vals)
    text = b.to_moe()
    try:
        from mpl.fmt import format_text
        text = format_text(text)
    except ImportError:
        pass
    if comment:
        text = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines()) + text
    return text


# ------------------------------------------------------------------ evaluation
def _evaluate(args) -> tuple:
    text, name, trace, hardware = args
    from mpl.api import load_for_replay as load_policy
    from mpl.sim.replay import replay

    try:
        pol = load_policy(text, name=name)
        r = replay(pol, trace, hardware=hardware, belady=False)
    except Exception as e:
        return (None, None, None, str(e).splitlines()[0] if str(e) else type(e).__name__)
    steps = max(r.sim["steps"], 1)
    return (r.stats["hit_rate"], r.sim["tokens_per_s"], r.sim["stall_ms"] / steps, None)


_POOL_TRACE: Trace | None = None


def _init_worker(trace):
    global _POOL_TRACE
    _POOL_TRACE = trace
    from mpl.runtime import fast
    fast.hold(trace)        # the worker's trace never changes: pack it once


def _evaluate_in_worker(args):
    text, name, hardware = args
    return _evaluate((text, name, _POOL_TRACE, hardware))


def tune(trace: Trace, budget: str | int, *, hardware=None, objective: str = DEFAULT_OBJECTIVE,
         jobs: int | None = None, keep: int = 3, name: str = "tuned",
         progress: Callable[[int, int, int], None] | None = None, model=None) -> TuneResult:
    """Search policies for ``trace`` within ``budget`` slots (or a size); see the module doc.
    ``objective``: ``"tokens_per_s"`` (default) or ``"hit_rate"``. ``model``: the trace's
    model (preset name, config.json path or ModelShape) when its header names no preset: it
    gives the expert size (size budgets, transfer times) and the shape (the cost model)."""
    from mpl.sim.tracemodel import trace_expert_size, with_model

    objective = objective_name(objective)
    why = policy_name_problem(name)
    if why is not None:                   # before the search, not after it
        raise ValueError(f"name: {why}")
    trace = with_model(trace, model)
    h = trace.header
    from mpl.timemodel import hardware as hw
    hw.resolve(hardware)          # fail early on a bad profile
    slots = budget_slots(budget, h.expert_bytes or hw.DEFAULT_EXPERT_BYTES)
    L = h.num_moe_layers
    predictions = any(d.predictions for d in trace.dispatches)
    jobs = jobs or os.cpu_count() or 1
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(trace,)) \
        if jobs > 1 else None
    all_c: list[Candidate] = []
    counter = [0]

    def run(stage: int, blocks_list: list[dict]) -> list[Candidate]:
        cands = []
        for blocks in blocks_list:
            counter[0] += 1
            cands.append(Candidate(f"c{counter[0]}", blocks, stage))
        work = []
        for c in cands:
            c.text = render(c.name, c.blocks)
            work.append((c.text, c.name, hardware))
        if pool is not None:
            results = pool.map(_evaluate_in_worker, work)
        else:
            results = (_evaluate((t, n, trace, hw_)) for t, n, hw_ in work)
        for i, (c, res) in enumerate(zip(cands, results)):
            c.hit_rate, c.tokens_per_s, c.stall_ms_per_step, c.error = res
            if progress:
                progress(stage, i + 1, len(cands))
        all_c.extend(cands)
        return sorted(cands, key=lambda c: c.score(objective), reverse=True)

    from mpl.runtime import fast
    fast.hold(trace)              # every candidate replays this trace: pack it once
    try:
        s1 = run(1, _stage1(slots, L, h.top_k))
        top1 = [c for c in s1 if not c.error][:keep]
        s2 = run(2, _stage2([c.blocks for c in top1], predictions)) if top1 else []
        best2 = sorted(top1 + [c for c in s2 if not c.error], key=lambda c: c.score(objective),
                       reverse=True)[: max(1, keep - 1)]
        run(3, _stage3([c.blocks for c in best2])) if best2 else []
    finally:
        fast.release(trace)
        if pool is not None:
            pool.shutdown()
    board = sorted(all_c, key=lambda c: c.score(objective), reverse=True)
    ok = [c for c in board if not c.error]
    if not ok:
        first = board[0].error if board else "no candidates"
        raise ValueError(f"no candidate policy could be replayed (first error: {first})")
    best = ok[0]
    eb, source = trace_expert_size(h)
    return TuneResult(best, board, objective, slots, len(all_c), expert_bytes=eb,
                      expert_bytes_source=source)


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
