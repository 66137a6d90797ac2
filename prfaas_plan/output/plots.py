"""Plots: throughput against the routing threshold, with each stage's bound and the optimum marked.

matplotlib is imported lazily with the Agg backend; files are written atomically (PNG or SVG).
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

import numpy as np

from ..analytic.throughput import STAGES, routing_stats, stage_bounds
from ..errors import PlanError
from ..vocabulary import FigureFormat
from .report import write_atomic

FORMATS = {f".{f.value}": f.value for f in FigureFormat}  # file suffix -> figure format


def figure_format(path: str) -> str:
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise PlanError(f"`plot` {path!r}: expected a .png or .svg file name")
    return FORMATS[ext]


def plot_threshold_sweep(plan, path: str, title: str) -> None:
    """Lambda_max and stage bounds (requests/s) vs threshold t (tokens) at the optimum's split."""
    fmt = figure_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    best = plan.best
    ts = plan.surface.thresholds[plan.surface.thresholds > 0]
    grid_routing = routing_stats(plan.grid, plan.perf, ts, best.mode, best.layout.pd_sites[0].name)
    b = stage_bounds(best.layout, grid_routing, plan.perf, [best.n_prefill])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for stage in STAGES:
        y = getattr(b, stage)[:, 0]
        if np.isfinite(y).any():
            ax.plot(ts, np.where(np.isfinite(y), y, np.nan), lw=1, ls="--", label=f"{stage} bound")
    ax.plot(ts, b.lambda_max[:, 0], lw=2.2, color="black", label="Lambda_max")
    ax.plot([best.threshold], [best.lambda_max], "o", color="crimson",
            label=f"optimum t={best.threshold:,.0f}, {best.lambda_max:.3f} req/s")
    ax.set_xscale("log")
    ax.set_ylim(0, best.lambda_max * 2.2)
    ax.set_xlabel("threshold t (uncached tokens)")
    ax.set_ylabel("system throughput bound (requests/s)")
    ax.set_title(f"{title}\n{best.n_prefill}P+{best.n_decode}D local, {best.mode} mode", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    write_atomic(path, figure_bytes(fig, fmt))


def figure_bytes(fig, fmt: str) -> bytes:
    """A matplotlib figure as PNG or SVG bytes (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def figure_svg(fig) -> str:
    """A matplotlib figure as an inline ``<svg>`` element (no XML prolog; glyphs are paths, no fonts)."""
    text = figure_bytes(fig, "svg").decode()
    return text[text.index("<svg"):]



def pareto_path(path: str) -> str:
    """Where `size --plot PATH` writes the configuration search's Pareto figure: ``PATH``'s stem + ``-pareto``."""
    from pathlib import Path

    p = Path(path)
    return str(p.with_name(f"{p.stem}-pareto{p.suffix}"))


def plot_pareto(found, path: str, title: str) -> None:
    """The configuration search's reported candidates: requests/s per chip vs unloaded TTFT P90 (left, marker
    size by TPOT) and requests/s per $1M of capex vs TTFT P90 (right), the Pareto fronts joined, the chosen
    configuration circled. Renders `ConfigSearch.fronts`; computes nothing."""
    fmt = figure_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cands = [c for c in found.ranked[:found.reported] if c.ttft_p90_s is not None]
    fronts = dict(found.fronts())
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), dpi=120)
    for ax, key, label, front in ((axes[0], "rps_per_chip", "requests/s per chip", "per chip"),
                                  (axes[1], "rps_per_musd", "requests/s per $1M capex", "per dollar")):
        x = np.array([c.ttft_p90_s for c in cands])
        y = np.array([getattr(c, key) or np.nan for c in cands])
        size = np.array([c.tpot_s * 1e3 for c in cands]) * 4
        ax.scatter(x, y, s=size, color="steelblue", alpha=0.7, label="searched (size: TPOT)")
        on = sorted((i for i, f in fronts.items() if front in f), key=lambda i: x[i])
        if on:
            ax.plot(x[on], y[on], "-", color="darkorange", lw=1.5, label=f"Pareto front ({front})")
        ax.plot([x[0]], [y[0]], "o", ms=14, mfc="none", mec="crimson", mew=2, label="chosen")
        for i, c in enumerate(cands[:5]):
            ax.annotate(str(i + 1), (x[i], y[i]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("unloaded TTFT P90 (s)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{title}\n#1 = {cands[0].label()}", fontsize=8)
    fig.tight_layout()
    write_atomic(path, figure_bytes(fig, fmt))
