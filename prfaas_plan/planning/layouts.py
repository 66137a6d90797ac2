"""A layout file with several PD sites, answered in full: per site the binding stage, requests/s, link load,
unloaded TTFT with that site's RTT and cost; for the whole layout the routing rule when the optimum is not
threshold routing (with the best pure-threshold plan beside it and what it loses), the baselines (each site
alone, homogeneous PD at the verdict's basis) and error bars with the verdict.

The optimum is the linear program's (`prfaas_plan.analytic.lp.max_throughput`, per-site routing by length
bin and integer local splits). Everything a fixed routing implies -- stage loads, the pure-threshold search,
the sampled error bars -- is `prfaas_plan.analytic.multisite`. Units: requests/s, seconds, bit/s, USD, USD
per hour, tokens; shares are fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..analytic.lp import LPResult, bin_labels, max_throughput, prefer_threshold
from ..analytic.multisite import (SiteModel, ThresholdPlan, loads, sample_threshold_search, sample_total, site_capacity, threshold_plan,
                                  ttft_of, ttft_parts)
from ..analytic.throughput import STAGES, busy_s, offloads
from ..analytic.ttft import TTFTSummary, transfer_s
from ..analytic.uncertainty import (Band, ErrorBars, decode_error_bar, draw_factors, prefill_error_bar,
                                    sample_layout, stack_of, verdict)
from ..errors import PlanError
from ..layout import Layout, PDSite, homogeneous_pd
from .plans import HOURS_PER_MONTH, basis_baseline_name, check_basis, layout_bins, optimize
from .scenario import Scenario, layout_perf

SITES_ALONE = "sites-alone"
BASIS_WORDS = {"instances": "equal instances", "chips": "equal chips", "capex": "equal capex",
               "rental": "equal rental"}
THIS_LAYOUT = "layout"
ROUTING_TOL = 1e-3      # remote shares closer than this are one range of the routing rule
LOSS_WARN = 0.01        # a pure-threshold plan losing more than this share of the optimum is warned about


@dataclass(frozen=True)
class SiteFigures:
    """One PD site at the layout's optimum. ``utilization`` per stage of `STAGES` (the remote one is the
    shared site's, the same for every site); ``remote_share`` the share of its requests prefilled remotely;
    costs are the site's own chips and link (``usd_per_hour_with_remote`` adds its share of the remote
    site, by the remote prefill seconds it uses)."""

    name: str
    instance: str
    stack: str
    n_prefill: int
    n_decode: int
    lambda_rps: float
    binding: str
    utilization: dict[str, float]
    pure_threshold: bool
    threshold_tokens: float        # the implied threshold when ``pure_threshold``, else nan
    remote_share: float
    egress_bps: float
    link_bps: float | None
    rtt_s: float | None
    ttft: TTFTSummary
    capex_usd: float
    usd_per_hour: float
    usd_per_hour_with_remote: float
    alone_rps: float               # the site on its own as homogeneous PD (no remote site)


@dataclass(frozen=True)
class RoutingRange:
    """One range of a site's routing rule: uncached lengths ``from_tokens``..``to_tokens`` (inclusive grid
    lengths), the share of the site's requests in it and the share of those prefilled remotely."""

    site: str
    from_tokens: float
    to_tokens: float
    request_share: float
    remote_share: float


@dataclass(frozen=True)
class BaselineFigures:
    """A layout the answer is compared with (or the answer itself, ``name`` `THIS_LAYOUT`): what it is,
    its requests/s, the layout's gain over it (x) with its P10/P50/P90 when sampled, its costs and TTFT."""

    name: str
    what: str
    lambda_rps: float
    gain: float
    gain_band: Band | None
    capex_usd: float
    usd_per_hour: float
    ttft: TTFTSummary | None


