"""``prfaas-plan schema KIND``: the JSON Schema of an input file format (``docs/layouts.md``)."""

from __future__ import annotations

import typer

from .app import app


@app.command("schema")
def schema_cmd(kind: str = typer.Argument(..., metavar="KIND", help="File kind: layout.")) -> None:
    """Print the JSON Schema of an input file kind, generated from the definition the parser uses."""
    import json
    import sys

    from ..planning.schemas import json_schema

    sys.stdout.write(json.dumps(json_schema(kind), indent=2) + "\n")
