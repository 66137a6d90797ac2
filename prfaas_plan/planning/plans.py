"""Sizing and comparison: from a user's question to optimized layouts, with every assumption listed.

This is the Python API behind ``prfaas-plan size`` and ``compare``: it resolves the model, chips,
workload and per-instance performance, runs the optimizer, and gathers the numbers a report prints.
Each default in effect is recorded as a note so the user sees what was assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analytic.search import GridResult, grid_search, threshold_candidates
from ..analytic.throughput import Evaluation, LengthGrid, PerfInputs, SitePerf, routing_stats, stage_bounds
from ..analytic.ttft import TTFTSummary, ttft_summary
from ..errors import PlanError
from ..layout import Layout, Link, homogeneous_pd, instances_from_chips, naive_heterogeneous, prfaas_pd
from ..performance import given
from ..performance.base import DecodeCapacity, Instance, PrefillModel
from ..profiles import ModelProfile

GRID_POINTS = 8192


@dataclass(frozen=True)
class Scenario:
    """The inputs of one planning question (everything resolved, nothing defaulted later)."""

    model: ModelProfile
    remote: str               # chips, e.g. 32xH200
    local: str                # chips, e.g. 64xH20
    link: Link
    instance_chips: int
    tpot_s: float
    mode: str                 # representative | exact
    inputs: str               # predicted | paper
    grid: LengthGrid          # uncached input lengths (what prefill computes and routing compares)
    output_tokens: float      # mean output length
    context_tokens: float     # mean context a decode step reads: whole prompt (cached part too) + output / 2
    workload_name: str
    notes: tuple[str, ...] = field(default=())


def scenario_for(model: ModelProfile, remote: str, local: str, link: Link, instance_chips: int, tpot_s: float,
                 mode: str, inputs: str, workload, notes: tuple[str, ...] = ()) -> Scenario:
    """A `Scenario` for a `prfaas_plan.workload.Workload`: its uncached lengths on a grid, its output,
    and the decode context from the whole prompt (prefix-cache hits still sit in decode's KV)."""
    grid = LengthGrid.from_distribution(workload.input_length, GRID_POINTS)
    output = float(workload.output_length.mean())
    context = float(workload.total_input_length.mean()) + output / 2
    wl_note = f"workload {workload.name}: " + "; ".join(workload.notes)
    return Scenario(model, remote, local, link, instance_chips, tpot_s, mode, inputs, grid, output, context,
                    workload.name, tuple(notes) + (wl_note,))


def _paper_only(model: ModelProfile, instance: Instance) -> None:
    if model.name != given.MODEL:
        raise PlanError(f"--inputs paper exists only for {given.MODEL} (the paper's case-study model)")
    if instance.chip.name not in ("h200", "h20"):
        raise PlanError(f"--inputs paper covers 8xH200 and 8xH20 only, not {instance}")


def instance_prefill(model: ModelProfile, instance: Instance, inputs: str) -> PrefillModel:
    """Prefill model of one instance: ``paper`` inputs (measured H200, back-solved H20) or ``predicted``
    (measured table where the model has one, else the calibrated roofline)."""
    if inputs == "paper":
        _paper_only(model, instance)
        return given.measured_h200() if instance.chip.name == "h200" else given.backsolved_h20()[0]
    from ..performance import prefill_model

    return prefill_model(model, instance)


def instance_decode(model: ModelProfile, instance: Instance, tpot_s: float, context_tokens: float,
                    inputs: str) -> DecodeCapacity:
    """Decode capacity of one instance at a TPOT SLO (seconds) and mean context (tokens); a model that
    cannot decode there at all is a `PlanError`."""
    if inputs == "paper":
        _paper_only(model, instance)
        if instance.chip.name != "h20":
            raise PlanError(f"--inputs paper gives decode capacity for 8xH20 only, not {instance}")
        return given.backsolved_h20()[1]
    from ..performance import decode_capacity

    decode = decode_capacity(model, instance, tpot_s, context_tokens)
    if decode.batch <= 0:
        if decode.binding == "slo":
            raise PlanError(f"{model.name} cannot decode on {instance} within a {tpot_s * 1e3:g} ms TPOT: even one "
                            f"request's step takes longer ({decode.source}); loosen --tpot")
        raise PlanError(f"{model.name} cannot decode on {instance}: its weights leave no HBM for a single "
                        f"request ({decode.source}); use chips with more HBM or more chips per instance "
                        "(--instance-chips)")
    return decode


def perf_inputs(sc: Scenario) -> PerfInputs:
    """Per-instance performance of the scenario's remote and local instances."""
    context = sc.context_tokens
    l_inst, _ = instances_from_chips(sc.local, sc.instance_chips, "--local")
    r_inst, _ = instances_from_chips(sc.remote, sc.instance_chips, "--remote")
    site = SitePerf(instance_prefill(sc.model, l_inst, sc.inputs),
                    instance_decode(sc.model, l_inst, sc.tpot_s, context, sc.inputs))
    return PerfInputs(sc.model, instance_prefill(sc.model, r_inst, sc.inputs), {"local": site}, sc.output_tokens)


@dataclass(frozen=True)
class Plan:
    """An optimized layout with its derived figures: ``layout`` as posed (threshold and split free),
    ``best`` the optimum found (its ``layout`` has them set)."""

    layout: Layout
    best: Evaluation
    surface: GridResult
    ttft: TTFTSummary
    perf: PerfInputs
    grid: LengthGrid
    link_bind_threshold: float | None  # below this t the link would bind at the optimum's throughput
    capex_usd: float
    cloud_usd_per_hour: float


def _link_bind_threshold(best: Evaluation, grid: LengthGrid, perf: PerfInputs) -> float | None:
    """The threshold (tokens) below which the link could not carry the optimum's throughput: the
    link's bound rises with t (fewer, longer requests cross), so it is found by bisection between the
    candidate thresholds. None when the link never binds (or there is none); inf when it always does."""
    lay = best.layout
    if lay.remote is None or lay.pd_sites[0].link is None:
        return None
    site = lay.pd_sites[0].name

    def carries(ts) -> np.ndarray:
        r = routing_stats(grid, perf, ts, best.mode, site)
        return stage_bounds(lay, r, perf, [best.n_prefill]).link[:, 0] >= best.lambda_max * (1 - 1e-9)

    ts = threshold_candidates(grid)
    ok = np.flatnonzero(carries(ts))
    if len(ok) == 0:
        return float("inf")
    if ok[0] == 0:
        return None
    lo, hi = float(ts[ok[0] - 1]), float(ts[ok[0]])
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if carries([mid])[0] else (mid, hi)
    return hi


HOURS_PER_MONTH = 730.0


def _costs(layout: Layout) -> tuple[float, float]:
    """Purchase price (USD) of the layout's chips and its hourly cost (USD/hour): cloud rates of the
    chips from the profiles plus each link's price (USD per Gbps-month) per hour."""
    from ..profiles import get_hardware

    capex = 0.0
    hourly = sum(s.link.usd_per_gbps_month * s.link.bandwidth_bps / 1e9 / HOURS_PER_MONTH
                 for s in layout.pd_sites if s.link is not None and layout.remote is not None)
    for chip, count in layout.chips().items():
        price = get_hardware(chip).price
        if price is None:
            return float("nan"), float("nan")
        capex += count * price.purchase_usd
        hourly += count * price.cloud_usd_per_hour
    return capex, hourly


def optimize(layout: Layout, sc: Scenario, perf: PerfInputs) -> Plan:
    """Grid-search the layout and gather its report figures."""
    surface = grid_search(layout, sc.grid, perf, sc.mode)
    best = surface.best
    ttft = ttft_summary(best.layout, sc.grid, perf, best.threshold)
    capex, hourly = _costs(layout)
    return Plan(layout, best, surface, ttft, perf, sc.grid, _link_bind_threshold(best, sc.grid, perf), capex, hourly)


def size(sc: Scenario) -> Plan:
    """The PrfaaS-PD plan for the scenario."""
    perf = perf_inputs(sc)
    return optimize(prfaas_pd(sc.remote, sc.local, sc.link, sc.instance_chips), sc, perf)


def compare(sc: Scenario, basis: str = "instances") -> dict[str, Plan]:
    """PrfaaS-PD, homogeneous PD and naive heterogeneous on the same budget.

    ``basis="instances"``: the homogeneous cluster has as many local-chip instances as PrfaaS-PD has
    in total (the paper's comparison). ``basis="cost"``: as many as the PrfaaS-PD purchase price buys.
    """
    prf_layout = prfaas_pd(sc.remote, sc.local, sc.link, sc.instance_chips)
    _, r_n = instances_from_chips(sc.remote, sc.instance_chips, "--remote")
    l_inst, l_n = instances_from_chips(sc.local, sc.instance_chips, "--local")
    if basis == "instances":
        n_hom = r_n + l_n
    elif basis == "cost":
        budget = _costs(prf_layout)[0]
        per_instance = _costs(homogeneous_pd(f"{sc.instance_chips}x{l_inst.chip.name}", sc.instance_chips))[0]
        if not (np.isfinite(budget) and np.isfinite(per_instance)):
            raise PlanError("--basis cost needs purchase prices in both chips' hardware profiles; "
                            "use --basis instances")
        n_hom = int(budget // per_instance)
    else:
        raise PlanError(f"--basis {basis!r}: expected instances or cost")
    if n_hom < 2:
        raise PlanError("the homogeneous baseline needs at least 2 local instances (1 prefill + 1 decode)")
    perf = perf_inputs(sc)
    prf = optimize(prf_layout, sc, perf)
    naive = optimize(naive_heterogeneous(sc.remote, sc.local, sc.link, sc.instance_chips), sc, perf)
    hom_chips = f"{n_hom * sc.instance_chips}x{l_inst.chip.name}"
    hom = optimize(homogeneous_pd(hom_chips, sc.instance_chips), sc, perf)
    return {"prfaas-pd": prf, "homogeneous-pd": hom, "naive-heterogeneous": naive}


def layout_perf(layout: Layout, sc: Scenario) -> PerfInputs:
    """Per-instance performance of every site of a (possibly multi-site) layout."""
    context = sc.context_tokens
    by_instance: dict[str, SitePerf] = {}   # sites of one instance shape share its performance
    sites = {}
    for site in layout.pd_sites:
        key = str(site.instance)
        if key not in by_instance:
            by_instance[key] = SitePerf(instance_prefill(sc.model, site.instance, sc.inputs),
                                        instance_decode(sc.model, site.instance, sc.tpot_s, context, sc.inputs))
        sites[site.name] = by_instance[key]
    remote = None
    if layout.remote is not None:
        remote = instance_prefill(sc.model, layout.remote.instance, sc.inputs)
    return PerfInputs(sc.model, remote, sites, sc.output_tokens)


def size_layout(layout: Layout, sc: Scenario):
    """Optimize any layout (several PD sites sharing one remote site) with the linear program:
    per-site routing and local splits, exact mode. Returns the `lp.LPResult` (``sites`` per site)."""
    from ..analytic.lp import make_bins, max_throughput

    perf = layout_perf(layout, sc)
    by_instance = {}
    for s in layout.pd_sites:
        if str(s.instance) not in by_instance:
            by_instance[str(s.instance)] = make_bins(sc.grid, perf, site=s.name)
    bins = {s.name: by_instance[str(s.instance)] for s in layout.pd_sites}
    return max_throughput(layout, bins, perf), perf
