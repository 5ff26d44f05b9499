"""GPU check for the live mechanism: one short script for a machine with CUDA (< 8 minutes).

1. Bit-identity on CUDA: for every tiny preset, plus a 2-layer model of OLMoE-1B-7B's real
   shape (random weights), and every experts implementation (eager, batched_mm,
   grouped_mm; generate() itself switches grouped_mm to batched_mm for decode on CUDA),
   gpu_only policies with capacity 1, top-k and every expert give greedy tokens and logits
   identical to the unmodified model on the same GPU; one cpu_fallback policy is compared
   under teacher forcing (the unmodified model's tokens fed to both, logits within a
   tolerance: the CPU's sums differ in the last bits, which can flip a greedy token and
   would make every later token differ). Each row also reports the host synchronisations
   CUDA itself saw (``torch.cuda.set_sync_debug_mode``) per MoE dispatch, next to the
   engine's own count. A row that cannot run is reported as skipped and never counted as
   passed. Also reports whether CUDA grouped_mm with expert ids remapped to slots is
   bit-identical.
2. Speed under a memory cap: a larger random-initialised model with the per-layer shape of a
   real config (OLMoE-1B-7B: 64 experts, top-8, hidden 2048, expert 1024; the number of
   layers is reduced to fit the time budget), decode tokens/s, every side warmed up before
   timing, of: the unmodified model entirely on the GPU (reference), the mechanism with a
   cache of every expert (reference: its own overhead), ``mpl.auto_attach(model,
   memory=CAP)``, and accelerate ``device_map="auto"`` with ``max_memory={0: CAP}`` on a
   freshly built model, plus the peak device memory of each. Routing is random (random
   weights): hit rates and speedups are not those of a trained model, and the JSON says so.

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


def teacher_forced(model, seq):
    with torch.no_grad():
        return model(input_ids=seq).logits.float()


class CudaSyncs:
    """Counts the host synchronisations CUDA reports (``set_sync_debug_mode("warn")``)."""

    def __enter__(self):
        import warnings
        self.count = 0
        self._w = warnings.catch_warnings(record=True)
        self.records = self._w.__enter__()
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode(0)
        self.count = sum("synchroniz" in str(r.message) for r in self.records)
        self._w.__exit__(*exc)
        return False


def _model_for(fam, impl, dtype, device, hidden=None):
    from mpl.offload.models import build_model
    if fam == OLMOE_SHAPE:
        return build_big(2, hidden, dtype or torch.float32, impl=impl).to(device)
    return build_model(fam, experts_implementation=impl, dtype=dtype).to(device)


def bit_identity(device: str, families, impls, hidden: int | None = None) -> dict:
    import mpl
    from mpl.offload.hf import attach, discover
    from mpl.offload.models import encode

    ids = torch.tensor([encode("GPU bit-identity check for every experts implementation.")], device=device)
    cuda = device.startswith("cuda")
    results = []
    for fam in families:
        for impl in impls:
            # bf16 on CUDA (what models run in there; CUDA grouped_mm wants it), fp32 on the CPU
            dtype = torch.bfloat16 if cuda else None
            model = _model_for(fam, impl, dtype, device, hidden)
            try:
                ref_seq, ref_logits = gen(model, ids, 6)
                ref_forced = teacher_forced(model, ref_seq)
                ref_syncs = None
                if cuda:
                    with CudaSyncs() as s0:
                        gen(model, ids, 6)
                    ref_syncs = s0.count
            except Exception as e:      # the unmodified model itself cannot run this mode here
                results.append({"family": fam, "impl": impl, "policy": "baseline", "ok": None,
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
                    gen(model, ids, 1)                       # warm: the first misses
                    before = h.engine.dispatches
                    if cuda:
                        with CudaSyncs() as syncs:
                            seq, logits = gen(model, ids, 6)
                        # what CUDA itself flags (generate() and the model have their own; the
                        # engine's one read is an event wait, which the debug mode does not flag)
                        row["cuda_flagged_syncs"] = syncs.count
                        row["cuda_flagged_syncs_unmodified"] = ref_syncs
                        row["dispatches_in_run"] = h.engine.dispatches - before
                    else:
                        seq, logits = gen(model, ids, 6)
                    forced = teacher_forced(model, ref_seq)
                    st = h.get_stats()
                    h.detach()
                    mech = st["mechanism"]
                    row["tokens_equal"] = bool(torch.equal(seq, ref_seq))
                    row["logits_equal"] = bool(torch.equal(logits, ref_logits))
                    row["max_abs_logit_diff"] = float((logits.float() - ref_logits.float()).abs().max())
                    row["teacher_forced_max_abs_diff"] = float((forced - ref_forced).abs().max())
                    row["modes"] = mech["modes"]
                    row["copies_eq_loads"] = mech["copies"] == st["loads"]
                    row["stall_ms"] = mech["stall_ms"]
                    row["engine_syncs_per_dispatch"] = mech["host_syncs_per_dispatch"]
                    if exact:
                        row["ok"] = row["tokens_equal"] and row["logits_equal"] and row["copies_eq_loads"]
                    else:       # the CPU computes some experts: teacher forcing, within tolerance
                        tol = 5e-2 if dtype == torch.bfloat16 else 1e-4
                        row["tolerance"] = tol
                        row["ok"] = row["copies_eq_loads"] and row["teacher_forced_max_abs_diff"] <= tol
                except Exception as e:          # report and go on: this is a check script
                    row["ok"] = False
                    row["error"] = f"{type(e).__name__}: {e}"
                    row["traceback"] = traceback.format_exc(limit=4)
                results.append(row)
            after_seq, after_logits = gen(model, ids, 6)
            results.append({"family": fam, "impl": impl, "policy": "after detach",
                            "ok": bool(torch.equal(after_seq, ref_seq) and torch.equal(after_logits, ref_logits))})
            log(f"bit-identity {fam} {impl}: {sum(r['ok'] is True for r in results[-6:])}/6 ok")
            del model
            if cuda:
                torch.cuda.empty_cache()
    passed = [r for r in results if r["ok"] is True]
    failed = [r for r in results if r["ok"] is False]
    skipped = [r for r in results if r["ok"] is None]
    grouped = [r for r in results if r["impl"] == "grouped_mm" and r["policy"].startswith("gpu_only")]
    return {"cases": len(results), "passed": len(passed), "failed": failed,
            "skipped": [{k: r[k] for k in ("family", "impl", "policy", "skipped")} for r in skipped],
            "all_ok": not failed and not skipped,
            "grouped_mm_remap_bit_identical": bool(grouped) and all(r.get("logits_equal", False) for r in grouped),
            "max_engine_syncs_per_dispatch": max((r.get("engine_syncs_per_dispatch", 0.0) for r in results), default=0.0),
            "extra_cuda_flagged_syncs": max(((r["cuda_flagged_syncs"] - r["cuda_flagged_syncs_unmodified"])
                                             for r in results if "cuda_flagged_syncs" in r), default=None),
            "rows": results}


# ---------------------------------------------------------------------------- part 2
OLMOE = dict(model_type="olmoe", vocab_size=50304, hidden_size=2048, intermediate_size=1024,
             num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16, num_experts=64,
             num_experts_per_tok=8, max_position_embeddings=4096, rms_norm_eps=1e-5,
             pad_token_id=1, eos_token_id=None, tie_word_embeddings=False)


OLMOE_SHAPE = "olmoe-1b-7b-shape"


def build_big(layers: int, hidden: int | None, dtype, impl: str | None = None) -> torch.nn.Module:
    """An OLMoE-1B-7B-shaped model with random weights (seeded: two builds are identical)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    kw = dict(OLMOE, num_hidden_layers=layers)
    if hidden:
        kw.update(hidden_size=hidden, intermediate_size=hidden // 2, num_attention_heads=8,
                  num_key_value_heads=8, vocab_size=4096)
    cfg = AutoConfig.for_model(**kw)
    if impl is not None:
        cfg._experts_implementation = impl
    extra = {"experts_implementation": impl} if impl else {}
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, **extra)
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
    """(decode tokens/s, prefill seconds), both measured warm: one full untimed run first,
    so neither side pays first-call costs (kernels, allocator, the first misses) in the
    difference between the two timed runs."""
    ids = torch.randint(2, 4000, (1, prompt_len), generator=torch.Generator().manual_seed(1)).to(device)
    cuda = device.startswith("cuda")

    def run(n):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=n, do_sample=False)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    with torch.no_grad():
        run(new)                      # warm-up, untimed
        t_prefill = run(1)
        t_all = run(new)
    decode = max(t_all - t_prefill, 1e-9)
    return (new - 1) / decode, t_prefill


