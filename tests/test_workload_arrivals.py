"""Arrival processes: seeded determinism, rates and burstiness."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.errors import PlanError
from prfaas_plan.workload import (
    BUNDLED_TRACE,
    empirical_rate,
    gamma_arrivals,
    load_trace,
    mmpp_arrivals,
    poisson_arrivals,
    rescale,
    trace_arrivals,
)


def _cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


@pytest.mark.parametrize("make", [
    lambda seed: poisson_arrivals(4.0, 5000, seed),
    lambda seed: gamma_arrivals(4.0, 5000, 2.5, seed),
    lambda seed: mmpp_arrivals([1.0, 12.0], [30.0, 5.0], 5000, seed),
])
def test_seeded_deterministic_and_sorted(make):
    a, b, c = make(1), make(1), make(2)
    assert a.shape == (5000,) and np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.all(np.diff(a) >= 0) and a[0] > 0


def test_poisson_rate_and_cv():
    t = poisson_arrivals(4.0, 200_000, 0)
    assert empirical_rate(t) == pytest.approx(4.0, rel=0.01)
    assert _cv(t) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("cv", [0.5, 3.0])
def test_gamma_renewal_cv(cv):
    t = gamma_arrivals(2.0, 200_000, cv, 0)
    assert empirical_rate(t) == pytest.approx(2.0, rel=0.02)
    assert _cv(t) == pytest.approx(cv, rel=0.03)


def test_mmpp_long_run_rate_and_burstiness():
    t = mmpp_arrivals([1.0, 12.0], [30.0, 5.0], 300_000, 0)
    assert empirical_rate(t) == pytest.approx((30 + 60) / 35, rel=0.03)
    assert _cv(t) > 1.2          # modulated: burstier than Poisson


def test_trace_arrivals_and_rescale():
    t = trace_arrivals(load_trace(BUNDLED_TRACE))
    assert t[0] == 0 and t[-1] == pytest.approx(3536.999)
    assert empirical_rate(t) == pytest.approx(3.4012, abs=1e-4)
    fast = rescale(t, 10.0)
    assert empirical_rate(fast) == pytest.approx(10.0) and np.allclose(fast / fast[-1], t / t[-1])


def test_bad_arguments(tmp_path):
    with pytest.raises(PlanError, match="arrival rate 0"):
        poisson_arrivals(0, 10, 1)
    with pytest.raises(PlanError, match="coefficient of variation -1"):
        gamma_arrivals(1.0, 10, -1, 1)
    with pytest.raises(PlanError, match="request count -3"):
        poisson_arrivals(1.0, -3, 1)
    with pytest.raises(PlanError, match="one rate and one mean dwell time per state"):
        mmpp_arrivals([1.0, 2.0], [1.0], 10, 1)
    with pytest.raises(PlanError, match="at least one positive"):
        mmpp_arrivals([0.0, 0.0], [1.0, 1.0], 10, 1)
    with pytest.raises(PlanError, match="at least two distinct times"):
        empirical_rate(np.array([1.0]))
    path = tmp_path / "t.csv"
    path.write_text("input_length,output_length\n10,1\n")
    with pytest.raises(PlanError, match="no timestamps"):
        trace_arrivals(load_trace(path))
