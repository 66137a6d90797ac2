"""Commands that list and show profiles: ``models``, ``hardware``, ``show``."""

from __future__ import annotations

import typer

from ..output.profile_report import hardware_report, models_report, show_report
from ..output.report import check_format
from ..planning.profiles import answer_hardware, answer_models, answer_show
from .app import FormatOption, app
from .envelope import emit


@app.command("models")
def models_cmd(fmt: str = FormatOption) -> None:
    """List the model profiles: attention mix, KV bytes per token, fixed state, parameters."""
    check_format(fmt)
    emit(models_report(answer_models()), fmt)


@app.command("hardware")
def hardware_cmd(fmt: str = FormatOption) -> None:
    """List the chip profiles: peak FLOPS, HBM, scale-up, NIC, power, price indication."""
    check_format(fmt)
    emit(hardware_report(answer_hardware()), fmt)


@app.command("show")
def show_cmd(model: str = typer.Argument(..., help="Model name or alias."),
             fmt: str = FormatOption) -> None:
    """Per-layer-kind breakdown of one model: layers, cache per token, state, parameters."""
    check_format(fmt)
    emit(show_report(answer_show(model)), fmt)
