"""The tuner's memory-tier search (``mplc tune --device-memory X [--host-memory Y] [--disk
NAME]``; SPEC §12): where the model's experts fit, and the hierarchies the search adds as
candidates. docs/simulation.md, "Tuning memory tiers".

**The device's memory** (``--device-memory``) holds more than expert slots: the model's
skeleton (everything but the routed experts: :attr:`mpl.shapes.ModelShape.skeleton_bytes`,
from the preset the trace names or ``--model``; unknown: not counted, and the plan says so),
the KV-cache reserve (:func:`mpl.shapes.default_kv_reserve`, or ``--kv-reserve``), and what
the live mechanism allocates besides the cache slots (:func:`mpl.mechanism.footprint.
device_parts`: the slot pool's transient entries, as many as attach allocates by default
on a GPU (:func:`mpl.mechanism.footprint.default_stream_slots`), and its all-zero entry;
each low-precision tier's area
of quantised records, :func:`mpl.mechanism.footprint.quant_record_bytes`). What is left is
the **room for experts**: a full-precision slot costs one pool entry, a low-precision slot
one record. One of three cases holds:

* **device**: every expert fits in the room: no hierarchy is needed; the tuner tunes the
  cache as without these options (at every expert);
* **host**: the experts fit in host memory (less :data:`HOST_RESERVE`), not on the device:
  the plain device cache over host memory (the usual search) is ranked beside hierarchies;
* **disk**: the experts do not fit in host memory: every candidate has a ``ram`` host tier
  of the host memory less the reserve over a ``ssd`` disk tier (the hardware profile's disk,
  or ``--disk``).

The hierarchies (their device part; over host memory, or the ram / ssd tiers):

* **split**: a full-precision ``hot`` gpu tier and an ``int8`` or ``int4`` ``warm`` gpu tier
  sharing the room (the hot tier's share one of :data:`HOT_SHARES`); in the disk case also
  one full-precision gpu tier of the whole room;
* **ladder**: a ``hot`` tier and a ``warm`` tier with ``dtype_ladder = [int8, int4]`` (its
  capacity the slots at int8: a key enters at int8 and is requantized to int4 as it grows
  cold, so the tier holds more keys than at int8 alone);
* **bands** (``per_layer_hierarchy``): the MoE layers in :data:`BAND_COUNTS` contiguous
  bands, each with its own tiers, the room shared by the trace's per-layer LRU miss curves
  (:func:`layer_curves`, on at most :data:`CURVE_DISPATCHES` dispatches): slots go, a run
  at a time, to the layer whose next slots gain the most hits per slot (:func:`allocate`),
  so the layers whose working set is larger get more; the bands split where the layers' working sets change most
  (:func:`working_sets`, :func:`bands`), each band the slots of its layers: a
  full-precision gpu tier, or a hot / int4 warm split.

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
#: the rungs of a ladder warm tier (``dtype_ladder``), first rung first
LADDER = ("int8", "int4")
#: how many contiguous bands of layers a ``per_layer_hierarchy`` candidate has
BAND_COUNTS = (2, 4)
#: the per-layer miss curves are measured on at most this many dispatches of the trace
CURVE_DISPATCHES = 20000
#: the candidate families (:func:`candidates`)
FAMILIES = ("split", "ladder", "bands")
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
        raise TierSearchError(f"{option} '{text}': give a size with a unit ({units}), e.g. "
                              f"24GiB: {schema.SIZE_RULE}")
    return b


def _gib(b: float) -> str:
    return f"{b / 2 ** 30:,.1f} GiB"


@dataclass
class TierPlan:
    """Where the experts fit and what the tier search tries (see the module doc)."""
    case: str                       # "device", "host" or "disk"
    device_bytes: int               # the device's memory
    host_bytes: int                 # host memory
    host_source: str                # "--host-memory" or "hardware profile NAME"
    expert_bytes: int
    every: int                      # experts of the model (MoE layers x experts)
    device_slots: int               # full-precision slots the room for experts holds
    disk: str                       # the disk profile (a hw.DISKS name)
    disk_source: str                # "--disk" or "hardware profile NAME"
    top_k: int = 1
    stored_bits: int = 16           # the checkpoint's precision
    candidates: int = 0             # hierarchies the search added
    families: dict = field(default_factory=dict)   # of them, how many of each family()
    num_layers: int = 1             # MoE layers
    num_experts: int = 1            # experts per MoE layer
    moe_layers: tuple = ()          # the decoder-layer id of each MoE-layer ordinal
    skeleton_bytes: int = 0         # the non-expert weights on the device
    skeleton_source: str = ""       # "model NAME", or "unknown: not counted"
    kv_reserve: int = 0             # kept for the KV cache and activations
    kv_source: str = ""             # "--kv-reserve" or "default: 10% of the device, >= 1 GiB"
    stream_slots: int = 0           # the slot pool's transient entries (attach's default)
    entry_bytes: int = 0            # one slot-pool entry (an expert, aligned)
    record_bytes: dict = field(default_factory=dict)   # dtype -> one low-precision record
    record_source: str = ""         # "the model's matrices" or "the expert size x bits"

    @property
    def model_bytes(self) -> int:
        return self.every * self.expert_bytes

    @property
    def host_tier_bytes(self) -> int:
        """What a host tier may hold: the host memory less the reserve."""
        return int(self.host_bytes * (1 - HOST_RESERVE))

    @property
    def transient_bytes(self) -> int:
        """The slot pool's entries besides the cache slots: ``stream_slots`` transient
        entries and the one of a streamed pass (:func:`mpl.mechanism.footprint.device_parts`)."""
        return (self.stream_slots + 1) * self.entry_bytes

    @property
    def room(self) -> int:
        """The device memory left for expert slots (full-precision pool entries and
        low-precision records): the device less the skeleton, the KV reserve and the
        transient entries."""
        return self.device_bytes - self.skeleton_bytes - self.kv_reserve - self.transient_bytes

    def footprint(self, gpu_slots: int, lowprec=()):
        """The device's :class:`mpl.mechanism.footprint.Footprint` of a candidate with
        ``gpu_slots`` full-precision slots and ``lowprec`` ``(name, dtype, slots)`` tiers
        (each at most every expert): the skeleton, the KV reserve, the slot pool and the
        low-precision areas."""
        from mpl.mechanism.footprint import DEVICE, Footprint, device_parts

        fp = Footprint()
        fp.add("the skeleton", DEVICE, self.skeleton_bytes)
        fp.add("the KV-cache reserve", DEVICE, self.kv_reserve)
        device_parts(fp, DEVICE, entry=self.entry_bytes, num_slots=gpu_slots,
                     stream_slots=self.stream_slots,
                     lowprec=[(n, d, k, self.record_bytes[d]) for n, d, k in lowprec])
        return fp

    def accounting(self) -> str:
        """The device memory's split, in words."""
        return (f"device {_gib(self.device_bytes)} less the skeleton "
                f"{_gib(self.skeleton_bytes)} ({self.skeleton_source}), the KV-cache reserve "
                f"{_gib(self.kv_reserve)} ({self.kv_source}) and the slot pool's "
                f"{self.stream_slots + 1} transient entries {_gib(self.transient_bytes)} = "
                f"{_gib(max(self.room, 0))} for experts: {self.device_slots:,} at full precision")

    def message(self) -> str:
        m = (f"{self.every:,} x {self.expert_bytes / 2 ** 20:,.1f} MiB = "
             f"{_gib(self.model_bytes)}")
        if self.case == "device":
            return (f"the model's experts fit on the device: no hierarchy needed ({m}; "
                    f"{self.accounting()}); the cache is tuned as without --device-memory")
        host = (f"host memory {_gib(self.host_bytes)} ({self.host_source}) less the "
                f"{HOST_RESERVE:.0%} reserve = {_gib(self.host_tier_bytes)}")
        if self.case == "host":
            return (f"the model's experts fit in host memory, not on the device ({m}; {host}; "
                    f"{self.accounting()}): the plain cache over host memory against "
                    f"hierarchies with lower-precision gpu tiers and per-layer bands")
        return (f"the model's experts do not fit in host memory: the model needs a disk tier "
                f"({m}; {host}; {self.accounting()}); every candidate has a host tier of "
                f"{_gib(self.host_tier_bytes)} over the disk ({self.disk}, {self.disk_source}), "
                f"the device part searched as one gpu tier, a hot / lower-precision warm "
                f"split, a ladder or per-layer bands")

    def to_dict(self) -> dict:
        return {"case": self.case, "message": self.message(), "device_bytes": self.device_bytes,
                "host_bytes": self.host_bytes, "host_source": self.host_source,
                "host_reserve": HOST_RESERVE, "host_tier_bytes": self.host_tier_bytes,
                "expert_bytes": self.expert_bytes, "experts": self.every,
                "model_bytes": self.model_bytes, "device_slots": self.device_slots,
                "skeleton_bytes": self.skeleton_bytes, "skeleton_source": self.skeleton_source,
                "kv_reserve": self.kv_reserve, "kv_source": self.kv_source,
                "stream_slots": self.stream_slots, "transient_bytes": self.transient_bytes,
                "entry_bytes": self.entry_bytes, "expert_room": self.room,
                "record_bytes": dict(self.record_bytes), "record_source": self.record_source,
                "disk": self.disk if self.case == "disk" else None,
                "disk_source": self.disk_source if self.case == "disk" else None,
                "candidates": self.candidates, "families": dict(self.families)}


