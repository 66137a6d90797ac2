"""Running a sweep: batches of points on a backend, resumption from earlier output, one final file.

Backends (`run_sweep` arguments): in-process (default); ``workers=N`` local processes
(`concurrent.futures`, forked where the platform allows so workers inherit the warm caches); ``dask=``
``"local"`` (a `distributed.LocalCluster` of ``workers`` processes) or a scheduler address such as
``tcp://HOST:8786``, or an existing ``client``. Points travel in batches of ``chunk_size`` so that
scheduling costs little next to planning. Every backend runs the same `sweep.evaluate_chunk`, so the
rows are identical whatever the backend.

Finished rows are journaled next to the output as they arrive; the output itself is written once, at
the end, in the spec's point order (`output.rowfile`). A re-run with the same output skips every point
whose key (hash of its inputs) is already in the output or the journal.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import PlanError
from ..output.rowfile import Journal, read_table, table_format, write_table
from .sweep import ROW_COLUMNS, Point, SweepSpec, evaluate_chunk, pareto_mask, points

CHUNK_SIZE = 50


@dataclass
class SweepResult:
    """The rows written (spec order) and how many points were evaluated now or reused."""

    rows: list[dict]
    columns: list[tuple[str, str]]
    evaluated: int
    reused: int
    dropped: int  # rows of the earlier output whose points are not in this spec


def batches(pts: list[Point], chunk_size: int) -> list[list[Point]]:
    if chunk_size < 1:
        raise PlanError(f"`chunk_size` {chunk_size}: expected at least 1")
    return [pts[i:i + chunk_size] for i in range(0, len(pts), chunk_size)]


def _serial(chunks) -> Iterator[list[dict]]:
    for chunk in chunks:
        yield evaluate_chunk(chunk)


def _processes(chunks, workers: int) -> Iterator[list[dict]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(evaluate_chunk, c) for c in chunks]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            for fut in futures:
                fut.cancel()


def _dask(chunks, address: str | None, workers: int, client=None) -> Iterator[list[dict]]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise PlanError("`dask` needs dask.distributed: pip install 'prfaas-plan[dask]'") from None
    cluster = None
    own_client = client is None
    if client is None:
        import logging

        if address == "local":
            cluster = LocalCluster(n_workers=max(workers, 1), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise PlanError(f"`dask` {address}: cannot reach the scheduler ({exc})") from None
    try:
        futures = client.map(evaluate_chunk, chunks, pure=False)
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()


def backend_results(chunks, workers: int = 1, dask: str | None = None, client=None) -> Iterator[list[dict]]:
    """Rows of each batch as batches finish (any order)."""
    if workers < 1:
        raise PlanError(f"`workers` {workers}: expected at least 1")
    if dask is not None or client is not None:
        return _dask(chunks, dask, workers, client)
    if workers > 1 and len(chunks) > 1:
        return _processes(chunks, workers)
    return _serial(chunks)


def journal_path(output: Path) -> Path:
    return output.parent / f".{output.name}.journal"


def _earlier_rows(output: Path) -> list[dict]:
    rows = []
    if output.exists():
        try:
            rows = read_table(output, ROW_COLUMNS)
        except PlanError as exc:
            raise PlanError(f"cannot resume from {exc}; move it away or choose another `output`") from None
        if rows and "point_key" not in rows[0]:
            raise PlanError(f"{output}: not a sweep output (no point_key column); choose another `output`")
    return rows + Journal(journal_path(output)).read()


def run_sweep(spec: SweepSpec, output: str | Path, *, workers: int = 1, dask: str | None = None, client=None,
              chunk_size: int = CHUNK_SIZE, pareto: list[str] | None = None,
              on_start: Callable[[int, int], None] | None = None,
              on_rows: Callable[[int], None] | None = None) -> SweepResult:
    """Evaluate every point of ``spec`` not already in ``output`` and write all rows to ``output``.

    ``on_start(total, already_done)`` and ``on_rows(n)`` report progress; ``pareto`` adds a ``pareto``
    column (`sweep.pareto_mask`) and ``pareto_metrics`` naming the metrics.
    """
    output = Path(output)
    table_format(output)
    if not output.parent.exists():
        raise PlanError(f"{output}: folder {str(output.parent)!r} does not exist")
    pts = points(spec)  # validates every point before anything runs
    wanted = {p.key for p in pts}
    done = {}
    earlier = _earlier_rows(output)
    for r in earlier:
        if r.get("point_key") in wanted:
            done[r["point_key"]] = {k: r.get(k) for k, _ in ROW_COLUMNS}
    dropped = len({r.get("point_key") for r in earlier} - wanted)
    pending = [p for p in pts if p.key not in done]
    if on_start:
        on_start(len(pts), len(pts) - len(pending))
    journal = Journal(journal_path(output))
    try:
        for rows in backend_results(batches(pending, chunk_size), workers, dask, client):
            journal.append(rows)
            for r in rows:
                done[r["point_key"]] = r
            if on_rows:
                on_rows(len(rows))
    finally:
        journal.close()
    rows = []
    for p in pts:
        row = dict(done[p.key])
        row["point_index"] = p.index
        rows.append(row)
    columns = list(ROW_COLUMNS)
    if pareto:
        for row, on_front in zip(rows, pareto_mask(rows, pareto)):
            row["pareto"] = on_front
            row["pareto_metrics"] = ",".join(pareto)
        columns += [("pareto", "bool"), ("pareto_metrics", "str")]
    write_table(output, rows, columns, {"description": spec.description, "axes": ",".join(spec.axes)})
    journal.remove()
    return SweepResult(rows, columns, len(pending), len(pts) - len(pending), dropped)
