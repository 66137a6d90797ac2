"""Unloaded time to first token: prefill time plus, for remote requests, the exposed KV transfer.

Method (stated in every report that prints TTFT): no queueing (queueing delay is added by
`prfaas_plan.analytic.latency` at a given load). A request of uncached length ``l`` prefilled locally takes
``T_l(l)``. One prefilled remotely streams its KV over the link layer by layer while its instance computes
(compute and transfer pipelined, as in the paper), so its cache has fully arrived at
``(T_r(l) - B_r(l)) + max(B_r(l), X(l)) + X(l) / layers + RTT / 2``: ``B_r`` is the busy time in which the
forwards run and the KV is produced, ``T_r - B_r`` the part of the prefill latency that occupies no
instance (the stack's fixed latency; 0 for a prefill given in the paper's Eq. 4 form), which the transfer
cannot overlap; ``X(l) = S_kv(l) * 8 / goodput`` is the transfer time at the link's full goodput (an
unloaded link), ``S_kv`` the bytes the transfer moves (`PerfInputs.transfer_bytes`), and ``X / layers``
the last layer's tail. The simulator times a remote request the same way (`prfaas_plan.simulator.system`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..layout import Layout
from .throughput import LengthGrid, PerfInputs, offloads

PERCENTILES = (50.0, 90.0, 99.0)
METHOD = ("unloaded: prefill time, plus for remote requests the KV transfer pipelined with prefill "
          "(fixed latency + max(prefill busy time, transfer) + last-layer tail + RTT/2) at the link's full "
          "goodput; no queueing")


SUMMARY_PERCENTILES = (0.0, 50.0, 90.0, 99.0)  # 0 stands for the mean


def summary_value(summary, percentile: float) -> float:
    """TTFT seconds at ``percentile`` (0 = the mean) of any summary with ``mean_s``/``p50_s``/``p90_s``/
    ``p99_s`` and ``extra_s`` (other percentiles asked for; `TTFTSummary`,
    `prfaas_plan.analytic.latency.LatencySummary`)."""
    if percentile in SUMMARY_PERCENTILES:
        return getattr(summary, "mean_s" if percentile == 0 else f"p{percentile:g}_s")
    return summary.extra_s[float(percentile)]


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs) -> np.ndarray:
    """Percentiles ``qs`` (0-100) of a discrete distribution (values with probability weights)."""
    order = np.argsort(values, kind="stable")
    v = np.asarray(values, dtype=float)[order]
    cw = np.cumsum(np.asarray(weights, dtype=float)[order])
    cw /= cw[-1]
    idx = np.searchsorted(cw, np.asarray(qs, dtype=float) / 100.0 - 1e-12, side="left")
    return v[np.minimum(idx, len(v) - 1)]


def transfer_s(perf: PerfInputs, l, goodput_bps: float, site: str | None = None) -> np.ndarray:
    """Seconds to move the transfer bytes of length(s) ``l`` to ``site`` over a link of ``goodput_bps``."""
    return perf.transfer_bytes(l, site) * 8.0 / goodput_bps


def remote_ready_s(latency_s, busy_s, transfer_s, layers: int, rtt_s: float) -> np.ndarray:
    """Seconds from a remote prefill's arrival at a free instance until its whole cache is at decode:
    the latency that occupies no instance (``latency_s - busy_s``, >= 0), the busy time overlapped with
    the layer-pipelined transfer of ``transfer_s`` seconds, the last layer's tail and half the RTT."""
    latency_s, busy_s, transfer_s = (np.asarray(a, dtype=float) for a in (latency_s, busy_s, transfer_s))
    return (np.maximum(latency_s - busy_s, 0.0) + np.maximum(busy_s, transfer_s) + transfer_s / layers
            + rtt_s / 2)


def ttft_by_length(layout: Layout, grid: LengthGrid, perf: PerfInputs, threshold: float) -> np.ndarray:
    """Unloaded TTFT in seconds of each grid length under ``threshold`` (single-PD-site layouts)."""
    site = layout.pd_sites[0]
    l = grid.lengths
    local = grid.latency_at_lengths(perf.sites[site.name].prefill)
    if not offloads(layout, perf, site):
        return local.copy()   # the grid keeps its own
    # the same figures as `transfer_s` and `busy_s` at the grid's lengths, computed once per grid (a
    # sweep asks them at every point that shares the grid and the models)
    x = grid.transfer_at_lengths(perf.model, perf.sites[site.name].transfer) * 8.0 / site.link.goodput_bps
    remote = remote_ready_s(grid.latency_at_lengths(perf.remote_prefill), grid.busy_at_lengths(perf.remote_prefill),
                            x, perf.model.num_layers, site.link.rtt_s)
    return np.where(l > threshold, remote, local)


@dataclass(frozen=True)
class TTFTSummary:
    """Unloaded TTFT statistics over the workload, seconds."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    method: str = METHOD
    extra_s: dict[float, float] = field(default_factory=dict, compare=False)  # percentile -> seconds


def ttft_summary(layout: Layout, grid: LengthGrid, perf: PerfInputs, threshold: float,
                 percentiles: tuple[float, ...] = ()) -> TTFTSummary:
    """Mean and P50/P90/P99 of unloaded TTFT over the length distribution, and any other
    ``percentiles`` (0-100) in ``extra_s``."""
    v = ttft_by_length(layout, grid, perf, threshold)
    extra = tuple(float(q) for q in percentiles if q not in SUMMARY_PERCENTILES)
    values = weighted_percentiles(v, grid.weights, PERCENTILES + extra)
    p50, p90, p99 = values[:3]
    return TTFTSummary(float(np.dot(v, grid.weights)), float(p50), float(p90), float(p99), METHOD,
                       {q: float(x) for q, x in zip(extra, values[3:])})
