"""The compiled stages of the static fast path (`simulator.kernels`) against the Python loops they replace
at scale (`pipeline._fcfs`, and `pipeline._link` driving `link.SharedLink`): the same floats, bit for bit,
on random inputs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.simulator.link import LinkProfile, SharedLink
from prfaas_plan.simulator.pipeline import _fcfs, _link

times = st.floats(0, 100, allow_nan=False)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(times, st.floats(0, 20)), max_size=60), st.integers(1, 6))
def test_compiled_fcfs_is_the_python_heap_loop(jobs, servers):
    entry = np.sort(np.array([a for a, _ in jobs], dtype=float))
    service = np.array([s for _, s in jobs], dtype=float)
    assert np.array_equal(_fcfs(entry, service, servers, compiled=True), _fcfs(entry, service, servers))


@st.composite
def flows(draw):
    """Flows with starts in order, prefill ends after their starts (ties on purpose), sizes (some empty),
    production caps (some equal; finite, as a prefill takes time), a goodput profile and a horizon."""
    m = draw(st.integers(0, 40))
    grid = st.integers(0, 200).map(lambda k: k * 0.5)  # a coarse grid makes simultaneous events common
    start = np.sort(np.array(draw(st.lists(grid, min_size=m, max_size=m)), dtype=float))
    end = start + np.array(draw(st.lists(grid, min_size=m, max_size=m)), dtype=float) * 0.1
    size = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 50.0, 333.3, 1e3]) | st.floats(0, 1e4),
                                  min_size=m, max_size=m)), dtype=float)
    cap = np.array(draw(st.lists(st.sampled_from([0.0, 5.0, 40.0]) | st.floats(0.1, 500),
                                 min_size=m, max_size=m)), dtype=float)
    n_points = draw(st.integers(0, 3))
    t = sorted(draw(st.lists(grid, min_size=n_points, max_size=n_points)))
    bps = draw(st.lists(st.sampled_from([0.0, 80.0, 800.0, 8000.0]), min_size=n_points, max_size=n_points))
    sysm = SimpleNamespace(goodput_Bps=draw(st.sampled_from([10.0, 100.0, 1e4])), efficiency=0.9)
    cfg = SimpleNamespace(link_profile=LinkProfile(tuple(t), tuple(bps)) if n_points else None,
                          sample_s=draw(st.sampled_from([0.3, 1.0, 7.0])))
    horizon = draw(st.sampled_from([math.inf, 20.0, 60.0]))
    return start, end, size, cap, sysm, cfg, horizon


@settings(max_examples=150, derandomize=True, deadline=None)
@given(flows(), st.sampled_from([0.0, 50.0, 500.0]))
def test_compiled_link_drain_is_the_shared_link(case, after):
    start, end, size, cap, sysm, cfg, horizon = case
    done_c, close_c = _link(start, end, size, cap, sysm, cfg, horizon, compiled=True)
    done_p, close_p = _link(start, end, size, cap, sysm, cfg, horizon)
    assert np.array_equal(done_c, done_p, equal_nan=True)
    stop = min(horizon, after)  # the books are closed at the run's end, which may come before the last event
    (bins_c, peak_c), (bins_p, peak_p) = close_c(stop), close_p(stop)
    assert np.array_equal(bins_c, bins_p) and peak_c == peak_p


@st.composite
def link_ops(draw):
    """A run of the event loop's calls on a shared link: flows started (capped or not, some empty), caps
    lifted, goodput changes, completions and bare advances, at non-decreasing times on a coarse grid (ties on
    purpose)."""
    ops, t, started = [], 0.0, 0
    for _ in range(draw(st.integers(0, 60))):
        t += draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 3.0, 40.0]))
        kind = draw(st.sampled_from(["add", "add", "uncap", "capacity", "complete", "complete", "advance"]))
        if kind == "add":
            cap = draw(st.sampled_from([math.inf, 0.0, 5.0, 40.0]) | st.floats(0.1, 500))
            ops.append(("add", t, started, draw(st.sampled_from([0.0, 1.0, 333.3]) | st.floats(0, 1e4)), cap))
            started += 1
        elif kind == "uncap" and started:
            ops.append(("uncap", t, draw(st.integers(0, started - 1))))
        elif kind == "capacity":
            ops.append(("capacity", t, draw(st.sampled_from([0.0, 10.0, 100.0, 1e4]))))
        else:
            ops.append(("complete" if kind == "complete" else "advance", t))
    return ops


@settings(max_examples=150, derandomize=True, deadline=None)
@given(link_ops(), st.sampled_from([10.0, 100.0, 1e4]), st.sampled_from([0.3, 1.0, 7.0]),
       st.sampled_from([0.0, 2.0]))
def test_compiled_shared_link_is_the_python_one(ops, capacity, bin_s, tau_s):
    """The compiled twin, and a Python link that hands its state to it at its second flow, as the Python link."""
    from prfaas_plan.simulator.compiled_link import CompiledLink

    links = (SharedLink(capacity, bin_s, tau_s), CompiledLink(capacity, bin_s, tau_s),
             SharedLink(capacity, bin_s, tau_s, promote_at=2))
    active: set = set()
    for op in ops:
        kind, t = op[0], max(op[1], links[0].t)
        if kind == "complete" and links[0].next_t == math.inf:
            kind = "advance"
        seen = []
        for link in links:
            if kind == "add":
                link.add(t, op[2], op[3], op[4])
            elif kind == "uncap":
                if op[2] in active:
                    link.uncap(t, op[2])
            elif kind == "capacity":
                link.set_capacity(t, op[2])
            elif kind == "complete":
                seen.append(link.complete())
            else:
                link.advance(t)
        if kind == "add":
            active.add(op[2])
        elif kind == "complete":
            assert seen[0] == seen[1] == seen[2]
            active.discard(seen[0][1])
        for other in links[1:]:
            for name in ("t", "next_t", "util", "capacity", "peak_flows"):
                assert getattr(links[0], name) == getattr(other, name), name
            assert links[0].unsent_bytes() == other.unsent_bytes()
            assert np.array_equal(np.array(links[0].bins), np.array(other.bins))
        assert links[0].n_flows == links[2].n_flows
    assert links[2]._compiled is not None or links[0].peak_flows < 2
