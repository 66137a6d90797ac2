"""``prfaas-plan schema KIND``: the JSON Schema of an input file format (``docs/layouts.md``)."""

from __future__ import annotations

import typer

from .app import app
from .envelope import emit_or_text
from .options import FormatOpt


@app.command("schema")
def schema_cmd(kind: str = typer.Argument(..., metavar="KIND", help="File kind: layout, stack."),
               fmt: FormatOpt = "table") -> None:
    """Print the JSON Schema of an input file kind, generated from the definition the parser uses
    (table: the schema document itself; json: the envelope with the schema as the one row of ``schema``;
    csv: one row per top-level key)."""
    import json

    from ..output.report import Report, Section
    from ..planning.schemas import json_schema

    schema = json_schema(kind)
    required = set(schema.get("required", []))
    keys = [{"key": k, "required": k in required, "type": v.get("type", "") if isinstance(v, dict) else "",
             "description": v.get("description", "") if isinstance(v, dict) else ""}
            for k, v in schema.get("properties", {}).items()]
    sections = [Section("schema", schema.get("title", kind), [schema])] if str(fmt) == "json" else \
        [Section("keys", schema.get("title", kind), keys)]
    emit_or_text(Report(sections, meta={"kind": kind}), fmt, json.dumps(schema, indent=2) + "\n")
