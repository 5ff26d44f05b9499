"""Calibrate the hybrid schedule's cost model on this machine: measure one expert's
host-to-device copy, and one expert's compute on the CPU and on the device, at attach time.
"""

from __future__ import annotations

import time

import torch

from .cpu import CpuExperts


def _best_ms(fn, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def calibrate(binding, device: torch.device, tokens: int = 4):
    """A ``mpl.runtime.cost.CostModel`` from measurements on ``binding``'s experts (their
    parameters still on the model, before offloading)."""
    from mpl.runtime.cost import CostModel

    params = {n: p.detach()[:1] for n, p in binding.module.named_parameters(recurse=False)}
    host = {n: p.to("cpu") for n, p in params.items()}    # expert 0 only
    if device.type == "cuda" and torch.cuda.is_available():
        host = {n: t.pin_memory() for n, t in host.items()}
    nbytes = sum(t[0].numel() * t.element_size() for t in host.values())
    dst = {n: torch.empty_like(t[0], device=device) for n, t in host.items()}

    def copy():
        for n, t in dst.items():
            t.copy_(host[n][0], non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    copy()
    copy_ms = max(_best_ms(copy), 1e-4)
    cpu = CpuExperts(binding.module, host)
    up = "gate_up_proj" if "gate_up_proj" in host else "up_proj"
    row = host[up][0]
    transposed = bool(getattr(binding.module, "is_transposed", False))
    hidden_size = row.shape[0] if transposed else row.shape[-1]
    x = torch.randn(tokens, hidden_size, dtype=row.dtype)
    with torch.no_grad():
        cpu.expert(0, x)
        cpu_ms = max(_best_ms(lambda: cpu.expert(0, x)), 1e-4)
    flops = 2.0 * sum(t[0].numel() for n, t in host.items() if not n.endswith("bias"))
    link_gbps = nbytes / (copy_ms * 1e-3) / 1e9
    cpu_gflops = tokens * flops / (cpu_ms * 1e-3) / 1e9
    if device.type == "cuda":
        xd = x.to(device)
        wd = row.to(device)

        def gpu():
            with torch.no_grad():
                y = xd @ wd if transposed else torch.nn.functional.linear(xd, wd)
            torch.cuda.synchronize(device)
            return y
        gpu()
        # the up projection holds about 2/3 of an expert's FLOPs (1/2 without a gate)
        share = 2 / 3 if up == "gate_up_proj" else 1 / 2
        gpu_ms = max(_best_ms(gpu), 1e-4) / share
        gpu_gflops = tokens * flops / (gpu_ms * 1e-3) / 1e9
    else:
        gpu_gflops = cpu_gflops       # both "sides" are the CPU
    return CostModel(link_gbps=link_gbps, cpu_gflops=cpu_gflops, gpu_gflops=gpu_gflops,
                     expert_flops=flops)
