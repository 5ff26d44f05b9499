"""Overhead of the offload mechanism when nothing needs offloading.

For small random-initialised MoE models on the CPU, times a 32-token prefill and a decode
loop with a policy attached whose cache holds every expert (capacity = all experts, so the
mechanism runs but never misses after warm-up), divided by the same model without it, for
each experts implementation. Targets: prefill within 1.15x, decode within 1.05x. Also prints
the blocking host synchronisations the mechanism made per MoE layer and forward (the
engine's ``Ops.fetch`` count / dispatches; the design and the tests say exactly 1).

    python benchmarks/bench_offload.py [--families tiny-mixtral,tiny-qwen3-moe] [--reps 7] [--json]
    python benchmarks/bench_offload.py --hidden 64 --intermediate 128 --layers 8   # other sizes
    python benchmarks/bench_offload.py --own-time    # us per MoE-layer call outside the experts function

Both models are built from the same seed; measurements alternate between them so that
machine noise hits both; each figure is the median over ``--reps`` repetitions. Times are
the process's CPU time (``time.process_time``; torch runs on one thread), which waiting for
a core on a shared machine does not inflate; ``--wall`` uses wall-clock time instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

CLOCK = time.process_time

import mpl
from mpl.offload.hf import attach
from mpl.offload.models import build_model

SIZE = dict(hidden_size=128, intermediate_size=256)   # small, not toy-small: compute matters
DECODE_TARGET = 1.05
PREFILL_TARGET = 1.15
FAMILIES = "tiny-mixtral,tiny-qwen3-moe,tiny-olmoe,tiny-deepseek-v2,tiny-gpt-oss"


def _overrides(family):
    o = dict(SIZE)
    if family in ("tiny-qwen2-moe", "tiny-qwen3-moe", "tiny-deepseek-v2", "tiny-deepseek-v3"):
        o["moe_intermediate_size"] = o["intermediate_size"] // 2
    return o


def _prefill(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=True)


def _time_prefill(model, ids):
    t0 = CLOCK()
    _prefill(model, ids)
    return CLOCK() - t0


def _cache(out):
    c = out.get("cache") if hasattr(out, "get") else None
    return c if c is not None else out.past_key_values


def _time_decode(model, ids, steps):
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        past = _cache(out)
        tok = out.logits[:, -1:].argmax(-1)
        t0 = CLOCK()
        for _ in range(steps):
            out = model(input_ids=tok, cache=past, use_cache=True)
            past = _cache(out)
            tok = out.logits[:, -1:].argmax(-1)
        return (CLOCK() - t0) / steps


def _pair(family, impl, prompt_len=32, layers=4):
    """(unmodified model, attached model, handle, prompt ids), both warmed up."""
    base = build_model(family, layers=layers, experts_implementation=impl, **_overrides(family))
    mod = build_model(family, layers=layers, experts_implementation=impl, **_overrides(family))
    from mpl.offload.hf import discover
    ls = discover(mod)
    total = len(ls) * ls[0].num_experts
    handle = attach(mpl.loads(f"version 1\npolicy all {{ cache {{ capacity = {total} }} }}"), mod)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 256, (1, prompt_len), generator=g)
    for m in (base, mod):          # warm-up (and fills the cache of the attached one)
        _time_prefill(m, ids)
        _time_decode(m, ids, 2)
    return base, mod, handle, ids


def own_time(family, impl, reps=7, decode_steps=32, layers=4):
    """Microseconds per MoE-layer call of a decode step spent outside the experts function
    itself: in the unmodified model, the experts class's dispatching wrapper; attached, the
    mechanism (hook, read, runtime dispatch, remap, bookkeeping). Wall clock, medians over
    ``reps`` decode loops; the registered experts function is wrapped by the same timer in
    both models. Not for ``eager`` (the engine runs the eager loop's math itself)."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    registry = ALL_EXPERTS_FUNCTIONS._global_mapping
    real = registry[impl]
    base, mod, handle, ids = _pair(family, impl, layers=layers)
    clock = time.perf_counter_ns
    acc = [0, 0]                   # ns in experts calls, ns in the experts function

    def timed_fn(*a, **k):
        t0 = clock()
        out = real(*a, **k)
        acc[1] += clock() - t0
        return out

    def timed_call(forward):
        def call(*a, **k):
            t0 = clock()
            out = forward(*a, **k)
            acc[0] += clock() - t0
            return out
        return call
    from mpl.offload.hf import discover
    wrapped = []
    for b in discover(base) + handle.layers:
        wrapped.append((b.module, vars(b.module).get("forward")))
        b.module.forward = timed_call(b.module.forward)
    registry[impl] = timed_fn
    res = {"base": [], "policy": [], "fn_base": [], "fn_policy": []}
    try:
        for _ in range(reps):
            for name, m in (("base", base), ("policy", mod)):
                acc[0] = acc[1] = 0
                _time_decode(m, ids, decode_steps)
                calls = decode_steps * len(handle.layers)
                res[name].append((acc[0] - acc[1]) / calls / 1e3)
                res["fn_" + name].append(acc[1] / calls / 1e3)
    finally:
        registry[impl] = real
        for module, fwd in wrapped:
            if fwd is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = fwd
        handle.detach()
    med = statistics.median
    return {"family": family, "impl": impl, "own_us_base": med(res["base"]),
            "own_us_policy": med(res["policy"]), "fn_us_base": med(res["fn_base"]),
            "fn_us_policy": med(res["fn_policy"])}


def bench(family, impl, reps, decode_steps, prompt_len=32, layers=4):
    base, mod, handle, ids = _pair(family, impl, prompt_len, layers)
    pb, pm, db, dm = [], [], [], []
    for _ in range(reps):
        pb.append(_time_prefill(base, ids))
        pm.append(_time_prefill(mod, ids))
        db.append(_time_decode(base, ids, decode_steps))
        dm.append(_time_decode(mod, ids, decode_steps))
    stats = handle.get_stats()
    mech = stats["mechanism"]
    handle.detach()
    med = statistics.median
    return {"family": family, "impl": impl,
            "prefill_ms": med(pb) * 1e3, "prefill_ms_policy": med(pm) * 1e3,
            "prefill_ratio": med(pm) / med(pb),
            "decode_ms": med(db) * 1e3, "decode_ms_policy": med(dm) * 1e3,
            "decode_ratio": med(dm) / med(db), "hit_rate": stats["hit_rate"],
            "syncs_per_layer": mech["host_syncs"] / mech["dispatches"],
            # which path served the dispatches: the home window (router's ids), the lean
            # remap, or the general one
            "home_share": mech.get("home_dispatches", 0) / mech["dispatches"],
            "lean_share": mech.get("lean_dispatches", 0) / mech["dispatches"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=FAMILIES)
    ap.add_argument("--impls", default="eager,batched_mm,grouped_mm")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    ap.add_argument("--hidden", type=int, default=SIZE["hidden_size"],
                    help=f"hidden size (default {SIZE['hidden_size']})")
    ap.add_argument("--intermediate", type=int, default=SIZE["intermediate_size"],
                    help=f"expert intermediate size (default {SIZE['intermediate_size']}; "
                         "half of it for the families with a separate MoE size)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of CPU time")
    ap.add_argument("--own-time", action="store_true",
                    help="instead: microseconds per MoE-layer decode call outside the experts "
                         "function (the unmodified model's wrapper vs the mechanism)")
    args = ap.parse_args(argv)
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    torch.set_num_threads(args.threads)
    SIZE.update(hidden_size=args.hidden, intermediate_size=args.intermediate)
    if args.own_time:
        for fam in args.families.split(","):
            for impl in args.impls.split(","):
                if impl == "eager":
                    continue
                r = own_time(fam, impl, args.reps, layers=args.layers)
                print(f"{fam:18s} {impl:10s} own time per MoE-layer decode call: unmodified "
                      f"{r['own_us_base']:6.1f} us, attached {r['own_us_policy']:6.1f} us   "
                      f"(the experts function: {r['fn_us_base']:6.1f} / {r['fn_us_policy']:6.1f} us)",
                      flush=True)
        return 0
    rows = []
    for fam in args.families.split(","):
        for impl in args.impls.split(","):
            rows.append(bench(fam, impl, args.reps, args.decode_steps, layers=args.layers))
            r = rows[-1]
            if not args.json:
                print(f"{fam:18s} {impl:10s} prefill {r['prefill_ms']:7.2f} -> {r['prefill_ms_policy']:7.2f} ms "
                      f"x{r['prefill_ratio']:.3f}   decode {r['decode_ms']:6.2f} -> {r['decode_ms_policy']:6.2f} ms/token "
                      f"x{r['decode_ratio']:.3f}   syncs/layer {r['syncs_per_layer']:.2f}   "
                      f"home {r['home_share']:.2f} lean {r['lean_share']:.2f}", flush=True)
    worst_p = max(r["prefill_ratio"] for r in rows)
    worst_d = max(r["decode_ratio"] for r in rows)
    worst_s = max(r["syncs_per_layer"] for r in rows)
    summary = {"rows": rows, "worst_prefill_ratio": worst_p, "worst_decode_ratio": worst_d,
               "max_syncs_per_layer": worst_s,
               "prefill_target_met": worst_p <= PREFILL_TARGET,
               "decode_target_met": worst_d <= DECODE_TARGET}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"worst prefill ratio x{worst_p:.3f} (target {PREFILL_TARGET}: "
              f"{'met' if worst_p <= PREFILL_TARGET else 'NOT met'}), "
              f"worst decode ratio x{worst_d:.3f} (target {DECODE_TARGET}: "
              f"{'met' if worst_d <= DECODE_TARGET else 'NOT met'}), "
              f"at most {worst_s:.2f} blocking host syncs per MoE layer and forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
