"""Time the performance model: roofline prefill over 10^5 lengths, decode capacity, and a calibration fit.

Run from the repository root after ``pip install .`` (or with ``PYTHONPATH=.``):
``python3 benchmarks/bench_performance.py``. Prints the best of several
repeats (wall-clock, this process, warm imports) for each case.
"""

from __future__ import annotations

import time

import numpy as np

from prfaas_plan.performance import RooflinePrefill, decode_capacity, parse_instance, prefill_model
from prfaas_plan.performance.calibrate import fit_calibration
from prfaas_plan.performance.measurements import load_measurements, resolve_path
from prfaas_plan.profiles import get_hardware, get_model

N_LENGTHS = 100_000


def best_of(fn, repeats: int = 7) -> float:
    """Best wall-clock seconds of ``repeats`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    lengths = np.random.default_rng(0).integers(1, 131_073, N_LENGTHS).astype(float)
    print(f"roofline prefill latency_s over {N_LENGTHS:,} lengths (1..128K tokens):")
    for name, inst in (("prfaas-1t", "8xH20"), ("qwen3-235b", "8xH200"), ("mimo-v2-flash", "8xH200"),
                       ("kimi-k3", "8xB200")):
        pm = RooflinePrefill.build(get_model(name), parse_instance(inst))
        print(f"  {name:14s} {inst:7s} {best_of(lambda: pm.latency_s(lengths)) * 1e3:7.2f} ms")
    table = prefill_model("prfaas-1t", "8xH200")
    print(f"  measured table (prfaas-1t 8xH200)  {best_of(lambda: table.latency_s(lengths)) * 1e3:7.2f} ms")
    m, inst = get_model("qwen3-235b"), parse_instance("8xH20-3e")
    print(f"decode_capacity (qwen3-235b, 8xH20-3e, 25 ms, 28K context): "
          f"{best_of(lambda: decode_capacity(m, inst, 0.025, 28_000)) * 1e3:.2f} ms")
    data = load_measurements(resolve_path("paper_kv_throughput_8xh200.csv"))
    print(f"calibration fit + leave-one-out (h200, 12 points): "
          f"{best_of(lambda: fit_calibration(get_hardware('h200'), data, 'paper'), 3):.2f} s")


if __name__ == "__main__":
    main()
