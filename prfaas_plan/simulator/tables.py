"""A prefill model read from the simulator's own service table, so that re-optimizing the threshold in
the middle of a run costs table look-ups instead of re-evaluating the original model."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TablePrefill:
    """`PrefillModel` with ``table_s[l]`` seconds at every whole length ``l`` (linear in between, clamped
    at the ends)."""

    table_s: np.ndarray
    source: str
    lengths: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lengths", np.arange(len(self.table_s), dtype=float))

    def latency_s(self, l) -> np.ndarray:
        """Seconds to prefill ``l`` tokens (a table look-up for whole lengths in range)."""
        l = np.asarray(l, dtype=float)
        whole = l.astype(np.int64)
        if l.size and np.array_equal(whole, l) and whole.min() >= 0 and whole.max() < len(self.table_s):
            return self.table_s[whole]
        return np.interp(l, self.lengths, self.table_s)
