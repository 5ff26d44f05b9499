"""Hardware profiles (from spec sheets) and the per-operation cost numbers of the simulator.

A profile describes one machine: the GPU (memory, memory bandwidth, dense fp16 tensor
throughput), the host link (PCIe generation and lanes) and the host CPU (memory bandwidth and
the throughput PyTorch reaches on bf16 matmuls). ``Costs`` turns a profile plus a model shape
into milliseconds: an expert transfer, an expert computed on the GPU or on the CPU, the
non-expert part of a layer. ``docs/simulation.md`` gives the formulas and the sources.

Custom profiles are JSON files with the fields of :class:`Profile` (``base`` names a built-in
profile to start from); ``resolve("my-box.json")`` loads one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Mapping

from mpl import shapes

#: Host links: theoretical bandwidth per direction, GB/s (PCI-SIG: 8/16/32 GT/s per lane,
#: 128b/130b encoding, 16 lanes).
LINKS: Mapping[str, float] = MappingProxyType({
    "pcie3": 15.75,
    "pcie4": 31.5,
    "pcie5": 63.0,
})

#: Host CPUs: effective memory bandwidth (GB/s) and bf16 matmul throughput (GFLOP/s) that an
#: expert computed with PyTorch on the CPU reaches (decode is memory-bound: bandwidth decides),
#: and the host memory (GB) the machine has.
CPUS: Mapping[str, dict] = MappingProxyType({
    # dual-channel DDR5-5600: 89.6 GB/s theoretical, ~70% reached by streaming reads; 64 GB
    # (two 32 GB modules: an assumption, a desktop's memory is its owner's choice)
    "desktop": {"cpu_mem_gbps": 60.0, "cpu_gflops": 500.0, "host_memory_gb": 64.0},
    # one socket, 8-channel DDR4-3200 (EPYC 7003, the A100 DGX host): 204.8 GB/s theoretical;
    # 1 TB (NVIDIA DGX A100 datasheet, 320 GB system: 1 TB of system memory)
    "server-ddr4": {"cpu_mem_gbps": 140.0, "cpu_gflops": 1500.0, "host_memory_gb": 1024.0},
    # one socket, 8-channel DDR5-4800 (Xeon 4th gen, H100/H200 HGX hosts): 307 GB/s
    # theoretical; 2 TB (NVIDIA DGX H100 datasheet: 2 TB of system memory)
    "server-ddr5": {"cpu_mem_gbps": 210.0, "cpu_gflops": 2500.0, "host_memory_gb": 2048.0},
})

#: Disks (NVMe SSDs) a memory hierarchy's disk tier reads from: sequential read bandwidth
#: (GB/s, the vendors' spec sheets) and the latency of one read (µs: a 4 KiB random read at
#: queue depth 1, which vendor sheets do not state; CrystalDiskMark runs of NVMe drives
#: measure 45-90 µs, and the flash's page read sets it, so PCIe 5.0 does not shorten it).
#: docs/simulation.md, "Memory tiers".
DISKS: Mapping[str, dict] = MappingProxyType({
    # PCIe 4.0 x4: Samsung 990 PRO spec sheet, sequential read up to 7,450 MB/s
    "nvme-gen4": {"disk_read_gbps": 7.45, "disk_latency_us": 60.0},
    # PCIe 5.0 x4: Samsung 9100 PRO spec sheet, sequential read up to 14,800 MB/s
    "nvme-gen5": {"disk_read_gbps": 14.8, "disk_latency_us": 60.0},
})


@dataclass(frozen=True)
class Profile:
    name: str
    gpu_memory_gb: float          # device memory
    hbm_gbps: float               # device memory bandwidth, GB/s
    gpu_tflops: float             # dense fp16/bf16 tensor throughput, TFLOP/s
    link: str = "pcie4"           # a LINKS name (documentation; link_gbps is what counts)
    link_gbps: float = 31.5       # theoretical host->device bandwidth per direction, GB/s
    link_efficiency: float = 0.8  # fraction reached by pinned-memory copies (cudaMemcpyAsync)
    transfer_latency_us: float = 10.0   # per transfer: launch + DMA setup
    kernel_launch_us: float = 5.0       # per expert computed on the GPU
    cpu_mem_gbps: float = 60.0
    cpu_gflops: float = 500.0
    source: str = ""
    host_memory_gb: float = 64.0        # the machine's host memory
    disk: str = "nvme-gen4"             # a DISKS name (documentation; the two below count)
    disk_read_gbps: float = 7.45        # sequential read bandwidth of the disk tier's drive
    disk_latency_us: float = 60.0       # per read

    @property
    def effective_link_gbps(self) -> float:
        return self.link_gbps * self.link_efficiency

    def to_dict(self) -> dict:
        # every field is a number or a string: a flat copy is asdict's result, without its
        # deep copies (a replay report asks for it once per replay)
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _gpu(name, mem, hbm, tflops, link, cpu, disk, source):
    return Profile(name, mem, hbm, tflops, link=link, link_gbps=LINKS[link], source=source,
                   disk=disk, **CPUS[cpu], **DISKS[disk])


PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in (
    _gpu("rtx-4090", 24, 1008, 165.2, "pcie4", "desktop", "nvme-gen4",
         "NVIDIA Ada Lovelace GPU Architecture whitepaper v1.01, appendix A: 24 GB GDDR6X, "
         "1008 GB/s, 165.2 TFLOPS FP16 tensor (FP32 accumulate, dense); PCIe 4.0 x16"),
    _gpu("rtx-5080", 16, 960, 225.1, "pcie5", "desktop", "nvme-gen5",
         "NVIDIA RTX Blackwell GPU Architecture whitepaper: 16 GB GDDR7 at 30 Gbps on a "
         "256-bit bus = 960 GB/s, ~225 TFLOPS FP16 tensor (dense); PCIe 5.0 x16"),
    _gpu("a100-80gb", 80, 2039, 312.0, "pcie4", "server-ddr4", "nvme-gen4",
         "NVIDIA A100 datasheet (SXM4 80GB): 2039 GB/s HBM2e, 312 TFLOPS FP16 tensor "
         "(dense); host link PCIe 4.0 x16"),
    _gpu("h100", 80, 3350, 989.4, "pcie5", "server-ddr5", "nvme-gen5",
         "NVIDIA H100 datasheet (SXM5 80GB): 3.35 TB/s HBM3, 989.4 TFLOPS FP16 tensor "
         "(dense); host link PCIe 5.0 x16"),
    _gpu("h200", 141, 4800, 989.4, "pcie5", "server-ddr5", "nvme-gen5",
         "NVIDIA H200 datasheet (SXM 141GB): 4.8 TB/s HBM3e, 989 TFLOPS FP16 tensor "
         "(dense); host link PCIe 5.0 x16"),
)})

ALIASES: Mapping[str, str] = MappingProxyType({
    "4090": "rtx-4090", "rtx4090": "rtx-4090", "5080": "rtx-5080", "rtx5080": "rtx-5080",
    "a100": "a100-80gb", "a100-80g": "a100-80gb", "h100-sxm": "h100", "h200-sxm": "h200",
})

DEFAULT = "rtx-4090"


class HardwareError(ValueError):
    """Unknown profile name or a bad profile file (the message says which field)."""


def names() -> tuple[str, ...]:
    return tuple(PROFILES)


def _from_dict(d: dict, where: str) -> Profile:
    if not isinstance(d, dict):
        raise HardwareError(f"{where}: a hardware profile must be a JSON object")
    known = {f.name: f for f in fields(Profile)}
    base_name = d.get("base")
    if base_name is not None:
        base = PROFILES.get(ALIASES.get(str(base_name), str(base_name)))
        if base is None:
            raise HardwareError(f"{where}: unknown base profile '{base_name}' "
                                f"(known: {', '.join(PROFILES)})")
    else:
        base = None
    values = {}
    for k, v in d.items():
        if k == "base":
            continue
        if k == "cpu":
            if not isinstance(v, str) or v not in CPUS:
                raise HardwareError(f"{where}: unknown cpu '{v}' (known: {', '.join(CPUS)})")
            values.update(CPUS[v])
            continue
        if k == "disk":
            if not isinstance(v, str) or v not in DISKS:
                raise HardwareError(f"{where}: unknown disk '{v}' (known: {', '.join(DISKS)})")
            values.update(DISKS[v], disk=v)
            continue
        if k not in known:
            import difflib
            close = difflib.get_close_matches(k, list(known) + ["base", "cpu"], n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise HardwareError(f"{where}: unknown field '{k}'{hint}")
        if k in ("name", "link", "source", "disk"):
            if not isinstance(v, str):
                raise HardwareError(f"{where}: '{k}' must be a string")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise HardwareError(f"{where}: '{k}' must be a positive (finite) number, got {v!r}")
        values[k] = v
    if "link" in values and "link_gbps" not in values:
        if values["link"] not in LINKS:
            raise HardwareError(f"{where}: unknown link '{values['link']}' "
                                f"(known: {', '.join(LINKS)}), or give link_gbps")
        values["link_gbps"] = LINKS[values["link"]]
    if base is not None:
        values.setdefault("name", os.path.splitext(os.path.basename(where))[0])
        p = replace(base, **values)
    else:
        missing = [f for f in ("gpu_memory_gb", "hbm_gbps", "gpu_tflops") if f not in values]
        if missing:
            raise HardwareError(f"{where}: missing field(s) {', '.join(missing)} "
                                f"(or give \"base\": a built-in profile to start from)")
        values.setdefault("name", os.path.splitext(os.path.basename(where))[0])
        p = Profile(**values)
    if p.link_efficiency > 1:
        raise HardwareError(f"{where}: link_efficiency must be in (0, 1]")
    return p


def resolve(spec: "str | Profile | dict | None") -> Profile:
    """A profile name, a JSON file path, a dict, a Profile, or None (the default profile)."""
    if spec is None:
        return PROFILES[DEFAULT]
    if isinstance(spec, Profile):
        return spec
    if isinstance(spec, dict):
        return _from_dict(spec, "hardware profile")
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise HardwareError(f"hardware must be a profile name, a JSON file path, a dict or a "
                            f"Profile, not {type(spec).__name__}")
    key = ALIASES.get(spec.strip().lower(), spec.strip().lower())
    if key in PROFILES:
        return PROFILES[key]
    if os.path.exists(spec):
        try:       # bounded: a profile is a few hundred bytes; /dev/zero or a pipe cannot hang
            d = shapes.read_json_file(spec, spec, "a hardware profile (JSON)")
        except shapes.JSONFileError as e:
            raise HardwareError(str(e)) from None
        except ValueError as e:
            raise HardwareError(f"{spec}: not valid JSON ({e})") from None
        except OSError as e:
            raise HardwareError(f"{spec}: cannot read ({e.strerror or e})") from None
        return _from_dict(d, spec)
    raise HardwareError(f"unknown hardware '{spec}': give one of {', '.join(PROFILES)} "
                        f"or the path of a profile JSON file")


# ------------------------------------------------------------------ costs
@dataclass(frozen=True)
class Costs:
    """Milliseconds per operation for one model on one machine."""
    profile: Profile
    expert_bytes: int
    expert_flops_per_token: float
    dense_bytes_per_layer: float      # non-expert weights read per MoE layer (attention, router, shared experts)

    def transfer_ms(self, nbytes: float | None = None) -> float:
        b = self.expert_bytes if nbytes is None else nbytes
        p = self.profile
        return p.transfer_latency_us * 1e-3 + b / (p.effective_link_gbps * 1e9) * 1e3

    def gpu_expert_ms(self, tokens: int = 1) -> float:
        p = self.profile
        mem = self.expert_bytes / (p.hbm_gbps * 1e9) * 1e3
        flop = tokens * self.expert_flops_per_token / (p.gpu_tflops * 1e12) * 1e3
        return p.kernel_launch_us * 1e-3 + max(mem, flop)

    def cpu_expert_ms(self, tokens: int = 1) -> float:
        p = self.profile
        mem = self.expert_bytes / (p.cpu_mem_gbps * 1e9) * 1e3
        flop = tokens * self.expert_flops_per_token / (p.cpu_gflops * 1e9) * 1e3
        return max(mem, flop)

    def expert_ms_at(self, nbytes: float, tokens: int = 1) -> float:
        """An expert computed on the GPU from ``nbytes`` of weights (a lower-precision copy
        reads fewer bytes; the arithmetic is the same: weight-only quantized kernels
        dequantize in registers and multiply in fp16)."""
        p = self.profile
        mem = nbytes / (p.hbm_gbps * 1e9) * 1e3
        flop = tokens * self.expert_flops_per_token / (p.gpu_tflops * 1e12) * 1e3
        return p.kernel_launch_us * 1e-3 + max(mem, flop)

    def device_copy_ms(self, nbytes: float) -> float:
        """Reading and writing ``nbytes`` in device memory (a copy or a requantization
        between two gpu tiers)."""
        return 2.0 * nbytes / (self.profile.hbm_gbps * 1e9) * 1e3

    def disk_read_ms(self, nbytes: float | None = None) -> float:
        """One read of ``nbytes`` (an expert by default) from the disk tier's drive."""
        b = self.expert_bytes if nbytes is None else nbytes
        p = self.profile
        return p.disk_latency_us * 1e-3 + b / (p.disk_read_gbps * 1e9) * 1e3

    def dense_ms(self, tokens: int = 1) -> float:
        """The non-expert part of one MoE layer (weights read from device memory)."""
        p = self.profile
        mem = self.dense_bytes_per_layer / (p.hbm_gbps * 1e9) * 1e3
        flop = tokens * self.dense_bytes_per_layer / (p.gpu_tflops * 1e12) * 1e3  # 2 flops/param, 2 bytes/param
        return max(mem, flop)

    def to_dict(self) -> dict:
        return {"profile": self.profile.name, "expert_bytes": self.expert_bytes,
                "transfer_ms": self.transfer_ms(), "gpu_expert_ms": self.gpu_expert_ms(),
                "cpu_expert_ms": self.cpu_expert_ms(), "dense_ms_per_layer": self.dense_ms(),
                "disk_read_ms": self.disk_read_ms()}


