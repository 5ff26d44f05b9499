"""auto_attach: pick a policy from the model's shape and the memory available, attach it,
and say why. The decision rule (also in docs/offload.md):

1. Expert memory = memory - skeleton (every non-expert weight) - the transient STREAM
   entries attach allocates (``stream_slots``, by default a few per routed expert,
   ``mpl.mechanism.footprint.default_stream_slots``) - the zero entry - 10% headroom for
   activations and the KV cache.
   ``slots`` = expert memory // bytes of one expert. Fewer than 1 slot: refused.
2. ``slots >= every expert``: one shared LRU cache that holds the whole model (the policy
   cannot matter; it is the no-offload baseline with the mechanism's bookkeeping).
3. ``slots >= top_k x MoE layers``: every layer can keep at least one token's working set,
   so per-layer caches (a shared cache lets busy layers starve cold ones): ``capacity =
   slots // layers``, budget split by routing ``entropy`` between ``min_capacity = top_k``
   and ``max_capacity = min(experts, 2 x capacity)``; eviction ``lfu`` when a layer holds at
   least 2 x top_k experts (enough room for frequency to matter), else ``lru``; prefetch
   ``lookahead`` (pre-gating, budget top_k) when the routers were found, else ``history``.
4. Otherwise (a layer cannot even hold one token's experts): one shared LRU cache of
   ``slots`` and no prefetching (a prefetch would evict what the current layer needs); the
   schedule is ``hybrid`` on CUDA (the CPU computes a miss when that beats the transfer,
   by the calibrated cost model) and ``gpu_only`` on a CPU-only machine (both sides are the
   CPU there).
"""

from __future__ import annotations

import os
import re

import torch

from mpl.schema import UNITS

from .errors import AttachError
from .hf import _resolve_device, discover, model_shape, pool_stream_slots

HEADROOM = 0.10


def parse_memory(memory) -> int:
    """``12GiB`` / ``"800 MB"`` / an int of bytes -> bytes (units from the schema)."""
    if isinstance(memory, (int, float)) and not isinstance(memory, bool):
        if memory <= 0:
            raise AttachError(f"memory must be positive, got {memory}")
        return int(memory)
    if not isinstance(memory, str):
        raise AttachError(f"memory must be a size like '12GiB' or a number of bytes, got {memory!r}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", memory)
    sizes = {n: u for n, u in UNITS.items() if u.kind == "size"}
    if not m or (m.group(2) and m.group(2) not in sizes):
        raise AttachError(f"cannot read memory {memory!r}: write a number with one of "
                          f"{', '.join(sizes)} (e.g. '12GiB')")
    value = float(m.group(1)) * (sizes[m.group(2)].factor if m.group(2) else 1)
    if value <= 0:
        raise AttachError(f"memory must be positive, got {memory!r}")
    return int(value)


