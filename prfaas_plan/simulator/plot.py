"""Figures of a simulation: link load, queues, threshold and roles over time, and the TTFT CDF.

matplotlib is imported here only, with the Agg backend; the figure is returned as bytes so that the
caller can write it atomically. SVG output carries no date and a fixed hash salt (byte-identical reruns).
"""

from __future__ import annotations

import io

import numpy as np

from ..vocabulary import FigureFormat, values
from .result import SimResult

FORMATS = values(FigureFormat)


LINESTYLES = ("-", "--", ":", "-.")


QUEUES = (("remote_waiting", "remote prefill", "C0"), ("link_waiting", "link", "C3"),
          ("local_waiting", "local prefill", "C1"), ("decode_waiting", "decode", "C2"))


def _styled(runs) -> list:
    return [(r, LINESTYLES[k % len(LINESTYLES)]) for k, r in enumerate(runs)]


def _link_panel(ax, runs, title: str) -> None:
    for r, ls in runs:
        tl = r.timeline
        ax.plot(tl["t_s"], tl["link_gbps"], ls, color="C0", lw=0.8, label=f"egress ({r.scheduler})")
    first = runs[0][0].timeline
    ax.plot(first["t_s"], first["link_capacity_gbps"], "k:", lw=0.8, label="line rate")
    ax.set_ylabel("Gbps")
    ax.set_title(title or "link")
    ax.legend(loc="upper right")


def _queue_panel(ax, runs, fontsize: int = 6) -> None:
    for r, ls in runs:
        tl = r.timeline
        for key, label, color in QUEUES:
            ax.plot(tl["t_s"], tl[key], ls, color=color, lw=0.8, label=f"{label} ({r.scheduler})")
    ax.set_ylabel("waiting requests")
    ax.legend(loc="upper right", fontsize=fontsize, ncol=2)


def _threshold_panel(ax, runs) -> None:
    for r, ls in runs:
        tl = r.timeline
        t = tl["threshold_tokens"]
        ax.plot(tl["t_s"], np.where(np.isfinite(t), t, np.nan), ls, color="C0", lw=0.8,
                label=f"threshold ({r.scheduler})")
    ax.set_ylabel("threshold (tokens)")
    ax.set_xlabel("time (s)")
    twin = ax.twinx()
    for r, ls in runs:
        twin.step(r.timeline["t_s"], r.timeline["n_prefill"], ls, lw=0.8, color="grey", where="post",
                  label=f"local prefill instances ({r.scheduler})")
    twin.set_ylabel("local prefill instances")
    ax.legend(loc="upper left")
    twin.legend(loc="upper right")


def _cdf_panel(ax, runs) -> None:
    for r, ls in runs:
        done = r.completed
        for name, mask, color in (("all", done, "k"), ("local", done & (r.route == 0), "C1"),
                                  ("remote", done & (r.route == 1), "C0")):
            x = np.sort(r.ttft_s[mask])
            if len(x):
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), ls, color=color, lw=0.8,
                        label=f"{name} ({r.scheduler})")
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("CDF")
    ax.legend(loc="lower right")


def _figure(fmt: str, rows: int, cols: int, size, draw) -> bytes:
    """A figure of ``rows`` x ``cols`` panels drawn by ``draw(axes)``, as ``fmt`` bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": "prfaas-plan", "font.size": 8}):
        fig, axes = plt.subplots(rows, cols, figsize=size, constrained_layout=True, squeeze=False)
        draw(axes)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
        plt.close(fig)
    return buf.getvalue()


def render(result: SimResult, fmt: str, others=(), title: str = "") -> bytes:
    """The figure as ``png`` or ``svg`` bytes; ``others`` (other schedulers' runs, or one run) are overlaid,
    each in its own line style; the queue panel has every queue of every run, the link's backlog included."""
    if isinstance(others, SimResult):
        others = (others,)
    runs = _styled([result, *(others or ())])

    def draw(axes):
        _link_panel(axes[0][0], runs, title)
        _queue_panel(axes[1][0], runs)
        _threshold_panel(axes[2][0], runs)
        _cdf_panel(axes[3][0], runs)

    return _figure(fmt, 4, 1, (8, 10), draw)


def render_sites(multi_runs, fmt: str, title: str = "") -> bytes:
    """The figure of a multi-site simulation (`multisite.MultiSimResult` per scheduler, overlaid in line
    styles) as ``png`` or ``svg`` bytes: one row per site (its link, every queue of every scheduler, its
    threshold and local prefill instances), then the whole layout's TTFT CDF."""
    names = multi_runs[0].names

    def draw(axes):
        for k, name in enumerate(names):
            runs = _styled([m.sites[k] for m in multi_runs])
            _link_panel(axes[k][0], runs, f"{title}: site {name}" if title else f"site {name}")
            _queue_panel(axes[k][1], runs, 5)
            _threshold_panel(axes[k][2], runs)
        for ax in axes[len(names)][1:]:
            ax.set_visible(False)
        _cdf_panel(axes[len(names)][0], _styled([m.total for m in multi_runs]))
        axes[len(names)][0].set_title("TTFT, every site")

    return _figure(fmt, len(names) + 1, 3, (15, 3.2 * (len(names) + 1)), draw)
