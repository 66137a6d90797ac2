"""``prfaas-plan export PLAN.json --to TARGET -o DIR``: launch files from a plan (`prfaas_plan.planning.export`)."""

from __future__ import annotations

from typing import Optional

import typer

from ..output.report import Column, Report, Section, check_format
from .app import FormatOption, app
from .envelope import emit


@app.command("export")
def export_cmd(
    plan: str = typer.Argument(..., help="A plan: the JSON of prfaas-plan size -f json."),
    to: str = typer.Option(..., "--to", help="What to write: sglang, vllm, dynamo, llm-d or k8s."),
    out: str = typer.Option(..., "--output", "-o", help="Folder to create (must not exist or be empty)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine the Kubernetes Deployments run: sglang "
                                         "(default) or vllm (--to k8s only)."),
    kv_backend: Optional[str] = typer.Option(None, "--kv-backend", help="KV transfer backend: mooncake or nixl "
                                             "(default: mooncake for sglang and k8s, nixl for vllm, llm-d, dynamo)."),
    model_path: Optional[str] = typer.Option(None, "--model-path", help="Checkpoint to serve (default: the Hugging "
                                             "Face repository the model profile names)."),
    fmt: str = FormatOption,
) -> None:
    """Write per site and role the engine launch command and the router rule (threshold t, and the
    degraded-link threshold when the plan has one) for SGLang, vLLM, Dynamo, llm-d or Kubernetes."""
    from ..planning.export import answer_export

    check_format(fmt)
    a = answer_export(plan, to, out, engine, kv_backend, model_path)
    emit(Report([Section("files", f"Wrote {a.target} launch files to {a.out_dir}", a.rows,
                         [Column("file", "file"), Column("kind", "kind")])], list(a.notes),
                meta={"target": a.target, "output": a.out_dir}), fmt)
