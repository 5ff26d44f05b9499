"""How far a low-precision gpu tier moves a model's output, measured in one run.

For every tiny model family the tests build (``mpl.offload.models``: random-initialised,
fp32, three decoder layers, eight experts) and for ``int8`` and ``int4``, a policy with a
full-precision device cache of ``--hot`` experts over a warm tier of ``--warm`` quantised
experts (in_place_requant demotions, LRU) is attached and, on fixed prompts with greedy
decoding, compared with the unmodified model:

* **token agreement**: the share of generated tokens equal, position by position, to the
  unmodified model's greedy tokens;
* **max |dlogit|**: the largest absolute difference of the next-token logits, teacher-forced
  on the unmodified model's greedy sequence (the same context for both), beside the largest
  absolute logit of the unmodified model for scale;
* **approximate**: the share of the generate runs' expert accesses computed from a quantised
  copy (``get_stats()["approximate_computes"] / accesses``).

Prints a markdown table (a family that cannot be attached says why in its row).

Usage: python benchmarks/bench_lowprec_agreement.py [--tokens 16] [--hot 4] [--warm 12]
"""

from __future__ import annotations

import argparse

PROMPTS = ("The quick brown fox jumps over the lazy dog.",
           "Mixture-of-Experts models route each token to a few experts.",
           "0123456789 abcdef",
           "Offload me, approximately!")


def policy_text(dtype: str, hot: int, warm: int) -> str:
    return (f"policy warm {{\n  hierarchy {{\n"
            f"    tier hot  {{ location = gpu  capacity = {hot} }}\n"
            f"    tier warm {{ location = gpu  dtype = {dtype}  capacity = {warm} }}\n"
            f"    on demote(hot -> warm) {{ mechanism = in_place_requant }}\n"
            f"    eviction = lru\n  }}\n}}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=16, help="new tokens per prompt")
    ap.add_argument("--hot", type=int, default=4, help="full-precision device slots")
    ap.add_argument("--warm", type=int, default=12, help="quantised device slots")
    ap.add_argument("--layers", type=int, default=3, help="decoder layers of each tiny model")
    args = ap.parse_args()

    import torch

    import mpl
    from mpl.offload.errors import AttachError
    from mpl.offload.models import build_model, encode, preset_names

    torch.set_num_threads(1)
    prompts = [torch.tensor([encode(p)]) for p in PROMPTS]

    def greedy(model, ids):
        with torch.no_grad():
            return model.generate(ids, max_new_tokens=args.tokens, do_sample=False)

    def logits(model, seq):
        with torch.no_grad():
            return model(input_ids=seq).logits

    print(f"python benchmarks/bench_lowprec_agreement.py --tokens {args.tokens} --hot {args.hot} "
          f"--warm {args.warm} --layers {args.layers}")
    print(f"(torch {torch.__version__}, {len(PROMPTS)} prompts x {args.tokens} greedy tokens, "
          f"fp32 tiny models, {args.layers} decoder layers, hot = {args.hot} full-precision "
          f"slots, warm = {args.warm} quantised slots)\n")
    print("| family | warm dtype | token agreement | max abs dlogit | max abs logit | approximate accesses |")
    print("|---|---|---|---|---|---|")
    for family in preset_names():
        model = build_model(family, layers=args.layers)
        refs = [greedy(model, p) for p in prompts]
        ref_logits = [logits(model, s) for s in refs]
        scale = max(float(x.abs().max()) for x in ref_logits)
        for dtype in ("int8", "int4"):
            policy = mpl.loads(policy_text(dtype, args.hot, args.warm))
            try:
                h = policy.attach(model)
            except AttachError as e:
                print(f"| {family} | {dtype} | not attached: {e} | | | |")
                continue
            try:
                same = total = 0
                for p, ref in zip(prompts, refs):
                    out = greedy(model, p)
                    new_ref, new_out = ref[0, p.shape[1]:], out[0, p.shape[1]:]
                    same += int((new_ref == new_out).sum())
                    total += new_ref.numel()
                st = h.get_stats()
                diff = max(float((logits(model, s) - r).abs().max())
                           for s, r in zip(refs, ref_logits))
            finally:
                h.detach()
            share = st["approximate_computes"] / st["accesses"] if st["accesses"] else 0.0
            print(f"| {family} | {dtype} | {same / total:.3f} ({same}/{total}) | {diff:.3g} | "
                  f"{scale:.3g} | {share:.3f} ({st['approximate_computes']}/{st['accesses']}) |")


if __name__ == "__main__":
    main()
