"""Workloads: request-length distributions, traces, prefix-cache replay and arrival processes.

Lengths are tokens, times seconds, rates requests/s. Modules, one job each:

- `distributions`: `TruncatedLogNormal`, `LogNormal`, `Uniform`, `Fixed`, `Empirical` (closed-form tail
  probabilities and conditional means, fast expectations, grids for optimizers);
- `traces`: Mooncake JSONL and CSV readers, streamed (`iter_trace`) or as arrays (`load_trace`).
"""

from .distributions import (Empirical, Fixed, LengthDistribution, LogNormal, TruncatedLogNormal,
                            Uniform)
from .traces import BUNDLED_TRACE, Trace, TraceRecord, iter_trace, load_trace

__all__ = [
    "BUNDLED_TRACE", "Empirical", "Fixed", "LengthDistribution", "LogNormal", "Trace", "TraceRecord",
    "TruncatedLogNormal", "Uniform", "iter_trace", "load_trace",
]
