"""Policy quality, measured in one run: every stdlib policy and every serving engine's rule
(the anchors, each at its best schedule mode) over every synthetic preset (and any trace
given), at several budgets (25, 50 and 75% of the model's experts by default), against what
``mplc tune`` finds for the same trace and budget. Per row: hit rate (keys that had arrived:
late prefetches apart), the Belady optimum of the row's cache structure and the share of it
the demand hit rate reaches (a prefetched key's first use is not a demand hit, so the share
is at most 100%), simulated tokens/s; then a summary (tuned against the anchors and plain
LRU), the predictors' accuracy and coverage per prefetch budget, the prediction ceiling (what
a prefetch with recorded predictions of a given accuracy buys), and optionally the time
``mplc tune`` takes against the earlier 54-candidate grid on the same traces.

    python benchmarks/bench_policies.py [--steps 300] [--seeds 0] [--presets a,b]
        [--budgets 25,50,75] [--trace T.mpltrace ...] [--hardware NAME] [--knobs reuse=0.4]
        [--jobs N] [--no-tune] [--tune-time | --tune-time-only] [--ceiling] [--markdown]
        [--json]

Stdlib policies are rescaled to each budget: a shared cache gets the budget's slots, a
per-layer one ``budget // layers`` per layer with ``total_budget`` = the budget (bounds
widened to fit). Simulated time comes from the hardware cost model, so the figures are
deterministic for a seed; they rank policies, they do not promise tok/s. Policy quality is
judged on real routing traces: give yours with ``--trace``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from mpl import shapes  # noqa: E402

#: the engines' rules in the structures each engine uses, and plain LRU
ANCHORS = (
    ("lru shared", "shared", "lru"),
    ("lru per-layer", "per_layer", "lru"),
    ("llama.cpp crf per-layer", "per_layer", "crf"),
    ("llama.cpp classlru per-layer", "per_layer", "classlru"),
    ("llama.cpp classlru shared", "shared", "classlru"),
    ("vllm lfru per-layer", "per_layer", "vllm_lfru"),
    ("layer-aware shared", "shared", "farthest_layer"),
)
PRESETS = tuple(shapes.PRESETS)


def anchor_text(structure: str, rule: str, slots: int, layers: int,
                mode: str | None = None) -> str | None:
    """The anchor's policy at ``slots`` (None: fewer than one slot per layer), in schedule
    ``mode`` (None: the default)."""
    sched = f" schedule {{ mode = {mode} }}" if mode else ""
    if structure == "shared":
        return f"policy a {{ cache {{ capacity = {slots} eviction = {rule} }}{sched} }}"
    per = slots // layers
    if per < 1:
        return None
    return (f"policy a {{ cache {{ capacity = {per} eviction = {rule} }} per_layer {{ "
            f"total_budget = {per * layers} min_capacity = 1 max_capacity = {max(64, per)} }}"
            f"{sched} }}")


def best_mode_row(name, structure, rule, slots, layers, trace, hardware) -> dict | None:
    """The anchor in every schedule mode of the schema; the fastest (then most hits), named
    with its mode: an engine's rule compared at its best schedule."""
    import mpl
    from mpl import schema

    best = None
    for mode in schema.param("schedule.mode").enum_names():
        text = anchor_text(structure, rule, slots, layers, mode)
        if text is None:
            return None
        r = row(f"{name} [{mode}]", "anchor", mpl.loads(text), trace, hardware)
        if best is None or (r["tokens_per_s"], r["hit_rate"]) > (best["tokens_per_s"], best["hit_rate"]):
            best = r
    return best


def scaled(policy, slots: int, layers: int):
    """The stdlib ``policy`` at ``slots`` (None when it cannot be: fewer than one slot per
    layer)."""
    ir = policy.ir
    ov = {}
    if ir.tiered:                   # memory tiers: the top tier holds the budget
        from mpl.sim.replay import tier_capacity
        ov = tier_capacity(policy, slots)[0]
    elif ir.per_layer:
        per = slots // layers
        if per < 1:
            return None
        ov.update({"cache.capacity": per, "per_layer.total_budget": per * layers,
                   "per_layer.min_capacity": min(int(ir["per_layer.min_capacity"]), per),
                   "per_layer.max_capacity": max(int(ir["per_layer.max_capacity"]), per)})
    else:
        ov["cache.capacity"] = slots
    return policy.with_params(ov)


