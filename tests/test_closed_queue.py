"""The closed-queue benchmark model (`performance/closed_queue.py`): its invariants, checked with hypothesis
over the model's inputs and over the bundled models, chips and stacks (issue 20 item 6)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.performance import Instance
from prfaas_plan.performance.closed_queue import closed_queue
from prfaas_plan.performance.serving import serving_at_concurrency
from prfaas_plan.profiles import all_models, get_hardware

MODELS = sorted(all_models())
CHIPS = ["h200", "h20", "h20-3e", "h100", "b200"]
STACKS = ["sglang", "vllm", "trtllm", "mooncake-sglang-pd", "paper-sglang", "paper-vllm"]
seconds = st.floats(1e-4, 2.0)


def _parts(latency, alone, extra, k, step, chunks, osl, wave, request):
    """Consistent parts of one point: a forward of ``k`` prompts costs at least one of one prompt, and the busy
    time per prompt of a kept-full forward is that forward's share."""
    full = alone + extra
    busy = full / k if chunks == 1 else alone
    return dict(latency=latency, alone=alone * chunks, full=full * chunks, per_forward=float(k), busy=busy,
                forwards_per_prompt=float(chunks) / (k if chunks == 1 else 1), step=step, chunks=float(chunks),
                osl=float(osl), wave_fraction=wave, request_overhead=request)


parts = st.builds(_parts, seconds, seconds, seconds, st.integers(1, 64), st.floats(1e-4, 0.2), st.integers(1, 16),
                  st.integers(2, 8192), st.floats(1e-3, 1.0), st.floats(0.0, 0.1))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(p=parts)
def test_concurrency_one_is_the_unloaded_request(p):
    ttft, tpot = closed_queue(concurrency=1, **p)
    assert float(ttft) == p["latency"] + p["alone"]
    assert float(tpot) == p["step"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(p=parts, c=st.integers(2, 1024), more=st.integers(1, 512))
def test_company_only_delays(p, c, more):
    # TTFT and TPOT at concurrency C are at least the unloaded ones, and grow with C
    one = closed_queue(concurrency=1, **p)
    at_c = closed_queue(concurrency=c, **p)
    higher = closed_queue(concurrency=c + more, **p)
    assert at_c[0] >= one[0] * (1 - 1e-12) and at_c[1] >= one[1] * (1 - 1e-12)
    assert higher[0] >= at_c[0] * (1 - 1e-9) and higher[1] >= at_c[1] * (1 - 1e-12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(p=parts, c=st.integers(1, 1024), faster=st.floats(0.05, 1.0))
def test_faster_parts_never_slower(p, c, faster):
    # every GPU time shorter by the same factor: neither TTFT nor TPOT may grow
    quick = dict(p, **{k: p[k] * faster for k in ("alone", "full", "busy", "step")})
    slow, fast = closed_queue(concurrency=c, **p), closed_queue(concurrency=c, **quick)
    assert fast[0] <= slow[0] * (1 + 1e-9) and fast[1] <= slow[1] * (1 + 1e-12)


def test_vectorized_over_points_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    n = 1000
    args = dict(latency=rng.uniform(0.01, 0.1, n), alone=rng.uniform(0.01, 0.5, n), per_forward=np.ones(n),
                forwards_per_prompt=np.ones(n), step=rng.uniform(0.005, 0.05, n), chunks=np.ones(n),
                concurrency=rng.integers(1, 512, n), osl=rng.integers(2, 4096, n),
                wave_fraction=rng.uniform(0, 1, n), request_overhead=rng.uniform(0, 0.01, n))
    args["full"], args["busy"] = args["alone"], args["alone"]
    ttft, tpot = closed_queue(**args)
    for i in (0, 17, 999):
        one = closed_queue(**{k: v[i] for k, v in args.items()})
        assert float(one[0]) == ttft[i] and float(one[1]) == tpot[i]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), chip=st.sampled_from(CHIPS), stack=st.sampled_from(STACKS),
       isl=st.integers(64, 65_536), osl=st.integers(2, 4096), concurrency=st.integers(1, 256),
       flops=st.floats(1.0, 10.0), hbm=st.floats(1.0, 10.0), link=st.floats(1.0, 10.0))
def test_faster_chip_never_slower_at_concurrency(model, chip, stack, isl, osl, concurrency, flops, hbm, link):
    slow = get_hardware(chip)
    fast = dataclasses.replace(slow, name=f"{slow.name}-fast",
                               peak_tflops={k: v * flops for k, v in slow.peak_tflops.items()},
                               hbm_tb_s=slow.hbm_tb_s * hbm, scaleup_gb_s=slow.scaleup_gb_s * link)
    from prfaas_plan.performance.constants import chip_constants

    constants = chip_constants(slow)
    a = serving_at_concurrency(model, Instance(slow, 8), isl, osl, concurrency, constants=constants, stack=stack)
    b = serving_at_concurrency(model, Instance(fast, 8), isl, osl, concurrency, constants=constants, stack=stack)
    assert b.ttft_s <= a.ttft_s * (1 + 1e-9) and b.tpot_s <= a.tpot_s * (1 + 1e-12)
