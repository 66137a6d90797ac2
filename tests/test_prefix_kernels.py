"""Both prefix-cache pools, compiled (workload/prefix_kernels.py) and plain Python (workload/prefix_python.py,
which small runs use so that they never import numba, issue 22 item 6), against a plain dict LRU; then the
two against each other on the bundled Mooncake trace, through the planner's replay and a whole simulation.

`DictPool` is the pool as it was before the kernels: a dict whose insertion order is the recency order
(a touched entry is popped and re-inserted, roots last; eviction drops from the front). `DictRouter` is
the routing rule of simulator/routing.py written over it. Random prompts (prefix-hash ids, dense as in the
Mooncake traces or scattered), checkpoints, capacities and watermarks must give the same entries in the
same order, the same counters and the same routes, on either path (``compiled``). The compiled tables
start tiny here, so they grow, wrap around and shift records back on deletion all the time.
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
from prfaas_plan.workload.prefix_cache import PrefixCache, block_cache
from prfaas_plan.workload.traces import load_trace

TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"
BOTH_PATHS = pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])


class DictPool:
    """The reference LRU: ``key -> None`` in recency order, oldest first."""

    def __init__(self, capacity, block_bytes=1.0, checkpoint_bytes=0.0, block_tokens=512, low_watermark=1.0):
        self.capacity, self.bb, self.cb = capacity, block_bytes, checkpoint_bytes
        self.bt, self.low = block_tokens, low_watermark
        self.pool: dict[int, None] = {}
        self.recency_matters = True
        self.evicted = self.prompt_tokens = self.hit_tokens = 0

    def used(self):
        ck = sum(1 for k in self.pool if k < 0)
        return (len(self.pool) - ck) * self.bb + ck * self.cb

    def cached_blocks(self, ids, limit):
        lo, hi = 0, min(limit, len(ids))
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            lo, hi = (mid, hi) if ids[mid - 1] in self.pool else (lo, mid - 1)
        return lo

    def leading_blocks(self, ids):
        n = 0
        while n < len(ids) and ids[n] in self.pool:
            n += 1
        return n

    def usable_blocks(self, ids, cached):
        while self.cb and cached and ~ids[cached - 1] not in self.pool:
            cached -= 1
        return cached

    def match(self, ids, length):
        kv = self.cached_blocks(ids, (length - 1) // self.bt)
        return kv * self.bt, self.usable_blocks(ids, kv) * self.bt

    def touch(self, ids, full, checkpoint, present=0):
        if full <= 0 or self.capacity <= 0:
            return
        pool, ckpt = self.pool, checkpoint and self.cb
        if not self.recency_matters:
            pool.update(dict.fromkeys(ids[present:full]))
            if ckpt:
                pool.setdefault(~ids[full - 1])
            return
        if ckpt:
            pool.pop(~ids[full - 1], None)
            pool[~ids[full - 1]] = None
        for x in ids[:full]:
            pool.pop(x, None)
        pool.update(dict.fromkeys(ids[full - 1::-1]))
        if self.used() > self.capacity:
            excess, freed = self.used() - self.low * self.capacity, 0.0
            while pool and freed < excess:
                key = next(iter(pool))
                freed += self.cb if key < 0 else self.bb
                del pool[key]
                self.evicted += 1

    def insert(self, ids, length, checkpoint):
        self.touch(ids, min(length // self.bt, len(ids)), checkpoint)


class DictRouter:
    """simulator/routing.py's rule on `DictPool`s."""

    def __init__(self, pd, rf, remote_ok):
        self.pd, self.rf, self.remote_ok = pd, rf, remote_ok

    def route(self, ids, length, threshold, abundant, local_ok):
        pd, rf = self.pd, self.rf
        kv_pd, use_pd = pd.match(ids, length)
        use_rf = rf.match(ids, length)[1] if (abundant and self.remote_ok) else -1
        best = max(use_rf, use_pd)
        if (length - best <= threshold and local_ok) or not self.remote_ok:
            pd.prompt_tokens += length
            pd.hit_tokens += best
            pd.insert(ids, length, True)
            return True, length - best, kv_pd, length - use_pd, best if best > use_pd else 0
        if use_rf < 0:
            use_rf = rf.match(ids, length)[1]
        best = use_pd if (abundant and use_pd > use_rf) else use_rf
        rf.prompt_tokens += length
        rf.hit_tokens += best
        rf.insert(ids, length, True)
        pd.insert(ids, length, False)
        return False, length - best, kv_pd, length - use_pd, best if best > use_rf else 0


