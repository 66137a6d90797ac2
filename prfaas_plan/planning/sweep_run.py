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
import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputError, PlanError
from ..output.rowfile import Journal, read_table, table_format, write_table
from .sweep import (
    ROW_COLUMNS,
    Point,
    SweepSpec,
    evaluate_chunk,
    pareto_mask,
    points,
    prefill_group,
    search_group,
    search_spec,
    search_space,
    shared_inputs,
    sharing_order,
)

# The columns a row's check covers: everything but its position and the Pareto flags (which depend on
# the whole set) and the check itself.
CHECKED = [k for k, _ in ROW_COLUMNS if k not in ("point_index", "row_check")]

CHUNK_SIZE = 50


@dataclass
class SweepResult:
    """The rows written (spec order) and how many points were evaluated now or reused."""

    rows: list[dict]
    columns: list[tuple[str, str]]
    evaluated: int
    reused: int
    dropped: int  # rows of the earlier output whose points are not in this spec
    recomputed: int = 0  # earlier rows of this spec's points whose fingerprint differed (profiles, version)


def batches(pts: list[Point], chunk_size: int) -> list[list[Point]]:
    if chunk_size < 1:
        raise PlanError(f"`chunk_size` {chunk_size}: expected at least 1")
    return [pts[i:i + chunk_size] for i in range(0, len(pts), chunk_size)]


TASKS_PER_WORKER = 4


