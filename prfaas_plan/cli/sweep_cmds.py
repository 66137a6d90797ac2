"""``prfaas-plan sweep``: plan every point of a design-space spec (docs/sweep.md)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from ..units import plural
from .app import app
from .envelope import emit_or_text
from .options import AllowOversubscribe, BasisOpt, FormatOpt, MaxPoints, NoProgress, Output, Plot, Stack


@contextmanager
def _progress(quiet: bool):
    """(on_start, on_rows) callbacks driving a rich progress bar with an ETA on stderr; silent when
    ``quiet`` or stderr is not a terminal."""
    if quiet or not sys.stderr.isatty():
        yield None, None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("points"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), transient=True)
    task = None

    def on_start(total: int, done: int) -> None:
        nonlocal task
        task = bar.add_task("sweep", total=total, completed=done)

    def on_rows(n: int) -> None:
        bar.advance(task, n)

    with bar:
        yield on_start, on_rows


@app.command("sweep")
def sweep_cmd(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml", help="Sweep spec: base:, grid:, zip: (docs/sweep.md).")],
    output: Output,
    workers: int = typer.Option(1, "--workers", "-j", help="Local worker processes (with --dask local: Dask "
                                "workers)."),
    dask: Optional[str] = typer.Option(None, "--dask", help="Run on Dask: 'local' (a LocalCluster) or a "
                                       "scheduler address such as tcp://HOST:8786."),
    chunk_size: int = typer.Option(50, "--chunk-size", help="Points per task (about: smaller where that gives "
                                                                 "each worker at least 4 tasks)."),
    pareto: Optional[str] = typer.Option(None, "--pareto", help="Mark non-dominated rows on these metrics, "
                                         "e.g. cost_per_mtok_usd,ttft_unloaded_p90_s (directions: docs/sweep.md)."),
    plot: Plot = None,
    no_progress: NoProgress = False,
    max_points: MaxPoints = None,
    allow_oversubscribe: AllowOversubscribe = False,
    stack: Stack = None,
    basis: BasisOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Plan every point of a spec; one row per point (inputs, headline figures, or why it cannot be planned)."""
    from ..output.plots import figure_format
    from ..output.rowfile import table_format
    from ..output.sweep_plots import plot_sweep
    from ..planning.sweep import SCHEMA, load_spec, parse_metrics, stack_notes, with_basis, with_stack
    from ..planning.sweep_run import run_sweep

    table_format(output)
    metrics = parse_metrics(pareto) if pareto else None
    if plot:
        figure_format(plot)
    spec = with_basis(with_stack(load_spec(spec_path), stack), None if basis is None else str(basis))
    try:
        with _progress(no_progress) as (on_start, on_rows):
            res = run_sweep(spec, output, workers=workers, dask=dask, chunk_size=chunk_size, pareto=metrics,
                            on_start=on_start, on_rows=on_rows, max_points=max_points,
                            allow_oversubscribe=allow_oversubscribe)
    except KeyboardInterrupt:
        print(f"interrupted: the finished points are kept; run the same command again to resume into {output}",
              file=sys.stderr)
        raise typer.Exit(130) from None
    errors = sum(1 for r in res.rows if r["error"])
    line = (f"wrote {len(res.rows)} {plural(len(res.rows), 'row')} to {output}: {res.evaluated} evaluated, "
            f"{res.reused} reused from an earlier run, {errors} could not be planned (see the error column)")
    if res.recomputed:
        line += (f"; {res.recomputed} earlier rows were recomputed because their fingerprint changed (a profile "
                 "file or the tool version)")
    if res.dropped:
        line += f"; {res.dropped} earlier rows not in this spec were dropped"
    if metrics:
        line += f"; {sum(r['pareto'] for r in res.rows)} on the Pareto front of {', '.join(metrics)}"
    from ..output.report import Report, Section

    notes = stack_notes(spec)
    if plot:
        plot_sweep(res.rows, SCHEMA, metrics, plot, spec.description, spec.axes)
    text = "".join([f"{line}\n"] + [f"note: {n}\n" for n in notes] + ([f"wrote {plot}\n"] if plot else []))
    summary = {"output": output, "rows": len(res.rows), "evaluated": res.evaluated, "reused": res.reused,
               "errors": errors, "recomputed": res.recomputed, "dropped": res.dropped,
               "pareto_rows": sum(r["pareto"] for r in res.rows) if metrics else None, "plot": plot}
    emit_or_text(Report([Section("sweep", "Sweep", [summary])], notes), fmt, text)
