"""Cold-start wall time of every command (median of several fresh processes), and as a ratio to a
baseline measured the same way: a process that only imports numpy (the floor any command pays).

Run: python3 benchmarks/bench_cli.py [--repeat 5]
Each run is a new Python process, so imports, profile loading and the optimizer are all counted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "size kimi-linear 100G": ["size", "--model", "kimi-linear", "--link", "100G"],
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


def time_command(args: list[str], repeat: int, argv: list[str] | None = None) -> tuple[float, int]:
    """Median wall seconds of ``prfaas-plan ARGS`` (or of ``argv``) over ``repeat`` fresh processes, and the
    exit code."""
    times = []
    code = 0
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(argv or [sys.executable, "-c", "from prfaas_plan.cli import main; main()", *args],
                              capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        code = proc.returncode
    return statistics.median(times), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    base, _ = time_command([], opts.repeat, BASELINE)
    print(f"baseline (python -c 'import numpy'): {base:.3f} s")
    print(f"{'command':36s} {'median s':>9s} {'x base':>7s} {'exit':>5s}")
    for name, args in COMMANDS.items():
        median, code = time_command(args, opts.repeat)
        print(f"{name:36s} {median:9.3f} {median / base:7.1f} {code:5d}", flush=True)


if __name__ == "__main__":
    main()
