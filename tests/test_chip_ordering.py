"""Chip ordering (issue 23 item 10): where a chip no weaker on any peak is predicted to prefill slower,
the cause is a kernel-class efficiency fitted on one chip and assumed on the other (kimi-k3 and prfaas-1t:
their 4-bit experts run as dequantizing w4a16 GEMMs, fitted 0.17 on H200, assumed 0.27 on H100: its
kernel curves' plateau, 0.40 before issue 20 round 10), and
the plan says so (`planning.warnings`, code ``kernel-efficiency-mismatch``)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.performance.base import Instance
from prfaas_plan.performance.constants import default_calibration
from prfaas_plan.performance.roofline import RooflinePrefill
from prfaas_plan.planning.warnings import _efficiency_mismatch, _weaker
from prfaas_plan.profiles import all_hardware, get_hardware, get_model

L32K = 32768


def _prefill_s(model, chip, length):
    return float(RooflinePrefill.build(model, Instance(chip, 8)).latency_s(np.array([length]))[0])


def test_the_inversion_is_the_w4a16_efficiency():
    m, h100, h200 = get_model("kimi-k3"), get_hardware("h100"), get_hardware("h200")
    assert _prefill_s(m, h200, L32K) > 1.3 * _prefill_s(m, h100, L32K)      # the reported case (48% slower)
    assert _efficiency_mismatch(m, h200, h100)
    # with H200's efficiencies on H100 (w4a16 the named cause; since issue 20 round 4 H200's fitted fp8 and
    # attention efficiencies are also below H100's uncalibrated seeds) the order holds up to the chips' measured
    # kernel-shape curves, which differ between H100 and H200 (kernel_curves.csv): the same 5% the invariant
    # below allows
    same = dataclasses.replace(h100, calibration=dataclasses.replace(
        h200.calibration, gemm={**default_calibration(h100).gemm, **h200.calibration.gemm}))
    assert _prefill_s(m, h200, L32K) <= 1.05 * _prefill_s(m, same, L32K)


def test_the_plan_names_the_cause(cli):
    code, out, err = cli("size", "--model", "prfaas-1t", "--remote", "16xH200", "--local", "32xH100")
    assert code == 0 and "WARNING [kernel-efficiency-mismatch]" in out and "w4a16" in out


CHIPS = sorted(all_hardware())
MODELS = ["kimi-k3", "prfaas-1t", "kimi-linear", "qwen3-235b", "deepseek-v3"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), a=st.sampled_from(CHIPS), b=st.sampled_from(CHIPS),
       length=st.sampled_from([1024, 8192, 32768, 131072]))
def test_a_chip_no_weaker_is_slower_only_for_a_named_reason(model, a, b, length):
    m, ca, cb = get_model(model), get_hardware(a), get_hardware(b)
    if a == b or _weaker(ca, cb) or ca.peak_tflops.keys() < cb.peak_tflops.keys():
        return
    if _prefill_s(m, ca, length) > 1.05 * _prefill_s(m, cb, length):   # 5%: fitted chips' own scatter
        assert _efficiency_mismatch(m, ca, cb), (model, a, b, length)