@dataclass(frozen=True)
class LayoutFigures:
    """Everything `answer_layout` adds to the linear program's result for several PD sites."""

    sites: tuple[SiteFigures, ...]
    remote_utilization: float
    remote_capex_usd: float
    remote_usd_per_hour: float
    ttft: TTFTSummary                     # over every site's requests, weighted by their rates
    routing: tuple[RoutingRange, ...]     # every site's rule (shown when some site is not a threshold)
    threshold: ThresholdPlan | None       # the best pure-threshold plan found (None: too many sites)
    baselines: tuple[BaselineFigures, ...]
    error_bars: ErrorBars | None          # against the basis baseline (None with ``samples`` 0)
    sites_alone_bars: ErrorBars | None
    basis: str
    notes: tuple[str, ...]

    @property
    def threshold_routing(self) -> bool:
        return all(s.pure_threshold for s in self.sites)


def _price(chip: str, count: int) -> tuple[float, float]:
    """Purchase price (USD) and cloud cost (USD/hour) of ``count`` chips (nan without a price indication)."""
    from ..profiles import get_hardware

    price = get_hardware(chip).price
    if price is None:
        return math.nan, math.nan
    return count * price.purchase_usd, count * price.cloud_usd_per_hour


def _link_usd_per_hour(site: PDSite) -> float:
    return site.link.usd_per_gbps_month * site.link.bandwidth_bps / 1e9 / HOURS_PER_MONTH if site.link else 0.0


def layout_budget(lay: Layout, basis: str) -> float:
    """What the layout spends at ``basis``: instances, chips, purchase price (USD) or cloud cost (USD/h)."""
    if basis == "instances":
        return (lay.remote.instances if lay.remote else 0) + sum(s.instances for s in lay.pd_sites)
    if basis == "chips":
        return float(sum(lay.chips().values()))
    which = 0 if basis == "capex" else 1
    total = sum(_price(chip, n)[which] for chip, n in lay.chips().items())
    if which == 1 and lay.remote is not None:
        total += sum(_link_usd_per_hour(s) for s in lay.pd_sites)
    return total


