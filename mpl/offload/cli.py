"""The HuggingFace engine's command-line entry points (the ``hf`` row of
``mpl.cli.engines``): ``mplc run`` with the policy live (``run``) or in shadow mode beside
the unchanged model (``shadow``), ``mplc trace record`` (``record``), and the ``preflight``
both make first. Everything runs in this process (torch and transformers).

``--model`` takes a tiny preset (random weights, built offline; the prompt becomes token
ids by its UTF-8 bytes), a local model folder or a ``config.json`` (random-initialised from
it); nothing is downloaded, and a model too large for the host's available memory is refused
before it is built (``mpl.offload.loading.check_fits``).
"""

from __future__ import annotations

import json
import os
import sys
import time

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog"


# ---------------------------------------------------------------------------- preflight
def preflight(args, prog: str) -> int | None:
    """The policy (if any) loaded, and checked against the model's shape when the shape can
    be read without building the model (a model folder or a ``config.json``: a large model
    is not loaded for nothing); ``attach`` checks it again on the built model. A misfit is
    raised (:class:`mpl.PolicyDoesNotFit`, printed by ``mpl.cli.engines.call``)."""
    from mpl.cli.options import load_policy

    from .errors import PREFLIGHT, AttachError

    spec = getattr(args, "policy", None)
    if not spec:
        return None
    policy, rc = load_policy(spec, getattr(args, "policy_name", None), prog)
    if policy is None:
        return rc
    args.loaded_policy = policy         # run, shadow and record take it from here
    model = getattr(args, "model", None) or ""
    if model and os.path.exists(model):
        try:
            shape = PREFLIGHT.model_shape(model)
        except AttachError:
            return None                 # loading the model says what is wrong with it
        PREFLIGHT.check(policy, shape)
    return None


def _policy(args, prog: str):
    """(policy, None) or (None, exit status): the one :func:`preflight` loaded."""
    policy = getattr(args, "loaded_policy", None)
    if policy is not None:
        return policy, None
    from mpl.cli.options import load_policy
    return load_policy(args.policy, getattr(args, "policy_name", None), prog)


def torch_threads() -> None:
    import torch

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))


def _load(args, prog: str):
    """(model, tokenizer) or (None, exit status)."""
    from mpl.cli.errors import error

    from .loading import ModelLoadError, load_model

    torch_threads()
    try:
        return load_model(args.model, experts_implementation=getattr(args, "experts_implementation", None))
    except ModelLoadError as e:
        return None, error(prog, str(e))


# ---------------------------------------------------------------------------- generation
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
                                          "pool_slots", "pool_bytes", "device", "modes",
                                          "multi_pass_dispatches", "host_window_dispatches",
                                          "host_window_streamed")
                     if k in m}
    return out


def _checked_outputs(args, prog: str) -> int | None:
    """A bad ``--trace`` extension or ``--hardware`` profile fails before the model is built."""
    from mpl import traceio
    from mpl.cli.errors import error
    from mpl.timemodel import hardware as hw

    try:
        if getattr(args, "trace", None):
            traceio.kind_of(args.trace)
        if getattr(args, "hardware", None):
            hw.resolve(args.hardware)
    except (traceio.TraceFormatError, hw.HardwareError) as e:
        return error(prog, str(e))
    return None


def _save_trace(trace, out: str, prog: str) -> int | None:
    from mpl import traceio
    from mpl.cli.errors import error

    try:
        traceio.save(trace, out)
    except OSError as e:
        return error(prog, f"cannot write {out}: {e.strerror or e}")
    return None


def _generate_with(args, model, tok):
    from mpl.cli.options import bar as progress_bar

    prompt = args.prompt
    ids = tok.encode(prompt)
    seq, _logits, dt = generate(model, ids, args.max_new_tokens,
                                progress_bar(args, args.max_new_tokens, "generate"))
    return seq[0, len(ids):].tolist(), dt