DEFAULT_EXPERT_BYTES = int(1.2e9)   # schema default of cache.expert_size_gb when nothing is known


def costs_for(profile: Profile, *, model: str = "", expert_bytes: int = 0,
              shape: shapes.ModelShape | None = None) -> Costs:
    """Costs for a model: its shape when known (a preset name or given), else only its
    expert size (flops from bytes at 2 bytes per parameter, no skeleton time)."""
    if shape is None and model:
        shape = shapes.preset(model)
        if shape is not None and expert_bytes and expert_bytes != shape.expert_bytes:
            shape = None      # same family name, different size (e.g. a tiny test model)
    if shape is not None:
        eb = expert_bytes or shape.expert_bytes
        params = eb / shape.bytes_per_param
        attn = 4 * shape.hidden_size * shape.hidden_size
        router = shape.hidden_size * shape.num_experts
        dense = (attn + router + shape.shared_experts * shape.expert_params) * shape.bytes_per_param
        return Costs(profile, int(eb), 2.0 * params, float(dense))
    eb = expert_bytes or DEFAULT_EXPERT_BYTES
    return Costs(profile, int(eb), float(eb), 0.0)


def tier_arguments(ir, header) -> dict:
    """The runtime's layer and memory-tier arguments for a trace with ``header`` (``{}`` for
    a policy that needs neither): the MoE layers' decoder-layer ids (bands and per-layer pins
    name them) and, with tiers, the checkpoint's precision (the one the trace recorded; else
    its model's, when known; else 16-bit). Replay, shadow mode and live offload in an engine
    all build their runtime with these, so they decide alike."""
    if not getattr(ir, "tiered", False):
        return {"layer_ids": tuple(header.moe_layers)} if getattr(ir, "layer_pins", ()) else {}
    shape = header.shape
    bits = header.stored_bits or (int(shape.bytes_per_param * 8) if shape is not None else None)
    return {"layer_ids": tuple(header.moe_layers),
            "stored_bits": bits if bits in (16, 32) else None}


