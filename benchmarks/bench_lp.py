"""Time multi-site sizing: N local PD sites of mixed chips sharing one remote prefill site.

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/bench_lp.py``. For N = 1, 2, 4, ..., 64 a
seeded layout is generated (site chips cycle through H20, H100, H200, B200 and MI300X; 4-16 instances
per site; links 5-200 Gbps); each row is one `planning.plans.size_layout` call (per-site performance,
length bins, relaxation, rounding and the integer program), wall-clock in this process with warm
imports, with the total rate, its proven upper bound and the optimality gap between them.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from prfaas_plan.layout import Layout, Link, PDSite, PrefillSite
from prfaas_plan.performance.base import parse_instance
from prfaas_plan.planning.plans import scenario_for, size_layout
from prfaas_plan.profiles import get_model
from prfaas_plan.workload import resolve_workload

CHIPS = ("H20", "H100", "H200", "B200", "MI300X")
SIZES = (1, 2, 4, 8, 16, 32, 64)


def generated_layout(n_sites: int, seed: int = 0) -> Layout:
    """A seeded layout of ``n_sites`` PD sites of mixed chips and one 8xH200 remote site sized with them."""
    rng = np.random.default_rng(seed)
    sites = []
    for i in range(n_sites):
        total = int(rng.integers(4, 17))
        gbps = float(np.round(10 ** rng.uniform(np.log10(5), np.log10(200)), 1))
        sites.append(PDSite(f"site{i}", parse_instance(f"8x{CHIPS[i % len(CHIPS)]}", "bench"), total // 2,
                            total - total // 2, Link(gbps * 1e9)))
    return Layout(f"bench-{n_sites}", tuple(sites), PrefillSite("remote", parse_instance("8xH200", "bench"),
                                                                 4 * n_sites), None)


def main(sizes=SIZES) -> None:
    sc = scenario_for(get_model("kimi-linear"), "8xH200", "8xH20", Link(1e9), 8, 0.025, "exact", "predicted",
                      resolve_workload("paper"))
    print(f"{'sites':>5} {'seconds':>8} {'req/s':>10} {'bound req/s':>12} {'gap':>8}  method")
    for n in sizes:
        lay = generated_layout(n)
        start = time.perf_counter()
        res, _ = size_layout(lay, sc)
        elapsed = time.perf_counter() - start
        print(f"{n:5d} {elapsed:8.2f} {res.lambda_rps:10.3f} {res.bound_rps:12.3f} {res.gap:8.3%}  {res.method}",
              flush=True)


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
