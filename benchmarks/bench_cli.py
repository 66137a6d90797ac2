"""Cold-start time of every command (median of several fresh processes): wall seconds and CPU seconds (the
child's user + system time, which other load on the machine inflates far less than wall time), and the CPU
time as a ratio to a baseline measured the same way: a process that only imports numpy (the floor any
command pays).

Run: python3 benchmarks/bench_cli.py [--repeat 5] [--only size]
Each run is a new Python process, so imports, profile loading and the optimizer are all counted. Issue 20
asks <= 0.5 s for the first command (``size kimi-linear 100G``). The package's byte-code is compiled before
the timing, as any first run leaves it: with PYTHONDONTWRITEBYTECODE set (as on this project's machines) an
editable install would otherwise compile the package in every run, about 0.15 s more, which no user pays twice.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "size kimi-linear 100G": ["size", "--model", "kimi-linear", "--link", "100G"],
    # the link at 93% of line rate: `link-no-headroom` fires and three more plans price 15/20/30% headroom
    "size kimi-linear 100G --link-headroom 20%": ["size", "--model", "kimi-linear", "--link", "100G",
                                                  "--link-headroom", "20%"],
    "size prfaas-1t paper inputs": ["size", "--model", "prfaas-1t", "--inputs", "paper"],
    "compare prfaas-1t paper inputs": ["compare", "--model", "prfaas-1t", "--inputs", "paper"],
    "reproduce --inputs paper": ["reproduce", "--inputs", "paper"],
    "reproduce --inputs predicted": ["reproduce", "--inputs", "predicted"],
    "models": ["models"],
    "hardware": ["hardware"],
    "show kimi-linear": ["show", "kimi-linear"],
    "kv kimi-linear": ["kv", "--model", "kimi-linear"],
    "rates kimi-linear": ["rates", "--model", "kimi-linear"],
    "kv-throughput kimi-linear": ["kv-throughput", "--model", "kimi-linear"],
    "workload describe": ["workload", "describe"],
    "simulate --duration 60s": ["simulate", "--duration", "60s"],
    # issue 22 item 6 asks <= 1.2 s for this one (the bundled 12k trace, prefix caches on)
    "simulate --trace bundled 12k": ["simulate", "--trace",
                                     "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"],
    "validate": ["validate"],
}
BASELINE = [sys.executable, "-c", "import numpy"]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(args: list[str], repeat: int, argv: list[str] | None = None) -> tuple[float, float, int]:
    """Median wall seconds and median CPU seconds (user + system) of ``prfaas-plan ARGS`` (or of ``argv``)
    over ``repeat`` fresh processes, and the exit code."""
    walls, cpus = [], []
    code = 0
    for _ in range(repeat):
        cpu, start = _children_cpu_s(), time.perf_counter()
        proc = subprocess.run(argv or [sys.executable, "-c", "from prfaas_plan.cli import main; main()", *args],
                              capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu_s() - cpu)
        code = proc.returncode
    return statistics.median(walls), statistics.median(cpus), code


def compile_package() -> None:
    """Write the byte-code of every module of the package beside it (what its first run writes, unless
    PYTHONDONTWRITEBYTECODE forbids it)."""
    spec = importlib.util.find_spec("prfaas_plan")
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="run only the commands whose name contains this text")
    opts = parser.parse_args()
    compile_package()
    base_wall, base_cpu, _ = time_command([], opts.repeat, BASELINE)
    print(f"baseline (python -c 'import numpy'): {base_wall:.3f} s wall, {base_cpu:.3f} s CPU")
    print(f"{'command':36s} {'wall s':>7s} {'CPU s':>7s} {'CPU x base':>10s} {'exit':>5s}")
    for name, args in COMMANDS.items():
        if opts.only not in name:
            continue
        wall, cpu, code = time_command(args, opts.repeat)
        print(f"{name:36s} {wall:7.3f} {cpu:7.3f} {cpu / base_cpu:10.1f} {code:5d}", flush=True)


if __name__ == "__main__":
    main()