def _matrices(shape) -> list[tuple[int, int]]:
    """An expert's 2-D parameters as they are quantised (``[output, input]``): the gate and
    up projections (fused, as transformers holds them) and the down projection."""
    up = (2 if shape.has_gate else 1) * shape.intermediate_size
    return [(up, shape.hidden_size), (shape.hidden_size, shape.intermediate_size)]


def plan(header, device_memory, host_memory=None, disk=None, profile=None,
         kv_reserve=None) -> TierPlan:
    """The :class:`TierPlan` for a trace's ``header`` (its model known), the sizes as the
    options give them (``kv_reserve``: a size; None: the default reserve), and the hardware
    ``profile`` (a resolved hw.Profile: its host memory and disk when the options give
    none). TierSearchError for what cannot be searched."""
    from mpl import shapes
    from mpl.mechanism.footprint import ALIGN, default_stream_slots, quant_record_bytes
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
    if kv_reserve is None:
        kv, kv_src = shapes.default_kv_reserve(dev), "default: 10% of the device, at least 1 GiB"
    else:
        kv, kv_src = size_of(kv_reserve, "--kv-reserve"), "--kv-reserve"
    L, E = header.num_moe_layers, header.num_experts
    every = L * E
    shape = header.shape
    stored = int(shape.bytes_per_param * 8) if shape is not None else 16
    stored = stored if stored in (16, 32) else 16
    if shape is not None and shape.skeleton_params is not None:
        skeleton, skeleton_src = shape.skeleton_bytes, f"model {shape.name}"
    else:
        skeleton, skeleton_src = 0, "unknown for this model: not counted"
    bits = schema.DTYPES
    if shape is not None and shape.expert_bytes == eb:
        records = {d: quant_record_bytes(_matrices(shape), d) for d in WARM_DTYPES}
        record_src = f"the matrices of {shape.name}"
    else:
        records = {d: int(eb * bits[d].bits / stored) for d in WARM_DTYPES}
        record_src = "the expert size at the precision's bits (no matrix shapes known)"
    entry = eb + ALIGN
    p = TierPlan("device", dev, host, host_src, eb, every, 0, disk_name, disk_src,
                 top_k=header.top_k, stored_bits=stored, num_layers=L, num_experts=E,
                 moe_layers=tuple(header.moe_layers), skeleton_bytes=skeleton,
                 skeleton_source=skeleton_src, kv_reserve=kv, kv_source=kv_src,
                 stream_slots=default_stream_slots(E, header.top_k),
                 entry_bytes=entry, record_bytes=records,
                 record_source=record_src)
    p.device_slots = max(p.room, 0) // entry
    if p.device_slots >= every:
        return p
    if p.device_slots < header.top_k:
        raise TierSearchError(f"--device-memory {_gib(dev)} leaves {_gib(max(p.room, 0))} for "
                              f"experts ({p.accounting()}), fewer than the {header.top_k} a "
                              f"dispatch uses (top-k) of {eb / 2 ** 20:,.1f} MiB: give more "
                              f"device memory")
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


