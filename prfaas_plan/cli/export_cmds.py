"""``prfaas-plan export PLAN.json --to TARGET -o DIR``: launch files from a plan (`prfaas_plan.planning.export`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..output.report import Column, Report, Section
from .app import app
from .envelope import emit
from .options import ExportEngine, ExportTarget, FormatOpt, KvBackend, ModelPath, Output


@app.command("export")
def export_cmd(
    plan: Annotated[str, typer.Argument(help="A plan: the JSON of prfaas-plan size -f json.")],
    to: ExportTarget,
    output: Output,
    engine: ExportEngine = None,
    kv_backend: KvBackend = None,
    model_path: ModelPath = None,
    fmt: FormatOpt = "table",
) -> None:
    """Write per site and role the engine launch command and the router rule (threshold t, and the
    degraded-link threshold when the plan has one) for SGLang, vLLM, Dynamo, llm-d or Kubernetes."""
    from ..planning.export import answer_export

    a = answer_export(plan, to, output, engine, kv_backend, model_path)
    emit(Report([Section("files", f"Wrote {a.target} launch files to {a.out_dir}", a.rows,
                         [Column("file", "file"), Column("kind", "kind")])], list(a.notes),
                meta={"target": a.target, "output": a.out_dir}), fmt)
