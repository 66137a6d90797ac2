"""``size``, ``compare`` and ``reproduce``: parse, call `prfaas_plan.planning`, render."""

from __future__ import annotations

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
    KvDtype,
    LayoutFile,
    LinkDegraded,
    LinkEfficiency,
    LinkPrice,
    LinkRate,
    Load,
    Local,
    LocalInstanceChips,
    Model,
    ModeOpt,
    Plot,
    Rate,
    Remote,
    RemoteInstanceChips,
    Rtt,
    Samples,
    Seed,
    Stack,
    SizeLink,
    FailOn,
    Strict,
    TargetRate,
    Threshold,
    Tpot,
    TransferBytesOpt,
    TtftSlo,
    Verify,
    WeightDtype,
    Workload,
)


def _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency, rtt,
              link_price=DEFAULTS.link_price_usd_per_gbps_month, transfer_bytes=DEFAULTS.transfer_bytes,
              stack=None, **shapes):
    """``shapes``: remote_instance_chips, local_instance_chips, weight_dtype, kv_dtype."""
    from ..planning import scenario

    return scenario(model, remote, local, link, tpot, workload, instance_chips, str(mode), str(inputs),
                    link_efficiency, rtt, link_price, str(transfer_bytes), stack, **shapes)


def _write_plot(path: str, plan, title: str) -> None:
    from ..output.plots import plot_threshold_sweep

    plot_threshold_sweep(plan, path, title)


def _given(names: list[str]) -> list[str]:
    """The options among ``names`` the user gave on the command line (not left at their default)."""
    from click import get_current_context

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
    remote_instance_chips: RemoteInstanceChips = None,
    local_instance_chips: LocalInstanceChips = None,
    weight_dtype: WeightDtype = None,
    kv_dtype: KvDtype = None,
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
    stack: Stack = None,
    basis: BasisOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Threshold, instances per role, throughput, binding stage, link load, TTFT and cost."""
    from ..output.layout_report import layout_report
    from ..output.plan_report import size_report
    from ..planning import answer_layout, answer_size
    from ..units import parse_length, parse_rate_bps, parse_ttft_slo

    slo = parse_ttft_slo(ttft) if ttft is not None else None
    t = float(parse_length(threshold, "--threshold")) if threshold is not None else None
    degraded = parse_rate_bps(link_degraded, "--link-degraded") if link_degraded is not None else None
    questions = {"threshold": t, "target_rate": target_rate, "load": load, "ttft_slo": slo, "verify_lp": verify,
                 "size_link": size_link, "link_degraded_bps": degraded}
    replaced = ("remote", "local", "link", "instance_chips", "remote_instance_chips", "local_instance_chips", "rtt",
                "link_efficiency", "link_price") if layout is not None else ()
    if layout is not None:
        extra = _given(list(replaced))
        if extra:
            raise PlanError(f"--layout describes the sites, instance shapes and links: drop {', '.join(extra)}")
        answer = answer_layout(layout, model, tpot, workload, str(inputs), mode=str(mode), weight_dtype=weight_dtype,
                               kv_dtype=kv_dtype, transfer_bytes=str(transfer_bytes), stack=stack, samples=samples,
                               seed=seed, basis=None if basis is None else str(basis), **questions)
        if not hasattr(answer, "plan"):
            if plot:
                raise PlanError("--plot shows a one-site plan; a layout file with several PD sites has none")
            emit(layout_report(answer), fmt, replaced=replaced)
            return
    else:
        sc = _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency,
                       rtt, link_price, transfer_bytes, stack, remote_instance_chips=remote_instance_chips,
                       local_instance_chips=local_instance_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
        answer = answer_size(sc, samples=samples, seed=seed, basis=None if basis is None else str(basis),
                             **questions)
    report = size_report(answer)
    if plot:
        _write_plot(plot, answer.plan, f"{answer.scenario.model.name}: throughput vs threshold")
    emit(report, fmt, replaced=replaced)


@app.command("compare")
def compare_cmd(
    model: Model = DEFAULTS.model,
    link: LinkRate = DEFAULTS.link,
    remote: Remote = DEFAULTS.remote,
    local: Local = DEFAULTS.local,
    workload: Workload = DEFAULTS.workload,
    tpot: Tpot = DEFAULTS.tpot,
    instance_chips: InstanceChips = DEFAULTS.instance_chips,
    remote_instance_chips: RemoteInstanceChips = None,
    local_instance_chips: LocalInstanceChips = None,
    weight_dtype: WeightDtype = None,
    kv_dtype: KvDtype = None,
    basis: BasisOpt = None,
    mode: ModeOpt = DEFAULTS.mode,
    transfer_bytes: TransferBytesOpt = DEFAULTS.transfer_bytes,
    inputs: Inputs = DEFAULTS.inputs,
    link_efficiency: LinkEfficiency = DEFAULTS.link_efficiency,
    rtt: Rtt = None,
    link_price: LinkPrice = DEFAULTS.link_price_usd_per_gbps_month,
    load: Load = None,
    rate: Rate = None,
    plot: Plot = None,
    samples: Samples = 400,
    seed: Seed = 0,
    stack: Stack = None,
    layout: LayoutFile = None,
    fmt: FormatOpt = "table",
) -> None:
    """PrfaaS-PD beside the local cluster alone, homogeneous PD (equal instances, equal budget) and naive
    heterogeneous; with --load or --rate, all at one offered rate. With --layout, the file's sites."""
    from ..output.plan_report import compare_report
    from ..planning import answer_compare

    if layout is not None:
        _compare_layout(layout, model, tpot, workload, inputs, mode, weight_dtype, kv_dtype, transfer_bytes, stack,
                        samples, seed, basis, load, rate, plot, fmt)
        return
    sc = _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, link_efficiency, rtt,
                   link_price, transfer_bytes, stack, remote_instance_chips=remote_instance_chips,
                   local_instance_chips=local_instance_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    answer = answer_compare(sc, None if basis is None else str(basis), load, rate, samples=samples, seed=seed)
    report = compare_report(answer)
    if plot:
        _write_plot(plot, answer.plans["prfaas-pd"], f"{sc.model.name}: PrfaaS-PD throughput vs threshold")
    emit(report, fmt)


