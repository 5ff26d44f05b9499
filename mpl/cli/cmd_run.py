"""``mplc run POLICY.moe --model PATH_OR_PRESET``: run a policy on a model and generate
greedily; print the text and what the policy did.

The engine comes from the table ``mpl.cli.engines`` (``--engine``, default ``hf``), and so
does the mode: live (the policy's runtime decides which experts the engine holds) or shadow
(``--shadow``: the policy beside the unchanged engine, its stalls simulated on
``--hardware``; ``--trace OUT`` keeps the routing, whose replay gives the same statistics).
``--engine hf`` runs transformers in this process, live by default (``mpl.offload.cli``;
``--model``: a tiny preset, a local model folder or a ``config.json``, nothing downloaded);
``--engine vllm`` a vLLM engine in vLLM's own Python, in shadow mode by default or live with
``--offload`` (``mpl.vllm.launch``; docs/vllm.md). Either way the policy is checked against
the model first, its located diagnostics printed before anything starts.
"""

from __future__ import annotations


def add_arguments(p) -> None:
    from mpl.cli.options import add_no_progress, add_policy, add_policy_name

    add_policy(p)
    add_policy_name(p)
    p.add_argument("--model", required=True, metavar="PATH_OR_PRESET",
                   help="tiny preset (tiny-mixtral, tiny-qwen2-moe, tiny-qwen3-moe, tiny-olmoe, "
                        "tiny-deepseek-v2, tiny-deepseek-v3, tiny-gpt-oss), a model folder or a config.json")
    p.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog", help="prompt text")
    p.add_argument("--max-new-tokens", type=int, default=16, metavar="N", help="tokens to generate (default 16)")
    p.add_argument("--device", default=None,
                   help="with --engine hf: device of the skeleton and slot pool (default: cuda if "
                        "available, else cpu); in shadow mode, of the model")
    p.add_argument("--experts-implementation", choices=("eager", "batched_mm", "grouped_mm"),
                   help="with --engine hf: force transformers' experts implementation (default: "
                        "the model's)")
    p.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    add_no_progress(p)
    from mpl.cli.cmd_trace import add_engine_arguments
    add_engine_arguments(p)
    m = p.add_argument_group("modes (default: live with --engine hf, shadow with --engine vllm)")
    m.add_argument("--shadow", action="store_true",
                   help="run the policy in shadow mode beside the unchanged engine: its statistics "
                        "say what it would have done, stalls simulated on --hardware")
    m.add_argument("--offload", action="store_true",
                   help="with --engine vllm: run the policy live: the engine's experts move to a "
                        "host store and a slot pool sized by the policy, whose runtime decides what "
                        "the engine holds")
    m.add_argument("--hardware", metavar="PROFILE",
                   help="hardware profile of the simulated stalls (shadow mode), and of vLLM's "
                        "hybrid schedule's cost model (default rtx-4090)")
    m.add_argument("--trace", metavar="OUT", help="also write the routing the engine ran to OUT "
                   "(.mpltrace or .jsonl): mplc replay of it gives the shadow's statistics")
    m.add_argument("--stream-slots", type=int, metavar="N",
                   help="with --engine vllm --offload: transient pool entries for streamed experts "
                        "(default: a few per routed expert on the CPU build without memory tiers; "
                        "on a GPU and with memory tiers a quarter of the device cache, at least "
                        "that, at most one per expert of a layer; fewer than the experts "
                        "computes a large step over groups of tokens)")


def run(args) -> int:
    from mpl.cli import engines
    from mpl.cli.errors import error, usage
    from mpl.cli.outputs import overwrite_problem

    prog = "mplc run"
    if args.max_new_tokens < 1:
        return usage(prog, "--max-new-tokens must be >= 1")
    if args.tensor_parallel_size is not None and args.tensor_parallel_size < 1:
        return usage(prog, f"--tensor-parallel-size must be >= 1, got {args.tensor_parallel_size}")
    if args.shadow and args.offload:
        return usage(prog, "--shadow and --offload are two modes (beside the engine, or live in "
                           "it): give one")
    engine = engines.ENGINES[args.engine]
    mode = engines.mode(engine, args)
    bad = engines.misused_option(engine, args, mode)
    if bad:
        return usage(prog, bad)
    why = overwrite_problem(args.trace, [("policy file", args.policy), ("model", args.model)],
                            "the trace", option="--trace")
    if why is not None:
        return error(prog, why)
    return engines.call(engine, "shadow" if mode == "shadow" else "run", args, prog)
