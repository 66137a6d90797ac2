"""Whole answers to the planner's questions: one call per command, returning every figure, warning and
note the command prints.

- `answer_size`: the PrfaaS-PD plan and the follow-up questions asked of it (target rate, load, TTFT
  SLO, LP cross-check, link sizing);
- `answer_compare`: PrfaaS-PD against homogeneous PD and naive heterogeneous;
- `answer_layout`: a layout file (several PD sites sharing one remote site) by the linear program;
- `answer_reproduce`: the paper's case study against its published figures.

Renderers (`prfaas_plan.output`) turn these records into tables, JSON and CSV; they compute nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PlanError
from ..layout import Layout
from ..units import format_tokens
from .confidence import degraded_link, mode_verdicts, plan_error_bars
from .plans import Plan, compare, optimize, perf_inputs, size_layout
from .questions import (
    LinkSizing,
    LoadedLatency,
    SloRate,
    TargetSizing,
    Verification,
    cheapest_for_rate,
    latency_under_load,
    rate_within_slo,
    routing_screen,
    smallest_link,
    verify,
)
from .scenario import DEFAULTS, Scenario, scenario_for
from .warnings import PlanWarning, beaten_warning, plan_warnings

if TYPE_CHECKING:  # pragma: no cover
    from ..analytic.degraded import DegradedLink
    from ..analytic.lp import LPResult
    from ..analytic.throughput import PerfInputs
    from ..analytic.uncertainty import ErrorBars
    from .case_study import CaseStudy

COST_NOTE = "costs from the hardware profiles' price indications (labelled there), not quotes"


def perf_notes(perf) -> list[str]:
    """Where each site's prefill and decode figures come from, with the decode operating point."""
    notes = []
    if perf.remote_prefill is not None:
        notes.append(f"remote prefill: {perf.remote_prefill.source}")
    for name, sp in perf.sites.items():
        notes.append(f"{name} prefill: {sp.prefill.source}")
        notes.append(f"{name} decode: {sp.decode.batch:.1f} requests x 1 token per {sp.decode.step_s * 1e3:.1f} ms "
                     f"({sp.decode.tokens_per_s:,.0f} tokens/s per instance, bound by {sp.decode.binding}); "
                     f"{sp.decode.source}")
    return notes


def _link_note(plan: Plan, sc: Scenario) -> str:
    t = plan.link_bind_threshold
    where = ("it would not bind at this throughput even with every request offloaded" if t is None else
             f"it binds for thresholds below {t:,.0f} ({format_tokens(t)}) tokens at this throughput"
             if t != float("inf") else "it binds at every threshold at this throughput")
    return f"link {sc.link.bandwidth_bps / 1e9:g} Gbps at {sc.link.efficiency:.0%} goodput; " + where


@dataclass(frozen=True)
class SizeAnswer:
    """``prfaas-plan size``: the plan and the answers to each follow-up question asked (None if not)."""

    scenario: Scenario
    plan: Plan
    warnings: list[PlanWarning]
    notes: list[str]
    threshold_given: bool = False
    target: TargetSizing | None = None
    loaded: LoadedLatency | None = None
    slo: SloRate | None = None
    verification: Verification | None = None
    link_sizing: LinkSizing | None = None
    error_bars: ErrorBars | None = None
    degraded: DegradedLink | None = None


def _confidence(sc: Scenario, plan: Plan, baseline, samples: int, seed: int, warnings: list[PlanWarning]):
    """The error bars (None when ``samples`` is 0), with a warning when the two modes disagree on the verdict."""
    modes = mode_verdicts(sc, plan, baseline)
    if modes.warning():
        warnings.append(PlanWarning("modes-disagree", modes.warning()))
    if samples == 0:
        return None
    return replace(plan_error_bars(sc, plan, baseline, samples, seed), point_gain=modes.gain[sc.mode])


def _link_starves_offload(plan: Plan, sc: Scenario) -> bool:
    """True when offloading even the longest 0.1% of requests makes the link bind before remote prefill."""
    import numpy as np

    from ..analytic.throughput import evaluate

    i = min(int(np.searchsorted(np.cumsum(sc.grid.weights), 1 - 1e-3)), len(sc.grid.lengths) - 1)
    ev = evaluate(plan.best.layout, sc.grid, plan.perf, float(sc.grid.lengths[i]), plan.best.n_prefill, sc.mode)
    return ev.p_remote > 0 and ev.bounds["link"] < ev.bounds["remote_prefill"]


