"""Shared by the tests of the engine-neutral live executor (``mpl.mechanism.live``) without
vLLM: random MoE layers in the Triton kernel's layout, the plain-torch kernel, and dispatch
sequences of several tokens per step."""

from __future__ import annotations

import random

import torch

from mpl.mechanism.live import silu_experts
from mpl.trace import Dispatch

L, E, K, H, I = 3, 8, 2, 16, 8


def random_layers(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"w13_weight": torch.randn(E, 2 * I, H, generator=g) * 0.3,
             "w2_weight": torch.randn(E, H, I, generator=g) * 0.3} for _ in range(L)]


def kernel(ordinal, x, tensors, weights, ids, first, shared):
    return silu_experts(x, tensors, weights, ids)


def dispatch_steps(n_steps=8, seed=1, base=0):
    """(step, layer, x, weights, ids, Dispatch) for every MoE layer of every step: prefill
    steps of several tokens, then decode steps of a few concurrent requests; the Dispatches'
    steps start at ``base``."""
    rnd = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in range(n_steps):
        tokens = rnd.choice([7, 5]) if s < 2 else rnd.choice([1, 2, 3, 6])
        for layer in range(L):
            rows = [rnd.sample(range(E), K) for _ in range(tokens)]
            w = torch.softmax(torch.randn(tokens, K, generator=g), dim=-1)
            x = torch.randn(tokens, H, generator=g)
            ids = torch.tensor(rows, dtype=torch.int32)
            out.append((s, layer, x, w, ids, Dispatch(base + s, layer, rows, w.tolist())))
    return out