def _peak(device) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None


def _reset(device) -> float | None:
    """Collect what earlier measurements left, start a new peak: the device memory still
    allocated then (GiB; a peak counts it)."""
    import gc
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated() / 2**30
    return None


def speed(device: str, layers: int, hidden: int | None, cap_fraction: float, budget_s: float) -> dict:
    import gc

    import mpl
    from mpl.offload.auto import HEADROOM
    from mpl.offload.hf import attach, discover
    dtype = torch.bfloat16
    log(f"building the {layers}-layer OLMoE-shaped model (random init)")
    model = build_big(layers, hidden, dtype)
    expert_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if ".experts." in n)
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    skeleton = total - expert_bytes
    ls = discover(model)
    L, E = len(ls), ls[0].num_experts
    one = expert_bytes // (L * E)
    # skeleton + the transient buffer (one layer's experts + the zero entry) + a share of the
    # experts, plus the headroom auto_attach keeps for activations; accelerate gets the same cap
    cap = int((skeleton + (E + 1) * one + cap_fraction * expert_bytes) / (1 - HEADROOM))
    out = {"model": f"OLMoE-1B-7B shape, {layers} layers" + (f", hidden {hidden}" if hidden else ""),
           "routing": "random weights: the routing is not a trained model's, so hit rates and "
                      "speedups here are not representative of real workloads",
           "total_gib": total / 2**30, "expert_gib": expert_bytes / 2**30, "cap_gib": cap / 2**30}
    log(f"model {total / 2**30:.2f} GiB ({expert_bytes / 2**30:.2f} GiB experts); cap {cap / 2**30:.2f} GiB")

    # --- reference 1: the unmodified model entirely on the device
    _reset(device)
    model.to(device)
    tps_ref, prefill_ref = decode_tps(model, device)
    out["reference_unmodified"] = {"decode_tok_s": tps_ref, "prefill_s": prefill_ref, "peak_gib": _peak(device)}
    log(f"unmodified on {device}: {tps_ref:.2f} tok/s")

    # --- reference 2: the mechanism with a cache of every expert (its own overhead)
    _reset(device)
    h = attach(mpl.loads(f"version 1\npolicy all {{ cache {{ capacity = {L * E} }} }}"), model, device=device)
    tps_all, prefill_all = decode_tps(model, device)
    st = h.get_stats()["mechanism"]
    h.detach()
    out["reference_mpl_all_experts"] = {"decode_tok_s": tps_all, "prefill_s": prefill_all,
                                        "peak_gib": _peak(device), "syncs_per_dispatch": st["host_syncs_per_dispatch"],
                                        # the shares of dispatches the engine's home path (a pool
                                        # of every expert) and lean remap path served
                                        "home_share": st["home_dispatches"] / max(1, st["dispatches"]),
                                        "lean_share": st["lean_dispatches"] / max(1, st["dispatches"]),
                                        "overhead_vs_unmodified": tps_ref / tps_all if tps_all > 0 else None}
    log(f"mpl, every expert cached: {tps_all:.2f} tok/s")

    # --- mpl.auto_attach under the cap (the reference's handle gone first: its peak counts
    # only what this attach and decode allocate beside what is still allocated then)
    del h, st
    model.to("cpu")
    at_start = _reset(device)
    h = mpl.auto_attach(model, memory=cap, device=device)
    tps, prefill = decode_tps(model, device)
    st = h.get_stats()
    h.detach()
    out["mpl"] = {"policy": h.policy_text, "reason": h.reason, "decode_tok_s": tps, "prefill_s": prefill,
                  "hit_rate": st["hit_rate"], "stall_ms": st["mechanism"]["stall_ms"],
                  "copies": st["mechanism"]["copies"], "peak_gib": _peak(device),
                  "allocated_at_start_gib": at_start,
                  "syncs_per_dispatch": st["mechanism"]["host_syncs_per_dispatch"]}
    log(f"mpl: {tps:.2f} tok/s, hit rate {st['hit_rate']:.3f}")
    del model, h
    gc.collect()
    if elapsed() > budget_s:
        out["accelerate"] = {"skipped": "time budget"}
        return out
    if not device.startswith("cuda"):
        out["accelerate"] = {"skipped": "needs CUDA"}
        return out

    # --- accelerate device_map="auto" under the same cap, on a freshly built model
    try:
        from accelerate import dispatch_model, infer_auto_device_map
        fresh = build_big(layers, hidden, dtype)
        _reset(device)
        dmap = infer_auto_device_map(fresh, max_memory={0: cap, "cpu": 2 * total},
                                     no_split_module_classes=fresh._no_split_modules, dtype=dtype)
        dispatch_model(fresh, device_map=dmap)
        tps_a, prefill_a = decode_tps(fresh, device, new=12)
        out["accelerate"] = {"decode_tok_s": tps_a, "prefill_s": prefill_a, "peak_gib": _peak(device)}
        out["speedup_vs_accelerate"] = tps / tps_a if tps_a > 0 else None
        log(f"accelerate: {tps_a:.2f} tok/s")
    except Exception as e:
        out["accelerate"] = {"failed": f"{type(e).__name__}: {e}"}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="GPU check: bit-identity on CUDA and speed vs accelerate")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=None,
                    help=f"shrink the OLMoE-shaped models (speed and {OLMOE_SHAPE} rows; smoke tests)")
    ap.add_argument("--cap-fraction", type=float, default=0.3, help="share of the expert bytes the cap allows")
    ap.add_argument("--families", default=None,
                    help=f"comma-separated tiny presets and/or {OLMOE_SHAPE} (default: all of them)")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-identity", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420.0)
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"error": "CUDA is not available"}))
        return 1
    from mpl.offload.models import PRESETS
    families = args.families.split(",") if args.families else list(PRESETS) + [OLMOE_SHAPE]
    summary = {"torch": torch.__version__, "device": args.device,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    import transformers
    summary["transformers"] = transformers.__version__
    if not args.skip_identity:
        summary["bit_identity"] = bit_identity(args.device, families, ("eager", "batched_mm", "grouped_mm"),
                                               args.hidden)
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
    # a skipped check is never a pass: all_ok is False when any row was skipped
    ok = summary.get("bit_identity", {}).get("all_ok", True) and "error" not in summary.get("speed", {})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
