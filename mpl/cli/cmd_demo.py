"""``mplc demo``: the end-to-end job, offline, on a CPU-only machine, in seconds.

1. builds a tiny random-initialised MoE model (no download);
2. generates greedily with the unmodified model (the reference tokens and logits);
3. attaches a standard-library policy with a cache smaller than the model's experts, so the
   slot pool really evicts and reloads, and generates again while recording the routing;
4. checks that tokens and logits are identical to the reference (gpu_only: bit-identical);
5. replays the recorded trace through the same policy (``mpl.sim.replay``) and checks that
   the replay's hit rate equals the live one;
6. detaches and checks the model generates the reference again.

Exit 0 when every check passes, 1 on a mismatch.
"""

from __future__ import annotations

import json
import os
import sys
import time


def add_arguments(p) -> None:
    p.add_argument("--model", default="tiny-mixtral", metavar="PRESET",
                   help="tiny model preset (default tiny-mixtral)")
    p.add_argument("--policy", default="std/balanced", metavar="POLICY",
                   help="policy file or std/NAME (default std/balanced: 4-slot LFU + history prefetch)")
    p.add_argument("--prompt", default="MoE-PolicyLang keeps the right experts on the GPU.")
    p.add_argument("--max-new-tokens", type=int, default=12, metavar="N")
    p.add_argument("--experts-implementation", choices=("eager", "batched_mm", "grouped_mm"),
                   help="force transformers' experts implementation (default: the model's)")
    p.add_argument("--json", action="store_true", help="print a JSON report")


def _replay_hit_rate(policy, trace):
    """Hit rate of replaying ``trace`` through ``policy`` (None when mpl.sim is missing)."""
    try:
        from mpl.sim import replay
    except ImportError:
        return None, "mpl.sim.replay is not available"
    rep = replay(policy, trace, belady=False)
    stats = getattr(rep, "stats", None)
    if callable(stats):
        stats = stats()
    if stats is None and hasattr(rep, "to_dict"):
        stats = rep.to_dict()
    if isinstance(stats, dict) and "hit_rate" in stats:
        return float(stats["hit_rate"]), None
    hr = getattr(rep, "hit_rate", None)
    return (float(hr), None) if hr is not None else (None, "the replay report has no hit rate")


def run(args) -> int:
    t_start = time.perf_counter()
    if args.max_new_tokens < 1:
        print("mplc demo: --max-new-tokens must be >= 1", file=sys.stderr)
        return 2
    from mpl.cli.cmd_run import generate, load_policy

    policy, rc = load_policy(args.policy, None, "mplc demo", name_option=None)
    if policy is None:
        return rc
    import torch

    from mpl.offload.errors import AttachError
    from mpl.offload.hf import attach
    from mpl.offload.models import PRESETS, build_model, decode, encode
    from mpl.offload.recorder import Recorder

    if args.model not in PRESETS:
        print(f"mplc demo: unknown preset '{args.model}': use one of {', '.join(PRESETS)}", file=sys.stderr)
        return 1
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = build_model(args.model, experts_implementation=args.experts_implementation)
    ids = encode(args.prompt)
    n = args.max_new_tokens
    ref_seq, ref_logits, t_ref = generate(model, ids, n)

    try:
        handle = attach(policy, model, device="cpu")
    except AttachError as e:
        print(f"mplc demo: {e}", file=sys.stderr)
        return 1
    params_left = [name for name, _ in model.named_parameters() if ".experts." in name]
    with Recorder(model) as rec:
        seq, logits, t_live = generate(model, ids, n)
    trace = rec.trace(source=f"recorded by mplc demo ({args.model})")
    stats = handle.get_stats()
    handle.detach()
    after_seq, after_logits, _ = generate(model, ids, n)

    mech = stats["mechanism"]
    gpu_only = policy.ir.get("schedule.mode") == "gpu_only" and not policy.ir.adapt
    checks = {
        "tokens identical": torch.equal(ref_seq, seq),
        "logits identical" if gpu_only else "logits close": (
            torch.equal(ref_logits, logits) if gpu_only else torch.allclose(ref_logits, logits, atol=1e-4)),
        "no expert weights left on the model while attached": not params_left,
        "copies into slots == runtime loads": mech["copies"] == stats.get("loads"),
        "identical after detach": torch.equal(ref_seq, after_seq) and torch.equal(ref_logits, after_logits),
    }
    replay_hr, why = _replay_hit_rate(policy, trace)
    live_hr = float(stats.get("hit_rate", 0.0))
    if replay_hr is not None:
        checks["replay hit rate == live hit rate"] = abs(replay_hr - live_hr) < 1e-12
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
        "replay_hit_rate": replay_hr, "replay_note": why,
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
    if replay_hr is not None:
        print(f"  replay: {len(trace)} recorded dispatches over {trace.num_steps} steps, hit rate {replay_hr:.4f}")
    else:
        print(f"  replay: skipped ({why})")
    for name, good in checks.items():
        print(f"  [{'ok' if good else 'FAIL'}] {name}")
    print(f"  {'all checks passed' if ok else 'MISMATCH'} in {report['seconds']:.1f} s")
    return 0 if ok else 1