def row(name, kind, pol, trace, hardware):
    from mpl.sim import replay

    r = replay(pol, trace, hardware=hardware, belady=True)
    b = r.belady_hit_rate
    demand = demand_hit_rate(r.stats)
    return {"policy": name, "kind": kind, "hit_rate": r.hit_rate, "demand_hit_rate": demand,
            "late_prefetches": r.stats.get("late_prefetches", 0), "belady": b,
            "of_belady": demand / b if b else None, "tokens_per_s": r.tokens_per_s,
            "prefetch_accuracy": r.stats["prefetch_accuracy"] if r.stats["prefetch_loads"] else None}


def demand_hit_rate(stats: dict) -> float:
    """Hits on arrived keys less the first use of each prefetched key, per access: what a
    demand-only cache could also have hit (mpl.tune.Candidate.demand_hit_rate), so that its
    share of the demand-only Belady optimum is at most 1 for a prefetching policy too."""
    acc = stats["accesses"]
    return max(stats["hits"] - stats["prefetch_useful"], 0) / acc if acc else 0.0


def _trace_for(spec):
    from mpl import tracecols
    from mpl.sim import synthesize

    kind, value, steps, seed, knobs = spec
    if kind == "file":
        return tracecols.load(value)
    return synthesize(value, steps=steps, seed=seed, **knobs)


def measure(task) -> dict:
    """One (trace, budget): every stdlib policy, every anchor, the tuned policy."""
    import mpl
    from mpl.sim import tracepack
    from mpl.stdlib_path import stdlib_file, stdlib_names
    from mpl import tune as T

    spec, label, share, hardware, do_tune, tune_jobs = task
    trace = _trace_for(spec)
    h = trace.header
    L, E = h.num_moe_layers, h.num_experts
    slots = max(1, round(share / 100 * L * E))
    rows = []
    tracepack.hold(trace)
    try:
        for name, structure, rule in ANCHORS:
            r = best_mode_row(name, structure, rule, slots, L, trace, hardware)
            if r is not None:
                rows.append(r)
        for name in stdlib_names():
            pol = scaled(mpl.load(stdlib_file(name)), slots, L)
            if pol is None:
                continue
            try:
                rows.append(row(f"std/{name}", "stdlib", pol, trace, hardware))
            except Exception as e:          # a policy that does not fit this shape
                rows.append({"policy": f"std/{name}", "kind": "stdlib", "error": str(e).splitlines()[0]})
        tuned = None
        if do_tune:
            t0 = time.process_time()
            res = T.tune(trace, slots, hardware=hardware, jobs=tune_jobs)
            b = res.best
            tuned = {"policy": "tuned: " + b.describe(), "kind": "tuned", "hit_rate": b.hit_rate,
                     "demand_hit_rate": b.demand_hit_rate,
                     "late_prefetches": (b.counts or {}).get("late_prefetches", 0),
                     "belady": b.belady, "of_belady": b.of_belady,
                     "tokens_per_s": b.tokens_per_s, "tune_cpu_s": time.process_time() - t0,
                     "prefetch_accuracy": None}
            rows.append(tuned)
    finally:
        tracepack.release(trace)
    return {"trace": label, "share": share, "slots": slots, "rows": rows}


def predictors(spec, label) -> dict:
    from mpl.tune_predict import evaluate_all

    trace = _trace_for(spec)
    return {"trace": label, "scores": [s.to_dict() for s in evaluate_all(trace, budgets=(1, 2, 4))]}


