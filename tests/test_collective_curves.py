"""Collective efficiency by message size (`performance.collective_curves`): time never falls as a message grows, the
curve never beats its level, fabrics are shared, and the roofline stays vectorized over lengths."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.performance import RooflinePrefill, parse_instance
from prfaas_plan.performance.collective_curves import curve_note, reference_efficiency, relative_efficiency
from prfaas_plan.profiles import get_model

SIZES = np.logspace(0, 10, 4001)   # 1 B to 10 GB per rank


@pytest.mark.parametrize("chip", ["h100", "h200", "h20", "b200", "h800", "mi300x", "a-user-chip"])
@pytest.mark.parametrize("op", ["comm_tp", "comm_ep"])
@pytest.mark.parametrize("group", [2, 3, 4, 8, 16])
def test_collective_time_never_falls_as_the_message_grows(chip, op, group):
    r = relative_efficiency(chip, op, group, SIZES)
    time = SIZES / r
    assert np.all(np.isfinite(time)) and np.all(r > 0) and np.all(r <= 1.0)
    assert np.all(np.diff(time) >= -1e-12 * time[1:])


def test_one_curve_per_fabric():
    s = np.logspace(3, 9, 50)
    assert np.array_equal(relative_efficiency("h20", "comm_tp", 8, s), relative_efficiency("h200", "comm_tp", 8, s))
    assert reference_efficiency("h20") == reference_efficiency("h200")
    assert "B200" in curve_note("b200") and "assumed" in curve_note("h800")


def test_unbenchmarked_fabric_is_never_slower_than_a_benchmarked_one():
    s = np.logspace(0, 10, 500)
    for op in ("comm_tp", "comm_ep"):
        for group in (2, 4, 8):
            best = relative_efficiency("h800", op, group, s)
            for chip in ("h200", "b200"):
                assert np.all(best >= relative_efficiency(chip, op, group, s) * (1 - 1e-12))


def test_roofline_stays_vectorized_over_lengths():
    pm = RooflinePrefill.build(get_model("deepseek-v3"), parse_instance("8xB200"))
    lengths = np.arange(1, 100_001, dtype=float)
    out = pm.latency_s(lengths)
    assert out.shape == lengths.shape
    for i in (0, 999, 99_999):
        assert float(pm.latency_s(lengths[i])) == pytest.approx(float(out[i]), rel=1e-12)
