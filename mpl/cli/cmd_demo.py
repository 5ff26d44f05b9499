"""``mplc demo``: the end-to-end job, offline, on a CPU-only machine, in seconds.

1. builds a tiny random-initialised MoE model (no download);
2. generates greedily with the unmodified model (the reference tokens and logits);
3. attaches a standard-library policy with a cache smaller than the model's experts, so the
   slot pool really evicts and reloads, and generates again while recording the routing;
4. checks that tokens and logits are identical to the reference (gpu_only: bit-identical;
   a policy that computed accesses from a lower-precision tier's copies is approximate by
   design, and only says whether its tokens still match);
5. replays the recorded trace through the same policy (``mpl.sim.replay``) and checks that
   the replay made the live run's decisions: the same hits, counting the late prefetches
   (resident keys still in flight on the simulated link, which the replay counts apart from
   hits; on the CPU every live copy is synchronous, so nothing is late there);
6. detaches and checks the model generates the reference again.

Exit 0 when every check passes, 1 on a mismatch.
"""

from __future__ import annotations

import json
import os
import time


def add_arguments(p) -> None:
    from mpl.cli.options import add_no_progress, add_policy, add_policy_name

    add_policy(p, optional=True, old_option=True)
    add_policy_name(p)
    p.add_argument("--model", default="tiny-mixtral", metavar="PRESET",
                   help="tiny model preset (default tiny-mixtral)")
    p.add_argument("--prompt", default="MoE-PolicyLang keeps the right experts on the GPU.",
                   help="prompt text (the presets read it as UTF-8 bytes)")
    p.add_argument("--max-new-tokens", type=int, default=12, metavar="N",
                   help="tokens to generate (default 12)")
    p.add_argument("--hardware", metavar="NAME|FILE",
                   help="hardware profile of the simulated tokens/s (default rtx-4090)")
    p.add_argument("--experts-implementation", choices=("eager", "batched_mm", "grouped_mm"),
                   help="force transformers' experts implementation (default: the model's)")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    add_no_progress(p)


PROG = "mplc demo"

#: the policy the demo runs when none is given
DEFAULT_POLICY = "std/frequency_filter"


def compare(policy, trace, hardware=None) -> dict:
    """The value of the policy on the recorded routing: its replay (hit rate, simulated
    tokens/s, where its loads came from) beside plain LRU with the same slots and Belady's
    optimum for the same cache structure. ``{"policy": ..., "lru": ..., "belady": ...,
    "loads": ...}``."""
    from mpl.sim import replay

    rep = replay(policy, trace, hardware=hardware, belady=True)
    s = rep.stats
    slots = rep.belady["capacities"] if rep.belady else None
    if s.get("tiers"):
        # the optimum is one cache of each set's top tier: LRU gets the same slots, shared
        slots = sum(slots)
        lru_text = (f"policy plain_lru {{\n    cache {{ capacity = {slots}  eviction = lru }}\n}}\n"
                    if slots else None)
    elif policy.ir.per_layer:
        caps = [x["capacity"] for x in s.get("per_layer", [])]
        lru_text = (f"policy plain_lru {{\n    cache {{ capacity = {max(caps)}  eviction = lru }}\n"
                    f"    per_layer {{ total_budget = {sum(caps)}  min_capacity = {min(caps)}  "
                    f"max_capacity = {max(caps)} }}\n}}\n")
    else:
        lru_text = f"policy plain_lru {{\n    cache {{ capacity = {slots}  eviction = lru }}\n}}\n"
    row = lambda r: {"hit_rate": r.hit_rate, "tokens_per_s": r.tokens_per_s}   # noqa: E731
    lru = row(replay(lru_text, trace, hardware=hardware, belady=False)) if lru_text else None
    loads = {k: s[k] for k in ("loads", "demand_loads", "background_loads", "prefetch_loads",
                               "prefetch_useful", "accesses", "hits", "late_prefetches", "misses",
                               "streamed") if k in s}
    return {"policy": row(rep), "lru": lru, "slots": slots, "tiered": bool(s.get("tiers")),
            "belady": rep.belady["hit_rate"] if rep.belady else None,
            "hardware": rep.hardware["name"], "loads": loads}


