"""Error bars (analytic/uncertainty.py), the verdict in both modes and the degraded link: invariants
(hypothesis, seeded) and the sources of each error bar."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.degraded import degrade_link
from prfaas_plan.analytic.search import grid_search, threshold_candidates
from prfaas_plan.analytic.throughput import LengthGrid
from prfaas_plan.analytic.uncertainty import (
    Band,
    ErrorBar,
    decode_error_bar,
    prefill_error_bar,
    sample_layout,
    verdict,
)
from prfaas_plan.layout import Link, homogeneous_pd, prfaas_pd
from prfaas_plan.performance import decode_capacity, prefill_model
from prfaas_plan.planning import case_study as paper
from prfaas_plan.planning.confidence import mode_verdicts, plan_error_bars
from prfaas_plan.planning.plans import compare, scenario_for
from prfaas_plan.profiles import get_hardware, get_model
from prfaas_plan.workload import TruncatedLogNormal, paper_workload
from test_performance_calibration import unseen_chip_sigma  # the width an uncalibrated chip should carry

GRID = LengthGrid.from_distribution(TruncatedLogNormal(9.9, 1.0, 128, 128_000), 1024)
PAPER = paper.case_study_perf("paper")
TS = threshold_candidates(GRID)


def test_error_bar_sources():
    m = get_model("qwen3-235b")
    h200 = prefill_error_bar(prefill_model(m, "8xH200"), "h200")   # the default stack, sglang
    lomo = get_hardware("h200").calibration.lomo_error_by_stack["sglang"]["ttft"]
    assert h200.sigma == pytest.approx(np.log1p(lomo) / 0.6745, rel=1e-3)  # the LOMO median h200.yaml records
    assert "leave-one-model-out under sglang" in h200.source and h200.key == "prefill:h200@sglang"
    # h20's calibration rests on too few rows to record a held-out error: its bar is what an unseen model on an
    # unseen chip should expect (the calibrated chips' leave-one-model-out and leave-one-chip-out in quadrature)
    assert not get_hardware("h20").calibration.lomo_error
    h20 = prefill_error_bar(prefill_model(m, "8xH20"), "h20")
    assert h20.sigma == pytest.approx(unseen_chip_sigma("ttft"), rel=1e-9)
    assert "leave-one-chip-out" in h20.source and "fewer than 5 points" in h20.source
    assert prefill_error_bar(PAPER.sites["local"].prefill, "h20").sigma == 0          # back-solved: given
    assert decode_error_bar(PAPER.sites["local"].decode, "h20").sigma == 0            # back-solved: given
    table = prefill_error_bar(PAPER.remote_prefill, "h200")                            # measured table
    assert table.sigma == pytest.approx(0.05) and "measured table" in table.source
    assert decode_error_bar(decode_capacity(m, "8xH20", 0.025, 4096), "h20").sigma > 0


def test_a_source_can_state_its_own_error_bar():
    class Stated:
        source = "a stack profile"
        error_bar = ErrorBar(0.3, "stack:x", "joint calibration, leave-one-model-out")

        def latency_s(self, l):
            return np.asarray(l, dtype=float) * 1e-4

    assert prefill_error_bar(Stated(), "h20").sigma == 0.3


def test_verdict_thresholds():
    assert verdict(Band(1.01, 1.2, 1.5)) == "pays"
    assert verdict(Band(0.5, 0.7, 0.99)) == "does not pay"
    assert verdict(Band(0.9, 1.1, 1.3)) == "cannot tell"


def test_unit_factors_reproduce_the_grid_optimum():
    ones = np.ones(1)
    for lay in (prfaas_pd("32xH200", "64xH20", Link(100e9)), homogeneous_pd("96xH20")):
        for mode in ("exact", "representative"):
            point = grid_search(lay, GRID, PAPER, mode).best
            s = sample_layout(lay, GRID, PAPER, mode, TS, ones, ones, ones)
            assert s.lam[0] == pytest.approx(point.lambda_max, rel=2e-3)   # grid points vs refined t
            assert s.egress_bps[0] == pytest.approx(point.egress_bps, rel=0.02, abs=1e-6)


@pytest.fixture(scope="module")
def predicted():
    sc = scenario_for(get_model("kimi-linear"), "32xH200", "64xH20", Link(100e9), 8, 0.025, "exact", "predicted",
                      paper_workload())
    return sc, compare(sc)


def test_error_bars_bracket_the_plan_and_are_seeded(predicted):
    sc, plans = predicted
    prf, hom = plans["prfaas-pd"], plans["homogeneous-pd"]
    eb = plan_error_bars(sc, prf, hom.layout, samples=300, seed=3)
    assert eb.lambda_rps.p10 < prf.best.lambda_max < eb.lambda_rps.p90
    gain = prf.best.lambda_max / hom.best.lambda_max
    assert eb.gain.p10 < gain * 1.01 and gain * 0.99 < eb.gain.p90
    assert eb.verdict == verdict(eb.gain) and not eb.given
    again = plan_error_bars(sc, prf, hom.layout, samples=300, seed=3)
    assert again == eb


def test_given_inputs_have_no_spread():
    sc = paper.scenario("paper", "exact")
    plans = compare(sc)
    prf = plans["prfaas-pd"]
    only_h200 = plan_error_bars(sc, prf, plans["homogeneous-pd"].layout, samples=200)
    assert [b.sigma > 0 for b in only_h200.inputs].count(True) == 1   # the measured H200 table
    assert only_h200.gain.p50 > 1 and only_h200.verdict == "pays"
    assert only_h200.verdict_line().startswith("verdict vs homogeneous-pd (12x8xH20): PrfaaS pays at 90% confidence")


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_p50_equals_the_point_estimate_with_one_uncertain_input(seed):
    """Lambda is monotone in a single factor, so its median is Lambda at the factor's median (1), up to
    the sample median's spread (~1.25 sigma / sqrt(n) in log) and the grid's resolution."""
    lay = prfaas_pd("32xH200", "64xH20", Link(100e9))
    point = grid_search(lay, GRID, PAPER, "exact").best.lambda_max
    n = 801
    z = np.random.default_rng(seed).standard_normal(n)
    ones = np.ones(n)
    sigma = 0.1
    s = sample_layout(lay, GRID, PAPER, "exact", TS, np.exp(sigma * z), ones, ones)
    assert np.median(s.lam) == pytest.approx(point, rel=3 * 1.25 * sigma / np.sqrt(n) + 2e-3)


def test_modes_disagree_warning_names_both():
    sc = paper.scenario("paper", "exact")
    plans = compare(sc)
    mv = mode_verdicts(sc, plans["prfaas-pd"], plans["homogeneous-pd"].layout)
    assert set(mv.gain) == {"representative", "exact"}
    assert mv.warning() is None  # the case study pays in both modes
    forced = type(mv)({"representative": 1.2, "exact": 0.9}, "homogeneous-pd")
    assert "representative mode: gain 1.20 (pays)" in forced.warning()


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.floats(0.5, 200.0), st.floats(0.5, 200.0))
def test_more_bandwidth_never_lowers_the_kept_throughput(a_gbps, b_gbps):
    lay = prfaas_pd("32xH200", "64xH20", Link(100e9))
    planned = grid_search(lay, GRID, PAPER, "exact").best
    lo, hi = sorted((a_gbps, b_gbps))
    d_lo = degrade_link(planned, GRID, PAPER, lo * 1e9)
    d_hi = degrade_link(planned, GRID, PAPER, hi * 1e9)
    assert d_hi.switched.lambda_max >= d_lo.switched.lambda_max * (1 - 1e-6)
    for d in (d_lo, d_hi):  # counts never change; switching t never loses to keeping it
        assert (d.switched.n_prefill, d.switched.n_decode) == (planned.n_prefill, planned.n_decode)
        assert d.switched.lambda_max >= d.kept_threshold.lambda_max * (1 - 1e-6)


def test_degraded_link_ttft_is_at_the_degraded_bandwidth():
    lay = prfaas_pd("32xH200", "64xH20", Link(100e9))
    planned = grid_search(lay, GRID, PAPER, "exact").best
    d = degrade_link(planned, GRID, PAPER, 10e9)
    assert d.switched.link_bps == 10e9 and d.switched.threshold >= planned.threshold
    assert 0 < d.kept < 1
    assert d.ttft.p90_s > 0


def test_degraded_link_loaded_ttft_saturates_beyond_what_it_keeps():
    lay = prfaas_pd("32xH200", "64xH20", Link(100e9))
    planned = grid_search(lay, GRID, PAPER, "exact").best
    kept = degrade_link(planned, GRID, PAPER, 10e9).switched.lambda_max
    below = degrade_link(planned, GRID, PAPER, 10e9, rate_rps=0.5 * kept).loaded
    above = degrade_link(planned, GRID, PAPER, 10e9, rate_rps=1.1 * kept).loaded
    assert below.stable and np.isfinite(below.p90_s) and below.p90_s > 0
    assert not above.stable and above.p90_s == np.inf


def test_uncalibrated_and_unrecorded_constants_fall_back_to_the_calibration_prior(monkeypatch):
    from dataclasses import replace

    import prfaas_plan.profiles as profiles

    from prfaas_plan.analytic.uncertainty import (
        GEMM_PRIOR_SIGMA,
        MEMORY_PRIOR_SIGMA,
        decode_error_bar,
    )
    from prfaas_plan.performance.constants import ChipConstants

    pm = prefill_model(get_model("qwen3-235b"), "8xH200")
    calibrated = prefill_error_bar(pm, "h200")
    assert calibrated.sigma != GEMM_PRIOR_SIGMA and "leave-one-model-out" in calibrated.source
    loo_only = replace(pm, constants=ChipConstants(replace(pm.constants.calibration, lomo_error={},
                                                           lomo_error_by_stack={}), "calibrated"))
    assert "calibration leave-one-out" in prefill_error_bar(loo_only, "h200").source   # the fallback
    default = replace(pm, constants=ChipConstants(pm.constants.calibration, "default"))
    # an uncalibrated chip: the calibrated chips' leave-one-chip-out error, else (none recorded) the prior width
    assert "leave-one-chip-out" in prefill_error_bar(default, "h200").source
    with monkeypatch.context() as patched:
        patched.setattr(profiles, "all_hardware", lambda: {})
        assert prefill_error_bar(default, "h200").sigma == GEMM_PRIOR_SIGMA
    unrecorded = replace(pm, constants=ChipConstants(replace(pm.constants.calibration, source="hand-set", loo_error={},
                                                                   lomo_error={}, lomo_error_by_stack={}),
                                                     "calibrated"))
    bar = prefill_error_bar(unrecorded, "h200")   # too few points: what an unseen chip should expect
    assert "records no held-out error" in bar.source and "leave-one-chip-out" in bar.source
    with monkeypatch.context() as patched:
        patched.setattr(profiles, "all_hardware", lambda: {})
        assert prefill_error_bar(unrecorded, "h200").sigma == GEMM_PRIOR_SIGMA
    h200_decode = decode_error_bar(decode_capacity(get_model("qwen3-235b"), "8xH200", 0.025, 30_000), "h200")
    assert h200_decode.sigma != MEMORY_PRIOR_SIGMA and "(tpot)" in h200_decode.source   # fitted on NVIDIA TPOT


def test_error_bars_prefer_the_stacks_own_held_out_error():
    """A plan on a stack the chip's calibration records a leave-one-model-out error for takes that error
    (TensorRT-LLM's on H200 is wider than SGLang's); a stack it records none for takes the chip's over every
    stack; the decode bar follows the site's stack as the prefill's does."""
    from prfaas_plan.analytic.uncertainty import decode_error_bar, input_bars
    from prfaas_plan.planning.plans import perf_inputs
    from prfaas_plan.planning.question import scenario
    from prfaas_plan.planning.scenario import prfaas_layout

    cal = get_hardware("h200").calibration
    m = get_model("qwen3-235b")
    bars = {st: prefill_error_bar(prefill_model(m, "8xH200", stack=st), "h200") for st in ("sglang", "trtllm")}
    for stack, bar in bars.items():
        assert bar.sigma == pytest.approx(np.log1p(cal.lomo_error_by_stack[stack]["ttft"]) / 0.6745, rel=1e-3)
    assert bars["trtllm"].sigma > bars["sglang"].sigma and bars["trtllm"].key != bars["sglang"].key
    unrecorded = prefill_error_bar(prefill_model(m, "8xH200", stack="mooncake-sglang-pd"), "h200")
    assert unrecorded.sigma == pytest.approx(np.log1p(cal.lomo_error["ttft"]) / 0.6745, rel=1e-3)
    assert unrecorded.key == "prefill:h200"
    cap = decode_capacity(m, "8xH200", 0.025, 30_000)
    assert "under trtllm" in decode_error_bar(cap, "h200", stack="trtllm").source
    sc = scenario(stack="vllm", remote="32xH200", local="32xH200")
    local = input_bars(prfaas_layout(sc), perf_inputs(sc))
    assert all("under vllm" in b.source for b in local.values())


@pytest.mark.parametrize("entry, message", [({"sglang": {"ttfx": 0.3}}, "must be 'ttft', 'tpot' or 'busy'"),
                                            ({"sglang": {"ttft": -1}}, "must be >= 0.0")])
def test_bad_per_stack_error_is_one_clear_error(entry, message):
    import yaml

    from prfaas_plan.errors import PlanError
    from prfaas_plan.profiles import hardware_from_dict

    data = yaml.safe_load(open(get_hardware("h200").path, encoding="utf-8"))
    data["calibration"]["lomo_error_by_stack"] = entry
    with pytest.raises(PlanError, match=r"calibration\.lomo_error_by_stack\.sglang"):
        hardware_from_dict(data, "x.yaml")
    with pytest.raises(PlanError, match=re.escape(message)):
        hardware_from_dict(data, "x.yaml")
