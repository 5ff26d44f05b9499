"""GPU check for live expert offload in vLLM: one short script for a machine with CUDA and the
GPU build of vLLM (``pip install vllm``; a few minutes on one GPU).

A random-initialised Qwen3-MoE-shaped model (by default OLMoE-1B-7B's per-layer shape: 64
experts, top-8, hidden 2048, expert 1024; a few layers, bfloat16) is saved to a folder and
served by one vLLM engine (``PolicyRunner``, eager mode), greedy, ``--batch`` concurrent
requests:

1. the unmodified engine (every expert resident; mpl uninstalled from the workers): decode
   tokens/s and the reference token ids;
2. live offload with a cache of every expert: token ids (must equal 1: one pass, the same
   Triton kernel on the same rows) and tokens/s (the mechanism's own overhead);
3. live offload with the pool at ``--pool-fraction`` of the experts: token ids, tokens/s, hit
   rate, copies == loads, the pool's device bytes;
4. a second engine with vLLM's own ``--cpu-offload-gb`` set to the expert bytes that 3 keeps
   off the device (the same device memory for weights): tokens/s and token ids.

Routing is random (random weights): hit rates are not those of a trained model, and the JSON
says so. Prints a JSON summary; writes it to $OUT/gpu_check_vllm.json when $OUT is set.

    python benchmarks/gpu_check_vllm.py [--layers 4] [--pool-fraction 0.25] [--batch 8] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def build(folder: str, args) -> str:
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(
        "qwen3_moe", vocab_size=4096, hidden_size=args.hidden, intermediate_size=args.hidden * 2,
        moe_intermediate_size=args.inter, num_experts=args.experts, num_experts_per_tok=args.top_k,
        num_hidden_layers=args.layers, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
        decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
        max_position_embeddings=2048, torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() >= 2 and ("gate" in n or "experts" in n):
                p.normal_(0.0, 0.05)
    model.save_pretrained(folder)
    return folder


def prompts(batch: int) -> list[list[int]]:
    return [[(37 * i + 11 * j) % 4000 + 5 for j in range(32 + 8 * i)] for i in range(batch)]


def timed(llm, ins, tokens: int):
    from vllm import SamplingParams

    def once(n):
        sp = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
        t = time.perf_counter()
        outs = llm.generate(ins, sp, use_tqdm=False)
        return time.perf_counter() - t, [list(o.outputs[0].token_ids) for o in outs]

    once(2)
    t1, _ = once(1)
    tn, ids = once(tokens)
    decode = max(tn - t1, 1e-9)
    return {"decode_tokens_per_s": round(len(ins) * (tokens - 1) / decode, 2),
            "seconds": round(tn, 3)}, ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--inter", type=int, default=1024)
    ap.add_argument("--pool-fraction", type=float, default=0.25)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    args = ap.parse_args(argv)
    from vllm.inputs import TokensPrompt

    from mpl.vllm import PolicyRunner

    folder = build(os.path.join(tempfile.gettempdir(), "mpl-gpu-check-vllm"), args)
    ins = [TokensPrompt(prompt_token_ids=p) for p in prompts(args.batch)]
    total = args.layers * args.experts
    kw = dict(dtype="bfloat16", max_model_len=1024, seed=0, enable_prefix_caching=False,
              skip_tokenizer_init=True, gpu_memory_utilization=args.gpu_memory_utilization)
    out = {"model": {"layers": args.layers, "experts": args.experts, "top_k": args.top_k,
                     "hidden": args.hidden, "expert_intermediate": args.inter},
           "batch": args.batch, "tokens": args.tokens, "routing": "random weights: hit rates "
           "are not a trained model's", "rows": {}}
    rows = out["rows"]
    pool_bytes = total_bytes = None
    try:
        runner = PolicyRunner(model=folder, **kw)
        try:
            runner.llm.collective_rpc("mpl_stop")
            rows["resident"], ref = timed(runner.llm, ins, args.tokens)
            log(f"resident {rows['resident']}")
            for name, slots in (("offload_100", total),
                                ("offload_fraction", max(args.top_k, int(total * args.pool_fraction)))):
                runner.switch(f"policy p {{ cache {{ capacity = {slots}  eviction = lru }} }}",
                              offload=True)
                row, ids = timed(runner.llm, ins, args.tokens)
                _, rep = runner.collect()
                m, s = rep["offload"], rep["stats"]
                row.update(tokens_identical=ids == ref, cache_slots=m["cache_slots"],
                           pool_bytes=m["pool_bytes"], hit_rate=round(s["hit_rate"], 4),
                           copies_equal_loads=m["copies"] == s["loads"],
                           us_per_layer_call=round(m["us_per_layer_call"], 1),
                           stall_ms=round(s["stall_ms"], 2))
                rows[name] = row
                pool_bytes, total_bytes = m["pool_bytes"], m["expert_bytes_total"]
                log(f"{name} {row}")
        finally:
            runner.close()
        gb = max(0.0, (total_bytes - pool_bytes) / 2**30)
        import vllm

        llm = vllm.LLM(model=folder, cpu_offload_gb=gb, enforce_eager=True, **kw)
        try:
            row, ids = timed(llm, ins, args.tokens)
            row.update(cpu_offload_gb=round(gb, 3), tokens_identical=ids == ref)
            rows["vllm_cpu_offload_gb"] = row
            log(f"cpu_offload_gb {row}")
        finally:
            llm.llm_engine.engine_core.shutdown()
    except Exception:
        out["error"] = traceback.format_exc()[-3000:]
    base = rows.get("resident", {}).get("decode_tokens_per_s")
    if base:
        for name, row in rows.items():
            row["vs_resident"] = round(row["decode_tokens_per_s"] / base, 3)
    text = json.dumps(out, indent=2)
    print(text)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check_vllm.json"), "w") as f:
            f.write(text)
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main())