def loads_text(loads: dict) -> str:
    """Why a policy loads more experts than it misses: where each load came from."""
    n, demand = loads.get("loads", 0), loads.get("demand_loads", 0)
    pf, bg = loads.get("prefetch_loads", 0), loads.get("background_loads", 0)
    parts = [f"{demand} misses loaded on demand"]
    if bg:
        parts.append(f"{bg} loaded in the background while the CPU computed the miss")
    if pf:
        parts.append(f"{pf} prefetched ahead of use ({loads.get('prefetch_useful', 0)} of them "
                     f"used before eviction)")
    out = f"{n} loads = " + " + ".join(parts)
    if n > loads.get("accesses", 0):
        out += ("; more loads than accesses: every prefetch is a load, used or not, and a "
                "prefetched key evicted before its use is loaded again when it is needed")
    return out


def run(args) -> int:
    from mpl.cli.errors import error, usage
    from mpl.cli.options import bar as progress_bar

    t_start = time.perf_counter()
    if args.max_new_tokens < 1:
        return usage(PROG, "--max-new-tokens must be >= 1")
    if args.hardware:
        from mpl.timemodel.hardware import HardwareError, resolve
        try:
            resolve(args.hardware)
        except HardwareError as e:
            return error(PROG, str(e))
    from mpl.cli.options import load_policy
    from mpl.offload.cli import generate

    spec = args.policy or args.policy_option or DEFAULT_POLICY
    policy, rc = load_policy(spec, args.policy_name, PROG)
    if policy is None:
        return rc
    import torch

    from mpl.offload.errors import AttachError
    from mpl.offload.hf import attach
    from mpl.offload.models import PRESETS, build_model, decode, encode
    from mpl.offload.recorder import Recorder

    if args.model not in PRESETS:
        return error(PROG, f"unknown preset '{args.model}': use one of {', '.join(PRESETS)}")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = build_model(args.model, experts_implementation=args.experts_implementation)
    ids = encode(args.prompt)
    n = args.max_new_tokens
    ref_seq, ref_logits, t_ref = generate(model, ids, n)

    try:
        handle = attach(policy, model, device="cpu")
    except AttachError as e:
        return error(PROG, str(e))
    params_left = [name for name, _ in model.named_parameters() if ".experts." in name]
    with Recorder(model) as rec:
        seq, logits, t_live = generate(model, ids, n, progress_bar(args, n, "generate"))
    trace = rec.trace(source=f"recorded by mplc demo ({args.model})")
    stats = handle.get_stats()
    handle.detach()
    after_seq, after_logits, _ = generate(model, ids, n)

    mech = stats["mechanism"]
    gpu_only = policy.ir.get("schedule.mode") == "gpu_only" and not policy.ir.adapt
    # accesses computed from a lower-precision tier's copy change the output by design
    approximate = stats.get("approximate_computes", 0)
    checks = {} if approximate else {
        "tokens identical": torch.equal(ref_seq, seq),
        "logits identical" if gpu_only else "logits close": (
            torch.equal(ref_logits, logits) if gpu_only else torch.allclose(ref_logits, logits, atol=1e-4)),
    }
    checks |= {
        "no expert weights left on the model while attached": not params_left,
        "copies into slots == runtime loads": mech["copies"] == stats.get("loads"),
        "identical after detach": torch.equal(ref_seq, after_seq) and torch.equal(ref_logits, after_logits),
    }
    value = compare(policy, trace, args.hardware)
    replay_hr, why = value["policy"]["hit_rate"], None
    live_hr = float(stats.get("hit_rate", 0.0))
    lo = value["loads"]
    # the same decisions: a key the runtime held is a hit live (CPU copies are synchronous)
    # and a hit or a late prefetch in the replay (its simulated link may still carry it)
    checks["replay decisions == live decisions (hits + late prefetches)"] = (
        lo.get("hits", 0) + lo.get("late_prefetches", 0)
        == stats.get("hits", 0) + stats.get("late_prefetches", 0))
    ok = all(checks.values())
    new = seq[0, len(ids):].tolist()
    report = {
        "ok": ok, "model": args.model, "policy": policy.name,
        "experts_implementation": model.config._experts_implementation,
        "moe_layers": len(handle.layers), "experts": handle.layers[0].num_experts,
        "top_k": handle.layers[0].top_k, "slots": mech["pool_slots"],
        "prompt": args.prompt, "generated_tokens": new, "text": decode(new),
        "live": {k: stats.get(k) for k in ("accesses", "hits", "hit_rate", "loads", "evictions",
                                            "prefetch_issued", "prefetch_useful", "streamed")},
        "mechanism": {k: mech[k] for k in ("copies", "stream_copies", "bytes_copied", "cpu_computes", "pool_bytes")},
        "trace": {"dispatches": len(trace), "steps": trace.num_steps},
        "approximate_computes": approximate,
        "approximate_by_dtype": stats.get("approximate_by_dtype", {}),
        "tokens_identical": torch.equal(ref_seq, seq),
        "replay_hit_rate": replay_hr, "replay_note": why, "comparison": value,
        "adapt_log": stats.get("adapt_log", []),
        "checks": checks, "seconds": time.perf_counter() - t_start,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if ok else 1
    print(f"mplc demo: {args.model} ({report['moe_layers']} MoE layers x {report['experts']} experts, "
          f"top-{report['top_k']}, {report['experts_implementation']}), policy {policy.name} "
          f"({report['slots']} device slots for {report['moe_layers'] * report['experts']} experts)")
    print(f"  generated {len(new)} tokens: {new}")
    lv = report["live"]
    print(f"  live:   {lv['accesses']} accesses, hit rate {live_hr:.4f}, {lv['loads']} loads, "
          f"{lv['evictions']} evictions, {lv['streamed']} streamed; mechanism copied "
          f"{mech['copies']} experts ({mech['bytes_copied'] / 1024:.1f} KiB) into a fixed "
          f"{mech['pool_bytes'] / 1024:.1f} KiB pool")
    if approximate:
        by = ", ".join(f"{n} from {d} copies" for d, n in sorted(report["approximate_by_dtype"].items()))
        print(f"  approximate by design: {approximate} of {lv['accesses']} accesses computed from "
              f"lower-precision copies ({by}); the tokens are "
              + ("the unmodified model's" if report["tokens_identical"] else "not the unmodified model's")
              + ", and no bit-identity check applies")
    late = value["loads"].get("late_prefetches", 0)
    print(f"  replay: {len(trace)} recorded dispatches over {trace.num_steps} steps, hit rate {replay_hr:.4f}"
          + (f" ({late} late prefetches: still on the simulated link when needed, not hits)"
             if late else ""))
    slots = value["slots"]
    what = (f"{slots} slot{'s' if slots != 1 else ''}" if not isinstance(slots, list) else
            f"per-layer caches of {min(slots)}..{max(slots)} slots")
    print(f"  value on the recorded routing ({what}; simulated on {value['hardware']}):")
    pv, lv_, bel = value["policy"], value["lru"], value["belady"]
    print(f"    {'policy ' + policy.name:<24} hit rate {pv['hit_rate']:7.2%}  {pv['tokens_per_s']:10.1f} tok/s")
    print(f"    {'plain LRU':<24} hit rate {lv_['hit_rate']:7.2%}  {lv_['tokens_per_s']:10.1f} tok/s")
    if bel is not None:
        print(f"    {'Belady (the optimum)':<24} hit rate {bel:7.2%}  (no demand policy can do better"
              + ("; prefetching can" if pv["hit_rate"] > bel else "") + ")")
    print(f"  {loads_text(value['loads'])}")
    from mpl.adapt_log import lines as adapt_lines
    for line in adapt_lines(stats.get("adapt_log") or []):
        print(f"  {line}")
    for name, good in checks.items():
        print(f"  [{'ok' if good else 'FAIL'}] {name}")
    print(f"  {'all checks passed' if ok else 'MISMATCH'} in {report['seconds']:.1f} s")
    return 0 if ok else 1
