"""``mplc trace``: synthesize, record or convert routing traces.

* ``mplc trace synth --preset NAME [--steps N] [--seed S] [-o OUT] [knobs]``
* ``mplc trace convert IN OUT`` (formats by extension: .mpltrace native, .jsonl the original's;
  ``--from vllm-npy|vllm-response|sglang-response|sglang-distribution --model M``: an
  engine's own routing output, ``mpl.engine_formats``)
* ``mplc trace merge IN... -o OUT`` (traces of several engines of one model)
* ``mplc trace record [POLICY] --model PRESET_OR_PATH [--prompt TEXT] [--max-new-tokens N]
  -o OUT``, ``--engine ENGINE`` from the table ``mpl.cli.engines`` (``hf``, the default:
  transformers in this process, ``mpl.offload.cli``; ``vllm``: a vLLM engine in the Python
  vLLM is installed in, ``mpl.vllm.launch``)
* ``mplc trace info T`` (header and summary)
* ``mplc trace place T --slots N`` (per-layer frequency placement, printed as the cache
  block's ``pin layers = ...`` items: ``mpl.sim.placement``)
"""

from __future__ import annotations

import json
import sys

from mpl import shapes
from mpl.trace import has_predictions, has_weights


def add_arguments(parser) -> None:
    from mpl.cli.options import add_no_progress, add_policy, add_policy_name
    from mpl.traceio import MAX_STEPS

    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")

    p = sub.add_parser("synth", help="generate a synthetic trace for a model preset",
                       description="Generate a synthetic routing trace with the shape of a "
                                   "published MoE model. Deterministic for a seed.")
    p.add_argument("--preset", required=True, metavar="NAME",
                   help=f"model preset: {', '.join(shapes.PRESETS)}")
    p.add_argument("--steps", type=int, default=512,
                   help=f"decode steps, 1..{MAX_STEPS} (default 512)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output file (.mpltrace or .jsonl; default PRESET.mpltrace)")
    knobs = p.add_argument_group("knobs (default: the preset's, see docs/traces.md)")
    knobs.add_argument("--skew", type=float, help="Zipf exponent of expert popularity")
    knobs.add_argument("--skew-spread", type=float, help="per-layer variation of the exponent, [0, 1)")
    knobs.add_argument("--reuse", type=float, help="P(reuse an expert of the previous step), [0, 1]")
    knobs.add_argument("--affinity", type=float, help="P(follow the previous layer's affinity), [0, 1]")
    knobs.add_argument("--phase-len", type=int, help="steps between popularity shifts (0: none)")
    knobs.add_argument("--phase-shift", type=float, help="fraction of the ranking shifted per phase")
    knobs.add_argument("--pred-accuracy", type=float,
                       help="record lookahead predictions of this accuracy (0: none)")
    knobs.add_argument("--prompt-tokens", type=int, help="step 0 is a prefill of this many tokens")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    add_no_progress(p)
    p.set_defaults(_leaf=p)

    p = sub.add_parser("convert", help="convert between trace formats (by extension)",
                       description="Convert a trace: .mpltrace (native) <-> .jsonl (original).")
    p.add_argument("input", metavar="IN",
                   help="the trace to read (.mpltrace or .jsonl; with --from, an engine's output)")
    p.add_argument("output", metavar="OUT",
                   help="the trace to write; its extension chooses the format (.mpltrace or .jsonl)")
    p.add_argument("--weights", choices=("auto", "f16", "f32", "f64"),
                   help="float type of router weights in a native (.mpltrace) output (default "
                        "auto: the smallest exact one)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    eng = p.add_argument_group("engine-native input (docs/vllm.md)")
    eng.add_argument("--from", dest="from_format", metavar="FORMAT",
                     choices=("vllm-npy", "vllm-response", "sglang-response", "sglang-distribution"),
                     help="IN is an engine's routing output: vllm-npy, vllm-response, "
                          "sglang-response or sglang-distribution")
    eng.add_argument("--model", metavar="PRESET_OR_CONFIG",
                     help="with --from: the model's shape (which layers are MoE, experts, "
                          "top-k): a preset or a config.json (a trace's header names its own)")
    eng.add_argument("--prompt-tokens", type=int, metavar="N",
                     help="with --from (not sglang-distribution): prompt length of each "
                          "request (default: from the response)")
    add_no_progress(p)
    p.set_defaults(_leaf=p)

    p = sub.add_parser("merge", help="merge the traces of several engines (data parallelism)",
                       description="Merge traces of one model (e.g. one per data-parallel "
                                   "engine): steps one trace after the other.")
    p.add_argument("inputs", nargs="+", metavar="IN",
                   help="the traces to merge, in order (.mpltrace or .jsonl), all of one model")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the merged trace (.mpltrace or .jsonl)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    add_no_progress(p)
    p.set_defaults(_leaf=p)

    p = sub.add_parser("info", help="print a trace's header and summary",
                       description="Print a trace's header and summary (the whole file is read "
                                   "and its checksum verified).")
    p.add_argument("input", metavar="TRACE", help="the trace to describe (.mpltrace or .jsonl)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(_leaf=p)

    p = sub.add_parser("place", help="pin each layer's most used experts (per-layer placement)",
                       description="Count each MoE layer's expert accesses in a trace and print "
                                   "the N most accessed experts of every layer as per-layer pins "
                                   "of the cache block ('pin layers = a..b { experts = [...] }', "
                                   "consecutive layers with the same experts in one item), the "
                                   "placement KTransformers and Fiddler make from a profile. "
                                   "Paste them into a policy's cache block; its capacity must "
                                   "hold them (mplc check says so).")
    p.add_argument("input", metavar="TRACE", help="the trace to count (.mpltrace or .jsonl)")
    p.add_argument("--slots", type=int, required=True, metavar="N",
                   help="experts to pin per MoE layer (1 .. the trace's experts per layer)")
    p.add_argument("--indent", type=int, default=0, metavar="SPACES",
                   help="indent every line by this many spaces (8: inside a policy's cache block)")
    p.add_argument("--json", action="store_true",
                   help="print JSON: per layer its experts and access counts, and the .moe text")
    p.set_defaults(_leaf=p)

    p = sub.add_parser("record", help="record the routing of a live model (needs torch)",
                       description="Run a model and record its routing decisions.")
    add_policy(p, optional=True, old_option=True)
    p.add_argument("--model", required=True, metavar="PRESET_OR_PATH",
                   help="a tiny random-initialised model preset (e.g. tiny-olmoe, "
                        "tiny-mixtral) or a local model folder / config.json")
    p.add_argument("--prompt", default="The quick brown fox", help="prompt text")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate")
    add_policy_name(p)
    p.add_argument("--lookahead", type=int, metavar="N",
                   help="record pre-gating predictions (the next layers' routers applied to the "
                        "current hidden state) N layers ahead; 0: none (default: the policy's "
                        "distance when it pre-gates, else 1)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output trace file")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    add_no_progress(p)
    add_engine_arguments(p)
    p.set_defaults(_leaf=p)
    parser.set_defaults(_trace_parser=parser)


def add_engine_arguments(p) -> None:
    """--engine (the engines of ``mpl.cli.engines``), --vllm-python, --dtype and
    --tensor-parallel-size (``mplc trace record`` and ``mplc run``)."""
    from mpl.cli.engines import DEFAULT, ENGINES

    p.add_argument("--engine", choices=tuple(ENGINES), default=DEFAULT,
                   help="; ".join(f"{e.name}: {e.help}" for e in ENGINES.values()))
    p.add_argument("--vllm-python", metavar="PYTHON",
                   help="the Python of the environment vLLM is installed in (default: "
                        "$MPL_VLLM_PYTHON, else this Python when it can import vllm)")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"),
                   help="with --engine vllm: the engine's dtype (default auto: vLLM's choice, "
                        "bfloat16 on its CPU build)")
    p.add_argument("--tensor-parallel-size", type=int, metavar="N",
                   help="with --engine vllm: the engine's tensor-parallel size (default 1): N "
                        "ranks, each running the policy on its shard with the same decisions")


def summary(trace, path: str | None = None) -> dict:
    return summary_of(trace.header, path, dispatches=len(trace), steps=trace.num_steps,
                      weights=has_weights(trace.dispatches),
                      predictions=has_predictions(trace.dispatches))


def summary_of(h, path: str | None, *, dispatches: int, steps: int, weights: bool,
               predictions: bool) -> dict:
    """What `mplc trace` prints of a trace written: its header and counts."""
    return {"file": path, "model": h.model, "num_layers": h.num_layers,
            "moe_layers": len(h.moe_layers), "num_experts": h.num_experts, "top_k": h.top_k,
            "expert_bytes": h.expert_bytes, "source": h.source, "dispatches": dispatches,
            "steps": steps, "weights": weights, "predictions": predictions}


def details(trace, path: str, version: int | None) -> dict:
    """summary() plus what `mplc trace info` shows: format, size, MoE layer ids, tokens.
    ``version``: the native format version (None for JSONL)."""
    import os

    from mpl.sim.tracemodel import expert_size_source, with_model
    from mpl.trace import steps_and_tokens

    recorded = trace.header.expert_bytes
    trace = with_model(trace)              # a preset the header names gives the expert size
    info = summary(trace, path)
    info["expert_bytes_source"] = "trace header" if recorded else expert_size_source(trace.header)
    info.update(format="jsonl" if version is None else "native", version=version,
                bytes=os.path.getsize(path), moe_layer_ids=list(trace.header.moe_layers),
                tokens=steps_and_tokens(trace.dispatches)[1],
                stored_bits=trace.header.stored_bits,
                prefill_dispatches=(0 if hasattr(trace.dispatches, "columns")   # one token each
                                    else sum(1 for d in trace.dispatches if d.tokens > 1)),
                checksum=("verified" if version is not None and version >= 2 else
                          "none (version 1)" if version == 1 else "none (JSONL)"))
    return info


def format_details(info: dict) -> str:
    n = info["dispatches"]
    ids = info["moe_layer_ids"]
    span = (f"{ids[0]}..{ids[-1]}" if ids and ids == list(range(ids[0], ids[-1] + 1))
            else ", ".join(map(str, ids)))
    fmt = (f"native .mpltrace version {info['version']}" if info["format"] == "native"
           else "JSONL (moe-policylang)")
    eb = info["expert_bytes"]
    src = info.get("expert_bytes_source", "")
    lines = [
        f"{info['file']}: {fmt}, {info['bytes']:,} bytes"
        + (f" ({info['bytes'] / n:.1f} per dispatch)" if n else ""),
        f"  model        {info['model']}: {info['num_layers']} decoder layers, "
        f"{info['moe_layers']} MoE (ids {span})",
        f"  experts      {info['num_experts']} per layer, top-{info['top_k']}; "
        + (f"{eb:,} bytes each ({eb / 2**20:.1f} MiB"
           + (f", from the {src[len('model '):]} preset" if src.startswith("model ") else "") + ")"
           if eb else "expert size unknown (replay, sweep and tune take --model PRESET|config.json)")
        + (f"; stored at {info['stored_bits']} bits" if info.get("stored_bits") else ""),
        f"  dispatches   {n:,} in {info['steps']:,} steps, {info['tokens']:,} tokens"
        + (f" ({info['prefill_dispatches']:,} prefill dispatches)" if info["prefill_dispatches"] else ""),
        f"  weights      {'yes' if info['weights'] else 'none'}; predictions "
        f"{'yes' if info['predictions'] else 'none'}",
        f"  checksum     {info['checksum']}",
        f"  source       {info['source'] or '-'}",
    ]
    return "\n".join(lines)


def _print(info: dict, as_json: bool, verb: str) -> None:
    if as_json:
        print(json.dumps(info, indent=2))
    else:
        where = f" -> {info['file']}" if info.get("file") else ""
        print(f"{verb} {info['dispatches']} dispatches, {info['steps']} steps of {info['model']} "
              f"({info['moe_layers']} MoE layers x {info['num_experts']} experts, "
              f"top-{info['top_k']}){where}")


def run(args) -> int:
    from mpl import traceio
    from mpl.cli.errors import error, usage
    from mpl.cli.outputs import overwrite_problem

    cmd = getattr(args, "trace_command", None)
    if cmd is None:
        args._trace_parser.print_help()
        return 2
    prog = f"mplc trace {cmd}"
    try:
        if cmd == "synth":
            return _synth(args, traceio, prog)
        if cmd == "merge":
            from mpl.engine_formats import merge
            traceio.kind_of(args.output)
            why = overwrite_problem(args.output, [("input", p) for p in args.inputs],
                                    "the merged trace")
            if why is not None:
                return error(prog, why)
            trace = merge([traceio.load(p) for p in args.inputs], list(args.inputs))
            _save(traceio, trace, args.output, args=args, label="merge: writing")
            _print(summary(trace, args.output), args.json, "merged")
            return 0
        if cmd == "convert":
            from mpl import tracecols
            native = traceio.kind_of(args.output) == "native"
            bad = _convert_misuse(args, native)
            if bad is not None:
                return usage(prog, bad)
            why = overwrite_problem(args.output, [("input", args.input), ("model", args.model)],
                                    "the trace", option="OUT")
            if why is not None:
                return error(prog, why)
            # to .mpltrace, a file of like records is read and written as columns
            read = tracecols.load if native else traceio.load
            trace = _engine_input(args) if args.from_format else read(args.input)
            kw = {"weights": args.weights or "auto"} if native else {}
            _save(traceio, trace, args.output, args=args, label="convert: writing", **kw)
            _print(summary(trace, args.output), args.json, "converted")
            return 0
        if cmd == "info":
            from mpl import tracecols        # the whole file, verified; like records as columns
            trace, version = tracecols.load_versioned(args.input)
            info = details(trace, args.input, version)
            if args.json:
                print(json.dumps(info, indent=2))
            else:
                print(format_details(info))
            return 0
        if cmd == "place":
            return _place(args, prog)
        if cmd == "record":
            policy = args.policy or getattr(args, "policy_option", None)
            if args.tensor_parallel_size is not None and args.tensor_parallel_size < 1:
                return usage(prog, f"--tensor-parallel-size must be >= 1, got "
                                   f"{args.tensor_parallel_size}")
            from mpl.cli import engines

            engine = engines.ENGINES[args.engine]
            if policy and not engine.record_policy:
                able = [e.name for e in engines.ENGINES.values() if e.record_policy]
                return usage(prog, f"a policy needs --engine {' or '.join(able)} (it runs the "
                                   f"policy live while recording; {engine.name} records the "
                                   "routing only)")
            bad = engines.misused_option(engine, args)
            if bad:
                return usage(prog, bad)
            why = overwrite_problem(args.output, [("policy file", policy), ("model", args.model)],
                                    "the trace")
            if why is not None:
                return error(prog, why)
            args.policy = policy
            return engines.call(engine, "record", args, prog)
    except (traceio.TraceFormatError, ValueError) as e:
        return error(prog, str(e))
    except _WriteError as e:
        return error(prog, f"cannot write {e.path}: {e.reason}")
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        return error(prog, f"{where}{e.strerror or e}")
    return 2


def _place(args, prog: str) -> int:
    from mpl import tracecols
    from mpl.cli.errors import usage
    from mpl.sim.placement import place, to_moe

    if args.slots < 1:
        return usage(prog, f"--slots must be at least 1, got {args.slots}")
    if not 0 <= args.indent <= 64:
        return usage(prog, f"--indent must be 0..64 spaces, got {args.indent}")
    trace = tracecols.load(args.input)
    h = trace.header
    if args.slots > h.num_experts:
        return usage(prog, f"--slots {args.slots} is more than the {h.num_experts} experts per "
                           f"layer of {args.input}")
    result = place(trace, args.slots)
    text = to_moe(result, " " * args.indent)
    if args.json:
        print(json.dumps({"trace": args.input, "model": h.model, **result.to_dict(), "moe": text},
                         indent=2))
        return 0
    pad = " " * args.indent
    print(f"{pad}# the {args.slots} most accessed experts of each MoE layer of {h.model} in "
          f"{args.input} ({result.dispatches} dispatches): mplc trace place --slots {args.slots}")
    sys.stdout.write(text)
    return 0


def _engine_input(args):
    from mpl import engine_formats

    if not args.model:
        raise ValueError(f"--from {args.from_format} needs --model PRESET_OR_CONFIG (which layers "
                         "are MoE, the expert count and top-k)")
    try:
        shape = shapes.resolve(args.model)
    except shapes.ShapeError as e:
        raise ValueError(str(e)) from None
    return engine_formats.load(args.input, args.from_format, shape, prompt_tokens=args.prompt_tokens)


def _convert_misuse(args, native: bool) -> str | None:
    """Why an option given to ``mplc trace convert`` does not apply to this conversion (a
    usage error), or None: an option that would change nothing is refused, not ignored."""
    from mpl.engine_formats import PROMPT_FORMATS

    if args.from_format is None and args.model is not None:
        return ("--model goes with --from (the shape of an engine's routing output); a trace "
                "names its model in its header (replay, sweep and tune take --model for a trace "
                "whose header names no preset)")
    if args.prompt_tokens is not None:
        if args.from_format not in PROMPT_FORMATS:
            return (f"--prompt-tokens goes with --from {' or '.join(PROMPT_FORMATS)} (it splits "
                    f"each request into its prompt and generated tokens); "
                    + ("a trace's steps are split already" if args.from_format is None else
                       f"{args.from_format} records its own steps"))
        if args.prompt_tokens < 1:
            return f"--prompt-tokens must be at least 1, got {args.prompt_tokens}"
    if args.weights is not None and not native:
        return (f"--weights chooses the float type of a native (.mpltrace) output's router "
                f"weights; {args.output} is JSONL, whose weights are written as JSON numbers")
    return None


class _WriteError(Exception):
    def __init__(self, path: str, e: OSError) -> None:
        super().__init__(path)
        self.path, self.reason = path, e.strerror or str(e)


def _save(traceio, trace, out: str, *, args=None, label: str = "writing", **kw) -> None:
    """traceio.save (through mpl.fileio: a link is followed, a FIFO or device written
    through, a failure leaves no partial file) with a progress bar (unless --no-progress);
    an OSError becomes 'cannot write OUT'."""
    from mpl.cli.options import bar as progress_bar

    bar = progress_bar(args, len(trace.dispatches), label)
    try:
        traceio.save(trace, out, progress=bar.update if bar.on else None, **kw)
    except OSError as e:
        raise _WriteError(out, e) from None
    finally:
        bar.close()


def _synth(args, traceio, prog: str) -> int:
    from mpl.cli.errors import error, usage
    from mpl.cli.options import bar as progress_bar
    from mpl.sim import synth

    shape = shapes.preset(args.preset)
    if shape is None:
        return error(prog, f"unknown preset '{args.preset}': choose one of {', '.join(shapes.PRESETS)}")
    if not 1 <= args.steps <= traceio.MAX_STEPS:
        return usage(prog, f"--steps must be in 1..{traceio.MAX_STEPS} (a trace numbers its steps "
                           f"0..2^32-1: the native format's u32 step field), got {args.steps}")
    overrides = {n: getattr(args, n) for n in synth.KNOB_NAMES}
    knobs = synth.knobs_for(shape.name, **overrides)
    out = args.output or f"{shape.name}.mpltrace"
    traceio.kind_of(out)
    # made and written a step at a time: a trace of any length, in constant memory
    header, by_step = synth.synthesize_steps(shape, steps=args.steps, seed=args.seed, knobs=knobs)
    seen = {"dispatches": 0, "predictions": False}
    bar = progress_bar(args, max(args.steps, 1), "synth")

    def dispatches():
        for step, ds in enumerate(by_step):
            seen["dispatches"] += len(ds)
            seen["predictions"] = seen["predictions"] or any(d.predictions for d in ds)
            yield from ds
            if bar.on:
                bar.update(step + 1, args.steps)

    try:
        traceio.save_stream(header, dispatches(), out, weights=synth.WEIGHTS)
    except OSError as e:
        raise _WriteError(out, e) from None
    finally:
        bar.close()
    _print(summary_of(header, out, dispatches=seen["dispatches"], steps=args.steps, weights=True,
                      predictions=seen["predictions"]), args.json, "wrote")
    return 0
