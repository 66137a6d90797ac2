"""The input file formats as JSON Schema documents (``prfaas-plan schema KIND``), each generated from the
pydantic definition its parser validates with, so the published schema and the parser cannot drift
(``tests/test_layout_schema.py``). Rules a JSON Schema cannot state (unique site names) are in each
document's ``description`` and in ``docs/layouts.md``."""

from __future__ import annotations

from ..errors import PlanError, closest_names


def _layout() -> dict:
    from ..layout import layout_json_schema

    return layout_json_schema()


def _stack() -> dict:
    from ..profiles.stack import stack_json_schema

    return stack_json_schema()


SCHEMAS = {"layout": _layout, "stack": _stack}


def json_schema(kind: str) -> dict:
    """The JSON Schema of input files of ``kind`` (``layout``, ``stack``)."""
    if kind not in SCHEMAS:
        raise PlanError(f"schema {kind!r}: unknown file kind; {closest_names(kind, SCHEMAS)}")
    return SCHEMAS[kind]()
