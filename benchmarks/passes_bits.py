"""Are dispatches computed in passes the unmodified model's bits on the CPU, under threads?

A bounded transient area (``attach(..., stream_slots=N)``, the default) computes a prefill
that streams more experts than it holds in passes (docs/offload.md, "Passes"); on the CPU
without memory tiers such a dispatch is computed from the host store in one call instead
(the host window), so this check runs the policies that take the passes: a gpu tier over a
host tier, over a host tier and a disk tier, and in parts (``granularity_split``). Every
tiny family with ``--experts`` experts per layer, float32 and bfloat16, every experts
implementation, two cache sizes and prompt lengths; or, with ``--wide``, a Mixtral-shaped
layer of hidden size 1024 (where the CPU's matrix kernels split their work across threads),
with and without memory tiers (the host window switched off). Prints each run that differs
or took no passes, then the count.

    python benchmarks/passes_bits.py --threads 2 [--experts 48]
    python benchmarks/passes_bits.py --threads 4 --wide
"""

from __future__ import annotations

import argparse
import tempfile

import torch

import mpl
from mpl.offload.hf import attach
from mpl.offload.models import PRESETS, build_model, with_experts

TIERS = {
    "host tier": "hierarchy {{ tier gpu {{ location = gpu  capacity = {cap} }} "
                 "tier ram {{ location = cpu }} }}",
    "host and disk tiers": "hierarchy {{ tier gpu {{ location = gpu  capacity = {cap} }} "
                           "tier ram {{ location = cpu  capacity = 24 }} "
                           "tier ssd {{ location = disk  path = \"{disk}\" }} }}",
    "in parts": "hierarchy {{ tier gpu {{ location = gpu  capacity = {cap} }} "
                "tier ram {{ location = cpu }}  granularity_split = 2 }}",
}


def run(model, body, ids, slots, untiered=False):
    """(same bits, dispatches in passes, passes on a gathered window) of a greedy generation
    with ``body`` attached."""
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=2, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    h = attach(mpl.loads("policy p { " + body + " }"), model, stream_slots=slots)
    if untiered:                   # the passes, not the host window
        for b in h.engine.layers:
            b.host_view = None
    try:
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=2, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True)
        mech = h.get_stats()["mechanism"]
        passes, gathered = mech["multi_pass_dispatches"], mech["gathered_passes"]
    finally:
        h.detach()
    same = torch.equal(ref.sequences, got.sequences) and all(
        torch.equal(a, b) for a, b in zip(ref.logits, got.logits))
    return same, passes, gathered


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--experts", type=int, default=48)
    ap.add_argument("--wide", action="store_true", help="a Mixtral-shaped layer of hidden 1024")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    disk = tempfile.mkdtemp(prefix="mpl-passes-")
    gen = torch.Generator().manual_seed(args.threads)
    runs = differ = gathered = 0
    if args.wide:
        cases = [("tiny-mixtral", impl, torch.bfloat16,
                  dict(layers=2, hidden_size=1024, intermediate_size=1024, num_local_experts=32,
                       num_attention_heads=8, num_key_value_heads=4))
                 for impl in ("eager", "batched_mm", "grouped_mm")]
        shapes = ((3, 8, 33), (3, 8, 130))
        bodies = dict(TIERS, **{"cache (no tiers)": "cache {{ capacity = {cap} }}"})
    else:
        cases = [(preset, impl, dt, with_experts(preset, args.experts))
                 for preset in PRESETS
                 for impl in ("eager", "batched_mm", "grouped_mm")
                 for dt in (torch.float32, torch.bfloat16)]
        shapes = ((2, 8, 40), (6, 16, 97))
        bodies = TIERS
    for preset, impl, dt, over in cases:
        model = build_model(preset, experts_implementation=impl, dtype=dt, **over)
        for name, body in bodies.items():
            for cap, slots, tokens in shapes:
                ids = torch.randint(1, model.config.vocab_size, (1 if args.wide else 2, tokens),
                                    generator=gen)
                same, passes, g = run(model, body.format(cap=cap, disk=disk), ids, slots,
                                      untiered=name.startswith("cache"))
                runs += 1
                gathered += g
                differ += not same
                if not same or not passes:
                    print(f"{preset} {impl} {dt} {name} capacity {cap} slots {slots} "
                          f"{tokens} tokens: {'same bits' if same else 'DIFFERS'}, "
                          f"{passes} dispatches in passes", flush=True)
    print(f"{args.threads} threads: {runs} generations in passes, {differ} differ from the "
          f"unmodified model ({gathered} passes on a gathered window)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
