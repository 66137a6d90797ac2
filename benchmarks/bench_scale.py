"""Trace replay at scale: the bundled Mooncake trace tiled to 10k / 100k / 1M requests, static and adaptive
scheduler, with and without prefix caches, in-process (Python API) and end to end through the CLI.

Run: ``python3 benchmarks/bench_scale.py [--sizes 10000,100000,1000000] [--repeat 1] [--traces DIR]
[--caches caches|none|both] [--schedulers static,adaptive] [--no-cli | --cli-only]``.
Every case runs in a fresh interpreter, so its peak resident memory (``resource.getrusage``, the child's
``ru_maxrss``) is its own. Each in-process case also times ``sum(range(10**7))`` in the same process first and
reports its wall time (read + simulate; ``sim x``: simulate alone) as a multiple of that loop (``x loop``): a
machine-independent figure that stays comparable when other work shares the cores. In-process cases use the paper's prfaas-1t inputs (as
bench_simulator.py), the CLI runs ``simulate --trace T --model kimi-linear``; both take the threshold and
split from the grid search on the trace's lengths and 2 TB of cache per instance. The CLI table runs each
scheduler on the tiled trace and on a copy without hash ids (no prefix caches) and gives their wall-time
ratio (adaptive / static).
``route`` rows time the prefix caches alone (the same system's two pools): the static pass
(`Router.route_all`) and the adaptive engine's call per request (`Router.route`, abundant every 8th).
The ``compile`` row times the cache kernels' first use in a fresh process with an empty numba cache
(``NUMBA_CACHE_DIR``), then with the cache that run wrote.
Point ``PYTHONPATH`` at another checkout to measure it the same way (e.g. before and after a change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CASE = """
import json, resource, sys, time
from dataclasses import replace
t0 = time.perf_counter(); sum(range(10**7)); loop_s = time.perf_counter() - t0
from prfaas_plan.planning import case_study as paper
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.analytic.search import grid_search
from prfaas_plan.simulator import SimConfig, simulate
from prfaas_plan.simulator.inputs import read_trace
from prfaas_plan.simulator.scheduler import empirical_grid
path, scheduler, caches = sys.argv[1], sys.argv[2], sys.argv[3] == "caches"
t0 = time.perf_counter()
requests = read_trace(path)
read_s = time.perf_counter() - t0
perf = replace(paper.case_study_perf("paper"), output_tokens=float(requests.output_tokens.mean()))
ev = grid_search(prfaas_pd(paper.REMOTE, paper.LOCAL, Link(100e9)), empirical_grid(requests.input_tokens), perf,
                 "exact").best
