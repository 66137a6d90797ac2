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


def render(result: SimResult, fmt: str, other: SimResult | None = None, title: str = "") -> bytes:
    """The figure as ``png`` or ``svg`` bytes; ``other`` (another scheduler's run) is overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": "prfaas-plan", "font.size": 8}):
        fig, axes = plt.subplots(4, 1, figsize=(8, 10), constrained_layout=True)
        runs = [(result, "-")] + ([(other, "--")] if other is not None else [])
        ax = axes[0]
        for r, ls in runs:
            tl = r.timeline
            ax.plot(tl["t_s"], tl["link_gbps"], ls, color="C0", lw=0.8, label=f"egress ({r.scheduler})")
        ax.plot(result.timeline["t_s"], result.timeline["link_capacity_gbps"], "k:", lw=0.8, label="line rate")
        ax.set_ylabel("Gbps")
        ax.set_title(title or "link")
        ax.legend(loc="upper right")
        ax = axes[1]
        for r, ls in runs:
            tl = r.timeline
            for key, label, color in (("remote_waiting", "remote prefill", "C0"),
                                      ("local_waiting", "local prefill", "C1"), ("decode_waiting", "decode", "C2")):
                ax.plot(tl["t_s"], tl[key], ls, color=color, lw=0.8, label=f"{label} ({r.scheduler})")
        ax.set_ylabel("waiting requests")
        ax.legend(loc="upper right")
        ax = axes[2]
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
        ax = axes[3]
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
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
        plt.close(fig)
    return buf.getvalue()