def answer_size(sc: Scenario, *, threshold: float | None = None, target_rate: float | None = None,
                load: float | None = None, ttft_slo: tuple[float, float] | None = None, verify_lp: bool = False,
                size_link: float | None = None, link_degraded_bps: float | None = None, samples: int = 400,
                seed: int = 0) -> SizeAnswer:
    """Size PrfaaS-PD for ``sc`` and answer the follow-up questions asked.

    ``threshold`` (tokens) evaluates that routing threshold instead of optimizing it; ``target_rate``
    (requests/s) sizes the cheapest cluster; ``load`` (fraction of Lambda_max) gives latency under load;
    ``ttft_slo`` = (percentile, seconds), percentile 0 for the mean, gives the rate within the SLO;
    ``verify_lp`` cross-checks with the linear program; ``size_link`` (fraction) finds the smallest link;
    ``link_degraded_bps`` evaluates the plan at a lower link rate (counts fixed, threshold re-optimized);
    ``samples`` (0: none) seeded draws of the calibration errors give error bars and a verdict.
    """
    from ..layout import prfaas_pd

    perf = perf_inputs(sc)
    plan = optimize(prfaas_pd(sc.remote, sc.local, sc.link, sc.instance_chips), sc, perf, threshold)
    ev = plan.best
    if ev.lambda_max <= 0:
        raise PlanError(f"no request can be served: the {ev.binding} stage has zero capacity")
    notes = list(sc.notes) + perf_notes(perf) + [_link_note(plan, sc), f"TTFT method: {plan.ttft.method}",
                                                 COST_NOTE]
    if threshold is not None:
        notes.insert(0, f"threshold fixed at {threshold:,.0f} tokens (--threshold): the split is optimized for it")
    warnings = plan_warnings(plan, sc)
    checked = verify(plan, sc) if verify_lp else None
    if checked is not None and not checked.threshold_optimal:
        warnings.append(PlanWarning("threshold-not-optimal", checked.explanation))
    elif checked is None and (screen := routing_screen(plan, sc)):
        warnings.append(PlanWarning("threshold-may-not-be-optimal", screen))
    return SizeAnswer(
        sc, plan, warnings, notes, threshold is not None,
        target=cheapest_for_rate(plan, sc, target_rate) if target_rate is not None else None,
        loaded=latency_under_load(plan, sc, load) if load is not None else None,
        slo=rate_within_slo(plan, sc, *ttft_slo) if ttft_slo is not None else None,
        verification=checked,
        link_sizing=smallest_link(plan, sc, size_link) if size_link is not None else None,
        error_bars=_confidence(sc, plan, None, samples, seed, warnings),
        degraded=degraded_link(sc, plan, link_degraded_bps, load) if link_degraded_bps is not None else None)


@dataclass(frozen=True)
class CompareAnswer:
    """``prfaas-plan compare``: the three layouts, PrfaaS-PD's gain over each (x), latency under load."""

    scenario: Scenario
    basis: str
    plans: dict[str, Plan]
    gains: dict[str, float | None]              # layout -> PrfaaS-PD Lambda_max / its Lambda_max
    warnings: list[PlanWarning]
    notes: list[str]
    loaded: dict[str, LoadedLatency] | None = None
    error_bars: ErrorBars | None = None


def answer_compare(sc: Scenario, basis: str = "instances", load: float | None = None, samples: int = 400,
                   seed: int = 0) -> CompareAnswer:
    """PrfaaS-PD, homogeneous PD and naive heterogeneous on ``basis`` (instances or cost); with ``load``
    each layout's latency at that fraction of its own Lambda_max."""
    plans = compare(sc, basis)
    prf = plans["prfaas-pd"]
    base = prf.best.lambda_max
    gains = {name: base / p.best.lambda_max if p.best.lambda_max else None for name, p in plans.items()}
    loaded = {name: latency_under_load(p, sc, load) for name, p in plans.items()} if load is not None else None
    warnings = beaten_warning({k: v for k, v in gains.items() if k != "prfaas-pd"}) + plan_warnings(prf, sc)
    notes = list(sc.notes) + perf_notes(prf.perf) + [f"comparison basis: {basis}",
                                                     f"TTFT method: {prf.ttft.method}"]
    bars = _confidence(sc, prf, plans["homogeneous-pd"].layout, samples, seed, warnings)
    return CompareAnswer(sc, basis, plans, gains, warnings, notes, loaded, bars)


@dataclass(frozen=True)
class LayoutAnswer:
    """``prfaas-plan size --layout FILE``: the linear program's per-site optimum of a layout file."""

    path: str
    layout: Layout
    scenario: Scenario
    result: LPResult                  # ``sites``: one result per site
    perf: PerfInputs                  # every site's per-instance performance
    resplit: list[str]                # sites whose prefill/decode split the program changed
    warnings: list[PlanWarning]
    notes: list[str]