cfg = SimConfig(ev.threshold, scheduler, cache_bytes_per_instance=2e12 if caches else 0.0)
t0 = time.perf_counter()
result = simulate(requests, ev.layout, perf, cfg)
sim_s = time.perf_counter() - t0
print(json.dumps({"n": len(requests), "loop_s": loop_s, "read_s": read_s, "sim_s": sim_s,
                  "completed": int(result.completed.sum()),
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ROUTE = """
import json, resource, sys, time
from dataclasses import replace
t0 = time.perf_counter(); sum(range(10**7)); loop_s = time.perf_counter() - t0
from prfaas_plan.planning import case_study as paper
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.analytic.search import grid_search
from prfaas_plan.simulator.inputs import read_trace
from prfaas_plan.simulator.routing import Router
from prfaas_plan.simulator.scheduler import empirical_grid
from prfaas_plan.simulator.system import System
path, scheduler = sys.argv[1], sys.argv[2]
requests = read_trace(path)
perf = replace(paper.case_study_perf("paper"), output_tokens=float(requests.output_tokens.mean()))
ev = grid_search(prfaas_pd(paper.REMOTE, paper.LOCAL, Link(100e9)), empirical_grid(requests.input_tokens), perf,
                 "exact").best
sysm = System.build(ev.layout, perf, ev.threshold)
n, thr, local_ok = len(requests), float(sysm.threshold), sysm.n_prefill > 0
t0 = time.perf_counter()
pd, rf = sysm.caches(2e12, 512)
most = int(requests.input_tokens.sum()) // 512 * pd.block_bytes + n * pd.checkpoint_bytes
pd.assume_fits(most)
rf.assume_fits(most)
router = Router(pd, rf, sysm.remote_ok)
if scheduler == "static":
    router.route_all(requests.iter_blocks(n), requests.input_tokens, thr, local_ok)
else:
    blocks, lengths, route = requests.iter_blocks(n), requests.input_tokens.tolist(), router.route
    for i in range(n):
        route(next(blocks), lengths[i], thr, not i & 7, local_ok)
sim_s = time.perf_counter() - t0
print(json.dumps({"n": n, "loop_s": loop_s, "read_s": 0.0, "sim_s": sim_s,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

COMPILE = """
import time
t0 = time.perf_counter()
import numpy as np
from prfaas_plan.simulator.routing import Router
from prfaas_plan.workload import Trace, replay_prefix_cache
from prfaas_plan.workload.prefix_cache import PrefixCache
router = Router(PrefixCache(1e9, 1.0, 2.0, 512, 0.9), PrefixCache(1e9, 1.0, 2.0, 512, 0.9), True)
ids = np.arange(20, dtype=np.int64)
router.route(ids, 10000, 1000.0, False, True)
router.route_all([ids], [10000], 1000.0, True)
router.pd.touch(ids, 3, True)
router.pd.entries()
one = np.array([10000])
replay_prefix_cache(Trace("t", one, one, one, one * 0.0, ids.astype(np.int32), np.array([0, 20])))
print(time.perf_counter() - t0)
"""


def run_child(args: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=None if env is None else {**os.environ, **env})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args[:4])}...: exit {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=1, help="best of N per case")
    ap.add_argument("--traces", default=None, help="folder for the tiled traces (default: a temporary one)")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI runs")
    ap.add_argument("--cli-only", action="store_true", help="only the end-to-end CLI runs")
    ap.add_argument("--caches", choices=("caches", "none", "both"), default="both",
                    help="run the cases with prefix caches, without them, or both")
    ap.add_argument("--schedulers", default="static,adaptive")
    opts = ap.parse_args()
    from tiled_trace import write_tiled

    folder = Path(opts.traces or tempfile.mkdtemp(prefix="prfaas-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    if opts.cli_only:
        return cli_table(folder, opts)
    with tempfile.TemporaryDirectory(prefix="prfaas-numba-") as cache_dir:
        cold, warm = (float(run_child([sys.executable, "-c", COMPILE], {"NUMBA_CACHE_DIR": cache_dir})[2])
                      for _ in range(2))
    print(f"compile: the cache kernels' first use {cold:.2f} s with an empty numba cache, {warm:.2f} s cached "
          "(imports included)")
    print(f"{'requests':>9s} {'scheduler':9s} {'caches':6s} {'how':6s} {'wall s':>7s} {'read s':>7s} {'sim s':>7s} "
          f"{'us/req':>7s} {'x loop':>7s} {'sim x':>7s} {'peak MB':>8s}")
    for n in map(int, opts.sizes.split(",")):
        trace = folder / f"tiled_{n}.jsonl"
        if not trace.exists():
            write_tiled(n, trace)
        for scheduler in opts.schedulers.split(","):
            cases = [("api", c) for c in (("caches", "none") if opts.caches == "both" else (opts.caches,))]
            if opts.caches != "none":
                cases.append(("route", "caches"))  # the prefix caches alone
            for how, caches in cases:
                best = None
                for _ in range(opts.repeat):
                    code = [CASE, str(trace), scheduler, caches] if how == "api" else [ROUTE, str(trace), scheduler]
                    _, rss, out = run_child([sys.executable, "-c", *code])
                    r = json.loads(out)
                    r["maxrss_mb"] = rss
                    if best is None or r["read_s"] + r["sim_s"] < best["read_s"] + best["sim_s"]:
                        best = r
                work = best["read_s"] + best["sim_s"]
                print(f"{n:9d} {scheduler:9s} {caches:6s} {how:6s} {work:7.2f} {best['read_s']:7.2f} "
                      f"{best['sim_s']:7.2f} {work / n * 1e6:7.2f} {work / best['loop_s']:7.1f} "
                      f"{best['sim_s'] / best['loop_s']:7.1f} "
                      f"{best['maxrss_mb']:8.0f}", flush=True)
    if not opts.no_cli:
        cli_table(folder, opts)


def cli_table(folder: Path, opts) -> None:
    """End to end through the CLI, each scheduler on the tiled trace with its hashes (prefix caches) and on the
    same trace without them (no caches), best of ``opts.repeat``: wall seconds, peak MB, and the schedulers'
    wall-time ratio."""
    from tiled_trace import write_tiled

    schedulers = opts.schedulers.split(",")
    print(f"\nend to end: simulate --trace T --model kimi-linear --format json --scheduler S, best of {opts.repeat}")
    print(f"{'requests':>9s} {'caches':6s} " + " ".join(f"{s + ' s':>11s} {s + ' MB':>12s}" for s in schedulers)
          + ("   ratio" if len(schedulers) == 2 else ""))
    for n in map(int, opts.sizes.split(",")):
        for caches in (("caches", "none") if opts.caches == "both" else (opts.caches,)):
            trace = folder / (f"tiled_{n}.jsonl" if caches == "caches" else f"tiled_{n}_nohash.jsonl")
            if not trace.exists():
                write_tiled(n, trace, hashes=caches == "caches")
            cells, walls = [], []
            for scheduler in schedulers:
                cli = [sys.executable, "-m", "prfaas_plan", "simulate", "--trace", str(trace), "--model",
                       "kimi-linear", "--format", "json", "--scheduler", scheduler]
                wall, rss = min((run_child(cli)[:2] for _ in range(opts.repeat)), key=lambda x: x[0])
                walls.append(wall)
                cells.append(f"{wall:11.2f} {rss:12.0f}")
            ratio = f" {walls[1] / walls[0]:7.2f}" if len(walls) == 2 else ""
            print(f"{n:9d} {caches:6s} " + " ".join(cells) + ratio, flush=True)


if __name__ == "__main__":
    main()
