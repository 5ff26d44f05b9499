"""Figures for sweeps (matplotlib, imported lazily, Agg backend): hit rate vs capacity with
Belady's curve, and a per-layer hit-rate heatmap."""

from __future__ import annotations

from typing import Sequence


def _plt():
    try:
        import matplotlib
    except ImportError:
        from mpl.extras import missing_message
        raise RuntimeError(missing_message(ModuleNotFoundError(name="matplotlib"))) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def figure_format(path: str) -> str:
    """The format a figure is written in: its file's extension (none: png)."""
    import os

    return os.path.splitext(path)[1].lstrip(".").lower() or "png"


def _save(fig, out: str, dpi: int) -> None:
    """Render the figure in memory, then write it atomically (a failure leaves no partial
    image); the format comes from the extension (default png)."""
    import io

    from mpl.fileio import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format=figure_format(out))
    write_atomic(out, buf.getvalue())


def _series(points) -> dict[str, list]:
    several = len({p.policy for p in points}) > 1
    groups: dict[str, list] = {}
    for p in points:
        if p.error or p.total_slots is None:
            continue
        ps = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in p.params.items())
        key = ", ".join(x for x in ((p.policy if several or not ps else ""), ps) if x)
        groups.setdefault(key, []).append(p)
    return groups


def hit_rate_plot(points, out: str, *, title: str = "", dpi: int = 150) -> str:
    """Hit rate vs total cache slots, one line per policy / parameter combination, and
    Belady's optimum (dashed) for each cache structure."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    groups = _series(points)
    optimum: dict[str, dict] = {}
    for key, ps in groups.items():
        ps = sorted(ps, key=lambda p: p.total_slots)
        ax.plot([p.total_slots for p in ps], [p.hit_rate * 100 for p in ps], marker="o", label=key)
        for p in ps:
            if p.belady is not None:
                struct = "per-layer" if isinstance(p.capacities, list) else "shared"
                optimum.setdefault(struct, {}).setdefault(p.total_slots, p.belady)
    styles = {"shared": "k--", "per-layer": "k:"}
    for struct, pts in optimum.items():
        xs = sorted(pts)
        label = "Belady (offline optimum)" if len(optimum) == 1 else f"Belady, {struct} caches"
        ax.plot(xs, [pts[x] * 100 for x in xs], styles[struct], marker="s", markersize=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("total cache slots")
    ax.set_ylabel("hit rate (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or "Hit rate vs capacity")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    _save(fig, out, dpi)
    plt.close(fig)
    return out


def heatmap(points, out: str, *, title: str = "", labels: Sequence[str] | None = None,
            dpi: int = 150) -> str:
    """Per-layer hit rate: one row per sweep point, one column per MoE layer."""
    plt = _plt()
    rows = [p for p in points if not p.error and p.per_layer]
    if not rows:
        raise ValueError("no successful sweep point has per-layer hit rates")
    data = [[x * 100 for x in p.per_layer] for p in rows]
    names = list(labels) if labels else [p.label for p in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * len(data[0]) + 2.5), 0.42 * len(rows) + 1.6))
    im = ax.imshow(data, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("MoE layer")
    step = max(1, len(data[0]) // 16)
    ax.set_xticks(range(0, len(data[0]), step))
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("hit rate (%)")
    ax.set_title(title or "Per-layer hit rate")
    fig.tight_layout()
    _save(fig, out, dpi)
    plt.close(fig)
    return out
