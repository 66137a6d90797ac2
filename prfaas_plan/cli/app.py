"""The typer application object and the global options.

Command modules import `app` from here and register themselves with ``@app.command()``. They parse,
call the Python API (`prfaas_plan.planning` and friends) and render a `Report` through
`prfaas_plan.cli.envelope.emit`; they compute nothing themselves. Options are declared once in
`prfaas_plan.cli.options`. Heavy libraries (scipy, matplotlib) are imported inside the command
bodies so that start-up stays fast.
"""

from __future__ import annotations

from typing import Optional

import typer

from .. import __version__
from ..profiles import add_profile_dir

app = typer.Typer(
    name="prfaas-plan",
    help="Capacity planner for cross-datacenter prefill/decode LLM serving (Prefill-as-a-Service).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    suggest_commands=False,   # click's NoSuchCommand suggests already; typer's would say it a second time
)

model_app = typer.Typer(help="Model profile tools (import a Hugging Face config.json).",
                        no_args_is_help=True, rich_markup_mode=None, suggest_commands=False)
app.add_typer(model_app, name="model")

def _version(value: bool) -> None:
    if value:
        print(f"prfaas-plan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global(
    profiles: Optional[list[str]] = typer.Option(
        None, "--profiles", help="Extra folder of model/hardware YAML profiles (repeatable; also "
                                 "PRFAAS_PLAN_PROFILES)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Tables only: leave the notes out (warnings stay)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    from .envelope import STATE

    STATE["quiet"] = quiet
    for folder in profiles or []:
        add_profile_dir(folder)
