"""The router's output as the runtime reads it (shared by the pure runtime, whose generated
modules import it through ``mpl.runtime.core``, and the compiled backend's glue)."""

from __future__ import annotations


def distinct(experts, weights):
    """Distinct experts in first-occurrence order; a repeated expert's weight is the mean
    (the sum divided by the count; where the sum of finite weights overflows, the sum of each
    weight divided by the count: finite). The compiled engine computes the same
    (mpl/runtime/c/engine.c, prepare_call)."""
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
    if weights is None:
        return ex, None
    ws = [a[0] / a[1] for a in seen.values()]
    for j, m in enumerate(ws):
        if m - m != 0.0:      # finite weights whose sum overflowed: each divided first
            c = seen[ex[j]][1]
            m = 0.0
            for i, e in enumerate(experts):
                if e == ex[j]:
                    m += weights[i] / c
            ws[j] = m
    return ex, ws