def free_memory(device: torch.device) -> int:
    """Free memory of the device (CUDA), or available host memory (CPU)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def choose(model, memory: int, device: torch.device, layers=None,
           stream_slots: int | None = None) -> tuple[str, str]:
    """(policy text, reason) for ``model`` with ``memory`` bytes on ``device``; the slot pool's
    transient entries are those attach allocates (``stream_slots``, or its default)."""
    layers = layers or discover(model)
    shape = model_shape(model, layers)
    eb = shape.expert_bytes
    E, K, L = shape.num_experts, shape.top_k, len(layers)
    expert_ids = {id(p) for b in layers for p in b.module.parameters(recurse=False)}
    skeleton = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in expert_ids)
    skeleton += sum(b.numel() * b.element_size() for b in model.buffers())
    # the policy chosen has no memory tiers: passes run off the CPU only (the CPU's host window)
    entries = pool_stream_slots(stream_slots, layers[0], device,
                                passes=torch.device(device).type != "cpu")
    transient = (int(entries) + 1) * eb   # and the zero entry
    usable = int(memory * (1 - HEADROOM)) - skeleton - transient
    slots = usable // eb if eb else 0
    gib = 2 ** 30
    facts = (f"{L} MoE layers x {E} experts (top-{K}), {eb / 2**20:.2f} MiB per expert; "
             f"{memory / gib:.2f} GiB given, {skeleton / gib:.2f} GiB skeleton, "
             f"{transient / gib:.2f} GiB transient buffer, {HEADROOM:.0%} headroom -> {max(slots, 0)} expert slots")
    if slots < 1:
        raise AttachError(f"not enough memory to attach: {facts}. The skeleton and one expert "
                          "need more than that; give more memory")
    name = "auto"
    total = L * E
    if slots >= total:
        text = (f"policy {name} {{\n    cache {{\n        capacity = {total}\n        eviction = lru\n    }}\n}}\n")
        reason = (f"{facts}; every expert fits, so one shared cache holds the whole model, its slot "
                  f"pool capped at the model's {total} experts (rule 2)")
        return text, reason
    has_routers = all(b.router is not None for b in layers)
    if slots >= K * L:
        cap = min(E, slots // L)
        maxc = min(E, 2 * cap)
        minc = min(K, cap)
        budget = min(slots, L * maxc)
        evict = "lfu" if cap >= 2 * K else "lru"
        strategy = "lookahead" if has_routers else "history"
        pf_budget = max(1, min(K, cap))
        text = (f"policy {name} {{\n"
                f"    cache {{\n        eviction = {evict}\n    }}\n"
                f"    prefetch {{\n        strategy = {strategy}\n        budget = {pf_budget}\n    }}\n"
                f"    per_layer {{\n        allocation = entropy\n        total_budget = {budget}\n"
                f"        min_capacity = {minc}\n        max_capacity = {maxc}\n    }}\n"
                f"}}\n")
        reason = (f"{facts}; each layer can hold at least one token's {K} experts, so per-layer caches "
                  f"of {cap} split by routing entropy ({minc}..{maxc}), {evict} eviction "
                  f"({'>=' if evict == 'lfu' else '<'} 2 x top-k per layer), {strategy} prefetch "
                  f"{'(routers found: pre-gating)' if has_routers else '(no routers found)'} (rule 3)")
        return text, reason
    mode = "hybrid" if device.type == "cuda" else "gpu_only"
    text = (f"policy {name} {{\n    cache {{\n        capacity = {slots}\n        eviction = lru\n    }}\n"
            f"    schedule {{\n        mode = {mode}\n    }}\n}}\n")
    reason = (f"{facts}; fewer slots than top-k x layers ({K * L}), so one shared LRU cache without "
              f"prefetching and the {mode} schedule"
              f"{' (CPU computes a miss when cheaper than its transfer)' if mode == 'hybrid' else ' (CPU-only machine)'} (rule 4)")
    return text, reason


def _resident(model, device: torch.device, layers) -> int:
    """Bytes of the model already on ``device``: free memory excludes them, and ``choose``
    subtracts the skeleton itself (so it is not counted twice); on an accelerator the
    experts leave it for the host store, on the CPU they stay in host memory."""
    keep = {id(p) for b in layers for p in b.module.parameters(recurse=False)} if device.type == "cpu" else set()
    tensors = [p for p in model.parameters() if id(p) not in keep] + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors if t.device == device)


def auto_attach(model, memory=None, *, device=None, **attach_kwargs):
    """Choose a policy for ``model`` and ``memory`` (e.g. "12GiB"; default: free on the
    device), attach it, and return the handle with ``policy_text`` and ``reason``."""
    from mpl.api import loads

    from .hf import attach

    dev = _resolve_device(device, model)
    layers = discover(model)
    mem = parse_memory(memory) if memory is not None else free_memory(dev) + _resident(model, dev, layers)
    text, reason = choose(model, mem, dev, layers, attach_kwargs.get("stream_slots"))
    text = "version 1\n\n# chosen by mpl.auto_attach: " + reason + "\n" + text
    policy = loads(text)          # checked: raises PolicyError if the rule produced bad text
    handle = attach(policy, model, device=dev, **attach_kwargs)
    handle.policy_text = text
    handle.reason = reason
    return handle
