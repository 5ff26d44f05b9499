"""The acceptance run of loading a model without its experts (``mpl.offload.from_pretrained``),
in a process of its own (tests/test_offload_skeleton.py starts it, so that its resident
memory is its own): a random-initialised model whose experts take several times the host
tier's capacity is saved with ``save_pretrained``; the unmodified model (loaded whole by
transformers) generates the reference; then, from a baseline with that model gone, the
model is loaded through the new path and generates. Prints one JSON line of what it
measured: the peak resident growth during the load and during generate (``VmHWM`` reset by
``/proc/self/clear_refs``), the skeleton, the host tier, the pool, one MoE layer's experts.

Usage: python tests/skeleton_load_acceptance.py FOLDER
"""

from __future__ import annotations

import gc
import json
import os
import sys


def rss_kib(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


POLICY = """policy big {
    hierarchy {
        tier gpu { location = gpu  capacity = 4 }
        tier ram { location = cpu  capacity = 64MiB }
        tier ssd { location = disk }
        eviction = lru
    }
    prefetch { strategy = history  budget = 2 }
}
"""


def main(folder: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    import mpl
    from mpl.offload.models import build_model, encode

    torch.set_num_threads(1)
    MiB = 1 << 20
    host_cap = 64 * MiB
    model_dir = os.path.join(folder, "model")
    warm_dir = os.path.join(folder, "warm")
    prompt = torch.tensor([encode("The disk holds what the host cannot.")])
    # warm-up: the baseline holds the code every later step imports (transformers' loading
    # and generation, the checker, the code generator, the loader of this path)
    build_model("tiny-mixtral", layers=2).save_pretrained(warm_dir)
    h = mpl.loads(POLICY.replace("64MiB", "1MiB")).from_pretrained(warm_dir)
    with torch.no_grad():
        h.model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False)
    h.detach()
    del h

    big = build_model("tiny-mixtral", layers=8, hidden_size=512, intermediate_size=1024,
                      num_local_experts=8, num_experts_per_tok=2, num_attention_heads=8,
                      num_key_value_heads=4)
    big.save_pretrained(model_dir)
    experts = sum(p.numel() * p.element_size() for n, p in big.named_parameters() if ".experts." in n)
    skeleton = sum(t.numel() * t.element_size() for n, t in
                   (*big.named_parameters(), *big.named_buffers()) if ".experts." not in n)
    layer_experts = experts // 8
    del big
    gc.collect()
    # the unmodified model, loaded whole: its tokens, and the memory its compute takes on
    # top of the model (activations, temporaries): part of the stated overhead
    before_whole = rss_kib()
    reset_peak()
    ref_model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    whole_load_kib = rss_kib("VmHWM") - before_whole        # for comparison, not bounded
    reset_peak()
    before_ref = rss_kib()
    with torch.no_grad():
        ref = ref_model.generate(prompt, max_new_tokens=8, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True)
    compute_kib = rss_kib("VmHWM") - before_ref
    del ref_model
    gc.collect()

    base = rss_kib()
    reset_peak()
    handle = mpl.loads(POLICY).from_pretrained(model_dir)
    load_peak = rss_kib("VmHWM")
    after_load = rss_kib()
    model = handle.model
    meta = sum(p.numel() for b in handle.layers for p in handle._saved[b.module][0].values()
               if p.device.type == "meta")
    reset_peak()
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=8, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    gen_peak = rss_kib("VmHWM")
    stats = handle.get_stats()
    mech = stats["mechanism"]
    handle.detach()
    print(json.dumps({
        "experts_bytes": experts, "skeleton_bytes": skeleton, "host_cap": host_cap,
        "layer_experts_bytes": layer_experts, "meta_expert_params": meta,
        "expert_params": experts // 4,
        "pool_bytes": mech["pool_bytes"], "host_cache_bytes": mech["tiers"]["host_cache_bytes"],
        "base_kib": base, "load_peak_kib": load_peak, "after_load_kib": after_load,
        "gen_peak_kib": gen_peak, "compute_kib": compute_kib, "whole_load_kib": whole_load_kib,
        "tokens_equal": bool(torch.equal(ref.sequences, out.sequences)),
        "logits_equal": bool(torch.equal(torch.stack(ref.logits), torch.stack(out.logits))),
        "disk_reads": mech["tiers"]["disk_reads"],
        "disk_tier_reads": next(t["reads"] for t in stats["tiers"] if t["location"] == "disk"),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
