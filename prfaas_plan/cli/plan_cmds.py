"""``size``, ``compare`` and ``reproduce``: parse, call `prfaas_plan.planning`, render."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import PlanError
from ..planning.scenario import DEFAULTS
from .app import app
from .envelope import emit
from .options import (
    BasisOpt,
    FormatOpt,
    Inputs,
    InstanceChips,
    LayoutFile,
    LinkDegraded,
    LinkEfficiency,
    LinkPrice,
    LinkRate,
    Load,
    Local,
    Model,
    ModeOpt,
    Plot,
    Remote,
    Rtt,
    Samples,
    Seed,
    SizeLink,
    TargetRate,
    Threshold,
    Tpot,
    TransferBytesOpt,
    TtftSlo,
    Verify,
    Workload,
)
from .stack_option import StackOption


def _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency, rtt,
              link_price=DEFAULTS.link_price_usd_per_gbps_month, transfer_bytes=DEFAULTS.transfer_bytes,
              stack=None):
    from ..planning import scenario

    return scenario(model, remote, local, link, tpot, workload, instance_chips, str(mode), str(inputs),
                    link_efficiency, rtt, link_price, str(transfer_bytes), stack)


def _write_plot(path: str, plan, title: str) -> None:
    from ..output.plots import plot_threshold_sweep

    plot_threshold_sweep(plan, path, title)


def _given(names: list[str]) -> list[str]:
    """The options among ``names`` the user gave on the command line (not left at their default)."""
    from ._click import get_current_context

    ctx = get_current_context()
    return [f"--{n.replace('_', '-')}" for n in names
            if ctx.get_parameter_source(n).name not in ("DEFAULT", "DEFAULT_MAP")]


@app.command("size")
def size_cmd(
    model: Model = DEFAULTS.model,
    link: LinkRate = DEFAULTS.link,
    remote: Remote = DEFAULTS.remote,
    local: Local = DEFAULTS.local,
    workload: Workload = DEFAULTS.workload,
    tpot: Tpot = DEFAULTS.tpot,
    instance_chips: InstanceChips = DEFAULTS.instance_chips,
    target_rate: TargetRate = None,
    mode: ModeOpt = DEFAULTS.mode,
    transfer_bytes: TransferBytesOpt = DEFAULTS.transfer_bytes,
    inputs: Inputs = DEFAULTS.inputs,
    link_efficiency: LinkEfficiency = DEFAULTS.link_efficiency,
    rtt: Rtt = None,
    link_price: LinkPrice = DEFAULTS.link_price_usd_per_gbps_month,
    threshold: Threshold = None,
    size_link: SizeLink = None,
    verify: Verify = False,
    load: Load = None,
    ttft: TtftSlo = None,
    plot: Plot = None,
    layout: LayoutFile = None,
    link_degraded: LinkDegraded = None,
    samples: Samples = 400,
    seed: Seed = 0,
    stack: Optional[str] = StackOption,
    fmt: FormatOpt = "table",
) -> None:
    """Threshold, instances per role, throughput, binding stage, link load, TTFT and cost."""
    from ..output.plan_report import layout_report, size_report
    from ..planning import answer_layout, answer_size
    from ..units import parse_length, parse_rate_bps, parse_ttft_slo

    if layout is not None:
        extra = _given(["remote", "local", "link", "instance_chips", "rtt", "target_rate", "size_link", "load",
                        "ttft", "plot", "verify", "threshold", "link_efficiency", "link_price", "link_degraded",
                        "samples", "seed", "transfer_bytes"])
        if mode != "exact":
            extra += _given(["mode"])
        if extra:
            raise PlanError(f"--layout describes the sites and links and is sized by the linear program alone: "
                            f"drop {', '.join(extra)}")
        emit(layout_report(answer_layout(layout, model, tpot, workload, str(inputs))), fmt)
        return
    slo = parse_ttft_slo(ttft) if ttft is not None else None
    t = float(parse_length(threshold, "--threshold")) if threshold is not None else None
    sc = _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency, rtt,
                   link_price, transfer_bytes, stack)
    degraded = parse_rate_bps(link_degraded, "--link-degraded") if link_degraded is not None else None
    answer = answer_size(sc, threshold=t, target_rate=target_rate, load=load, ttft_slo=slo, verify_lp=verify,
                         size_link=size_link, link_degraded_bps=degraded, samples=samples, seed=seed)
    report = size_report(answer)
    if plot:
        _write_plot(plot, answer.plan, f"{sc.model.name}: throughput vs threshold")
    emit(report, fmt)


@app.command("compare")
def compare_cmd(
    model: Model = DEFAULTS.model,
    link: LinkRate = DEFAULTS.link,
    remote: Remote = DEFAULTS.remote,
    local: Local = DEFAULTS.local,
    workload: Workload = DEFAULTS.workload,
    tpot: Tpot = DEFAULTS.tpot,
    instance_chips: InstanceChips = DEFAULTS.instance_chips,
    basis: BasisOpt = "instances",
    mode: ModeOpt = DEFAULTS.mode,
    transfer_bytes: TransferBytesOpt = DEFAULTS.transfer_bytes,
    inputs: Inputs = DEFAULTS.inputs,
    link_efficiency: LinkEfficiency = DEFAULTS.link_efficiency,
    rtt: Rtt = None,
    link_price: LinkPrice = DEFAULTS.link_price_usd_per_gbps_month,
    load: Load = None,
    plot: Plot = None,
    samples: Samples = 400,
    seed: Seed = 0,
    stack: Optional[str] = StackOption,
    fmt: FormatOpt = "table",
) -> None:
    """PrfaaS-PD, homogeneous PD and naive heterogeneous side by side."""
    from ..output.plan_report import compare_report
    from ..planning import answer_compare

    sc = _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency, rtt,
                   link_price, transfer_bytes, stack)
    answer = answer_compare(sc, str(basis), load, samples=samples, seed=seed)
    report = compare_report(answer)
    if plot:
        _write_plot(plot, answer.plans["prfaas-pd"], f"{sc.model.name}: PrfaaS-PD throughput vs threshold")
    emit(report, fmt)


@app.command("reproduce")
def reproduce_cmd(
    inputs: Inputs = "paper",
    mode: ModeOpt = "representative",
    plot: Plot = None,
    fmt: FormatOpt = "table",
) -> None:
    """The paper's case study from models: each published figure, ours, difference and tolerance.

    Exit code 1 when a figure is out of tolerance and not a listed known gap.
    """
    from ..output.plan_report import reproduce_report
    from ..planning import answer_reproduce

    answer = answer_reproduce(str(inputs), str(mode))
    report = reproduce_report(answer)
    if plot:
        _write_plot(plot, answer.study.plans["prfaas-pd"], "prfaas-1t case study: throughput vs threshold")
    emit(report, fmt)
    if answer.failed:
        raise typer.Exit(1)
