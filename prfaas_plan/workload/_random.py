"""One way to turn a seed into a numpy random generator, shared by sampling and arrival processes."""

from __future__ import annotations

import numpy as np


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """A `numpy.random.Generator` from a generator (used as is) or an integer seed.

    ``None`` is refused: every random draw in the planner is seeded, so results are reproducible.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng: expected a numpy Generator or an integer seed, got {rng!r}")