def layout_baseline(lay: Layout, basis: str) -> Layout:
    """Homogeneous PD at ``basis`` on the first site's instance shape: as many instances as the layout has
    (``instances``), as its chips fill (``chips``), or as its purchase price (``capex``) or hourly cost
    (``rental``, links included) buys. Named as `compare` names it."""
    basis = check_basis(basis)
    shape = lay.pd_sites[0].instance
    budget = layout_budget(lay, basis)
    if basis == "instances":
        n = int(budget)
    elif basis == "chips":
        n = int(budget // shape.chips)
    else:
        per = _price(shape.chip.name, shape.chips)[0 if basis == "capex" else 1]
        if not (math.isfinite(budget) and math.isfinite(per) and per > 0):
            raise PlanError(f"`basis` {basis} needs prices in every chip's hardware profile; use `basis` chips")
        n = int(budget // per)
    if n < 2:
        raise PlanError("the homogeneous baseline needs at least 2 instances (1 prefill + 1 decode)")
    return replace(homogeneous_pd(f"{n * shape.chips}x{shape.chip.name}", shape.chips),
                   name=basis_baseline_name(basis))


def _utilization(lam: float, load: float, capacity: float) -> float:
    """Load per second over capacity; 0 with no load, inf with load and no capacity."""
    need = lam * load
    if need <= 0:
        return 0.0
    return need / capacity if capacity > 0 else math.inf


def _binding(util: dict[str, float]) -> str:
    """The most utilized stage (the first in `STAGES` order among ties)."""
    top = max(util.values())
    return next(s for s in STAGES if util[s] >= top * (1 - 1e-6))


def _ranges(name: str, frac: np.ndarray, weight: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[RoutingRange]:
    """Consecutive bins of (nearly) one remote share merged into ranges."""
    out: list[RoutingRange] = []
    start = 0
    for b in range(1, len(frac) + 1):
        if b == len(frac) or abs(frac[b] - frac[start]) > ROUTING_TOL:
            w = weight[start:b]
            share = float(w @ frac[start:b] / w.sum()) if w.sum() > 0 else float(frac[start])
            out.append(RoutingRange(name, float(lo[start]), float(hi[b - 1]), float(w.sum()), share))
            start = b
    return out


def _bin_edges(grid, labels: np.ndarray, nb: int) -> tuple[np.ndarray, np.ndarray]:
    """Shortest and longest grid length of each bin (tokens)."""
    ok = labels >= 0
    lo = np.full(nb, np.inf)
    hi = np.full(nb, -np.inf)
    np.minimum.at(lo, labels[ok], grid.lengths[ok])
    np.maximum.at(hi, labels[ok], grid.lengths[ok])
    return lo, hi


def _factors(lay: Layout, perf, samples: int, seed: int):
    """Seeded lognormal factors on remote prefill seconds and on each site's prefill seconds and decode
    capacity, one draw per error-bar key (one chip's constants), as `analytic.uncertainty.error_bars`."""
    bars = {}
    if lay.remote is not None and perf.remote_prefill is not None:
        bars["remote"] = prefill_error_bar(perf.remote_prefill, lay.remote.instance.chip.name)
    for s in lay.pd_sites:
        chip = s.instance.chip.name
        bars[("prefill", s.name)] = prefill_error_bar(perf.sites[s.name].prefill, chip)
        bars[("decode", s.name)] = decode_error_bar(perf.sites[s.name].decode, chip,
                                                    stack=stack_of(perf.sites[s.name].prefill))
    factor = draw_factors(bars.values(), samples, seed)
    ones = np.ones(samples)
    f_remote = factor[bars["remote"].key] if "remote" in bars else ones
    f_local = [factor[bars[("prefill", s.name)].key] for s in lay.pd_sites]
    f_decode = [factor[bars[("decode", s.name)].key] for s in lay.pd_sites]
    unique = {b.key: b for b in bars.values()}
    return f_remote, f_local, f_decode, tuple(unique[k] for k in sorted(unique))


BYTES_PER_SAMPLE_CUT_SITE = 16 * 8
"""Peak bytes of the multi-site sampler per sample, threshold cut and site: about 16 float64 arrays of
(samples x cuts x sites) alive at once in `analytic.multisite.sample_threshold_search`. Measured:
``size --layout examples/three-sites.yaml --samples 20000`` peaks at 1.00 GB RSS (0.16 GB of it the planner
before sampling); the estimate says 0.99 GB for the sampler."""


def layout_sampler_bytes(samples: int, models: list[SiteModel]) -> int:
    """Estimated peak memory (bytes) of a multi-site layout's error bars."""
    cuts = max(len(m.bins.weight) + 1 for m in models)
    return samples * cuts * len(models) * BYTES_PER_SAMPLE_CUT_SITE


def _site_models(lay: Layout, perf, bins: dict) -> list[SiteModel]:
    """Each PD site as the fixed-routing model needs it (`analytic.multisite.SiteModel`)."""
    return [SiteModel(s.name, bins[s.name], s.instances, perf.sites[s.name].decode.requests_per_s(perf.output_tokens),
                      s.link.planned_bps if offloads(lay, perf, s) else 0.0, offloads(lay, perf, s))
            for s in lay.pd_sites]


def layout_figures(path, lay: Layout, sc: Scenario, res: LPResult, perf, basis: str, samples: int,
                   seed: int) -> LayoutFigures:
    """Per-site figures, routing rule, threshold plan, baselines and error bars of the program's optimum
    ``res`` for layout ``lay`` (see the module docstring)."""
    bins = layout_bins(lay, sc, perf)
    n_r = lay.remote.instances if lay.remote is not None else 0
    models = _site_models(lay, perf, bins)
    grid = sc.grid
    labels = bin_labels(grid)
    l = grid.lengths
    remote_used = sum(float(loads(m, r.remote_fraction)[1]) * r.lambda_rps for m, r in zip(models, res.sites))
    remote_util = remote_used / n_r if n_r else 0.0
    r_capex, r_hourly = _price(lay.remote.instance.chip.name, lay.remote.instance.chips * n_r) if n_r else (0.0, 0.0)

    sites, parts, routing = [], [], []
    for s, m, r in zip(lay.pd_sites, models, res.sites):
        a, rho, bits = (float(x) for x in loads(m, r.remote_fraction))
        n_p, n_d = max(0, int(round(r.n_prefill))), max(0, int(round(r.n_decode)))
        util = {"remote_prefill": remote_util if rho > 0 else 0.0,
                "link": _utilization(r.lambda_rps, bits, m.goodput_bps),
                "local_prefill": _utilization(r.lambda_rps, a, n_p),
                "local_decode": _utilization(r.lambda_rps, 1.0 / m.decode_rps, n_d)}
        share = np.where(labels >= 0, r.remote_fraction[np.maximum(labels, 0)], 0.0)
        sp = perf.sites[s.name]
        if m.offloads and np.any(share > 0):
            values = ttft_parts(sp.prefill.latency_s(l), perf.remote_prefill.latency_s(l),
                                busy_s(perf.remote_prefill, l), transfer_s(perf, l, s.link.goodput_bps, s.name),
                                perf.model.num_layers, s.link.rtt_s, grid.weights, share)
        else:
            values = ttft_parts(sp.prefill.latency_s(l), None, None, None, perf.model.num_layers, 0.0,
                                grid.weights, share)
        if r.lambda_rps > 0:
            parts.append((values[0], values[1] * r.lambda_rps))
        capex, hourly = _price(s.instance.chip.name, s.instance.chips * s.instances)
        link_h = _link_usd_per_hour(s) if n_r else 0.0
        remote_part = (rho * r.lambda_rps / remote_used) if remote_used > 0 else 0.0
        alone = float(site_capacity(m, float(bins[s.name].weight @ bins[s.name].local_s), 0.0)[0])
        sites.append(SiteFigures(
            s.name, str(s.instance), s.stack or sc.stack, n_p, n_d, r.lambda_rps, _binding(util), util,
            r.is_threshold, r.threshold_tokens, float(m.bins.weight @ np.clip(r.remote_fraction, 0, 1)),
            r.egress_bps, s.link.bandwidth_bps if s.link else None, s.link.rtt_s if s.link else None,
            ttft_of([values]), capex, hourly + link_h, hourly + link_h + remote_part * r_hourly, alone))
        lo, hi = _bin_edges(grid, labels, len(m.bins.weight))
        routing += _ranges(s.name, np.clip(r.remote_fraction, 0, 1), m.bins.weight, lo, hi)

    edges = [_bin_edges(grid, labels, len(m.bins.weight))[1] for m in models]
    thr = threshold_plan(models, n_r, [r.remote_fraction for r in res.sites], edges) if n_r else None

    # baselines at the point estimate
    base_lay = layout_baseline(lay, basis)
    first = lay.pd_sites[0]
    base_perf = replace(perf, remote_prefill=None, sites={"local": perf.sites[first.name]})
    base_plan = optimize(base_lay, sc, base_perf)
    alone_total = sum(x.alone_rps for x in sites)
    alone_ttft = ttft_of([(p.prefill.latency_s(l), grid.weights * x.alone_rps)
                          for x, p in zip(sites, (perf.sites[s.name] for s in lay.pd_sites))])
    capex_all = sum(x.capex_usd for x in sites) + r_capex
    hourly_all = sum(x.usd_per_hour for x in sites) + r_hourly
    whole_ttft = ttft_of(parts) if parts else sites[0].ttft

    from .confidence import check_sampler

    check_sampler(samples, seed, 0, layout_sampler_bytes(samples, models))
    bars = alone_bars = None
    notes = [f"baselines: sites-alone = every PD site on its own instances as homogeneous PD, no remote site; "
             f"{base_lay.name} = homogeneous PD on {first.name}'s instance shape ({first.instance}) with as many "
             f"instances as the layout's {basis} budget buys",
             "costs per site: its own chips and link; 'with remote share' adds the remote site's cloud cost in "
             "proportion to the remote prefill seconds the site uses"]
    can_offload = any(m.offloads for m in models)
    if not can_offload:
        notes.append("no site can offload (no remote instances, or no link): no PrfaaS verdict and no error bars; "
                     "the baselines' gains are the point estimates")
    if samples > 0 and can_offload:
        f_r, f_l, f_d, inputs = _factors(lay, perf, samples, seed)
        candidates = [[r.remote_fraction for r in res.sites], [np.zeros(len(m.bins.weight)) for m in models]]
        if thr is not None:
            from ..analytic.multisite import cut_fractions

            candidates.append([cut_fractions(m, k) for m, k in zip(models, thr.cuts)])
        total = sample_total(models, n_r, candidates, f_r, f_l, f_d)
        if thr is not None:
            total = np.maximum(total, sample_threshold_search(models, n_r, thr.cuts, f_r, f_l, f_d))
        hom = sample_layout(base_lay, grid, base_perf, sc.mode, np.array([math.inf]), np.ones(samples), f_l[0],
                            f_d[0]).lam
        alone_s = sum(site_capacity(m, float(m.bins.weight @ m.bins.local_s), 0.0, fl, fd)[0]
                      for m, fl, fd in zip(models, f_l, f_d))
        nan = Band(math.nan, math.nan, math.nan)

        def bars_vs(base_samples, label, point):
            with np.errstate(divide="ignore", invalid="ignore"):
                g = Band.of(np.where(base_samples > 0, total / base_samples, np.inf))
            return ErrorBars(samples, seed, Band.of(total), g, nan, nan, verdict(g), label, inputs, point)

        bars = bars_vs(hom, f"{base_lay.name} ({base_lay.pd_sites[0].instances}x{base_lay.pd_sites[0].instance})",
                       res.lambda_rps / base_plan.best.lambda_max)
        alone_bars = bars_vs(alone_s, f"{SITES_ALONE} ({len(lay.pd_sites)} sites without the remote site)",
                             res.lambda_rps / alone_total if alone_total > 0 else math.inf)
        notes.append("error bars: each sample takes the best of the program's routing, all local, and a per-sample "
                     "search over per-site thresholds, each with the shared remote site re-divided and every site's "
                     "split re-chosen; the program is not re-solved per sample, so the layout's samples are lower "
                     "bounds on each sample's optimum (docs/methods.md, error bars)")
    base_ttft = base_plan.ttft
    b_capex, b_hourly = base_plan.capex_usd, base_plan.cloud_usd_per_hour
    baselines = (
        BaselineFigures(THIS_LAYOUT, f"{len(lay.pd_sites)} PD sites" + (f" + {n_r}x{lay.remote.instance} remote" if n_r else ""),
                        res.lambda_rps, 1.0, None, capex_all, hourly_all, whole_ttft),
        BaselineFigures(SITES_ALONE, "each site alone, no remote",
                        alone_total, res.lambda_rps / alone_total if alone_total > 0 else math.inf,
                        alone_bars.gain if alone_bars else None, sum(x.capex_usd for x in sites),
                        sum(_price(s.instance.chip.name, s.instance.chips * s.instances)[1] for s in lay.pd_sites),
                        alone_ttft),
        BaselineFigures(base_lay.name, f"homogeneous PD {base_lay.pd_sites[0].instances}x{base_lay.pd_sites[0].instance}"
                        f" ({BASIS_WORDS[basis]})", base_plan.best.lambda_max,
                        res.lambda_rps / base_plan.best.lambda_max if base_plan.best.lambda_max > 0 else math.inf,
                        bars.gain if bars else None, b_capex, b_hourly, base_ttft),
    )
    if len({s.instance.chip.name for s in lay.pd_sites}) > 1:
        notes.append(f"the sites run different chips: the homogeneous baseline uses {first.name}'s "
                     f"({first.instance})")
    return LayoutFigures(tuple(sites), remote_util, r_capex, r_hourly, whole_ttft, tuple(routing), thr, baselines,
                         bars, alone_bars, basis, tuple(notes))


def plan_layout(lay: Layout, sc: Scenario, threshold: float | None = None):
    """The linear program's optimum of ``lay`` (``threshold`` in tokens pins every site's routing):
    returns (result, perf, layout as planned)."""
    if threshold is not None:
        lay = replace(lay, threshold=threshold)
    perf = layout_perf(lay, sc)
    bins = layout_bins(lay, sc, perf)
    return prefer_threshold(lay, bins, perf, max_throughput(lay, bins, perf)), perf, lay


def relaxed_layout(lay: Layout, sc: Scenario) -> tuple[float, object, dict]:
    """The continuous relaxation of `plan_layout`'s program (one linear program, fractional splits):
    an upper bound (requests/s) on its integer optimum, with the perf and bins `plan_layout` would build."""
    perf = layout_perf(lay, sc)
    bins = layout_bins(lay, sc, perf)
    return max_throughput(lay, bins, perf, integer=False).lambda_rps, perf, bins


def solve_layout(lay: Layout, perf, bins: dict):
    """`plan_layout`'s integer optimum from the perf and bins `relaxed_layout` built."""
    return prefer_threshold(lay, bins, perf, max_throughput(lay, bins, perf))


# The follow-up questions `answer_size` answers for one site, and why a layout of several sites declines
# them (each names its input in backticks, which the CLI writes as its flag).
_DECLINED = {
    "verify_lp": ("verify", "it cross-checks the threshold search with the linear program, and a layout of several "
                            "PD sites is planned by the program itself (its proven optimality gap is in the notes)"),
    "ttft_slo": ("ttft", "the rate within a TTFT SLO is modelled for one PD site"),
    "load": ("load", "TTFT under load is modelled for one PD site"),
    "target_rate": ("target_rate", "the cheapest cluster for a rate is sized for one PD site"),
    "size_link": ("size_link", "the smallest link is sized for one PD site"),
    "link_degraded_bps": ("link_degraded", "a degraded link is evaluated for one PD site"),
    "rate": ("rate", "every layout at one offered rate is modelled for one PD site"),
    "sensitivity": ("sensitivity", "the gain's drivers are ranked for one PD site (the error bars here sample the "
                                   "calibration errors only)"),
}


def refuse_questions(questions: dict) -> None:
    """A `PlanError` naming every follow-up question asked that a layout of several PD sites does not answer
    (``threshold`` is answered: it pins every site's routing)."""
    asked = [k for k, v in questions.items() if k != "threshold" and v is not None and v is not False]
    if asked:
        why = "; ".join(f"`{_DECLINED[k][0]}`: {_DECLINED[k][1]}" if k in _DECLINED else f"`{k}`" for k in asked)
        raise PlanError(f"a layout file with several PD sites does not answer {why}; give a layout file with one "
                        "PD site for these, or leave them out (per-site TTFT, cost and error bars are printed)")


def layout_default_basis(lay: Layout) -> str:
    """``capex`` when every chip of the layout has a price indication, else ``chips`` (as
    `plans.default_basis` for one site)."""
    from ..profiles import get_hardware

    return "capex" if all(get_hardware(c).price is not None for c in lay.chips()) else "chips"


def layout_warnings(fig: LayoutFigures) -> list:
    """Warnings of a multi-site answer: a pure-threshold plan that loses more than `LOSS_WARN`, a link above
    95% of its goodput, an error band that straddles or excludes the point gain."""
    from .warnings import PlanWarning

    out = []
    if fig.threshold is not None and not fig.threshold_routing:
        lam = fig.baselines[0].lambda_rps
        loss = 1 - fig.threshold.total_rps / lam if lam > 0 else 0.0
        if loss > LOSS_WARN:
            out.append(PlanWarning("not-threshold-routing",
                                   f"the optimum is not threshold routing: the best pure-threshold plan found serves "
                                   f"{fig.threshold.total_rps:.3f} req/s, {loss:.1%} less; deploy the routing rule"))
    for s in fig.sites:
        if s.utilization["link"] > 0.95 * (1 - 1e-9) and s.link_bps:
            out.append(PlanWarning("link-no-headroom", f"site {s.name}: its link carries {s.egress_bps / 1e9:.1f} "
                                                       f"Gbps of {s.link_bps / 1e9:g} Gbps ({s.utilization['link']:.0%} "
                                                       "of goodput): no headroom for bursts"))
    return out
