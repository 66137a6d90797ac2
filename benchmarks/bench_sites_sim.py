"""CPU time of the multi-site event loop (simulator/multisite.py) per scheduler: examples/three-sites.yaml with
examples/link-drop.csv on near's link, the default synthetic workload for --duration seconds (1,200: about 28k
requests), each scheduler replayed on the same plan and workload (the plan and the workload built once).

Run: python3 benchmarks/bench_sites_sim.py [--repeat 3] [--duration 1200]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=1200.0)
    args = parser.parse_args()

    import numpy as np

    from prfaas_plan.planning.simulate import answer_simulate
    from prfaas_plan.simulator import LongTermRule, SimConfig
    from prfaas_plan.simulator.inputs import paper_requests
    from prfaas_plan.simulator.multisite import MULTI_SCHEDULERS, SiteRun, simulate_sites
    from prfaas_plan.simulator.system import System
    from prfaas_plan.layout import Layout
    from prfaas_plan.simulator import read_link_profile

    a = answer_simulate(layout_file=str(ROOT / "examples" / "three-sites.yaml"), duration_s=60.0)
    lay, perf = a.layout, a.plan.perf
    total = sum(a.planned_rps)
    requests = paper_requests(0.8 * total, args.duration, 0)
    site_of = np.random.default_rng(0).choice(len(lay.pd_sites), size=len(requests),
                                              p=np.array(a.planned_rps) / total)
    drop = read_link_profile(ROOT / "examples" / "link-drop.csv")
    runs = [SiteRun(System.build(Layout(lay.name, (s,), lay.remote, lay.threshold), perf, t),
                    drop if s.name == "near" else None) for s, t in zip(lay.pd_sites, a.thresholds)]
    names = [s.name for s in lay.pd_sites]
    cfg = SimConfig(float("inf"), long_term=LongTermRule(period_s=300.0))
    print(f"{len(requests):,} requests over {args.duration:g} s, three sites")
    for name in MULTI_SCHEDULERS:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            simulate_sites(requests, site_of, runs, replace(cfg, scheduler=name), name, names)
            best = min(best, time.process_time() - start)
        print(f"{name:10s} {best:6.2f} s CPU (best of {args.repeat}), {len(requests) / best / 1e3:6.1f}k requests/s")


if __name__ == "__main__":
    main()
