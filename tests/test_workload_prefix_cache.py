"""Prefix-cache replay: hand-checked cases, LRU order, scopes, and the bundled trace's hit rate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.workload import BUNDLED_TRACE, Trace, load_trace, replay_prefix_cache
from prfaas_plan.workload.prefix_cache import block_cache


def make_trace(requests: list[tuple[int, list[int]]]) -> Trace:
    """A trace from (input_length, hash_ids) pairs, in arrival order."""
    ids = [i for _, blocks in requests for i in blocks]
    counts = [len(blocks) for _, blocks in requests]
    n = len(requests)
    return Trace("mem.jsonl", np.arange(1, n + 1), np.array([r[0] for r in requests]), np.ones(n, int),
                 np.arange(n, dtype=float), np.array(ids, dtype=np.int64),
                 np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


@pytest.fixture(scope="module")
def mooncake():
    return load_trace(BUNDLED_TRACE)


def test_hand_checked_replay():
    trace = make_trace([
        (1200, [1, 2, 3]),      # cold
        (1500, [1, 2, 4]),      # shares 2 blocks: 1024 tokens cached
        (700, [1, 5]),          # shares 1 block: 512
        (1200, [1, 2, 3]),      # everything matches: cached = 1199, 1 token prefilled
        (300, [1]),             # partial block matched: min(512, 300 - 1) = 299
        (2000, [9, 1, 2, 3]),   # different root: no match even though later blocks are known
    ])
    r = replay_prefix_cache(trace)
    assert list(r.matched_blocks) == [0, 2, 1, 3, 1, 0]
    assert list(r.cached_length) == [0, 1024, 512, 1199, 299, 0]
    assert list(r.uncached_length) == [1200, 476, 188, 1, 1, 2000]
    assert r.token_hit_rate == pytest.approx(3034 / 6900)
    assert r.request_hit_rate == pytest.approx(np.mean([0, 1024 / 1500, 512 / 700, 1199 / 1200, 299 / 300, 0]))
    assert r.share_with_hit == pytest.approx(4 / 6)


def test_lru_evicts_leaves_before_roots():
    cache = block_cache(capacity_blocks=3)
    cache.touch([1, 2, 3], 3, False)  # recency (old -> new): 3, 2, 1
    assert cache.entries() == [3, 2, 1]
    cache.touch([7], 1, False)        # evicts 3, the leaf
    assert 3 not in cache and cache.cached_blocks([1, 2, 3], 3) == 2
    cache.touch([1, 2, 3], 3, False)  # 3 back, evicts 7
    assert 7 not in cache and len(cache) == 3
    assert cache.cached_blocks([1, 2, 9], 3) == 2


def test_capacity_limits_matches():
    trace = make_trace([(1024, [1, 2]), (1024, [3, 4]), (1024, [1, 2])])
    assert list(replay_prefix_cache(trace, capacity_blocks=2).matched_blocks) == [0, 0, 0]
    assert list(replay_prefix_cache(trace, capacity_blocks=4).matched_blocks) == [0, 0, 2]


def test_route_gives_separate_caches():
    trace = make_trace([(1024, [1, 2]), (1024, [1, 2]), (1024, [1, 2])])
    r = replay_prefix_cache(trace, route=lambda i: "pd" if i < 2 else "prfaas")
    assert r.caches == 2 and list(r.matched_blocks) == [0, 2, 0]


def test_block_size_must_fit_the_ids():
    trace = make_trace([(1000, [1, 2])])
    assert replay_prefix_cache(trace, block_size=500).matched_blocks.size == 1
    with pytest.raises(PlanError, match=r"mem.jsonl:1: 2 hash ids for 1000 tokens: with block size 1024 "
                                        r"expected at most 1"):
        replay_prefix_cache(trace, block_size=1024)
    with pytest.raises(PlanError, match="block size 0"):
        replay_prefix_cache(trace, block_size=0)
    with pytest.raises(PlanError, match="cache capacity -1"):
        replay_prefix_cache(trace, capacity_blocks=-1)


def test_csv_trace_cannot_be_replayed(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("input_length,output_length\n10,1\n")
    with pytest.raises(PlanError, match="no hash_ids: prefix-cache replay needs a Mooncake JSONL trace"):
        replay_prefix_cache(load_trace(path))


def test_bundled_trace_hit_rate(mooncake):
    r = replay_prefix_cache(mooncake)
    assert r.token_hit_rate == pytest.approx(0.3736, abs=1e-4)
    assert r.request_hit_rate == pytest.approx(0.4094, abs=1e-4)
    assert r.uncached_length.mean() == pytest.approx(7538.5, abs=0.1)
    assert np.all(r.uncached_length >= 1) and np.all(r.uncached_length <= mooncake.input_length)
    # An unlimited cache and one too big to ever evict agree exactly.
    big = replay_prefix_cache(mooncake, capacity_blocks=mooncake.block_ids.size)
    assert np.array_equal(big.cached_length, r.cached_length)


@pytest.fixture(scope="module")
def head(mooncake):
    """The first 3,000 requests of the bundled trace (fast replays for property tests)."""
    n = 3000
    end = int(mooncake.block_offsets[n])
    return Trace(mooncake.path, mooncake.line[:n], mooncake.input_length[:n], mooncake.output_length[:n],
                 mooncake.arrival_s[:n], mooncake.block_ids[:end], mooncake.block_offsets[:n + 1])


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 60_000), st.integers(0, 60_000), st.integers(1, 4))
def test_a_bigger_cache_never_lowers_the_hit_rate(head, small, extra, scopes):
    route = (lambda i: i % scopes) if scopes > 1 else None
    a = replay_prefix_cache(head, capacity_blocks=small, route=route)
    b = replay_prefix_cache(head, capacity_blocks=small + extra, route=route)
    assert np.all(b.matched_blocks >= a.matched_blocks)     # LRU inclusion, request by request
    assert b.token_hit_rate >= a.token_hit_rate
    assert np.all(a.uncached_length >= 1) and np.all(a.uncached_length <= head.input_length)


class StampedLRU:
    """The textbook form of the pool's rule, for comparison: a use stamp per entry (a prompt's root the most
    recent, its checkpoint just below its last block) and eviction by sorting every entry by stamp."""

    def __init__(self, capacity, block_bytes, checkpoint_bytes, low_watermark):
        self.capacity, self.sizes, self.low = capacity, (block_bytes, checkpoint_bytes), low_watermark
        self.stamps: dict[tuple[int, int], int] = {}  # (kind 0 block / 1 checkpoint, id) -> stamp
        self.clock = 0

    def used(self):
        return sum(self.sizes[kind] for kind, _ in self.stamps)

    def touch(self, ids, full, checkpoint):
        top = self.clock + full
        self.stamps.update({(0, x): top - j for j, x in enumerate(ids[:full])})
        if checkpoint and self.sizes[1]:
            self.stamps[(1, ids[full - 1])] = top - full
        self.clock = top + 1
        if self.used() > self.capacity:
            excess, freed = self.used() - self.low * self.capacity, 0.0
            for key in sorted(self.stamps, key=self.stamps.get):
                if freed >= excess:
                    break
                freed += self.sizes[key[0]]
                del self.stamps[key]

    def entries(self):
        return [~x if kind else x for kind, x in sorted(self.stamps, key=self.stamps.get)]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=8), st.booleans()), max_size=60),
       st.integers(2, 40), st.sampled_from([0.0, 0.5, 3.0]), st.sampled_from([0.5, 0.9, 1.0]))
def test_pool_evicts_exactly_as_sorting_by_stamp(prompts, capacity, checkpoint_bytes, low_watermark):
    from prfaas_plan.workload.prefix_cache import PrefixCache
    pool = PrefixCache(float(capacity), 1.0, checkpoint_bytes, 512, low_watermark)
    reference = StampedLRU(float(capacity), 1.0, checkpoint_bytes, low_watermark)
    for path, checkpoint in prompts:  # ids made prefix hashes: an id names its whole prefix
        ids = [hash(tuple(path[: j + 1])) & 0xFFFFFF for j in range(len(path))]
        kv = pool.cached_blocks(ids, len(ids))
        assert kv == next((j for j, x in enumerate(ids) if (0, x) not in reference.stamps), len(ids))
        pool.touch(ids, len(ids), checkpoint, kv)
        reference.touch(ids, len(ids), checkpoint)
        assert pool.entries() == reference.entries()
        assert pool.used == pytest.approx(reference.used()) and pool.used <= capacity
