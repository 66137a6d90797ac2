"""Time the configuration search (issue 21): the search alone on the defaults (warm: profiles loaded), the
SLO's re-search of the configurations (``size --ttft p95<2.5s`` on the defaults: `planning.slo.slo_configurations`,
warm), and a cold ``prfaas-plan size`` on the defaults (a fresh interpreter, error bars included) against the
1 s target.

    python3 benchmarks/bench_search.py [--repeat 5]

CPU time is reported beside wall time: on a shared machine the wall clock measures the neighbours too.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time


def best_of(fn, repeat: int, setup=lambda: None):
    """``(fn's last result, best wall ms, best CPU ms)`` over ``repeat`` runs, ``setup()`` before each, untimed."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        arg = setup()
        w, c = time.perf_counter(), time.process_time()
        out = fn(arg)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return out, min(walls) * 1e3, min(cpus) * 1e3


def warm(repeat: int) -> None:
    from prfaas_plan.planning import scenario, search_configurations

    search_configurations(scenario())  # first call loads profiles and kernel curves
    # a new scenario each time: new prefill models, nothing cached from the previous run
    found, wall, cpu = best_of(search_configurations, repeat, scenario)
    n = sum(v[0] for v in found.counts.values())
    print(f"search on the defaults: {n} role candidates, {len(found.ranked)} joint configurations grid-searched; "
          f"best of {repeat}: {wall:.0f} ms wall, {cpu:.0f} ms CPU")


def slo(repeat: int) -> None:
    from prfaas_plan.planning import Question, SearchSpec, answer_size
    from prfaas_plan.planning.configurations import chosen_scenario, search_configurations
    from prfaas_plan.planning.plans import optimize
    from prfaas_plan.planning.questions import rate_within_slo
    from prfaas_plan.planning.scenario import perf_inputs, prfaas_layout
    from prfaas_plan.planning.slo import slo_configurations, slo_search

    answer_size(Question.parse(), samples=0, ttft_slo=(95, 2.5), search=SearchSpec())  # warm the caches
    q = Question.parse().scenario
    sc = chosen_scenario(q, search_configurations(q))
    plan = optimize(prfaas_layout(sc), sc, perf_inputs(sc))
    fixed = rate_within_slo(plan, sc, 95, 2.5)
    for name, fn in (("plan's configuration only (slo_search)", lambda: slo_search(plan, sc, fixed)),
                     ("configurations re-searched (slo_configurations)",
                      lambda: slo_configurations(q, SearchSpec(), plan, sc, fixed))):
        out, wall, cpu = best_of(lambda _: fn(), repeat)
        print(f"p95<2.5s, {name}: {out.optimum.rate_rps:.2f} req/s; best of {repeat}: {wall:.0f} ms wall, "
              f"{cpu:.0f} ms CPU")


def cold(repeat: int) -> None:
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w = time.perf_counter()
        subprocess.run([sys.executable, "-m", "prfaas_plan", "size"], check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - w)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"cold `size` on the defaults (search + 400-sample error bars): best of {repeat}: {min(walls):.2f} s wall, "
          f"{min(cpus):.2f} s CPU (target <= 1 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    warm(args.repeat)
    slo(args.repeat)
    cold(args.repeat)


if __name__ == "__main__":
    main()
