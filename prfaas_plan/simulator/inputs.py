"""Input adapters of the simulator: turn the workload module's traces, arrivals and distributions into
`Requests`.

Everything comes from `prfaas_plan.workload` -- the trace reader (`load_trace`, with its one-line errors),
the arrival processes (`arrivals`) and the paper's truncated log-normal -- so the simulator and the planner
read the same workload the same way.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..analytic.throughput import LengthGrid
from ..errors import PlanError
from ..workload import load_trace, paper_workload, poisson_window, trace_arrivals
from ..workload.traces import TooManyRequests, Trace
from .requests import Requests


def paper_grid(n: int = 4096) -> LengthGrid:
    """The paper's uncached length distribution discretized into ``n`` bins."""
    return LengthGrid.from_distribution(paper_workload().input_length, n)


DEFAULT_MAX_REQUESTS = 2_000_000  # ~0.5 GB of per-request arrays and event state


def max_requests() -> int:
    """How many requests one simulation may hold: ``PRFAAS_PLAN_MAX_REQUESTS`` or `DEFAULT_MAX_REQUESTS`."""
    text = os.environ.get("PRFAAS_PLAN_MAX_REQUESTS", "")
    if not text:
        return DEFAULT_MAX_REQUESTS
    if not text.isdigit() or int(text) < 1:
        raise PlanError(f"PRFAAS_PLAN_MAX_REQUESTS {text!r}: expected a whole number >= 1")
    return int(text)


def _too_many(n: float, what: str) -> PlanError:
    return PlanError(f"{what} would simulate {n:,.0f} requests, more than the cap of {max_requests():,} "
                     "(lower `rate` or `duration`, or raise the cap with PRFAAS_PLAN_MAX_REQUESTS)")


def paper_requests(rate_rps: float, duration_s: float, seed: int) -> Requests:
    """Poisson arrivals at ``rate_rps`` for ``duration_s`` seconds with the paper's lengths and output;
    no prefix hashes (the paper's lengths are already uncached). At most `max_requests` requests, checked
    before anything is drawn."""
    if not (rate_rps > 0 and duration_s > 0 and math.isfinite(rate_rps * duration_s)):
        raise PlanError("synthetic workload: rate and duration must be positive and finite")
    if rate_rps * duration_s > max_requests():
        raise _too_many(rate_rps * duration_s, f"an offered {rate_rps:g} req/s for {duration_s:g} s")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PlanError(f"synthetic workload: seed {seed!r} must be a whole number >= 0")
    wl = paper_workload()
    rng = np.random.default_rng(seed)
    arrivals = poisson_window(rate_rps, duration_s, rng)
    lengths = wl.input_length.sample(len(arrivals), rng)
    return Requests.from_arrays(arrivals, lengths, np.full(len(arrivals), round(wl.output_length.mean())))


def read_trace(path: str | Path, duration_s: float | None = None) -> Requests:
    """A trace (Mooncake JSONL or CSV with timestamps) as `Requests`, only its first ``duration_s`` seconds
    of arrivals when given (the rest is not read). Arrival times are counted from the first request (the
    simulation's clock starts there, whatever the trace's own origin). At most `max_requests` requests,
    checked while reading."""
    return read_trace_and_source(path, duration_s)[1]


def read_trace_and_source(path: str | Path, duration_s: float | None = None) -> tuple[Trace, Requests]:
    """`read_trace`, and the `Trace` read (the same requests in the same order, its own line numbers and
    times: what the planner's workload is built from)."""
    p = Path(path)
    if not p.is_file():
        raise PlanError(f"`trace` {str(path)!r}: no such file")
    cap = max_requests()
    try:
        trace = load_trace(p, duration_s, max_requests=cap)
    except TooManyRequests:
        raise PlanError(f"{p} would simulate more than {cap:,} requests, the cap (lower `duration`, or raise "
                        "the cap with PRFAAS_PLAN_MAX_REQUESTS)") from None
    if trace.arrival_s is None:
        raise PlanError(f"{p}:{int(trace.line[0])}: the simulator needs arrival timestamps")
    outputs = np.maximum(trace.output_length, 1)  # a request yields at least its first token
    return trace, Requests.from_arrays(trace_arrivals(trace), trace.input_length, outputs,
                                       block_ids=trace.block_ids, block_offsets=trace.block_offsets)