def ceiling(steps: int, seed: int, hardware, share: int = 50) -> list[dict]:
    """Mixtral-8x7B at ``share``% of its experts: the best demand policy (crf per layer),
    then lookahead prefetching with recorded predictions of increasing accuracy, on the
    default schedule and with CPU fallback; the learned predictor's accuracy on the same
    trace without predictions."""
    import mpl
    from mpl.sim import replay, synthesize
    from mpl.tune_predict import evaluate

    out = []
    base = synthesize("mixtral-8x7b", steps=steps, seed=seed)
    E = base.header.num_experts
    per = max(1, share * E // 100)
    demand = f"cache {{ capacity = {per} eviction = crf }} per_layer {{ min_capacity = 1 }}"
    for mode in ("gpu_only", "cpu_fallback"):
        sched = "" if mode == "gpu_only" else f"schedule {{ mode = {mode} }}"
        r = replay(mpl.loads(f"policy d {{ {demand} {sched} }}"), base, hardware=hardware)
        out.append({"predictor": "none (demand)", "mode": mode, "accuracy": None,
                    "hit_rate": r.hit_rate, "tokens_per_s": r.tokens_per_s})
        for acc in (0.5, 0.7, 0.8, 0.9, 0.95, 1.0):
            tr = synthesize("mixtral-8x7b", steps=steps, seed=seed, pred_accuracy=acc)
            for b in (1, 2):
                text = (f"policy p {{ {demand} prefetch {{ strategy = lookahead budget = {b} }} "
                        f"{sched} }}")
                r = replay(mpl.loads(text), tr, hardware=hardware)
                out.append({"predictor": f"recorded {acc:.0%}, budget {b}", "mode": mode,
                            "accuracy": r.stats["prefetch_accuracy"], "hit_rate": r.hit_rate,
                            "tokens_per_s": r.tokens_per_s})
    s = evaluate(base, "learned", (1, 2))
    out.append({"predictor": "learned (this trace, no predictions)", "mode": "-",
                "accuracy": s.accuracy(2), "coverage": s.coverage(2), "hit_rate": None,
                "tokens_per_s": None})
    return out


def tune_time(specs, shares, hardware) -> list[dict]:
    """CPU seconds of ``mplc tune`` (one process) with the halving search and with the
    earlier grid, on the same traces and budgets, measured in this run."""
    from mpl import tune as T

    out = []
    for spec, label in specs:
        trace = _trace_for(spec)
        h = trace.header
        for share in shares:
            slots = max(1, round(share / 100 * h.num_moe_layers * h.num_experts))
            r = {"trace": label, "dispatches": len(trace), "slots": slots}
            for search in ("grid", "halving"):
                t0 = time.process_time()
                res = T.tune(trace, slots, hardware=hardware, jobs=1, search=search)
                r[search] = {"cpu_s": time.process_time() - t0, "candidates": res.evaluated,
                             "replays": res.replayed, "tokens_per_s": res.best.tokens_per_s,
                             "hit_rate": res.best.hit_rate, "best": res.best.describe()}
            out.append(r)
    return out


# ------------------------------------------------------------------ printing
def _pct(x):
    return "-" if x is None else f"{x:.1%}"


def print_table(results) -> None:
    print(f"{'trace':<26} {'budget':>9}  {'policy':<44} {'hit rate':>8} {'demand':>7} "
          f"{'Belady':>7} {'of opt':>6} {'tok/s':>8}")
    for res in results:
        for r in sorted(res["rows"], key=lambda r: -(r.get("tokens_per_s") or 0)):
            if "error" in r:
                print(f"{res['trace']:<26} {res['share']:>3}% {res['slots']:>4}  {r['policy']:<44} "
                      f"error: {r['error'][:60]}")
                continue
            print(f"{res['trace']:<26} {res['share']:>3}% {res['slots']:>4}  {r['policy'][:44]:<44} "
                  f"{_pct(r['hit_rate']):>8} {_pct(r.get('demand_hit_rate')):>7} "
                  f"{_pct(r['belady']):>7} {_pct(r['of_belady']):>6} "
                  f"{r['tokens_per_s']:>8.2f}")


def summary(results) -> list[dict]:
    """Per (trace, budget): tuned, the best anchor (by tok/s, then by hit rate), LRU."""
    out = []
    for res in results:
        rows = [r for r in res["rows"] if "error" not in r]
        anchors = [r for r in rows if r["kind"] == "anchor"]
        lru = max((r for r in anchors if r["policy"].startswith("lru")),
                  key=lambda r: r["tokens_per_s"])
        std = max((r for r in rows if r["kind"] == "stdlib"), key=lambda r: r["tokens_per_s"])
        tuned = next((r for r in rows if r["kind"] == "tuned"), None)
        fast = max(anchors, key=lambda r: r["tokens_per_s"])
        hits = max(anchors, key=lambda r: r["hit_rate"])
        out.append({"trace": res["trace"], "share": res["share"], "slots": res["slots"],
                    "lru": lru, "best_stdlib": std, "fastest_anchor": fast,
                    "most_hits_anchor": hits, "tuned": tuned,
                    "tuned_beats_anchors": None if tuned is None else (
                        tuned["tokens_per_s"] >= fast["tokens_per_s"] - 1e-12
                        and tuned["hit_rate"] >= hits["hit_rate"] - 1e-12)})
    return out


def print_summary(rows) -> None:
    print(f"{'trace':<26} {'budget':>9}  {'LRU':>19}  {'best anchor (tok/s)':>38}  "
          f"{'tuned':>19}  tuned >= anchors")
    for s in rows:
        def cell(r):
            return f"{r['hit_rate']:6.1%} {_pct(r['of_belady']):>5} {r['tokens_per_s']:6.2f}"
        fa = s["fastest_anchor"]
        t = s["tuned"]
        print(f"{s['trace']:<26} {s['share']:>3}% {s['slots']:>4}  {cell(s['lru'])}  "
              f"{fa['policy'][:17]:>17} {cell(fa)}  {cell(t) if t else '-':>19}  "
              f"{'-' if s['tuned_beats_anchors'] is None else ('yes' if s['tuned_beats_anchors'] else 'NO')}"
              + ("" if t is None or s["most_hits_anchor"] is fa else
                 f"  (most hits: {s['most_hits_anchor']['policy']} {s['most_hits_anchor']['hit_rate']:.1%})")
              + (f"  [{t['policy'][len('tuned: '):]}]" if t else ""))


def markdown(out) -> str:
    """The tables of docs/choosing-a-policy.md, from one run's results."""
    lines = ["| model | budget | plain LRU (best structure) | best anchor | tuned | tuned policy |",
             "|---|---|---|---|---|---|"]

    def cell(r):
        return f"{r['hit_rate']:.1%} / {_pct(r['of_belady'])} / {r['tokens_per_s']:.2f}"
    for srow in out["summary"]:
        lru, fa, t = srow["lru"], srow["fastest_anchor"], srow["tuned"]
        kind = "shared" if lru["policy"].endswith("shared") else "per-layer"
        lines.append(f"| {srow['trace']} | {srow['share']}% ({srow['slots']} slots) | {cell(lru)} "
                     f"({kind}) | {cell(fa)} ({fa['policy']}) | {cell(t) if t else '-'} | "
                     f"{t['policy'][len('tuned: '):] if t else '-'} |")
    lines += ["", "| model | history | affinity | learned |", "|---|---|---|---|"]
    for p in out["predictors"]:
        by = {s["strategy"]: s for s in p["scores"]}

        def pc(name):
            s = by.get(name)
            if s is None:
                return "-"
            return ("/".join(_pct(s["accuracy"][b]) for b in (1, 2, 4)) + " (coverage "
                    + "/".join(_pct(s["coverage"][b]) for b in (1, 2, 4)) + ")")
        lines.append(f"| {p['trace']} | {pc('history')} | {pc('affinity')} | {pc('learned')} |")
    if out.get("ceiling"):
        lines += ["", "| predictions | budget | prefetch accuracy | hit rate | tok/s (gpu_only) | "
                      "tok/s (cpu_fallback) |", "|---|---|---|---|---|---|"]
        rows = {}
        for r in out["ceiling"]:
            rows.setdefault(r["predictor"], {})[r["mode"]] = r
        for name, modes in rows.items():
            g, c = modes.get("gpu_only"), modes.get("cpu_fallback")
            if g is None:
                r = modes["-"]
                lines.append(f"| {name} | 2 | {_pct(r['accuracy'])} (coverage {_pct(r.get('coverage'))}) "
                             f"| - | - | - |")
                continue
            label, _, budget = name.partition(", budget ")
            lines.append(f"| {label} | {budget or '-'} | {_pct(g['accuracy'])} | {_pct(g['hit_rate'])} "
                         f"| {g['tokens_per_s']:.3f} | {c['tokens_per_s']:.3f} |")
    return "\n".join(lines)


def print_tune_time(rows) -> None:
    print("# mplc tune, one process, CPU seconds: the halving search against the earlier grid")
    for r in rows:
        g, h = r["grid"], r["halving"]
        print(f"  {r['trace']:<18} {r['dispatches']:>7} dispatches {r['slots']:>5} slots: grid "
              f"{g['cpu_s']:6.1f} s ({g['candidates']} candidates, best {g['hit_rate']:.2%} "
              f"{g['tokens_per_s']:.3f} tok/s), halving {h['cpu_s']:6.1f} s ({h['candidates']} "
              f"candidates, {h['replays']:.1f} whole-trace replays, best {h['hit_rate']:.2%} "
              f"{h['tokens_per_s']:.3f} tok/s): {h['cpu_s'] / g['cpu_s']:.2f}x")
    tg = sum(r["grid"]["cpu_s"] for r in rows)
    th = sum(r["halving"]["cpu_s"] for r in rows)
    if rows:
        print(f"  in all: grid {tg:.1f} s, halving {th:.1f} s: {th / tg:.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="decode steps per synthetic trace")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds of the synthetic traces")
    ap.add_argument("--presets", default=",".join(PRESETS), help="comma-separated presets ('' for none)")
    ap.add_argument("--budgets", default="25,50,75", help="percent of the model's experts")
    ap.add_argument("--trace", action="append", default=[], help="a trace file (repeatable)")
    ap.add_argument("--hardware", default=None, help="hardware profile (default rtx-4090)")
    ap.add_argument("--knobs", default="", help="synthetic knobs for every preset, e.g. reuse=0.4,affinity=0.1")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    ap.add_argument("--no-tune", action="store_true", help="leave out mplc tune's policy")
    ap.add_argument("--tune-time", action="store_true",
                    help="also time mplc tune (halving) against the earlier grid, one process")
    ap.add_argument("--tune-time-only", action="store_true",
                    help="only time mplc tune against the grid (no table)")
    ap.add_argument("--ceiling", action="store_true",
                    help="also measure the prediction ceiling (recorded predictions of each accuracy)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true",
                    help="also print the tables of docs/choosing-a-policy.md")
    args = ap.parse_args(argv)

    knobs = {}
    for item in filter(None, args.knobs.split(",")):
        k, v = item.split("=", 1)
        knobs[k.strip()] = float(v) if "." in v else int(v)
    shares = [int(x) for x in args.budgets.split(",") if x]
    specs = []
    for seed in [int(x) for x in args.seeds.split(",") if x]:
        for p in filter(None, args.presets.split(",")):
            label = p + (f" s{seed}" if len(args.seeds.split(",")) > 1 else "") + \
                (f" {args.knobs}" if knobs else "")
            specs.append((("synth", p, args.steps, seed, knobs), label))
    for path in args.trace:
        specs.append((("file", path, 0, 0, {}), os.path.basename(path)))

    t0 = time.perf_counter()
    if args.tune_time_only:
        rows = tune_time(specs, shares, args.hardware)
        if args.json:
            print(json.dumps({"tune_time": rows}, indent=1, default=str))
            return 0
        print_tune_time(rows)
        return 0
    tasks = [(spec, label, share, args.hardware, not args.no_tune, 1)
             for spec, label in specs for share in shares]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as ex:
            results = list(ex.map(measure, tasks))
            preds = list(ex.map(predictors, *zip(*specs))) if specs else []
    else:
        results = [measure(t) for t in tasks]
        preds = [predictors(spec, label) for spec, label in specs]
    summ = summary(results)
    out = {"command": "python benchmarks/bench_policies.py " + " ".join(argv or sys.argv[1:]),
           "results": results, "summary": summ, "predictors": preds}
    if args.ceiling:
        out["ceiling"] = ceiling(args.steps, int(args.seeds.split(",")[0]), args.hardware)
    if args.tune_time:
        out["tune_time"] = tune_time(specs, shares, args.hardware)
    out["wall_s"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    print("# every policy, every trace and budget (sorted by simulated tok/s)")
    print_table(results)
    print()
    print("# summary: hit rate, share of the structure's Belady optimum, tok/s")
    print_summary(summ)
    print()
    print("# next-layer prediction: accuracy and coverage per prefetch budget")
    for p in preds:
        cells = []
        for s in p["scores"]:
            acc, cov = s["accuracy"], s["coverage"]
            cells.append(f"{s['strategy']} " + "/".join(_pct(acc[b]) for b in (1, 2, 4)) +
                         " cov " + "/".join(_pct(cov[b]) for b in (1, 2, 4)))
        print(f"{p['trace']:<26} " + "; ".join(cells))
    if args.ceiling:
        print()
        print("# prediction ceiling: mixtral-8x7b at 50% of its experts, crf per layer")
        for r in out["ceiling"]:
            print(f"  {r['predictor']:<40} {r['mode']:<13} accuracy {_pct(r['accuracy']):>6}  "
                  f"hit rate {_pct(r['hit_rate']):>6}  "
                  f"{'-' if r['tokens_per_s'] is None else format(r['tokens_per_s'], '.3f')} tok/s"
                  + (f"  coverage {_pct(r.get('coverage'))}" if r.get("coverage") is not None else ""))
    if args.tune_time:
        print()
        print_tune_time(out["tune_time"])
    if args.markdown:
        print()
        print(markdown(out))
    print(f"\n{out['wall_s']:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
