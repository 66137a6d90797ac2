"""Sweep throughput: points per second per core in-process, the speed-up from 1 to 2 workers, and Dask.

Run: python3 benchmarks/bench_sweep.py [--repeat 3] [--no-dask]

Three specs: ``links`` (1,000 points: 5 remote sizes x 10 links x 4 round trips x 5 link prices on
kimi-linear / 64xH20, the architect's usual question, where points share per-instance performance),
``shapes`` (200 points: 5 remote sizes x 4 local sizes x 10 TPOT SLOs, so almost every point needs its
own decode capacity) and ``links180`` (180 points: 3 remote sizes x 6 links x 2 round trips x 5 link
prices, the size at which Dask used to be slower than serial). Each run starts with the sweep's caches
empty (imports and profile loading are not counted: a sweep pays them once). ``dask`` rows run on a
local cluster of 2 single-threaded worker processes that is started (and warmed by one run) before the
timing: the target is Dask within 10% of ``--workers 2`` once the cluster is up (issue 21).

The machine may be shared with other jobs: the figures are the best of ``--repeat`` runs, points per
CPU second (what one core delivers when the job has it; workers' CPU included) are given beside
points per wall second, and the load average is printed before and after each spec. Because a
shared machine's wall clock says little about parallelism, each spec also gives the evaluation's
critical path in CPU seconds (`critical_path`) against
the serial run, i.e. the speed-up on 2 free cores. It counts the whole run by process: the parent's CPU
before the workers start (the spec, fingerprints, the warm batch), while they run (tasks out, rows in, the
journal; an in-process Dask scheduler) and after (the file), and the busiest worker's CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prfaas_plan.planning import sweep as S  # noqa: E402
from prfaas_plan.planning.sweep_run import run_sweep  # noqa: E402

SPECS = {
    "links180": {"base": {"model": "kimi-linear", "local": "64xH20"},
                 "grid": {"remote": ["16xH200", "32xH200", "64xH200"],
                          "link": ["10G", "25G", "40G", "100G", "200G", "400G"],
                          "rtt": ["0ms", "10ms"], "link_price": [0, 5, 10, 20, 40]}},
    "links": {"base": {"model": "kimi-linear", "local": "64xH20"},
              "grid": {"remote": ["8xH200", "16xH200", "32xH200", "48xH200", "64xH200"],
                       "link": ["5G", "10G", "20G", "25G", "40G", "50G", "100G", "200G", "400G", "800G"],
                       "rtt": ["0ms", "2ms", "10ms", "40ms"], "link_price": [0, 5, 10, 20, 40]}},
    "shapes": {"base": {"model": "kimi-linear", "link": "100G"},
               "grid": {"remote": ["8xH200", "16xH200", "32xH200", "48xH200", "64xH200"],
                        "local": ["32xH20", "48xH20", "64xH20", "96xH20"],
                        "tpot": ["15ms", "20ms", "25ms", "30ms", "35ms", "40ms", "50ms", "60ms", "80ms", "100ms"]}},
}


def cold_start() -> None:
    """Empty the sweep's caches and the shared length grids (`LengthGrid.from_distribution`)."""
    from prfaas_plan.analytic import throughput

    S.clear_caches()
    throughput._GRIDS.clear()


def timed_run(spec, workers: int, client=None) -> tuple[float, float, int]:
    """(wall s, CPU s, points) of one sweep from empty caches: CPU of this process and its finished
    children, plus the Dask workers' when ``client`` is given."""
    cold_start()
    if client is not None:
        client.run(cold_start)
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), _cpu(client)
        res = run_sweep(spec, Path(tmp) / "r.parquet", workers=workers, client=client)
        return time.perf_counter() - t0, _cpu(client) - c0, len(res.rows)


def _cpu(client=None) -> float:
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    if client is None:
        return own
    return own + sum(client.run(_worker_cpu).values())


def _worker_cpu() -> float:
    t = os.times()
    return t.user + t.system


_CPU_DIR: list = [None]   # where each forked worker leaves its CPU seconds (`_timed_chunk`)


def _timed_chunk(chunk, token=None):
    """`sweep.evaluate_chunk` that also leaves this worker's CPU seconds so far (a forked worker's clock
    starts at zero) in `_CPU_DIR`, one file per process."""
    rows = S.evaluate_chunk(chunk, token)
    (Path(_CPU_DIR[0]) / str(os.getpid())).write_text(repr(time.process_time()))
    return rows


def _dask_task(chunk, token=None):
    """`sweep.evaluate_chunk` on a Dask worker, adding the task's CPU seconds to the worker's tally
    (`_task_cpu`): a worker's process CPU also counts its heartbeats, which grow with the wall time of a
    loaded machine, not with the sweep."""
    c = time.process_time()
    rows = S.evaluate_chunk(chunk, token)
    tally = S.__dict__.setdefault("_bench_task_cpu", [0.0])
    tally[0] += time.process_time() - c
    return rows


def _task_cpu(reset: bool = False) -> float:
    tally = S.__dict__.setdefault("_bench_task_cpu", [0.0])
    out = tally[0]
    if reset:
        tally[0] = 0.0
    return out


