"""``prfaas-plan report``: one self-contained HTML page from a result (docs/report.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import app
from .options import Output


@app.command("report")
def report_cmd(
    results: Annotated[str, typer.Argument(metavar="RESULTS", help="JSON of size/compare/reproduce (--format json) "
                                                                    "or a sweep's .parquet/.csv.")],
    output: Output,
) -> None:
    """An HTML report a reader understands without the CLI: question, answer, tables, plots, assumptions."""
    from ..output.html_pages import write_html_report
    from ..planning.sweep import SCHEMA

    write_html_report(results, output, SCHEMA)
    print(f"wrote {output}")