def _gpu(name: str, slots: int, *extra) -> tuple:
    return (name, (("location", "gpu"), *extra, ("capacity", slots)))


def _device_parts(p: TierPlan, room: int, keys: int, families, whole: bool) -> list[tuple]:
    """The device parts of hierarchies in ``room`` bytes for ``keys`` experts: ``((name,
    params), ...)`` of their gpu tiers. ``whole``: also one full-precision tier of the whole
    room. A full-precision slot costs a pool entry, a low-precision one a record."""
    out = []
    full = room // p.entry_bytes
    if whole and full >= p.top_k:
        out.append((_gpu("hot", min(full, keys - 1)),))
    for num, den in HOT_SHARES:
        hot = room * num // den // p.entry_bytes
        if hot < p.top_k or hot >= keys:
            continue
        left = room - hot * p.entry_bytes
        if "split" in families:
            for dtype in WARM_DTYPES:
                warm = min(int(left // p.record_bytes[dtype]), keys - hot)
                if warm >= 1:
                    out.append((_gpu("hot", hot),
                                _gpu("warm", warm, ("dtype", dtype))))
        if "ladder" in families:
            # the capacity is the slots at the first rung; at the lowest rung the tier holds
            # first / lowest bits times as many keys: never every key of the layers
            per = schema.DTYPES[LADDER[0]].bits // schema.DTYPES[LADDER[-1]].bits
            warm = min(int(left // p.record_bytes[LADDER[0]]), (keys - hot - 1) // per)
            if warm >= 1:
                out.append((_gpu("hot", hot),
                            _gpu("warm", warm, ("dtype_ladder", "[" + ", ".join(LADDER) + "]"))))
    return out


def layer_curves(trace, limit: int = CURVE_DISPATCHES) -> list[list[int]]:
    """Per MoE layer, its LRU hit curve on the first ``limit`` dispatches of ``trace``: entry
    ``c`` the accesses (a dispatch's distinct experts) a cache of ``c`` slots of that layer
    alone would hit (stack distances: an access hits a cache of ``c`` slots when fewer than
    ``c`` other experts of the layer were used since its last use)."""
    h = trace.header
    L, E = h.num_moe_layers, h.num_experts
    stacks = [[] for _ in range(L)]
    hist = [[0] * (E + 1) for _ in range(L)]
    for i, x in enumerate(trace.dispatches):
        if i >= limit:
            break
        st, hs = stacks[x.layer], hist[x.layer]
        for e in x.distinct():
            try:
                d = st.index(e)
            except ValueError:
                st.insert(0, e)
                continue
            hs[d + 1] += 1
            del st[d]
            st.insert(0, e)
    out = []
    for hs in hist:
        run, curve = 0, []
        for c in range(E + 1):
            run += hs[c]
            curve.append(run)
        out.append(curve)
    return out


def allocate(curves: list[list[int]], total: int) -> list[int]:
    """``total`` slots shared among the layers by their hit curves: each step gives the
    layer whose next few slots gain the most hits per slot (the best average gain over any
    run of slots, so a flat stretch before a gain does not stop a layer) those slots; once
    no layer gains, the rest go one at a time to the layer with the fewest. A layer gets at
    most its experts. -> the slots per layer (summing to ``total`` or every expert)."""
    L = len(curves)
    got = [0] * L

    def best(layer, left):
        c, curve = got[layer], curves[layer]
        top, n = 0.0, 0
        for j in range(1, min(len(curve) - 1 - c, left) + 1):
            g = (curve[c + j] - curve[c]) / j
            if g > top:
                top, n = g, j
        return top, n

    left = total
    gains = [best(i, left) for i in range(L)]
    while left > 0:
        i = max(range(L), key=lambda k: (gains[k][0], -got[k], -k))
        g, n = gains[i]
        if n == 0 or n > left:
            gains = [best(k, left) for k in range(L)]
            i = max(range(L), key=lambda k: (gains[k][0], -got[k], -k))
            g, n = gains[i]
        if n == 0:                       # no layer gains: the fewest first
            room = [k for k in range(L) if got[k] < len(curves[k]) - 1]
            if not room:
                break
            i, n = min(room, key=lambda k: (got[k], k)), 1
        got[i] += n
        left -= n
        gains[i] = best(i, left)
    return got


#: a layer's working set: the slots that catch this share of its reuse hits
WORKING_SET_SHARE = 0.9


def working_sets(curves: list[list[int]]) -> list[int]:
    """Per layer, the fewest slots whose LRU hits reach :data:`WORKING_SET_SHARE` of the
    layer's hits with every expert cached (0: a layer with no reuse)."""
    out = []
    for curve in curves:
        want = WORKING_SET_SHARE * curve[-1]
        out.append(next((c for c, h in enumerate(curve) if h >= want and h > 0), 0))
    return out


def bands(slots: list[int], count: int) -> list[tuple[int, int]]:
    """The MoE-layer ordinals in ``count`` contiguous bands ``(first, last)`` whose layers'
    ``slots`` (their working sets) are most alike (least squared deviation from each band's
    mean: the bands split where the layers' working sets change most; of equal splits, the
    one of more even lengths)."""
    L = len(slots)
    pre, pre2 = [0], [0]
    for v in slots:
        pre.append(pre[-1] + v)
        pre2.append(pre2[-1] + v * v)

    def cost(a, b):            # layers a..b-1 (a tie goes to the more even lengths)
        n, s = b - a, pre[b] - pre[a]
        return (pre2[b] - pre2[a]) - s * s / n + 1e-6 * n * n

    inf = float("inf")
    best = [[inf] * (L + 1) for _ in range(count + 1)]
    cut = [[0] * (L + 1) for _ in range(count + 1)]
    best[0][0] = 0.0
    for k in range(1, count + 1):
        for b in range(k, L + 1):
            for a in range(k - 1, b):
                v = best[k - 1][a] + cost(a, b)
                if v < best[k][b] - 1e-9:
                    best[k][b], cut[k][b] = v, a
    out, b = [], L
    for k in range(count, 0, -1):
        a = cut[k][b]
        out.append((a, b - 1))
        b = a
    return out[::-1]


def _lower(p: TierPlan, share: float = 1.0) -> tuple:
    """The tiers below the device part: none (host memory holds every expert), or a ram
    tier of ``share`` of the host tier's bytes over the disk."""
    if p.case != "disk":
        return ()
    return (("ram", (("location", "cpu"), ("capacity", _mib(int(p.host_tier_bytes * share))))),
            ("ssd", (("location", "disk"),)))


def _moves(device) -> tuple:
    return (("demote", "hot", "warm", "in_place_requant"),) if len(device) > 1 else ()


def _band_sets(p: TierPlan, curves) -> list[list[tuple]]:
    """The per-layer-band hierarchies' tier sets: per band count, the room shared by
    :func:`allocate` of the layers' curves, each band one full-precision tier or (a second
    candidate) a hot / int4 warm split at half its room. -> per candidate ``[((first,
    last), tiers), ...]`` in MoE-layer ordinals."""
    L, E = p.num_layers, p.num_experts
    per_layer = allocate(curves, p.device_slots)
    room = max(p.room, 0)
    out = []
    for count in BAND_COUNTS:
        if count > L:
            continue
        ranges = bands(working_sets(curves), count)
        got = [sum(per_layer[a:b + 1]) for a, b in ranges]
        for i in range(len(got)):          # every band at least top-k slots, from the largest
            while got[i] < p.top_k:
                j = max(range(len(got)), key=lambda k: got[k])
                if got[j] - 1 < p.top_k:
                    break
                got[j] -= 1
                got[i] += 1
        total = sum(got) or 1
        for variant in ("whole", "split"):
            sets, ok = [], True
            for (a, b), n in zip(ranges, got):
                keys = (b - a + 1) * E
                # the band's slots, and its share of what is left below one slot
                broom = n * p.entry_bytes + max(room - total * p.entry_bytes, 0) * n // total
                lower = _lower(p, (b - a + 1) / L)
                if variant == "whole":
                    hot = min(broom // p.entry_bytes, keys - 1)
                    if hot < p.top_k:
                        ok = False
                        break
                    sets.append(((a, b), (_gpu("hot", hot),) + lower))
                else:
                    parts = [d for d in _device_parts(p, broom, keys, ("split",), False)
                             if len(d) == 2 and dict(d[1][1]).get("dtype") == "int4"
                             and d[0][1][1][1] == broom // 2 // p.entry_bytes]
                    if not parts:
                        ok = False
                        break
                    sets.append(((a, b), tuple(parts[0]) + lower))
            if ok and sets and sets not in out:
                out.append(sets)
    return out


def candidates(p: TierPlan, bases: list[dict], curves=None, families=FAMILIES) -> list[dict]:
    """The hierarchies for ``p`` with the eviction, prefetch and schedule of each of
    ``bases`` (plain candidates' blocks); [] in the device case. ``curves``: the trace's
    per-layer hit curves (:func:`layer_curves`; needed for the ``bands`` family);
    ``families``: which of :data:`FAMILIES` to add."""
    if p.case == "device":
        return []
    room = max(p.room, 0)
    sets = [((None, tuple(d) + _lower(p)),)
            for d in _device_parts(p, room, p.every, families, whole=p.case == "disk")]
    if "bands" in families and curves is not None:
        sets += [tuple(bs) for bs in _band_sets(p, curves)]
    out, seen = [], set()
    tier_rules = {e.name for e in schema.NESTED_PARAMS["hierarchy.eviction"].enum}
    for base in bases:
        rule = base.get("cache", {}).get("eviction", "lru")
        if rule not in tier_rules:
            rule = "lru"
        for st in sets:
            if st[0][0] is None:
                tiers = st[0][1]
                h = {"tiers": tiers, "moves": _moves([t for t in tiers if t[0] in ("hot", "warm")]),
                     "eviction": rule}
                hot = tiers[0][1][-1][1]
            else:
                h = {"bands": tuple((p.moe_layers[a], p.moe_layers[b], tiers,
                                     _moves([t for t in tiers if t[0] in ("hot", "warm")]))
                                    for (a, b), tiers in st), "eviction": rule}
                hot = min(tiers[0][1][-1][1] for _r, tiers in st)
            blocks = {HIERARCHY: h}
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
    p.families = {}
    for c in out:
        f = family(c[HIERARCHY])
        p.families[f] = p.families.get(f, 0) + 1
    return out


def family(h: dict) -> str:
    """Which of :data:`FAMILIES` (or ``"whole"``: one full-precision gpu tier) a
    candidate's :data:`HIERARCHY` entry is."""
    if "bands" in h:
        return "bands"
    params = [dict(pr) for _n, pr in h["tiers"]]
    if any("dtype_ladder" in d for d in params):
        return "ladder"
    if any("dtype" in d for d in params):
        return "split"
    return "whole"


def _tier_lines(tiers, moves, indent: str) -> list[str]:
    lines = []
    for name, params in tiers:
        body = "  ".join(f"{k} = {v}" for k, v in params)
        lines.append(f"{indent}tier {name} {{ {body} }}")
    for event, a, b, mechanism in moves:
        lines.append(f"{indent}on {event}({a} -> {b}) {{ mechanism = {mechanism} }}")
    return lines


def hierarchy_text(h: dict, indent: str = "    ") -> str:
    """The ``hierarchy { ... }`` block of a candidate's :data:`HIERARCHY` entry, or its
    ``per_layer_hierarchy { band ... }`` block (every band with its own eviction)."""
    default = schema.NESTED_PARAMS["hierarchy.eviction"].default
    if "bands" in h:
        lines = [f"{indent}per_layer_hierarchy {{"]
        for first, last, tiers, moves in h["bands"]:
            lines.append(f"{indent}    band layers = {first}..{last} {{")
            lines += _tier_lines(tiers, moves, indent + "        ")
            if h["eviction"] != default:
                lines.append(f"{indent}        eviction = {h['eviction']}")
            lines.append(f"{indent}    }}")
        lines.append(f"{indent}}}")
        return "\n".join(lines) + "\n"
    lines = [f"{indent}hierarchy {{"]
    lines += _tier_lines(h["tiers"], h["moves"], indent + "    ")
    if h["eviction"] != default:
        lines.append(f"{indent}    eviction = {h['eviction']}")
    lines.append(f"{indent}}}")
    return "\n".join(lines) + "\n"


def _describe_tiers(tiers) -> str:
    parts = []
    for name, params in tiers:
        d = dict(params)
        what = name
        if "capacity" in d:
            what += f" {d['capacity']}"
        if "dtype" in d:
            what += f" {d['dtype']}"
        if "dtype_ladder" in d:
            what += f" {d['dtype_ladder']}"
        parts.append(what)
    return " / ".join(parts)


def describe(h: dict) -> str:
    """``tiers hot 40 / warm 96 int4 / ram 57,600MiB / ssd (lru)``, or per band ``bands
    0..15: hot 10 | 16..31: hot 14 (lru)``: a hierarchy in one line."""
    if "bands" in h:
        return "bands " + " | ".join(f"{a}..{b}: {_describe_tiers(t)}"
                                     for a, b, t, _m in h["bands"]) + f" ({h['eviction']})"
    return "tiers " + _describe_tiers(h["tiers"]) + f" ({h['eviction']})"


def top_slots(h: dict) -> int:
    """The top tiers' slots (their capacities: the candidates write slots on gpu tiers;
    with bands, every band's)."""
    if "bands" in h:
        return sum(int(dict(t[0][1])["capacity"]) for _a, _b, t, _m in h["bands"])
    return int(dict(h["tiers"][0][1])["capacity"])


def device_need(p: TierPlan, h: dict):
    """The device :class:`mpl.mechanism.footprint.Footprint` of a candidate's
    :data:`HIERARCHY` entry (:meth:`TierPlan.footprint`): its full-precision gpu tiers in the
    slot pool, its low-precision tiers' records (a ladder's at its first rung: the bytes its
    capacity names), each set of tiers at most its layers' keys."""
    sets = ([(b - a + 1, t) for a, b, t, _m in
             ((p.moe_layers.index(a), p.moe_layers.index(b), t, m) for a, b, t, m in h["bands"])]
            if "bands" in h else [(p.num_layers, h["tiers"])])
    full, low = 0, []
    for layers, tiers in sets:
        keys = layers * p.num_experts
        for name, params in tiers:
            d = dict(params)
            if d.get("location") != "gpu":
                continue
            n = min(int(d["capacity"]), keys)
            dtype = d.get("dtype") or (LADDER[0] if "dtype_ladder" in d else None)
            if dtype in WARM_DTYPES:
                low.append((name, dtype, n))
            else:
                full += n
    return p.footprint(full, low)


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
    winner_family: str | None = None  # the winner's FAMILIES entry ("whole": one gpu tier)
    winner_live: str | None = None    # why HuggingFace attach cannot run the winner yet
    winner_device: dict = field(default_factory=dict)   # its device footprint, by part

    def to_dict(self) -> dict:
        out = self.plan.to_dict()
        out.update(winner_tiered=self.winner_tiered, plain_feasible=self.plain_feasible,
                   winner_family=self.winner_family, winner_live=self.winner_live,
                   winner_device=self.winner_device,
                   winner_tiers=self.winner_rows, approximate_computes=self.approximate,
                   approximate_by_dtype=self.approximate_by_dtype)
        return out
