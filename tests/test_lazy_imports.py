"""A plain ``size`` must not load cvxpy (cold start); ``size --verify`` solves the linear program and must.

Each case runs the CLI in a fresh interpreter with ``-X importtime``, which lists every module imported
on stderr, so the check sees the real command line rather than this test process's imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imported_modules(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "prfaas_plan", *args], check=False,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    json.loads(proc.stdout)  # the command did its job
    # importtime lines: "import time: <self us> | <cumulative us> | <indent><module>"
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("verify", [False, True])
def test_cvxpy_is_loaded_only_to_solve_a_program(verify):
    extra = ("--verify",) if verify else ()
    modules = _imported_modules("size", "--model", "kimi-linear", "--link", "100G", *extra, "--format", "json")
    assert "prfaas_plan.analytic.throughput" in modules   # the listing is complete enough to trust
    assert ("cvxpy" in modules) is verify


TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"


@pytest.mark.parametrize("args", [("simulate", "--trace", TRACE), ("size", "--workload", "trace")],
                         ids=["simulate --trace", "size --workload trace"])
def test_replaying_the_bundled_trace_imports_no_numba(args):
    # 12k requests, below the size where compiled kernels pay (prefix_cache.COMPILED_FROM): the plain-Python
    # prefix caches, FCFS queues and link serve the run, and numba's ~1 s import is never paid (issue 22 item 6)
    modules = _imported_modules(*args, "--model", "kimi-linear", "--format", "json")
    assert "prfaas_plan.workload.prefix_python" in modules  # the prefix caches did run
    assert not {m for m in modules if m == "numba" or m.startswith("numba.")}
    assert "prfaas_plan.workload.prefix_kernels" not in modules
