"""GPU check of the memory tiers live (one short script for a machine with CUDA, < 3 minutes).

For tiny models (random weights) x every experts implementation, in bf16 on the GPU, each
tiered policy attached with HuggingFace attach (the slot pool and the low-precision areas on
the GPU, host records page-locked, copies on the copy stream with events):

* ``gpu/ram/ssd``: a device cache over a host tier with a capacity over a disk tier (files
  written to a temp folder, read by the reader threads): greedy tokens and logits identical to
  the unmodified model on the same GPU; disk reads equal to the runtime's;
* ``gpu/ram split 2``: ``granularity_split = 2`` over host memory: identical too;
* ``hot/int8/ram/ssd``: an int8 warm tier under the device cache over the host and disk tiers:
  the greedy-token agreement and the largest logit difference against the unmodified model,
  the approximate computes equal to the runtime's;

and in every case the per-tier statistics equal a replay's of the trace recorded in the same
run. A case that cannot run is reported with its error, never counted as passed.

    python benchmarks/gpu_check_tiers.py [--device cuda] [--families tiny-mixtral,...]

Prints a JSON summary; writes it to $OUT/gpu_check_tiers.json when $OUT is set.
``--device cpu`` runs the same code on the CPU (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

import torch

IMPLS = ("eager", "batched_mm", "grouped_mm")


def gen(model, ids, n):
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits).float()


def cases(folder: str) -> list:
    hist = "prefetch { strategy = history  budget = 1 }"
    return [
        ("gpu/ram/ssd", True, f'''policy t {{
  hierarchy {{
    tier gpu {{ location = gpu  capacity = 2 }}
    tier ram {{ location = cpu  capacity = 3 }}
    tier ssd {{ location = disk  path = "{folder}" }}
    eviction = lru
  }}
  {hist}
}}'''),
        ("gpu/ram split 2", True, f'''policy t {{
  hierarchy {{
    tier gpu {{ location = gpu  capacity = 3 }}
    tier ram {{ location = cpu }}
    eviction = lru
    granularity_split = 2
  }}
  {hist}
}}'''),
        ("hot/int8/ram/ssd", False, f'''policy t {{
  hierarchy {{
    tier hot  {{ location = gpu  capacity = 1 }}
    tier warm {{ location = gpu  dtype = int8  capacity = 3 }}
    tier ram  {{ location = cpu  capacity = 2 }}
    tier ssd  {{ location = disk  path = "{folder}" }}
    on demote(hot -> warm) {{ mechanism = in_place_requant }}
    eviction = lru
  }}
  {hist}
}}'''),
    ]


def row_of(stats, tier):
    return next((r for r in stats["tiers"] if r["tier"] == tier), None)


def check(family: str, impl: str, device: str, folder_root: str) -> list:
    import mpl
    from mpl.offload.models import build_model, encode
    from mpl.offload.recorder import Recorder

    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else None
    ids = torch.tensor([encode("Tiers on the GPU: the disk, the host, int8 copies.")], device=device)
    out = []
    try:
        model = build_model(family, layers=2, experts_implementation=impl, dtype=dtype).to(device)
        ref_seq, ref_logits = gen(model, ids, 6)
    except Exception as e:
        return [{"family": family, "impl": impl, "case": "baseline", "ok": None,
                 "skipped": f"{type(e).__name__}: {e}"}]
    for label, exact, body in cases(tempfile.mkdtemp(dir=folder_root)):
        r = {"family": family, "impl": impl, "case": label}
        try:
            pol = mpl.loads("version 1\n" + body + "\n")
            h = pol.attach(model, device=device)
            with Recorder(model) as rec:
                seq, logits = gen(model, ids, 6)
            st = h.get_stats()
            shape = h.shape
            h.detach()
            rs = pol.replay(rec.trace(), belady=False, model=shape).stats
            r["tokens_equal"] = bool(torch.equal(seq, ref_seq))
            r["token_agreement"] = float((seq == ref_seq).float().mean())
            n = min(len(logits), len(ref_logits))
            r["max_abs_logit_diff"] = float((logits[:n] - ref_logits[:n]).abs().max())
            r["logits_equal"] = bool(torch.equal(logits, ref_logits))
            r["replay_agrees"] = rs["tiers"] == st["tiers"] and all(
                rs[k] == st[k] for k in ("accesses", "loads", "evictions", "streamed"))
            mech = st.get("mechanism", {}).get("tiers", {})
            ssd = row_of(st, "ssd")
            if ssd is not None:
                r["disk_reads"] = mech.get("disk_reads")
                r["disk_reads_equal"] = mech.get("disk_reads") == ssd["reads"]
            if not exact:
                r["approximate_computes"] = st.get("approximate_computes")
                r["approximate_equal"] = (st.get("approximate_computes") == mech.get("approximate")
                                          == row_of(st, "warm")["approximate"])
            checks = [r["replay_agrees"], r.get("disk_reads_equal", True),
                      r.get("approximate_equal", True)]
            if exact:
                checks += [r["tokens_equal"], r["logits_equal"]]
            r["ok"] = all(checks)
        except Exception as e:
            r["ok"] = False
            r["error"] = f"{type(e).__name__}: {e}"
            r["trace"] = traceback.format_exc()[-1500:]
        out.append(r)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--families", default="tiny-mixtral,tiny-qwen2-moe,tiny-gpt-oss")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for fam in a.families.split(","):
            for impl in IMPLS:
                got = check(fam, impl, a.device, root)
                for r in got:
                    print(f"[{time.perf_counter() - t0:6.1f}s] {fam} {impl} {r['case']}: "
                          f"ok={r.get('ok')} {r.get('error', '')}", file=sys.stderr, flush=True)
                rows += got
    import transformers
    summary = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": a.device,
        "gpu": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else None,
        "cases": len(rows), "passed": sum(r.get("ok") is True for r in rows),
        "failed": [f"{r['family']} {r['impl']} {r['case']}" for r in rows if r.get("ok") is False],
        "skipped": [f"{r['family']} {r['impl']} {r['case']}" for r in rows if r.get("ok") is None],
        "seconds": round(time.perf_counter() - t0, 1),
        "rows": rows,
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check_tiers.json"), "w") as f:
            f.write(text)
    return 0 if not summary["failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
