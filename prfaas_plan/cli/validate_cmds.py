"""``prfaas-plan validate``: check the byte and FLOP formulas against the numpy reference implementation.

Exit code 0 when every check passes, 1 when any fails (2 for bad input, as every command).
"""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import PlanError
from ..output.report import Column, Report, Section, check_format
from ..profiles import all_models, get_model
from .app import FormatOption, app
from .envelope import emit


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "0" if v == 0 else f"{v:.2e}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


@app.command("validate")
def validate_cmd(
    model: Optional[list[str]] = typer.Option(None, "--model", "-m",
                                              help="Model name or alias (repeatable; default: every model)."),
    layers: str = typer.Option("pattern", "--layers",
                               help="Scaled layer count: 'pattern' (first layers until every attention kind "
                                    "occurs twice) or 'all'."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights and tokens."),
    fmt: str = FormatOption,
) -> None:
    """Run the numpy reference on a scaled-down copy of each model and compare its cache bytes, FLOPs
    and outputs with the planner's analytical model arithmetic."""
    from ..reference import checks  # numpy-heavy: imported only when the command runs

    check_format(fmt)
    if layers not in ("pattern", "all"):
        raise PlanError(f"--layers {layers!r}: expected 'pattern' or 'all'")
    if seed < 0:
        raise PlanError(f"--seed {seed}: expected a whole number >= 0")
    models = [get_model(m) for m in model] if model else [all_models()[n] for n in sorted(all_models())]
    results = [checks.validate_model(m, seed=seed, layers=layers) for m in models]

    summary = []
    for v in results:
        s = v.scaled
        failed = sum(r["result"] == "FAIL" for r in v.rows)
        summary.append({"model": v.model, "scaled_layers": s.num_layers, "scaled_hidden": s.hidden_size,
                        "scaled_attention": s.attention_summary,
                        "checks": sum(r["result"] != "info" for r in v.rows), "failed": failed,
                        "status": "ok" if failed == 0 else "FAIL"})
    cols = [Column("check", "check"), Column("case", "case"), Column("reference", "reference", _num),
            Column("analytical", "analytical", _num), Column("unit", "unit"),
            Column("tolerance", "tolerance", lambda t: t if isinstance(t, str) else _num(t)),
            Column("result", "result"), Column("detail", "detail")]
    sections = [Section(v.model, f"{v.model}: reference vs analytical (scaled: {v.scaled.num_layers} layers, "
                                 f"{v.scaled.attention_summary}, hidden {v.scaled.hidden_size})", v.rows, cols)
                for v in results]
    sections.append(Section("summary", "Validation summary", summary, [
        Column("model", "model"), Column("scaled_attention", "scaled attention"),
        Column("scaled_layers", "layers"), Column("scaled_hidden", "hidden"), Column("checks", "checks"),
        Column("failed", "failed"), Column("status", "status")]))
    notes = [
        "scaled models keep each profile's attention kinds, layer pattern, window, conv kernel and dtypes; "
        "dimensions are divided down (prfaas_plan.reference.model); the analytical functions are evaluated "
        "on the scaled profile",
        f"lengths in tokens; KV blocks of 16 tokens; float64 arithmetic; equivalence tolerance "
        f"{checks.TOL:g} relative (max |difference| / max |value|)",
        "bytes are measured on the stored arrays and the serialized payload (tensor data; framing excluded): "
        "bf16 is stored as real bfloat16 bit patterns (2 B), fp32 as 4 B, fp8 as e4m3 (1 B)",
        "FLOPs: 2 per multiply-add, 1 per decay multiply; element-wise work (softmax, norms, gates) is not "
        "counted, as in prfaas_plan.arithmetic; linear-attention cores match exactly in recurrent form, the "
        "chunked form within the stated bound",
        "SWA: the cache keeps the last min(l, window) tokens as engines do (decode needs window - 1)",
        "MLA prefill after a cached prefix decompresses the cached latents (naive form): reported, not in "
        "the analytical count",
    ]
    emit(Report(sections, notes, meta={"seed": seed, "layers": layers,
                                       "all_passed": all(v.ok for v in results)}), fmt)
    if not all(v.ok for v in results):
        raise typer.Exit(1)
