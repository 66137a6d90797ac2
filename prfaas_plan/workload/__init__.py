"""Workloads: request-length distributions, traces, prefix-cache replay and arrival processes.

Lengths are tokens, times seconds, rates requests/s. Modules, one job each:

- `distributions`: `TruncatedLogNormal`, `LogNormal`, `Uniform`, `Fixed`, `Empirical` (closed-form tail
  probabilities and conditional means, fast expectations, grids for optimizers).
"""

from .distributions import (Empirical, Fixed, LengthDistribution, LogNormal, TruncatedLogNormal,
                            Uniform)

__all__ = ["Empirical", "Fixed", "LengthDistribution", "LogNormal", "TruncatedLogNormal", "Uniform"]