def _compare_layout(layout, model, tpot, workload, inputs, mode, weight_dtype, kv_dtype, transfer_bytes, stack,
                    samples, seed, basis, load, rate, plot, fmt) -> None:
    """``compare --layout FILE``: the file replaces --remote/--local/--link and the instance shapes."""
    from ..output.layout_report import layout_report
    from ..output.plan_report import compare_report
    from ..planning import answer_compare_layout

    replaced = ("remote", "local", "link", "instance_chips", "remote_instance_chips", "local_instance_chips", "rtt",
                "link_efficiency", "link_price")
    extra = _given(list(replaced))
    if extra:
        raise PlanError(f"--layout describes the sites, instance shapes and links: drop {', '.join(extra)}")
    answer = answer_compare_layout(layout, model, tpot, workload, str(inputs), mode=str(mode),
                                   weight_dtype=weight_dtype, kv_dtype=kv_dtype, transfer_bytes=str(transfer_bytes),
                                   stack=stack, samples=samples, seed=seed, basis=None if basis is None else str(basis),
                                   load=load, rate=rate)
    if not hasattr(answer, "plans"):
        if plot:
            raise PlanError("--plot shows a one-site plan; a layout file with several PD sites has none")
        emit(layout_report(answer, "compare"), fmt, replaced=replaced)
        return
    if plot:
        _write_plot(plot, answer.plans["prfaas-pd"], f"{answer.scenario.model.name}: PrfaaS-PD throughput vs threshold")
    emit(compare_report(answer), fmt, replaced=replaced)


@app.command("reproduce")
def reproduce_cmd(
    inputs: Inputs = "paper",
    mode: ModeOpt = "representative",
    instance_chips: InstanceChips = 8,
    remote_instance_chips: RemoteInstanceChips = None,
    local_instance_chips: LocalInstanceChips = None,
    weight_dtype: WeightDtype = None,
    kv_dtype: KvDtype = None,
    strict: Strict = False,
    fail_on: FailOn = None,
    plot: Plot = None,
    fmt: FormatOpt = "table",
) -> None:
    """The paper's case study from models: each published figure, ours, difference and band.

    Both sites run the paper's own engine (--inputs predicted: its stack profile, named in the notes;
    --inputs paper: its measured and back-solved inputs), so there is no --stack: on another stack the
    figures would no longer be the paper's to check against (compare --model prfaas-1t --stack NAME asks that).
    Exit code 1 when a figure is out of its band without a named known gap (--fail-on unexplained, the
    default); with --fail-on any or --strict, on any miss.
    """
    from ..output.plan_report import reproduce_report
    from ..planning import answer_reproduce

    if strict and fail_on == "unexplained":
        raise PlanError("--strict and --fail-on unexplained contradict each other: --strict is --fail-on any")
    strict = strict or fail_on == "any"

    answer = answer_reproduce(str(inputs), str(mode), instance_chips=instance_chips,
                              remote_instance_chips=remote_instance_chips, local_instance_chips=local_instance_chips,
                              weight_dtype=weight_dtype, kv_dtype=kv_dtype, strict=strict)
    report = reproduce_report(answer)
    if plot:
        _write_plot(plot, answer.study.plans["prfaas-pd"], "prfaas-1t case study: throughput vs threshold")
    emit(report, fmt)
    if answer.failed:
        raise typer.Exit(1)