def layout_scenario(layout: Layout, model: str = DEFAULTS.model, tpot: str = DEFAULTS.tpot,
                    workload: str = DEFAULTS.workload, inputs: str = DEFAULTS.inputs) -> Scenario:
    """The `Scenario` of a layout file: the file's own sites and links, exact mode; the model, SLO,
    workload and input level as given."""
    from ..profiles import get_model
    from ..units import parse_tpot_s
    from ..workload import resolve_workload
    from .scenario import INPUT_LEVELS, check_choice

    check_choice(inputs, INPUT_LEVELS, "--inputs")
    r = layout.remote
    remote = f"{r.instance.chips * r.instances}x{r.instance.chip.name.upper()}" if r is not None else ""
    site = layout.pd_sites[0]
    local = f"{site.instance.chips * site.instances}x{site.instance.chip.name.upper()}"
    return scenario_for(get_model(model), remote, local, site.link, site.instance.chips, parse_tpot_s(tpot),
                        "exact", inputs, resolve_workload(workload))


def answer_layout(path: str | Path, model: str = DEFAULTS.model, tpot: str = DEFAULTS.tpot,
                  workload: str = DEFAULTS.workload, inputs: str = DEFAULTS.inputs) -> LayoutAnswer:
    """Optimize every site's routing and split of the layout file at ``path`` with the linear program."""
    from ..layout import load_layout

    lay = load_layout(path)
    sc = layout_scenario(lay, model, tpot, workload, inputs)
    res, perf = size_layout(lay, sc)
    resplit = [f"{site.name} {site.prefill}P+{site.decode}D -> {r.n_prefill:.0f}P+{r.n_decode:.0f}D"
               for site, r in zip(lay.pd_sites, res.sites) if round(r.n_prefill) != site.prefill]
    notes = list(sc.notes) + [f"layout {lay.name} from {path}; linear program over {len(res.bin_length)} "
                              "length bins per site (exact mode), integer local splits",
                              f"{res.method}: total {res.lambda_rps:.3f} req/s, proven optimality gap "
                              f"{res.gap:.2%} (upper bound {res.bound_rps:.3f} req/s)",
                              "threshold routing False: the optimal routing is not a pure threshold, or not "
                              "unique because a stage other than prefill binds",
                              f"remote prefill: {perf.remote_prefill.source}" if perf.remote_prefill else
                              "no remote site"]
    if resplit:
        notes.insert(0, "the file's prefill/decode splits are re-optimized (its counts are totals): "
                     + "; ".join(resplit))
    notes += [f"site {n} prefill: {sp.prefill.source}; decode {sp.decode.tokens_per_s:,.0f} tokens/s per "
              f"instance ({sp.decode.source})" for n, sp in perf.sites.items()]
    return LayoutAnswer(str(path), lay, sc, res, perf, resplit, [], notes)


@dataclass(frozen=True)
class ReproduceAnswer:
    """``prfaas-plan reproduce``: each published figure against ours, the layouts, and the verdict."""

    inputs: str
    mode: str
    study: CaseStudy
    figures: list[dict]                    # case_study.compare_to_targets rows
    h20_prediction: list[dict] | None      # predicted level only: our H20 against the back-solved inputs
    notes: list[str]
    warnings: list[PlanWarning] = field(default_factory=list)

    @property
    def within(self) -> int:
        return sum(r["within"] for r in self.figures)

    @property
    def known_gaps(self) -> list[str]:
        return [r["figure"] for r in self.figures if r["known_gap"]]

    @property
    def failed(self) -> list[str]:
        """Figures out of tolerance without a listed known gap (the command exits 1 on any)."""
        return [r["figure"] for r in self.figures if not r["within"] and not r["known_gap"]]

    @property
    def verdict(self) -> str:
        """One line: how many figures are within tolerance, the known gaps and any failure."""
        out = f"{self.within} of {len(self.figures)} figures within tolerance"
        if self.known_gaps:
            out += f"; known gaps: {', '.join(self.known_gaps)}"
        if self.failed:
            out += "; OUT OF TOLERANCE: " + ", ".join(self.failed)
        return out


def answer_reproduce(inputs: str = "paper", mode: str = "representative") -> ReproduceAnswer:
    """The paper's case study at an input level (paper or predicted) and mode."""
    from . import case_study as paper
    from .scenario import INPUT_LEVELS, MODES, check_choice

    check_choice(inputs, INPUT_LEVELS[::-1], "--inputs")
    check_choice(mode, MODES, "--mode")
    study = paper.run_case_study(inputs, mode)
    rows = paper.compare_to_targets(study)
    prf = study.plans["prfaas-pd"]
    notes = [f"inputs: {inputs}; mode: {mode}"] + list(study.scenario.notes) + perf_notes(prf.perf)
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        if r["known_gap"]:
            by_reason.setdefault(r["known_gap"], []).append(r["figure"])
    notes += [f"known gap ({', '.join(figs)}): {reason}" for reason, figs in by_reason.items()]
    notes.append(f"TTFT method: {prf.ttft.method}")
    h20 = None
    if inputs == "predicted":
        sc = study.scenario
        h20 = paper.h20_prediction_error(sc.grid.mean + sc.output_tokens / 2)
    return ReproduceAnswer(inputs, mode, study, rows, h20, notes)
