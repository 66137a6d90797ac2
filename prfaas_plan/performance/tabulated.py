"""Prefill latency from a measured (or given) table, interpolated in a way that respects its shape.

Prefill time is affine in length for the GEMMs and quadratic for full attention, so the default
``quadratic`` method fits ``T(l) = a + b*l + c*l^2`` with non-negative coefficients by relative least
squares (scipy NNLS); it is smooth, monotone and extrapolates physically. ``pchip`` passes exactly
through every point (monotone cubic) and uses the quadratic fit outside the measured range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

METHODS = ("quadratic", "pchip")


@dataclass(frozen=True)
class TabulatedPrefill:
    """``T_prefill(l)`` from points ``(lengths, latencies)``; lengths in tokens, latency in seconds."""

    lengths: tuple[float, ...]
    latencies_s: tuple[float, ...]
    source: str
    method: str = "quadratic"
    coeffs: tuple[float, float, float] = field(init=False)

    def __post_init__(self) -> None:
        from scipy.optimize import nnls

        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}")
        l = np.asarray(self.lengths, dtype=float)
        t = np.asarray(self.latencies_s, dtype=float)
        design = np.vstack([np.ones_like(l), l, l * l]).T / t[:, None]
        coeffs, _ = nnls(design, np.ones_like(t))
        object.__setattr__(self, "coeffs", tuple(float(c) for c in coeffs))

    def quadratic_s(self, l) -> np.ndarray:
        """The fitted ``a + b*l + c*l^2`` in seconds."""
        a, b, c = self.coeffs
        l = np.asarray(l, dtype=float)
        return a + b * l + c * l * l

    def latency_s(self, l) -> np.ndarray:
        """Seconds to prefill ``l`` tokens (vectorized over any array of lengths)."""
        if self.method == "quadratic":
            return self.quadratic_s(l)
        from scipy.interpolate import PchipInterpolator

        l = np.asarray(l, dtype=float)
        lo, hi = self.lengths[0], self.lengths[-1]
        inside = PchipInterpolator(self.lengths, self.latencies_s)(np.clip(l, lo, hi))
        # Outside the table, continue from the end point along the quadratic's slope.
        below = self.latencies_s[0] + self.quadratic_s(l) - self.quadratic_s(lo)
        above = self.latencies_s[-1] + self.quadratic_s(l) - self.quadratic_s(hi)
        return np.where(l < lo, np.maximum(below, 0.0), np.where(l > hi, above, inside))
