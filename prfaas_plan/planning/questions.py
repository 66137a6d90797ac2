"""Follow-up questions on a `Plan`: latency under load, the rate within a TTFT SLO, the linear program's
cross-check, the smallest link, and the cheapest cluster for a target rate.

Each function takes the plan and its `Scenario` and returns a frozen record; units are in the field
names (``_s`` seconds, ``_rps`` requests/s, ``_bps`` bit/s, ``_usd``) or stated in the docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..analytic.verify import Verification
from ..errors import PlanError
from .plans import Plan
from .scenario import Scenario


@dataclass(frozen=True)
class LoadedLatency:
    """TTFT percentiles and TPOT with queueing at ``load`` x Lambda_max (``rate_rps``), analytic M/G/c."""

    load: float
    rate_rps: float
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_s: float
    method: str


def latency_under_load(plan: Plan, sc: Scenario, load: float) -> LoadedLatency:
    """The plan's latency when offered ``load`` (a fraction in (0, 1)) of its Lambda_max."""
    from ..analytic.latency import ttft_under_load

    if not 0 < load < 1:
        raise PlanError(f"`load` {load:g}: expected a fraction of Lambda_max in (0, 1)")
    ev = plan.best
    lat = ttft_under_load(ev.layout, sc.grid, plan.perf, ev.threshold, ev.n_prefill, load=load, mode=sc.mode)
    return LoadedLatency(load, lat.rate_rps, lat.mean_s, lat.p50_s, lat.p90_s, lat.p99_s, lat.tpot_s, lat.method)


def latency_at_rate(plan: Plan, sc: Scenario, rate_rps: float) -> LoadedLatency:
    """The plan's latency at an offered rate (requests/s); a saturated plan has infinite TTFTs and a
    ``load`` of 1 or more."""
    from ..analytic.latency import ttft_under_load

    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise PlanError(f"`rate` {rate_rps:g}: expected a positive request rate")
    ev = plan.best
    lat = ttft_under_load(ev.layout, sc.grid, plan.perf, ev.threshold, ev.n_prefill, rate=rate_rps, mode=sc.mode)
    return LoadedLatency(lat.load, lat.rate_rps, lat.mean_s, lat.p50_s, lat.p90_s, lat.p99_s, lat.tpot_s, lat.method)


@dataclass(frozen=True)
class AtRate:
    """One layout at a common offered rate: whether it keeps up, its latency and its cloud cost per
    million output tokens at what it serves (``min(rate, Lambda_max)``)."""

    rate_rps: float
    served_rps: float
    saturated: bool
    latency: LoadedLatency | None     # None when saturated (no steady state)
    usd_per_mtok: float | None        # None without prices


def at_common_rate(plan: Plan, sc: Scenario, rate_rps: float) -> AtRate:
    """`AtRate` of ``plan`` at ``rate_rps`` requests/s."""
    lam = plan.best.lambda_max
    saturated = not rate_rps < lam
    served = min(rate_rps, lam)
    latency = None if saturated else latency_at_rate(plan, sc, rate_rps)
    if latency is not None and not math.isfinite(latency.ttft_p90_s):
        saturated, latency = True, None
    hourly = plan.cloud_usd_per_hour
    cost = (hourly / (served * plan.perf.output_tokens * 3600) * 1e6
            if served > 0 and math.isfinite(hourly) else None)
    return AtRate(rate_rps, served, saturated, latency, cost)


@dataclass(frozen=True)
class SloRate:
    """The highest request rate whose TTFT percentile stays under the target, at the plan's threshold and
    split. ``percentile`` 0 means the mean; ``met`` False when even an idle system misses it (then
    ``idle_ttft_s`` is the unloaded value and the rate 0)."""

    percentile: float
    target_s: float
    met: bool
    rate_rps: float
    load: float
    lambda_max_rps: float
    ttft_mean_s: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    ttft_at_slo_s: float | None     # the SLO's own percentile (or mean) at that rate
    idle_ttft_s: float
    method: str

    @property
    def label(self) -> str:
        """``p90 TTFT < 4 s`` style."""
        q = "mean" if self.percentile == 0 else f"p{self.percentile:g}"
        return f"{q} TTFT < {self.target_s:g} s"


def rate_within_slo(plan: Plan, sc: Scenario, percentile: float, target_s: float) -> SloRate:
    """Bisection on the offered rate for the TTFT SLO (analytic queueing model); any percentile in (0, 100)."""
    from ..analytic.latency import METHOD, max_rate_at_ttft_slo
    from ..analytic.ttft import SUMMARY_PERCENTILES, summary_value, ttft_summary

    ev = plan.best
    lat = max_rate_at_ttft_slo(ev.layout, sc.grid, plan.perf, percentile, target_s, mode=sc.mode)
    unloaded = plan.ttft if percentile in SUMMARY_PERCENTILES else ttft_summary(
        ev.layout, sc.grid, plan.perf, ev.threshold, (percentile,))
    idle = summary_value(unloaded, percentile)
    if lat is None:
        return SloRate(percentile, target_s, False, 0.0, 0.0, ev.lambda_max, None, None, None, None, None, idle,
                       METHOD)
    return SloRate(percentile, target_s, True, lat.rate_rps, lat.load, ev.lambda_max, lat.mean_s, lat.p50_s,
                   lat.p90_s, lat.p99_s, summary_value(lat, percentile), idle, METHOD)


