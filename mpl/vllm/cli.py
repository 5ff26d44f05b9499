"""``python -m mpl.vllm.cli record|run ...``: the vLLM side of ``mplc trace record --engine
vllm`` and ``mplc run --engine vllm`` (mpl.vllm.launch starts it in a Python that has vllm).

* ``record --model PATH [--prompt TEXT]... [--max-new-tokens N] [--tensor-parallel-size N]
  [--lookahead N] -o OUT [--json]`` (pre-gating predictions N layers ahead, default 1)
* ``run POLICY --model PATH [--prompt TEXT]... [--max-new-tokens N] [--hardware H]
  [--trace OUT] [--policy-name NAME] [--offload [--stream-slots N]]
  [--tensor-parallel-size N] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mpl.vllm.cli")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("record", "run"):
        s = sub.add_parser(name)
        if name == "run":
            s.add_argument("policy")
            s.add_argument("--policy-name")
            s.add_argument("--hardware")
            s.add_argument("--trace")
            s.add_argument("--offload", action="store_true")
            s.add_argument("--stream-slots", type=int)
        else:
            s.add_argument("-o", "--output", required=True)
            s.add_argument("--lookahead", type=int, default=1)
        s.add_argument("--model", required=True)
        s.add_argument("--prompt", action="append")
        s.add_argument("--max-new-tokens", type=int, default=16)
        s.add_argument("--json", action="store_true")
        s.add_argument("--dtype", default="auto")
        s.add_argument("--tensor-parallel-size", type=int, default=1)
    return p


def _requests(res) -> list[dict]:
    return [{"request_id": rid, "prompt_token_ids": list(o.prompt_token_ids),
             "token_ids": tok, "text": text}
            for rid, o, tok, text in zip(res.request_ids, res.outputs, res.token_ids, res.texts)]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    prog = "mplc trace record" if args.cmd == "record" else "mplc run"
    from mpl import traceio

    from . import PolicyRunner, VllmIntegrationError

    prompts = args.prompt or ["The quick brown fox jumps over the lazy dog"]
    policy = args.policy if args.cmd == "run" else None
    out = args.output if args.cmd == "record" else args.trace
    live = {"offload": True, "stream_slots": args.stream_slots} if getattr(args, "offload", False) else {}
    engine = {"tensor_parallel_size": args.tensor_parallel_size} if args.tensor_parallel_size > 1 else {}
    look = {"lookahead": args.lookahead} if args.cmd == "record" else {}
    try:
        runner = PolicyRunner(model=args.model, policy=policy,
                              policy_name=getattr(args, "policy_name", None),
                              hardware=getattr(args, "hardware", None), dtype=args.dtype,
                              **live, **engine, **look)
    except VllmIntegrationError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    try:
        res = runner.generate(prompts, max_tokens=args.max_new_tokens)
    except VllmIntegrationError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    finally:
        runner.close()
    tr = res.trace
    if out:
        try:
            traceio.save(tr, out)
        except OSError as e:
            print(f"{prog}: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
            return 1
    h = tr.header
    report = {"engine": "vllm", "model": args.model, "output": out, "dispatches": len(tr),
              "steps": tr.num_steps, "moe_layers": list(h.moe_layers), "num_experts": h.num_experts,
              "top_k": h.top_k, "expert_bytes": h.expert_bytes, "source": h.source,
              "tensor_parallel_size": h.extra.get("tensor_parallel_size", args.tensor_parallel_size),
              "requests": _requests(res)}
    tp = report["tensor_parallel_size"]
    ranks = f", tensor-parallel size {tp}" if tp and tp > 1 else ""
    if res.report is not None and live:
        report.update(policy=res.report["policy"], mode="offload", stats=res.stats,
                      hardware=res.report["hardware"]["name"], offload=res.report["offload"],
                      ranks=res.report.get("ranks", 1))
    elif res.report is not None:
        report.update(policy=res.report["policy"], mode="shadow", stats=res.stats,
                      hardware=res.report["hardware"]["name"], sim=res.report["sim"])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    if args.cmd == "record":
        print(f"recorded {len(tr)} dispatches over {tr.num_steps} steps in vLLM "
              f"({h.num_experts} experts x {h.num_moe_layers} MoE layers, top-{h.top_k}{ranks}) -> {out}")
        return 0
    s = res.stats
    if live:
        m = res.report["offload"]
        print(f"policy {res.report['policy']} live in vLLM on {args.model} ({h.num_moe_layers} MoE "
              f"layers{ranks}): {m['cache_slots']} cache slots + {m['stream_slots']} transient "
              f"({m['pool_bytes']} bytes on {m['device']}) for {m['expert_bytes_total']} bytes of experts")
    else:
        print(f"policy {res.report['policy']} in shadow mode beside vLLM on {args.model} "
              f"({h.num_moe_layers} MoE layers{ranks}), simulated on {res.report['hardware']['name']}")
    for r in report["requests"]:
        print(f"output: {r['text']!r}")
    print(f"accesses {s['accesses']}  hits {s['hits']}  hit rate {s['hit_rate']:.3f}  "
          f"loads {s['loads']}  evictions {s['evictions']}  prefetch accuracy "
          f"{s['prefetch_accuracy']:.3f}  stall {s['stall_ms']:.2f} ms "
          f"({'measured' if live else 'simulated'})")
    if live:
        print(f"copies {m['copies']}  streamed {m['stream_copies']}  bytes copied {m['bytes_copied']}  "
              f"passes {m['passes']}  cpu computes {m['cpu_computes']}  "
              f"mechanism {m['us_per_layer_call']:.1f} us per layer call")
    from mpl.adapt_log import lines as adapt_lines
    for line in adapt_lines(s.get("adapt_log") or []):
        print(line)
    if out:
        print(f"trace: {len(tr)} dispatches over {tr.num_steps} steps -> {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM logs to stdout by default; stdout is the command's (its --json report)
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    sys.exit(main())
