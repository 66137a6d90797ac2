"""A degraded link: what a planned PrfaaS-PD deployment keeps when its link drops to a lower bandwidth.

The instances stay as planned (remote, local prefill and decode counts fixed); only the routing
threshold is re-optimized at the degraded bandwidth (`prfaas_plan.analytic.search.best_threshold`).
Reported beside it: the same deployment if nobody switches the threshold, the unloaded TTFT at the
degraded bandwidth and the new threshold (`prfaas_plan.analytic.ttft`), and optionally the TTFT under
load at a given offered rate -- the traffic the plan was serving when the link degraded
(`prfaas_plan.analytic.latency`; infinite when the degraded deployment cannot carry it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .latency import LatencySummary, ttft_under_load
from .search import best_threshold
from .throughput import Evaluation, LengthGrid, PerfInputs, evaluate
from .ttft import TTFTSummary, ttft_summary


@dataclass(frozen=True)
class DegradedLink:
    """``planned``: the plan's optimum; ``switched``: same counts at the degraded link with the threshold
    re-optimized; ``kept_threshold``: same counts and threshold at the degraded link; ``ttft``: unloaded
    TTFT of ``switched`` (seconds); ``loaded``: its TTFT under load at the offered rate asked for, if any."""

    bandwidth_bps: float
    planned: Evaluation
    switched: Evaluation
    kept_threshold: Evaluation
    ttft: TTFTSummary
    loaded: LatencySummary | None = None

    @property
    def kept(self) -> float:
        """Share of the planned throughput the switched deployment keeps."""
        return self.switched.lambda_max / self.planned.lambda_max if self.planned.lambda_max > 0 else 0.0


def degrade_link(planned: Evaluation, grid: LengthGrid, perf: PerfInputs, bandwidth_bps: float,
                 rate_rps: float | None = None) -> DegradedLink:
    """Evaluate the planned deployment (a single-PD-site layout with a link) at ``bandwidth_bps`` line rate
    (the link's efficiency and RTT unchanged); ``rate_rps`` (requests/s) adds the TTFT under that load."""
    lay = planned.layout
    site = lay.pd_sites[0]
    if lay.remote is None or site.link is None:
        raise ValueError("a degraded link needs a layout with a remote site and a link")
    if not bandwidth_bps > 0:
        raise ValueError("bandwidth must be positive")
    link = replace(site.link, bandwidth_bps=float(bandwidth_bps))
    degraded = replace(lay, pd_sites=(replace(site, link=link),) + lay.pd_sites[1:], threshold=None)
    switched = best_threshold(degraded, grid, perf, planned.n_prefill, planned.mode)
    stay = evaluate(degraded, grid, perf, planned.threshold, planned.n_prefill, planned.mode)
    loaded = None
    if rate_rps is not None:
        loaded = ttft_under_load(switched.layout, grid, perf, switched.threshold, switched.n_prefill, rate=rate_rps,
                                 mode=planned.mode)
    return DegradedLink(float(bandwidth_bps), planned, switched, stay,
                        ttft_summary(switched.layout, grid, perf, switched.threshold), loaded)
