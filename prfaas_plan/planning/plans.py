"""Sizing and comparison: from a user's question to optimized layouts, with every assumption listed.

`size` and `compare` optimize the layouts of a `Scenario` (see `prfaas_plan.planning.scenario`) by
grid search and gather each one's figures in a `Plan`; `size_layout` runs the linear program on a
layout file. `prfaas_plan.planning.answers` adds the follow-up questions, warnings and notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..analytic.search import (
    GridResult,
    bisect_steps,
    exact_bounds,
    grid_optimum,
    grid_search,
    search_thresholds,
)
from ..analytic.throughput import (
    Evaluation,
    LengthGrid,
    PerfInputs,
    routing_at,
    stage_bounds,
)
from ..analytic.ttft import TTFTSummary, ttft_summary
from ..errors import PlanError
from ..vocabulary import BASIS_ALIASES as VOCAB_ALIASES
from ..vocabulary import Basis, values
from ..layout import (
    Layout,
    Link,
    homogeneous_pd,
    instances_from_chips,
    prfaas_pd,
)
from .scenario import (  # noqa: F401  (re-exported: the planning API's historical home)
    GRID_POINTS,
    Scenario,
    instance_decode,
    instance_prefill,
    layout_perf,
    naive_layout,
    perf_inputs,
    prfaas_layout,
    scenario_for,
)


@dataclass(frozen=True)
class Plan:
    """An optimized layout with its derived figures: ``layout`` as posed (threshold and split free),
    ``best`` the optimum found (its ``layout`` has them set). The unloaded TTFT and the link's binding
    threshold are computed when first read (a sweep reads neither of its baselines'), unless given."""

    layout: Layout
    best: Evaluation
    surface: GridResult
    perf: PerfInputs
    grid: LengthGrid
    capex_usd: float           # purchase price of the layout's chips, NaN without prices
    cloud_usd_per_hour: float  # cloud rental of the chips plus the link's price, NaN without prices
    known_ttft: TTFTSummary | None = field(default=None, repr=False, compare=False)
    known_link_bind: tuple = field(default=(), repr=False, compare=False)   # (link_bind_threshold,) once known

    @cached_property
    def ttft(self) -> TTFTSummary:
        """Unloaded TTFT at the optimum's threshold (`analytic.ttft.ttft_summary`)."""
        if self.known_ttft is not None:
            return self.known_ttft
        return ttft_summary(self.best.layout, self.grid, self.perf, self.best.threshold)

    @cached_property
    def link_bind_threshold(self) -> float | None:
        """Below this threshold (tokens) the link would bind at the optimum's throughput (`_link_bind_threshold`)."""
        if self.known_link_bind:
            return self.known_link_bind[0]
        return _link_bind_threshold(self.best, self.grid, self.perf)

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens per second at Lambda_max."""
        return self.best.lambda_max * self.perf.output_tokens

    @property
    def rps_per_musd(self) -> float | None:
        """Requests/s at Lambda_max per million USD of purchase price (None without prices)."""
        return self.best.lambda_max / self.capex_usd * 1e6 if self.capex_usd else None

    @property
    def output_tokens_per_usd_cloud(self) -> float | None:
        """Output tokens per USD of hourly cloud cost at Lambda_max (None without prices)."""
        return self.output_tokens_per_s * 3600 / self.cloud_usd_per_hour if self.cloud_usd_per_hour else None


def _link_bind_threshold(best: Evaluation, grid: LengthGrid, perf: PerfInputs) -> float | None:
    """The threshold (tokens) below which the link could not carry the optimum's throughput: the
    link's bound rises with t (fewer, longer requests cross), so it is found by bisection between the
    candidate thresholds. None when the link never binds (or there is none); inf when it always does."""
    lay = best.layout
    if lay.remote is None or lay.pd_sites[0].link is None:
        return None
    site = lay.pd_sites[0].name
    level = best.lambda_max * (1 - 1e-9)
    fast = exact_bounds(lay, grid, perf, best.n_prefill) if best.mode == "exact" else None

    def carries(steps: np.ndarray) -> np.ndarray:
        """Whether the link carries the optimum at each step of the routing statistics."""
        if fast is not None:
            return fast(steps)[1] >= level
        routing = routing_at(grid, perf, steps, best.mode, site)
        return stage_bounds(lay, routing, perf, [best.n_prefill]).link[:, 0] >= level

    ts = search_thresholds(grid)
    ok = np.flatnonzero(carries(grid.split_index(ts)))
    if len(ok) == 0:
        return float("inf")
    if ok[0] == 0:
        return None
    lo, hi = float(ts[ok[0] - 1]), float(ts[ok[0]])
    first, last = (int(k) for k in grid.split_index([lo, hi]))
    lo, hi = bisect_steps(grid, lo, hi, ~carries(np.arange(first, last + 1)), first)
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


def optimize(layout: Layout, sc: Scenario, perf: PerfInputs, threshold: float | None = None,
             keep_split: bool = False, surface: bool = True) -> Plan:
    """Grid-search the layout (the split only when ``threshold``, in tokens, pins the routing; the
    threshold only with ``keep_split``) and gather its report figures. ``surface=False`` keeps the optimum
    only (`search.grid_optimum`: the plan's ``surface`` has no ``lam`` or ``bounds``; a sweep's rows read
    neither)."""
    if surface or threshold is not None or keep_split:
        surface = grid_search(layout, sc.grid, perf, sc.mode, fixed_threshold=threshold, keep_split=keep_split)
    else:
        surface = grid_optimum(layout, sc.grid, perf, sc.mode)
    capex, hourly = _costs(layout)
    return Plan(layout, surface.best, surface, perf, sc.grid, capex, hourly)


def search_free_link(link: Link, rtt: bool = True) -> Link:
    """``link`` with its price, and round trip unless ``rtt`` is False, set to 0: all a search reads of it
    (line rate, efficiency, headroom) is kept."""
    return replace(link, rtt_s=0.0 if rtt else link.rtt_s, usd_per_gbps_month=0.0)


def search_free(layout: Layout, rtt: bool = True) -> Layout:
    """``layout`` with its links' price, and round trip unless ``rtt`` is False, set to 0 (`search_free_link`):
    what `optimize`'s search (the grid search and the link's binding threshold) reads of it is the same, since
    the round trip goes only into the TTFT and the price only into the costs (`relink`)."""
    return replace(layout, pd_sites=tuple(s if s.link is None else replace(s, link=search_free_link(s.link, rtt))
                                          for s in layout.pd_sites))


def relink(plan: Plan, layout: Layout, sc: Scenario) -> Plan:
    """``optimize(layout, sc, plan.perf)`` from ``plan``, the plan of a layout with the same `search_free`
    form (the same chips and splits, links that differ at most in round trip and price): its search is
    reused, the optimum is re-dressed with ``layout``'s links as `evaluate` dresses it, and the TTFT and
    costs, which read the round trip and price, are computed afresh (the TTFT is kept when the round
    trips are the plan's: it reads nothing else of the links that may differ)."""
    same_rtt = [s.link.rtt_s if s.link else None for s in layout.pd_sites] == \
        [s.link.rtt_s if s.link else None for s in plan.layout.pd_sites]
    best = plan.best
    site = layout.pd_sites[0]
    evaluated = replace(layout, pd_sites=(site.with_split(best.n_prefill),) + layout.pd_sites[1:],
                        threshold=best.threshold)
    best = replace(best, layout=evaluated)
    surface = replace(plan.surface, best=best)
    capex, hourly = _costs(layout)
    return Plan(layout, best, surface, plan.perf, sc.grid, capex, hourly, known_ttft=plan.ttft if same_rtt else None,
                known_link_bind=(plan.link_bind_threshold,))


def size(sc: Scenario, perf: PerfInputs | None = None) -> Plan:
    """The PrfaaS-PD plan for the scenario; ``perf`` is the scenario's `perf_inputs` when the caller
    already has them (a sweep reuses them across points that differ only in the link)."""
    perf = perf_inputs(sc) if perf is None else perf
    return optimize(prfaas_layout(sc), sc, perf)


def check_servable(plan: Plan) -> None:
    """A `PlanError` when the plan serves nothing (a stage with zero capacity binds)."""
    if not plan.best.lambda_max > 0:
        raise PlanError(f"no request can be served: the {plan.best.binding} stage has zero capacity")


BASES = values(Basis)
BASIS_ALIASES = {alias: basis.value for alias, basis in VOCAB_ALIASES.items()}  # earlier names, still accepted


def check_basis(basis: str) -> str:
    """The basis name (``cost`` is read as ``capex``); a `PlanError` for anything else."""
    basis = BASIS_ALIASES.get(basis, basis)
    if basis not in BASES:
        raise PlanError(f"`basis` {basis!r}: expected {', '.join(BASES)}")
    return basis


def homogeneous_baseline(remote: str, local: str, instance_chips: int, basis: str = "instances",
                         remote_instance_chips: int | None = None, link: Link | None = None) -> Layout:
    """The homogeneous PD layout PrfaaS-PD (``remote`` + ``local`` chips, e.g. 32xH200 and 64xH20) is
    compared with, on the local chip in local-instance shape (``instance_chips`` chips).

    ``basis="instances"``: as many local instances as PrfaaS-PD has in total (the paper's comparison).
    ``basis="chips"``: as many local instances as PrfaaS-PD's chips (remote and local) fill.
    ``basis="capex"``: as many as the PrfaaS-PD purchase price buys; ``basis="rental"``: as many as its
    hourly cloud cost (chips at the profiles' USD per GPU-hour, plus ``link``'s price) rents.
    """
    basis = check_basis(basis)
    prf_layout = prfaas_pd(remote, local, link or Link(1.0), instance_chips,
                           remote_instance_chips=remote_instance_chips)
    r_n = prf_layout.remote.instances
    l_inst, l_n = instances_from_chips(local, instance_chips, "`local`")
    if basis == "instances":
        n_hom = r_n + l_n
    elif basis == "chips":
        n_hom = sum(prf_layout.chips().values()) // instance_chips
    else:
        which = 0 if basis == "capex" else 1
        budget = _costs(prf_layout)[which]
        per_instance = _costs(homogeneous_pd(f"{instance_chips}x{l_inst.chip.name}", instance_chips))[which]
        if not (np.isfinite(budget) and np.isfinite(per_instance) and per_instance > 0):
            raise PlanError(f"`basis` {basis} needs prices in both chips' hardware profiles; use `basis` instances")
        n_hom = int(budget // per_instance)
    if n_hom < 2:
        raise PlanError("the homogeneous baseline needs at least 2 local instances (1 prefill + 1 decode)")
    return homogeneous_pd(f"{n_hom * instance_chips}x{l_inst.chip.name}", instance_chips)


LOCAL_ALONE = "local-alone"


def local_alone(sc: Scenario) -> Layout:
    """The user's local chips alone as homogeneous PD (what they run today, no remote site)."""
    return replace(homogeneous_pd(sc.local, sc.instance_chips), name=LOCAL_ALONE)


def default_basis(sc: Scenario) -> str:
    """The one default basis of every verdict (issue 21 item 4; `size`, `compare`, `sweep`, `report`):
    ``capex`` when every chip of the scenario has a price indication, else ``chips``."""
    from ..profiles import get_hardware

    chips = prfaas_layout(sc).chips()
    return "capex" if all(get_hardware(c).price is not None for c in chips) else "chips"


def resolve_basis(sc: Scenario, basis: str | None) -> str:
    """``basis`` checked (`check_basis`), or `default_basis` when None."""
    return default_basis(sc) if basis is None else check_basis(basis)


def basis_baseline_name(basis: str) -> str:
    """The `compare` key of the homogeneous baseline held at ``basis``."""
    return "homogeneous-pd" if basis == "instances" else f"homogeneous-equal-{basis}"


def basis_baseline(sc: Scenario, basis: str) -> Layout:
    """The homogeneous PD layout at ``basis`` (named as in `compare`), the verdict's baseline."""
    lay = homogeneous_baseline(sc.remote, sc.local, sc.instance_chips, basis, sc.remote_instance_chips, sc.link)
    return replace(lay, name=basis_baseline_name(basis))


def compare(sc: Scenario, basis: str | None = None, perf: PerfInputs | None = None,
            equal_instances: bool = True, plan_of=None, layouts_of=None) -> dict[str, Plan]:
    """PrfaaS-PD, the local cluster alone, homogeneous PD at equal instances, homogeneous PD at equal
    ``basis`` (capex, rental or chips; none for ``instances``; None: `default_basis`) and naive
    heterogeneous; ``perf`` as in `size`. Keys: ``prfaas-pd``, ``local-alone``, ``homogeneous-pd``,
    ``homogeneous-equal-<basis>``, ``naive-heterogeneous``. ``equal_instances=False`` leaves out
    ``homogeneous-pd`` unless it is the basis's baseline (one basis per answer: the ``compare`` command;
    the paper's case study keeps both). ``plan_of(layout)``, when given, is used instead of
    ``optimize(layout, sc, perf)`` and must return the same plan (a sweep reuses the plans of layouts its
    points share, `prfaas_plan.planning.sweep`); ``layouts_of(basis)``, likewise, instead of
    `compare_layouts` and must return ``compare_layouts(sc, basis, equal_instances)``."""
    basis = resolve_basis(sc, basis)
    layouts = compare_layouts(sc, basis, equal_instances) if layouts_of is None else layouts_of(basis)
    perf = perf_inputs(sc) if perf is None else perf
    if plan_of is None:
        return {name: optimize(lay, sc, perf) for name, lay in layouts.items()}
    return {name: plan_of(lay) for name, lay in layouts.items()}


def compare_layouts(sc: Scenario, basis: str, equal_instances: bool = True) -> dict[str, Layout]:
    """The layouts `compare` plans, by its keys, at the resolved ``basis`` (`resolve_basis`); a `PlanError`
    when a baseline cannot be built. Only ``prfaas-pd`` and ``naive-heterogeneous`` carry ``sc.link``."""
    layouts = {"prfaas-pd": prfaas_layout(sc), LOCAL_ALONE: local_alone(sc)}
    if equal_instances or basis == "instances":
        layouts["homogeneous-pd"] = homogeneous_baseline(sc.remote, sc.local, sc.instance_chips, "instances",
                                                         sc.remote_instance_chips)
    if basis != "instances":
        layouts[basis_baseline_name(basis)] = basis_baseline(sc, basis)
    layouts["naive-heterogeneous"] = naive_layout(sc)
    return layouts


def size_layout(layout: Layout, sc: Scenario):
    """Optimize any layout (several PD sites sharing one remote site) with the linear program:
    per-site routing and local splits, exact mode. Returns the `lp.LPResult` (``sites`` per site)."""
    from ..analytic.lp import max_throughput

    perf = layout_perf(layout, sc)
    return max_throughput(layout, layout_bins(layout, sc, perf), perf), perf


def layout_bins(layout: Layout, sc: Scenario, perf: PerfInputs) -> dict:
    """The linear program's length bins of every PD site (`lp.make_bins`), shared by sites of one
    shape, stack and configuration (`scenario.site_key`)."""
    from ..analytic.lp import make_bins
    from .scenario import site_key

    by_key = {}
    for s in layout.pd_sites:
        if site_key(s, sc) not in by_key:
            by_key[site_key(s, sc)] = make_bins(sc.grid, perf, site=s.name)
    return {s.name: by_key[site_key(s, sc)] for s in layout.pd_sites}
