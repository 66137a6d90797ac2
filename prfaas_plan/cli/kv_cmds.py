"""``prfaas-plan kv``: what a request's cache weighs, by part, per length."""

from __future__ import annotations

from ..units import parse_lengths
from .app import app
from .envelope import emit
from .options import FormatOpt, Lengths, Models, Tp


@app.command("kv")
def kv_cmd(
    model: Models,
    length: Lengths = ["1k", "8k", "32k", "128k"],
    tp: Tp = 1,
    fmt: FormatOpt = "table",
) -> None:
    """S_kv(l) and its parts per length, against a dense model of the same depth."""
    from ..output.profile_report import kv_report
    from ..planning.kv import kv_breakdown

    emit(kv_report(kv_breakdown(model, parse_lengths(length, "--len"), tp), tp), fmt)
