"""Input adapters of the simulator: the Mooncake trace and the paper's synthetic workload.

Minimal on purpose and kept apart from the engine: each is one function returning `Requests` (or a
`LengthGrid`), so the workload module (`prfaas_plan.workload`) can replace them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import PlanError
from ..throughput import LengthGrid
from .requests import Requests

# The paper's case-study workload (brief section 7): uncached input length truncated log-normal.
PAPER_MU, PAPER_SIGMA, PAPER_MIN, PAPER_MAX, PAPER_OUTPUT = 9.90, 1.00, 128, 128_000, 1024


def _lognormal_ppf(u: np.ndarray) -> np.ndarray:
    """Inverse CDF of the paper's truncated log-normal at probabilities ``u`` in (0, 1), tokens."""
    from scipy.stats import norm

    a = norm.cdf((math.log(PAPER_MIN) - PAPER_MU) / PAPER_SIGMA)
    b = norm.cdf((math.log(PAPER_MAX) - PAPER_MU) / PAPER_SIGMA)
    return np.exp(PAPER_MU + PAPER_SIGMA * norm.ppf(a + np.asarray(u) * (b - a)))


def paper_grid(n: int = 4096) -> LengthGrid:
    """The paper's length distribution as ``n`` equally likely mid-quantile points."""
    return LengthGrid(_lognormal_ppf((np.arange(n) + 0.5) / n), np.full(n, 1.0 / n))


def paper_requests(rate_rps: float, duration_s: float, seed: int) -> Requests:
    """Poisson arrivals at ``rate_rps`` for ``duration_s`` seconds with the paper's lengths and 1,024
    output tokens; no prefix hashes (the paper's lengths are already uncached)."""
    if not (rate_rps > 0 and duration_s > 0):
        raise PlanError("synthetic workload: rate and duration must be positive")
    rng = np.random.default_rng(seed)
    n = max(int(rng.poisson(rate_rps * duration_s)), 1)
    arrivals = np.sort(rng.uniform(0.0, duration_s, n))
    lengths = _lognormal_ppf(rng.uniform(0.0, 1.0, n))
    return Requests.from_arrays(arrivals, lengths, np.full(n, PAPER_OUTPUT))


def read_mooncake_jsonl(path: str | Path, duration_s: float | None = None) -> Requests:
    """Stream a Mooncake trace (JSON lines: ``timestamp`` ms, ``input_length``, ``output_length``,
    ``hash_ids``), stopping after ``duration_s`` seconds of arrivals when given. A malformed line raises
    `PlanError` naming the file and line."""
    p = Path(path)
    if not p.is_file():
        raise PlanError(f"--trace {str(path)!r}: no such file")
    arrivals: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    hashes: list[list[int]] = []
    with p.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                t = float(rec["timestamp"]) / 1e3
                li, lo, h = rec["input_length"], rec["output_length"], rec.get("hash_ids", [])
                ok = (math.isfinite(t) and t >= 0 and type(li) is int and li >= 1 and type(lo) is int
                      and lo >= 1 and isinstance(h, list) and all(type(x) is int and x >= 0 for x in h))
            except (ValueError, KeyError, TypeError, AttributeError):
                ok = False
            if not ok:
                raise PlanError(f"{p}:{lineno}: expected a JSON object with timestamp (ms >= 0), input_length "
                                "and output_length (ints >= 1) and hash_ids (list of ints >= 0)")
            if duration_s is not None and t > duration_s:
                break
            arrivals.append(t)
            inputs.append(li)
            outputs.append(lo)
            hashes.append(h)
    if not arrivals:
        raise PlanError(f"{p}: no requests in the trace")
    return Requests.from_arrays(arrivals, inputs, outputs, hashes)
