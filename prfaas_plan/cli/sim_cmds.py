"""``prfaas-plan simulate``: replay a trace or the paper's synthetic workload through a layout."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from ..errors import PlanError
from ..output.report import Column, Report, Section, check_format, render, write_atomic
from ..units import parse_length, parse_rate_bps, parse_time_s
from .app import FormatOption, app
from .stack_option import StackOption

LAYOUTS = ("prfaas", "homogeneous", "naive")
DEFAULT_LOAD = 0.8
DEFAULT_SYNTHETIC_S = 1800.0
TIMELINE_ROWS = 24
PROGRESS_MIN_REQUESTS = 50_000


def _perf(model_name: str, input_mean: float, output_mean: float, remote: str, local: str, stack=None):
    """PerfInputs of the model and a note on their source: the paper's inputs for prfaas-1t (8xH200 remote,
    8xH20 local), the performance model for the others."""
    from ..analytic.throughput import PerfInputs, SitePerf
    from ..layout import instances_from_chips
    from ..planning import case_study as paper
    from ..profiles import get_model

    model = get_model(model_name)
    r_inst = instances_from_chips(remote, paper.INSTANCE_CHIPS, "--remote")[0]
    l_inst = instances_from_chips(local, paper.INSTANCE_CHIPS, "--local")[0]
    if model.name == paper.MODEL:
        if (r_inst.chip.name, l_inst.chip.name) != ("h200", "h20"):
            raise PlanError(f"--model {paper.MODEL}: the paper's inputs exist for H200 remote and H20 local "
                            f"instances only, got {r_inst} and {l_inst}")
        perf = paper.case_study_perf("paper")
        return (PerfInputs(perf.model, perf.remote_prefill, perf.sites, output_mean),
                "paper inputs: H200 prefill measured (paper Table 5), H20 prefill and decode back-solved")
    from ..planning.plans import instance_decode, instance_prefill

    context = input_mean + output_mean / 2
    from ..profiles import get_stack

    stack = get_stack(stack).name
    remote_prefill = instance_prefill(model, r_inst, "predicted", stack)
    local_prefill = instance_prefill(model, l_inst, "predicted", stack)
    decode = instance_decode(model, l_inst, paper.TPOT_S, context, "predicted", stack)
    return (PerfInputs(model, remote_prefill, {"local": SitePerf(local_prefill, decode)},
                       output_mean), f"performance model: roofline prefill and decode capacity on stack {stack}")


def _plan(kind: str, grid, perf, link_bps: float, remote: str, local: str, threshold: float | None,
          n_prefill: int | None):
    """The layout of ``kind`` optimized (distribution-exact) on ``grid``: threshold and split by grid search,
    or the given split with the threshold that balances it. Checked for simulation before returning."""
    from ..analytic.search import grid_search
    from ..analytic.throughput import evaluate
    from ..layout import Link, homogeneous_pd, naive_heterogeneous, prfaas_pd
    from ..planning import case_study as paper
    from ..simulator.scheduler import balanced_threshold
    from ..simulator.system import System

    link = Link(link_bps)
    if kind == "prfaas":
        layout = prfaas_pd(remote, local, link, paper.INSTANCE_CHIPS)
    elif kind == "homogeneous":
        layout, threshold = homogeneous_pd(paper.HOMOGENEOUS, paper.INSTANCE_CHIPS), None
    else:
        layout, threshold = naive_heterogeneous(remote, local, link, paper.INSTANCE_CHIPS), None
    if n_prefill is None:
        best = grid_search(layout, grid, perf, "exact", fixed_threshold=threshold).best
    else:
        if not 0 <= n_prefill <= layout.pd_sites[0].instances:
            raise PlanError(f"--prefill-instances {n_prefill}: expected 0 to {layout.pd_sites[0].instances}")
        layout = replace(layout, pd_sites=(layout.pd_sites[0].with_split(n_prefill),))
        t = layout.threshold if threshold is None else threshold
        if t is None:
            t = balanced_threshold(layout, grid, perf, n_prefill)
        best = evaluate(layout, grid, perf, t, n_prefill, "exact")
    planned = best.layout
    System.build(planned, perf, best.threshold)
    return planned, best


def _progress(total: int):
    """A rich progress bar on stderr for long runs attached to a terminal; else (None, no-op)."""
    if total < PROGRESS_MIN_REQUESTS or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(file=sys.stderr), transient=True)
    task = bar.add_task("simulating", total=total)
    bar.start()
    return (lambda n: bar.update(task, completed=n)), bar.stop


def _3g(v) -> str:
    """Three significant figures (queue depths, instance counts, latencies in seconds)."""
    return f"{v:.3g}"


def _downsample(timeline: dict, rows: int) -> list[dict]:
    """At most ``rows`` rows, each the mean of consecutive samples."""
    import numpy as np

    n = len(timeline["t_s"])
    if n == 0:
        return []
    edges = np.linspace(0, n, min(rows, n) + 1).astype(int)
    keys = ("t_s", "link_gbps", "link_capacity_gbps", "remote_waiting", "local_waiting", "decode_waiting",
            "decode_busy", "threshold_tokens", "n_prefill", "n_decode")
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        row = {k: float(np.mean(timeline[k][a:b])) for k in keys}
        row["t_s"] = float(timeline["t_s"][a])
        out.append(row)
    return out


def _latency_rows(result, analytic, unloaded) -> list[dict]:
    s = result.summary()
    rows = [{"source": "simulated", "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"],
             "ttft_p90_s": s["ttft_p90_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_mean_s": s["tpot_mean_s"],
             "tpot_p99_s": s["tpot_p99_s"]}]
    if analytic is not None:
        rows.append({"source": "analytic at the offered rate", "ttft_mean_s": analytic.mean_s,
                     "ttft_p50_s": analytic.p50_s, "ttft_p90_s": analytic.p90_s, "ttft_p99_s": analytic.p99_s,
                     "tpot_mean_s": analytic.tpot_s, "tpot_p99_s": None})
    rows.append({"source": "analytic unloaded", "ttft_mean_s": unloaded.mean_s, "ttft_p50_s": unloaded.p50_s,
                 "ttft_p90_s": unloaded.p90_s, "ttft_p99_s": unloaded.p99_s, "tpot_mean_s": None,
                 "tpot_p99_s": None})
    return rows


def _comparison_rows(static, adaptive) -> list[dict]:
    """Both schedulers on the same workload, and the adaptive one's relative change against static."""
    rows = []
    a, b = static.summary(), adaptive.summary()
    for key, label in (("steady_throughput_rps", "steady throughput (req/s)"),
                       ("throughput_rps", "throughput (req/s)"), ("completed", "completed requests"),
                       ("ttft_mean_s", "mean TTFT (s)"), ("ttft_p50_s", "P50 TTFT (s)"),
                       ("ttft_p90_s", "P90 TTFT (s)"), ("ttft_p99_s", "P99 TTFT (s)")):
        x, y = float(a[key]), float(b[key])
        rows.append({"figure": label, "static": x, "adaptive": y,
                     "adaptive_vs_static": (y / x - 1.0) if x else math.nan})
    return rows


