"""Where compiled prefix caches pay (issue 22 item 6): the plain-Python pools against numba's, and the cold
wall time of replaying the bundled 12k trace.

1. The one-off cost of the compiled path in a fresh process: importing numba and loading the cached
   kernels (`prefix_kernels`, after one warm-up run has compiled them).
2. The planner's replay (`replay_prefix_cache`) of the bundled trace tiled to N requests (each copy's ids
   shifted, so copies share nothing), Python pools vs compiled ones (warm: import excluded).
3. Cold CLI: ``simulate --trace`` and ``size --workload trace`` of the bundled trace (median of fresh
   processes), with the load average, since the machine may be shared.

Run: python3 benchmarks/bench_prefix_python.py [--repeat 5] [--sizes 12000,50000,200000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"
LOAD_KERNELS = ("import time; t = time.perf_counter(); from prfaas_plan.workload import prefix_kernels as K; "
                "from prfaas_plan.workload.prefix_cache import block_cache; c = block_cache(); "
                "K.replay_chunk(c.rec, c.meta, c.sizes, *[__import__('numpy').zeros(k, 'int64') for k in (1, 2, 1)], "
                "0, False, __import__('numpy').zeros(1, 'int64')); print(time.perf_counter() - t)")


def tiled(trace, n: int):
    """``trace`` repeated (ids shifted per copy) and cut to ``n`` requests."""
    from prfaas_plan.workload.traces import Trace

    copies = -(-n // len(trace.input_length))
    span = int(trace.block_ids.max()) + 1
    per = np.diff(trace.block_offsets)
    ids = np.concatenate([trace.block_ids.astype(np.int64) + k * span for k in range(copies)])
    counts = np.tile(per, copies)[:n]
    offsets = np.concatenate([[0], np.cumsum(counts)])
    lengths = np.tile(trace.input_length, copies)[:n]
    return Trace("tiled", np.arange(n), lengths, np.tile(trace.output_length, copies)[:n],
                 np.arange(n, dtype=float), ids[: offsets[-1]], offsets)


def median_wall(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="12000,50000,200000")
    opts = parser.parse_args()
    from prfaas_plan.workload.prefix_cache import replay_prefix_cache
    from prfaas_plan.workload.traces import load_trace

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    subprocess.run([sys.executable, "-c", LOAD_KERNELS], cwd=ROOT, capture_output=True, check=True)  # compile
    loads = [float(subprocess.run([sys.executable, "-c", LOAD_KERNELS], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout) for _ in range(opts.repeat)]
    print(f"numba import + kernel load, fresh process: {statistics.median(loads):.3f} s (median)")
    trace = load_trace(ROOT / TRACE)
    replay_prefix_cache(tiled(trace, 100), compiled=True)  # load the kernels here, once
    print(f"{'requests':>9s} {'python s':>9s} {'compiled s':>11s}")
    for n in (int(x) for x in opts.sizes.split(",")):
        t = tiled(trace, n)
        row = []
        for compiled in (False, True):
            start = time.perf_counter()
            replay_prefix_cache(t, compiled=compiled)
            row.append(time.perf_counter() - start)
        print(f"{n:9d} {row[0]:9.3f} {row[1]:11.3f}", flush=True)
    cli = [sys.executable, "-c", "from prfaas_plan.cli import main; main()"]
    runs = (("simulate --trace 12k kimi-linear", ["simulate", "--trace", TRACE, "--model", "kimi-linear"]),
            ("simulate --trace 12k (default model)", ["simulate", "--trace", TRACE]),
            ("size --workload trace kimi-linear", ["size", "--workload", "trace", "--model", "kimi-linear"]))
    for name, args in runs:
        print(f"cold {name:38s} {median_wall(cli + args, opts.repeat):.3f} s (median of {opts.repeat})", flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
