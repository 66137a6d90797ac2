"""Sweep throughput: points per second per core in-process, and the speed-up from 1 to 2 workers.

Run: python3 benchmarks/bench_sweep.py [--repeat 3]

Two specs: ``links`` (1,000 points: 5 remote sizes x 10 links x 4 round trips x 5 link prices on
kimi-linear / 64xH20, the architect's usual question, where points share per-instance performance) and
``shapes`` (200 points: 5 remote sizes x 4 local sizes x 10 TPOT SLOs, so almost every point needs its
own decode capacity). Each run starts with the sweep's caches empty (imports and profile loading are
not counted: a sweep pays them once). The machine may be shared with other jobs: the figures are the
best of ``--repeat`` runs, and points per CPU second (what one core delivers when the job has it)
are given beside points per wall second.
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
    "links": {"base": {"model": "kimi-linear", "local": "64xH20"},
              "grid": {"remote": ["8xH200", "16xH200", "32xH200", "48xH200", "64xH200"],
                       "link": ["5G", "10G", "20G", "25G", "40G", "50G", "100G", "200G", "400G", "800G"],
                       "rtt": ["0ms", "2ms", "10ms", "40ms"], "link_price": [0, 5, 10, 20, 40]}},
    "shapes": {"base": {"model": "kimi-linear", "link": "100G"},
               "grid": {"remote": ["8xH200", "16xH200", "32xH200", "48xH200", "64xH200"],
                        "local": ["32xH20", "48xH20", "64xH20", "96xH20"],
                        "tpot": ["15ms", "20ms", "25ms", "30ms", "35ms", "40ms", "50ms", "60ms", "80ms", "100ms"]}},
}


def timed_run(spec, workers: int) -> tuple[float, float, int]:
    """(wall s, CPU s of this process and its finished children, points) of one sweep from empty caches."""
    S.clear_caches()
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), _cpu()
        res = run_sweep(spec, Path(tmp) / "r.parquet", workers=workers)
        return time.perf_counter() - t0, _cpu() - c0, len(res.rows)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared: best of {opts.repeat})")
    print(f"{'spec':8s} {'points':>6s} {'workers':>7s} {'wall s':>8s} {'CPU s':>8s} {'points/s':>9s} "
          f"{'points/CPU-s':>12s}")
    for name, doc in SPECS.items():
        spec = S.parse_spec(doc)
        run_sweep(S.parse_spec({"base": doc["base"]}), Path(tempfile.mkdtemp()) / "warm.csv")  # imports, profiles
        walls = {}
        for workers in (1, 2):
            runs = [timed_run(spec, workers) for _ in range(opts.repeat)]
            wall, cpu, n = min(runs)
            walls[workers] = wall
            print(f"{name:8s} {n:6d} {workers:7d} {wall:8.2f} {cpu:8.2f} {n / wall:9.1f} {n / cpu:12.1f}")
        print(f"{name:8s} speed-up 1 -> 2 workers: {walls[1] / walls[2]:.2f}x")


if __name__ == "__main__":
    main()
