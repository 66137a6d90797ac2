"""The rate within a TTFT SLO with the threshold and split re-optimized for it (issue 21 item 6).

`questions.rate_within_slo` answers at the plan's own threshold and split (the throughput optimum);
`slo_search` adds the best threshold and split for the SLO itself (`prfaas_plan.analytic.slo_search`),
its latency there, and -- when nothing meets the SLO -- the reason as a sentence the main output prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analytic.latency import LatencySummary
from ..analytic.slo_search import SloOptimum, search_slo, why_unmet
from .plans import Plan
from .questions import SloRate
from .scenario import Scenario


@dataclass(frozen=True)
class SloSearch:
    """``fixed``: the rate within the SLO at the plan's threshold and split; ``optimum``: the search over
    thresholds and splits; ``latency``: TTFT/TPOT at the optimum's rate (`analytic.latency.LatencySummary`;
    None when nothing meets it);
    ``why``: a sentence when nothing meets the SLO, else None."""

    fixed: SloRate
    optimum: SloOptimum
    latency: LatencySummary | None
    why: str | None
    ttft_at_slo_s: float | None = None   # the SLO's own percentile (or mean) at the optimum's rate

    @property
    def gain(self) -> float | None:
        """The re-optimized rate over the plan's own (x; None when the plan's own is 0)."""
        return self.optimum.rate_rps / self.fixed.rate_rps if self.fixed.rate_rps > 0 else None


def slo_search(plan: Plan, sc: Scenario, fixed: SloRate) -> SloSearch:
    """Re-optimize the plan's threshold and split for the SLO of ``fixed`` (the plan's own point seeds the
    search, so the answer is never below it); the thresholds and splits are those the plan searched (a
    pinned ``--threshold`` or a layout file's kept split stays pinned)."""
    ev = plan.best
    seed = (ev.threshold, ev.n_prefill, fixed.rate_rps) if fixed.met else None
    opt = search_slo(plan.layout, sc.grid, plan.perf, fixed.percentile, fixed.target_s, plan.surface.thresholds,
                     plan.surface.splits, seed)
    if not opt.met:
        lay = plan.layout
        remote = str(lay.remote.instance) if lay.remote is not None and lay.remote.instances > 0 else None
        return SloSearch(fixed, opt, None, why_unmet(opt, fixed.label, remote, str(lay.pd_sites[0].instance)))
    from ..analytic.latency import ttft_under_load
    from ..analytic.ttft import summary_value

    lat = ttft_under_load(plan.layout, sc.grid, plan.perf, opt.threshold, opt.n_prefill, rate=opt.rate_rps,
                          mode=sc.mode, percentiles=(fixed.percentile,))
    return SloSearch(fixed, opt, lat, None, summary_value(lat, fixed.percentile))


def slo_warnings(s: SloSearch) -> list:
    """``slo-unmet`` (nothing meets the SLO: the reason) or ``slo-needs-reoptimizing`` (the plan's own
    threshold and split miss it or carry less within it than the re-optimized ones, by more than 1%)."""
    from .warnings import PlanWarning

    if s.why is not None:
        return [PlanWarning("slo-unmet", s.why)]
    o, f = s.optimum, s.fixed
    if o.rate_rps > f.rate_rps * 1.01:
        return [PlanWarning("slo-needs-reoptimizing",
                            f"within {f.label} the plan's threshold and split carry {f.rate_rps:.3f} req/s; "
                            f"threshold {o.threshold:,.0f} tokens with {o.n_prefill}P+{o.n_decode}D carries "
                            f"{o.rate_rps:.3f} req/s (the SLO table's re-optimized column)")]
    return []
