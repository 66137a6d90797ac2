"""Length distributions: closed forms against Monte Carlo, exact empirical sums, invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.workload import (
    Empirical,
    Fixed,
    LogNormal,
    TruncatedLogNormal,
    Uniform,
)

PAPER = TruncatedLogNormal(9.90, 1.00, 128, 131072)
PARAMETRIC = [PAPER, LogNormal(8.0, 1.5), Uniform(128, 32768), TruncatedLogNormal(7.0, 2.0, 1000, math.inf)]


# ----------------------------------------------------------------------------------------------------
# The paper's distribution (brief section 7): report what the closed forms give, under both K readings.


def test_paper_mean_under_both_k_conventions():
    assert PAPER.mean() == pytest.approx(27_485.7, abs=0.1)   # 128K = 131,072
    assert TruncatedLogNormal(9.90, 1.00, 128, 128_000).mean() == pytest.approx(27_312.7, abs=0.1)


@pytest.mark.parametrize("high,t,p,above", [
    (131_072, 19_400, 0.49572, 45_045.6),      # t = 19,400 tokens: the paper's 49.6% and 44K (x 1024)
    (131_072, 19_866, 0.48597, 45_555.6),      # t = 19.4 x 1024
    (128_000, 19_400, 0.49487, 44_756.3),
    (128_000, 19_866, 0.48510, 45_262.2),
])
def test_paper_routing_figures(high, t, p, above):
    d = TruncatedLogNormal(9.90, 1.00, 128, high)
    assert d.sf(t) == pytest.approx(p, abs=1e-5)
    assert d.conditional_mean(t) == pytest.approx(above, abs=0.5)


# ----------------------------------------------------------------------------------------------------
# Closed forms against seeded Monte Carlo: 400k draws, each estimate within 4 standard errors.


def assert_mc_mean(samples: np.ndarray, expected: float) -> None:
    """The sample mean is within 4 standard errors of ``expected``."""
    se = samples.std() / math.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= 4 * se, (samples.mean(), expected, se)


@pytest.mark.parametrize("dist", PARAMETRIC, ids=repr)
def test_closed_forms_match_monte_carlo(dist):
    x = dist.sample(400_000, 7)
    assert_mc_mean(x, dist.mean())
    for q in (0.2, 0.5, 0.8):
        t = float(dist.ppf(q))
        assert_mc_mean((x > t).astype(float), dist.sf(t))
        assert_mc_mean(x[x > t], dist.conditional_mean(t, above=True))
        assert_mc_mean(x[x <= t], dist.conditional_mean(t, above=False))


def test_sampling_is_seeded():
    assert np.array_equal(PAPER.sample(1000, 3), PAPER.sample(1000, np.random.default_rng(3)))
    assert not np.array_equal(PAPER.sample(1000, 3), PAPER.sample(1000, 4))
    with pytest.raises(TypeError):
        PAPER.sample(10, None)


# ----------------------------------------------------------------------------------------------------
# expect(): quadrature against closed forms


@pytest.mark.parametrize("dist", PARAMETRIC, ids=repr)
def test_expect_matches_closed_forms(dist):
    assert dist.expect(lambda x: x) == pytest.approx(dist.mean(), rel=1e-9)
    assert dist.expect(lambda x: np.ones_like(x)) == pytest.approx(1.0, rel=1e-9)
    for q in (0.1, 0.5, 0.9):
        t = float(dist.ppf(q))
        assert dist.expect(lambda x: x, t) == pytest.approx(dist.partial_mean(t), rel=1e-9)
        assert dist.expect(lambda x: x, t, above=False) == pytest.approx(dist.partial_mean(t, False), rel=1e-9)
        assert dist.expect(lambda x: 1.0, t) == pytest.approx(dist.sf(t), rel=1e-9)
        assert dist.conditional_expect(lambda x: x, t) == pytest.approx(dist.conditional_mean(t), rel=1e-9)


def test_expect_second_moment_and_vector_valued_f():
    d = LogNormal(9.0, 0.8)
    assert d.expect(lambda x: x**2) == pytest.approx(math.exp(2 * 9.0 + 2 * 0.8**2), rel=1e-9)
    both = PAPER.expect(lambda x: np.stack([x, x * x], axis=1), 19_400)
    assert both.shape == (2,) and both[0] == pytest.approx(PAPER.partial_mean(19_400), rel=1e-9)


def test_expect_with_a_kink_is_accurate_to_1e_3():
    # min(L, k) has a kink at k; E[min(L, k)] = E[L; L <= k] + k P(L > k) exactly.
    for k in (5_000, 20_000, 60_000):
        exact = PAPER.partial_mean(k, above=False) + k * PAPER.sf(k)
        assert PAPER.expect(lambda x: np.minimum(x, k)) == pytest.approx(exact, rel=1e-3)


def test_expect_of_a_prefill_time_model_matches_monte_carlo():
    f = lambda l: 0.02 + 2e-5 * l + 3e-10 * l * l  # noqa: E731  seconds, convex like T_prefill
    x = PAPER.sample(1_000_000, 11)
    assert_mc_mean(f(x[x > 19_400]), PAPER.conditional_expect(f, 19_400))
    # Jensen: the representative length understates a convex cost.
    assert PAPER.conditional_expect(f, 19_400) > f(PAPER.conditional_mean(19_400))


# ----------------------------------------------------------------------------------------------------
# Quantiles and grids


@pytest.mark.parametrize("dist", PARAMETRIC, ids=repr)
def test_ppf_inverts_cdf(dist):
    q = np.array([1e-6, 0.01, 0.25, 0.5, 0.75, 0.99, 1 - 1e-6])
    assert np.allclose(dist.cdf(dist.ppf(q)), q, atol=1e-9)
    assert dist.ppf(0.0) == pytest.approx(dist.low)


@pytest.mark.parametrize("spacing", ["log", "quantile"])
@pytest.mark.parametrize("dist", PARAMETRIC + [Fixed(1024), Empirical([100, 200, 200, 5000] * 50)], ids=repr)
def test_grid_keeps_mass_and_mean(dist, spacing):
    lengths, weights = dist.grid(64, spacing)
    assert lengths.shape == weights.shape
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(weights >= 0)
    assert np.dot(lengths, weights) == pytest.approx(dist.mean(), rel=1e-9)


def test_paper_grid_edges_are_the_support():
    edges = PAPER.grid_edges(8, "log")
    assert edges[0] == 128 and edges[-1] == 131072
    assert np.allclose(np.diff(np.log(edges)), math.log(1024) / 8)


def test_grid_rejects_bad_arguments():
    with pytest.raises(PlanError, match="grid size"):
        PAPER.grid(0)
    with pytest.raises(PlanError, match="spacing"):
        PAPER.grid(8, "linear")


# ----------------------------------------------------------------------------------------------------
# Empirical: exact


def test_empirical_is_exact():
    e = Empirical([1, 2, 2, 5], weights=[1, 1, 1, 2])   # P(1)=1/5, P(2)=2/5, P(5)=2/5
    assert e.mean() == pytest.approx((1 + 4 + 10) / 5, abs=1e-15)
    assert e.cdf(2) == pytest.approx(3 / 5) and e.sf(2) == pytest.approx(2 / 5)
    assert e.cdf(0.5) == 0 and e.sf(5) == 0
    assert e.conditional_mean(1) == pytest.approx((4 + 10) / 4)
    assert e.conditional_mean(2, above=False) == pytest.approx(5 / 3)
    assert math.isnan(e.conditional_mean(5))
    assert e.expect(lambda x: x**2) == pytest.approx((1 + 8 + 50) / 5)
    assert e.expect(lambda x: x**2, 1) == pytest.approx((8 + 50) / 5)
    assert list(e.ppf([0.0, 0.2, 0.2001, 0.6, 1.0])) == [1, 1, 2, 2, 5]
    lengths, weights = e.grid(10)
    assert list(lengths) == [1, 2, 5] and np.allclose(weights, [0.2, 0.4, 0.4])


def test_empirical_quantiles_are_inverted_cdf_percentiles():
    x = PAPER.sample(20_001, 5).round()
    q = np.array([0.0, 0.01, 0.5, 0.9, 0.99, 1.0])
    assert np.array_equal(Empirical(x).ppf(q), np.percentile(x, q * 100, method="inverted_cdf"))


@pytest.mark.parametrize("lengths,weights,needle", [
    ([], None, "at least one"),
    ([1, -2], None, ">= 0"),
    ([1, np.nan], None, "finite"),
    ([1, 2], [1], "weights for"),
    ([1, 2], [0, 0], "positive sum"),
])
def test_empirical_rejects_bad_input(lengths, weights, needle):
    with pytest.raises(PlanError, match=needle):
        Empirical(lengths, weights)


@pytest.mark.parametrize("make,needle", [
    (lambda: TruncatedLogNormal(9.9, 0.0, 128, 1000), "sigma"),
    (lambda: TruncatedLogNormal(9.9, 1.0, 1000, 128), "low < high"),
    (lambda: TruncatedLogNormal(9.9, 0.01, 1, 2), "no probability mass"),
    (lambda: LogNormal(math.nan, 1.0), "mu"),
    (lambda: Uniform(5, 5), "low < high"),
    (lambda: Fixed(0), "positive"),
])
def test_parameters_are_checked(make, needle):
    with pytest.raises(PlanError, match=needle):
        make()


def test_fixed_and_uniform_closed_forms():
    f = Fixed(1024)
    assert f.sf(1023) == 1 and f.sf(1024) == 0 and f.conditional_mean(10) == 1024
    assert math.isnan(f.conditional_mean(2000)) and f.expect(lambda x: x * 2) == 2048
    u = Uniform(0, 100)
    assert u.conditional_mean(50) == pytest.approx(75) and u.conditional_mean(50, False) == pytest.approx(25)
    assert u.expect(lambda x: x**2) == pytest.approx(100**2 / 3)


# ----------------------------------------------------------------------------------------------------
# Properties

# Truncation intervals starting between 6 sigma below and 3 sigma above the median.
lognormals = st.builds(
    lambda mu, sigma, za, span: TruncatedLogNormal(mu, sigma, math.exp(mu + sigma * za),
                                                   math.exp(mu + sigma * za) * span),
    st.floats(5.0, 12.0), st.floats(0.2, 2.5), st.floats(-6.0, 3.0), st.floats(1.5, 4096.0))
empiricals = st.lists(st.integers(1, 200_000), min_size=1, max_size=60).map(Empirical)
uniforms = st.builds(lambda low, width: Uniform(low, low + width), st.floats(0.0, 1e5), st.floats(1.0, 1e5))
distributions = st.one_of(lognormals, empiricals, uniforms)
thresholds = st.lists(st.floats(0.0, 300_000.0), min_size=2, max_size=12)


@settings(max_examples=150, deadline=None)
@given(distributions, thresholds)
def test_tail_and_conditional_means_are_consistent(dist, ts):
    t = np.sort(np.asarray(ts))
    sf = dist.sf(t)
    assert np.all(np.diff(sf) <= 1e-12)                      # sf non-increasing in t
    assert np.allclose(sf + dist.cdf(t), 1.0, atol=1e-9)
    above, below = dist.conditional_mean(t, True), dist.conditional_mean(t, False)
    ok_above, ok_below = np.isfinite(above), np.isfinite(below)
    assert np.all(above[ok_above] >= t[ok_above])           # E[L | L > t] >= t
    assert np.all(below[ok_below] <= t[ok_below])           # E[L | L <= t] <= t
    assert np.all(ok_above == (sf > 0)) and np.all(ok_below == (dist.cdf(t) > 0))
    pm = dist.partial_mean(t, True) + dist.partial_mean(t, False)
    assert np.allclose(pm, dist.mean(), rtol=1e-9)
