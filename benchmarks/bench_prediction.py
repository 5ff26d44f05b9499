"""How well the prefetch predictors guess the next layer's experts, measured live on a trained
tiny MoE (benchmarks/models/tiny-moe-stdlib: learned routing) and on the same architecture
random-initialised, through ``mpl.load(policy).attach``
and ``model.generate`` (HuggingFace) and, with ``--engine vllm`` in a vLLM environment,
through vLLM's live offload (``mpl.vllm.PolicyRunner(..., offload=True)``).

Definitions (top-k = 2 of 8 experts, 4 MoE layers, 32 expert keys):

* **accuracy**: for every decode step (one token) and every MoE layer L > 0, the predictor's
  set for L made at layer L-1 of the same step (its first k candidates: the pre-gate's top-k
  for ``lookahead``, the k most probable above ``confidence`` for ``learned``, the most
  frequent for ``history``) against the experts L then selected: |predicted n actual| / k,
  averaged. Chance is k/E = 0.25. ``candidates``: how many the predictor offered (at most
  k); ``precision``: hits / candidates offered. ``prev step`` is the baseline "L selects what
  it selected at the previous decode step", measured on the same run.
  The predictor's candidates are replayed from the trace recorded in the same run (its
  routing, router weights and pre-gate predictions: what the live runtime was given); for
  ``learned`` the replayed predictor's final state must equal the live runtime's, so the
  candidates are the ones the live runtime had.
* **useful**: the runtime's ``prefetch_useful / prefetch_issued`` (prefetched keys used
  before they left the cache; prefetches of keys already resident are not issued).
* **hit rate**: the live runtime's hit rate with a shared 16-slot LRU cache (50% of the
  experts), against the same cache without prefetching (``demand``).

Prompts: slices of the model folder's ``heldout_sample.txt``; decoding greedy and/or sampled
at temperature 1 (seed i for prompt i); every policy of a model sees the same tokens.

    python benchmarks/bench_prediction.py [--decoding both] [--prompts 8] [--new-tokens 48]
    PYTHONPATH=. .venv-vllm/bin/python benchmarks/bench_prediction.py --engine vllm
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import train_tiny_moe as tm  # noqa: E402

CAPACITY = 16          # 50% of 4 MoE layers x 8 experts

POLICIES = {
    "demand": f"policy demand {{ cache {{ capacity = {CAPACITY} eviction = lru }} }}",
    "lookahead": (f"policy pregate {{ cache {{ capacity = {CAPACITY} eviction = lru }}\n"
                  "    prefetch { strategy = lookahead budget = 2 lookahead = 1 } }"),
    "learned": (f"policy learned {{ cache {{ capacity = {CAPACITY} eviction = lru }}\n"
                "    prefetch { strategy = learned budget = 2 lookahead = 1 } }"),
}


def prompts(n: int, length: int, folder: str = tm.MODEL_DIR) -> list[list[int]]:
    """``n`` prompts of ``length`` bytes from the model folder's held-out slice, evenly
    spaced."""
    with open(os.path.join(folder, "heldout_sample.txt"), "rb") as f:
        sample = f.read()
    stride = max(length, (len(sample) - length) // max(1, n))
    out = [tm.encode(sample[i * stride:i * stride + length]) for i in range(n)]
    if any(len(p) < length for p in out):
        raise ValueError(f"the sample ({len(sample)} bytes) is too short for {n} x {length} bytes")
    return out


# ---------------------------------------------------------------------------- the predictors
def candidates(trace, policy):
    """``(step, source layer, target layer, candidates)`` for every dispatch of ``trace`` and
    target ``L+1 .. L+lookahead``, as the policy's runtime proposes them from this routing
    (mpl.runtime.core ``_proposals``, before the budget and the residency filter), and the
    predictor (a learned one, for its state; else None)."""
    from mpl.runtime.prefetch import History, learned
    from mpl.runtime.routing import distinct
    from mpl.trace import records_of

    ir = policy.ir
    strategy = ir.get("prefetch.strategy")
    if strategy not in ("history", "lookahead", "learned"):
        raise ValueError(f"no predictor to replay for prefetch strategy {strategy!r}")
    h = trace.header
    L, E = len(h.moe_layers), h.num_experts
    ahead = int(ir.get("prefetch.lookahead"))
    hist = (History(L, int(ir.get("prefetch.history_window")), E)
            if strategy in ("history", "lookahead") else None)
    lrn = (learned(L, E, int(ir.get("prefetch.context_layers")),
                   int(ir.get("prefetch.history_window")), float(ir.get("prefetch.confidence")),
                   ahead) if strategy == "learned" else None)
    budget = int(ir.get("prefetch.budget"))
    out = []
    for layer, experts, weights, _tokens, step, predictions, _ in records_of(trace.dispatches):
        ex, ws = distinct(experts, weights)
        if weights is None:
            ws = None
        if hist is not None:
            hist.observe(layer, ex)
        if lrn is not None:
            lrn.observe(layer, step, ex, ws, predictions)
        for d in range(1, min(ahead, L) + 1):
            t = (layer + d) % L
            if lrn is not None:
                cand = list(lrn.predict(layer, step, d))
            elif strategy == "lookahead" and predictions and t in predictions:
                cand = list(predictions[t])
            else:
                cand = hist.top(t, budget)
            out.append((step, layer, t, cand))
    return out, lrn


def accuracy(trace, cands, k: int) -> dict:
    """Accuracy as the module docstring defines it, the mean candidates offered, and the
    previous-decode-step baseline on the same routing."""
    actual = {(d.step, d.layer): set(d.distinct()) for d in trace.dispatches if d.tokens == 1}
    got, n, offered = 0, 0, 0
    for step, src, t, cand in cands:
        if t != src + 1 or (step, src) not in actual or (step, t) not in actual:
            continue
        got += len(set(cand[:k]) & actual[(step, t)])
        offered += min(len(cand), k)
        n += 1
    prev, m = 0.0, 0
    for (step, layer), now in actual.items():
        before = actual.get((step - 1, layer))
        if layer > 0 and before is not None:
            prev += len(before & now) / k
            m += 1
    return {"accuracy": got / (n * k) if n else float("nan"), "predictions": n,
            "offered": offered / n if n else float("nan"),
            "precision": got / offered if offered else float("nan"),
            "prev_step": prev / m if m else float("nan")}


def usage_entropy(trace) -> float:
    """How skewed the routing is: the entropy (bits) of each MoE layer's expert usage over the
    run (every token's top-k), averaged over layers; log2(E) is uniform."""
    import math
    per: dict = {}
    for d in trace.dispatches:
        c = per.setdefault(d.layer, {})
        for row in d.experts:
            for e in row:
                c[e] = c.get(e, 0) + 1
    hs = []
    for c in per.values():
        n = sum(c.values())
        hs.append(-sum(v / n * math.log2(v / n) for v in c.values()))
    return sum(hs) / len(hs) if hs else float("nan")


def _row(stats: dict) -> dict:
    return {"hit_rate": stats["hit_rate"], "prefetch_issued": stats["prefetch_issued"],
            "prefetch_useful": stats["prefetch_useful"],
            "useful": (stats["prefetch_useful"] / stats["prefetch_issued"]
                       if stats["prefetch_issued"] else float("nan"))}


# ---------------------------------------------------------------------------- HuggingFace
def _generate_kw(sample: bool) -> dict:
    """Greedy, or plain sampling at temperature 1 (no top-k/top-p cut)."""
    if sample:
        return dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    return dict(do_sample=False)


def run_hf(model, prompt_ids, new_tokens: int, name: str, sample: bool = False):
    """(policy, live stats, recorded trace, live learned-predictor state or None) of policy
    ``name`` attached to ``model`` over the generation of every prompt: greedy, or sampled
    with seed i for prompt i (attach computes the same logits as the model alone, so every
    policy sees the same tokens)."""
    import torch

    import mpl
    from mpl.offload.recorder import Recorder

    policy = mpl.loads(POLICIES[name])
    h = policy.attach(model, device="cpu")
    try:
        with Recorder(model) as rec, torch.no_grad():
            for i, p in enumerate(prompt_ids):
                torch.manual_seed(i)
                model.generate(torch.tensor([p]), max_new_tokens=new_tokens,
                               min_new_tokens=new_tokens, pad_token_id=tm.PAD,
                               **_generate_kw(sample))
        stats = h.get_stats()
        state = h.runtime.learned.dump() if h.runtime.learned is not None else None
    finally:
        h.detach()
    return policy, stats, rec.trace(), state


def measure_hf(model, prompt_ids, new_tokens: int, predictors=("lookahead", "learned"),
               sample: bool = False) -> dict:
    """predictor -> row (accuracy, useful, hit rate; ``demand``: the hit rate without
    prefetching) for one model, live through attach."""
    _, demand, trace, _ = run_hf(model, prompt_ids, new_tokens, "demand", sample)
    rows = {"demand": {"hit_rate": demand["hit_rate"], "entropy": usage_entropy(trace)}}
    k = model.config.num_experts_per_tok
    for name in predictors:
        policy, stats, trace, state = run_hf(model, prompt_ids, new_tokens, name, sample)
        cands, lrn = candidates(trace, policy)
        if state is not None and lrn.dump() != state:
            raise RuntimeError("the replayed learned predictor differs from the live one: its "
                               "candidates would not be the live runtime's")
        rows[name] = {**_row(stats), **accuracy(trace, cands, k)}
    return rows


# ---------------------------------------------------------------------------- vLLM
def measure_vllm(folder: str, prompt_ids, new_tokens: int,
                 predictors=("lookahead", "learned"), decodings=("greedy",)) -> dict:
    """decoding -> the same rows through vLLM's live offload (one engine;
    PolicyRunner.switch installs each policy). The routing capture pre-gates for these
    policies (``mpl.vllm.capture.Capture.pregate``: the next layer's gate and router on each
    layer's hidden states), as the HuggingFace engine does."""
    import mpl
    from mpl.vllm import PolicyRunner

    runner = PolicyRunner(model=folder, dtype="float32", max_model_len=512, seed=0,
                          enable_prefix_caching=False, skip_tokenizer_init=True)
    out = {}
    try:
        for decoding in decodings:
            rows = out[decoding] = {}
            for name in ("demand",) + tuple(predictors):
                runner.switch(POLICIES[name], offload=True)
                stats = trace = None
                for i, p in enumerate(prompt_ids):   # one request at a time, as the HF runs
                    kw = dict(temperature=1.0, seed=i) if decoding == "sample" else {}
                    res = runner.generate([p], max_tokens=new_tokens, ignore_eos=True,
                                          detokenize=False, **kw)
                    stats, trace = res.stats, res.trace
                if name == "demand":
                    rows[name] = {"hit_rate": stats["hit_rate"], "entropy": usage_entropy(trace)}
                    continue
                policy = mpl.loads(POLICIES[name])
                again = mpl.replay(policy, trace, belady=False).stats
                for key in ("accesses", "prefetch_issued", "prefetch_useful"):
                    if again[key] != stats[key]:
                        raise RuntimeError(f"a replay of the vLLM trace differs from the live run "
                                           f"in {key}: the replayed candidates would not be the "
                                           "live ones")
                cands, _ = candidates(trace, policy)
                rows[name] = {**_row(stats), **accuracy(trace, cands, trace.header.top_k),
                              "pregate": any(d.predictions for d in trace.dispatches)}
    finally:
        runner.close()
    return out


# ---------------------------------------------------------------------------- the table
def table(results: dict) -> str:
    """Markdown: one row per (model, engine, predictor)."""
    lines = ["Expert usage entropy (bits; uniform = log2 8 = 3): " + ", ".join(
        f"{m} {dec} {rows['demand']['entropy']:.3f}" for (m, _, dec), rows in results.items()), "",
             "| model | engine | decoding | predictor | accuracy (decode, L>0) | candidates "
             "| precision | prev step | prefetches | useful | hit rate @50% | demand only |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, engine, decoding), rows in results.items():
        for name, r in rows.items():
            if name == "demand":
                continue
            label = name + (" (history fallback)" if r.get("pregate") is False
                            and name == "lookahead" else "")
            lines.append(
                f"| {model} | {engine} | {decoding} | {label} | {r['accuracy']:.3f} "
                f"| {r['offered']:.2f} | {r['precision']:.3f} | {r['prev_step']:.3f} | {r['prefetch_issued']} | {r['useful']:.3f} "
                f"| {r['hit_rate']:.3f} | {rows['demand']['hit_rate']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--decoding", choices=("greedy", "sample", "both"), default="both",
                    help="greedy, or sampling at temperature 1 with seed i for prompt i")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-bytes", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--model", default=tm.MODEL_DIR, help="the trained model's folder")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    a = ap.parse_args(argv)
    ids = prompts(a.prompts, a.prompt_bytes, a.model)
    decodings = ("greedy", "sample") if a.decoding == "both" else (a.decoding,)
    results = {}
    if a.engine == "hf":
        import torch
        torch.set_num_threads(1)
        for label, model in (("trained", tm.load(a.model)), ("random", tm.random_model(0))):
            for dec in decodings:
                results[(label, "hf attach", dec)] = measure_hf(model, ids, a.new_tokens,
                                                                sample=dec == "sample")
    else:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            tm.random_model(0).save_pretrained(tmp)
            for label, folder in (("trained", a.model), ("random", tmp)):
                for dec, rows in measure_vllm(folder, ids, a.new_tokens,
                                              decodings=decodings).items():
                    results[(label, "vllm offload", dec)] = rows
    print(f"{a.prompts} prompts x {a.prompt_bytes} bytes of held-out text, {a.new_tokens} new "
          f"tokens each; chance accuracy k/E = 0.25")
    print(table(results))
    if a.json:
        print(json.dumps({"|".join(key): rows for key, rows in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
