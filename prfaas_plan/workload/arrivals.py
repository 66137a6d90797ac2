"""Arrival processes for simulation: arrival times in seconds (float64, non-decreasing), seeded.

- `trace_arrivals`: a trace's recorded arrivals, shifted to start at 0;
- `poisson_arrivals`: a Poisson process (exponential gaps, coefficient of variation 1); `poisson_window` the
  same over a fixed time window (the simulator's synthetic workload);
- `gamma_arrivals`: a renewal process with gamma gaps of any coefficient of variation -- cv > 1 is
  bursty (clustered arrivals), cv < 1 smoother than Poisson, cv = 1 is Poisson;
- `mmpp_arrivals`: a Markov-modulated Poisson process cycling through states of different rates with
  exponential dwell times -- load swings over seconds to minutes, what the long-term scheduler reacts to;
- `rescale`: the same arrival pattern at another mean rate (e.g. a trace replayed faster).

The same inputs and seed give the same times, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import PlanError
from ._random import as_generator
from .traces import Trace


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise PlanError(f"{name} {value!r}: expected a positive number")
    return v


def _count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise PlanError(f"request count {n!r}: expected a whole number >= 0")
    return int(n)


def trace_arrivals(trace: Trace) -> np.ndarray:
    """Arrival times of ``trace`` in seconds after its first request."""
    if trace.arrival_s is None:
        raise PlanError(f"{trace.path}: the trace has no timestamps: expected a timestamp column (ms)")
    return trace.arrival_s - trace.arrival_s[0]


def empirical_rate(times: np.ndarray) -> float:
    """Mean arrival rate of sorted arrival times, requests/s: (n - 1) / (last - first)."""
    times = np.asarray(times, dtype=float)
    if times.size < 2 or times[-1] <= times[0]:
        raise PlanError("arrival times: expected at least two distinct times to measure a rate")
    return (times.size - 1) / float(times[-1] - times[0])


def rescale(times: np.ndarray, rate: float) -> np.ndarray:
    """Stretch or compress ``times`` (starting at the first) so the mean rate becomes ``rate`` req/s."""
    times = np.asarray(times, dtype=float)
    empirical_rate(times)  # checks there is a span to rescale
    factor = (times.size - 1) / (_positive("arrival rate", rate) * float(times[-1] - times[0]))
    return (times - times[0]) * factor


def poisson_arrivals(rate: float, n: int, rng: np.random.Generator | int) -> np.ndarray:
    """``n`` arrivals of a Poisson process of ``rate`` requests/s, starting at time 0."""
    return gamma_arrivals(rate, n, 1.0, rng)


MAX_REQUESTS = 20_000_000
"""Most requests one simulated workload may hold (about 100 bytes each in the simulator's arrays, so ~2 GB)."""


def check_request_budget(expected: float, what: str) -> None:
    """Refuse, before allocating, a workload of ``expected`` requests beyond `MAX_REQUESTS` (``what`` names
    the inputs that size it, for the message)."""
    if not expected <= MAX_REQUESTS:
        raise PlanError(f"{what}: about {expected:.3g} requests, above the cap of {MAX_REQUESTS:,}: lower the "
                        f"rate or the duration")


def poisson_window(rate: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """A Poisson process of ``rate`` requests/s on ``[0, duration_s)``: a Poisson count with mean
    ``rate * duration_s`` (at least one request), placed uniformly and sorted -- the process conditioned on
    its count, so a window, not a number of requests, is fixed."""
    rate, duration_s = _positive("arrival rate", rate), _positive("arrival window", duration_s)
    check_request_budget(rate * duration_s, f"{rate:g} requests/s for {duration_s:g} s")
    n = max(int(rng.poisson(rate * duration_s)), 1)
    return np.sort(rng.uniform(0.0, duration_s, n))


def gamma_arrivals(rate: float, n: int, cv: float, rng: np.random.Generator | int) -> np.ndarray:
    """``n`` arrivals of a renewal process with gamma gaps: mean 1/``rate`` s, coefficient of variation
    ``cv`` (shape 1/cv^2). The process starts at time 0, so the first arrival is one gap later."""
    rate, cv, n = _positive("arrival rate", rate), _positive("coefficient of variation", cv), _count(n)
    shape = 1.0 / (cv * cv)
    gaps = as_generator(rng).gamma(shape, 1.0 / (rate * shape), size=n)
    return np.cumsum(gaps)


def mmpp_arrivals(rates: Sequence[float], dwell_s: Sequence[float], n: int,
                  rng: np.random.Generator | int) -> np.ndarray:
    """``n`` arrivals of a Markov-modulated Poisson process.

    The process cycles through states 0, 1, ..., k-1, 0, ...; in state ``j`` requests arrive at
    ``rates[j]`` requests/s (0 allowed: an off period) for an exponential time of mean ``dwell_s[j]``
    seconds. The long-run mean rate is ``sum(rates * dwell_s) / sum(dwell_s)``. Starts in state 0 at 0.
    """
    r = np.asarray(rates, dtype=float)
    d = np.asarray(dwell_s, dtype=float)
    n = _count(n)
    if r.ndim != 1 or r.size < 1 or r.shape != d.shape:
        raise PlanError("MMPP: expected one rate and one mean dwell time per state")
    if not np.all(np.isfinite(r)) or np.any(r < 0) or not np.any(r > 0):
        raise PlanError("MMPP rates: expected rates >= 0 requests/s, at least one positive")
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise PlanError("MMPP dwell times: expected positive seconds")
    gen = as_generator(rng)
    mean_per_cycle = float(np.dot(r, d))
    out: list[np.ndarray] = []
    got, start = 0, 0.0
    while got < n:
        cycles = max(1, math.ceil(1.2 * (n - got) / mean_per_cycle) + 1)
        dwell = gen.exponential(np.tile(d, cycles))
        begin = start + np.concatenate([[0.0], np.cumsum(dwell)[:-1]])
        counts = gen.poisson(np.tile(r, cycles) * dwell)
        times = np.repeat(begin, counts) + gen.random(int(counts.sum())) * np.repeat(dwell, counts)
        # Given its count, a sojourn's arrivals are uniform in it; sojourns do not overlap, so one sort
        # of the chunk orders them.
        out.append(np.sort(times))
        got += times.size
        start = float(begin[-1] + dwell[-1])
    return np.concatenate(out)[:n] if out else np.empty(0)