@app.command("simulate")
def simulate_cmd(
    trace: Optional[str] = typer.Option(None, "--trace", help="Mooncake JSONL trace (timestamp ms, input_length, "
                                        "output_length, hash_ids)."),
    synthetic: Optional[str] = typer.Option(None, "--synthetic", help="Synthetic workload: 'paper' (truncated "
                                            "log-normal mu 9.90 sigma 1.00 on [128, 128000], output 1024). "
                                            "Default when no --trace."),
    model: str = typer.Option("prfaas-1t", "--model", "-m", help="Model profile; prfaas-1t uses the paper's inputs."),
    layout_kind: str = typer.Option("prfaas", "--layout", help="prfaas, homogeneous or naive."),
    remote: str = typer.Option("32xH200", "--remote", help="Remote prefill chips (8 per instance)."),
    local: str = typer.Option("64xH20", "--local", help="Local PD chips (8 per instance)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Offered load, requests/s (a trace is time-scaled)."),
    load: Optional[float] = typer.Option(None, "--load", help="Offered load as a fraction of the layout's "
                                         "Lambda_max (default 0.8 for --synthetic; a trace keeps its own times)."),
    duration: Optional[str] = typer.Option(None, "--duration", help="Arrival window, e.g. 1800 or 30min "
                                           "(default: 30 min synthetic, the whole trace)."),
    scheduler: str = typer.Option("static", "--scheduler", help="static or adaptive (dual-timescale)."),
    compare: bool = typer.Option(False, "--compare", help="Also run the other scheduler and report the difference."),
    link: str = typer.Option("100G", "--link", help="Inter-datacenter link line rate, e.g. 100G."),
    link_profile: Optional[str] = typer.Option(None, "--link-profile", help="CSV time_s,gbps: line rate over time."),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="Routing threshold in uncached tokens "
                                            "(default: grid search)."),
    prefill_instances: Optional[int] = typer.Option(None, "--prefill-instances", help="Local instances that "
                                                    "prefill; the rest decode (default: grid search)."),
    rebalance: str = typer.Option("5min", "--rebalance", help="Long-term rule period (adaptive)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic workload."),
    fmt: str = FormatOption,
    plot: Optional[str] = typer.Option(None, "--plot", help="Write timelines and the TTFT CDF to FILE.png or .svg."),
    stack: Optional[str] = StackOption,
) -> None:
    """Discrete-event simulation: throughput, TTFT/TPOT percentiles, stage load, link use, caches, roles."""
    check_format(fmt)
    from ..analytic.latency import ttft_under_load
    from ..analytic.ttft import ttft_summary
    from ..simulator import SCHEDULERS, LongTermRule, SimConfig, read_link_profile, simulate
    from ..simulator import plot as sim_plot
    from ..simulator.inputs import paper_grid, paper_requests, read_trace
    from ..simulator.scheduler import empirical_grid

    plot_fmt = None
    if plot is not None:
        plot_fmt = Path(plot).suffix.lower().lstrip(".")
        if plot_fmt not in sim_plot.FORMATS:
            raise PlanError(f"--plot {plot!r}: expected a file name ending in .png or .svg")
        if not Path(plot).parent.exists():
            raise PlanError(f"--plot {plot!r}: folder {str(Path(plot).parent)!r} does not exist")
    if layout_kind not in LAYOUTS:
        raise PlanError(f"--layout {layout_kind!r}: expected one of {', '.join(LAYOUTS)}")
    if scheduler not in SCHEDULERS:
        raise PlanError(f"--scheduler {scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    if trace is not None and synthetic is not None:
        raise PlanError("give either --trace FILE or --synthetic paper, not both")
    if synthetic is not None and synthetic != "paper":
        raise PlanError(f"--synthetic {synthetic!r}: expected 'paper'")
    if rate is not None and load is not None:
        raise PlanError("give either --rate or --load, not both")
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise PlanError(f"--rate {rate!r}: expected a positive number of requests/s")
    if load is not None and not (math.isfinite(load) and load > 0):
        raise PlanError(f"--load {load!r}: expected a positive fraction of Lambda_max")
    link_bps = parse_rate_bps(link, "--link")
    window = parse_time_s(duration, "--duration") if duration is not None else None
    period = parse_time_s(rebalance, "--rebalance")
    t_fixed = float(parse_length(threshold, "--threshold")) if threshold is not None else None
    profile = read_link_profile(link_profile) if link_profile is not None else None
    notes = []

    # workload and plan
    if trace is None:
        grid = paper_grid()
        perf, perf_note = _perf(model, grid.mean, 1024.0, remote, local, stack)
        layout, ev = _plan(layout_kind, grid, perf, link_bps, remote, local, t_fixed, prefill_instances)
        offered = rate if rate is not None else (load if load is not None else DEFAULT_LOAD) * ev.lambda_max
        window = window or DEFAULT_SYNTHETIC_S
        requests = paper_requests(offered, window, seed)
        workload = f"synthetic paper workload, Poisson at {offered:.3f} req/s for {window:g} s, seed {seed}"
        if rate is None and load is None:
            notes.append(f"default in effect: --load {DEFAULT_LOAD} of Lambda_max, --duration {window:g} s")
    else:
        requests = read_trace(trace, None if (rate or load) else window)
        grid = empirical_grid(requests.input_tokens)
        perf, perf_note = _perf(model, float(requests.input_tokens.mean()), float(requests.output_tokens.mean()),
                                remote, local, stack)
        layout, ev = _plan(layout_kind, grid, perf, link_bps, remote, local, t_fixed, prefill_instances)
        if rate is not None or load is not None:
            requests = requests.at_rate(rate if rate is not None else load * ev.lambda_max)
            if window is not None:
                requests = requests.until(window)
        workload = f"trace {trace} ({len(requests)} requests)"
        notes.append("the plan (threshold, split, Lambda_max) and the analytic TTFT use the trace's full input "
                     "lengths; the simulation replays prefix-cache hits, so its uncached lengths are shorter")
    cfg = SimConfig(ev.threshold, scheduler, long_term=LongTermRule(period_s=period), link_profile=profile)

    tick, done = _progress(len(requests))
    try:
        result = simulate(requests, layout, perf, cfg, progress=tick)
        other = None
        if compare:
            alt = SCHEDULERS[1 - SCHEDULERS.index(scheduler)]
            other = simulate(requests, layout, perf, replace(cfg, scheduler=alt), progress=tick)
    finally:
        done()

    summary = result.summary()
    analytic = None
    if not math.isnan(summary["offered_rps"]):  # nan: fewer than two distinct arrival times
        analytic = ttft_under_load(layout, grid, perf, ev.threshold, ev.n_prefill, rate=summary["offered_rps"])
        if not analytic.stable:
            notes.append("analytic at the offered rate: a stage is saturated (no steady state); shown as inf")
    unloaded = ttft_summary(layout, grid, perf, ev.threshold)
    head = {"layout": layout.name, "model": perf.model.name, "scheduler": scheduler,
            "threshold_tokens": ev.threshold, "n_prefill": ev.n_prefill, "n_decode": ev.n_decode,
            "lambda_max_rps": ev.lambda_max}
    head.update(summary)
    sections = [
        Section("summary", "Simulation", [head], [
            Column("layout", "layout"), Column("scheduler", "scheduler"),
            Column("threshold_tokens", "t (tokens)", ",.0f"), Column("n_prefill", "N_p"), Column("n_decode", "N_d"),
            Column("arrived", "arrived"), Column("completed", "completed"), Column("in_flight", "in flight"),
            Column("offered_rps", "offered req/s", ".3f"), Column("steady_throughput_rps", "throughput req/s", ".3f"),
            Column("lambda_max_rps", "Lambda_max req/s", ".3f"), Column("remote_share", "remote", ".1%"),
            Column("egress_gbps", "egress Gbps", ".2f"), Column("role_changes", "role changes"),
            Column("threshold_changes", "t changes")]),
        Section("latency", "TTFT and TPOT (seconds)", _latency_rows(result, analytic, unloaded),
                [Column("source", "source")] + [Column(k, k.replace("_s", "").replace("_", " "), _3g)
                                                for k in ("ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
                                                          "tpot_mean_s", "tpot_p99_s")]),
        Section("routes", "TTFT by route (seconds)",
                [{"route": k, **v} for k, v in result.ttft_by_route().items()]),
        Section("stages", "Stage utilization and queues", result.stage_rows(), [
            Column("stage", "stage"), Column("utilization", "utilization", ".1%"),
            Column("mean_waiting", "mean waiting", ".2f"),
            Column("peak_waiting", "peak waiting (link: flows)", ".0f")]),
    ]
    clusters = [{"cluster": k, **v} for k, v in result.cache.items() if k != "prefix_moves"]
    if clusters:
        moves = result.cache["prefix_moves"]
        sections.append(Section("cache", "Prefix caches", clusters, [
            Column("cluster", "cluster"), Column("prompt_tokens", "prompt tokens prefilled here", ",d"),
            Column("hit_tokens", "from cache", ",d"), Column("hit_rate", "hit rate", ".1%"),
            Column("used_bytes", "used GB", lambda v: f"{v / 1e9:,.0f}"), Column("evicted", "evicted", ",d")],
            notes=[f"cross-cluster prefix moves: {moves['count']} ({moves['link_bytes'] / 1e9:,.1f} GB over the "
                   "link)"]))
    if scheduler == "adaptive" or compare:
        roles = list(result.role_changes) if scheduler == "adaptive" else list(other.role_changes)
        sections.append(Section("roles", "Role changes (adaptive)", roles or [{"change": "none"}]))
    if other is not None:
        pair = (result, other) if scheduler == "static" else (other, result)
        sections.append(Section("comparison", "Static vs adaptive scheduler, same workload",
                                _comparison_rows(*pair), [
                                    Column("figure", "figure"), Column("static", "static", ".4g"),
                                    Column("adaptive", "adaptive", ".4g"),
                                    Column("adaptive_vs_static", "adaptive vs static", "+.1%")]))
    sections.append(Section(
        "timeline", f"Timeline (means over {max(1, len(result.timeline['t_s']) // TIMELINE_ROWS)} samples of "
        f"{cfg.sample_s:g} s)", _downsample(result.timeline, TIMELINE_ROWS),
        [Column("t_s", "t (s)", ",.0f"), Column("link_gbps", "egress Gbps", ".2f"),
         Column("link_capacity_gbps", "line Gbps", ".0f"), Column("remote_waiting", "remote waiting", _3g),
         Column("local_waiting", "local waiting", _3g), Column("decode_waiting", "decode waiting", _3g),
         Column("decode_busy", "decode busy slots", _3g), Column("threshold_tokens", "t (tokens)", ",.0f"),
         Column("n_prefill", "N_p", _3g), Column("n_decode", "N_d", _3g)]))
    notes += [f"workload: {workload}", f"inputs: {perf_note}", f"method: {result.method}",
              f"analytic: {analytic.method if analytic else 'not run'}",
              "plan: threshold and local split from the distribution-exact grid search"
              + (f" with N_p fixed at {prefill_instances}" if prefill_instances is not None else "")
              + (f" with t fixed at {t_fixed:,.0f}" if t_fixed is not None else ""),
              "throughput: steady = middle 90% of completions over their time span",
              "prefix caches: 2 TB of host DRAM per 8-GPU instance assumed (as in a DGX H200); 512-token blocks"]
    report = Report(sections, notes, meta={"model": perf.model.name, "layout": layout.name, "scheduler": scheduler,
                                           "seed": seed, "requests": len(requests)})
    text = render(report, fmt)
    if plot is not None:
        write_atomic(plot, sim_plot.render(result, plot_fmt, other, f"{layout.name}, {scheduler} scheduler"))
    sys.stdout.write(text)