# ---------------------------------------------------------------------------- mplc run
def run(args, prog: str = "mplc run") -> int:
    """``mplc run POLICY --model M``: attach the policy, generate greedily, print the text
    and what the mechanism did (``--trace OUT``: also the routing, recorded while it ran)."""
    from mpl.cli.errors import error

    from .errors import AttachError
    from .hf import attach
    from .recorder import Recorder

    rc = _checked_outputs(args, prog)
    if rc is not None:
        return rc
    policy, rc = _policy(args, prog)
    if policy is None:
        return rc
    from .loading import loads_without_experts, tokenizer_for

    without_experts = loads_without_experts(args.model, policy)
    try:
        if without_experts:
            # the experts are never loaded: the disk tier reads them from the checkpoint
            from .skeleton import from_pretrained

            torch_threads()
            handle = from_pretrained(args.model, policy, device=args.device,
                                     experts_implementation=getattr(args, "experts_implementation", None))
            model, tok = handle.model, tokenizer_for(args.model)
        else:
            model, tok = _load(args, prog)
            if model is None:
                return tok
            handle = attach(policy, model, device=args.device)
    except AttachError as e:
        if isinstance(e, _does_not_fit()):
            raise
        return error(prog, str(e))
    rec = Recorder(model).__enter__() if getattr(args, "trace", None) else None
    try:
        new, dt = _generate_with(args, model, tok)
    finally:
        if rec is not None:
            rec.__exit__(None, None, None)
    stats = handle.get_stats()
    handle.detach()
    trace = rec.trace(source=f"recorded by mplc run, max_new_tokens={args.max_new_tokens}") if rec else None
    if trace is not None and _save_trace(trace, args.trace, prog) is not None:
        return 1
    report = {"engine": "hf", "mode": "live", "policy": policy.name, "model": args.model,
              "experts_loaded": not without_experts,
              "prompt": args.prompt, "tokens": new, "text": tok.decode(new), "seconds": dt,
              "tokens_per_s": len(new) / dt if dt > 0 else None, "stats": brief_stats(stats),
              "per_layer": stats.get("per_layer", []), "adapt_log": stats.get("adapt_log", [])}
    if trace is not None:
        report["trace"] = args.trace
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    s = report["stats"]
    m = s["mechanism"]
    print(f"policy {policy.name} on {args.model} ({len(handle.layers)} MoE layers, "
          f"{m.get('pool_slots')} device slots on {m.get('device')})")
    if without_experts:
        print(f"experts never loaded: the disk tier reads them from {args.model}'s "
              f".safetensors files")
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
    if trace is not None:
        print(f"trace: {len(trace)} dispatches over {trace.num_steps} steps -> {args.trace}")
    return 0


def shadow(args, prog: str = "mplc run") -> int:
    """``mplc run POLICY --model M --shadow [--hardware H] [--trace OUT]``: the policy in
    shadow mode beside the unchanged model (``mpl.offload.shadow``); prints the model's own
    output and the policy's statistics, stalls simulated on the hardware profile — what
    ``mplc replay POLICY --trace OUT --hardware H`` reports for the routing recorded."""
    from mpl.cli.errors import error

    from .errors import AttachError
    from .shadow_mode import shadow as shadow_beside

    rc = _checked_outputs(args, prog)
    if rc is not None:
        return rc
    policy, rc = _policy(args, prog)
    if policy is None:
        return rc
    model, tok = _load(args, prog)
    if model is None:
        return tok
    device = getattr(args, "device", None)
    if device:
        try:
            model.to(device)
        except (RuntimeError, TypeError, ValueError, AssertionError) as e:
            return error(prog, f"--device {device}: {e}")
    try:
        handle = shadow_beside(policy, model, hardware=args.hardware,
                               record=bool(getattr(args, "trace", None)))
    except AttachError as e:
        if isinstance(e, _does_not_fit()):
            raise
        return error(prog, str(e))
    try:
        new, dt = _generate_with(args, model, tok)
    finally:
        handle.detach()
    rep = handle.report()
    trace = handle.trace() if getattr(args, "trace", None) else None
    if trace is not None and _save_trace(trace, args.trace, prog) is not None:
        return 1
    s = rep["stats"]
    report = {"engine": "hf", "mode": "shadow", "policy": policy.name, "model": args.model,
              "prompt": args.prompt, "tokens": new, "text": tok.decode(new), "seconds": dt,
              "tokens_per_s": len(new) / dt if dt > 0 else None, "hardware": rep["hardware"]["name"],
              "dispatches": rep["dispatches"], "stats": s, "sim": rep["sim"]}
    if trace is not None:
        report["trace"] = args.trace
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"policy {policy.name} in shadow mode beside {args.model} ({len(handle.layers)} MoE "
          f"layers, unchanged), simulated on {rep['hardware']['name']}")
    print(f"prompt: {args.prompt!r}")
    print(f"output: {report['text']!r}")
    print(f"tokens: {new}")
    print(f"accesses {s['accesses']}  hits {s['hits']}  hit rate {s['hit_rate']:.3f}  "
          f"loads {s['loads']}  evictions {s['evictions']}  prefetch accuracy "
          f"{s['prefetch_accuracy']:.3f}  stall {s['stall_ms']:.2f} ms (simulated)")
    from mpl.adapt_log import lines as adapt_lines
    for line in adapt_lines(s.get("adapt_log") or []):
        print(line)
    if trace is not None:
        print(f"trace: {len(trace)} dispatches over {trace.num_steps} steps -> {args.trace}")
    return 0


