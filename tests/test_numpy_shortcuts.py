"""The numpy shortcuts that keep ``numpy.ma`` out of a cold start give numpy's own answers, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from prfaas_plan.analytic.search import sorted_unique
from prfaas_plan.analytic.uncertainty import QUANTILES, percentiles

FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
SAMPLES = arrays(np.float64, st.integers(1, 60), elements=st.one_of(FLOATS, st.sampled_from([0.0, -0.0, 1.0])))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bits, signed zeros included; any NaN equals any NaN (payload bits are no figure)."""
    nan = np.isnan(a)
    return (a.shape == b.shape and a.dtype == b.dtype and np.array_equal(nan, np.isnan(b))
            and a[~nan].tobytes() == b[~nan].tobytes())


@settings(derandomize=True, max_examples=400, deadline=None)
@given(SAMPLES, st.lists(st.floats(0, 100), min_size=1, max_size=5))
def test_percentiles_are_numpys(values, qs):
    with np.errstate(all="ignore"):
        assert _same(percentiles(values, qs), np.percentile(values, qs))
        assert _same(percentiles(values, QUANTILES), np.percentile(values, QUANTILES))


@settings(derandomize=True, max_examples=400, deadline=None)
@given(arrays(np.float64, st.integers(0, 60), elements=st.floats(allow_nan=False, width=64)))
def test_sorted_unique_is_numpys(values):
    assert _same(sorted_unique(values), np.unique(values))
