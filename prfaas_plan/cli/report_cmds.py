"""``prfaas-plan report``: one self-contained HTML page from a result (docs/report.md)."""

from __future__ import annotations

import typer

from .app import app


@app.command("report")
def report_cmd(
    results: str = typer.Argument(..., metavar="RESULTS", help="JSON of size/compare/reproduce (--format json) or "
                                  "a sweep's .parquet/.csv."),
    output: str = typer.Option(..., "--output", "-o", help="The HTML file to write."),
) -> None:
    """An HTML report a reader understands without the CLI: question, answer, tables, plots, assumptions."""
    from ..output.html_pages import write_html_report
    from ..planning.sweep import SCHEMA

    write_html_report(results, output, SCHEMA)
    print(f"wrote {output}")
