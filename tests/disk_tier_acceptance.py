"""The disk tier's acceptance run, in a process of its own (tests/test_offload_disk_tier.py
starts it, so that its resident memory is its own): a random-initialised model whose experts
take more than 4x the host tier's capacity generates with a gpu / host / disk policy; prints
one JSON line of what it measured.

Usage: python tests/disk_tier_acceptance.py FOLDER [WARM]

WARM (``int8``, ``int4``): a low-precision gpu tier of that precision right under the device
cache (its copies computed from: the tokens are then not the unmodified model's).
"""

from __future__ import annotations

import json
import sys


def rss_kib(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def main(folder: str, warm_dtype: str | None = None) -> None:
    import torch

    import mpl
    from mpl.offload.models import build_model, encode
    from mpl.offload.recorder import Recorder

    torch.set_num_threads(1)
    MiB = 1 << 20
    host_cap = 64 * MiB
    # warm-up, so that the baseline holds the code every later step imports (the checker,
    # the code generator, transformers' generation, the replay): a tiny model generates
    import gc

    import mpl.offload.hf  # noqa: F401
    import mpl.sim.replay  # noqa: F401
    warm = build_model("tiny-mixtral", layers=2)
    mpl.loads("policy w { cache { capacity = 2 } }").attach(warm).detach()
    with torch.no_grad():
        warm.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False)
    del warm
    gc.collect()
    base = rss_kib()
    model = build_model("tiny-mixtral", layers=6, hidden_size=512, intermediate_size=1024,
                        num_local_experts=8, num_experts_per_tok=2, num_attention_heads=8,
                        num_key_value_heads=4)
    experts = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if ".experts." in n)
    skeleton = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                   if ".experts." not in n)
    prompt = torch.tensor([encode("The disk holds what the host cannot.")])
    # the unmodified model's generate: its tokens, and the memory its compute takes on top
    # of the model (activations, the kernels' temporaries): part of the stated overhead
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before_ref = rss_kib()
    with torch.no_grad():
        ref = model.generate(prompt, max_new_tokens=8, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    compute_kib = rss_kib("VmHWM") - before_ref
    warm_tier = (f"\n        tier warm {{ location = gpu  dtype = {warm_dtype}  capacity = 12 }}"
                 if warm_dtype else "")
    policy = mpl.loads(f'''policy big {{
    hierarchy {{
        tier gpu {{ location = gpu  capacity = 4 }}{warm_tier}
        tier ram {{ location = cpu  capacity = 64MiB }}
        tier ssd {{ location = disk  path = "{folder}" }}
        eviction = lru
    }}
    prefetch {{ strategy = history  budget = 2 }}
}}''')
    import os
    handle = policy.attach(model, readers=int(os.environ.get("MPL_READERS", "4")))
    after_attach = rss_kib()
    from mpl.mechanism.hostmem import page_cache_bytes
    files = handle.get_stats()["mechanism"]["tiers"]["files"]
    cached_attach = sum(page_cache_bytes(f) for f in files)     # the OS's copy of the files
    with open("/proc/self/clear_refs", "w") as f:      # the peak from here on
        f.write("5")
    with Recorder(model) as rec, torch.no_grad():
        out = model.generate(prompt, max_new_tokens=8, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    peak = rss_kib("VmHWM")
    cached_run = sum(page_cache_bytes(f) for f in files)
    stats = handle.get_stats()
    mech = stats["mechanism"]
    report = policy.replay(rec.trace(), belady=False)
    rstats = report.stats if isinstance(getattr(report, "stats", None), dict) else report.to_dict()["stats"]
    handle.detach()
    print(json.dumps({
        "experts_bytes": experts, "skeleton_bytes": skeleton, "host_cap": host_cap,
        "pool_bytes": mech["pool_bytes"], "host_cache_bytes": mech["tiers"]["host_cache_bytes"],
        "base_kib": base, "compute_kib": compute_kib, "after_attach_kib": after_attach, "peak_kib": peak,
        "tokens_equal": bool(torch.equal(ref.sequences, out.sequences)),
        "logits_equal": bool(torch.equal(torch.stack(ref.logits), torch.stack(out.logits))),
        "disk_reads": mech["tiers"]["disk_reads"], "page_cache": mech["tiers"]["page_cache"],
        "cached_after_attach": cached_attach, "cached_after_run": cached_run,
        "low_demotions": mech["tiers"]["low_demotions"],
        "demotion_reads": mech["tiers"]["demotion_reads"],
        "lowprec_bytes": mech["tiers"]["lowprec_bytes"],
        "staging_bytes": max([a["record_bytes"] for a in mech["tiers"]["lowprec"]] or [0]),
        "approximate": {"live": stats["approximate_computes"],
                        "mechanism": mech["tiers"]["approximate"],
                        "replay": rstats["approximate_computes"]},
        "live_tiers": stats["tiers"], "replay_tiers": rstats["tiers"],
        "live": {k: stats[k] for k in ("accesses", "hits", "loads", "evictions")},
        "replay": {k: rstats[k] for k in ("accesses", "hits", "loads", "evictions")},
    }))


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])