@pytest.fixture(autouse=True)
def tiny_tables(monkeypatch):
    monkeypatch.setattr(pc, "_FIRST_TABLE_BITS", 4)  # 16 positions: growth and wrap-around from the start


def prefix_ids(paths, dense):
    """Prefix-hash ids of token paths: equal ids iff equal prefixes; ``dense`` numbers prefixes in order of
    first appearance (as Mooncake does), else scatters them over 62 bits."""
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


def same_state(pool: PrefixCache, ref: DictPool):
    assert pool.entries() == list(ref.pool)
    assert pool.used == ref.used() and pool.evicted == ref.evicted
    assert len(pool) == len(ref.pool) and pool.checkpoints == sum(1 for k in ref.pool if k < 0)


prompts = st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=10), st.booleans()),
                   min_size=1, max_size=50)
pool_shape = st.tuples(st.sampled_from([0.0, 3.0, 30.0, 300.0, np.inf]), st.sampled_from([0.0, 0.5, 2.0]),
                       st.sampled_from([0.5, 0.9, 1.0]), st.booleans(), st.booleans())


@BOTH_PATHS
@settings(max_examples=150, derandomize=True, deadline=None)
@given(prompts, pool_shape)
def test_pool_equals_the_dict_lru(compiled, prompts, shape):
    capacity, ckpt_bytes, low, dense, recency = shape
    pool = PrefixCache(capacity, 1.0, ckpt_bytes, 512, low, compiled=compiled)
    assert pool.compiled == compiled and (pool.rec is None) == (not compiled)
    ref = DictPool(capacity, 1.0, ckpt_bytes, 512, low)
    if not recency:
        pool.assume_fits(capacity - 1)
        ref.recency_matters = False
    assert pool.recency_matters == ref.recency_matters
    for ids, (_, checkpoint) in zip(prefix_ids([p for p, _ in prompts], dense), prompts):
        kv = pool.cached_blocks(ids, len(ids))
        assert kv == ref.cached_blocks(ids, len(ids)) == pool.leading_blocks(ids) == ref.leading_blocks(ids)
        assert pool.usable_blocks(ids, kv) == ref.usable_blocks(ids, kv)
        assert pool.match(ids, 512 * len(ids) - 3) == ref.match(ids, 512 * len(ids) - 3)
        full = max(len(ids) - 1, 1) if checkpoint else len(ids)
        pool.touch(ids, full, checkpoint, kv)
        ref.touch(ids, full, checkpoint, kv)
        same_state(pool, ref)
        assert all((x in pool) == (x in ref.pool) and pool.has_checkpoint(x) == (~x in ref.pool) for x in ids)


@BOTH_PATHS
@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=6), min_size=1, max_size=40),
       st.integers(1, 12))
def test_ids_repeated_within_a_prompt_are_stamped_once(compiled, paths, capacity):
    # Not prefix hashes: the same id may come twice in one prompt (and binary search may disagree with a
    # scan); the pool still does what the dict does.
    pool = PrefixCache(float(capacity), 1.0, 1.0, 512, 0.9, compiled=compiled)
    ref = DictPool(float(capacity), 1.0, 1.0, 512, 0.9)
    for ids in paths:
        assert pool.cached_blocks(ids, len(ids)) == ref.cached_blocks(ids, len(ids))
        assert pool.leading_blocks(ids) == ref.leading_blocks(ids)
        pool.touch(ids, len(ids), True)
        ref.touch(ids, len(ids), True)
        same_state(pool, ref)


requests = st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(1, 4100),
                              st.booleans(), st.sampled_from([0.0, 600.0, 1500.0, np.inf])),
                    min_size=1, max_size=40)


@BOTH_PATHS
@settings(max_examples=80, derandomize=True, deadline=None)
@given(requests, st.sampled_from([4.0, 12.0, 40.0, np.inf]), st.sampled_from([0.0, 2.0]), st.booleans(),
       st.booleans(), st.booleans())
