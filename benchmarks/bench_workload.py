"""Timings of the workload module: trace load, prefix-cache replay, expectations and grids.

Run: ``python3 benchmarks/bench_workload.py [--sizes 100000,1000000] [--traces DIR]``. Prints the best of
several runs per operation (ms), so the numbers are the cost without warm-up noise; the first call of the
log-normal family also pays the one-time set-up (no scipy any more: the CDF uses the C library's erf),
reported separately.

Then the JSONL reader at scale: the bundled trace tiled to each size (benchmarks/tiled_trace.py), read by
``load_trace`` in a fresh interpreter (its peak resident memory is the read's), best of 3, per line and as a
multiple of ``sum(range(10**7))`` timed in the same process (``x loop``, comparable when other work shares
the cores); ``parser`` is the same read with the byte-level block reader switched off, so every block goes
through the JSON parser -- the reader as it was before it, in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

READ = """
import json, resource, sys, time
t0 = time.perf_counter(); sum(range(10**7)); loop_s = time.perf_counter() - t0
from prfaas_plan.workload import jsonl_block, load_trace
if sys.argv[2] == "parser":
    jsonl_block.BlockReader.read = lambda self, block: None
best = float("inf")
for _ in range(3):
    t0 = time.perf_counter(); n = len(load_trace(sys.argv[1])); best = min(best, time.perf_counter() - t0)
print(json.dumps({"n": n, "s": best, "loop_s": loop_s,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def trace_reader_at_scale(sizes: list[int], folder: Path) -> None:
    """Print the JSONL reader's cost per line and peak memory on tiled traces (see the module docstring)."""
    sys.path.insert(0, str(HERE))
    from tiled_trace import write_tiled

    print(f"\n{'lines':>9s} {'reader':7s} {'s':>6s} {'us/line':>8s} {'x loop':>7s} {'peak MB':>8s}")
    for n in sizes:
        trace = folder / f"tiled_{n}.jsonl"
        if not trace.exists():
            write_tiled(n, trace)
        for reader in ("blocks", "parser"):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            out = subprocess.run([sys.executable, "-c", READ, str(trace), reader], capture_output=True, text=True,
                                 check=True, env=env).stdout
            r = json.loads(out)
            print(f"{r['n']:9d} {reader:7s} {r['s']:6.2f} {r['s'] / r['n'] * 1e6:8.2f} {r['s'] / r['loop_s']:7.2f} "
                  f"{r['maxrss_mb']:8.0f}", flush=True)


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000", help="tiled trace sizes for the reader at scale (lines)")
    ap.add_argument("--traces", default=None, help="folder for the tiled traces (default: a temporary one)")
    opts = ap.parse_args()
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

    folder = Path(opts.traces or tempfile.mkdtemp(prefix="prfaas-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    trace_reader_at_scale([int(n) for n in opts.sizes.split(",")], folder)


if __name__ == "__main__":
    main()
