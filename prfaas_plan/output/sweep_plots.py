"""Plots of a sweep's rows: the Pareto front of two metrics and the one-parameter sensitivity of the
headline figures (median over the other inputs, with their full range as a band).

matplotlib is imported lazily (Agg backend); files are written atomically; `figure_svg` gives the
figure goes inline into the HTML report through `plots.figure_svg`.
"""

from __future__ import annotations

import numpy as np

from ..units import plural
from .plots import figure_bytes, figure_format
from .report import write_atomic

SENSITIVITY = (("throughput_rps", "PrfaaS-PD throughput\n(req/s)"),
               ("gain_vs_homogeneous", "gain vs homogeneous PD\n(x, 1 = break-even)"),
               ("cost_per_mtok_usd", "cloud cost at full load\n(USD per M output tokens)"),
               ("ttft_unloaded_p90_s", "unloaded TTFT P90\n(s)"))
MAX_LABELLED = 12  # points labelled with their inputs in the front panel
MAX_LINES = 6      # sensitivity: one line per combination of the other inputs up to this many
LINE_STYLES = ("-", "--", ":", "-.", "-", "--")


def varied_inputs(rows: list[dict], inputs, order: list[str] | None = None) -> list[tuple[str, list]]:
    """The ``inputs`` columns that take more than one value, with their values in order of first appearance.

    Ordered as ``order`` (the spec's axes) when given, else as the spec had them: rows come in point
    order with the last axis varying fastest, so the axis that changes least often between rows is first.
    """
    out = {}
    for name in inputs:
        seen = list(dict.fromkeys(r.get(name) for r in rows))
        if len(seen) > 1:
            out[name] = seen
    if order:
        names = [k for k in order if k in out] + [k for k in out if k not in order]
    else:
        changes = {k: sum(a.get(k) != b.get(k) for a, b in zip(rows, rows[1:])) for k in out}
        names = sorted(out, key=lambda k: changes[k])
    return [(k, out[k]) for k in names]


def _label(name: str, directions: dict[str, str]) -> str:
    """Axis label: the headline figure's description (or the column name) and which way is better."""
    text = dict(SENSITIVITY).get(name, name).replace("\n", " ")
    better = "lower is better" if directions.get(name) == "min" else "higher is better"
    return f"{text}\n({better}; column {name})" if name in directions else text


def _point_label(row: dict, axes) -> str:
    return ", ".join(str(row.get(k)) for k, _ in axes)


def _values(rows, key) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None or r.get("error") else float(r[key]) for r in rows])


