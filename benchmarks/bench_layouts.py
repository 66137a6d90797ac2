"""Wall time of a multi-site layout's answer (planning/layouts.py): the linear program with its tie-break
toward threshold routing, the configuration search per role and site (planning/layout_search.py: the screen
and the finalists' programs), the per-site figures and pure-threshold search, and the error bars for a few
sample counts, on examples/three-sites.yaml (kimi-linear, 4x8xH200 remote, three 8x8xH20 sites).

Run: python3 benchmarks/bench_layouts.py [--repeat 5] [--layout FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layout", default=str(Path(__file__).parent.parent / "examples" / "three-sites.yaml"))
    args = parser.parse_args()

    from prfaas_plan.planning import Question
    from prfaas_plan.planning.layouts import layout_figures, plan_layout

    q = Question.from_layout(args.layout)
    lay, sc = q.layout, q.scenario
    plan_layout(lay, sc)  # warm the per-instance performance and cvxpy
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        res, perf, planned = plan_layout(lay, sc)
        times.append(time.perf_counter() - start)
    print(f"linear program + tie-break: {statistics.median(times) * 1e3:8.1f} ms (median of {args.repeat})")
    from prfaas_plan.planning.layout_search import search_layout

    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        found = search_layout(lay, sc)
        times.append(time.perf_counter() - start)
    print(f"configuration search:       {statistics.median(times) * 1e3:8.1f} ms (median of {args.repeat}; "
          f"{found.screened} choices screened, {found.relaxed} relaxations, {found.solved} integer programs)")
    for n in (0, 100, 400, 1000):
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            layout_figures(args.layout, planned, sc, res, perf, "capex", n, 0)
            times.append(time.perf_counter() - start)
        print(f"figures, {n:4d} samples:   {statistics.median(times) * 1e3:8.1f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
