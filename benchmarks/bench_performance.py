"""Time the performance model: roofline prefill latency and busy time over 10^5 lengths, decode capacity, the
serving model at a fixed concurrency (one point, and the closed-queue model over 10^5 points at once), the
``rates --concurrency`` answer over 10^5 lengths, and the joint calibration (small set with exact leave-one-out; the
bundled set in-sample, and with approximate leave-one-out and leave-one-model-out).

Run from the repository root after ``pip install .`` (or with ``PYTHONPATH=.``):
``python3 benchmarks/bench_performance.py``. On a shared machine set ``OPENBLAS_NUM_THREADS=1``: the fit's SVDs
are small (about 540 x 80) and oversubscribed BLAS threads make them ~50x slower (measured: one bundled solve
25.7 s at load 11 on 2 cores with default threads, 3.3 s with one). Prints the best of several
repeats (wall-clock, this process, warm imports) for each case.
"""

from __future__ import annotations

import time

import numpy as np

from prfaas_plan.performance import RooflinePrefill, decode_capacity, parse_instance, prefill_model
from prfaas_plan.performance.calibrate import fit_joint
from prfaas_plan.performance.closed_queue import closed_queue
from prfaas_plan.performance.measurements import BUNDLED_FILES, load_measurements
from prfaas_plan.performance.serving import serving_at_concurrency
from prfaas_plan.profiles import get_model

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
        print(f"  {name:14s} {inst:7s} {best_of(lambda: pm.latency_s(lengths)) * 1e3:7.2f} ms latency, "
              f"{best_of(lambda: pm.busy_s(lengths)) * 1e3:7.2f} ms busy")
    table = prefill_model("prfaas-1t", "8xH200")
    print(f"  measured table (prfaas-1t 8xH200)  {best_of(lambda: table.latency_s(lengths)) * 1e3:7.2f} ms")
    m, inst = get_model("qwen3-235b"), parse_instance("8xH20-3e")
    print(f"decode_capacity (qwen3-235b, 8xH20-3e, 25 ms, 28K context): "
          f"{best_of(lambda: decode_capacity(m, inst, 0.025, 28_000)) * 1e3:.2f} ms")
    m = get_model("deepseek-v3")
    print(f"serving_at_concurrency (deepseek-v3, 8xH200, 8K in, 1K out, C=64): "
          f"{best_of(lambda: serving_at_concurrency(m, '8xH200', 8192, 1024, 64)) * 1e3:.2f} ms")
    rng = np.random.default_rng(1)
    n = N_LENGTHS
    alone = rng.uniform(0.01, 1.0, n)
    args = dict(latency=rng.uniform(0.01, 0.1, n), alone=alone, full=alone * rng.uniform(1, 8, n),
                per_forward=rng.integers(1, 9, n).astype(float), busy=alone, forwards_per_prompt=np.ones(n),
                step=rng.uniform(0.005, 0.05, n), chunks=np.ones(n), concurrency=rng.integers(1, 513, n),
                osl=rng.integers(2, 8193, n), wave_fraction=rng.uniform(0, 1, n), request_overhead=np.zeros(n))
    print(f"closed_queue over {n:,} points (TTFT and TPOT at their concurrencies): "
          f"{best_of(lambda: closed_queue(**args)) * 1e3:.2f} ms")
    from prfaas_plan.planning.rates import answer_rates

    as_list = lengths.astype(int).tolist()
    for c in (None, 16):
        print(f"rates{f' --concurrency {c}' if c else ''} over {n:,} lengths (deepseek-v3, 8xH200, sglang): "
              f"{best_of(lambda: answer_rates('deepseek-v3', '8xH200', lengths=as_list, concurrency=c), 1):.2f} s")
    small, _ = load_measurements("mooncake_h20_qwen3_235b_pd.csv")
    print(f"joint fit + exact leave-one-out + leave-one-model-out (mooncake, {len(small)} points): "
          f"{best_of(lambda: fit_joint(small), 3):.2f} s")
    points, excluded = [], []
    for name in BUNDLED_FILES:
        got, dropped = load_measurements(name)
        points += got
        excluded += dropped
    print(f"joint fit in-sample (bundled, {len(points)} points): "
          f"{best_of(lambda: fit_joint(points, excluded, loo=False, lomo=False), 1):.2f} s")
    print(f"joint fit + approximate leave-one-out + leave-one-model-out (bundled): "
          f"{best_of(lambda: fit_joint(points, excluded), 1):.2f} s")
    print(f"  of which the per-version stack layer (performance/stack_versions.py): {_version_layer_s(points):.2f} s")


def _version_layer_s(points) -> float:
    """Seconds `fit_joint` spends in the per-version layer (timed by wrapping it for one fit)."""
    from prfaas_plan.performance import calibrate

    spent, inner = [], calibrate.fit_version_layer

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = inner(*args, **kwargs)
        spent.append(time.perf_counter() - start)
        return out

    calibrate.fit_version_layer = timed
    try:
        fit_joint(points)
    finally:
        calibrate.fit_version_layer = inner
    return spent[0]


if __name__ == "__main__":
    main()
