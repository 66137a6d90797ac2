"""``prfaas-plan check FILE...``: predicted vs measured per point (`prfaas_plan.planning.check`)."""

from __future__ import annotations

import typer

from .app import app
from .envelope import emit
from .options import Chip, Concurrency, FormatOpt, OptModel, OptTp, Stack, WeightDtype


@app.command("check")
def check_cmd(
    files: list[str] = typer.Argument(..., help="Benchmark outputs: vLLM bench serve JSON, SGLang bench_serving "
                                                "JSONL, aiperf/genai-perf exports (JSON/CSV), NVIDIA silicon-sample "
                                                "CSV, or the project's measurement CSV."),
    chip: Chip = None,
    stack: Stack = None,
    tp: OptTp = None,
    model: OptModel = None,
    concurrency: Concurrency = None,
    weight_dtype: WeightDtype = None,
    fmt: FormatOpt = "table",
) -> None:
    """The planner's predicted TTFT/TPOT beside your measured points, per point, with the error summary:
    whether to trust a plan on your cluster. Pass --profiles DIR to check calibrated profiles."""
    from ..output.check_report import check_report
    from ..planning.check import answer_check, bench_tags

    tags = bench_tags(chip, stack, tp, model, concurrency, None, weight_dtype)
    emit(check_report(answer_check(files, tags)), fmt)
