"""Summary of a workload as rows: length statistics, prefix-cache and arrival facts, and the routing
quantities of ``docs/methods.md`` over thresholds (``output/workload_report.py`` renders them for
``prfaas-plan workload describe``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .distributions import Empirical, LengthDistribution
from .workloads import Workload

PERCENTILES = (50, 90, 99)


def length_rows(workload: Workload) -> list[dict]:
    """Count, mean, percentiles, min and max (tokens) of the total input, uncached input and output."""
    rows = []
    for quantity, dist in (("input_total", workload.total_input_length),
                           ("input_uncached", workload.input_length),
                           ("output", workload.output_length)):
        row = {"quantity": quantity, "count": workload.requests, "mean_tokens": dist.mean()}
        for p in PERCENTILES:
            row[f"p{p}_tokens"] = float(dist.ppf(p / 100))
        row["min_tokens"], row["max_tokens"] = float(dist.low), float(dist.high)
        row["kind"] = "empirical" if isinstance(dist, Empirical) else repr(dist)
        rows.append(row)
    return rows


def fact_rows(workload: Workload) -> list[dict]:
    """Scalar facts of a trace: requests, duration, arrival rate and its prefix-cache replay (none for a
    distribution)."""
    rows: list[dict] = []

    def add(fact: str, value, unit: str) -> None:
        rows.append({"fact": fact, "value": value, "unit": unit})

    if workload.trace is not None:
        add("requests", workload.requests, "requests")
        add("duration", workload.trace.duration_s, "s")
        add("arrival_rate", workload.arrival_rate, "requests/s")
    cache = workload.cache
    if cache is not None:
        add("prefix_hit_rate_tokens", cache.token_hit_rate, "cached tokens / prompt tokens")
        add("prefix_hit_rate_requests", cache.request_hit_rate, "mean per-request cached fraction")
        add("requests_with_hit", cache.share_with_hit, "fraction of requests")
        add("block_size", cache.block_size, "tokens")
        add("cache_capacity", cache.capacity_blocks, "blocks per cache (unlimited when empty)")
        add("caches", cache.caches, "caches")
    return rows


def _defined(x: float) -> float | None:
    """A conditional mean, or None where its region is empty (nan)."""
    return None if math.isnan(x) else x


def threshold_rows(dist: LengthDistribution, thresholds: Sequence[float]) -> list[dict]:
    """For each threshold t (tokens): p = P(L > t), E[L | L > t], E[L | L <= t] (None where no request
    falls on that side), and the share of all prefill tokens in requests longer than t."""
    mean = dist.mean()
    rows = []
    for t in thresholds:
        rows.append({
            "threshold_tokens": t,
            "p_above": float(dist.sf(t)),
            "mean_above_tokens": _defined(float(dist.conditional_mean(t, above=True))),
            "mean_below_tokens": _defined(float(dist.conditional_mean(t, above=False))),
            "token_share_above": float(dist.partial_mean(t, above=True)) / mean,
        })
    return rows
