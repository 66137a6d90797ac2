"""``prfaas-plan report``: one self-contained HTML page from a result (docs/report.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import app
from .envelope import emit_or_text
from .options import FormatOpt, Output


@app.command("report")
def report_cmd(
    results: Annotated[str, typer.Argument(metavar="RESULTS", help="JSON of size/compare/reproduce (--format json) "
                                                                    "or a sweep's .parquet/.csv.")],
    output: Output,
    fmt: FormatOpt = "table",
) -> None:
    """An HTML report a reader understands without the CLI: question, answer, tables, plots, assumptions."""
    from ..output.html_pages import write_html_report
    from ..planning.sweep import SCHEMA

    from ..output.report import Report, Section

    basis = write_html_report(results, output, SCHEMA)
    emit_or_text(Report([Section("files", "Files written", [{"file": output, "kind": "html"}])],
                        meta={"basis": basis}), fmt, f"wrote {output}\n")