def test_router_equals_the_dict_rule(compiled, reqs, capacity, ckpt_bytes, remote_ok, local_ok, dense):
    def pools(kind, *flag):
        return kind(capacity, 1.0, ckpt_bytes, 512, 0.9, *flag), kind(capacity / 2, 1.0, ckpt_bytes, 512, 0.9, *flag)

    router, ref = Router(*pools(PrefixCache, compiled), remote_ok), DictRouter(*pools(DictPool), remote_ok)
    ids = prefix_ids([r[0] for r in reqs], dense)
    for h, (_, length, abundant, threshold) in zip(ids, reqs):
        h = h[: -(-length // 512)]
        assert router.route(h, length, threshold, abundant, local_ok) == ref.route(h, length, threshold, abundant,
                                                                                     local_ok)
    for pool, dict_pool in ((router.pd, ref.pd), (router.prfaas, ref.rf)):
        same_state(pool, dict_pool)
        assert (pool.prompt_tokens, pool.hit_tokens) == (dict_pool.prompt_tokens, dict_pool.hit_tokens)


@BOTH_PATHS
@settings(max_examples=40, derandomize=True, deadline=None)
@given(requests, st.sampled_from([4.0, 40.0, np.inf]), st.sampled_from([0.0, 2.0]), st.booleans(), st.booleans(),
       st.booleans())
def test_the_static_pass_equals_routing_one_by_one(compiled, reqs, capacity, ckpt_bytes, remote_ok, local_ok, dense):
    def router(on=compiled):
        return Router(PrefixCache(capacity, 1.0, ckpt_bytes, 512, 0.9, on),
                      PrefixCache(capacity / 2, 1.0, ckpt_bytes, 512, 0.9, on), remote_ok)

    one, batch = router(), router()
    chains = [h[: -(-r[1] // 512)] for h, r in zip(prefix_ids([r[0] for r in reqs], dense), reqs)]
    lengths = [r[1] for r in reqs]
    expected = [one.route(h, n, 1500.0, False, local_ok)[:3] for h, n in zip(chains, lengths)]
    got = batch.route_all(iter(chains), lengths, 1500.0, local_ok)  # any iterable of id lists
    assert [tuple(x) for x in zip(*got)] == expected
    for a, b in ((one.pd, batch.pd), (one.prfaas, batch.prfaas)):
        assert a.entries() == b.entries() and (a.hit_tokens, a.evicted) == (b.hit_tokens, b.evicted)
    if not compiled:  # the same arrays, of the same dtypes, as the compiled pass returns
        want = router(True).route_all(iter(chains), lengths, 1500.0, local_ok)
        assert all(np.array_equal(g, w) and np.asarray(g).dtype == w.dtype for g, w in zip(got, want))


@BOTH_PATHS
@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=8), min_size=1, max_size=60),
       st.integers(1, 30), st.integers(1, 3))
def test_replay_equals_the_dict_lru(compiled, paths, capacity, scopes):
    ids = prefix_ids(paths, True)
    offsets = np.concatenate([[0], np.cumsum([len(h) for h in ids])])
    lengths = np.array([512 * len(h) for h in ids])
    trace = Trace("t.jsonl", np.arange(len(ids)), lengths, lengths, np.arange(len(ids), dtype=float),
                  np.concatenate([np.asarray(h) for h in ids]).astype(np.int32), offsets)
    got = replay_prefix_cache(trace, capacity_blocks=capacity, route=lambda i: i % scopes, compiled=compiled)
    refs = {}
    for i, h in enumerate(ids):
        ref = refs.setdefault(i % scopes, DictPool(float(capacity)))
        assert got.matched_blocks[i] == ref.leading_blocks(h)
        ref.touch(h, len(h), False)
    assert got.caches == len(refs)


def test_a_table_sized_by_the_workload_never_grows():
    pool = block_cache(1000)
    pool.assume_fits(1e9)          # bounded by the capacity: 1,001 entries, at most half the table
    rec = pool.rec
    for i in range(200):
        pool.touch([10 * i + j for j in range(10)], 10, False)
    assert pool.rec is rec and len(pool) <= 1000 and pool.evicted == 1000


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
