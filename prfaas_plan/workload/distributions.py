"""Request-length distributions: truncated log-normal (the paper's), log-normal, uniform, fixed, empirical.

Every distribution answers the questions the throughput model and optimizer ask about an uncached
prompt length ``L`` (tokens):

- ``cdf(x)`` = P(L <= x), ``sf(x)`` = P(L > x), ``ppf(q)`` (smallest x with cdf(x) >= q);
- ``partial_mean(t, above)`` = E[L ; region] = E[L * 1{region}], and ``conditional_mean(t, above)`` =
  E[L | region], where the region is ``L > t`` (``above=True``) or ``L <= t``;
- ``expect(f, t, above)`` = E[f(L) ; region] for a vectorized ``f`` (e.g. a prefill-time model), and
  ``conditional_expect`` = E[f(L) | region] -- the distribution-exact variant of the paper's
  representative-length arithmetic;
- ``grid(n)`` = (lengths, probability weights) for optimizers that need a discretized distribution.

Lengths are float64 tokens; continuous families are not rounded to whole tokens. Scalar arguments give a
float, arrays give arrays of the same shape. A conditional quantity over a region of zero probability
is ``nan``. Closed forms are used wherever they exist (the log-normal family's partial moments are
normal CDFs); ``expect`` integrates parametric families with a fixed Gauss-Legendre rule
(`QUAD_NODES` nodes; for the log-normal family in z = (ln x - mu) / sigma, where the integrand is
smooth) and is an exact finite sum for `Empirical`. Measured on the paper's distribution: relative error
about 1e-12 for polynomial ``f`` and below 2e-4 for an ``f`` with a kink (a piecewise-linear table);
about 0.07 ms per call.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from ..errors import PlanError
from ._random import as_generator

QUAD_NODES = 128
"""Gauss-Legendre nodes used by `LengthDistribution.expect` for parametric families."""

SPACINGS = ("log", "quantile")
_TAIL_Q = 1e-6          # unbounded supports: grid edges stop at these quantiles (outer bins keep the rest)
_Z_SPAN = 9.0           # log-normal quadrature: an infinite z bound is cut this far past the other bound


def _out(a):
    """0-d results as Python floats, arrays as float64 arrays."""
    a = np.asarray(a, dtype=float)
    return float(a) if a.ndim == 0 else a


@lru_cache(maxsize=8)
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _gl_on(lo: float, hi: float, n: int = QUAD_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [lo, hi] (empty when the interval is empty)."""
    if not hi > lo:
        return np.empty(0), np.empty(0)
    g, w = _gauss_legendre(n)
    half = 0.5 * (hi - lo)
    return lo + half * (g + 1.0), half * w


def _special():
    from scipy import (
        special,  # lazy: ~0.35 s to import, only needed for log-normal quantiles
    )

    return special


_SQRT_HALF = math.sqrt(0.5)
_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def ndtr(z):
    """The standard normal CDF, Phi(z), with the C library's erf/erfc (Cephes' formulation: erf near 0,
    erfc in the tails), so that the log-normal family's moments need no scipy at start-up."""
    x = np.asarray(z, dtype=float) * _SQRT_HALF
    ax = np.abs(x)
    with np.errstate(invalid="ignore"):
        tail = 0.5 * np.asarray(_erfc(ax), dtype=float)
        near = 0.5 + 0.5 * np.asarray(_erf(x), dtype=float)
        value = np.where(ax < _SQRT_HALF, near, np.where(x > 0, 1.0 - tail, tail))
    return value if value.ndim else float(value)


def _normal_mass(z1, z2) -> np.ndarray:
    """P(z1 < Z <= z2) for a standard normal Z (z1 <= z2), taken on the side of 0 where the two CDF
    values are small, so far-tail intervals keep their precision."""
    z1, z2 = np.asarray(z1, dtype=float), np.asarray(z2, dtype=float)
    return np.maximum(np.where(z1 >= 0, ndtr(-z1) - ndtr(-z2), ndtr(z2) - ndtr(z1)), 0.0)


