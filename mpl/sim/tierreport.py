"""What a replay adds for a policy with memory tiers (SPEC §12): Belady's optimum for the top
tiers, notes on host memory, and the per-tier lines of the text report (the runtime's tier
arguments from the trace are ``mpl.timemodel.hardware.tier_arguments``, which live engines
share). docs/simulation.md, "Memory tiers"."""

from __future__ import annotations

from mpl.sim.belady import BeladyResult, requests_of, simulate


def tier_belady(trace, layout, num_experts: int) -> BeladyResult:
    """Belady's optimum for the top tier of every set of tiers: per set, one cache of its top
    tier's capacity (in whole experts) over its layers' accesses, the sets independent (a
    set without a gpu tier has no device cache: every access misses)."""
    E = num_experts
    reqs, layers = requests_of(trace.dispatches, E)
    res = BeladyResult(structure="tiers", capacities=[])
    for lv in layout.levels:
        if not lv.layers:
            continue
        mine = set(lv.layers)
        sub = [reqs[i] for i, x in enumerate(layers) if x in mine]
        top = lv.tiers[0]
        cap = min(top.slots // lv.split, len(lv.layers) * E) if top.kind == "gpu" else 0
        res.capacities.append(cap)
        if cap >= 1:
            res.merge(simulate(sub, cap, frozenset(), E))
            continue
        part = BeladyResult()
        for r, x in zip(sub, (x for x in layers if x in mine)):
            part.accesses += len(r)
            part.misses += len(r)
            part.streamed += len(r)
            cur = part.per_layer.setdefault(x, [0, 0])
            cur[0] += len(r)
        res.merge(part)
    return res


def host_memory_notes(layout, profile, num_experts: int) -> list[str]:
    """Where the tiers' host memory is above the machine's (``host_memory_gb``): the host
    tier that holds every expert (no disk tier below it), and host caches."""
    have = profile.host_memory_gb * 1e9
    need = 0.0
    every = 0.0
    for lv in layout.levels:
        if not lv.layers:
            continue
        n = len(lv.layers) * num_experts
        for t in lv.tiers:
            if t.kind != "cpu":
                continue
            if t.cache:
                need += t.slots * t.unit_bytes
            elif lv.disk is None:
                every += n * lv.split * t.unit_bytes
    out = []
    if every + need > have:
        what = ("every expert the host tier holds" if every and not need else
                "the host tiers" if not every else "the host tiers and every expert in host memory")
        out.append(f"{what} need {(every + need) / 1e9:,.1f} GB, more than the host memory of "
                   f"{profile.name} ({profile.host_memory_gb:g} GB)"
                   + ("; put a disk tier below a smaller host tier (std/larger_than_ram)" if every else
                      "; lower the host tiers' capacities"))
    return out


def _gb(b: float) -> str:
    if not b:
        return "0"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= f * 0.01 or unit == "KB":
            return f"{b / f:,.2f} {unit}"
    return f"{b:g} B"


def tier_lines(stats: dict) -> list[str]:
    """The report's per-tier table: each set of tiers, each tier's capacity (slots; '-' the
    last), what it served (hits, of them approximately), what moved into it (promotions,
    demotions), left it, and what was read from it."""
    rows = stats["tiers"]
    acc = max(stats["accesses"], 1)
    head = ("tier", "where", "dtype", "slots", "served", "share", "approx", "promoted",
            "demoted", "evicted", "reads", "read")
    table = [head]
    sets = []
    for r in rows:
        if r["set"] not in sets:
            sets.append(r["set"])
    for r in rows:
        table.append(((f"[{r['set']}] " if len(sets) > 1 else "") + r["tier"], r["location"],
                      r["dtype"] or "-", "-" if r["capacity"] is None else str(r["capacity"]),
                      str(r["hits"]), f"{r['hits'] / acc:.1%}", str(r["approximate"]),
                      str(r["promotions"]), str(r["demotions"]), str(r["evictions"]),
                      str(r["reads"]), _gb(r["bytes_read"])))
    widths = [max(len(x[i]) for x in table) for i in range(len(head))]
    lines = [f"  memory tiers: {stats.get('approximate_computes', 0)} accesses computed from a "
             f"lower-precision copy"]
    for i, x in enumerate(table):
        lines.append("    " + "  ".join(v.ljust(w) if j < 3 else v.rjust(w)
                                        for j, (v, w) in enumerate(zip(x, widths))))
    return lines
