"""Wall time of the TTFT-SLO answers and of the gain's sensitivity on the default plan (kimi-linear,
32xH200 + 64xH20, 100G, paper workload, exact mode), warm (the plan and its rooflines already built):

- the rate within the SLO at the plan's threshold and split (`questions.rate_within_slo`, the bisection
  on load, each step one `analytic.latency.SloModel` CDF test);
- the SLO's own optimum over thresholds and splits (`planning.slo.slo_search`, branch and bound);
- `--sensitivity` (`planning.sensitivity.sensitivity_of`: the drivers, the 12 deployment combinations)
  and the error bars spread over them.

Run: python3 benchmarks/bench_slo.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from prfaas_plan.planning.confidence import mode_verdicts, plan_error_bars
    from prfaas_plan.planning.plans import basis_baseline, optimize
    from prfaas_plan.planning.questions import rate_within_slo
    from prfaas_plan.planning.question import scenario
    from prfaas_plan.planning.scenario import perf_inputs, prfaas_layout
    from prfaas_plan.planning.sensitivity import CHOICES, sensitivity_of
    from prfaas_plan.planning.slo import slo_search

    sc = scenario()
    plan = optimize(prfaas_layout(sc), sc, perf_inputs(sc))
    base = basis_baseline(sc, "capex")
    for q, target in ((95, 3.0), (95, 2.0), (0, 1.0)):
        fixed = rate_within_slo(plan, sc, q, target)
        own = _median_ms(lambda: rate_within_slo(plan, sc, q, target), args.repeat)
        searched = _median_ms(lambda: slo_search(plan, sc, fixed), args.repeat)
        print(f"p{q:g}<{target:g}s  plan's t and split: {own:7.1f} ms   re-optimized: {searched:7.1f} ms")
    point = mode_verdicts(sc, plan, base).gain[sc.mode]
    ranked = sensitivity_of(sc, plan, base, tuple(CHOICES), point)
    sens = _median_ms(lambda: sensitivity_of(sc, plan, base, tuple(CHOICES), point), args.repeat)
    plain = _median_ms(lambda: plan_error_bars(sc, plan, base), args.repeat)
    spread = _median_ms(lambda: plan_error_bars(sc, plan, base, variants=ranked.variants), args.repeat)
    print(f"sensitivity (12 combinations): {sens:7.1f} ms")
    print(f"error bars, 400 samples: plain {plain:7.1f} ms, spread over the combinations {spread:7.1f} ms")


if __name__ == "__main__":
    main()