def sweep_figure(rows: list[dict], schema, metrics: list[str] | None = None, title: str = "",
                 order: list[str] | None = None):
    """The figure: a front panel when ``metrics`` are given (its first two; the rows' ``pareto`` column
    marks the front), then one column of sensitivity panels per varied input of ``schema``
    (`rowfile.TableSchema`; ``order``: the spec's axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_in = varied_inputs(rows, schema.inputs, order)
    n_cols = max(len(axes_in), 1)
    n_rows = len(SENSITIVITY) + (1 if metrics else 0)
    fig = plt.figure(figsize=(max(3.4 * n_cols, 7.0), 2.3 * len(SENSITIVITY) + (4.2 if metrics else 0) + 0.6),
                     dpi=110, layout="constrained")
    heights = ([2.0] if metrics else []) + [1.0] * len(SENSITIVITY)
    gs = fig.add_gridspec(n_rows, n_cols, height_ratios=heights)
    ok = [r for r in rows if not r.get("error")]
    failed = len(rows) - len(ok)
    if metrics:
        _front_panel(fig.add_subplot(gs[0, :]), rows, metrics[:2], axes_in, schema.directions)
    first = 1 if metrics else 0
    for j, (name, levels) in enumerate(axes_in or [("point", [None])]):
        others = [k for k, _ in axes_in if k != name]
        for i, (key, ylabel) in enumerate(SENSITIVITY):
            ax = fig.add_subplot(gs[first + i, j])
            _sensitivity_panel(ax, ok, name, levels, key, others)
            if i == 0 and ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6.5, loc="best")
            if j == 0:
                ax.set_ylabel(ylabel, fontsize=8)
            if i == len(SENSITIVITY) - 1:
                ax.set_xlabel(name, fontsize=9)
            if i == 0:
                ax.set_title(f"varying {name}", fontsize=9)
    note = f"{len(rows)} {plural(len(rows), 'point')} ({failed} could not be planned)."
    fig.suptitle((title + "\n" if title else "") + note, fontsize=9)
    return fig


def _front_panel(ax, rows, metrics, axes_in, directions) -> None:
    x, y = _values(rows, metrics[0]), _values(rows, metrics[1])
    mask = np.array([bool(r.get("pareto")) for r in rows])
    feasible = np.isfinite(x) & np.isfinite(y)
    ax.scatter(x[feasible & ~mask], y[feasible & ~mask], s=14, color="0.7", label="dominated points")
    order = np.argsort(x[mask], kind="stable")
    fx, fy = x[mask][order], y[mask][order]
    ax.plot(fx, fy, "-o", color="crimson", ms=5, lw=1.4,
            label=f"Pareto front ({mask.sum()} {plural(mask.sum(), 'point')})")
    labelled = np.flatnonzero(feasible) if feasible.sum() <= MAX_LABELLED else np.flatnonzero(mask)
    if len(labelled) <= MAX_LABELLED:
        for i in labelled:
            ax.annotate(_point_label(rows[i], axes_in), (x[i], y[i]), xytext=(5, 4), textcoords="offset points",
                        fontsize=7, color="crimson" if mask[i] else "0.35")
    ax.set_xlabel(_label(metrics[0], directions), fontsize=9)
    ax.set_ylabel(_label(metrics[1], directions), fontsize=9)
    names = ", ".join(k for k, _ in axes_in)
    ax.set_title(f"Pareto front of {metrics[0]} and {metrics[1]}" + (f" (labels: {names})" if names else ""),
                 fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)


def _sensitivity_panel(ax, rows, name, levels, key, others) -> None:
    """``key`` against the levels of input ``name``: one line per combination of the ``others`` when
    there are few (labelled in the legend of the first panel), else their median with the range as a band."""
    pos = np.arange(len(levels))
    combos = list(dict.fromkeys(tuple(r.get(k) for k in others) for r in rows))
    if 1 < len(combos) <= MAX_LINES:
        for n, combo in enumerate(combos):  # styles differ so that coinciding lines stay visible
            sub = [r for r in rows if tuple(r.get(k) for k in others) == combo]
            y = [_level_values(sub, name, level, key) for level in levels]
            y = [v[0] if len(v) else np.nan for v in y]
            ax.plot(pos, y, LINE_STYLES[n % len(LINE_STYLES)], marker="osD^v<"[n % 6], ms=5 - 0.5 * n,
                    lw=2.2 - 0.3 * n, label=", ".join(f"{k}={c}" for k, c in zip(others, combo)))
    else:
        med, lo, hi = (np.full(len(levels), np.nan) for _ in range(3))
        for k, level in enumerate(levels):
            v = _level_values(rows, name, level, key)
            if len(v):
                med[k], lo[k], hi[k] = np.median(v), v.min(), v.max()
        if len(combos) > 1:
            ax.fill_between(pos, lo, hi, color="tab:blue", alpha=0.18, lw=0, label="range over the other inputs")
        ax.plot(pos, med, "-o", color="tab:blue", ms=4, lw=1.4,
                label="median over the other inputs" if len(combos) > 1 else None)
    if key == "gain_vs_homogeneous":
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xticks(pos)
    ax.set_xticklabels([str(v) for v in levels], fontsize=7, rotation=30 if len(levels) > 4 else 0)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(alpha=0.3)


def _level_values(rows, name, level, key) -> np.ndarray:
    v = _values([r for r in rows if name == "point" or r.get(name) == level], key)
    return v[np.isfinite(v)]


def plot_sweep(rows: list[dict], schema, metrics: list[str] | None, path: str, title: str = "",
               order: list[str] | None = None) -> None:
    """Write the sweep figure to ``path`` (.png or .svg)."""
    fmt = figure_format(path)
    write_atomic(path, figure_bytes(sweep_figure(rows, schema, metrics, title, order), fmt))