def verify(plan: Plan, sc: Scenario) -> Verification:
    """Cross-check the plan with the linear program (`prfaas_plan.analytic.verify`: exact mode, the LP's
    length bins, the best pure threshold on them and the LP's proven bound)."""
    from ..analytic.verify import verify as lp_verify

    return lp_verify(plan.layout, sc.grid, plan.perf, plan.best)


def routing_screen(plan: Plan, sc: Scenario) -> str | None:
    """Without a solver: a sentence when some routing may beat the best threshold beyond the
    verification band (`prfaas_plan.analytic.verify.screen`), else None."""
    from ..analytic.verify import screen

    return screen(plan.layout, sc.grid, plan.perf, plan.best)


@dataclass(frozen=True)
class LinkSizing:
    """The smallest link keeping ``keep`` of the throughput (continuous relaxation: a lower bound)."""

    keep: float
    reference_rps: float        # the LP's throughput with the link unconstrained
    throughput_rps: float
    link_goodput_bps: float
    link_line_rate_bps: float   # goodput / the scenario's link efficiency, more with headroom (kept free)


def smallest_link(plan: Plan, sc: Scenario, keep: float) -> LinkSizing:
    """Smallest link goodput keeping ``keep`` (a fraction in (0, 1]) of the throughput (linear program)."""
    from ..analytic.lp import make_bins, min_link

    if not 0 < keep <= 1:
        raise PlanError(f"`size_link` {keep:g}: expected a fraction in (0, 1]")
    res = min_link(plan.layout, make_bins(sc.grid, plan.perf), plan.perf, keep)
    return LinkSizing(keep, res.reference_rps, res.lambda_rps, res.link_goodput_bps,
                      res.link_goodput_bps / (sc.link.efficiency * (1.0 - sc.link.headroom)))


@dataclass(frozen=True)
class TargetSizing:
    """The cheapest instance counts serving ``target_rps`` (mixed-integer program, exact mode), and the
    capacity and routing those counts reach with the hardware fixed."""

    target_rps: float
    remote_instances: int
    local_prefill_instances: int
    local_decode_instances: int
    capex_usd: float
    capacity_rps: float
    pure_threshold: bool
    threshold_tokens: float | None

    @property
    def prfaas_pays(self) -> bool:
        """True when the cheapest cluster buys at least one remote prefill instance."""
        return self.remote_instances > 0

    def verdict_sentence(self, plan: Plan) -> str | None:
        """The sentence when the cheapest cluster buys no remote instance: PrfaaS-PD does not pay at the
        profiles' prices for this target (None when it buys some)."""
        if self.prfaas_pays:
            return None
        lay = plan.layout
        n = self.local_prefill_instances + self.local_decode_instances
        return (f"PrfaaS-PD does not pay at these prices: the cheapest cluster for {self.target_rps:g} req/s buys no "
                f"{lay.remote.instance} remote prefill instance; {n} {lay.pd_sites[0].instance} instances as "
                f"homogeneous PD ({self.local_prefill_instances}P+{self.local_decode_instances}D, "
                f"${self.capex_usd / 1e6:,.2f}M) cost no more than any mix with remote prefill (prices: the hardware "
                "profiles' indications)")


def cheapest_for_rate(plan: Plan, sc: Scenario, target_rps: float) -> TargetSizing:
    """Size the cheapest cluster (remote and local counts; chips per instance and link as given)."""
    from ..analytic.lp import make_bins, max_throughput, min_cost, prefer_threshold
    from ..profiles import get_hardware

    if not (math.isfinite(target_rps) and target_rps > 0):
        raise PlanError(f"`target_rate` {target_rps:g}: expected a positive request rate")
    lay = plan.layout
    r_price = get_hardware(lay.remote.instance.chip.name).price
    l_price = get_hardware(lay.pd_sites[0].instance.chip.name).price
    if r_price is None or l_price is None:
        raise PlanError("`target_rate` needs purchase prices in both chips' hardware profiles")
    bins = make_bins(sc.grid, plan.perf)
    res = min_cost(lay, bins, plan.perf, target_rps, r_price.purchase_usd * lay.remote.instance.chips,
                   l_price.purchase_usd * lay.pd_sites[0].instance.chips)
    counts = (round(res.n_remote), round(res.n_prefill), round(res.n_decode))
    # The cheapest counts leave slack, so their routing is not unique: route as the fixed-hardware
    # optimum of those counts does, which also gives the capacity they reach, and among its tied routings
    # the one closest to a threshold (a stage with slack lets the program send alternate bins each way).
    sized = replace(lay, remote=replace(lay.remote, instances=counts[0]),
                    pd_sites=(replace(lay.pd_sites[0], prefill=counts[1], decode=counts[2]),))
    cap = max_throughput(sized, bins, plan.perf, free_split=False)
    if sized.remote is not None and counts[0] > 0:
        cap = prefer_threshold(sized, bins, plan.perf, cap)
    return TargetSizing(target_rps, *counts, res.cost_usd, cap.lambda_rps, cap.is_threshold, cap.threshold_tokens)