def critical_path(spec, workers: int, client=None) -> tuple[float, float, float, float]:
    """CPU seconds of one whole `run_sweep` from empty caches, by process: (the parent's before its workers
    start -- expanding the spec, fingerprints, the warm batch --, the parent's while they run -- handing out
    tasks, receiving and journaling rows, the scheduler of an in-process Dask cluster --, the busiest worker's,
    the parent's after they finish -- the Pareto front and the file); a Dask worker's is the CPU of its tasks
(`_dask_task`), not of its heartbeats. On free cores the run takes
    ``before + max(while, busiest) + after``, whatever else a shared machine runs. Serial (``workers`` 1, no
    ``client``): everything is the parent's before."""
    from prfaas_plan.planning import sweep_run as R

    cold_start()
    if client is not None:
        client.run(cold_start)
    marks: dict[str, float] = {}
    original = (R.evaluate_chunk, R.balanced, R.backend_results)

    def balanced(chunks, n):   # called once the warm batch is done, right before the tasks go out
        marks.setdefault("start", time.process_time())
        return original[1](chunks, n)

    def backend_results(*args, **kwargs):
        yield from original[2](*args, **kwargs)
        marks["end"] = time.process_time()

    with tempfile.TemporaryDirectory() as tmp:
        _CPU_DIR[0] = tmp
        R.balanced, R.backend_results = balanced, backend_results
        R.evaluate_chunk = _timed_chunk if client is None else _dask_task
        if client is not None:
            client.run(_task_cpu, True)
        try:
            c0 = time.process_time()
            run_sweep(spec, Path(tmp) / "r.parquet", workers=workers, client=client)
            c1 = time.process_time()
        finally:
            R.evaluate_chunk, R.balanced, R.backend_results = original
        if client is not None:   # the warm batch (client.run) and the tasks, by worker
            busy = list(client.run(_task_cpu).values())
        else:
            busy = [float(f.read_text()) for f in Path(tmp).iterdir() if f.name.isdigit() and int(f.name) != os.getpid()]
    if not busy:
        return c1 - c0, 0.0, 0.0, 0.0
    start = marks.get("start", c0)
    return start - c0, marks["end"] - start, max(busy), c1 - marks["end"]


def _path(parts) -> float:
    before, during, busiest, after = parts
    return before + max(during, busiest) + after


def _line(name: str, n: int, backend: str, wall: float, cpu: float) -> None:
    print(f"{name:8s} {n:6d} {backend:>9s} {wall:8.2f} {cpu:8.2f} {n / wall:9.1f} {n / cpu:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-dask", action="store_true", help="leave out the Dask rows")
    opts = parser.parse_args()
    client = cluster = None
    if not opts.no_dask:
        from distributed import Client

        from prfaas_plan.planning.sweep_run import local_cluster

        cluster = local_cluster(2)   # as --dask local starts it
        client = Client(cluster)
    print(f"machine: {os.cpu_count()} cores (shared: best of {opts.repeat})")
    print(f"{'spec':8s} {'points':>6s} {'backend':>9s} {'wall s':>8s} {'CPU s':>8s} {'points/s':>9s} "
          f"{'points/CPU-s':>12s}")
    try:
        for name, doc in SPECS.items():
            print(f"{name:8s} load average {os.getloadavg()[0]:.1f}")
            spec = S.parse_spec(doc)
            run_sweep(S.parse_spec({"base": doc["base"]}), Path(tempfile.mkdtemp()) / "warm.csv")  # imports
            walls = {}
            for workers in (1, 2):
                runs = [timed_run(spec, workers) for _ in range(opts.repeat)]
                wall, cpu, n = min(runs)
                walls[workers] = wall
                _line(name, n, f"workers {workers}", wall, cpu)
            if client is not None:
                timed_run(spec, 1, client)   # the workers' imports and profiles: "once the cluster is up"
                wall, cpu, n = min(timed_run(spec, 1, client) for _ in range(opts.repeat))
                walls["dask"] = wall
                _line(name, n, "dask 2", wall, cpu)
            serial = min(_path(critical_path(spec, 1)) for _ in range(opts.repeat))
            paths = {"workers 2": min((critical_path(spec, 2) for _ in range(opts.repeat)), key=_path)}
            if client is not None:
                paths["dask 2"] = min((critical_path(spec, 1, client) for _ in range(opts.repeat)), key=_path)
            for backend, parts in paths.items():
                print(f"{name:8s} CPU critical path, {backend}: parent {parts[0]:.3f} s before + max(parent "
                      f"{parts[1]:.3f} s, busiest worker {parts[2]:.3f} s) + parent {parts[3]:.3f} s after = "
                      f"{_path(parts):.3f} s against serial {serial:.3f} s -> {serial / _path(parts):.2f}x on 2 "
                      "free cores")
            if "dask 2" in paths:
                print(f"{name:8s} CPU critical path dask 2 / workers 2: "
                      f"{_path(paths['dask 2']) / _path(paths['workers 2']):.2f}")
            line = f"{name:8s} speed-up 1 -> 2 workers: {walls[1] / walls[2]:.2f}x"
            if "dask" in walls:
                line += f"; dask 2 / workers 2 wall time: {walls['dask'] / walls[2]:.2f}"
            print(line)
            print(f"{name:8s} load average {os.getloadavg()[0]:.1f}")
    finally:
        if client is not None:
            client.close()
            cluster.close()


if __name__ == "__main__":
    main()
