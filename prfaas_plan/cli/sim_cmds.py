"""``prfaas-plan simulate``: parse, call `prfaas_plan.planning.simulate`, render (and the progress bar)."""

from __future__ import annotations

import sys
from typing import Optional

import typer  # noqa: E402  (after the option aliases, which need it too)

from ..planning.question import DEFAULTS
from .app import app
from .envelope import emit
from .options import (
    BaselineOpt,
    Duration,
    FormatOpt,
    Inputs,
    InstanceChips,
    KvDtype,
    LayoutFile,
    LinkEfficiency,
    LinkRate,
    Load,
    Local,
    LocalInstanceChips,
    Model,
    Plot,
    PrefillInstances,
    Rate,
    Rebalance,
    Remote,
    RemoteInstanceChips,
    Rtt,
    SchedulerOpt,
    Seed,
    Stack,
    Synthetic,
    Threshold,
    Tpot,
    Trace,
    TransferBytesOpt,
    WeightDtype,
)

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


@app.command("simulate")
def simulate_cmd(
    trace: Trace = None,
    synthetic: Synthetic = None,
    model: Model = DEFAULTS.model,
    layout: LayoutFile = None,
    baseline: BaselineOpt = "prfaas",
    remote: Remote = DEFAULTS.remote,
    local: Local = DEFAULTS.local,
    instance_chips: InstanceChips = DEFAULTS.instance_chips,
    remote_instance_chips: RemoteInstanceChips = None,
    local_instance_chips: LocalInstanceChips = None,
    weight_dtype: WeightDtype = None,
    kv_dtype: KvDtype = None,
    tpot: Tpot = DEFAULTS.tpot,
    inputs: Inputs = DEFAULTS.inputs,
    transfer_bytes: TransferBytesOpt = None,
    rate: Rate = None,
    load: Load = None,
    duration: Duration = None,
    scheduler: SchedulerOpt = "static",
    compare: Optional[str] = typer.Option(
        None, "--compare", help="Also run these schedulers on the same workload, comma-separated (e.g. "
        "static,threshold,adaptive), and report every one beside the static run."),
    link: LinkRate = DEFAULTS.link,
    link_efficiency: LinkEfficiency = DEFAULTS.link_efficiency,
    rtt: Rtt = None,
    link_profile: str = typer.Option(None, "--link-profile", help="CSV time_s,gbps: line rate over time."),
    threshold: Threshold = None,
    prefill_instances: PrefillInstances = None,
    rebalance: Rebalance = "5min",
    seed: Seed = 0,
    stack: Stack = None,
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
        answer = answer_simulate(
            model=model, baseline=str(baseline), layout_file=layout, remote=remote, local=local,
            instance_chips=instance_chips, remote_instance_chips=remote_instance_chips,
            local_instance_chips=local_instance_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tpot=tpot,
            inputs=str(inputs), link=link, link_efficiency=link_efficiency,
            rtt=rtt, trace=trace, synthetic=synthetic, rate=rate, load=load,
            duration_s=parse_time_s(duration, "--duration") if duration is not None else None,
            scheduler=str(scheduler), compare=compare, link_profile=link_profile,
            threshold=float(parse_length(threshold, "--threshold")) if threshold is not None else None,
            prefill_instances=prefill_instances, rebalance_s=parse_time_s(rebalance, "--rebalance"), seed=seed,
            stack=stack, transfer_bytes=None if transfer_bytes is None else str(transfer_bytes), progress=tick)
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
