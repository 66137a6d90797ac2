"""The plain-Python prefix-cache pools (workload/prefix_python.py) against the compiled ones (prefix_kernels).

Small runs use the Python twin so that they never import numba (issue 22 item 6); it must give the same
entries in the same recency order, the same counters and the same routes, bit for bit: on random prompts
(prefix-hash ids, dense or scattered; ids repeated within a prompt; checkpoints, capacities, watermarks,
the no-recency shortcut) and on the bundled Mooncake trace, through the planner's replay and a whole
simulation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.simulator.routing import Router
from prfaas_plan.simulator.system import System
from prfaas_plan.workload import Trace, replay_prefix_cache
from prfaas_plan.workload import prefix_cache as pc
from prfaas_plan.workload.prefix_cache import PrefixCache
from prfaas_plan.workload.traces import load_trace

TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"


@pytest.fixture(autouse=True)
def tiny_tables(monkeypatch):
    monkeypatch.setattr(pc, "_FIRST_TABLE_BITS", 4)  # the compiled side grows and wraps around from the start


def prefix_ids(paths, dense):
    """Prefix-hash ids of token paths (as tests/test_prefix_kernels.py): equal ids iff equal prefixes."""
    names: dict[tuple, int] = {}
    out = []
    for path in paths:
        ids = []
        for j in range(len(path)):
            prefix = tuple(path[: j + 1])
            if prefix not in names:
                names[prefix] = len(names) if dense else (hash(prefix) * 0x9E3779B97F4A7C15) % (1 << 62)
            ids.append(names[prefix])
        out.append(ids)
    return out


def twins(*args):
    return PrefixCache(*args, compiled=True), PrefixCache(*args, compiled=False)


def same_state(a: PrefixCache, b: PrefixCache):
    assert a.entries() == b.entries()
    assert (len(a), a.checkpoints, a.used, a.evicted) == (len(b), b.checkpoints, b.used, b.evicted)
    assert (a.prompt_tokens, a.hit_tokens, a.recency_matters) == (b.prompt_tokens, b.hit_tokens, b.recency_matters)


prompts = st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=10), st.booleans()),
                   min_size=1, max_size=50)
pool_shape = st.tuples(st.sampled_from([0.0, 3.0, 30.0, 300.0, np.inf]), st.sampled_from([0.0, 0.5, 2.0]),
                       st.sampled_from([0.5, 0.9, 1.0]), st.booleans(), st.booleans())


@settings(max_examples=150, derandomize=True, deadline=None)
@given(prompts, pool_shape)
def test_python_pool_equals_the_compiled_one(prompts, shape):
    capacity, ckpt_bytes, low, dense, recency = shape
    comp, py = twins(capacity, 1.0, ckpt_bytes, 512, low)
    assert py.rec is None and not py.compiled and comp.compiled
    if not recency:
        comp.assume_fits(capacity - 1)
        py.assume_fits(capacity - 1)
    for ids, (_, checkpoint) in zip(prefix_ids([p for p, _ in prompts], dense), prompts):
        kv = comp.cached_blocks(ids, len(ids))
        assert kv == py.cached_blocks(ids, len(ids)) == py.leading_blocks(ids) == comp.leading_blocks(ids)
        assert py.usable_blocks(ids, kv) == comp.usable_blocks(ids, kv)
        assert py.match(ids, 512 * len(ids) - 3) == comp.match(ids, 512 * len(ids) - 3)
        full = max(len(ids) - 1, 1) if checkpoint else len(ids)
        comp.touch(ids, full, checkpoint, kv)
        py.touch(ids, full, checkpoint, kv)
        same_state(comp, py)
        assert all((x in py) == (x in comp) and py.has_checkpoint(x) == comp.has_checkpoint(x) for x in ids)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=6), min_size=1, max_size=40),
       st.integers(1, 12))
def test_ids_repeated_within_a_prompt(paths, capacity):
    # not prefix hashes: an id may come twice in a prompt; the twins still agree on the recency order
    comp, py = twins(float(capacity), 1.0, 1.0, 512, 0.9)
    for ids in paths:
        assert comp.cached_blocks(ids, len(ids)) == py.cached_blocks(ids, len(ids))
        assert comp.leading_blocks(ids) == py.leading_blocks(ids)
        comp.touch(ids, len(ids), True)
        py.touch(ids, len(ids), True)
        same_state(comp, py)


requests = st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(1, 4100),
                              st.booleans(), st.sampled_from([0.0, 600.0, 1500.0, np.inf])),
                    min_size=1, max_size=40)


@settings(max_examples=80, derandomize=True, deadline=None)
@given(requests, st.sampled_from([4.0, 12.0, 40.0, np.inf]), st.sampled_from([0.0, 2.0]), st.booleans(),
       st.booleans(), st.booleans())
def test_routes_one_by_one_and_the_static_pass_agree(reqs, capacity, ckpt_bytes, remote_ok, local_ok, dense):
    def router(compiled):
        return Router(PrefixCache(capacity, 1.0, ckpt_bytes, 512, 0.9, compiled),
                      PrefixCache(capacity / 2, 1.0, ckpt_bytes, 512, 0.9, compiled), remote_ok)

    comp, py = router(True), router(False)
    chains = [h[: -(-r[1] // 512)] for h, r in zip(prefix_ids([r[0] for r in reqs], dense), reqs)]
    for h, (_, length, abundant, threshold) in zip(chains, reqs):
        assert comp.route(h, length, threshold, abundant, local_ok) == py.route(h, length, threshold, abundant,
                                                                                local_ok)
    for a, b in ((comp.pd, py.pd), (comp.prfaas, py.prfaas)):
        same_state(a, b)
    comp, py = router(True), router(False)
    lengths = [r[1] for r in reqs]
    got = [np.asarray(x) for x in py.route_all(iter(chains), lengths, 1500.0, local_ok)]
    want = comp.route_all(iter(chains), lengths, 1500.0, local_ok)
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))
    for a, b in ((comp.pd, py.pd), (comp.prfaas, py.prfaas)):
        same_state(a, b)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=8), min_size=1, max_size=60),
       st.one_of(st.none(), st.integers(1, 30)), st.integers(1, 3))
def test_replays_agree(paths, capacity, scopes):
    ids = prefix_ids(paths, True)
    offsets = np.concatenate([[0], np.cumsum([len(h) for h in ids])])
    lengths = np.array([512 * len(h) for h in ids])
    trace = Trace("t.jsonl", np.arange(len(ids)), lengths, lengths, np.arange(len(ids), dtype=float),
                  np.concatenate([np.asarray(h) for h in ids]).astype(np.int32), offsets)
    a = replay_prefix_cache(trace, capacity_blocks=capacity, route=lambda i: i % scopes, compiled=True)
    b = replay_prefix_cache(trace, capacity_blocks=capacity, route=lambda i: i % scopes, compiled=False)
    assert np.array_equal(a.matched_blocks, b.matched_blocks) and np.array_equal(a.cached_length, b.cached_length)
    assert a.caches == b.caches


@pytest.mark.parametrize("capacity", [None, 2000])  # unlimited, and small enough to evict (the trace has ~110k)
def test_replays_of_the_bundled_trace_agree(capacity):
    trace = load_trace(TRACE)
    a = replay_prefix_cache(trace, capacity_blocks=capacity, compiled=True)
    b = replay_prefix_cache(trace, capacity_blocks=capacity, compiled=False)
    assert np.array_equal(a.matched_blocks, b.matched_blocks)
    assert np.array_equal(a.uncached_length, b.uncached_length)
    assert a.token_hit_rate > 0.03  # prefixes are shared (and, at 2,000 blocks, evicted): real hits compared
    assert replay_prefix_cache(trace, capacity_blocks=capacity).matched_blocks.tolist() == b.matched_blocks.tolist()


@pytest.mark.parametrize("scheduler", ["static", "adaptive"])
def test_simulating_the_bundled_trace_gives_the_same_json(cli, monkeypatch, scheduler):
    # A 12k-request run uses the Python pools; then the compiled pools serve the same run (the queues and the
    # event loop stay in Python)
    args = ("simulate", "--trace", TRACE, "--model", "kimi-linear", "--scheduler", scheduler, "--format", "json")
    code, py_out, err = cli(*args)
    assert code == 0, err
    caches = System.caches
    monkeypatch.setattr(System, "caches", lambda self, per, tokens, compiled=True: caches(self, per, tokens, True))
    code, comp_out, err = cli(*args)
    assert code == 0, err
    assert py_out == comp_out
    assert all(row["hit_tokens"] > 0 for row in json.loads(py_out)["sections"]["cache"])  # caches on and hit
