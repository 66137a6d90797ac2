"""``prfaas-plan check FILE...``: predicted vs measured per point (`prfaas_plan.planning.check`)."""

from __future__ import annotations

from typing import Optional

import typer

from ..output.report import check_format
from .app import FormatOption, app
from .bench_options import BenchStackOption, ChipOption, ConcurrencyOption, ModelOption, TpOption
from .envelope import emit


@app.command("check")
def check_cmd(
    files: list[str] = typer.Argument(..., help="Benchmark outputs: vLLM bench serve JSON, SGLang bench_serving "
                                                "JSONL, aiperf/genai-perf exports (JSON/CSV), NVIDIA silicon-sample "
                                                "CSV, or the project's measurement CSV."),
    chip: Optional[str] = ChipOption,
    stack: Optional[str] = BenchStackOption,
    tp: Optional[int] = TpOption,
    model: Optional[str] = ModelOption,
    concurrency: Optional[int] = ConcurrencyOption,
    moe: Optional[str] = typer.Option(None, "--moe", help="How routed experts are split: tp or ep."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Weight dtype the runs served "
                                               "(e.g. fp8), when it differs from the profile's."),
    fmt: str = FormatOption,
) -> None:
    """The planner's predicted TTFT/TPOT beside your measured points, per point, with the error summary:
    whether to trust a plan on your cluster. Pass --profiles DIR to check calibrated profiles."""
    from ..output.check_report import check_report
    from ..planning.check import answer_check, bench_tags

    check_format(fmt)
    tags = bench_tags(chip, stack, tp, model, concurrency, moe, weight_dtype)
    emit(check_report(answer_check(files, tags)), fmt)