def costs_for_trace(profile: Profile, ir, header) -> tuple[int, Costs]:
    """(expert bytes, costs) for replaying a policy over a trace (or a live engine's stream)
    with ``header``: the expert size of :func:`expert_bytes_for`; the model's shape (the
    header's, filled by mpl.sim.tracemodel.with_model, else the preset its model names)
    prices the dense part and the expert's FLOPs, unless the policy sets another expert
    size (then only that size is known). The one place replay and the vLLM shadow get
    their costs from, so the same trace gets the same prices in both."""
    eb = expert_bytes_for(ir, header)
    shape = header.shape if header.shape is not None else shapes.preset(header.model or "")
    if shape is not None and eb != shape.expert_bytes:
        shape = None
    return eb, costs_for(profile, expert_bytes=eb, shape=shape)


def runtime_cost_model(costs: Costs):
    """The runtime's CostModel (mpl.runtime.cost) with these numbers, for the hybrid
    schedule's decisions (the same numbers the timeline charges)."""
    from mpl.runtime.cost import CostModel

    p = costs.profile
    return CostModel(link_gbps=p.effective_link_gbps, cpu_gflops=p.cpu_gflops,
                     gpu_gflops=p.gpu_tflops * 1e3, expert_flops=costs.expert_flops_per_token,
                     latency_ms=p.transfer_latency_us * 1e-3)


def expert_bytes_for(ir, header) -> int:
    """An explicit cache.expert_size_gb wins; else the trace header; else 1.2 GB."""
    gb = ir.get("cache.expert_size_gb") if ir is not None else None
    if gb:
        return int(gb * 1e9)
    if header.expert_bytes:
        return int(header.expert_bytes)
    return DEFAULT_EXPERT_BYTES
