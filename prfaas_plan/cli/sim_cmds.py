"""``prfaas-plan simulate``: parse, call `prfaas_plan.planning.simulate`, render (and the progress bar)."""

from __future__ import annotations

import sys
from typing import Optional

import typer  # noqa: E402  (after the option aliases, which need it too)

from .app import app
from .envelope import emit
from .options import (
    BaselineOpt,
    Duration,
    FormatOpt,
    LayoutFile,
    Load,
    Plot,
    PrefillInstances,
    Rate,
    Rebalance,
    SchedulerOpt,
    Seed,
    Synthetic,
    Threshold,
    Trace,
)
from .question_options import QuestionText, question_command

PROGRESS_MIN_REQUESTS = 50_000


def _progress():
    """A rich progress bar on stderr for long runs attached to a terminal: (tick(done, total), stop)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(file=sys.stderr), transient=True)
    task = None

    def tick(done: int, total: int) -> None:
        nonlocal task
        if total < PROGRESS_MIN_REQUESTS:
            return
        if task is None:
            task = bar.add_task("simulating", total=total)
            bar.start()
        bar.update(task, completed=done)

    return tick, bar.stop


SIMULATE_ORDER = ("trace", "synthetic", "model", "layout", "baseline", "remote", "local", "instance_chips",
                  "remote_instance_chips", "local_instance_chips", "weight_dtype", "kv_dtype", "tpot", "inputs",
                  "transfer_bytes", "rate", "load", "duration", "scheduler", "compare", "link", "link_efficiency",
                  "link_headroom", "rtt", "link_profile", "threshold", "prefill_instances", "rebalance", "seed", "stack", "fmt",
                  "plot")
"""The order of simulate's options (its --help page); the planning inputs come from the question's fields."""
SIMULATE_OMITS = ("workload", "mode", "basis", "link_price")
"""Planning inputs simulate does not take: the workload is ``--trace``/``--synthetic``, the plan is always
distribution-exact, a simulation has no verdict basis and no link price."""


@app.command("simulate")
@question_command(SIMULATE_ORDER, omit=SIMULATE_OMITS)
def simulate_cmd(
    question: QuestionText,
    trace: Trace = None,
    synthetic: Synthetic = None,
    layout: LayoutFile = None,
    baseline: BaselineOpt = "prfaas",
    rate: Rate = None,
    load: Load = None,
    duration: Duration = None,
    scheduler: SchedulerOpt = "static",
    compare: Optional[str] = typer.Option(
        None, "--compare", help="Also run these schedulers on the same workload, comma-separated (e.g. "
        "static,threshold,adaptive), and report every one beside the static run."),
    link_profile: str = typer.Option(None, "--link-profile", help="CSV time_s,gbps: line rate over time."),
    threshold: Threshold = None,
    prefill_instances: PrefillInstances = None,
    rebalance: Rebalance = "5min",
    seed: Seed = 0,
    fmt: FormatOpt = "table",
    plot: Plot = None,
) -> None:
    """Discrete-event simulation: throughput, TTFT/TPOT percentiles, stage load, link use, caches, roles."""
    from ..output.report import write_atomic
    from ..output.sim_report import simulation_report
    from ..planning import answer_simulate
    from ..planning.simulate import plot_format, simulation_plot
    from ..units import parse_length, parse_time_s

    plot_fmt = plot_format(plot) if plot is not None else None
    tick, done = _progress()
    try:
        # the planning inputs the user typed; those left out take answer_simulate's defaults (shapes searched)
        answer = answer_simulate(
            **question.given, baseline=str(baseline), layout_file=layout, trace=trace, synthetic=synthetic,
            rate=rate, load=load,
            duration_s=parse_time_s(duration, "--duration") if duration is not None else None,
            scheduler=str(scheduler), compare=compare, link_profile=link_profile,
            threshold=float(parse_length(threshold, "--threshold")) if threshold is not None else None,
            prefill_instances=prefill_instances, rebalance_s=parse_time_s(rebalance, "--rebalance"), seed=seed,
            progress=tick)
    finally:
        done()
    if hasattr(answer, "site_costs"):  # several PD sites (planning.simulate_sites)
        from ..output.sim_sites_report import sites_simulation_report

        report = sites_simulation_report(answer)
    else:
        report = simulation_report(answer)
    if plot is not None:
        write_atomic(plot, simulation_plot(answer, plot_fmt))
    emit(report, fmt)
