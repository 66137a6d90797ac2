"""The simulator's input: plain arrays of requests, independent of where they came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import PlanError
from ..workload.arrivals import rescale
from ..workload.prefix_cache import BlockChains, iter_blocks


@dataclass(frozen=True)
class Requests:
    """Requests sorted by arrival. ``arrival_s`` seconds (float64, non-decreasing); ``input_tokens`` and
    ``output_tokens`` whole tokens >= 1 (int64). Optionally prefix-block hash ids (non-negative, one per
    ``block_tokens`` tokens, equal ids = equal prefixes), flat: request ``i`` owns
    ``block_ids[block_offsets[i]:block_offsets[i + 1]]`` (4 or 8 bytes an id, not a Python list per request)."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    block_ids: np.ndarray | None = None
    block_offsets: np.ndarray | None = None

    @classmethod
    def from_arrays(cls, arrival_s, input_tokens, output_tokens, hashes: Sequence[Sequence[int]] | None = None,
                    *, block_ids=None, block_offsets=None) -> "Requests":
        """Validate and sort (stably) by arrival time. Hash ids come either as one sequence per request
        (``hashes``) or flat (``block_ids`` with ``block_offsets``); none at all, or all empty, means none."""
        a = np.asarray(arrival_s, dtype=float)
        li = np.rint(np.asarray(input_tokens, dtype=float)).astype(np.int64)
        lo = np.rint(np.asarray(output_tokens, dtype=float)).astype(np.int64)
        if not (a.ndim == li.ndim == lo.ndim == 1 and len(a) == len(li) == len(lo)):
            raise PlanError("requests: arrival, input and output arrays must be 1-D and of equal length")
        if hashes is not None:
            if len(hashes) != len(a):
                raise PlanError("requests: need one hash list per request")
            block_offsets = np.concatenate([[0], np.cumsum([len(h) for h in hashes])]).astype(np.int64)
            block_ids = np.fromiter((x for h in hashes for x in h), dtype=np.int64, count=int(block_offsets[-1]))
        if len(a) == 0:
            raise PlanError("requests: the workload is empty")
        if not np.all(np.isfinite(a)) or a.min() < 0:
            raise PlanError("requests: arrival times must be finite and >= 0 seconds")
        if li.min() < 1 or lo.min() < 1:
            raise PlanError("requests: input and output lengths must be >= 1 token")
        if block_ids is not None:
            if not (isinstance(block_ids, np.ndarray) and block_ids.dtype == np.int32):  # int32: kept (half the bytes)
                block_ids = np.asarray(block_ids, dtype=np.int64)
            block_offsets = np.asarray(block_offsets, dtype=np.int64)
            if len(block_offsets) != len(a) + 1 or block_offsets[0] != 0 or block_offsets[-1] != len(block_ids) \
                    or np.any(np.diff(block_offsets) < 0):
                raise PlanError("requests: block offsets must run from 0 to the number of ids, one per request")
            if not block_ids.size:
                block_ids = block_offsets = None
            elif block_ids.min() < 0:
                raise PlanError(f"requests: hash id {int(block_ids.min())} is negative: expected ids >= 0")
        order = np.argsort(a, kind="stable")
        if np.any(order != np.arange(len(a))):
            a, li, lo = a[order], li[order], lo[order]
            if block_ids is not None:
                counts = np.diff(block_offsets)[order]
                new_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
                take = np.repeat(block_offsets[:-1][order] - new_offsets[:-1], counts) + np.arange(len(block_ids))
                block_ids, block_offsets = block_ids[take], new_offsets
        return cls(a, li, lo, block_ids, block_offsets)

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def has_blocks(self) -> bool:
        """Whether the requests carry prefix-block hash ids."""
        return self.block_ids is not None

    def iter_blocks(self, stop: int | None = None) -> BlockChains:
        """Each request's hash ids as an int64 array view, in arrival order (the first ``stop`` requests)."""
        return iter_blocks(self.block_ids, self.block_offsets, 0, len(self) if stop is None else stop)

    def _head(self, n: int) -> "Requests":
        if self.block_ids is None:
            return Requests(self.arrival_s[:n], self.input_tokens[:n], self.output_tokens[:n])
        return Requests(self.arrival_s[:n], self.input_tokens[:n], self.output_tokens[:n],
                        self.block_ids[:int(self.block_offsets[n])], self.block_offsets[:n + 1])

    def until(self, duration_s: float) -> "Requests":
        """The requests arriving within ``duration_s`` seconds of the first arrival."""
        n = int(np.searchsorted(self.arrival_s, self.arrival_s[0] + duration_s, side="right"))
        if n == 0:
            raise PlanError(f"requests: none arrive within {duration_s:g} s")
        return self._head(n)

    def at_rate(self, rate_rps: float) -> "Requests":
        """The same requests with arrival times scaled so that the mean rate is ``rate_rps`` (keeps the
        trace's burstiness)."""
        span = float(self.arrival_s[-1] - self.arrival_s[0])
        if span <= 0 or len(self) < 2:
            raise PlanError("requests: cannot rescale a workload whose arrivals all share one time")
        return Requests(rescale(self.arrival_s, rate_rps), self.input_tokens, self.output_tokens,
                        self.block_ids, self.block_offsets)
