"""Simulator speed: requests simulated per second of wall time on the Mooncake conversation trace.

Usage: ``python3 benchmarks/bench_simulator.py [--repeat N]``. The setup is the CLI's default for
``prfaas-plan simulate --trace ...``: the paper's PrfaaS-PD layout with prfaas-1t paper inputs, threshold and
split from the distribution-exact grid search on the trace's lengths, prefix caches on (2 TB per instance).
Each figure is the best of ``--repeat`` runs (the machine's other load only ever slows a run down).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from prfaas_plan.planning import case_study as paper
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.analytic.search import grid_search
from prfaas_plan.simulator import SimConfig, simulate
from prfaas_plan.simulator.inputs import read_trace
from prfaas_plan.simulator.scheduler import empirical_grid

TRACE = Path(__file__).resolve().parent.parent / "prfaas_plan" / "data" / "traces" / "mooncake_conversation_trace.jsonl"


def best_of(repeat: int, fn) -> float:
    """Shortest wall time of ``repeat`` calls, seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cpu_s = best_of(args.repeat, lambda: sum(range(10**7)))
    read_s = best_of(args.repeat, lambda: read_trace(TRACE))
    requests = read_trace(TRACE)
    n = len(requests)
    grid = empirical_grid(requests.input_tokens)
    perf = replace(paper.case_study_perf("paper"),
                   output_tokens=float(requests.output_tokens.mean()))
    ev = grid_search(prfaas_pd(paper.REMOTE, paper.LOCAL, Link(100e9)), grid, perf, "exact").best
    layout = ev.layout
    print(f"Mooncake conversation trace: {n} requests over {requests.arrival_s[-1]:.0f} s; "
          f"prfaas-pd t = {ev.threshold:,.0f} tokens, N_p = {ev.n_prefill}, N_d = {ev.n_decode}")
    print(f"machine speed: sum(range(10**7)) takes {cpu_s:.3f} s (about 0.1 s on a current desktop core)")
    print(f"{'case':48s} {'wall s':>8s} {'requests/s':>12s}")
    print(f"{'read trace (streaming JSONL)':48s} {read_s:8.3f} {n / read_s:12,.0f}")
    cases = [
        ("static, caches (pipeline engine; CLI default)", SimConfig(ev.threshold), None),
        ("static, no caches (pipeline engine)", SimConfig(ev.threshold, cache_bytes_per_instance=0), None),
        ("static, caches (general event engine)", SimConfig(ev.threshold), "events"),
        ("adaptive, caches (event engine, 5-min rebalance)", SimConfig(ev.threshold, "adaptive"), None),
    ]
    for label, cfg, engine in cases:
        s = best_of(args.repeat, lambda: simulate(requests, layout, perf, cfg, engine=engine))
        print(f"{label:48s} {s:8.3f} {n / s:12,.0f}")


if __name__ == "__main__":
    main()
