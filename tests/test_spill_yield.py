"""How a spilled run yields to a planned arrival (`event_parts.first_boundary`, `events` step 2): at the next of
its forwards' ``points`` equal steps (layers when spilled runs prefill layer-wise), never inside one, and not
at all in its last step; smaller forwards cost a spilled run the stack's overhead of each extra forward."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.performance.base import parse_instance
from prfaas_plan.performance.roofline import RooflinePrefill
from prfaas_plan.profiles.store import get_model
from prfaas_plan.simulator.event_parts import first_boundary


@settings(max_examples=200, deadline=None)
@given(u=st.integers(1, 40_000), chunk=st.sampled_from([512, 2048, 8192]), points=st.sampled_from([1, 27, 61]),
       frac=st.floats(0.0, 0.999))
def test_the_wait_is_at_most_one_step_and_lands_on_a_step(u, chunk, points, frac):
    total = 0.5 + u * 1e-5                     # seconds the spilled run needs on an instance
    t = frac * total                           # now, the run having started at 0 with all of it left
    wait, rid, left = first_boundary({7: (0.0, total)}, {u: total}, {7: u}, chunk, t, points)
    step = total / (math.ceil(u / chunk) * points)
    if rid < 0:                                # in its last step: no yield point left before it ends
        assert t > total - step - 1e-9 and math.isinf(wait)
        return
    assert rid == 7 and -1e-9 <= wait <= step + 1e-9   # 0: a run at a step boundary yields at once
    assert math.isclose(left, total - t - wait, abs_tol=1e-9)
    assert abs((total - left) / step - round((total - left) / step)) < 1e-6


def test_smaller_forwards_cost_each_extra_forward_its_overhead():
    m = get_model("kimi-linear")
    p = RooflinePrefill.build(m, parse_instance("8xH200"), stack="sglang")
    u = np.array([16_384.0, 65_536.0])
    big = p.busy_s(u)
    small = replace(p, stack=replace(p.stack, prefill_token_budget=2048)).busy_s(u)
    extra_forwards = u / 2048 - u / 8192
    assert np.all(small > big)
    assert np.all(small - big >= 0.9 * extra_forwards * p.stack.forward_overhead_s)
