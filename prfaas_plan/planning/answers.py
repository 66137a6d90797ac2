"""Whole answers to the planner's questions: one call per command, returning every figure, warning and
note the command prints.

- `answer_size`: the PrfaaS-PD plan and the follow-up questions asked of it (target rate, load, TTFT
  SLO, LP cross-check, link sizing);
- `answer_compare`: PrfaaS-PD against the local cluster alone, homogeneous PD (equal instances, equal
  budget) and naive heterogeneous, optionally all at one offered rate;
- `answer_layout`: a layout file: one PD site as `answer_size` with the file's split kept, several PD
  sites (sharing one remote site) by the linear program;
- `answer_reproduce`: the paper's case study against its published figures.

Renderers (`prfaas_plan.output`) turn these records into tables, JSON and CSV; they compute nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import PlanError
from ..layout import Layout
from ..performance.sharing import one_memo_per_call
from ..units import format_tokens
from .confidence import degraded_link, mode_verdicts, plan_error_bars
from .plans import (
    Plan,
    check_servable,
    compare,
    optimize,
    perf_inputs,
    prfaas_layout,
)
from .questions import (
    AtRate,
    LinkSizing,
    LoadedLatency,
    SloRate,
    TargetSizing,
    Verification,
    at_common_rate,
    cheapest_for_rate,
    latency_under_load,
    rate_within_slo,
    routing_screen,
    smallest_link,
    verify,
)
from .question import Question
from .scenario import Scenario, layout_perf
from .warnings import PlanWarning, band_warnings, basis_warning, beaten_warning, plan_warnings

if TYPE_CHECKING:  # pragma: no cover
    from ..analytic.degraded import DegradedLink
    from ..analytic.lp import LPResult
    from ..analytic.throughput import PerfInputs
    from ..analytic.uncertainty import ErrorBars
    from .case_study import CaseStudy
    from .headroom import LinkHeadroom
    from .layouts import LayoutFigures
    from .sensitivity import Sensitivity
    from .slo import SloSearch
    from .configurations import ConfigSearch, SearchSpec
    from .layout_search import LayoutSearch

COST_NOTE = "costs from the hardware profiles' price indications (labelled there), not quotes"


def perf_notes(perf) -> list[str]:
    """Where each site's prefill and decode figures come from, with the decode operating point."""
    notes = []
    if perf.remote_prefill is not None:
        notes.append(f"remote prefill: {perf.remote_prefill.source}")
    for name, sp in perf.sites.items():
        notes.append(f"{name} prefill: {sp.prefill.source}")
        batch = f"{sp.decode.batch:,.0f}" if float(sp.decode.batch).is_integer() else f"{sp.decode.batch:,.1f}"
        notes.append(f"{name} decode: {batch} requests x 1 token per {sp.decode.step_s * 1e3:.1f} ms "
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
    basis: str = "instances"
    slo_search: SloSearch | None = None   # the SLO's rate with threshold and split re-optimized (planning/slo.py)
    sensitivity: Sensitivity | None = None  # the gain's drivers ranked (planning/sensitivity.py), when asked
    configurations: ConfigSearch | None = None  # the configuration search, when the roles were searched
    layout_roles: tuple | None = None  # a one-site layout searched by `layout_search`: its `RoleConfig`s
    link_headroom: LinkHeadroom | None = None  # the headroom kept and, on a loaded link, what more would cost

    @property
    def verdict(self) -> dict | None:
        """The verdict record (`verdict_record`) against the homogeneous baseline at ``basis``."""
        return verdict_record(self.basis, self.error_bars)


BASIS_PHRASES = {"capex": "at equal capex", "rental": "at equal rental cost", "chips": "at equal chip count",
                 "instances": "at equal instance count"}
"""How the headline sentence names each basis: 'PrfaaS pays at equal capex at 90% confidence'."""


def verdict_record(basis: str, bars: ErrorBars | None) -> dict | None:
    """The verdict as data (None without error bars): ``basis``, the baseline, the gain's P10/P50/P90 (x),
    the point gain, ``verdict`` (pays / does not pay / cannot tell) and the headline ``sentence`` naming
    the basis."""
    if bars is None:
        return None
    return {"basis": basis, "baseline": bars.baseline, "gain_p10": bars.gain.p10, "gain_p50": bars.gain.p50,
            "gain_p90": bars.gain.p90, "gain_point": bars.point_gain, "verdict": bars.verdict,
            "sentence": bars.verdict_line(BASIS_PHRASES[basis])}


def _confidence(sc: Scenario, plan: Plan, baseline, samples: int, seed: int, warnings: list[PlanWarning],
                open_choices: tuple[str, ...] | None = None, research=None):
    """The error bars (None when ``samples`` is 0) and, with ``open_choices`` (the deployment inputs left at
    their defaults; `planning.sensitivity`), the ranked drivers, the bars spread over those choices; a
    warning when the two modes disagree on the verdict and one when the point estimate's gain lies outside
    its own P10-P90 band. A "cannot tell" verdict names the measurement that would decide it."""
    from .sensitivity import deciding_bars, sensitivity_of

    modes = mode_verdicts(sc, plan, baseline)
    if modes.warning():
        warnings.append(PlanWarning("modes-disagree", modes.warning()))
    from .confidence import check_sampler

    check_sampler(samples, seed, len(plan.surface.thresholds))
    ranked = sensitivity_of(sc, plan, baseline, open_choices, modes.gain[sc.mode], research) \
        if open_choices is not None else None
    if samples == 0:
        return None, ranked
    bars = replace(plan_error_bars(sc, plan, baseline, samples, seed, variants=_variants(sc, plan, ranked)),
                   point_gain=modes.gain[sc.mode])
    bars = deciding_bars(sc, plan, baseline, bars, ranked)
    warnings.extend(band_warnings(bars))
    return bars, ranked


def _variants(sc: Scenario, plan: Plan, ranked) -> tuple:
    """The deployment alternatives the bars spread over: those `sensitivity_of` ranked (none unless asked)."""
    return () if ranked is None else ranked.variants


@one_memo_per_call
def answer_size(question: Question, *, threshold: float | None = None, target_rate: float | None = None,
                load: float | None = None, ttft_slo: tuple[float, float] | None = None, verify_lp: bool = False,
                size_link: float | None = None, link_degraded_bps: float | None = None, samples: int = 400,
                seed: int = 0, layout: Layout | None = None, keep_split: bool = False,
                sensitivity: tuple[str, ...] | None = None, search: SearchSpec | None = None) -> SizeAnswer:
    """Size PrfaaS-PD for ``question`` and answer the follow-up questions asked.

    ``threshold`` (tokens) evaluates that routing threshold instead of optimizing it; ``target_rate``
    (requests/s) sizes the cheapest cluster; ``load`` (fraction of Lambda_max) gives latency under load;
    ``ttft_slo`` = (percentile, seconds), percentile 0 for the mean, gives the rate within the SLO;
    ``verify_lp`` cross-checks with the linear program; ``size_link`` (fraction) finds the smallest link;
    ``link_degraded_bps`` evaluates the plan at a lower link rate (counts fixed, threshold re-optimized);
    ``samples`` (0: none) seeded draws of the calibration errors give error bars and a verdict.
    ``layout`` (default: the scenario's PrfaaS-PD) is what is planned, its split kept with ``keep_split``.
    The verdict is against homogeneous PD at the question's basis (None: `plans.default_basis`, as every
    command).
    ``sensitivity`` (the deployment inputs the user left at their defaults, `planning.sensitivity.CHOICES`
    names; None: not asked) ranks the gain's drivers and spreads the error bars over those choices.
    ``search`` (what the user pinned) searches every role's configuration first
    (`configurations.search_configurations`) and plans the best; None keeps the scenario's shapes.
    """
    from .plans import basis_baseline, resolve_basis

    sc = question.scenario
    given_layout = layout
    found = None
    if search is not None and layout is None:
        from .configurations import chosen_scenario, search_configurations

        found = search_configurations(sc, search)
        sc = chosen_scenario(sc, found)
    basis = resolve_basis(sc, question.basis)
    perf = perf_inputs(sc) if layout is None else layout_perf(layout, sc)
    layout = prfaas_layout(sc) if layout is None else layout
    plan = optimize(layout, sc, perf, threshold, keep_split)
    check_servable(plan)
    ev = plan.best
    offloads = ev.layout.remote is not None and ev.layout.remote.instances > 0
    notes = list(sc.notes) + perf_notes(perf) + ([_link_note(plan, sc)] if offloads else []) + [
        f"TTFT method: {plan.ttft.method}", COST_NOTE]
    if threshold is not None:
        notes.insert(0, f"threshold fixed at {threshold:,.0f} tokens"
                     + ("" if keep_split else ": the split is optimized for it"))
    if (why := non_unique_split(plan)) is not None:
        notes.append(why)
    baseline = basis_baseline(sc, basis) if offloads else None   # the verdict's (`_confidence`)
    warnings = plan_warnings(plan, sc) + (basis_warning(basis, plan, baseline) if offloads else [])
    headroom = _link_headroom(question, plan, given_layout, search if found is not None else None, threshold,
                              keep_split)
    if headroom is not None:
        from .headroom import headroom_note

        if (said := headroom_note(ev.layout.pd_sites[0].link, headroom.source)) is not None:
            notes.insert(0, said)
        if (line := headroom.line()) is not None:
            warnings = [replace(w, message=f"{w.message}; {line}") if w.code == "link-no-headroom" else w
                        for w in warnings]
    checked = verify(plan, sc) if verify_lp else None
    if checked is not None and not checked.threshold_optimal:
        warnings.append(PlanWarning("threshold-not-optimal", checked.explanation))
    elif checked is None and (screen := routing_screen(plan, sc)):
        warnings.append(PlanWarning("threshold-may-not-be-optimal", screen))
    slo = rate_within_slo(plan, sc, *ttft_slo) if ttft_slo is not None else None
    searched = None
    if slo is not None:
        from .slo import slo_configurations, slo_search, slo_warnings

        searched = slo_search(plan, sc, slo) if found is None else \
            slo_configurations(question.scenario, search, plan, sc, slo, threshold)
        warnings.extend(slo_warnings(searched))
    bars, ranked = _confidence(sc, plan, baseline, samples, seed, warnings, sensitivity,
                               _research(question, search, basis) if found is not None else None) \
        if offloads else (None, None)
    target = cheapest_for_rate(plan, sc, target_rate) if target_rate is not None else None
    if target is not None and (said := target.verdict_sentence(plan)) is not None:
        warnings.append(PlanWarning("prfaas-not-cheapest", said))
    return SizeAnswer(
        sc, plan, warnings, notes, threshold is not None,
        target=target,
        loaded=latency_under_load(plan, sc, load) if load is not None else None,
        slo=slo, slo_search=searched,
        verification=checked,
        link_sizing=smallest_link(plan, sc, size_link) if size_link is not None else None,
        error_bars=bars, sensitivity=ranked,
        degraded=degraded_link(sc, plan, link_degraded_bps, load) if link_degraded_bps is not None else None,
        basis=basis, configurations=found, link_headroom=headroom)


def _link_headroom(question: Question, plan: Plan, layout: Layout | None, search: SearchSpec | None,
                   threshold: float | None, keep_split: bool):
    """`headroom.link_headroom` of ``plan``: each alternative re-planned as ``plan`` was (``layout`` None:
    the question's PrfaaS-PD, its configurations searched again under ``search``; else that layout, its
    shapes kept), only the link's headroom changed."""
    from .headroom import headroom_source, link_headroom, with_headroom
    from .question import FIELDS

    def replan(h: float):
        if layout is not None:
            lay = replace(layout, pd_sites=tuple(replace(s, link=with_headroom(s.link, h)) for s in layout.pd_sites))
            return optimize(lay, question.scenario, plan.perf, threshold, keep_split).best
        sc = replace(question.scenario, link=with_headroom(question.scenario.link, h))
        if search is not None:
            from .configurations import chosen_scenario, search_configurations

            # the alternative's optimum only: no runner-up TTFT (report=0), branch and bound (prune), whose
            # best is the exhaustive search's (tests/test_configurations.py)
            sc = chosen_scenario(sc, search_configurations(sc, search, report=0, prune=True))
        return optimize(prfaas_layout(sc), sc, perf_inputs(sc), threshold, keep_split).best

    given = question.given.get("link_headroom", FIELDS["link_headroom"].default) != FIELDS["link_headroom"].default
    from_file = question.layout is not None and any(s.link is not None and s.link.headroom > 0
                                                    for s in question.layout.pd_sites)
    return link_headroom(plan, headroom_source(given, from_file), replan)


def _research(question: Question, search: SearchSpec, basis: str):
    """The sensitivity's re-search of the configurations under each alternative choice (`sensitivity.Research`)."""
    from .sensitivity import Research

    return Research(question.scenario, search, basis)


def non_unique_split(plan: Plan) -> str | None:
    """A sentence when several local splits reach the optimum's throughput (a stage other than local
    prefill binds there, so the split does not move it), naming the range and the binding stage."""
    from ..analytic.search import REL_TIE

    surf = plan.surface
    if len(surf.splits) < 2:
        return None
    reach = surf.lam.max(axis=0) >= plan.best.lambda_max * (1 - REL_TIE)
    if reach.sum() < 2:
        return None
    ok = surf.splits[reach]
    n = plan.best.layout.pd_sites[0].instances
    return (f"the split is not unique: {ok.min()} to {ok.max()} local prefill instances (of {n}) all reach "
            f"{plan.best.lambda_max:.3f} req/s because the {plan.best.binding} stage binds; the fewest "
            "prefill instances are shown")


@dataclass(frozen=True)
class AtCommonRate:
    """Every layout of a comparison at one offered rate (requests/s): ``load`` is its fraction of
    PrfaaS-PD's Lambda_max (None when the rate was given directly)."""

    rate_rps: float
    load: float | None
    layouts: dict[str, AtRate]


@dataclass(frozen=True)
class CompareAnswer:
    """``prfaas-plan compare``: the layouts (`plans.compare`), PrfaaS-PD's gain over each (x), and
    every layout at one common offered rate when asked."""

    scenario: Scenario
    basis: str
    plans: dict[str, Plan]
    gains: dict[str, float | None]              # layout -> PrfaaS-PD Lambda_max / its Lambda_max
    warnings: list[PlanWarning]
    notes: list[str]
    at_rate: AtCommonRate | None = None
    error_bars: ErrorBars | None = None
    baseline_bars: dict[str, ErrorBars] = field(default_factory=dict)  # every baseline row's gain band
    sensitivity: Sensitivity | None = None  # the gain's drivers ranked (planning/sensitivity.py), when asked

    @property
    def verdict(self) -> dict | None:
        """The verdict record (`verdict_record`) against the homogeneous baseline at ``basis``."""
        return verdict_record(self.basis, self.error_bars)


@one_memo_per_call
def answer_compare(question: Question, load: float | None = None, rate: float | None = None,
                   samples: int = 400, seed: int = 0, sensitivity: tuple[str, ...] | None = None,
                   search: SearchSpec | None = None) -> CompareAnswer:
    """PrfaaS-PD against the local cluster alone, homogeneous PD at equal instances and at equal
    budget at the question's basis (None: capex when the chips have prices) and naive
    heterogeneous. With ``load`` (a fraction of PrfaaS-PD's Lambda_max) or ``rate`` (requests/s) every
    layout runs at that one offered rate: its latency, whether it saturates, and its cloud cost per million
    output tokens there; ``samples``, ``seed`` and ``sensitivity`` as in `answer_size` (every baseline row's
    band spread over the same deployment alternatives), ``search`` too (the searched configuration is
    PrfaaS-PD's, and the homogeneous baselines run the local shape and decode configuration it chose)."""
    from .plans import basis_baseline_name, resolve_basis

    sc = question.scenario
    if search is not None:
        from .configurations import chosen_scenario, search_configurations

        sc = chosen_scenario(sc, search_configurations(sc, search))
    basis = resolve_basis(sc, question.basis)
    research = _research(question, search, basis) if search is not None else None
    if load is not None and rate is not None:
        raise PlanError("give either `load` or `rate`, not both")
    if load is not None and not 0 < load < 1:
        raise PlanError(f"`load` {load:g}: expected a fraction of PrfaaS-PD's Lambda_max in (0, 1)")
    plans = compare(sc, basis, equal_instances=False)
    prf = plans["prfaas-pd"]
    check_servable(prf)
    base = prf.best.lambda_max
    gains = {name: base / p.best.lambda_max if p.best.lambda_max else None for name, p in plans.items()}
    at = None
    if load is not None or rate is not None:
        offered = rate if rate is not None else load * base
        at = AtCommonRate(offered, load, {name: at_common_rate(p, sc, offered) for name, p in plans.items()})
    warnings = beaten_warning({k: v for k, v in gains.items() if k != "prfaas-pd"}) + plan_warnings(prf, sc) \
        + basis_warning(basis, prf, plans[basis_baseline_name(basis)].layout)
    if at is not None and (sat := [n for n, r in at.layouts.items() if r.saturated]):
        warnings.append(PlanWarning("saturated-at-rate", f"{', '.join(sat)} cannot carry {at.rate_rps:.3f} req/s "
                                                         "(offered rate at or above its Lambda_max)"))
    notes = list(sc.notes) + perf_notes(prf.perf) + [_basis_note(plans, basis), f"comparison basis: {basis}", f"TTFT method: {prf.ttft.method}",
                                                     COST_NOTE]
    bars, ranked = _confidence(sc, prf, plans[basis_baseline_name(basis)].layout, samples, seed, warnings,
                               sensitivity, research)
    others = {} if bars is None else {
        name: plan_error_bars(sc, prf, p.layout, samples, seed, _variants(sc, prf, ranked)) for name, p in plans.items()
        if name not in ("prfaas-pd", basis_baseline_name(basis)) and p.best.lambda_max > 0 and _sampleable(prf, p)}
    return CompareAnswer(sc, basis, plans, gains, warnings, notes, at, bars,
                         {basis_baseline_name(basis): bars, **others} if bars is not None else {}, ranked)


def _sampleable(prf: Plan, other: Plan) -> bool:
    """True when ``other`` is a single-PD-site layout on PrfaaS-PD's local chip (and, if it has a remote
    site, its remote chip), so its error bars share PrfaaS-PD's sampled inputs (`analytic.uncertainty`)."""
    lay, site = other.layout, prf.layout.pd_sites[0]
    remote_ok = lay.remote is None or (prf.layout.remote is not None and
                                       lay.remote.instance.chip.name == prf.layout.remote.instance.chip.name)
    return remote_ok and len(lay.pd_sites) == 1 and lay.pd_sites[0].name == site.name \
        and lay.pd_sites[0].instance.chip.name == site.instance.chip.name


def _basis_note(plans: dict[str, Plan], basis: str) -> str:
    """What each baseline holds constant, with the budget that sizes the one at ``basis``."""
    prf = plans["prfaas-pd"]
    held = {"instances": "homogeneous-pd = as many local-chip instances as PrfaaS-PD has (the paper's)",
            "chips": "homogeneous-equal-chips = as many local-chip instances as PrfaaS-PD's chips fill",
            "capex": f"homogeneous-equal-capex = what PrfaaS-PD's purchase price (${prf.capex_usd / 1e6:,.2f}M) buys",
            "rental": f"homogeneous-equal-rental = what PrfaaS-PD's cloud cost (${prf.cloud_usd_per_hour:,.0f}/h, "
                      "link included) rents at the profiles' USD per GPU-hour"}[basis]
    return (f"baselines: local-alone = your local chips as homogeneous PD; {held}; naive-heterogeneous = the same "
            "chips with every prefill remote")


@dataclass(frozen=True)
class LayoutAnswer:
    """``prfaas-plan size --layout FILE`` with several PD sites: the linear program's per-site optimum."""

    path: str
    layout: Layout
    scenario: Scenario
    result: LPResult                  # ``sites``: one result per site
    perf: PerfInputs                  # every site's per-instance performance
    resplit: list[str]                # sites whose prefill/decode split the program changed
    warnings: list[PlanWarning]
    notes: list[str]
    figures: LayoutFigures | None = None  # per-site figures, routing rule, baselines, error bars (`layouts`)
    configurations: LayoutSearch | None = None  # the configuration search per role and site, when searched

    @property
    def basis(self) -> str | None:
        return self.figures.basis if self.figures is not None else None

    @property
    def verdict(self) -> dict | None:
        """The verdict record (`verdict_record`) against homogeneous PD at the layout's basis."""
        if self.figures is None:
            return None
        return verdict_record(self.figures.basis, self.figures.error_bars)


def _layout_notes(lay: Layout, path, plan: Plan, free: Plan) -> list[str]:
    """What a one-site layout file fixed and what the planner chose, with the free split's throughput."""
    site, ev = lay.pd_sites[0], plan.best
    t = ("the file's threshold" if lay.threshold is not None else "threshold optimized (threshold: auto)")
    rtt = f"rtt {site.link.rtt_s * 1e3:g} ms from the file" if site.link is not None else "no link"
    out = [f"layout {lay.name} from {path}: its split {site.prefill}P+{site.decode}D is kept; {t}; {rtt}"]
    fe = free.best
    if (fe.n_prefill, fe.threshold) != (ev.n_prefill, ev.threshold) and fe.lambda_max > ev.lambda_max * (1 + 1e-6):
        out.append(f"with the split free the planner would choose {fe.n_prefill}P+{fe.n_decode}D: "
                   f"{fe.lambda_max:.3f} req/s ({fe.lambda_max / ev.lambda_max - 1:+.1%} over the file's split)")
    return out


@one_memo_per_call
def answer_layout(question: Question, *, samples: int = 400, seed: int = 0, search: SearchSpec | None = None,
                  **questions) -> SizeAnswer | LayoutAnswer:
    """Plan the layout file of ``question`` (`Question.from_layout`). One PD site: the full `answer_size`
    (``questions`` are its follow-up keywords; ``samples``, ``seed`` its error bars) with the file's rtt and
    threshold (when not ``auto``) kept, and its split when the roles are not searched. Several PD sites: every
    site's routing and split by the linear program (no follow-up questions). ``search`` (what the user pinned
    on the command line; None: no search) searches every role's configuration per site first
    (`layout_search`), unless the file says ``search: false`` or the inputs are the paper's."""
    from dataclasses import replace

    from .layout_search import searchable

    lay, sc = question.layout, question.scenario
    if lay is None:
        raise PlanError("answer_layout: the question has no `layout` (use Question.from_layout)")
    path = question.layout_path
    if questions.get("threshold") is not None:
        lay = replace(lay, threshold=questions["threshold"])
    searched = search is not None and searchable(lay, sc)
    if len(lay.pd_sites) == 1:
        # the planner's name for the one local site, so its baselines (error bars, modes) share the inputs
        lay = replace(lay, pd_sites=(replace(lay.pd_sites[0], name="local"),))
        if lay.remote is None:
            lay = replace(lay, threshold=float("inf"))
        if searched:
            return _one_site_searched(question, lay, search, samples, seed, questions)
        a = answer_size(question, layout=lay, keep_split=True, samples=samples, seed=seed, **questions)
        free = optimize(lay, sc, a.plan.perf, questions.get("threshold"))
        return replace(a, notes=_layout_notes(lay, path, a.plan, free) + a.notes)
    from .layouts import layout_default_basis, layout_figures, layout_warnings, plan_layout, refuse_questions

    refuse_questions(questions)
    found = None
    if searched:
        from .layout_search import search_layout

        found = search_layout(lay, sc, search)
        res, perf, lay = found.result, found.perf, found.layout
        resplit = []
    else:
        res, perf, lay = plan_layout(lay, sc)
        resplit = [f"{site.name} {site.prefill}P+{site.decode}D -> {_count(r.n_prefill)}P+{_count(r.n_decode)}D"
                   for site, r in zip(lay.pd_sites, res.sites) if round(r.n_prefill) != site.prefill]
    notes = list(sc.notes) + [f"layout {lay.name} from {path}; linear program over {len(res.bin_length)} "
                              "length bins per site (exact mode), integer local splits",
                              f"{res.method}: total {res.lambda_rps:.3f} req/s, proven optimality gap "
                              f"{res.gap:.2%} (upper bound {res.bound_rps:.3f} req/s)",
                              f"remote prefill: {perf.remote_prefill.source}" if perf.remote_prefill else
                              "no remote site"]
    if found is not None:
        notes = [_transfer_note(n, lay) for n in notes] + [found.note()]
    idle = [site.name for site, r in zip(lay.pd_sites, res.sites) if not r.lambda_rps > 1e-9]
    if idle:
        notes.append(f"{', '.join(idle)} carr{'ies' if len(idle) == 1 else 'y'} no traffic at the optimum: the "
                     "total does not grow by routing requests there, so its split is not unique (any split reaches "
                     "the same total)")
    if any(not r.is_threshold for r in res.sites):
        notes.append("a site whose routing is not a pure threshold: the program's optimum sends some lengths "
                     "both ways, or the routing is not unique because a stage other than prefill binds there")
    if resplit:
        notes.insert(0, "the file's prefill/decode splits are re-optimized (its counts are totals): "
                     + "; ".join(resplit))
    notes += [f"site {n} prefill: {sp.prefill.source}; decode {sp.decode.tokens_per_s:,.0f} tokens/s per "
              f"instance ({sp.decode.source})" for n, sp in perf.sites.items()]
    from .headroom import headroom_note

    notes += [f"site {s.name}: {said}" for s in lay.pd_sites if (said := headroom_note(s.link, "layout file"))]
    basis = layout_default_basis(lay) if question.basis is None else question.basis
    figures = layout_figures(path, lay, sc, res, perf, basis, samples, seed)
    warnings = layout_warnings(figures)
    return LayoutAnswer(str(path), lay, sc, res, perf, resplit, warnings, notes + list(figures.notes), figures,
                        found)


def _transfer_note(note: str, lay: Layout) -> str:
    """The scenario's transfer-bytes note replaced by what the searched sites move."""
    if not note.startswith("transfer bytes:"):
        return note
    return ("transfer bytes: per site as its decode configuration receives them (dp-attention: one copy per "
            "request; replicated: the per-rank copies of TP attention): "
            + ", ".join(f"{s.name} {s.transfer}" for s in lay.pd_sites))


def _one_site_searched(question: Question, lay: Layout, search: SearchSpec, samples: int, seed: int,
                       questions: dict) -> SizeAnswer:
    """A one-site layout with its roles searched: `size`'s own search when the site and the remote run one
    stack and the threshold is free (so the answer is one-site `size`'s), else `layout_search` on the file.
    The split is chosen for the chosen shapes (the file's counts are its chips)."""
    from dataclasses import replace

    site, r = lay.pd_sites[0], lay.remote
    sc = question.scenario
    pins = replace(search, remote_chips=r.instance.chips if r is not None and r.pin_chips else None,
                   local_chips=site.instance.chips if site.pin_chips else None)
    path = question.layout_path
    rtt = f"rtt {site.link.rtt_s * 1e3:g} ms from the file" if site.link is not None else "no link"
    said = (f"layout {lay.name} from {path}: one PD site, its roles' configurations searched (`search: false` "
            f"keeps the file's shapes and split); the split is optimized for the chosen shapes; {rtt}")
    own_stack = {(site.stack or sc.stack), (r.stack or sc.stack) if r is not None else sc.stack} == {sc.stack}
    if r is not None and r.instances > 0 and own_stack and lay.threshold is None:
        a = answer_size(question, samples=samples, seed=seed, search=pins, **questions)
        return replace(a, notes=[said] + a.notes)
    from .layout_search import search_layout

    found = search_layout(lay, sc, pins)
    q = {k: v for k, v in questions.items() if k != "threshold"}
    a = answer_size(question, layout=found.layout, samples=samples, seed=seed, threshold=lay.threshold, **q)
    return replace(a, notes=[said, found.note()] + a.notes, layout_roles=found.roles)


@one_memo_per_call
def answer_compare_layout(question: Question, load: float | None = None, rate: float | None = None,
                          samples: int = 400, seed: int = 0, sensitivity: tuple[str, ...] | None = None,
                          search: SearchSpec | None = None) -> CompareAnswer | LayoutAnswer:
    """``compare --layout FILE`` of ``question`` (`Question.from_layout`). One PD site: `answer_compare` of
    the file's chips, instance shapes and link (rtt included; the split is optimized, as compare does).
    Several: `answer_layout`'s per-site figures and baselines (each site alone, homogeneous PD at the
    question's basis) with error bars; ``load``/``rate``/``sensitivity`` are refused there (TTFT under load
    is modelled for one PD site). ``search`` as in `answer_layout` (one site: `answer_compare`'s search with
    the file's pins)."""
    from .layout_search import searchable

    lay, path = question.layout, question.layout_path
    if lay is None:
        raise PlanError("answer_compare_layout: the question has no `layout` (use Question.from_layout)")
    if search is not None and not searchable(lay, question.scenario):
        search = None
    if len(lay.pd_sites) == 1:
        if search is not None:
            site, r = lay.pd_sites[0], lay.remote
            search = replace(search, remote_chips=r.instance.chips if r is not None and r.pin_chips else None,
                             local_chips=site.instance.chips if site.pin_chips else None)
        a = answer_compare(question, load, rate, samples=samples, seed=seed, sensitivity=sensitivity, search=search)
        site = lay.pd_sites[0]
        return replace(a, notes=[f"layout {lay.name} from {path}: its chips, instance shapes and link (rtt "
                                 f"{site.link.rtt_s * 1e3:g} ms) are compared; the split and threshold are optimized"
                                 if site.link is not None else
                                 f"layout {lay.name} from {path}: its chips and instance shape are compared"] + a.notes)
    return answer_layout(question, samples=samples, seed=seed, search=search, load=load, rate=rate,
                         sensitivity=sensitivity)


def _count(x: float) -> int:
    """An instance count from the program (``-0.0`` and rounding noise become whole, non-negative)."""
    return max(0, int(round(x)))


REPRODUCTION_KINDS = {
    "paper": "arithmetic check on inputs back-solved from the paper's results (not an independent prediction)",
    "predicted": "prediction: our calibrated H20 model in place of the back-solved inputs, checked against the "
                 "paper's figures",
}


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
    strict: bool = False

    @property
    def kind(self) -> str:
        """What this reproduction is (`REPRODUCTION_KINDS`)."""
        return REPRODUCTION_KINDS[self.inputs]

    @property
    def within(self) -> int:
        return sum(r["within"] for r in self.figures)

    @property
    def known_gaps(self) -> list[str]:
        return [r["figure"] for r in self.figures if r["known_gap"]]

    @property
    def missed(self) -> list[str]:
        return [r["figure"] for r in self.figures if not r["within"]]

    @property
    def failed(self) -> list[str]:
        """Figures that fail the check (the command exits 1 on any): out of band without a named cause,
        or with ``strict`` out of band at all."""
        return self.missed if self.strict else [r["figure"] for r in self.figures
                                                if not r["within"] and not r["known_gap"]]

    @property
    def status(self) -> str:
        """``pass`` (every figure in its band), ``pass-with-known-gaps`` or ``fail``."""
        return "fail" if self.failed else "pass-with-known-gaps" if self.missed else "pass"

    @property
    def verdict(self) -> str:
        """One line: the status, how many figures are within their bands, the known gaps and any failure."""
        out = f"{self.status}: {self.within} of {len(self.figures)} figures within their bands"
        if self.known_gaps:
            out += f"; known gaps: {', '.join(self.known_gaps)}"
        if self.failed:
            out += "; FAILED: " + ", ".join(self.failed) + (" (any miss fails)" if self.strict else "")
        return out


def answer_reproduce(inputs: str = "paper", mode: str = "representative", *, strict: bool = False,
                     **shapes) -> ReproduceAnswer:
    """The paper's case study at an input level (paper or predicted) and mode; ``shapes`` (instance chips
    per role, dtypes) as `prfaas_plan.planning.case_study.scenario` takes them; ``strict`` fails on any
    figure out of its band."""
    from . import case_study as paper

    study = paper.run_case_study(inputs, mode, **shapes)
    rows = paper.compare_to_targets(study)
    prf = study.plans["prfaas-pd"]
    pr = study.price_ratio
    notes = [f"inputs: {inputs} ({REPRODUCTION_KINDS[inputs]}); mode: {mode}"] + list(study.scenario.notes) \
        + perf_notes(prf.perf)
    notes.append(f"equal cost: {pr.equal_cost_instances} homogeneous instances for PrfaaS-PD's purchase price at "
                 f"an H200/H20 price ratio of {pr.profiles:.2f} (hardware profiles' indications); the published "
                 + (f"gain needs {pr.needed_low:.2f} to under {pr.needed_high:.2f}" if pr.needed_low is not None
                    else "gain is not reached at any homogeneous size scanned"))
    notes.append(f"loaded P90 TTFT: both layouts at {study.loaded_rate_rps:.3f} req/s "
                 f"({paper.LOADED_SHARE:.0%} of homogeneous PD's Lambda_max)")
    notes += [f"known gap ({r['figure']}): {r['known_gap']}" for r in rows if r["known_gap"]]
    notes.append(f"TTFT method: {prf.ttft.method}")
    h20 = None
    if inputs == "predicted":
        sc = study.scenario
        h20 = paper.h20_prediction_error(sc.grid.mean + sc.output_tokens / 2)
    return ReproduceAnswer(inputs, mode, study, rows, h20, notes, strict=strict)
