"""Shared by the offload tests: a policy from a body, a greedy generate with its logits,
teacher-forced logits."""

from __future__ import annotations

import torch

import mpl


def policy(body: str):
    return mpl.loads(f"version 1\npolicy p {{\n {body}\n}}\n")


def generate(model, prompt: torch.Tensor, n: int = 5):
    """(sequences, stacked logits) of a greedy generate of ``n`` new tokens."""
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


def teacher_forced_logits(model, seq: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=seq).logits


def fake_ir(values: dict):
    """A real PolicyIR with ``values`` set, for a fake policy that brings its own runtime
    (attach reads what the policy can reach from its IR: ``mpl.features``)."""
    import dataclasses
    base = mpl.loads("policy fake { cache { capacity = 1 } }").ir
    return dataclasses.replace(base, values={**base.values, **values})