def _does_not_fit():
    from mpl.mechanism.preflight import PolicyDoesNotFit
    return PolicyDoesNotFit


# ---------------------------------------------------------------------------- mplc trace record
def record(args, prog: str = "mplc trace record") -> int:
    """``mplc trace record [POLICY] --model M [--prompt P] [--max-new-tokens N]
    [--lookahead N] -o FILE``. With a policy, it is attached while the model runs (the
    trace is its run: a replay of it gives the live statistics), and the pre-gating
    predictions are recorded at the policy's lookahead distance when it pre-gates;
    ``--lookahead N`` records them N layers ahead (0: none; default 1 without a policy)."""
    from mpl import traceio

    from .errors import AttachError
    from .recorder import record as record_routing

    out = getattr(args, "output", None) or getattr(args, "o", None)
    if not out:
        print(f"{prog}: error: give the output file with -o FILE", file=sys.stderr)
        return 2
    max_new = getattr(args, "max_new_tokens", 16)
    max_new = 16 if max_new is None else int(max_new)
    if max_new < 1:
        print(f"{prog}: error: --max-new-tokens must be >= 1", file=sys.stderr)
        return 2
    lookahead = getattr(args, "lookahead", None)
    if lookahead is not None and lookahead < 0:
        print(f"{prog}: error: --lookahead must be >= 0 (0: no predictions)", file=sys.stderr)
        return 2
    try:
        traceio.kind_of(out)          # a bad extension fails before the model runs
    except traceio.TraceFormatError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    policy = getattr(args, "loaded_policy", None)
    if policy is None and getattr(args, "policy", None):
        import mpl
        try:
            policy = mpl.load(args.policy, policy=getattr(args, "policy_name", None))
        except (mpl.PolicyError, OSError, ValueError) as e:
            print(f"{prog}: error: {args.policy}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 1
    from .loading import ModelLoadError, load_model
    try:
        model, tok = load_model(args.model)
    except ModelLoadError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    prompt = getattr(args, "prompt", None) or DEFAULT_PROMPT
    ids = tok.encode(prompt)
    handle = None
    try:
        if policy is not None:
            handle = policy.attach(model)
        trace = record_routing(model, ids, max_new_tokens=max_new, lookahead=lookahead)
    except AttachError as e:
        if isinstance(e, _does_not_fit()):
            raise
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    finally:
        if handle is not None:
            handle.detach()
    try:
        traceio.save(trace, out)
    except OSError as e:
        print(f"{prog}: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        h = trace.header
        print(json.dumps({"output": out, "dispatches": len(trace), "steps": trace.num_steps,
                          "model": h.model, "moe_layers": list(h.moe_layers), "num_experts": h.num_experts,
                          "top_k": h.top_k, "expert_bytes": h.expert_bytes, "source": h.source}))
        return 0
    print(f"recorded {len(trace)} dispatches over {trace.num_steps} steps "
          f"({trace.header.num_experts} experts x {trace.header.num_moe_layers} MoE layers, "
          f"top-{trace.header.top_k}) -> {out}")
    return 0
