"""``prfaas-plan validate``: check the byte and FLOP formulas against the numpy reference implementation.

Exit code 0 when every check passes, 1 when any fails (2 for bad input, as every command).
"""

from __future__ import annotations

import typer

from .app import app
from .envelope import emit
from .options import FormatOpt, OptModels, Seed


@app.command("validate")
def validate_cmd(
    model: OptModels = None,
    layers: str = typer.Option("pattern", "--layers",
                               help="Scaled layer count: 'pattern' (first layers until every attention kind "
                                    "occurs twice) or 'all'."),
    seed: Seed = 0,
    fmt: FormatOpt = "table",
) -> None:
    """Run the numpy reference on a scaled-down copy of each model and compare its cache bytes, FLOPs
    and outputs with the planner's analytical model arithmetic."""
    from ..output.profile_report import validate_report
    from ..planning.validate import answer_validate

    answer = answer_validate(model, layers, seed)
    emit(validate_report(answer), fmt)
    if not answer.all_passed:
        raise typer.Exit(1)
