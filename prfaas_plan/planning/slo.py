"""The rate within a TTFT SLO with the threshold, split and configurations re-optimized for it (issue 21
item 6).

`questions.rate_within_slo` answers at the plan's own threshold and split (the throughput optimum);
`slo_search` adds the best threshold and split for the SLO itself (`prfaas_plan.analytic.slo_search`),
its latency there, and -- when nothing meets the SLO -- the reason as a sentence the main output prints.
`slo_configurations` adds the configurations (`configurations.search_configurations`): the throughput
optimum's instance shapes need not carry the most within a TTFT SLO (a prefill instance of more chips
prefills each prompt sooner at less throughput per chip), so every configuration is searched for the SLO
too, branch and bound: a configuration carries at most its ``Lambda_max`` within any SLO (exact mode), so
configurations are taken in decreasing ``Lambda_max`` and the search stops at the first whose
``Lambda_max`` is below the best rate found. Configurations carrying the same rate (within `TIE_REL`) are
told apart by their TTFT P90 at that rate, the lower first, then by their chips, the fewer first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..analytic.latency import LatencySummary
from ..analytic.slo_search import SloOptimum, search_slo, why_unmet
from .configurations import Candidate, SearchSpec
from .plans import Plan
from .questions import SloRate
from .scenario import Scenario

TIE_REL = 1e-9   # rates within this relative difference are the same throughput: the tie-break decides


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
    configuration: Candidate | None = None  # the configuration of the optimum when not the plan's own
    configurations: tuple[int, int] | None = None  # (considered, SLO-searched) when configurations are searched

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
    return _answer(plan.layout, plan.perf, sc, fixed, opt)


def _answer(lay, perf, sc: Scenario, fixed: SloRate, opt: SloOptimum, among: int | None = None,
            **more) -> SloSearch:
    """The `SloSearch` of ``opt`` found on layout ``lay`` with performance inputs ``perf``: its latency at
    the rate found, or why nothing meets it (``among`` that many configurations, when they were searched)."""
    if not opt.met:
        remote = str(lay.remote.instance) if lay.remote is not None and lay.remote.instances > 0 else None
        return SloSearch(fixed, opt, None, why_unmet(opt, fixed.label, remote, str(lay.pd_sites[0].instance), among),
                         **more)
    from ..analytic.latency import ttft_under_load
    from ..analytic.ttft import summary_value

    lat = ttft_under_load(lay, sc.grid, perf, opt.threshold, opt.n_prefill, rate=opt.rate_rps,
                          mode=sc.mode, percentiles=(fixed.percentile,))
    return SloSearch(fixed, opt, lat, None, summary_value(lat, fixed.percentile), **more)


def slo_configurations(question_sc: Scenario, spec: SearchSpec, plan: Plan, sc: Scenario, fixed: SloRate,
                       threshold: float | None = None) -> SloSearch:
    """`slo_search` over every configuration as well (module docstring): ``question_sc`` is the question's
    scenario before the search and ``spec`` what the user pinned; ``plan``/``sc`` the throughput optimum's
    plan and scenario, whose own re-optimized point seeds the search (the answer is never below
    `slo_search`'s); ``threshold`` a pinned routing threshold (tokens). Configurations are those of
    `search_configurations` with ``latency`` on (no prefill candidate dropped that is faster per request).
    Under ``mode`` representative no configuration is bounded out (the bound is exact mode's)."""
    from ..analytic.search import grid_search
    from .configurations import search_configurations
    from .scenario import prfaas_layout

    own = slo_search(plan, sc, fixed)
    found = search_configurations(question_sc, spec, report=0, latency=True)
    best, cand = (own.optimum, plan.layout, plan.perf, sc), None
    closest = (own.optimum, plan.layout, plan.perf)   # the lowest unloaded TTFT, for the why when none meets it
    searched = 0
    for c in found.ranked:   # best Lambda_max first
        if sc.mode == "exact" and c.lambda_max < best[0].rate_rps * (1 - TIE_REL):
            break
        if _shape(c.scenario) == _shape(sc):
            continue         # the plan's own, searched above
        lay = prfaas_layout(c.scenario)
        surface = grid_search(lay, sc.grid, c.perf, sc.mode, fixed_threshold=threshold)
        searched += 1
        opt = search_slo(lay, sc.grid, c.perf, fixed.percentile, fixed.target_s, surface.thresholds,
                         surface.splits, floor=best[0].rate_rps * (1 - TIE_REL))
        if opt.met and _prefer((opt, lay, c.perf), best[:3], sc):   # above the best so far, or level and better
            best, cand = (opt, lay, c.perf, c.scenario), c
        if opt.unloaded_best_s < closest[0].unloaded_best_s:
            closest = (opt, lay, c.perf)
    counts = (len(found.ranked), searched)
    if not best[0].met:
        return _answer(closest[1], closest[2], sc, fixed, closest[0], counts[0], configurations=counts)
    if cand is None:
        return replace(own, configurations=counts)
    return _answer(best[1], best[2], best[3], fixed, best[0], configuration=cand, configurations=counts)


def _prefer(new: tuple, old: tuple, sc: Scenario) -> bool:
    """Whether the SLO optimum ``new`` = (`SloOptimum`, layout, perf) beats ``old``: a higher rate, or one
    within `TIE_REL` of it with a lower TTFT P90 at that rate, then fewer chips."""
    if not old[0].met or new[0].rate_rps > old[0].rate_rps * (1 + TIE_REL):
        return True
    if new[0].rate_rps < old[0].rate_rps * (1 - TIE_REL):
        return False
    return _tie_key(new, sc) < _tie_key(old, sc)


def _tie_key(point: tuple, sc: Scenario) -> tuple[float, int]:
    """(TTFT P90 s at the point's rate, chips) of an SLO optimum (`_prefer`)."""
    from ..analytic.latency import ttft_under_load

    opt, lay, perf = point
    lat = ttft_under_load(lay, sc.grid, perf, opt.threshold, opt.n_prefill, rate=opt.rate_rps, mode=sc.mode)
    return lat.p90_s, sum(lay.chips().values())


def _shape(sc: Scenario) -> tuple:
    """What a configuration sets in a scenario (two scenarios with the same run the same plan)."""
    return (sc.model.name, sc.model.weight_dtype, sc.model.kv_dtype, sc.instance_chips, sc.remote_chips_per_instance,
            sc.remote_moe, sc.local_moe, sc.decode_moe, sc.dp_attention, sc.transfer)


def slo_warnings(s: SloSearch) -> list:
    """``slo-unmet`` (nothing meets the SLO: the reason) or ``slo-needs-reoptimizing`` (the plan's own
    threshold and split miss it or carry less within it than the re-optimized ones -- and, with the
    configuration search, another configuration -- by more than 1%)."""
    from .warnings import PlanWarning

    if s.why is not None:
        return [PlanWarning("slo-unmet", s.why)]
    o, f = s.optimum, s.fixed
    if o.rate_rps > f.rate_rps * 1.01:
        config = f"the configuration {s.configuration.label()} at " if s.configuration is not None else ""
        return [PlanWarning("slo-needs-reoptimizing",
                            f"within {f.label} the plan's threshold and split carry {f.rate_rps:.3f} req/s; "
                            f"{config}threshold {o.threshold:,.0f} tokens with {o.n_prefill}P+{o.n_decode}D carries "
                            f"{o.rate_rps:.3f} req/s (the SLO table's re-optimized column)")]
    return []
