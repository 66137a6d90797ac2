"""The compiled event loop (`simulator.event_kernels`, driven by `compiled_events`) against the Python loop it
mirrors (`events.run_events`): forced on small workloads by lowering `pipeline.COMPILED_FROM`, both must
produce the same `RunRecord`, every array and field equal bit for bit, and leave the prefix caches in the
same state. The growable arrays start tiny here (`compiled_events.FIRST_SIZES`) so that every way the
kernel asks Python for room is taken."""

from __future__ import annotations

from dataclasses import fields
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings

from prfaas_plan.analytic.search import grid_search
from prfaas_plan.analytic.throughput import LengthGrid
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.planning import case_study as paper
from prfaas_plan.simulator import (LinkProfile, LongTermRule, Requests, SimConfig, compiled_events, pipeline,
                                   schedulers, simulate)
from test_simulator import systems  # random small systems, short rebalance periods among them

TINY = {"heap": 1, "rows": 1, "decode": 0}


def both_loops(req, layout, perf, cfg, engine=None):
    """``(python, compiled)``: each loop's `RunRecord` and `SimResult` for the same run."""
    runs = []
    for compiled_from in (len(req) + 1, 0):
        records = []

        def spy(*args, **kwargs):
            records.append(run_events(*args, **kwargs))
            return records[-1]

        run_events = schedulers.run_events
        with patch.object(pipeline, "COMPILED_FROM", compiled_from), patch.object(schedulers, "run_events", spy), \
                patch.dict(compiled_events.FIRST_SIZES, TINY):
            result = simulate(req, layout, perf, cfg, engine=engine)
        runs.append((records[0], result))
    return runs


def assert_same_run(python, compiled):
    (a, ra), (b, rb) = python, compiled
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name
        elif f.name == "timeline":
            assert list(x) == list(y), f.name
            for k in x:
                assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k], equal_nan=True), k
        else:
            assert x == y and type(x) is type(y), f.name
    assert ra.cache == rb.cache  # the prefix caches ended in the same state (hits, bytes, evictions)
    assert ra.summary() == rb.summary()


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(7)
    n = 2500
    inputs = np.clip(rng.lognormal(9.9, 1.0, n), 128, 128_000).astype(int)
    perf = paper.case_study_perf("paper")
    ev = grid_search(prfaas_pd("32xH200", "64xH20", Link(100e9)),
                     LengthGrid(np.sort(inputs.astype(float)), np.full(n, 1 / n)), perf, "exact").best
    hashes = []  # conversations on 30 shared roots, each prompt with its own continuation
    for j, length in enumerate(inputs):
        hashes.append([int(rng.integers(0, 30))] + list(range(10**6 + 300 * j, 10**6 + 300 * j + (length - 1) // 512)))
    arrivals = np.cumsum(rng.exponential(1 / (0.9 * ev.lambda_max), n))
    outputs = rng.integers(1, 2000, n)
    return perf, ev, Requests.from_arrays(arrivals, inputs, outputs, hashes), Requests.from_arrays(arrivals, inputs,
                                                                                                   outputs)


@pytest.mark.parametrize("blocks", [True, False])
def test_compiled_adaptive_loop_is_the_python_one(case, blocks):
    perf, ev, with_blocks, without = case
    cfg = SimConfig(ev.threshold, "adaptive", link_profile=LinkProfile.drop(20.0, 60.0, 100e9, 0.1),
                    long_term=LongTermRule(period_s=20.0, min_samples=20), cache_bytes_per_instance=5e9,
                    spill=False)  # the compiled loop has no low-priority class (spilling runs in Python)
    python, compiled = both_loops(with_blocks if blocks else without, ev.layout, perf, cfg)
    a = python[0]
    changes = {r["change"] for r in a.roles}
    assert changes == {"prefill->decode", "decode->prefill"} and a.threshold_changes > 0 and a.peak_flows > 1
    if blocks:
        assert a.prefix_moves[0] > 0 and python[1].cache["pd"]["evicted"] > 0
    assert_same_run(python, compiled)


def test_compiled_threshold_only_loop_is_the_python_one(case):
    """The third policy: the short-term rule without periods (no rebalance events, no role change)."""
    perf, ev, with_blocks, _ = case
    cfg = SimConfig(ev.threshold, "threshold", link_profile=LinkProfile.drop(20.0, 60.0, 100e9, 0.1),
                    cache_bytes_per_instance=5e9)
    python, compiled = both_loops(with_blocks, ev.layout, perf, cfg)
    assert python[0].threshold_changes > 0 and not python[0].roles and not python[0].periods
    assert_same_run(python, compiled)


def test_compiled_static_event_loop_is_the_python_one(case):
    perf, ev, with_blocks, _ = case
    cfg = SimConfig(ev.threshold, link_profile=LinkProfile.drop(20.0, 60.0, 100e9, 0.1), horizon_s=300.0,
                    cache_bytes_per_instance=5e9)
    python, compiled = both_loops(with_blocks, ev.layout, perf, cfg, engine="events")
    assert python[0].arrived < len(with_blocks)  # cut at the horizon
    assert_same_run(python, compiled)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(systems())
def test_compiled_loop_is_the_python_one_on_random_systems(system):
    req, layout, cfg = system
    perf = paper.case_study_perf("paper")
    assert_same_run(*both_loops(req, layout, perf, cfg, engine="events"))
