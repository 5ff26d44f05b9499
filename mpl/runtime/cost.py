"""The cost model the ``hybrid`` schedule decides with (and the simulator times with).

Transfer time = bytes / link bandwidth; compute time = tokens x expert FLOPs per token /
throughput. ``mpl.timemodel.hardware`` builds one from hardware profiles; the live mechanism
calibrates one from measured copies and expert calls. Defaults: a PCIe 4.0 x16 link
(25 GB/s effective), a desktop CPU (200 GFLOP/s), a data-centre GPU (100 TFLOP/s), and an
fp16 expert (2 FLOPs per parameter, 2 bytes per parameter, so FLOPs/token = bytes).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CostModel:
    link_gbps: float = 25.0           # host -> device, GB/s (1e9 bytes/s)
    cpu_gflops: float = 200.0         # sustained expert FLOP/s on the CPU, in GFLOP/s
    gpu_gflops: float = 100_000.0     # sustained expert FLOP/s on the GPU, in GFLOP/s
    expert_flops: float | None = None  # FLOPs of one expert for one token (None: = bytes)
    latency_ms: float = 0.0           # fixed cost per transfer (launch, sync)

    def transfer_ms(self, nbytes: float) -> float:
        return self.latency_ms + nbytes / (self.link_gbps * 1e9) * 1e3

    def flops(self, expert_bytes: float) -> float:
        return self.expert_flops if self.expert_flops is not None else float(expert_bytes)

    def cpu_ms(self, tokens: int, expert_bytes: float) -> float:
        return tokens * self.flops(expert_bytes) / (self.cpu_gflops * 1e9) * 1e3

    def gpu_ms(self, tokens: int, expert_bytes: float) -> float:
        return tokens * self.flops(expert_bytes) / (self.gpu_gflops * 1e9) * 1e3

    def prefers_cpu(self, tokens: int, expert_bytes: float, threshold_ms: float) -> bool:
        """The hybrid decision for one miss: CPU when the transfer is estimated above the
        threshold, or when computing on the CPU is cheaper than transferring."""
        t = self.transfer_ms(expert_bytes)
        if t > threshold_ms:
            return True
        return self.cpu_ms(tokens, expert_bytes) < t

    def cpu_token_limit(self, expert_bytes: float, threshold_ms: float) -> float:
        """The hybrid decision as a token count: CPU iff ``tokens < limit`` (inf: always)."""
        t = self.transfer_ms(expert_bytes)
        if t > threshold_ms:
            return float("inf")
        per_token = self.cpu_ms(1, expert_bytes)
        return t / per_token if per_token > 0 else float("inf")
