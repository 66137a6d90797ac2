"""The simulator's input: plain arrays of requests, independent of where they came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import PlanError


@dataclass(frozen=True)
class Requests:
    """Requests sorted by arrival. ``arrival_s`` seconds (float64, non-decreasing); ``input_tokens`` and
    ``output_tokens`` whole tokens >= 1 (int64); ``hashes`` optionally one sequence of prefix-block hash ids
    per request (non-negative ints, one per ``block_tokens`` tokens, equal ids = equal prefixes)."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    hashes: tuple[Sequence[int], ...] | None = None

    @classmethod
    def from_arrays(cls, arrival_s, input_tokens, output_tokens, hashes=None) -> "Requests":
        """Validate and sort (stably) by arrival time."""
        a = np.asarray(arrival_s, dtype=float)
        li = np.rint(np.asarray(input_tokens, dtype=float)).astype(np.int64)
        lo = np.rint(np.asarray(output_tokens, dtype=float)).astype(np.int64)
        if not (a.ndim == li.ndim == lo.ndim == 1 and len(a) == len(li) == len(lo)):
            raise PlanError("requests: arrival, input and output arrays must be 1-D and of equal length")
        if hashes is not None and len(hashes) != len(a):
            raise PlanError("requests: need one hash list per request")
        if len(a) == 0:
            raise PlanError("requests: the workload is empty")
        if not np.all(np.isfinite(a)) or a.min() < 0:
            raise PlanError("requests: arrival times must be finite and >= 0 seconds")
        if li.min() < 1 or lo.min() < 1:
            raise PlanError("requests: input and output lengths must be >= 1 token")
        order = np.argsort(a, kind="stable")
        if np.any(order != np.arange(len(a))):
            a, li, lo = a[order], li[order], lo[order]
            if hashes is not None:
                hashes = [hashes[i] for i in order]
        return cls(a, li, lo, tuple(hashes) if hashes is not None else None)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def until(self, duration_s: float) -> "Requests":
        """The requests arriving within ``duration_s`` seconds of the first arrival."""
        n = int(np.searchsorted(self.arrival_s, self.arrival_s[0] + duration_s, side="right"))
        if n == 0:
            raise PlanError(f"requests: none arrive within {duration_s:g} s")
        return Requests(self.arrival_s[:n], self.input_tokens[:n], self.output_tokens[:n],
                        self.hashes[:n] if self.hashes is not None else None)

    def at_rate(self, rate_rps: float) -> "Requests":
        """The same requests with arrival times scaled so that the mean rate is ``rate_rps`` (keeps the
        trace's burstiness)."""
        span = float(self.arrival_s[-1] - self.arrival_s[0])
        if span <= 0 or len(self) < 2:
            raise PlanError("requests: cannot rescale a workload whose arrivals all share one time")
        scale = (len(self) - 1) / (rate_rps * span)
        return Requests((self.arrival_s - self.arrival_s[0]) * scale, self.input_tokens, self.output_tokens,
                        self.hashes)
