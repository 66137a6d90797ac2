"""``size``, ``compare`` and ``reproduce``: parse, call `prfaas_plan.planning`, render."""

from __future__ import annotations

import typer

from ..errors import PlanError
from .app import app
from .envelope import emit
from .options import (
    FailOn,
    FormatOpt,
    InstanceChips,
    Inputs,
    KvDtype,
    LayoutFile,
    LinkDegraded,
    Load,
    LocalInstanceChips,
    ModeOpt,
    Plot,
    Rate,
    RemoteInstanceChips,
    Samples,
    SensitivityOpt,
    Seed,
    SizeLink,
    Strict,
    TargetRate,
    Threshold,
    TtftSlo,
    Verify,
    WeightDtype,
)
from .question_options import QuestionText, question_command

# The order of each command's options (its --help page and its JSON ``meta.inputs``); a planning input
# not named here follows the last one named (prfaas_plan.cli.question_options).
SIZE_ORDER = ("model", "link", "remote", "local", "workload", "tpot", "instance_chips", "remote_instance_chips",
              "local_instance_chips", "weight_dtype", "kv_dtype", "target_rate", "mode", "transfer_bytes", "inputs",
              "link_efficiency", "rtt", "link_price", "link_headroom", "threshold", "size_link", "verify", "load", "ttft", "plot",
              "layout", "link_degraded", "samples", "seed", "stack", "basis", "fmt")
COMPARE_ORDER = ("model", "link", "remote", "local", "workload", "tpot", "instance_chips", "remote_instance_chips",
                 "local_instance_chips", "weight_dtype", "kv_dtype", "basis", "mode", "transfer_bytes", "inputs",
                 "link_efficiency", "rtt", "link_price", "link_headroom", "load", "rate", "plot", "samples", "seed", "stack", "layout",
                 "fmt")


def _write_plot(path: str, plan, title: str) -> None:
    from ..output.plots import plot_threshold_sweep

    plot_threshold_sweep(plan, path, title)


def _open_choices(question: QuestionText) -> tuple[str, ...]:
    """The deployment choices (planning input names) the user left at their defaults: `--sensitivity`
    spreads the error bars over them and ranks them (a searched plan's alternatives keep its searched
    configuration and change only that choice)."""
    return tuple(n for n in ("stack", "transfer_bytes", "mode") if n not in question.given)


def _search_spec(question: QuestionText):
    """What `size` pins of the configuration search: the instance shapes and transfer policy the user gave
    (None: searched); no search with ``--inputs paper`` (the paper's tables are 8-chip instances)."""
    from ..planning.configurations import pinned_spec

    given = question.given
    return pinned_spec(given.get("inputs", ""), given.get("instance_chips"), given.get("remote_instance_chips"),
                       given.get("local_instance_chips"), given.get("transfer_bytes"))


SEARCH = "the configuration search"   # what stands in for a replaced default (`envelope.emit`)
LAYOUT_FILE = "the layout file"


def _searched(search) -> tuple[str, ...]:
    """The inputs whose defaults the configuration search replaces (not 'in effect': it chose them)."""
    if search is None:
        return ()
    return tuple(n for n, v in (("instance_chips", search.local_chips), ("transfer_bytes", search.transfer))
                 if v is None)


@app.command("size")
@question_command(SIZE_ORDER)
def size_cmd(
    question: QuestionText,
    target_rate: TargetRate = None,
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
    sensitivity: SensitivityOpt = False,
    fmt: FormatOpt = "table",
) -> None:
    """Threshold, instances per role, throughput, binding stage, link load, TTFT and cost."""
    from ..output.layout_report import layout_report
    from ..output.plan_report import size_report
    from ..planning import Question, answer_layout, answer_size, follow_ups

    questions = follow_ups(threshold=threshold, target_rate=target_rate, load=load, ttft=ttft, verify=verify,
                           size_link=size_link, link_degraded=link_degraded)
    questions["sensitivity"] = _open_choices(question) if sensitivity else None
    replaced = ()
    if layout is not None:
        from ..planning.question import LAYOUT_FIELDS

        replaced = LAYOUT_FIELDS
        answer = answer_layout(Question.from_layout(layout, **question.given), samples=samples, seed=seed,
                               search=_search_spec(question), **questions)
        if not hasattr(answer, "plan"):
            if plot:
                raise PlanError("--plot shows a one-site plan; a layout file with several PD sites has none")
            emit(layout_report(answer), fmt, replaced=replaced, replaced_by=LAYOUT_FILE)
            return
    else:
        search = _search_spec(question)
        answer = answer_size(question.parse(), samples=samples, seed=seed, search=search, **questions)
        replaced = _searched(search)
    report = size_report(answer)
    if plot:
        _write_plot(plot, answer.plan, f"{answer.scenario.model.name}: throughput vs threshold")
        if getattr(answer, "configurations", None) is not None:
            from ..output.plots import pareto_path, plot_pareto

            plot_pareto(answer.configurations, pareto_path(plot), f"{answer.scenario.model.name}: searched configurations")
            report.notes.append(f"Pareto figure of the configuration search: {pareto_path(plot)}")
    emit(report, fmt, replaced=replaced, replaced_by=LAYOUT_FILE if layout is not None else SEARCH)


@app.command("compare")
@question_command(COMPARE_ORDER)
def compare_cmd(
    question: QuestionText,
    load: Load = None,
    rate: Rate = None,
    plot: Plot = None,
    samples: Samples = 400,
    seed: Seed = 0,
    layout: LayoutFile = None,
    sensitivity: SensitivityOpt = False,
    fmt: FormatOpt = "table",
) -> None:
    """PrfaaS-PD beside the local cluster alone, homogeneous PD (equal instances, equal budget) and naive
    heterogeneous; with --load or --rate, all at one offered rate. With --layout, the file's sites."""
    from ..output.plan_report import compare_report
    from ..planning import answer_compare

    sensitivity = _open_choices(question) if sensitivity else None
    if layout is not None:
        _compare_layout(question, layout, load, rate, samples, seed, sensitivity, plot, fmt)
        return
    search = _search_spec(question)
    answer = answer_compare(question.parse(), load, rate, samples=samples, seed=seed, sensitivity=sensitivity,
                            search=search)
    report = compare_report(answer)
    if plot:
        _write_plot(plot, answer.plans["prfaas-pd"], f"{answer.scenario.model.name}: PrfaaS-PD throughput vs "
                    "threshold")
    emit(report, fmt, replaced=_searched(search), replaced_by=SEARCH)


def _compare_layout(question: QuestionText, layout, load, rate, samples, seed, sensitivity, plot, fmt) -> None:
    """``compare --layout FILE``: the file replaces --remote/--local/--link and the instance shapes."""
    from ..output.layout_report import layout_report
    from ..output.plan_report import compare_report
    from ..planning import Question, answer_compare_layout
    from ..planning.question import LAYOUT_FIELDS

    answer = answer_compare_layout(Question.from_layout(layout, **question.given), load, rate, samples=samples,
                                   seed=seed, sensitivity=sensitivity, search=_search_spec(question))
    if not hasattr(answer, "plans"):
        if plot:
            raise PlanError("--plot shows a one-site plan; a layout file with several PD sites has none")
        emit(layout_report(answer, "compare"), fmt, replaced=LAYOUT_FIELDS, replaced_by=LAYOUT_FILE)
        return
    if plot:
        _write_plot(plot, answer.plans["prfaas-pd"], f"{answer.scenario.model.name}: PrfaaS-PD throughput vs threshold")
    emit(compare_report(answer), fmt, replaced=LAYOUT_FIELDS, replaced_by=LAYOUT_FILE)


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
