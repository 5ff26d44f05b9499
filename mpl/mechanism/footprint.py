"""The memory a live attach takes, estimated before anything is allocated, and the refusal,
with the numbers, when it cannot fit.

An attach allocates in a fixed order (``mpl.offload.hf.attach``, the vLLM executor): the
host store's arena first (every expert copied in while the model's own copies still exist),
then the model's copies are released and the device slot pool is allocated. A disk tier's
host cache and a bounce record come before the release too. So the peak is not the sum of
the steady state: :class:`Footprint` keeps the allocations and releases in that order
(``Part``: positive bytes allocated, negative released) and :meth:`Footprint.peak` is the
largest running total per place.

The estimate is checked against what the process can get now (:func:`host_available`: the
kernel's ``MemAvailable``, bounded by a cgroup v2 memory limit; :func:`device_free`: the
CUDA driver's free bytes); unknown figures are not checked. A figure below the need is a
refusal before the model changes, not a ``MemoryError`` half-way or the out-of-memory
killer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

HOST, DEVICE = "host", "device"
#: bytes: every tensor carved from the pinned arena, and every slot-pool entry, starts at this
#: alignment (``mpl.mechanism.device`` allocates with it)
ALIGN = 256
#: bytes: each part of a low-precision record (``mpl.mechanism.lowprec.QuantLayout``) starts
#: at this alignment
QUANT_ALIGN = 64


@dataclass(frozen=True)
class Part:
    """One allocation (``nbytes`` > 0) or release (< 0) of an attach, in ``where``."""
    what: str
    where: str
    nbytes: int


@dataclass
class Footprint:
    parts: list[Part] = field(default_factory=list)

    def add(self, what: str, where: str, nbytes: int) -> None:
        if nbytes:
            self.parts.append(Part(what, where, int(nbytes)))

    def peak(self, where: str) -> int:
        """The largest running total of ``where``'s allocations and releases, in order."""
        run = top = 0
        for p in self.parts:
            if p.where == where:
                run += p.nbytes
                top = max(top, run)
        return top

    def steady(self, where: str) -> int:
        """What ``where`` holds once the attach is done (allocations less releases)."""
        return sum(p.nbytes for p in self.parts if p.where == where)

    def lines(self, where: str) -> str:
        return "; ".join(f"{p.what} {'+' if p.nbytes > 0 else '-'}{_size(abs(p.nbytes))}"
                         for p in self.parts if p.where == where)


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def host_available() -> int | None:
    """The host memory a new allocation can get now, in bytes: Linux's ``MemAvailable``,
    bounded by the process's cgroup v2 limit (``memory.max`` less ``memory.current``) where
    one is set; the free physical pages elsewhere; None when it cannot be known."""
    have = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    have = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        have = None
    if have is None:
        try:
            have = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            have = None
    limit = _cgroup_room()
    if limit is not None:
        have = limit if have is None else min(have, limit)
    return have


