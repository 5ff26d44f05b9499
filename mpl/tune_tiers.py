"""The tuner's memory-tier search (``mplc tune --device-memory X [--host-memory Y] [--disk
NAME]``; SPEC §12): where the model's experts fit, and the hierarchies the search adds as
candidates. docs/simulation.md, "Tuning memory tiers".

Given the device memory the experts may use, the host memory and the trace's model (its
expert size), one of three cases holds:

* **device**: every expert fits on the device: no hierarchy is needed; the tuner tunes the
  cache as without these options (at every expert);
* **host**: the experts fit in host memory (less :data:`HOST_RESERVE`), not on the device:
  the plain device cache over host memory (the usual search) is ranked beside hierarchies
  that split the device memory between a full-precision ``hot`` tier and a lower-precision
  ``warm`` gpu tier (``int8`` or ``int4``: bytes per expert from the precision; the hot
  tier's share of the device memory one of :data:`HOT_SHARES`), over host memory;
* **disk**: the experts do not fit in host memory: every candidate has a ``ram`` host tier
  of the host memory less the reserve over a ``ssd`` disk tier (the hardware profile's disk,
  or ``--disk``), and the device part is searched as above (one full-precision gpu tier, or
  a hot / warm split).

Each hierarchy candidate takes the eviction rule, prefetch and schedule of the best plain
candidate (and plain LRU's), so the tier structure is what the candidates differ in; they go
through the same successive halving as every other candidate (:func:`mpl.tune_search.
tier_halving`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpl import schema

#: the share of the host memory kept for the operating system, the process and the pinned
#: staging buffers: a host tier holds the rest
HOST_RESERVE = 0.10
#: the hot tier's shares of the device memory in a hot / warm split
HOT_SHARES = ((3, 4), (1, 2), (1, 4))
#: the warm tier's precisions tried
WARM_DTYPES = ("int8", "int4")
#: a candidate's blocks key holding its memory tiers (:func:`hierarchy_text` writes it)
HIERARCHY = "hierarchy"

CASES = ("device", "host", "disk")


class TierSearchError(ValueError):
    """A tier search that cannot run on what it was given (the message says which option)."""


def size_of(text, option: str) -> int:
    """``"24GiB"`` -> bytes; TierSearchError naming ``option`` for anything else (a size
    needs a unit: a bare number could be slots or bytes)."""
    t = str(text).strip()
    b = schema.parse_size(t)
    if b is None:
        units = ", ".join(sorted(schema.SIZE_UNITS))
        raise TierSearchError(f"{option} '{text}': give a size with a unit ({units}), e.g. 24GiB")
    return b


def _gib(b: float) -> str:
    return f"{b / 2 ** 30:,.1f} GiB"


@dataclass
class TierPlan:
    """Where the experts fit and what the tier search tries (see the module doc)."""
    case: str                       # "device", "host" or "disk"
    device_bytes: int               # device memory for experts
    host_bytes: int                 # host memory
    host_source: str                # "--host-memory" or "hardware profile NAME"
    expert_bytes: int
    every: int                      # experts of the model (MoE layers x experts)
    device_slots: int               # experts of full precision the device memory holds
    disk: str                       # the disk profile (a hw.DISKS name)
    disk_source: str                # "--disk" or "hardware profile NAME"
    top_k: int = 1
    stored_bits: int = 16           # the checkpoint's precision
    candidates: int = 0             # hierarchies the search added

    @property
    def model_bytes(self) -> int:
        return self.every * self.expert_bytes

    @property
    def host_tier_bytes(self) -> int:
        """What a host tier may hold: the host memory less the reserve."""
        return int(self.host_bytes * (1 - HOST_RESERVE))

    def message(self) -> str:
        m = (f"{self.every:,} x {self.expert_bytes / 2 ** 20:,.1f} MiB = "
             f"{_gib(self.model_bytes)}")
        if self.case == "device":
            return (f"the model's experts fit on the device: no hierarchy needed ({m} in "
                    f"{_gib(self.device_bytes)}); the cache is tuned as without --device-memory")
        host = (f"host memory {_gib(self.host_bytes)} ({self.host_source}) less the "
                f"{HOST_RESERVE:.0%} reserve = {_gib(self.host_tier_bytes)}")
        if self.case == "host":
            return (f"the model's experts fit in host memory, not on the device ({m}; {host}; "
                    f"the device {_gib(self.device_bytes)}: {self.device_slots:,} experts): the "
                    f"plain cache over host memory against hierarchies with a lower-precision "
                    f"gpu warm tier")
        return (f"the model's experts do not fit in host memory: the model needs a disk tier "
                f"({m}; {host}); every candidate has a host tier of "
                f"{_gib(self.host_tier_bytes)} over the disk ({self.disk}, {self.disk_source}), "
                f"the device part ({_gib(self.device_bytes)}) searched as one gpu tier or a "
                f"hot / lower-precision warm split")

    def to_dict(self) -> dict:
        return {"case": self.case, "message": self.message(), "device_bytes": self.device_bytes,
                "host_bytes": self.host_bytes, "host_source": self.host_source,
                "host_reserve": HOST_RESERVE, "host_tier_bytes": self.host_tier_bytes,
                "expert_bytes": self.expert_bytes, "experts": self.every,
                "model_bytes": self.model_bytes, "device_slots": self.device_slots,
                "disk": self.disk if self.case == "disk" else None,
                "disk_source": self.disk_source if self.case == "disk" else None,
                "candidates": self.candidates}


def plan(header, device_memory, host_memory=None, disk=None, profile=None) -> TierPlan:
    """The :class:`TierPlan` for a trace's ``header`` (its model known), the sizes as the
    options give them, and the hardware ``profile`` (a resolved hw.Profile: its host memory
    and disk when the options give none). TierSearchError for what cannot be searched."""
    from mpl.sim.tracemodel import expert_size_source
    from mpl.timemodel import hardware as hw

    profile = profile if profile is not None else hw.resolve(None)
    if expert_size_source(header) == "default":
        raise TierSearchError("--device-memory needs the model's expert size, and the trace's "
                              "header names no model it knows: give --model PRESET|config.json")
    eb = int(header.expert_bytes)
    dev = size_of(device_memory, "--device-memory")
    if host_memory is None:
        host, host_src = int(profile.host_memory_gb * 1e9), f"hardware profile {profile.name}"
    else:
        host, host_src = size_of(host_memory, "--host-memory"), "--host-memory"
    if disk is None:
        disk_name, disk_src = profile.disk, f"hardware profile {profile.name}"
    else:
        if disk not in hw.DISKS:
            raise TierSearchError(f"--disk '{disk}': known disks: {', '.join(hw.DISKS)}")
        disk_name, disk_src = disk, "--disk"
    every = header.num_moe_layers * header.num_experts
    slots = dev // eb
    shape = header.shape
    stored = int(shape.bytes_per_param * 8) if shape is not None else 16
    p = TierPlan("device", dev, host, host_src, eb, every, slots, disk_name, disk_src,
                 top_k=header.top_k, stored_bits=stored if stored in (16, 32) else 16)
    if slots >= every:
        return p
    if slots < header.top_k:
        raise TierSearchError(f"--device-memory {_gib(dev)} holds {slots} experts of "
                              f"{eb / 2 ** 20:,.1f} MiB, fewer than the {header.top_k} a "
                              f"dispatch uses (top-k): give more device memory")
    if dev > host:
        raise TierSearchError(f"--device-memory ({_gib(dev)}) is larger than the host memory "
                              f"({_gib(host)}, {host_src}): every expert reaches the device "
                              f"through host memory; give the machine's host memory "
                              f"(--host-memory)")
    p.case = "host" if p.model_bytes <= p.host_tier_bytes else "disk"
    if p.case == "disk" and p.host_tier_bytes < eb:
        raise TierSearchError(f"the host memory less its {HOST_RESERVE:.0%} reserve "
                              f"({_gib(p.host_tier_bytes)}) holds no expert of "
                              f"{eb / 2 ** 20:,.1f} MiB: give more host memory")
    return p


def profile_for(p: TierPlan, profile):
    """The hardware profile replays use: ``profile`` with the plan's host memory and disk."""
    from dataclasses import replace

    from mpl.timemodel import hardware as hw

    return replace(profile, host_memory_gb=p.host_bytes / 1e9, disk=p.disk, **hw.DISKS[p.disk])


