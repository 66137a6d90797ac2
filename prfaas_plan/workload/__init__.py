"""Workloads: request-length distributions, traces, prefix-cache replay and arrival processes.

Lengths are tokens, times seconds, rates requests/s. Modules, one job each:

- `distributions`: `TruncatedLogNormal`, `LogNormal`, `Uniform`, `Fixed`, `Empirical` (closed-form tail
  probabilities and conditional means, fast expectations, grids for optimizers);
- `traces`: Mooncake JSONL and CSV readers, streamed (`iter_trace`) or as arrays (`load_trace`);
- `prefix_cache`: the block-level LRU prefix cache (planner replay and simulator), giving uncached lengths;
- `arrivals`: trace, Poisson, gamma-renewal and Markov-modulated arrival times;
- `workloads`: the `Workload` record, `paper_workload`, `from_trace` and `resolve_workload` (what a
  ``--workload`` flag names);
- `summary`: the ``workload describe`` report.
"""

from .arrivals import (
                       empirical_rate,
                       gamma_arrivals,
                       mmpp_arrivals,
                       poisson_arrivals,
                       poisson_window,
                       rescale,
                       trace_arrivals,
)
from .distributions import (
                       Empirical,
                       Fixed,
                       LengthDistribution,
                       LogNormal,
                       TruncatedLogNormal,
                       Uniform,
)
from .prefix_cache import CacheReplay, PrefixCache, replay_prefix_cache
from .traces import BUNDLED_TRACE, Trace, TraceRecord, iter_trace, load_trace
from .workloads import Workload, from_trace, paper_workload, resolve_workload

__all__ = [
    "BUNDLED_TRACE", "CacheReplay", "Empirical", "Fixed", "LengthDistribution", "LogNormal",
    "PrefixCache", "Trace", "TraceRecord", "TruncatedLogNormal", "Uniform", "Workload", "empirical_rate", "from_trace",
    "gamma_arrivals", "iter_trace", "load_trace", "mmpp_arrivals", "paper_workload", "poisson_arrivals",
    "poisson_window",
    "replay_prefix_cache", "rescale", "resolve_workload", "trace_arrivals",
]