def _cgroup_room() -> int | None:
    """``memory.max - memory.current`` of this process's cgroup v2 (None: no limit, or
    not cgroup v2)."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            rel = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
    except OSError:
        return None
    if rel is None:
        return None
    base = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
    limit, used = _read_int(os.path.join(base, "memory.max")), _read_int(os.path.join(base, "memory.current"))
    if limit is None or used is None:      # "max" (no limit) reads as None
        return None
    return max(0, limit - used)


def device_free(device) -> int | None:
    """Free bytes on a CUDA ``device`` (the driver's figure); None for any other device
    (its memory is the host's, counted there)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def place_of(device) -> str:
    """Where a tensor on ``device`` counts: ``DEVICE`` for CUDA, ``HOST`` otherwise."""
    return DEVICE if getattr(device, "type", str(device).split(":")[0]) == "cuda" else HOST


def host_tier_records(level, num_experts: int) -> int:
    """The records a disk tier's host cache holds: its host tier's slots, never more than
    the keys of the level's layers (the runtime numbers that tier's slots in the same
    range: ``SlotFreeList(min(slots, keys))`` in ``mpl.runtime.tiers``), so a host tier
    written as a size far above the model allocates only every expert once."""
    keys = len(level.layers) * int(num_experts) * level.split
    return min(level.tiers[level.read_into].slots, keys)


def tier_host(fp: Footprint, tier_layout, template: dict) -> set:
    """Add what the memory tiers of a live run allocate in host memory before the host
    store (``mpl.mechanism.tiered.TierBuild.open`` and the first transient read): each disk
    tier's host cache (its host tier's slots, one record each) and the bounce record; with
    ``granularity_split = N`` the records are parts (``mpl.mechanism.disk.part_layout``) and
    the bounce holds one per part. Returns the MoE-layer ordinals on disk (they keep no host
    copy)."""
    from .disk import IO_ALIGN, RecordLayout, part_layout

    split = max([lv.split for lv in tier_layout.levels if lv.layers] or [1])
    stride = (RecordLayout(template) if split == 1 else part_layout(template, split)).stride
    on_disk: set = set()
    for lv in tier_layout.levels:
        if lv.layers and lv.disk is not None:
            on_disk.update(lv.layers)
            E = next(iter(template.values())).shape[0]
            fp.add("host tier cache", HOST, stride * host_tier_records(lv, E) + IO_ALIGN)
    if on_disk:
        fp.add("disk bounce record" if split == 1 else f"disk bounce records ({split} parts)",
               HOST, stride * split + IO_ALIGN)
    return on_disk


#: the fewest transient entries the default gives (and per routed expert of a token, four)
TRANSIENT_MIN = 16
TRANSIENT_PER_TOP_K = 4


def default_stream_slots(num_experts: int, top_k: int) -> int:
    """The transient entries a pool gets when the caller names none: enough for a decode
    step of a few tokens without passes (``TRANSIENT_PER_TOP_K`` per routed expert of a
    token, at least ``TRANSIENT_MIN``), never more than the experts of a layer. A prefill
    that streams more is computed in passes, bit-identical to one call under every experts
    implementation (``mpl.offload.engine``, "Passes"), or on the CPU without memory tiers
    from the host store's own layer tensors in one call ("host window"). The same bound on a
    GPU and on the CPU, with memory tiers or without; HuggingFace attach takes one entry per
    expert instead where passes would run on a kernel that does not keep a row's bits
    wherever the row lies (``mpl.offload.hf.pool_stream_slots``)."""
    return max(1, min(num_experts, max(TRANSIENT_MIN, TRANSIENT_PER_TOP_K * top_k)))


#: vLLM's default transient area where the kernel cannot read experts where they are: one
#: entry per this many of the device cache's slots (a quarter of the cache)
TRANSIENT_CACHE_SHARE = 4


def live_stream_slots(num_experts: int, top_k: int, cache_entries: int) -> int:
    """The transient entries vLLM's live offload gets when the caller names none on a GPU
    and with memory tiers: a share of the device cache (one entry per
    ``TRANSIENT_CACHE_SHARE`` of its ``cache_entries``, whole experts), never fewer than
    :func:`default_stream_slots` gives and never more than the experts of a layer. The
    device holds the cache and at most a quarter more (plus the decode floor) however many
    experts a layer has; a step that streams more is computed over groups of its tokens,
    bit for bit one call (``mpl.mechanism.live``, ``row_passes``), with an expert copied
    again when its entry went to another in between."""
    share = -(-max(0, cache_entries) // TRANSIENT_CACHE_SHARE)
    return max(1, min(num_experts, max(default_stream_slots(num_experts, top_k), share)))


def device_parts(fp: Footprint, where: str, *, entry: int, num_slots: int, stream_slots: int,
                 lowprec=()) -> None:
    """Add what a live run allocates on the device for the experts: the slot pool
    (``num_slots`` cache slots, ``stream_slots`` transient entries for STREAM placements and
    the one entry of a streamed dispatch's pass, each ``entry`` bytes) and each low-precision
    gpu tier's area (``lowprec``: ``(name, dtype, slots, record_bytes)``, one record a slot,
    :class:`mpl.mechanism.lowprec.LowPrecArea`)."""
    fp.add("device slot pool", where, (num_slots + stream_slots + 1) * entry)
    for name, dtype, slots, record in lowprec:
        fp.add(f"{dtype} tier '{name}' area", where, slots * record)


def tier_device(fp: Footprint, tier_layout, template: dict, *, where: str, num_slots: int,
                stream_slots: int, align: int, transposed: bool = False) -> None:
    """Add what the memory tiers of a live run allocate for the experts on the device
    (``where``) and for their staging on the host, after the host store: the slot pool
    (:func:`device_parts`; with ``granularity_split = N`` the transient entries of whole
    experts and ``num_slots`` part slots, ``mpl.mechanism.parts.PartPool``), each
    low-precision gpu tier's area (its slots, every one as long as its longest rung's
    record, ``mpl.mechanism.lowprec``; with a split, quantised parts,
    ``mpl.mechanism.lowprec_parts``; a ladder's full-precision first rung an area of whole
    experts) and one staging record of it on the host, each
    second full-precision gpu tier's area (its slots and the stash: whole experts or
    parts, ``mpl.mechanism.gpu_tier``). ``template``: one MoE layer's ``[E, ...]`` expert
    tensors; ``align``: the bytes of padding an entry of the pool takes; ``transposed``:
    the engine's expert matrices are ``[in, out]``."""
    tensors = list(template.values())
    E = int(tensors[0].shape[0])
    entry = sum(t[0].numel() * t.element_size() for t in tensors)
    # (every set a layer uses has the same split: mpl.mechanism.tiered.part_split)
    split = max([lv.split for lv in tier_layout.levels if lv.layers] or [1])
    part = sum(-(-t[0].numel() // split) * t.element_size() for t in tensors)
    lowprec = []
    for lv in tier_layout.levels:
        for t in (lv.tiers if lv.layers else ()):
            dtypes = [r.dtype for r in t.rungs] if t.rungs is not None else [t.dtype]
            rungs = [d for d in dtypes if d in ("int8", "int4")]
            if t.kind == "gpu" and rungs:
                # (its slots as long as its longest low rung's record; with a split it holds
                # quantised parts)
                q = max(part_quant_stride(template, split, d, transposed=transposed) if split > 1
                        else quant_stride(template, d, transposed=transposed) for d in rungs)
                lowprec.append((t.name, rungs[0], min(t.slots, len(lv.layers) * E * split), q))
                if dtypes[0] not in rungs:
                    # a ladder's full-precision first rung: its keys whole, and one more
                    most = min(t.budget // t.rungs[0].bits, len(lv.layers) * E)
                    fp.add(f"tier '{t.name}' {dtypes[0]} rung area", where,
                           (most + 1) * (entry + align))
            elif t.kind == "gpu" and t.index > 0:
                unit = entry if split == 1 else part
                fp.add(f"gpu tier '{t.name}' area", where,
                       (min(t.slots, len(lv.layers) * E * split) + 1) * (unit + align))
    if split > 1:
        fp.add("device slot pool", where, (stream_slots + 1) * (entry + align)
               + (num_slots + 1) * (part + align))
        for name, dtype, slots, q in lowprec:
            fp.add(f"{dtype} tier '{name}' area", where, slots * q)
    else:
        device_parts(fp, where, entry=entry + align, num_slots=num_slots,
                     stream_slots=stream_slots, lowprec=lowprec)
    for _name, dtype, _slots, q in lowprec:
        fp.add(f"{dtype} staging record", HOST, q)


def _up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def quant_record_bytes(matrices, dtype: str, group: int = 64) -> int:
    """The bytes of one expert's low-precision record, from its matrices' shapes alone (no
    torch): ``matrices`` the ``(rows, cols)`` of each 2-D parameter as it is quantised
    (``[output, input]``); codes (int8: a byte an element; int4: two a byte, each row padded
    to whole groups of ``group`` columns) and float32 scales (int8: one a row; int4: one a
    group), each part :data:`QUANT_ALIGN`-aligned, as ``QuantLayout`` lays a record out
    (``mpl.mechanism.quant``; a test holds the two equal)."""
    off = 0
    for rows, cols in matrices:
        off = _quant_matrix(off, rows, cols, dtype, group)
    return max(QUANT_ALIGN, off)


def _quant_matrix(off: int, rows: int, cols: int, dtype: str, group: int) -> int:
    """The end of one quantised matrix's codes and scales laid out from ``off``."""
    if dtype == "int8":
        codes, scales = rows * cols, rows
    else:
        g = min(group, cols)
        groups = -(-cols // g)
        codes, scales = rows * ((groups * g + 1) // 2), rows * groups
    off = _up(off + codes, QUANT_ALIGN)
    return _up(off + 4 * scales, QUANT_ALIGN)


def quant_stride(template: dict, dtype: str, *, transposed: bool = False,
                 group: int = 64) -> int:
    """The bytes of one expert's low-precision record of ``template`` (one MoE layer's
    ``[E, ...]`` tensors), as ``mpl.mechanism.lowprec.QuantLayout`` lays it out: each 2-D
    floating parameter quantised as ``[output, input]`` (``transposed``: its row is
    ``[input, output]``), every other parameter at its own precision, each part
    :data:`QUANT_ALIGN`-aligned (a test holds the two equal)."""
    off = 0
    for t in template.values():
        row = t[0]
        if row.dim() == 2 and row.is_floating_point():
            rows, cols = (row.shape[1], row.shape[0]) if transposed else row.shape
            off = _quant_matrix(off, int(rows), int(cols), dtype, group)
        else:
            off = _up(off + row.numel() * row.element_size(), QUANT_ALIGN)
    return max(QUANT_ALIGN, off)


def part_quant_stride(template: dict, n: int, dtype: str, *, transposed: bool = False,
                      group: int = 64) -> int:
    """The bytes of one quantised part record of ``template`` split into ``n`` parts, as
    ``mpl.mechanism.lowprec_parts.PartQuantLayout`` lays it out: per part, each parameter's
    run of its row (``ceil(numel / n)`` elements) quantised over the whole rows it touches
    (``transposed``: the row is ``[input, output]``), other parameters' runs at their own
    precision, each :data:`QUANT_ALIGN`-aligned; the longest part's (a test holds the two
    equal)."""
    stride = QUANT_ALIGN
    for p in range(int(n)):
        off = 0
        for t in template.values():
            row = t[0]
            numel = row.numel()
            c = max(1, -(-numel // int(n)))
            a, b = min(p * c, numel), min((p + 1) * c, numel)
            if b <= a:
                continue
            if row.dim() == 2 and row.is_floating_point():
                C = int(row.shape[1])
                r0, r1 = a // C, -(-b // C)
                rows, cols = (C, r1 - r0) if transposed else (r1 - r0, C)
                off = _quant_matrix(off, rows, cols, dtype, group)
            else:
                off = _up(off + (b - a) * row.element_size(), QUANT_ALIGN)
        stride = max(stride, off)
    return stride


def live_executor(layers: list[dict], num_slots: int, stream_slots: int, device,
                  tier_layout=None) -> Footprint:
    """What ``mpl.mechanism.live.LiveExecutor`` allocates for ``layers`` (``[E, ...]`` tensors
    per MoE layer) and the caller then releases: the host store's arena (every expert, the
    engine's copies still alive), the slot pool (``num_slots + stream_slots + 1`` entries
    on ``device``), then the engine's own copies released. With memory tiers
    (``tier_layout``, the runtime's): first each disk tier's host cache and the bounce
    record (:func:`tier_host`), and the host store holds the layers in host memory only;
    on the device the tiers' areas and part slots (:func:`tier_device`)."""
    fp = Footprint()
    on_disk = tier_host(fp, tier_layout, layers[0]) if tier_layout is not None else set()
    fp.add("host store", HOST, sum(t.numel() * t.element_size() + ALIGN
                                   for o, layer in enumerate(layers) if o not in on_disk
                                   for t in layer.values()))
    if tier_layout is not None:
        tier_device(fp, tier_layout, layers[0], where=place_of(device), num_slots=num_slots,
                    stream_slots=stream_slots, align=ALIGN * len(layers[0]))
    else:
        entry = sum(t[0].numel() * t.element_size() + ALIGN for t in layers[0].values())
        device_parts(fp, place_of(device), entry=entry, num_slots=num_slots,
                     stream_slots=stream_slots)
    for where in (HOST, DEVICE):
        fp.add("the engine's expert weights released", where,
               -sum(t.numel() * t.element_size() for layer in layers for t in layer.values()
                    if place_of(t.device) == where))
    return fp


def skeleton_load(skeleton: int, layer_experts: int, tier_layout, template: dict,
                  pool_entries: int, device) -> Footprint:
    """What loading a model without its experts takes (``mpl.offload.skeleton``), in order:
    one MoE layer's experts, loaded by transformers to find how the checkpoint makes them
    (released once checked), the skeleton (every weight that is not an expert's), then the
    attach: each disk tier's host cache and the bounce record (:func:`tier_host`), and the
    device slot pool (``pool_entries`` entries on ``device``). The experts themselves are
    never in host memory: nothing of them is counted but the host tier's records."""
    fp = Footprint()
    fp.add("one MoE layer's experts (the probe)", HOST, layer_experts)
    fp.add("the skeleton", HOST, skeleton)
    fp.add("the probe's experts released", HOST, -layer_experts)
    tier_host(fp, tier_layout, template)
    entry = sum(t[0].numel() * t.element_size() + ALIGN for t in template.values())
    fp.add("device slot pool", place_of(device), pool_entries * entry)
    return fp


def refusal(fp: Footprint, what: str, *, host: int | None, device: int | None,
            device_name: str = "the device") -> str | None:
    """Why ``fp`` cannot be allocated with ``host`` bytes of host memory and ``device`` bytes
    free on the device (None: unknown, not checked), in one message with the numbers and
    what to change; None when it fits. ``what``: the attach ("policy 'x' on this model")."""
    need_host, need_dev = fp.peak(HOST), fp.peak(DEVICE)
    if host is not None and need_host > host:
        return (f"{what} needs about {_size(need_host)} more host memory at its peak "
                f"({fp.lines(HOST)}), more than the {_size(host)} available; nothing was "
                f"changed. Lower the cache capacity, give the policy a host tier over a disk "
                f"tier (docs/offload.md, \"Memory tiers live\"), or free host memory")
    if device is not None and need_dev > device:
        return (f"{what} needs about {_size(need_dev)} on {device_name} ({fp.lines(DEVICE)}), "
                f"more than the {_size(device)} free there; nothing was changed. Lower the "
                f"cache capacity (or the transient slots, stream_slots)")
    return None
