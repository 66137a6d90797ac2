"""The typer application object and options shared by every command.

Command modules import `app` from here and register themselves with ``@app.command()``. They parse,
call the Python API and render a `Report`; they compute nothing themselves. Heavy libraries (scipy,
scipy, pandas, matplotlib) are imported inside the command bodies so that start-up stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer

from ..profiles import add_profile_dir

app = typer.Typer(
    name="prfaas-plan",
    help="Capacity planner for cross-datacenter prefill/decode LLM serving (Prefill-as-a-Service).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

model_app = typer.Typer(help="Model profile tools (import a Hugging Face config.json).",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(model_app, name="model")

FORMAT_HELP = "Output format: table, json or csv."
FormatOption = typer.Option("table", "--format", "-f", help=FORMAT_HELP)


@app.callback()
def _global(profiles: Optional[list[str]] = typer.Option(
        None, "--profiles", help="Extra folder of model/hardware YAML profiles (repeatable; also "
                                 "PRFAAS_PLAN_PROFILES).")) -> None:
    for folder in profiles or []:
        add_profile_dir(folder)
