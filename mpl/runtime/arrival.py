"""Hits counted on arrival (SPEC §5): a key that is resident when its dispatch starts but
whose transfer (a prefetch or a background load) has not landed yet is a *late prefetch*:
the dispatch waits for it, and it is counted apart, never as a hit.

The runtime decides on residency (it cannot see time): its own counters, and the windowed
hit rate its adapt rules read, count a resident key as a hit. What knows arrival is what
carries the Plans out: the replay's timeline (a hit whose arrival is after the dispatch
starts) and the live mechanism (a hit whose copy event has not completed when compute
waits for it). :func:`arrived` turns the runtime's statistics into the reported ones."""

from __future__ import annotations


def arrived(stats: dict, late: int, late_layers: dict) -> dict:
    """``stats`` (a runtime's ``stats()``) with ``late`` hits (``late_layers``: per MoE
    layer) counted as late prefetches: ``hits``, ``hit_rate`` and the per-layer hits and
    hit rates count only keys that had arrived; ``late_prefetches`` (overall and per layer)
    counts the rest, so accesses = hits + late prefetches + misses. Nothing else changes."""
    out = dict(stats)
    out["late_prefetches"] = late
    if late:
        out["hits"] = stats["hits"] - late
        acc = stats["accesses"]
        out["hit_rate"] = out["hits"] / acc if acc else 0.0
    per = stats.get("per_layer")
    if per is not None:
        rows = []
        for row in per:
            row = dict(row)
            n = late_layers.get(row["layer"], 0)
            row["late_prefetches"] = n
            if n:
                row["hits"] = row["hits"] - n
                row["hit_rate"] = row["hits"] / row["accesses"] if row["accesses"] else 0.0
            rows.append(row)
        out["per_layer"] = rows
    return out
