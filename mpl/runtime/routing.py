"""The router's output as the runtime reads it (shared by the pure runtime, whose generated
modules import it through ``mpl.runtime.core``, and the compiled backend's glue)."""

from __future__ import annotations


def distinct(experts, weights):
    """Distinct experts in first-occurrence order; a repeated expert's weight is the mean."""
    seen: dict = {}
    for i, e in enumerate(experts):
        w = weights[i] if weights is not None else 0.0
        a = seen.get(e)
        if a is None:
            seen[e] = [w, 1]
        else:
            a[0] += w
            a[1] += 1
    ex = list(seen)
    ws = [a[0] / a[1] for a in seen.values()] if weights is not None else None
    return ex, ws
