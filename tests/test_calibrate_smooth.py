"""The calibration's smooth objective (docs/methods.md section 2, "A smooth objective"): the bounded map of the
stack terms is a parameterisation (inside its bounds, the identity to within its corner width), the smoothed
maxima are only the solver's first stages (the fit's last stage and every prediction are the exact model),
and the planner's closed queue is untouched by them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.performance import calibrate as cal
from prfaas_plan.performance.closed_queue import closed_queue, smooth_max
from prfaas_plan.performance.measurements import load_measurements
from prfaas_plan.profiles import get_stack

MOONCAKE = "mooncake_h20_qwen3_235b_pd.csv"
LOWER, UPPER = np.log(1e-4), np.log(0.06)   # a stack term's bounds in log (seconds): latency_s under an engine cap


def test_zero_width_is_the_hard_clip():
    z = np.linspace(LOWER - 3.0, UPPER + 3.0, 41)
    assert np.array_equal(cal._saturate(z, LOWER, UPPER, 0.0), np.clip(z, LOWER, UPPER))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(LOWER - 20.0, UPPER + 20.0), st.sampled_from([0.03, 0.1, 0.3]))
def test_saturation_is_a_smooth_bounded_map(z, width):
    y = float(cal._saturate(np.array([z]), LOWER, UPPER, width)[0])
    assert LOWER <= y <= UPPER
    # the identity to within width * exp(-d / width) (both corners) at a distance d from the nearer bound
    d = min(z - LOWER, UPPER - z)
    if d > 0:
        assert abs(y - z) <= 2.0 * width * np.exp(-d / width) + 1e-12
    # monotone with a slope in (0, 1]: no kink, and a term never moves faster than its deviation
    h = 1e-6
    slope = (cal._saturate(np.array([z + h]), LOWER, UPPER, width)[0]
             - cal._saturate(np.array([z - h]), LOWER, UPPER, width)[0]) / (2 * h)
    assert -1e-6 <= slope <= 1.0 + 1e-6   # central difference, rounding ~1e-9


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(0.0, 1e3), st.floats(0.0, 1e3), st.sampled_from([2.0, 8.0, 32.0]))
def test_smooth_max_bounds_the_max(a, b, p):
    m = float(smooth_max(a, b, p))
    top = max(a, b)
    assert top * (1 - 1e-12) <= m <= top * 2.0 ** (1.0 / p) * (1 + 1e-12)


def _queue_inputs():
    rng = np.random.default_rng(7)   # seeded: arrays of plausible closed-loop benchmarks, seconds and counts
    n = 64
    alone = rng.uniform(0.05, 1.0, n)
    return dict(latency=rng.uniform(0.0, 0.05, n), alone=alone, full=alone * rng.uniform(1.0, 8.0, n),
                per_forward=rng.integers(1, 16, n).astype(float), busy=alone * rng.uniform(0.2, 1.0, n),
                forwards_per_prompt=rng.uniform(0.1, 2.0, n), step=rng.uniform(0.005, 0.05, n),
                chunks=rng.integers(1, 4, n).astype(float), concurrency=rng.integers(1, 512, n).astype(float),
                osl=rng.integers(2, 2048, n).astype(float), wave_fraction=rng.uniform(0.0, 1.0, n),
                request_overhead=rng.uniform(0.0, 0.01, n))


def test_closed_queue_default_is_the_exact_model_and_smoothing_approaches_it():
    args = _queue_inputs()
    exact = closed_queue(**args)
    assert all(np.array_equal(a, b) for a, b in zip(exact, closed_queue(**args, sharpness=None)))
    gaps = [max(float(np.max(np.abs(s / e - 1.0))) for s, e in zip(closed_queue(**args, sharpness=p), exact))
            for p in (4.0, 16.0, 64.0)]
    assert gaps[0] > gaps[1] > gaps[2]


@pytest.fixture(scope="module")
def mooncake_problem():
    points = [cal._engine_level(m) for m in load_measurements(MOONCAKE)[0]]
    params = cal._params(sorted({m.chip for m in points}), sorted({get_stack(m.stack).name for m in points}),
                         sorted({cal.harness_of(m) for m in points} - {""}))
    return points, params, cal._Problem(points, params)


def test_fit_ends_on_the_exact_model(mooncake_problem, monkeypatch):
    points, params, problem = mooncake_problem
    monkeypatch.setitem(cal.SMOOTHING, "continuation", (8.0,))
    res, _ = cal._solve(problem, params, np.ones(len(points), bool), params.centre.copy(), full=True)
    assert [g["sharpness"] for g in res.stages] == [8.0, None]
    assert res.cost == pytest.approx(res.stages[-1]["cost"])
    # the residuals the fit reports are the exact model's, not the smoothed one's
    residuals, _ = cal._residual_fn(problem, params, np.ones(len(points), bool))
    assert np.allclose(residuals(res.x), res.fun)
