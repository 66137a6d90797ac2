"""Commands that list and show profiles: ``models``, ``hardware``, ``show``."""

from __future__ import annotations

import typer

from ..output.profile_report import hardware_report, models_report, show_report
from ..planning.profiles import answer_hardware, answer_models, answer_show
from .app import app
from .envelope import emit
from .options import FormatOpt


@app.command("models")
def models_cmd(fmt: FormatOpt = "table") -> None:
    """List the model profiles: attention mix, KV bytes per token, fixed state, parameters."""
    emit(models_report(answer_models()), fmt)


@app.command("hardware")
def hardware_cmd(fmt: FormatOpt = "table") -> None:
    """List the chip profiles: peak FLOPS, HBM, scale-up, NIC, power, price indication."""
    emit(hardware_report(answer_hardware()), fmt)


@app.command("show")
def show_cmd(model: str = typer.Argument(..., help="Model name or alias."),
             fmt: FormatOpt = "table") -> None:
    """Per-layer-kind breakdown of one model: layers, cache per token, state, parameters."""
    emit(show_report(answer_show(model)), fmt)
