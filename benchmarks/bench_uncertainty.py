"""Wall time of the error bars (analytic/uncertainty.py) for a few sample counts, on the default plan
(kimi-linear, 32xH200 + 64xH20, 100G, paper workload, exact mode).

Run: python3 benchmarks/bench_uncertainty.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from prfaas_plan.layout import Link
    from prfaas_plan.planning.confidence import plan_error_bars
    from prfaas_plan.planning.plans import compare, scenario_for
    from prfaas_plan.profiles import get_model
    from prfaas_plan.workload import paper_workload

    sc = scenario_for(get_model("kimi-linear"), "32xH200", "64xH20", Link(100e9), 8, 0.025, "exact", "predicted",
                      paper_workload())
    plans = compare(sc)
    for n in (100, 400, 1000):
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            plan_error_bars(sc, plans["prfaas-pd"], plans["homogeneous-pd"].layout, samples=n)
            times.append(time.perf_counter() - start)
        print(f"{n:5d} samples: {statistics.median(times) * 1e3:8.1f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
