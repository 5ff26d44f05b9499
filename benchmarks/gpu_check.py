"""GPU check for the live mechanism: one short script for a machine with CUDA (< 8 minutes).

1. Bit-identity on CUDA: for every tiny preset and every experts implementation (eager,
   batched_mm, grouped_mm; generate() itself switches grouped_mm to batched_mm for decode on
   CUDA), gpu_only policies with capacity 1, top-k and every expert give greedy tokens and
   logits identical to the unmodified model on the same GPU; one cpu_fallback policy gives
   identical tokens (logits within tolerance). Also reports whether CUDA grouped_mm with
   expert ids remapped to slots is bit-identical (the open question of the notes).
2. Speed under a memory cap: a larger random-initialised model with the per-layer shape of a
   real config (OLMoE-1B-7B by default: 64 experts, top-8, hidden 2048, expert 1024; the
   number of layers is reduced to fit the time budget), decode tokens/s with
   ``mpl.auto_attach(model, memory=CAP)`` versus accelerate ``device_map="auto"`` with
   ``max_memory={0: CAP}``, plus the peak device memory of each.

    python benchmarks/gpu_check.py [--layers 8] [--cap-fraction 0.3] [--skip-speed]

Prints a JSON summary; writes it to $OUT/gpu_check.json when $OUT is set.
``--device cpu --layers 2 --hidden 256`` runs the same code on the CPU (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch

T0 = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - T0


def log(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- part 1
def gen(model, ids, n):
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def bit_identity(device: str, families, impls) -> dict:
    import mpl
    from mpl.offload.hf import attach, discover
    from mpl.offload.models import build_model, encode

    ids = torch.tensor([encode("GPU bit-identity check for every experts implementation.")], device=device)
    results = []
    for fam in families:
        for impl in impls:
            # bf16 on CUDA (what models run in there; CUDA grouped_mm wants it), fp32 on the CPU
            dtype = torch.bfloat16 if device.startswith("cuda") else None
            model = build_model(fam, experts_implementation=impl, dtype=dtype).to(device)
            try:
                ref_seq, ref_logits = gen(model, ids, 6)
            except Exception as e:      # the unmodified model itself cannot run this mode here
                results.append({"family": fam, "impl": impl, "policy": "baseline", "ok": True,
                                "skipped": f"baseline fails: {type(e).__name__}: {e}"})
                log(f"bit-identity {fam} {impl}: baseline fails ({e}); skipped")
                continue
            layers = discover(model)
            L, E, K = len(layers), layers[0].num_experts, layers[0].top_k
            cases = [("gpu_only cap 1", "cache { capacity = 1 }", True),
                     (f"gpu_only cap {K}", f"cache {{ capacity = {K} }}", True),
                     ("gpu_only prefetch", f"cache {{ capacity = {E} }}\nprefetch {{ strategy = lookahead\n budget = {K} }}", True),
                     ("gpu_only all", f"cache {{ capacity = {L * E} }}", True),
                     ("cpu_fallback cap 3", "cache { capacity = 3 }\nschedule { mode = cpu_fallback }", False)]
            for label, body, exact in cases:
                row = {"family": fam, "impl": impl, "policy": label}
                try:
                    h = attach(mpl.loads("version 1\npolicy p {\n" + body + "\n}\n"), model, device=device)
                    seq, logits = gen(model, ids, 6)
                    st = h.get_stats()
                    h.detach()
                    row["tokens_equal"] = bool(torch.equal(seq, ref_seq))
                    row["logits_equal"] = bool(torch.equal(logits, ref_logits))
                    row["max_abs_logit_diff"] = float((logits - ref_logits).abs().max())
                    row["modes"] = st["mechanism"]["modes"]
                    row["copies_eq_loads"] = st["mechanism"]["copies"] == st["loads"]
                    row["stall_ms"] = st["mechanism"]["stall_ms"]
                    row["ok"] = row["tokens_equal"] and row["copies_eq_loads"] and (row["logits_equal"] or not exact)
                except Exception as e:          # report and go on: this is a check script
                    row["ok"] = False
                    row["error"] = f"{type(e).__name__}: {e}"
                    row["traceback"] = traceback.format_exc(limit=4)
                results.append(row)
            after_seq, after_logits = gen(model, ids, 6)
            results.append({"family": fam, "impl": impl, "policy": "after detach",
                            "ok": bool(torch.equal(after_seq, ref_seq) and torch.equal(after_logits, ref_logits))})
            log(f"bit-identity {fam} {impl}: {sum(r['ok'] for r in results[-6:])}/6 ok")
            del model
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    grouped = [r for r in results if r["impl"] == "grouped_mm" and r["policy"].startswith("gpu_only")]
    return {"cases": len(results), "failed": [r for r in results if not r["ok"]],
            "all_ok": all(r["ok"] for r in results),
            "grouped_mm_remap_bit_identical": all(r.get("logits_equal", False) for r in grouped),
            "rows": results}


# ---------------------------------------------------------------------------- part 2
OLMOE = dict(model_type="olmoe", vocab_size=50304, hidden_size=2048, intermediate_size=1024,
             num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16, num_experts=64,
             num_experts_per_tok=8, max_position_embeddings=4096, rms_norm_eps=1e-5,
             pad_token_id=1, eos_token_id=None, tie_word_embeddings=False)


def build_big(layers: int, hidden: int | None, dtype) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM
    kw = dict(OLMOE, num_hidden_layers=layers)
    if hidden:
        kw.update(hidden_size=hidden, intermediate_size=hidden // 2, num_attention_heads=8,
                  num_key_value_heads=8, vocab_size=4096)
    cfg = AutoConfig.for_model(**kw)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model = model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=g)
        for _n, b in model.named_buffers():
            if b.is_floating_point() and b.numel() and not torch.isfinite(b).all():
                b.zero_()
    # buffers created on meta (rotary inv_freq) are uninitialised after to_empty: rebuild
    # those modules on the CPU and take their buffers
    for name, m in list(model.named_modules()):
        if hasattr(m, "inv_freq") and hasattr(m, "config"):
            fresh = type(m)(m.config)
            for bname, buf in fresh.named_buffers(recurse=False):
                m._buffers[bname] = buf
            if hasattr(fresh, "attention_scaling"):
                m.attention_scaling = fresh.attention_scaling
    model.eval()
    model.generation_config.pad_token_id = 1
    model.generation_config.eos_token_id = None
    return model


def decode_tps(model, device, prompt_len=16, new=24) -> tuple[float, float]:
    ids = torch.randint(2, 4000, (1, prompt_len), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=1, do_sample=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t_prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=new, do_sample=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t_all = time.perf_counter() - t0
    decode = max(t_all - t_prefill, 1e-9)
    return (new - 1) / decode, t_prefill


def speed(device: str, layers: int, hidden: int | None, cap_fraction: float, budget_s: float) -> dict:
    import mpl
    dtype = torch.bfloat16
    log(f"building the {layers}-layer OLMoE-shaped model (random init)")
    model = build_big(layers, hidden, dtype)
    expert_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if ".experts." in n)
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    skeleton = total - expert_bytes
    from mpl.offload.auto import HEADROOM
    from mpl.offload.hf import discover
    ls = discover(model)
    one = expert_bytes // (len(ls) * ls[0].num_experts)
    # skeleton + the transient buffer (one layer's experts + the zero entry) + a share of the
    # experts, plus the headroom auto_attach keeps for activations; accelerate gets the same cap
    cap = int((skeleton + (ls[0].num_experts + 1) * one + cap_fraction * expert_bytes) / (1 - HEADROOM))
    out = {"model": f"OLMoE-1B-7B shape, {layers} layers" + (f", hidden {hidden}" if hidden else ""),
           "total_gib": total / 2**30, "expert_gib": expert_bytes / 2**30, "cap_gib": cap / 2**30}
    log(f"model {total / 2**30:.2f} GiB ({expert_bytes / 2**30:.2f} GiB experts); cap {cap / 2**30:.2f} GiB")

    # --- mpl.auto_attach under the cap
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    h = mpl.auto_attach(model, memory=cap, device=device)
    out["mpl_policy"] = h.policy_text
    out["mpl_reason"] = h.reason
    tps, prefill = decode_tps(model, device)
    st = h.get_stats()
    out["mpl_decode_tok_s"] = tps
    out["mpl_prefill_s"] = prefill
    out["mpl_hit_rate"] = st["hit_rate"]
    out["mpl_stall_ms"] = st["mechanism"]["stall_ms"]
    out["mpl_copies"] = st["mechanism"]["copies"]
    if device.startswith("cuda"):
        out["mpl_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    h.detach()
    log(f"mpl: {tps:.2f} tok/s, hit rate {st['hit_rate']:.3f}")
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    if elapsed() > budget_s:
        out["accelerate"] = "skipped: time budget"
        return out

    # --- accelerate device_map="auto" under the same cap
    try:
        from accelerate import dispatch_model, infer_auto_device_map
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            max_memory = {0: cap, "cpu": 2 * total}
        else:
            out["accelerate"] = "skipped: needs CUDA"
            return out
        dmap = infer_auto_device_map(model, max_memory=max_memory,
                                     no_split_module_classes=model._no_split_modules, dtype=dtype)
        dispatch_model(model, device_map=dmap)
        tps_a, prefill_a = decode_tps(model, device, new=12)
        out["accelerate_decode_tok_s"] = tps_a
        out["accelerate_prefill_s"] = prefill_a
        out["accelerate_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        out["speedup_vs_accelerate"] = tps / tps_a if tps_a > 0 else None
        log(f"accelerate: {tps_a:.2f} tok/s")
    except Exception as e:
        out["accelerate"] = f"failed: {type(e).__name__}: {e}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="GPU check: bit-identity on CUDA and speed vs accelerate")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=None, help="shrink the speed model (smoke tests)")
    ap.add_argument("--cap-fraction", type=float, default=0.3, help="share of the expert bytes the cap allows")
    ap.add_argument("--families", default=None, help="comma-separated tiny presets (default: all)")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-identity", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420.0)
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"error": "CUDA is not available"}))
        return 1
    from mpl.offload.models import PRESETS
    families = args.families.split(",") if args.families else list(PRESETS)
    summary = {"torch": torch.__version__, "device": args.device,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    import transformers
    summary["transformers"] = transformers.__version__
    if not args.skip_identity:
        summary["bit_identity"] = bit_identity(args.device, families, ("eager", "batched_mm", "grouped_mm"))
        summary["bit_identity"]["rows"] = [
            {k: v for k, v in r.items() if k != "traceback"} for r in summary["bit_identity"]["rows"]]
    if not args.skip_speed:
        try:
            summary["speed"] = speed(args.device, args.layers, args.hidden, args.cap_fraction, args.budget_s)
        except Exception as e:
            summary["speed"] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=6)}
    summary["seconds"] = elapsed()
    text = json.dumps(summary, indent=2, default=str)
    print(text)
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "gpu_check.json"), "w") as f:
            f.write(text)
    ok = summary.get("bit_identity", {}).get("all_ok", True) and "error" not in summary.get("speed", {})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
