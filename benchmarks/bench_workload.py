"""Timings of the workload module: trace load, prefix-cache replay, expectations and grids.

Run: ``python3 benchmarks/bench_workload.py``. Prints the best of several runs per operation (ms), so
the numbers are the cost without warm-up noise; the first call of the log-normal family also pays the
one-time set-up (no scipy any more: the CDF uses the C library's erf), reported separately.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np


def best_ms(fn: Callable[[], object], repeat: int = 5, number: int = 1) -> float:
    """Best wall time of ``number`` calls over ``repeat`` runs, per call, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times) * 1e3


def main() -> None:
    start = time.perf_counter()
    from prfaas_plan.workload import (BUNDLED_TRACE, iter_trace, load_trace, paper_workload,
                                      replay_prefix_cache, resolve_workload)
    import_ms = (time.perf_counter() - start) * 1e3

    start = time.perf_counter()
    paper = paper_workload().input_length
    first_ms = (time.perf_counter() - start) * 1e3

    trace = load_trace(BUNDLED_TRACE)
    empirical = resolve_workload("trace").input_length
    prefill = lambda l: 0.02 + 2e-5 * l + 3e-10 * l * l  # noqa: E731  a convex T_prefill(l), seconds
    thresholds = np.linspace(1024, 65536, 256)

    rows = [
        ("import prfaas_plan.workload", import_ms),
        ("paper_workload() (first call)", first_ms),
        ("stream the bundled trace (iter_trace, 12,031 records)",
         best_ms(lambda: sum(1 for _ in iter_trace(BUNDLED_TRACE)), 3)),
        ("load_trace (bundled, to numpy arrays)", best_ms(lambda: load_trace(BUNDLED_TRACE), 3)),
        ("prefix replay, one unlimited cache", best_ms(lambda: replay_prefix_cache(trace), 3)),
        ("prefix replay, LRU 20,000 blocks", best_ms(lambda: replay_prefix_cache(trace, capacity_blocks=20_000), 3)),
        ("prefix replay, 8 per-route LRU caches of 20,000 blocks",
         best_ms(lambda: replay_prefix_cache(trace, capacity_blocks=20_000, route=lambda i: i % 8), 3)),
        ("resolve_workload('trace') (load + replay + empirical)", best_ms(lambda: resolve_workload("trace"), 3)),
        ("paper: expect(T_prefill, t) (128-node quadrature)", best_ms(lambda: paper.expect(prefill, 19_400),
                                                                      number=1000)),
        ("paper: conditional_mean over 256 thresholds", best_ms(lambda: paper.conditional_mean(thresholds),
                                                                number=200)),
        ("paper: grid(8192)", best_ms(lambda: paper.grid(8192), number=50)),
        ("trace (uncached): expect(T_prefill, t), exact sum", best_ms(lambda: empirical.expect(prefill, 19_400),
                                                                      number=1000)),
        ("trace (uncached): conditional_mean over 256 thresholds",
         best_ms(lambda: empirical.conditional_mean(thresholds), number=200)),
    ]
    cold = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                           "from prfaas_plan.cli import run; "
                           "run(['workload', 'describe', '-f', 'json']); "
                           "import sys; print(f'{(time.perf_counter() - t) * 1e3:.0f}', file=sys.stderr)"],
                          capture_output=True, text=True, check=True)
    rows.append(("cold 'workload describe' (paper), in-process after interpreter start",
                 float(cold.stderr.strip().splitlines()[-1])))

    width = max(len(name) for name, _ in rows)
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:10.3f} ms")


if __name__ == "__main__":
    main()
