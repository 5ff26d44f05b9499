"""``mplc run POLICY.moe --model PATH_OR_PRESET``: attach a policy to a model, generate
greedily, print the text and what the mechanism did.

``--model`` takes a tiny preset (``tiny-mixtral``, ``tiny-qwen2-moe``, ``tiny-qwen3-moe``,
``tiny-olmoe``, ``tiny-deepseek-v2``, ``tiny-deepseek-v3``, ``tiny-gpt-oss``: random weights,
fixed seed, built offline; the prompt becomes token ids by its UTF-8 bytes), a local
HuggingFace model folder, or a ``config.json`` (random-initialised from it). Nothing is
downloaded; a model too large for the host's available memory is refused before it is built
(``mpl.offload.loading.check_fits``). POLICY is a .moe file or ``std/NAME``. ``--engine vllm``
runs the policy in shadow mode beside a vLLM engine instead, or with ``--offload`` live inside
it: the engine's experts move to a host store and a slot pool the policy drives
(``mpl.vllm.launch``; docs/vllm.md); ``--tensor-parallel-size N`` runs the engine on N ranks.
"""

from __future__ import annotations

import json
import os
import sys
import time


def add_arguments(p) -> None:
    from mpl.cli.options import add_no_progress, add_policy, add_policy_name

    add_policy(p)
    add_policy_name(p)
    p.add_argument("--model", required=True, metavar="PATH_OR_PRESET",
                   help="tiny preset (tiny-mixtral, tiny-qwen2-moe, tiny-qwen3-moe, tiny-olmoe, "
                        "tiny-deepseek-v2, tiny-deepseek-v3, tiny-gpt-oss), a model folder or a config.json")
    p.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog", help="prompt text")
    p.add_argument("--max-new-tokens", type=int, default=16, metavar="N", help="tokens to generate (default 16)")
    p.add_argument("--device", default=None, help="device of the skeleton and slot pool (default: cuda if available, else cpu)")
    p.add_argument("--experts-implementation", choices=("eager", "batched_mm", "grouped_mm"),
                   help="force transformers' experts implementation (default: the model's)")
    p.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    add_no_progress(p)
    from mpl.cli.cmd_trace import add_engine_arguments
    add_engine_arguments(p)
    v = p.add_argument_group("with --engine vllm (the policy runs in shadow mode beside the engine, "
                             "or live with --offload)")
    v.add_argument("--hardware", metavar="PROFILE", help="hardware profile of the simulated stalls, and of "
                   "the hybrid schedule's cost model (default rtx-4090)")
    v.add_argument("--trace", metavar="OUT", help="also write the routing vLLM recorded to OUT")
    v.add_argument("--offload", action="store_true",
                   help="run the policy live: the engine's experts move to a host store and a slot "
                        "pool sized by the policy, whose runtime decides what the engine holds")
    v.add_argument("--stream-slots", type=int, metavar="N",
                   help="with --offload: transient pool entries for streamed experts (default: one "
                        "per expert of a layer; fewer computes large steps in passes)")


def load_policy(spec: str, name: str | None, prog: str, name_option: str | None = "--policy-name"):
    """(policy, None) or (None, exit code) after printing the problem: the diagnostics, and
    the reason itself whenever no error among them says it (an empty file has only the
    MPL112 warning; a file with several policies has none). ``name_option``: the option
    that chooses a policy of the file (None when the command has none)."""
    from mpl.stdlib_path import policy_file
    path = policy_file(spec)
    if path is None:
        print(f"{prog}: error: no such policy file: {spec}", file=sys.stderr)
        return None, 1
    import mpl
    try:
        return mpl.load(path, policy=name), None
    except mpl.PolicyError as e:
        diags = getattr(e, "diagnostics", None) or []
        if diags:
            from mpl.cli.render import render_all, use_color

            from mpl.fileio import read_text_or_none

            print(render_all(diags, lambda f: read_text_or_none(f or path),
                             color=use_color(sys.stderr)), file=sys.stderr)
        errors = [d for d in diags if d.is_error]
        if errors:
            print(f"{prog}: error: {spec}: not loaded ({len(errors)} error"
                  f"{'s' if len(errors) > 1 else ''})", file=sys.stderr)
        else:
            msg = str(e)
            if path != spec:                   # std/NAME: say it as the user did
                msg = msg.replace(path, spec)
            choose = (f"choose one with {name_option} NAME" if name_option else
                      "give a file that defines one policy")
            msg = msg.replace("choose one with policy='NAME'", choose)
            print(f"{prog}: error: {msg}", file=sys.stderr)
        return None, 1


class TokenProgress:
    """A progress bar over generated tokens: a streamer for HuggingFace ``generate`` (its
    first ``put`` is the prompt, each later one a new token)."""

    def __init__(self, bar) -> None:
        self.bar, self.n, self.prompt = bar, 0, True

    def put(self, value) -> None:
        if self.prompt:
            self.prompt = False
            return
        self.n += 1
        self.bar.update(self.n)

    def end(self) -> None:
        self.bar.close()


