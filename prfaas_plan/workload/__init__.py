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

import importlib

# Each public name and its module, imported on first use (`__getattr__`): a plain ``size`` needs only the
# length distributions and the workload record, not the trace readers, arrival processes or prefix cache.
_PUBLIC = {
    "arrivals": ("empirical_rate", "gamma_arrivals", "mmpp_arrivals", "poisson_arrivals", "poisson_window",
                 "rescale", "trace_arrivals"),
    "distributions": ("Empirical", "Fixed", "LengthDistribution", "LogNormal", "TruncatedLogNormal", "Uniform"),
    "prefix_cache": ("CacheReplay", "PrefixCache", "replay_prefix_cache"),
    "traces": ("BUNDLED_TRACE", "Trace", "TraceRecord", "iter_trace", "load_trace"),
    "workloads": ("Workload", "from_trace", "paper_workload", "resolve_workload"),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    """``prfaas_plan.workload.NAME``: the name from its module, imported now (then kept here)."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value
