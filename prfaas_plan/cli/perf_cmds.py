"""Per-instance performance commands: ``rates``, ``kv-throughput`` and ``calibrate``. Each parses its
options, asks `prfaas_plan.planning.rates` and renders the answer with `prfaas_plan.output.perf_report`."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import PlanError
from ..output.report import check_format
from ..units import parse_length, parse_lengths, parse_tpot_s
from .app import FormatOption, app
from .bench_options import ChipOption, ConcurrencyOption, ModelOption, TpOption
from .envelope import emit
from .stack_option import StackOption

MOE_HELP = "How routed experts are split: tp (every chip holds a slice of every expert) or ep (whole experts)."
SOURCE_HELP = "Prefill source: auto (measured table if the model has one for this instance, else roofline), " \
              "roofline or measured."


def _tpot(tpot: Optional[str], slo: Optional[str]) -> float:
    if tpot and slo:
        raise PlanError("--tpot and --slo both given: use one (25ms or 40tok/s)")
    if slo:
        return parse_tpot_s(slo, "--slo")
    return parse_tpot_s(tpot or "25ms", "--tpot")


@app.command("rates")
def rates_cmd(
    model: str = typer.Option(..., "--model", "-m", help="Model name or alias."),
    instance: str = typer.Option("8xH200", "--instance", "-i", help="Instance shape COUNTxCHIP, e.g. 8xH20."),
    length: list[str] = typer.Option(["1k", "8k", "32k", "128k"], "--len", "-l",
                                     help="Prompt length(s) for prefill, e.g. 8k,32k (K = 1024)."),
    tpot: Optional[str] = typer.Option(None, "--tpot", help="Decode per-token latency SLO, e.g. 25ms (default)."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Decode speed SLO instead of --tpot, e.g. 40tok/s."),
    input_len: str = typer.Option("27k", "--input-len", help="Mean input length of decoding requests."),
    output_len: str = typer.Option("1024", "--output-len", help="Output length of decoding requests."),
    source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Override the profile's weight "
                                               "dtype, routed experts included (e.g. int4); measured tables "
                                               "then no longer apply."),
    stack: Optional[str] = StackOption,
    batch: Optional[int] = typer.Option(None, "--batch", min=1, help="Decode step: batch (default: the "
                                        "capacity batch at the SLO)."),
    context: Optional[str] = typer.Option(None, "--context", help="Decode step: context tokens per request "
                                          "(default input + output / 2)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="Also predict mean TTFT and "
                                              "TPOT of a closed-loop benchmark at this concurrency (input "
                                              "--len, output --output-len)."),
    fmt: str = FormatOption,
) -> None:
    """Prefill latency and busy time per length, the bound of each operator class, a decode step, and
    decode capacity at an SLO."""
    from ..output.perf_report import rates_report
    from ..planning.rates import answer_rates

    check_format(fmt)
    answer = answer_rates(model, instance, parse_lengths(length, "--len"), _tpot(tpot, slo),
                          parse_length(input_len, "--input-len"), parse_length(output_len, "--output-len"),
                          source, moe, weight_dtype, stack, batch,
                          parse_length(context, "--context") if context else None, concurrency)
    emit(rates_report(answer), fmt)


@app.command("kv-throughput")
def kv_throughput_cmd(
    model: Optional[list[str]] = typer.Option(None, "--model", "-m", help="Model(s) (default: all bundled)."),
    instance: str = typer.Option("8xH200", "--instance", "-i", help="Instance shape COUNTxCHIP."),
    length: list[str] = typer.Option(["1k", "8k", "32k", "128k"], "--len", "-l", help="Lengths (K = 1024)."),
    source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
    state_dtype: str = typer.Option("profile", "--state-dtype",
                                    help="Count recurrent state as the profile says, or as an engine stores "
                                         "it (fp32: SGLang's default, the paper's Table 3)."),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Override every model's weight "
                                               "dtype, routed experts included."),
    stack: Optional[str] = StackOption,
    fmt: str = FormatOption,
) -> None:
    """KV throughput Phi_kv = S_kv / T_prefill per instance (Gbps), beside the paper's Table 3."""
    from ..output.perf_report import kv_throughput_report
    from ..planning.rates import answer_kv_throughput

    check_format(fmt)
    answer = answer_kv_throughput(model, instance, parse_lengths(length, "--len"), source, state_dtype, moe,
                                  weight_dtype, stack)
    emit(kv_throughput_report(answer), fmt)


@app.command("calibrate")
def calibrate_cmd(
    measurements: Optional[list[str]] = typer.Option(None, "--measurements", help="Measurement CSV(s) (tagged "
                                                     "model,instance,stack,len_tokens,ttft_s/tpot_s/busy_s...), "
                                                     "benchmark outputs (vLLM, SGLang, aiperf/genai-perf, NVIDIA "
                                                     "silicon sample; see check) or bundled reference file names; "
                                                     "default: every bundled set."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the calibrated chip and stack "
                                         "profiles into this folder (use it with --profiles)."),
    stack: Optional[str] = typer.Option(None, "--stack", help="Stack of user rows without a 'stack' column, and "
                                        "of benchmark files that do not record it (NAME or NAME@VERSION)."),
    chip: Optional[str] = ChipOption,
    tp: Optional[int] = TpOption,
    model: Optional[str] = ModelOption,
    concurrency: Optional[int] = ConcurrencyOption,
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP + " For user rows without a 'moe' column."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Weight dtype of user rows without "
                                               "a 'weight_dtype' column."),
    loo: bool = typer.Option(True, "--loo/--no-loo", help="Leave-one-out refits (one per row; slow on big sets)."),
    fmt: str = FormatOption,
) -> None:
    """Fit chip efficiencies and serving-stack overheads jointly on measured points; report every point and
    in-sample, leave-one-out and leave-one-model-out errors per chip and per stack."""
    from ..output.perf_report import calibrate_report
    from ..planning.rates import answer_calibrate

    from ..planning.check import bench_tags

    check_format(fmt)
    tags = bench_tags(chip, stack, tp, model, concurrency, moe if moe != "tp" else None, weight_dtype)
    emit(calibrate_report(answer_calibrate(measurements, output, stack, moe, weight_dtype, loo, tags)), fmt)