class LengthDistribution(ABC):
    """A distribution of request lengths in tokens; see the module docstring for the conventions."""

    low: float   # lower end of the support, tokens (a field or property of each subclass)
    high: float  # upper end of the support, tokens; inf when unbounded

    @abstractmethod
    def mean(self) -> float:
        """E[L], tokens."""

    @abstractmethod
    def cdf(self, x):
        """P(L <= x)."""

    @abstractmethod
    def sf(self, x):
        """P(L > x), computed directly (not as 1 - cdf) where that keeps tail precision."""

    @abstractmethod
    def ppf(self, q):
        """Quantile: the smallest length x with P(L <= x) >= q, for q in [0, 1]."""

    @abstractmethod
    def partial_mean(self, t, above: bool = True):
        """E[L ; L > t] (``above``) or E[L ; L <= t], tokens: the mean restricted to the region,
        *not* divided by its probability."""

    @abstractmethod
    def _quadrature(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """Nodes x and weights w with sum(w * f(x)) ~= E[f(L) ; lo < L <= hi]."""

    def prob(self, t, above: bool = True):
        """P(L > t) (``above``) or P(L <= t)."""
        return self.sf(t) if above else self.cdf(t)

    def conditional_mean(self, t, above: bool = True):
        """E[L | L > t] (``above``) or E[L | L <= t], tokens; ``nan`` where the region is empty."""
        t_arr = np.asarray(t, dtype=float)
        p = np.asarray(self.prob(t_arr, above), dtype=float)
        m = np.asarray(self.partial_mean(t_arr, above), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(p > 0, m / np.where(p > 0, p, 1.0), np.nan)
        # Bounds that hold exactly; clipping only removes rounding in far tails.
        if above:
            value = np.clip(value, np.maximum(t_arr, self.low), self.high)
        else:
            value = np.clip(value, self.low, np.minimum(t_arr, self.high))
        return _out(value)

    def sample(self, n: int, rng: np.random.Generator | int) -> np.ndarray:
        """``n`` lengths drawn by inversion from a seeded generator (or integer seed); float64 tokens."""
        return np.asarray(self.ppf(as_generator(rng).random(int(n))), dtype=float)

    def expect(self, f: Callable[[np.ndarray], np.ndarray], t: float | None = None, above: bool = True):
        """E[f(L) ; region]: the integral of ``f`` over the region ``L > t`` (``above``) or ``L <= t``,
        or over everything when ``t`` is None -- not divided by the region's probability.

        ``f`` maps a float64 array of lengths to an array whose first axis matches (extra axes give a
        vector of expectations, e.g. several models at once). ``t`` is a scalar.
        """
        if t is None:
            lo, hi = -math.inf, math.inf
        else:
            lo, hi = (float(t), math.inf) if above else (-math.inf, float(t))
        x, w = self._quadrature(lo, hi)
        fx = np.asarray(f(x), dtype=float)
        if fx.ndim == 0:
            fx = np.broadcast_to(fx, x.shape)
        return _out(np.tensordot(w, fx, axes=(0, 0)))

    def conditional_expect(self, f: Callable[[np.ndarray], np.ndarray], t: float, above: bool = True):
        """E[f(L) | L > t] (``above``) or E[f(L) | L <= t]; ``nan`` where the region is empty."""
        p = float(self.prob(float(t), above))
        if p <= 0:
            return math.nan
        return _out(np.asarray(self.expect(f, t, above)) / p)

    def grid_edges(self, n: int, spacing: str = "log") -> np.ndarray:
        """``n + 1`` increasing bin edges (tokens) spanning the support, spaced evenly in log-length
        (``log``) or in probability (``quantile``). An unbounded end stops at the 1e-6 (or 1 - 1e-6)
        quantile; `binned` folds the mass beyond the edges into the outer bins."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise PlanError(f"grid size {n!r}: expected a whole number of bins >= 1")
        if spacing not in SPACINGS:
            raise PlanError(f"grid spacing {spacing!r}: expected one of {', '.join(SPACINGS)}")
        lo = self.low if self.low > 0 else float(self.ppf(_TAIL_Q))
        hi = self.high if math.isfinite(self.high) else float(self.ppf(1.0 - _TAIL_Q))
        if spacing == "log":
            edges = np.geomspace(lo, hi, n + 1)
        else:
            edges = np.asarray(self.ppf(np.linspace(0.0, 1.0, n + 1)), dtype=float)
        edges[0], edges[-1] = lo, hi
        return np.maximum.accumulate(np.clip(edges, lo, hi))  # rounding must not unsort the edges

    def binned(self, edges) -> tuple[np.ndarray, np.ndarray]:
        """Discretize on bins (e_i, e_i+1]: returns (lengths, weights) with ``weights[i]`` = P(L in bin i)
        and ``lengths[i]`` = E[L | L in bin i] (the bin midpoint when the bin is empty).

        Mass at or below ``edges[0]`` joins the first bin and mass above ``edges[-1]`` the last, so the
        weights sum to 1 and ``sum(weights * lengths)`` equals ``mean()``.
        """
        e = np.asarray(edges, dtype=float)
        if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) < 0):
            raise PlanError("grid edges: expected at least two non-decreasing lengths")
        cum = np.asarray(self.cdf(e), dtype=float)
        pm = np.asarray(self.partial_mean(e, above=False), dtype=float)
        cum[0], cum[-1] = 0.0, 1.0
        pm[0], pm[-1] = 0.0, self.mean()
        w = np.maximum(np.diff(cum), 0.0)
        m = np.diff(pm)
        with np.errstate(divide="ignore", invalid="ignore"):
            lengths = np.where(w > 0, m / np.where(w > 0, w, 1.0), 0.5 * (e[:-1] + e[1:]))
        return lengths, w

    def grid(self, n: int, spacing: str = "log") -> tuple[np.ndarray, np.ndarray]:
        """(lengths, probability weights) of ``n`` bins from `grid_edges` (see `binned`)."""
        return self.binned(self.grid_edges(n, spacing))


def _check_finite(name: str, value: float, *, positive: bool = False, allow_inf: bool = False) -> None:
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf) or (positive and v <= 0):
        raise PlanError(f"{name} {value!r}: expected a {'positive' if positive else 'finite'} number")


# ----------------------------------------------------------------------------------------------------
# Log-normal family


class _LogNormalFamily(LengthDistribution):
    """ln L ~ Normal(mu, sigma^2) restricted to [low, high]; subclasses provide the four parameters.

    With a = (ln low - mu)/sigma, b = (ln high - mu)/sigma, Z = Phi(b) - Phi(a), c(x) = clip((ln x - mu)
    / sigma, a, b) and M = exp(mu + sigma^2 / 2):
    cdf = (Phi(c) - Phi(a)) / Z, E[L ; L <= x] = M (Phi(c - sigma) - Phi(a - sigma)) / Z, and the same
    with (c, b) for the upper region.
    """

    mu: float
    sigma: float

    def _check(self) -> None:
        _check_finite("mu", self.mu)
        _check_finite("sigma", self.sigma, positive=True)
        if not (0 <= self.low < self.high):
            raise PlanError(f"log-normal bounds [{self.low}, {self.high}]: expected 0 <= low < high")
        if self._mass <= 0:
            raise PlanError(f"log-normal mu {self.mu}, sigma {self.sigma}: no probability mass in "
                            f"[{self.low}, {self.high}]")

    @cached_property
    def _ab(self) -> tuple[float, float]:
        a = (math.log(self.low) - self.mu) / self.sigma if self.low > 0 else -math.inf
        b = (math.log(self.high) - self.mu) / self.sigma if math.isfinite(self.high) else math.inf
        return a, b

    @cached_property
    def _mass(self) -> float:
        return float(_normal_mass(*self._ab))

    def _z(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(x > 0, (np.log(np.where(x > 0, x, 1.0)) - self.mu) / self.sigma, -np.inf)
        a, b = self._ab
        return np.clip(z, a, b)

    @property
    def _scale(self) -> float:
        """M / Z: partial means are this times a normal mass shifted by sigma."""
        return math.exp(self.mu + self.sigma**2 / 2) / self._mass

    def mean(self) -> float:
        a, b = self._ab
        return float(self._scale * _normal_mass(a - self.sigma, b - self.sigma))

    def cdf(self, x):
        a, _ = self._ab
        return _out(np.clip(_normal_mass(a, self._z(x)) / self._mass, 0.0, 1.0))

    def sf(self, x):
        _, b = self._ab
        return _out(np.clip(_normal_mass(self._z(x), b) / self._mass, 0.0, 1.0))

    def ppf(self, q):
        sp = _special()
        a, b = self._ab
        q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lower = sp.ndtri(ndtr(a) + q * self._mass)            # precise for small q
            upper = -sp.ndtri(ndtr(-b) + (1.0 - q) * self._mass)  # precise for q near 1
        z = np.clip(np.where(q <= 0.5, lower, upper), a, b)
        return _out(np.clip(np.exp(self.mu + self.sigma * z), self.low, self.high))

    def partial_mean(self, t, above: bool = True):
        a, b = self._ab
        c = self._z(t) - self.sigma
        mass = _normal_mass(c, b - self.sigma) if above else _normal_mass(a - self.sigma, c)
        return _out(self._scale * mass)

    def _quadrature(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        za, zb = float(self._z(lo)), float(self._z(hi))
        # Cut an infinite end far enough out that even f(L) ~ L^3 has negligible weight beyond it.
        if math.isinf(zb):
            zb = (max(za, 0.0) if math.isfinite(za) else 0.0) + _Z_SPAN + 3.0 * self.sigma
        if math.isinf(za):
            za = min(zb, 0.0) - _Z_SPAN
        z, w = _gl_on(za, zb)
        w = w * np.exp(-0.5 * z * z) / (math.sqrt(2.0 * math.pi) * self._mass)
        return np.exp(self.mu + self.sigma * z), w


@dataclass(frozen=True)
class TruncatedLogNormal(_LogNormalFamily):
    """ln L ~ Normal(mu, sigma^2) conditioned on low <= L <= high (tokens).

    The PrfaaS case study uses mu = 9.90, sigma = 1.00, [128, 131072] (see `paper_workload`).
    """

    mu: float
    sigma: float
    low: float
    high: float

    def __post_init__(self) -> None:
        _check_finite("low", self.low)
        _check_finite("high", self.high, allow_inf=True)
        self._check()


@dataclass(frozen=True)
class LogNormal(_LogNormalFamily):
    """ln L ~ Normal(mu, sigma^2), support (0, inf) tokens."""

    mu: float
    sigma: float

    def __post_init__(self) -> None:
        self._check()

    @property
    def low(self) -> float:
        return 0.0

    @property
    def high(self) -> float:
        return math.inf


# ----------------------------------------------------------------------------------------------------
# Uniform and fixed


@dataclass(frozen=True)
class Uniform(LengthDistribution):
    """L uniform on [low, high] tokens (continuous)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _check_finite("low", self.low)
        _check_finite("high", self.high)
        if not (0 <= self.low < self.high):
            raise PlanError(f"uniform bounds [{self.low}, {self.high}]: expected 0 <= low < high")

    def mean(self) -> float:
        return 0.5 * (self.low + self.high)

    def cdf(self, x):
        return _out(np.clip((np.asarray(x, dtype=float) - self.low) / (self.high - self.low), 0.0, 1.0))

    def sf(self, x):
        return _out(np.clip((self.high - np.asarray(x, dtype=float)) / (self.high - self.low), 0.0, 1.0))

    def ppf(self, q):
        return _out(self.low + np.clip(np.asarray(q, dtype=float), 0.0, 1.0) * (self.high - self.low))

    def partial_mean(self, t, above: bool = True):
        c = np.clip(np.asarray(t, dtype=float), self.low, self.high)
        width = 2.0 * (self.high - self.low)
        return _out((self.high**2 - c * c) / width if above else (c * c - self.low**2) / width)

    def _quadrature(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        x, w = _gl_on(max(lo, self.low), min(hi, self.high))
        return x, w / (self.high - self.low)


@dataclass(frozen=True)
class Fixed(LengthDistribution):
    """Every request has the same length ``value`` tokens (e.g. the paper's 1,024 output tokens)."""

    value: float

    def __post_init__(self) -> None:
        _check_finite("fixed length", self.value, positive=True)

    @property
    def low(self) -> float:
        return float(self.value)

    @property
    def high(self) -> float:
        return float(self.value)

    def mean(self) -> float:
        return float(self.value)

    def cdf(self, x):
        return _out(np.asarray(x, dtype=float) >= self.value)

    def sf(self, x):
        return _out(np.asarray(x, dtype=float) < self.value)

    def ppf(self, q):
        return _out(np.full(np.shape(q), float(self.value)))

    def partial_mean(self, t, above: bool = True):
        inside = np.asarray(t, dtype=float) < self.value if above else np.asarray(t, dtype=float) >= self.value
        return _out(inside * float(self.value))

    def _quadrature(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        return np.array([float(self.value)]), np.array([1.0 if lo < self.value <= hi else 0.0])


# ----------------------------------------------------------------------------------------------------
# Empirical


@dataclass(frozen=True, eq=False, repr=False)
class Empirical(LengthDistribution):
    """The distribution of observed lengths (tokens), optionally weighted; every answer is an exact sum.

    ``values`` holds the distinct lengths with positive weight, sorted, and ``probs`` their
    probabilities. Quantiles are inverted-CDF quantiles (always an observed length).
    """

    lengths: np.ndarray
    weights: np.ndarray | None = None
    values: np.ndarray = field(init=False)
    probs: np.ndarray = field(init=False)
    _cum: np.ndarray = field(init=False)      # _cum[i] = P(L < values[i]); last entry 1
    _tail: np.ndarray = field(init=False)     # _tail[i] = P(L >= values[i]); last entry 0
    _mcum: np.ndarray = field(init=False)     # same for E[L ; ...]
    _mtail: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths, dtype=float).ravel()
        if lengths.size == 0:
            raise PlanError("empirical distribution: expected at least one length")
        if not np.all(np.isfinite(lengths)) or np.any(lengths < 0):
            raise PlanError("empirical distribution: expected finite lengths >= 0 tokens")
        if self.weights is None:
            weights = np.ones_like(lengths)
        else:
            weights = np.asarray(self.weights, dtype=float).ravel()
            if weights.shape != lengths.shape:
                raise PlanError(f"empirical distribution: {weights.size} weights for {lengths.size} lengths")
            if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
                raise PlanError("empirical distribution: expected finite weights >= 0 with a positive sum")
        values, inverse = np.unique(lengths, return_inverse=True)
        mass = np.bincount(inverse, weights=weights, minlength=values.size)
        keep = mass > 0
        values, mass = values[keep], mass[keep]
        total = mass.sum()
        probs = mass / total
        pv = probs * values
        # Sum raw weights before dividing, so counts give exact fractions (cdf = 0.5 at the median).
        cum = np.concatenate([[0.0], np.cumsum(mass) / total])
        cum[-1] = 1.0
        tail = np.concatenate([np.cumsum(mass[::-1])[::-1] / total, [0.0]])
        tail[0] = 1.0
        mcum = np.concatenate([[0.0], np.cumsum(pv)])
        mtail = np.concatenate([np.cumsum(pv[::-1])[::-1], [0.0]])
        for name, value in (("values", values), ("probs", probs), ("_cum", cum), ("_tail", tail),
                            ("_mcum", mcum), ("_mtail", mtail)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"Empirical({self.values.size} distinct lengths, mean {self.mean():,.1f})"

    @property
    def low(self) -> float:
        return float(self.values[0])

    @property
    def high(self) -> float:
        return float(self.values[-1])

    def mean(self) -> float:
        return float(self._mtail[0])

    def _index(self, x) -> np.ndarray:
        """Number of distinct values <= x."""
        return np.searchsorted(self.values, np.asarray(x, dtype=float), side="right")

    def cdf(self, x):
        return _out(self._cum[self._index(x)])

    def sf(self, x):
        return _out(self._tail[self._index(x)])

    def ppf(self, q):
        q = np.asarray(q, dtype=float)
        idx = np.searchsorted(self._cum[1:], q, side="left")
        return _out(self.values[np.clip(idx, 0, self.values.size - 1)])

    def partial_mean(self, t, above: bool = True):
        idx = self._index(t)
        return _out(self._mtail[idx] if above else self._mcum[idx])

    def _quadrature(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        i0, i1 = np.searchsorted(self.values, [lo, hi], side="right")
        return self.values[i0:i1], self.probs[i0:i1]

    def grid(self, n: int, spacing: str = "log") -> tuple[np.ndarray, np.ndarray]:
        """The exact support when it has at most ``n`` distinct lengths, else ``n`` bins (see `binned`)."""
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and self.values.size <= n:
            return self.values.copy(), self.probs.copy()
        return super().grid(n, spacing)