def generate(model, ids, max_new_tokens: int, progress=None):
    """Greedy generation; (sequences [1, n], logits [steps, 1, vocab], seconds).
    ``progress``: a bar (mpl.cli.options.bar) advanced per generated token."""
    import torch
    dev = next(model.parameters()).device
    inp = torch.tensor([ids], device=dev)
    kw = {"streamer": TokenProgress(progress)} if progress is not None and progress.on else {}
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(inp, max_new_tokens=max_new_tokens, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=getattr(model.generation_config, "pad_token_id", None) or 0,
                             **kw)
    dt = time.perf_counter() - t0
    return out.sequences, torch.stack(out.logits), dt


def brief_stats(stats: dict) -> dict:
    m = stats.get("mechanism", {})
    keys = ("accesses", "hits", "hit_rate", "loads", "evictions", "bytes_loaded", "prefetch_issued",
            "prefetch_accuracy", "cpu_computes", "streamed", "stall_ms")
    out = {k: stats[k] for k in keys if k in stats}
    out["mechanism"] = {k: m[k] for k in ("copies", "demand_copies", "prefetch_copies", "background_copies",
                                          "stream_copies", "bytes_copied", "cpu_computes", "stall_ms",
                                          "pool_slots", "pool_bytes", "device", "modes") if k in m}
    return out


def run(args) -> int:
    from mpl.cli.errors import error, usage
    from mpl.cli.options import bar as progress_bar

    prog = "mplc run"
    if args.max_new_tokens < 1:
        return usage(prog, "--max-new-tokens must be >= 1")
    if args.tensor_parallel_size is not None and args.tensor_parallel_size < 1:
        return usage(prog, f"--tensor-parallel-size must be >= 1, got {args.tensor_parallel_size}")
    if args.engine == "vllm":
        from mpl.vllm.launch import run as run_vllm
        return run_vllm(args, prog)
    for opt, val in (("--hardware", args.hardware), ("--trace", args.trace), ("--dtype", args.dtype),
                     ("--offload", args.offload or None), ("--stream-slots", args.stream_slots),
                     ("--tensor-parallel-size", args.tensor_parallel_size)):
        if val is not None:
            return usage(prog, f"{opt} needs --engine vllm")
    policy, rc = load_policy(args.policy, args.policy_name, prog)
    if policy is None:
        return rc
    import torch
    from mpl.offload.errors import AttachError
    from mpl.offload.hf import attach
    from mpl.offload.loading import ModelLoadError, load_model

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    try:
        model, tok = load_model(args.model, experts_implementation=args.experts_implementation)
    except ModelLoadError as e:
        return error(prog, str(e))
    try:
        handle = attach(policy, model, device=args.device)
    except AttachError as e:
        return error(prog, str(e))
    ids = tok.encode(args.prompt)
    seq, _logits, dt = generate(model, ids, args.max_new_tokens,
                                progress_bar(args, args.max_new_tokens, "generate"))
    new = seq[0, len(ids):].tolist()
    stats = handle.get_stats()
    handle.detach()
    report = {"policy": policy.name, "model": args.model, "prompt": args.prompt,
              "tokens": new, "text": tok.decode(new), "seconds": dt,
              "tokens_per_s": len(new) / dt if dt > 0 else None, "stats": brief_stats(stats),
              "per_layer": stats.get("per_layer", []), "adapt_log": stats.get("adapt_log", [])}
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    s = report["stats"]
    m = s["mechanism"]
    print(f"policy {policy.name} on {args.model} ({len(handle.layers)} MoE layers, "
          f"{m.get('pool_slots')} device slots on {m.get('device')})")
    print(f"prompt: {args.prompt!r}")
    print(f"output: {report['text']!r}")
    print(f"tokens: {new}")
    print(f"{len(new)} tokens in {dt:.3f} s ({report['tokens_per_s']:.1f} tok/s)")
    print(f"accesses {s.get('accesses')}  hits {s.get('hits')}  hit rate {s.get('hit_rate', 0):.3f}  "
          f"loads {s.get('loads')}  evictions {s.get('evictions')}  streamed {s.get('streamed')}")
    print(f"mechanism: {m.get('copies')} copies into slots ({m.get('bytes_copied', 0) / 2**20:.2f} MiB), "
          f"{m.get('stream_copies')} streamed, {m.get('cpu_computes')} CPU expert computes, "
          f"stall {m.get('stall_ms', 0):.2f} ms, modes {m.get('modes')}")
    from mpl.adapt_log import lines as adapt_lines
    for line in adapt_lines(stats.get("adapt_log") or []):
        print(line)
    return 0