def balanced(chunks: list[list[Point]], workers: int) -> list[list[Point]]:
    """The points of ``chunks`` in their order, in batches about as large as theirs but no larger than a
    share of `TASKS_PER_WORKER` tasks for each of ``workers`` (with fewer tasks the last ones leave a
    worker idle: 180 points in batches of 50 keep one of 2 workers busy for 100 of them, the other for
    80). A batch ends where the points' `sweep.search_group` changes when one does within twice that
    size, so two workers rarely repeat a search. Rows do not depend on it."""
    pts = [p for c in chunks for p in c]
    if not pts:
        return []
    size = max(len(c) for c in chunks)
    size = max(1, min(size, -(-len(pts) // (TASKS_PER_WORKER * max(workers, 1)))))
    groups = [search_group(p.values) for p in pts]
    out, start = [], 0
    while start < len(pts):
        end = min(start + size, len(pts))
        while end < min(start + 2 * size, len(pts)) and groups[end] == groups[end - 1]:
            end += 1
        if end < len(pts) and groups[end] == groups[end - 1]:
            end = min(start + size, len(pts))   # one group fills the whole window: cut at the size
        out.append(pts[start:end])
        start = end
    return out


def parallel_tasks(chunks: list[list[Point]], workers: int) -> list[list[Point]]:
    """The tasks ``workers`` parallel workers run: the points of ``chunks`` in `sweep.sharing_order`, in
    batches as large as ``chunks``'s, `balanced`."""
    pts = [p for c in chunks for p in c]
    if not pts:
        return []
    return balanced(batches(sharing_order(pts), max(len(c) for c in chunks)), workers)


def _serial(chunks, token: str | None = None) -> Iterator[list[dict]]:
    for chunk in chunks:
        yield evaluate_chunk(chunk, token)


def warm_points(chunks: list[list[Point]]) -> tuple[list[Point], list[list[Point]]]:
    """(points the parent plans before it forks its workers, the batches left for them): the first
    point of every group of points that spans two or more batches, grouped by what their caches share:
    the scenario and performance inputs (`sweep.shared_inputs`), and `sweep.prefill_group` (the grid's
    prefill tables, shared across sites, TPOTs and pool sizes). Planning it fills the caches its group
    reuses (scenario, per-instance performance, the grid's latency tables, the link-free plans), and
    forked workers inherit them instead of each building them again; a group inside one batch is left to
    the worker that gets it.

    Only unsearched points (``inputs: paper``) are warmed: a searched point costs its configuration search,
    which the parent would run alone while the workers wait, and what searches share across groups (the
    per-instance models, `performance.sharing`) costs each worker as much as it would cost the parent
    before them, so the critical path is shorter when the workers build it themselves."""
    first: dict[tuple, Point] = {}
    home: dict[tuple, int] = {}
    spans: set[tuple] = set()
    for i, chunk in enumerate(chunks):
        for p in chunk:
            if search_spec(p.values) is not None:
                continue
            for key in (("shared",) + shared_inputs(p.values), ("prefill",) + prefill_group(p.values)):
                if key not in home:
                    home[key], first[key] = i, p
                elif home[key] != i:
                    spans.add(key)
    warm = list({p.index: p for k, p in first.items() if k in spans}.values())
    taken = {p.index for p in warm}
    rest = [[p for p in c if p.index not in taken] for c in chunks]
    return sorted(warm, key=lambda p: p.index), [c for c in rest if c]


def _die_with_parent(parent: int) -> None:
    """Worker initializer: on Linux ask the kernel to SIGKILL this worker when its parent dies
    (``PR_SET_PDEATHSIG``), so kill -9 of a sweep leaves no orphans; if the parent is already gone, exit."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass   # not Linux: the pool's own shutdown still ends the workers on every ordinary exit
    if os.getppid() != parent:
        os._exit(1)


def _processes(chunks, workers: int, token: str | None = None) -> Iterator[list[dict]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "fork":
        warm, chunks = warm_points(chunks)
        if warm:
            yield evaluate_chunk(warm, token)
    chunks = parallel_tasks(chunks, workers)
    import gc

    gc.freeze()   # forked workers' collections then leave the inherited objects (and their pages) alone
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method),
                                 initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
            futures = [pool.submit(evaluate_chunk, c, token) for c in chunks]
            try:
                for fut in as_completed(futures):
                    yield fut.result()
            finally:
                for fut in futures:
                    fut.cancel()
    finally:
        gc.unfreeze()


def local_cluster(workers: int):
    """A `distributed.LocalCluster` of ``workers`` single-threaded worker processes that allocate memory as
    this process does. Dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc
    hand freed memory back after every large array: the planner's grid searches then spend a third more CPU
    in page faults (measured on links180: the workers' task CPU 1.43x the serial run's, 1.07x without it),
    so the variable is left out here (an existing cluster keeps its own settings)."""
    import logging

    import dask
    from distributed import LocalCluster

    environ = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ") or {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.ERROR)


def _dask(chunks, address: str | None, workers: int, client=None, token: str | None = None) -> Iterator[list[dict]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise PlanError("`dask` needs dask.distributed: pip install 'prfaas-plan[dask]'") from None
    cluster = None
    own_client = client is None
    if client is None:
        if address == "local":
            cluster = local_cluster(max(workers, 1))
            client = Client(cluster)
        else:
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise PlanError(f"`dask` {address}: cannot reach the scheduler ({exc})") from None
    try:
        # every worker plans the first point of each group spanning batches (in parallel: the wall time
        # of one), as forked workers inherit them: each then has the group's caches before its batches
        warm, chunks = warm_points(chunks)
        if warm:
            yield next(iter(client.run(evaluate_chunk, warm, token).values()))
        chunks = parallel_tasks(chunks, len(client.scheduler_info().get("workers", {})) or workers)
        futures = client.map(evaluate_chunk, chunks, token=token, pure=False)
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()


def backend_results(chunks, workers: int = 1, dask: str | None = None, client=None,
                    token: str | None = None) -> Iterator[list[dict]]:
    """Rows of each batch as batches finish (any order); ``token`` as in `sweep.evaluate_chunk`."""
    if workers < 1:
        raise PlanError(f"`workers` {workers}: expected at least 1")
    if dask is not None or client is not None:
        return _dask(chunks, dask, workers, client, token)
    if workers > 1 and len(chunks) > 1:
        return _processes(chunks, workers, token)
    return _serial(chunks, token)


def journal_path(output: Path) -> Path:
    return output.parent / f".{output.name}.journal"


def lock_path(output: Path) -> Path:
    return output.parent / f".{output.name}.lock"


@contextmanager
def output_lock(output: Path):
    """An exclusive lock on ``output`` for one sweep (``flock`` on a lock file beside it): a second sweep
    writing the same file refuses at once with one line instead of overwriting the first one's rows."""
    import fcntl

    path = lock_path(output)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise PlanError(f"{output}: another sweep (pid {holder or '?'}) is writing this file; wait for it or "
                            "choose another output") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)   # the holder removed the file after we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)


def _file_digest(path: str, cache: dict) -> str:
    if path not in cache:
        try:
            cache[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            cache[path] = "unreadable"
    return cache[path]


def fingerprints(pts: list[Point], digests: dict[str, str] | None = None) -> dict[str, str]:
    """Each point's fingerprint: 16 hex digits of SHA-256 over everything its row depends on -- the point's
    inputs (its key), the bytes of the model, chip and stack profile files they resolve to, the bytes of a
    trace file it names, the tool's version and, for a searched point, its search space
    (`sweep.search_space`: the role candidates its pools and pins give). A resumed sweep reuses a row only
    under the same fingerprint, so an edited profile, a new version or another search space recomputes it
    (issue 23). ``digests`` (file -> digest), when given, collects the files read."""
    from .. import __version__
    from ..profiles import get_hardware, get_model, get_stack
    from ..units import parse_chip_count

    digests = {} if digests is None else digests
    by_names: dict[tuple, list[str]] = {}   # points share their profiles: resolve each combination once
    spaces: dict[tuple, str] = {}

    def space_part(v: dict) -> list[str]:
        names = tuple(v[k] for k in ("model", "remote", "local", "instance_chips", "transfer_bytes", "inputs"))
        if names not in spaces:
            space = search_space(v)
            spaces[names] = "" if space is None else hashlib.sha256(repr(space).encode()).hexdigest()[:16]
        return [spaces[names]] if spaces[names] else []

    def file_parts(v: dict) -> list[str]:
        names = tuple(str(v[k]) for k in ("model", "stack", "remote", "local", "workload"))
        if names not in by_names:
            files = [get_model(v["model"]).path, get_stack(v["stack"]).path]
            files += [get_hardware(parse_chip_count(v[k], k).chip).path for k in ("remote", "local")]
            parts = [_file_digest(f, digests) for f in files if f]
            if Path(str(v["workload"])).is_file():
                parts.append(_file_digest(str(v["workload"]), digests))
            by_names[names] = parts
        return by_names[names]

    out = {}
    for p in pts:
        v = p.values
        parts = [p.key, __version__] + file_parts(v)
        if v.get("layout"):  # the layout file and the chip profiles its sites name
            from .sweep_layout import point_layout

            parts.append(_file_digest(str(v["layout"]), digests))
            parts += [_file_digest(get_hardware(c).path, digests) for c in sorted(point_layout(v).chips())
                      if get_hardware(c).path]
        else:
            parts += space_part(v)
        out[p.key] = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    return out


def cache_token(digests: dict[str, str]) -> str:
    """What a sweep's cached inputs are resolved from: the tool version and the bytes of every profile and
    trace file its points read (``digests`` from `fingerprints`). Workers that planned under another token
    empty their caches (`sweep.evaluate_chunk`)."""
    from .. import __version__

    text = json.dumps([__version__, sorted(digests.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row_check(row: dict) -> str:
    """16 hex digits of SHA-256 over a row's values (not its position or Pareto flags): a row edited or
    damaged after it was written no longer matches it. It detects damage and hand edits, not a forger who
    recomputes it."""
    text = json.dumps([row.get(k) for k in CHECKED], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _refuse(output: Path, where: str, why: str):
    raise PlanError(f"{where}: {why}; the results cannot be trusted to resume from: move {output} away (and its "
                    f"journal {journal_path(output).name}) or choose another output")


def _checked(rows: list[dict], output: Path, where: str, line0: int) -> list[dict]:
    for i, r in enumerate(rows):
        if r.get("point_key") is None or r.get("row_check") != _row_check(r):
            _refuse(output, f"{where} row {i + line0}", "does not match its row_check (cut short, edited or "
                                                        "not written by a sweep)")
    return rows


def _earlier_rows(output: Path) -> list[dict]:
    rows = []
    if output.exists():
        try:
            rows = read_table(output, ROW_COLUMNS, strict=True)
        except PlanError as exc:
            raise PlanError(f"cannot resume from {exc}; move it away or choose another `output`") from None
        if rows and "point_key" not in rows[0]:
            raise PlanError(f"{output}: not a sweep output (no point_key column); choose another `output`")
        if rows and "row_check" not in rows[0]:
            raise PlanError(f"{output}: written by an older prfaas-plan (no row_check column); move it away or "
                            "choose another `output`")
        _checked(rows, output, str(output), 2 if table_format(output) == "csv" else 1)
    journal = Journal(journal_path(output))
    return rows + _checked(journal.read(), output, str(journal.path), 1)


def run_sweep(spec: SweepSpec, output: str | Path, *, workers: int = 1, dask: str | None = None, client=None,
              chunk_size: int = CHUNK_SIZE, pareto: list[str] | None = None,
              on_start: Callable[[int, int], None] | None = None,
              on_rows: Callable[[int], None] | None = None, max_points: int | None = None,
              allow_oversubscribe: bool = False) -> SweepResult:
    """Evaluate every point of ``spec`` not already in ``output`` and write all rows to ``output``.

    ``on_start(total, already_done)`` and ``on_rows(n)`` report progress; ``pareto`` adds a ``pareto``
    column (`sweep.pareto_mask`) and ``pareto_metrics`` naming the metrics.
    """
    output = Path(output)
    table_format(output)
    if not output.parent.is_dir():
        raise OutputError(f"{output}: folder {str(output.parent)!r} does not exist")
    check_size(spec, max_points)
    pts = points(spec)  # validates every point before anything runs
    with output_lock(output):
        check_workers(workers, allow_oversubscribe, dask is not None or client is not None)
        return _run_locked(spec, pts, output, workers, dask, client, chunk_size, pareto, on_start, on_rows)


def _run_locked(spec, pts, output, workers, dask, client, chunk_size, pareto, on_start, on_rows) -> SweepResult:
    digests: dict[str, str] = {}
    fps = fingerprints(pts, digests)
    token = cache_token(digests)
    done = {}
    earlier = _earlier_rows(output)
    stale = set()
    for r in earlier:
        key = r.get("point_key")
        if key in fps:
            if r.get("fingerprint") == fps[key]:
                done[key] = {k: r.get(k) for k, _ in ROW_COLUMNS}
            else:
                stale.add(key)
    stale -= set(done)
    dropped = len({r.get("point_key") for r in earlier} - set(fps))
    pending = [p for p in pts if p.key not in done]
    if on_start:
        on_start(len(pts), len(pts) - len(pending))
    journal = Journal(journal_path(output))
    columns = list(ROW_COLUMNS)
    meta = {"description": spec.description, "axes": ",".join(spec.axes), "points": str(len(pts))}
    try:
        with _sigterm_as_interrupt():
            for rows in backend_results(batches(pending, chunk_size), workers, dask, client, token):
                for r in rows:
                    r["fingerprint"] = fps[r["point_key"]]
                    r["row_check"] = _row_check(r)
                journal.append(rows)
                for r in rows:
                    done[r["point_key"]] = r
                if on_rows:
                    on_rows(len(rows))
    except BaseException as exc:
        if not isinstance(exc, OutputError) and done:
            # keep the finished rows in the output itself (marked incomplete), so the journal can go
            partial = [dict(done[p.key], point_index=p.index) for p in pts if p.key in done]
            try:
                write_table(output, partial, columns, {**meta, "complete": "false"})
            except PlanError:
                pass
        journal.remove()   # the journal goes on every exit path that runs code (kill -9 is the one that cannot)
        raise
    finally:
        journal.close()
    rows = []
    for p in pts:
        row = dict(done[p.key])
        row["point_index"] = p.index
        rows.append(row)
    if pareto:
        for row, on_front in zip(rows, pareto_mask(rows, pareto)):
            row["pareto"] = on_front
            row["pareto_metrics"] = ",".join(pareto)
        columns += [("pareto", "bool"), ("pareto_metrics", "str")]
    try:
        write_table(output, rows, columns, {**meta, "complete": "true"})
    finally:
        journal.remove()
    return SweepResult(rows, columns, len(pending), len(pts) - len(pending), dropped, len(stale))


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the sweep runs (main thread only), so a terminated sweep
    keeps its finished rows and removes its journal as Ctrl-C does."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_workers(workers: int, allow_oversubscribe: bool, remote: bool) -> None:
    """Local workers are at most 4 per usable core unless oversubscription is allowed (a Dask cluster
    brings its own cores)."""
    if workers < 1:
        raise PlanError(f"workers {workers}: expected at least 1")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not remote and workers > 4 * cores and not allow_oversubscribe:
        raise PlanError(f"workers {workers}: more than 4 per core ({cores} cores here, at most {4 * cores}); "
                        "allow oversubscription to run that many anyway")


DEFAULT_MAX_POINTS = 100_000
BYTES_PER_ROW = 1_500   # a row in memory and on disk, measured on the bundled example (order of magnitude)


def check_size(spec: SweepSpec, max_points: int | None) -> None:
    """Refuse a spec of more than ``max_points`` points (default `DEFAULT_MAX_POINTS`) before expanding it,
    with its size estimate; a larger cap runs it."""
    cap = DEFAULT_MAX_POINTS if max_points is None else max_points
    if cap < 1:
        raise PlanError(f"max points {cap}: expected at least 1")
    n = spec.size
    if n > cap:
        raise PlanError(f"the spec has {n:,} points (about {n * BYTES_PER_ROW / 2**30:.3g} GiB of rows), more than "
                        f"the cap of {cap:,}; raise the cap (max points) to run it anyway")
