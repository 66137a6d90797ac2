"""The simulation question: plan a layout (the planner's layouts and performance inputs), build its
workload (the paper's synthetic one or a trace), replay it through the discrete-event simulator and set
the analytic model beside it.

`answer_simulate` is the Python API behind ``prfaas-plan simulate``; it takes the planner's vocabulary
(chips such as ``32xH200``, ``--tpot``, ``--inputs``, a layout file or a baseline kind). Units: seconds,
requests/s, tokens, bit/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import PlanError
from ..layout import Layout, Link, naive_heterogeneous, prfaas_pd
from ..units import plural
from ..vocabulary import Baseline, values
from .question import DEFAULTS, choice
from .scenario import instance_decode, instance_prefill, stack_notes
from .sim_shapes import SimShapes, role_records, simulation_shapes
from .warnings import PlanWarning

if TYPE_CHECKING:  # pragma: no cover
    from ..profiles.stack import StackProfile
    from ..analytic.latency import LatencySummary
    from ..analytic.throughput import Evaluation, LengthGrid, PerfInputs
    from ..analytic.ttft import TTFTSummary
    from ..simulator import SimConfig, SimResult

BASELINES = values(Baseline)
DEFAULT_LOAD = 0.8             # offered load of the synthetic workload, fraction of Lambda_max
DEFAULT_SYNTHETIC_S = 1800.0   # arrival window of the synthetic workload, seconds
SYNTHETIC = ("paper",)


def simulation_layout(baseline: str = "prfaas", remote: str = DEFAULTS.remote, local: str = DEFAULTS.local,
                      link: Link | None = None, instance_chips: int = DEFAULTS.instance_chips,
                      layout_file: str | None = None, remote_instance_chips: int | None = None) -> Layout:
    """The layout to simulate: a layout file (one PD site), or a ``baseline`` kind built from the chips —
    ``prfaas`` (remote prefill + local PD), ``homogeneous`` (as many local-chip instances as the PrfaaS
    layout has in total, as `compare` builds it) or ``naive`` (every prefill remote). ``instance_chips``
    is the local instance's shape, and the remote's unless ``remote_instance_chips``."""
    from ..layout import load_layout
    from .plans import homogeneous_baseline

    if layout_file is not None:
        return load_layout(layout_file)
    choice("baseline", BASELINES)(baseline)
    link = link or Link(1e11)
    if baseline == "prfaas":
        return prfaas_pd(remote, local, link, instance_chips, remote_instance_chips=remote_instance_chips)
    if baseline == "homogeneous":
        return homogeneous_baseline(remote, local, instance_chips, "instances", remote_instance_chips)
    return naive_heterogeneous(remote, local, link, instance_chips, remote_instance_chips)


def simulation_perf(layout: Layout, model, tpot_s: float, inputs: str, input_mean: float,
                    output_mean: float, stack: str | StackProfile | None = None, transfer_bytes: str | None = None,
                    shapes: SimShapes | None = None):
    """PerfInputs of every site of ``layout`` for the workload's mean input and output (tokens): decode
    capacity at ``tpot_s`` and a mean context of input + output / 2, each site on its own ``stack:`` or
    else ``stack`` (None: the default stack), bytes on the link by ``transfer_bytes`` (None: the default
    policy, logical for the paper's inputs), each role's MoE split and decode attention mode as ``shapes``
    says (`sim_shapes.SimShapes`; None: tensor-parallel). ``model`` is a profile or its name."""
    from ..analytic.throughput import PerfInputs, SitePerf
    from ..analytic.transfer import DEFAULT_POLICY, decode_transfer
    from ..profiles import get_model, get_stack

    model = get_model(model) if isinstance(model, str) else model
    stack = get_stack(stack)
    context = input_mean + output_mean / 2
    policy = transfer_bytes or ("logical" if inputs == "paper" else DEFAULT_POLICY)  # paper: its convention
    sh = shapes or SimShapes(0, 0)
    sites = {s.name: SitePerf(instance_prefill(model, s.instance, inputs, s.stack or stack, sh.local_moe),
                              instance_decode(model, s.instance, tpot_s, context, inputs, s.stack or stack,
                                              sh.decode_moe, sh.dp_attention),
                              decode_transfer(policy, s.instance.chips, sh.dp_attention))
             for s in layout.pd_sites}
    remote = None
    if layout.remote is not None:
        remote = instance_prefill(model, layout.remote.instance, inputs, layout.remote.stack or stack, sh.remote_moe)
    return PerfInputs(model, remote, sites, output_mean)


def perf_note(perf, inputs: str) -> str:
    """Where the simulation's performance inputs come from."""
    transfer = next(iter(perf.sites.values())).transfer.describe(perf.model)
    if inputs == "paper":
        return ("paper inputs: H200 prefill measured (paper Table 5), H20 prefill and decode back-solved; "
                + transfer)
    return "performance model: " + "; ".join(
        ([f"remote prefill {perf.remote_prefill.source}"] if perf.remote_prefill is not None else [])
        + [f"{n} prefill {sp.prefill.source}; decode {sp.decode.source}" for n, sp in perf.sites.items()]
        + [transfer])


def simulation_plan(layout: Layout, grid, perf, threshold: float | None = None, n_prefill: int | None = None):
    """The layout optimized (distribution-exact) on ``grid``: threshold and split by grid search, or the
    given split with the threshold that balances it. Checked for simulation; returns (layout, Evaluation)."""
    from ..analytic.search import balanced_threshold, grid_search
    from ..analytic.throughput import evaluate
    from ..simulator.system import System

    if layout.name in ("homogeneous-pd", "naive-heterogeneous"):
        threshold = None  # their routing is fixed by the kind (inf, 0)
    if n_prefill is None:
        best = grid_search(layout, grid, perf, "exact", fixed_threshold=threshold).best
    else:
        if not 0 <= n_prefill <= layout.pd_sites[0].instances:
            raise PlanError(f"`prefill_instances` {n_prefill}: expected 0 to {layout.pd_sites[0].instances}")
        layout = replace(layout, pd_sites=(layout.pd_sites[0].with_split(n_prefill),) + layout.pd_sites[1:])
        t = layout.threshold if threshold is None else threshold
        if t is None:
            t = balanced_threshold(layout, grid, perf, n_prefill, "exact")
        best = evaluate(layout, grid, perf, t, n_prefill, "exact")
    System.build(best.layout, perf, best.threshold)
    return best.layout, best


@dataclass(frozen=True)
class SimulationAnswer:
    """``prfaas-plan simulate``: the planned layout, the run(s) and the analytic model beside them."""

    layout: Layout
    evaluation: Evaluation       # the plan: threshold, split, Lambda_max
    perf: PerfInputs
    grid: LengthGrid             # the uncached lengths the plan used
    config: SimConfig
    result: SimResult            # the run of ``scheduler``
    others: tuple                # the compared schedulers' runs (``compare``), in the order asked
    analytic: LatencySummary | None  # at the offered rate (None: fewer than two arrival times)
    unloaded: TTFTSummary
    scheduler: str
    requests: int
    seed: int
    stack: str | None = None     # the stack of the sites naming none (None: the paper's inputs, no stack)
    notes: list[str] = field(default_factory=list)
    warnings: list = field(default_factory=list)
    configurations: list[dict] = field(default_factory=list)  # per role and site (`sim_shapes.role_records`)
    shapes: SimShapes | None = None  # how the roles were chosen (None: a layout file's own shapes)

    @property
    def other(self) -> SimResult | None:
        """The first compared run (None without ``compare``)."""
        return self.others[0] if self.others else None

    def runs(self) -> list[SimResult]:
        """Every run: ``scheduler``'s first, then the compared ones."""
        return [self.result, *self.others]

    def reference(self) -> SimResult:
        """The run the others are compared against: static's when it ran, else ``scheduler``'s."""
        return next((r for r in self.runs() if r.scheduler == "static"), self.result)

    def comparison(self) -> list[dict]:
        """Every run's figures on the same workload, one column per scheduler, and each one's change against
        the `reference` (a fraction, ``<name>_vs_<reference>``; NaN where the reference is zero). Empty
        without ``compare``."""
        if not self.others:
            return []
        ref = self.reference()
        def figures(r) -> dict:  # the summary and what the adaptive scheduler's spilling did
            return {**r.summary(), "spilled_requests": r.spilled, "preemptions": r.preemptions}

        base = figures(ref)
        runs = [(r.scheduler, figures(r)) for r in self.runs()]
        rows = []
        for key, label in (("steady_throughput_rps", "steady throughput (req/s)"),
                           ("throughput_rps", "throughput (req/s)"), ("completed", "completed requests"),
                           ("ttft_mean_s", "mean TTFT (s)"), ("ttft_p50_s", "P50 TTFT (s)"),
                           ("ttft_p90_s", "P90 TTFT (s)"), ("ttft_p99_s", "P99 TTFT (s)"),
                           ("threshold_changes", "threshold moves"), ("role_changes", "role changes"),
                           ("spilled_requests", "spilled to local (low priority)"), ("preemptions", "preemptions")):
            x = float(base[key])
            row = {"figure": label}
            row.update({name: float(s[key]) for name, s in runs})
            row.update({f"{name}_vs_{ref.scheduler}": (float(s[key]) / x - 1.0) if x else math.nan
                        for name, s in runs if name != ref.scheduler})
            rows.append(row)
        return rows


def answer_simulate(*, model: str = DEFAULTS.model, baseline: str = "prfaas", layout_file: str | None = None,
                    remote: str = DEFAULTS.remote, local: str = DEFAULTS.local,
                    instance_chips: int | None = None, remote_instance_chips: int | None = None,
                    local_instance_chips: int | None = None, weight_dtype: str | None = None,
                    kv_dtype: str | None = None, tpot: str = DEFAULTS.tpot,
                    inputs: str = DEFAULTS.inputs, link: str = DEFAULTS.link,
                    link_efficiency: float = DEFAULTS.link_efficiency, rtt: str | None = None,
                    link_headroom: str = DEFAULTS.link_headroom, trace: str | None = None, synthetic: str | None = None, rate: float | None = None,
                    load: float | None = None, duration_s: float | None = None, scheduler: str = "static",
                    compare: str | None = None, link_profile: str | None = None, threshold: float | None = None,
                    prefill_instances: int | None = None, rebalance_s: float = 300.0, seed: int = 0,
                    stack: str | None = None, transfer_bytes: str | None = None,
                    progress=None) -> SimulationAnswer:
    """Plan, build the workload, simulate (with ``compare``, a comma-separated list of registered schedulers,
    each of them too, on the same workload) and set the analytic model
    beside the run. ``rate`` (requests/s) or ``load`` (fraction of Lambda_max) sets the offered load
    (default 0.8 of Lambda_max synthetic; a trace keeps its own times); ``progress(done, total)`` is
    called as the simulation advances. The instances take the configuration search's shapes per role, as
    ``size`` (`sim_shapes`): ``instance_chips``, ``remote_instance_chips``, ``local_instance_chips`` and
    ``transfer_bytes`` (None: searched) pin them; ``inputs`` paper plays the paper's 8-chip instances and a
    layout file its sites' own shapes. Dtypes and ``stack`` (sites of a layout file may name their own) as
    `prfaas_plan.planning.scenario`; ``transfer_bytes`` None: the searched decode configuration's bytes
    (logical for the paper's inputs)."""
    from ..analytic.latency import ttft_under_load
    from ..analytic.ttft import ttft_summary
    from ..profiles import get_stack
    from ..simulator import (
        SCHEDULERS,
        LongTermRule,
        SimConfig,
        read_link_profile,
        simulate,
    )
    from ..simulator.inputs import paper_grid, paper_requests, read_trace_and_source

    from .configurations import pinned_spec
    from .question import Question
    from .simulate_sites import link_profile_file, trace_file

    text = dict(model=model, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tpot=tpot, inputs=inputs, link=link,
                link_efficiency=link_efficiency, rtt=rtt, stack=stack, link_headroom=link_headroom)
    if layout_file is None:   # a layout file's sites carry their own shapes
        text.update(remote=remote, local=local)
        text.update({k: v for k, v in (("instance_chips", instance_chips), ("local_instance_chips",
                     local_instance_chips), ("remote_instance_chips", remote_instance_chips)) if v is not None})
    if transfer_bytes is not None:   # None: replicated, logical for the paper's inputs (`simulation_perf`)
        text["transfer_bytes"] = transfer_bytes
    q = Question.parse(**text)
    if scheduler not in SCHEDULERS:
        raise PlanError(f"`scheduler` {scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    compared = compare_list(compare, scheduler, SCHEDULERS)
    if trace is not None and synthetic is not None:
        raise PlanError("give either `trace` FILE or `synthetic` paper, not both")
    if synthetic is not None and synthetic not in SYNTHETIC:
        raise PlanError(f"`synthetic` {synthetic!r}: expected 'paper'")
    if rate is not None and load is not None:
        raise PlanError("give either `rate` or `load`, not both")
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise PlanError(f"`rate` {rate!r}: expected a positive number of requests/s")
    if load is not None and not (math.isfinite(load) and load > 0):
        raise PlanError(f"`load` {load!r}: expected a positive fraction of Lambda_max")
    choice("baseline", BASELINES)(baseline)
    layout = simulation_layout(layout_file=layout_file) if layout_file is not None else None
    if layout is not None and len(layout.pd_sites) > 1:  # the plan of size --layout, the multi-site simulator
        from .simulate_sites import answer_simulate_sites

        for given, name in ((threshold, "threshold"), (prefill_instances, "prefill_instances")):
            if given is not None:
                raise PlanError(f"`{name}`: a layout of several PD sites takes each site's routing and split from "
                                "the plan (as `size` plans the layout file); drop it")
        return answer_simulate_sites(
            layout_file, model=model, tpot=tpot, inputs=inputs, trace=trace, synthetic=synthetic, rate=rate,
            load=load, duration_s=duration_s, scheduler=scheduler, compared=compared, link_profile=link_profile,
            seed=seed, stack=stack, transfer_bytes=transfer_bytes, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
            cfg_base=SimConfig(math.inf, scheduler, long_term=LongTermRule(period_s=rebalance_s)), progress=progress)
    tpot_s = q.tpot_s
    profile = read_link_profile(link_profile_file(link_profile)) if link_profile is not None else None
    model, dtype_notes = q.model, q.dtype_notes
    notes: list[str] = list(dtype_notes) + list(stack_notes(stack, inputs, layout))

    if trace is None:
        grid = paper_grid()
        means = (grid.mean, 1024.0)
    else:
        source, requests = read_trace_and_source(trace_file(trace), None if (rate or load) else duration_s)
        grid, basis = trace_plan_grid(source)
        means = (float(requests.input_tokens.mean()), float(requests.output_tokens.mean()))
    shapes = None
    if layout is None:
        spec = pinned_spec(inputs, instance_chips, remote_instance_chips, local_instance_chips, transfer_bytes)
        shapes = simulation_shapes(q, spec, grid, *means, transfer_bytes)
        layout = simulation_layout(baseline, remote, local, q.link, shapes.local_chips, None,
                                   None if shapes.remote_chips == shapes.local_chips else shapes.remote_chips)
        model = shapes.model or model   # the search may choose among the dtypes the user allows
        if shapes.note is None:
            notes.append(f"instances: the {'paper' if inputs == 'paper' else 'pinned'} shapes (no configuration "
                         "search)")
        else:
            notes.append(shapes.note if baseline == "prfaas" else f"{baseline} baseline: the local instance shape "
                         "and decode configuration the PrfaaS-PD search chose, as compare's baselines; " + shapes.note)
    perf = simulation_perf(layout, model, tpot_s, inputs, *means, stack,
                           shapes.transfer if shapes is not None else transfer_bytes, shapes)
    layout, ev = simulation_plan(layout, grid, perf, threshold, prefill_instances)
    if trace is None:
        offered = rate if rate is not None else (load if load is not None else DEFAULT_LOAD) * ev.lambda_max
        window = duration_s or DEFAULT_SYNTHETIC_S
        requests = paper_requests(offered, window, seed)
        workload = f"synthetic paper workload, Poisson at {offered:.3f} req/s for {window:g} s, seed {seed}"
        if rate is None and load is None:
            notes.append(f"default in effect: --load {DEFAULT_LOAD} of Lambda_max, --duration {window:g} s")
    else:
        if rate is not None or load is not None:
            requests = requests.at_rate(rate if rate is not None else load * ev.lambda_max)
            if duration_s is not None:
                requests = requests.until(duration_s)
        workload = f"trace {trace} ({len(requests)} {plural(len(requests), 'request')})"
        notes.append(f"the plan (threshold, split, Lambda_max) and the analytic TTFT use {basis}; the simulation "
                     "replays each cluster's own prefix cache (2 TB per 8 chips), so its hits can differ")
    cfg = SimConfig(ev.threshold, scheduler, long_term=LongTermRule(period_s=rebalance_s), link_profile=profile)

    from ..simulator.pipeline import COMPILED_FROM

    if len(requests) >= COMPILED_FROM and "adaptive" in (scheduler, *compared):
        notes.append(f"adaptive: the Python event loop at {len(requests):,} requests (the compiled loop has no "
                     "low-priority class for the spilled overflow; static and threshold run compiled)")
    tick = None if progress is None else (lambda n: progress(n, len(requests)))
    result = simulate(requests, layout, perf, cfg, progress=tick)
    others = tuple(simulate(requests, layout, perf, replace(cfg, scheduler=name), progress=tick)
                   for name in compared)

    notes += [spill_note(r, perf) for r in (result, *others) if r.spilled]
    offered_rps = result.summary()["offered_rps"]
    analytic = None
    if not math.isnan(offered_rps):  # nan: fewer than two distinct arrival times
        analytic = ttft_under_load(layout, grid, perf, ev.threshold, ev.n_prefill, rate=offered_rps)
        if not analytic.stable:
            notes.append("analytic at the offered rate: a stage is saturated (no steady state); shown as inf")
    unloaded = ttft_summary(layout, grid, perf, ev.threshold)
    notes += [f"workload: {workload}", f"inputs: {perf_note(perf, inputs)}", f"method: {result.method}",
              f"analytic: {analytic.method if analytic else 'not run'}",
              "plan: threshold and local split from the distribution-exact grid search"
              + (f" with N_p fixed at {prefill_instances}" if prefill_instances is not None else "")
              + (f" with t fixed at {threshold:,.0f}" if threshold is not None else ""),
              "throughput: steady = middle 90% of completions over their time span",
              "prefix caches: 2 TB of host DRAM per 8 chips assumed (a DGX H200 node), pooled per cluster; "
              "512-token blocks"]
    warnings = [PlanWarning("unfinished-requests", message) for message in result.warnings()]
    in_effect = get_stack(stack).name if inputs == "predicted" else None
    return SimulationAnswer(layout, ev, perf, grid, cfg, result, others, analytic, unloaded, scheduler,
                            len(requests), seed, in_effect, notes, warnings, role_records(layout, perf, shapes),
                            shapes)


def spill_note(r, perf) -> str:
    """What the spilling of run ``r`` did, in words (`simulator.policies.AdaptiveConfig`: the forward size and
    the layer-wise yield of a spilled run)."""
    from ..simulator.policies import AdaptiveConfig

    c = AdaptiveConfig()
    how = (f"in {c.spill_chunk_tokens:,}-token forwards that yield between the model's {perf.model.num_layers} "
           "layers (on a chunked stack)" if c.spill_layerwise else "at chunk boundaries")
    return (f"{r.scheduler}: {r.spilled:,} requests the link could not carry spilled to local prefill at low "
            f"priority, {how}, on instances no planned request used; planned arrivals preempted them "
            f"{r.preemptions:,} times, each waiting for the spilled forward's current layer")


def trace_plan_grid(trace) -> tuple[LengthGrid, str]:
    """The lengths a trace is planned on and what they are: the same basis as ``size --workload`` of that
    trace (`workload.from_trace`): with hash ids, each request's uncached length after replaying them
    through one unlimited LRU prefix cache of 512-token blocks; else the full input lengths. Every
    observed length is a grid point (`simulator.scheduler.empirical_grid`); tokens."""
    from ..simulator.scheduler import empirical_grid
    from ..workload import from_trace

    wl = from_trace(trace)
    if wl.cache is None:
        return empirical_grid(trace.input_length), "the trace's full input lengths (no hash ids to replay)"
    return (empirical_grid(wl.cache.uncached_length),
            f"the uncached lengths after replaying the hash ids through one unlimited LRU prefix cache "
            f"(512-token blocks; token hit rate {wl.cache.token_hit_rate:.1%}), as size --workload does")


def compare_list(compare: str | None, scheduler: str, registered) -> list[str]:
    """The schedulers ``--compare`` asks for besides ``scheduler`` (comma-separated registered names; the
    ``scheduler`` itself may be among them), in the order given; at least one other, none twice."""
    if compare is None:
        return []
    names = [c.strip() for c in str(compare).split(",") if c.strip()]
    for name in names:
        if name not in registered:
            raise PlanError(f"`compare` {compare!r}: {name!r} is not a scheduler; expected names among "
                            f"{', '.join(registered)}")
    if len(set(names)) != len(names):
        raise PlanError(f"`compare` {compare!r}: a scheduler is named twice")
    others = [n for n in names if n != scheduler]
    if not others:
        raise PlanError(f"`compare` {compare!r}: name at least one scheduler besides {scheduler!r}")
    return others


def plot_format(path: str) -> str:
    """The figure format (``png`` or ``svg``) a ``--plot`` file name asks for, checked before the run."""
    from pathlib import Path

    from ..simulator.plot import FORMATS

    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise PlanError(f"`plot` {path!r}: expected a file name ending in .png or .svg")
    if not Path(path).parent.exists():
        raise PlanError(f"`plot` {path!r}: folder {str(Path(path).parent)!r} does not exist")
    return fmt


def simulation_plot(answer: SimulationAnswer, fmt: str) -> bytes:
    """The run's figure (link load, queues, threshold and roles over time, TTFT CDF) as ``png`` or
    ``svg`` bytes, the compared scheduler's run overlaid when there is one; for several PD sites, one row of
    panels per site (its link, every queue of every scheduler, threshold and split) and the TTFT CDF."""
    from ..simulator import plot

    if not isinstance(answer, SimulationAnswer):  # `simulate_sites.SitesSimulationAnswer`
        return plot.render_sites(answer.runs, fmt, answer.layout.name)

    return plot.render(answer.result, fmt, answer.others, f"{answer.layout.name}, {answer.scheduler} scheduler")
