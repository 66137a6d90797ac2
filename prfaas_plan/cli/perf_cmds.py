"""Per-instance performance commands: ``rates``, ``kv-throughput`` and ``calibrate``. Each parses its
options, asks `prfaas_plan.planning.rates` and renders the answer with `prfaas_plan.output.perf_report`."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import PlanError
from ..units import parse_length, parse_lengths, parse_tpot_s
from .app import app
from .envelope import emit
from .options import (
    Chip,
    Concurrency,
    FormatOpt,
    Instance,
    Lengths,
    Model,
    Moe,
    Measurements,
    OptModel,
    OptModels,
    OptTp,
    OptOutput,
    OptTpot,
    RowStack,
    RowWeightDtype,
    Source,
    Stack,
    WeightDtype,
)

def _tpot(tpot: Optional[str], slo: Optional[str]) -> float:
    if tpot and slo:
        raise PlanError("--tpot and --slo both given: use one (25ms or 40tok/s)")
    if slo:
        return parse_tpot_s(slo, "--slo")
    return parse_tpot_s(tpot or "25ms", "--tpot")


@app.command("rates")
def rates_cmd(
    model: Model,
    instance: Instance = "8xH200",
    length: Lengths = ["1k", "8k", "32k", "128k"],
    tpot: OptTpot = None,
    slo: Optional[str] = typer.Option(None, "--slo", help="Decode speed SLO instead of --tpot, e.g. 40tok/s."),
    input_len: str = typer.Option("27k", "--input-len", help="Mean input length of decoding requests."),
    output_len: str = typer.Option("1024", "--output-len", help="Output length of decoding requests."),
    source: Source = "auto",
    moe: Moe = "tp",
    weight_dtype: WeightDtype = None,
    stack: Stack = None,
    batch: Optional[int] = typer.Option(None, "--batch", min=1, help="Decode step: batch (default: the "
                                        "capacity batch at the SLO)."),
    context: Optional[str] = typer.Option(None, "--context", help="Decode step: context tokens per request "
                                          "(default input + output / 2)."),
    concurrency: Concurrency = None,
    fmt: FormatOpt = "table",
) -> None:
    """Prefill latency and busy time per length, the bound of each operator class, a decode step, and
    decode capacity at an SLO."""
    from ..output.perf_report import rates_report
    from ..planning.rates import answer_rates

    answer = answer_rates(model, instance, parse_lengths(length, "--len"), _tpot(tpot, slo),
                          parse_length(input_len, "--input-len"), parse_length(output_len, "--output-len"),
                          source, moe, weight_dtype, stack, batch,
                          parse_length(context, "--context") if context else None, concurrency)
    emit(rates_report(answer), fmt)


@app.command("kv-throughput")
def kv_throughput_cmd(
    model: OptModels = None,
    instance: Instance = "8xH200",
    length: Lengths = ["1k", "8k", "32k", "128k"],
    source: Source = "auto",
    state_dtype: str = typer.Option("profile", "--state-dtype",
                                    help="Count recurrent state as the profile says, or as an engine stores "
                                         "it (fp32: SGLang's default, the paper's Table 3)."),
    moe: Moe = "tp",
    weight_dtype: WeightDtype = None,
    stack: Stack = None,
    fmt: FormatOpt = "table",
) -> None:
    """KV throughput Phi_kv = S_kv / T_prefill per instance (Gbps), beside the paper's Table 3."""
    from ..output.perf_report import kv_throughput_report
    from ..planning.rates import answer_kv_throughput

    answer = answer_kv_throughput(model, instance, parse_lengths(length, "--len"), source, state_dtype, moe,
                                  weight_dtype, stack)
    emit(kv_throughput_report(answer), fmt)


@app.command("calibrate")
def calibrate_cmd(
    measurements: Measurements = None,
    output: OptOutput = None,
    stack: RowStack = None,
    moe: Moe = "tp",
    weight_dtype: RowWeightDtype = None,
    chip: Chip = None,
    bench_stack: Stack = None,
    tp: OptTp = None,
    model: OptModel = None,
    concurrency: Concurrency = None,
    loo: bool = typer.Option(True, "--loo/--no-loo", help="Leave-one-out refits (one per row; slow on big sets)."),
    fmt: FormatOpt = "table",
) -> None:
    """Fit chip efficiencies and serving-stack overheads jointly on measured points; report every point and
    in-sample, leave-one-out and leave-one-model-out errors per chip and per stack."""
    from ..output.perf_report import calibrate_report
    from ..planning.rates import answer_calibrate

    from ..planning.check import bench_tags

    tags = bench_tags(chip, bench_stack, tp, model, concurrency, moe if moe != "tp" else None, weight_dtype)
    emit(calibrate_report(answer_calibrate(measurements, output, stack, moe, weight_dtype, loo, tags)), fmt)