# ------------------------------------------------------------------ candidates
def _mib(b: int) -> str:
    return f"{max(1, int(b // 2 ** 20))}MiB"


def _device_parts(p: TierPlan) -> list[tuple]:
    """The device part of a hierarchy: ``((name, params), ...)`` of its gpu tiers."""
    out = []
    if p.case == "disk":                 # one full-precision tier of the whole device memory
        out.append((("hot", (("location", "gpu"), ("capacity", p.device_slots))),))
    bits = schema.DTYPES
    for dtype in WARM_DTYPES:
        for num, den in HOT_SHARES:
            hot = p.device_bytes * num // den // p.expert_bytes
            warm_bytes = p.device_bytes - hot * p.expert_bytes
            per = p.expert_bytes * bits[dtype].bits / p.stored_bits
            warm = int(warm_bytes // per)
            if hot < p.top_k or warm < 1:
                continue
            if hot + warm >= p.every:
                warm = p.every - hot          # (a tier never holds more than every expert)
                if warm < 1:
                    continue
            out.append((("hot", (("location", "gpu"), ("capacity", hot))),
                        ("warm", (("location", "gpu"), ("dtype", dtype), ("capacity", warm)))))
    return out


def candidates(p: TierPlan, bases: list[dict]) -> list[dict]:
    """The hierarchies for ``p`` with the eviction, prefetch and schedule of each of
    ``bases`` (plain candidates' blocks); [] in the device case."""
    if p.case == "device":
        return []
    lower = []
    if p.case == "disk":
        lower = [("ram", (("location", "cpu"), ("capacity", _mib(p.host_tier_bytes)))),
                 ("ssd", (("location", "disk"),))]
    out, seen = [], set()
    tier_rules = {e.name for e in schema.NESTED_PARAMS["hierarchy.eviction"].enum}
    for base in bases:
        rule = base.get("cache", {}).get("eviction", "lru")
        if rule not in tier_rules:
            rule = "lru"
        for device in _device_parts(p):
            tiers = tuple(device) + tuple(lower)
            moves = (("demote", "hot", "warm", "in_place_requant"),) if len(device) > 1 else ()
            blocks = {HIERARCHY: {"tiers": tiers, "moves": moves, "eviction": rule}}
            hot = device[0][1][1][1]
            pf = base.get("prefetch")
            if pf and int(pf.get("budget", 1)) <= hot:
                blocks["prefetch"] = dict(pf)
            if "schedule" in base:
                blocks["schedule"] = dict(base["schedule"])
            key = repr(sorted((b, sorted(v.items())) for b, v in blocks.items()))
            if key not in seen:
                seen.add(key)
                out.append(blocks)
    p.candidates = len(out)
    return out


def hierarchy_text(h: dict, indent: str = "    ") -> str:
    """The ``hierarchy { ... }`` block of a candidate's :data:`HIERARCHY` entry."""
    lines = [f"{indent}hierarchy {{"]
    for name, params in h["tiers"]:
        body = "  ".join(f"{k} = {v}" for k, v in params)
        lines.append(f"{indent}    tier {name} {{ {body} }}")
    for event, a, b, mechanism in h["moves"]:
        lines.append(f"{indent}    on {event}({a} -> {b}) {{ mechanism = {mechanism} }}")
    if h["eviction"] != schema.NESTED_PARAMS["hierarchy.eviction"].default:
        lines.append(f"{indent}    eviction = {h['eviction']}")
    lines.append(f"{indent}}}")
    return "\n".join(lines) + "\n"


def describe(h: dict) -> str:
    """``hot 40 + warm 96 int4, ram 57,600MiB, ssd (lru)``: a hierarchy in one line."""
    parts = []
    for name, params in h["tiers"]:
        d = dict(params)
        what = name
        if "capacity" in d:
            what += f" {d['capacity']}"
        if "dtype" in d:
            what += f" {d['dtype']}"
        parts.append(what)
    return "tiers " + " / ".join(parts) + f" ({h['eviction']})"


def top_slots(h: dict) -> int:
    """The top tier's slots (its capacity: the candidates write slots on gpu tiers)."""
    return int(dict(h["tiers"][0][1])["capacity"])


@dataclass
class TierReport:
    """What the report adds for a tier search: the plan, the winner's per-tier rows (a
    replay's ``stats["tiers"]``) and its approximate accesses."""
    plan: TierPlan
    winner_rows: list = field(default_factory=list)
    approximate: int = 0
    approximate_by_dtype: dict = field(default_factory=dict)
    accesses: int = 0
    winner_tiered: bool = False
    plain_feasible: bool = True       # the plain cache's host memory holds every expert

    def to_dict(self) -> dict:
        out = self.plan.to_dict()
        out.update(winner_tiered=self.winner_tiered, plain_feasible=self.plain_feasible,
                   winner_tiers=self.winner_rows, approximate_computes=self.approximate,
                   approximate_by_dtype=self.approximate_by_dtype)
        return out
