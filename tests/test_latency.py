"""Analytic latency under load: queueing formulas, limits, and the case study's layout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from prfaas_plan.analytic.latency import (
    METHOD,
    erlang_c,
    pool_wait,
    rdma_efficiency,
    ttft_under_load,
)
from prfaas_plan.analytic.search import grid_search
from prfaas_plan.analytic.throughput import LengthGrid
from prfaas_plan.analytic.ttft import ttft_summary
from prfaas_plan.errors import PlanError
from prfaas_plan.layout import Link, homogeneous_pd, prfaas_pd
from prfaas_plan.planning import case_study as paper

MU, SIGMA, LO, HI = 9.90, 1.00, 128, 128_000


def paper_grid(n: int = 2048) -> LengthGrid:
    """The paper's truncated log-normal as n equally likely mid-quantiles (inverse CDF)."""
    a, b = norm.cdf((math.log(LO) - MU) / SIGMA), norm.cdf((math.log(HI) - MU) / SIGMA)
    u = (np.arange(n) + 0.5) / n
    return LengthGrid(np.exp(MU + SIGMA * norm.ppf(a + u * (b - a))), np.full(n, 1.0 / n))


@pytest.fixture(scope="module")
def case():
    grid = paper_grid()
    perf = paper.case_study_perf("paper")
    ev = grid_search(prfaas_pd("32xH200", "64xH20", Link(100e9)), grid, perf, "exact").best
    layout = prfaas_pd("32xH200", "64xH20", Link(100e9), local_prefill=ev.n_prefill, threshold=ev.threshold)
    return grid, perf, ev, layout


def test_erlang_c_known_values():
    assert erlang_c(1, 0.5) == pytest.approx(0.5)          # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0)    # textbook value
    assert erlang_c(3, 3.0) == 1.0 and erlang_c(3, 0.0) == 0.0


def test_pool_wait_is_exact_for_single_server():
    # M/D/1 (SCV 0) and M/M/1-like SCV 1: Pollaczek-Khinchine mean waits
    d = pool_wait(0.5, 1, [1.0], [1.0])
    assert d.mean_wait_s == pytest.approx(0.5 / (2 * 0.5))
    two_point = pool_wait(0.25, 1, [1.0, 3.0], [0.5, 0.5])  # E[S] = 2, E[S^2] = 5
    assert two_point.mean_wait_s == pytest.approx(0.25 * 5 / (2 * (1 - 0.5)))
    assert pool_wait(2.0, 1, [1.0], [1.0]).mean_wait_s == math.inf


def test_rdma_efficiency_follows_mooncake_points():
    assert rdma_efficiency(0.049e9) == pytest.approx(0.119)
    assert rdma_efficiency(12.62e9) == pytest.approx(0.822)
    assert rdma_efficiency(1e6) == pytest.approx(0.119) and rdma_efficiency(1e12) == pytest.approx(0.822)
    assert 0.497 < rdma_efficiency(0.6e9) < 0.613


def test_low_load_matches_unloaded_ttft(case):
    grid, perf, ev, layout = case
    un = ttft_summary(layout, grid, perf, ev.threshold)
    lo = ttft_under_load(layout, grid, perf, load=1e-4)
    for a, b in ((lo.mean_s, un.mean_s), (lo.p50_s, un.p50_s), (lo.p90_s, un.p90_s), (lo.p99_s, un.p99_s)):
        assert a == pytest.approx(b, rel=2e-3)  # the RDMA tail of local requests adds well under 1 ms
    assert lo.method == METHOD and lo.stable


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.05, 0.97), min_size=2, max_size=4))
def test_latency_grows_with_load(case, loads):
    grid, perf, _, layout = case
    out = [ttft_under_load(layout, grid, perf, load=x) for x in sorted(loads)]
    for a, b in zip(out, out[1:]):
        assert a.p50_s <= b.p50_s + 1e-9 and a.p90_s <= b.p90_s + 1e-9 and a.p99_s <= b.p99_s + 1e-9
        assert a.mean_s <= b.mean_s + 1e-9 and a.tpot_s <= b.tpot_s + 1e-12


def test_rate_and_load_agree_and_saturation_is_inf(case):
    grid, perf, ev, layout = case
    a = ttft_under_load(layout, grid, perf, load=0.5)
    b = ttft_under_load(layout, grid, perf, rate=0.5 * ev.lambda_max)
    assert a.p90_s == pytest.approx(b.p90_s) and a.rate_rps == pytest.approx(b.rate_rps)
    assert a.utilization["remote_prefill"] == pytest.approx(0.5, rel=1e-3)  # the bound is remote prefill
    over = ttft_under_load(layout, grid, perf, load=1.2)
    assert not over.stable and over.p99_s == math.inf
    with pytest.raises(PlanError):
        ttft_under_load(layout, grid, perf)
    with pytest.raises(PlanError):
        ttft_under_load(layout, grid, perf, load=0.5, rate=1.0)


def test_homogeneous_layout_has_no_link_stage(case):
    grid, perf, _, _ = case
    hom = homogeneous_pd("96xH20", local_prefill=6)
    s = ttft_under_load(hom, grid, perf, load=0.5)
    assert "link" not in s.utilization and "remote_prefill" not in s.utilization
    assert s.p99_s > s.p90_s > s.p50_s > 0
