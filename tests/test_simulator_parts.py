"""The simulator's parts: prefix cache, shared link, link profiles, trace reader, routing rules."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.simulator.inputs import read_trace
from prfaas_plan.simulator.link import LinkProfile, SharedLink, read_link_profile
from prfaas_plan.simulator.requests import Requests
from prfaas_plan.simulator.routing import Router
from prfaas_plan.simulator.scheduler import AdaptiveThreshold, ShortTermRule
from prfaas_plan.workload.prefix_cache import PrefixCache

TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"


# --- prefix cache ----------------------------------------------------------------------------------

def test_cache_matches_full_blocks_and_leaves_one_token():
    c = PrefixCache(1e12, 1.0, 0.0, block_tokens=512)  # no checkpoints needed (dense model)
    c.insert([1, 2, 3], 1500, True)                    # 2 full blocks cached; the third is partial
    assert c.match([1, 2, 3, 4], 2048) == (1024, 1024)
    assert c.match([1, 9], 1024) == (512, 512)
    assert c.match([1, 2], 1024) == (512, 512)         # a fully cached prompt still computes its last block
    assert c.match([5, 2], 1024) == (0, 0)


def test_linear_state_reuse_needs_an_exact_checkpoint():
    c = PrefixCache(1e12, 1.0, 10.0)
    c.insert([1, 2, 3, 4], 4 * 512 + 7, True)          # checkpoint after block 4 (its last full block)
    assert c.match([1, 2, 3, 4, 5, 6], 6 * 512) == (2048, 2048)
    assert c.match([1, 2, 3, 8], 4 * 512 + 100) == (1536, 0)  # KV for 3 blocks but no state at 3 blocks
    c.insert([1, 2, 30], 3 * 512, False)               # blocks only (a decode side receiving a transfer)
    assert c.match([1, 2, 30, 31], 4 * 512) == (1536, 0)


def test_lru_evicts_least_recent_leaves_first():
    c = PrefixCache(10.0, 1.0, 0.0, low_watermark=0.5)
    c.insert([1, 2, 3, 4], 4 * 512, True)
    c.insert([1, 5, 6, 7], 4 * 512, True)
    c.insert([1, 8, 9, 10], 4 * 512, True)             # 10 blocks: at capacity
    c.insert([11], 512, True)                          # over: drop to 5 blocks, oldest leaves first
    assert set(c.entries()) == {1, 8, 9, 10, 11}
    assert c.evicted == 6 and c.used <= 5.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=8), min_size=1, max_size=40),
       st.integers(3, 30))
def test_cache_stays_prefix_closed_and_bounded(paths, capacity):
    c = PrefixCache(float(capacity), 1.0, 0.0)
    for p in paths:  # ids made prefix hashes: a block's id names its whole prefix
        hashes = [hash(tuple(p[: j + 1])) & 0xFFFFFFF for j in range(len(p))]
        kv, _ = c.match(hashes, len(p) * 512 + 1)
        assert kv == 512 * next((j for j, h in enumerate(hashes) if h not in c), len(hashes))
        c.insert(hashes, len(p) * 512 + 1, True)
        assert c.used <= capacity
        for j in range(1, len(hashes)):  # every cached block has its parent cached
            assert hashes[j] not in c or hashes[j - 1] in c


# --- routing ---------------------------------------------------------------------------------------

def test_scarce_and_abundant_prefix_rules():
    def router():  # hybrid model: prefill reuse needs a state checkpoint
        return Router(PrefixCache(1e12, 1.0, 10.0), PrefixCache(1e12, 1.0, 10.0), True)

    first = list(range(1, 41))                         # 40 blocks = 20,480 tokens: goes remote at t = 8K
    follow = first + [99, 100]                         # the next turn, 21,504 tokens
    r = router()
    assert r.route(first, 20_480, 8192, False, True) == (False, 20_480, 0, 20_480, 0)
    # scarce: the PD cluster holds the KV blocks (decode received them) but no checkpoint -> remote, where
    # the state checkpoint is; only the new 1,024 tokens' KV (plus state) crosses the link
    assert r.route(follow, 21_504, 8192, False, True) == (False, 1024, 20_480, 21_504, 0)
    r = router()
    r.route(first, 20_480, 8192, False, True)
    # abundant: the best cache anywhere says "short": prefill locally after moving the prefix over
    assert r.route(follow, 21_504, 8192, True, True) == (True, 1024, 20_480, 21_504, 20_480)
    assert r.pd.hit_tokens == 20_480 and r.prfaas.prompt_tokens == 20_480


def test_without_caches_routing_is_the_threshold():
    r = Router(None, None, True)
    assert r.route(None, 5000, 8192, False, True)[:2] == (True, 5000)
    assert r.route(None, 9000, 8192, False, True)[:2] == (False, 9000)
    assert r.route(None, 5000, 8192, False, False)[0] is False   # no local prefill instance
    assert Router(None, None, False).route(None, 9000, 8192, False, True)[0] is True


def test_short_term_rule_first_version_stays_between_base_and_cap():
    """With ``min_factor`` 1, ``margin_s`` 0 and no local guard the rule is the first version's: up while the
    link is congested and the remote side behind, back to the long-term value otherwise."""
    a = AdaptiveThreshold(ShortTermRule(interval_s=1.0, min_factor=1.0, margin_s=0.0, local_max_s=math.inf), 10_000)
    assert a.update(0.0, 0.95, 0.0, 5.0, 1.0) == 12_500          # congested link, remote side behind
    assert a.update(0.5, 0.95, 0.0, 5.0, 1.0) == 12_500          # at most one evaluation per interval
    assert a.update(2.0, 0.95, 0.0, 1.0, 5.0) == 10_000          # local side now behind: back down
    assert a.update(4.0, 0.95, 0.0, 5.0, 1.0) == 12_500
    assert a.update(6.0, 0.10, 0.0, 0.0, 0.0) == 10_000          # relaxed: back to the long-term value
    assert a.update(8.0, 0.10, 0.0, 0.0, 0.0) == 10_000 and a.changes == 4


def test_short_term_rule_goes_below_base_while_the_local_side_is_behind():
    a = AdaptiveThreshold(ShortTermRule(interval_s=1.0), 10_000)
    assert a.update(0.0, 0.95, 0.0, 5.0, 0.0) == 12_500          # link backs up, local queue empty: up
    assert a.update(2.0, 0.95, 0.0, 5.0, 1.0) == 10_000          # a local queue forms: back toward base
    assert a.update(4.0, 0.95, 0.0, 9.0, 1.0) == 10_000          # ... and no move up while it lasts
    assert a.update(6.0, 0.60, 0.0, 1.0, 4.0) == 8_000           # local behind by > margin: down, below base
    assert a.update(8.0, 0.60, 0.0, 1.0, 2.0) == 8_000           # inside the hysteresis band: kept
    assert a.update(10.0, 0.60, 0.0, 1.0, 0.0) == 10_000         # local side drained: back up to base
    a.reset(20_000)
    assert a.current == 10_000 and a.base == 20_000               # a new base is reached by steps, not a jump


@settings(max_examples=300, deadline=None, derandomize=True)
@given(steps=st.lists(st.tuples(st.floats(0.0, 1.5), st.floats(0.0, 4.0), st.floats(0.0, 50.0),
                                st.floats(0.0, 50.0)), min_size=1, max_size=40))
def test_short_term_rule_stays_in_its_band_and_moves_one_factor_at_a_time(steps):
    rule = ShortTermRule(interval_s=1.0)
    a = AdaptiveThreshold(rule, 1000.0)
    for k, (util, queue, remote_s, local_s) in enumerate(steps):
        before = a.current
        now = a.update(float(k), util, queue, remote_s, local_s)
        assert 1000.0 * rule.min_factor - 1e-9 <= now <= 1000.0 * rule.max_factor + 1e-9
        assert now == before or math.isclose(now / before, rule.factor) or math.isclose(before / now, rule.factor) \
            or now in (1000.0, 1000.0 * rule.min_factor, 1000.0 * rule.max_factor)
        if now > before:                      # more work to the local pool only while its queue is empty
            assert local_s < rule.local_max_s


# --- link --------------------------------------------------------------------------------------------

def test_link_shares_fairly_and_respects_production_caps():
    link = SharedLink(100.0, bin_s=1.0, tau_s=0.0)
    link.add(0.0, 1, 100.0)
    assert link.next_t == pytest.approx(1.0)
    link.add(0.5, 2, 100.0)                            # two flows: 50 each
    assert link.complete() == (pytest.approx(1.5), 1)
    assert link.complete() == (pytest.approx(2.0), 2)  # alone again from 1.5 s
    link.add(3.0, 3, 100.0, cap=10.0)                  # producer-limited: never completes while capped
    link.add(3.0, 4, 100.0)
    assert link.rate[3] == 10.0 and link.rate[4] == 90.0
    link.uncap(4.0, 3)
    link.set_capacity(4.0, 0.0)                        # outage: nothing moves
    assert link.next_t == math.inf
    assert sum(link.bins) == pytest.approx(300.0)      # bytes delivered by t = 4 s


def test_link_profile_reader(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("time_s,gbps\n0,100\n600,10\n900,100\n")
    prof = read_link_profile(p)
    assert prof.times_s == (0.0, 600.0, 900.0) and prof.bps == (100e9, 10e9, 100e9)
    for body, needle in (("time_s,gbps\n0,-5\n", ":2: gbps: must be >= 0"), ("t,g\n0,1\n", "unknown column 't'"),
                         ("time_s\n0\n", "columns time_s,gbps"), ("time_s,gbps\n0,1,7\n", ":2: expected 2 fields"),
                         ("time_s,gbps\n5,1\n3,1\n", "goes backwards"), ("time_s,gbps\nx,1\n", ":2: time_s: expected a number"),
                         ("time_s,gbps\n", "no rows")):
        p.write_text(body)
        with pytest.raises(PlanError, match=needle):
            read_link_profile(p)
    with pytest.raises(PlanError, match="no such file"):
        read_link_profile(tmp_path / "missing.csv")
    assert LinkProfile.drop(600, 300, 100e9, 0.1).bps == (10e9, 100e9)


# --- inputs ------------------------------------------------------------------------------------------

def test_trace_reader_streams_and_stops_at_the_duration():
    r = read_trace(TRACE, duration_s=60.0)
    assert 0 < len(r) < 1000 and r.arrival_s[-1] <= 60.0
    assert all(len(h) == math.ceil(l / 512) for h, l in zip(r.iter_blocks(), r.input_tokens.tolist()))


def test_trace_reader_keeps_ids_in_int32_only_when_all_fit(tmp_path):
    big = 2**31  # one past int32
    for ids, dtype in (([0, 7], np.int32), ([7, big], np.int64)):
        path = tmp_path / f"t{len(str(ids))}.jsonl"
        path.write_text(f'{{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": {ids}}}\n'
                        f'{{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [{ids[0]}, 9]}}\n')
        r = read_trace(path)
        assert r.block_ids.dtype == dtype
        assert [h.tolist() for h in r.iter_blocks()] == [ids, [ids[0], 9]]  # the same int64 ids either way


def test_trace_reader_counts_time_from_the_first_request(tmp_path):
    # A trace whose clock does not start at 0 (e.g. epoch milliseconds) replays like one that does: the
    # window counts from the first request, and the simulation does not idle until it arrives.
    with open(TRACE) as fh:
        rows = [json.loads(next(fh)) for _ in range(400)]
    late = tmp_path / "late.jsonl"
    late.write_text("".join(json.dumps({**r, "timestamp": r["timestamp"] + 1_700_000_000_000}) + "\n"
                            for r in rows))
    shifted, original = read_trace(late, duration_s=60.0), read_trace(TRACE, duration_s=60.0)
    assert shifted.arrival_s[0] == 0.0 and len(shifted) == len(original)
    assert np.allclose(shifted.arrival_s, original.arrival_s)


def test_trace_reader_refuses_more_requests_than_the_cap(monkeypatch):
    monkeypatch.setenv("PRFAAS_PLAN_MAX_REQUESTS", "1000")
    with pytest.raises(PlanError, match=r"more than 1,000 requests.*PRFAAS_PLAN_MAX_REQUESTS"):
        read_trace(TRACE)
    assert len(read_trace(TRACE, duration_s=60.0)) <= 1000  # a window within the cap is read


@pytest.mark.parametrize("line", ['{"timestamp": 0, "input_length": 10}', "not json",
                                  '{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": []}',
                                  '{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}'])
def test_trace_reader_names_the_bad_line(tmp_path, line):
    p = tmp_path / "t.jsonl"
    good = json.dumps({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})
    p.write_text(good + "\n" + line + "\n")
    with pytest.raises(PlanError, match=r"t\.jsonl:2: .*expected"):
        read_trace(p)


def test_requests_sorting_rescaling_and_checks():
    r = Requests.from_arrays([3.0, 1.0, 2.0], [10, 20, 30], [1, 2, 3], [[1], [2], [3]])
    assert r.arrival_s.tolist() == [1.0, 2.0, 3.0] and [h.tolist() for h in r.iter_blocks()] == [[2], [3], [1]]
    assert r.at_rate(2.0).arrival_s.tolist() == [0.0, 0.5, 1.0]
    assert len(r.until(1.0)) == 2
    for bad in (([0.0], [0], [1]), ([math.nan], [1], [1]), ([], [], [])):
        with pytest.raises(PlanError):
            Requests.from_arrays(*bad)
    assert np.array_equal(Requests.from_arrays([0.0], [1.4], [2]).input_tokens, [1])


@pytest.mark.parametrize("ckpt_bytes,capacity", [(0.0, 1e12), (10.0, 1e12), (10.0, 300.0)])
def test_batch_routing_equals_request_by_request(ckpt_bytes, capacity):
    reqs = read_trace(TRACE, duration_s=400.0)
    lengths = reqs.input_tokens.tolist()

    def router():
        return Router(PrefixCache(capacity, 1.0, ckpt_bytes, low_watermark=0.9),
                      PrefixCache(capacity, 1.0, ckpt_bytes, low_watermark=0.9), True)

    one, batch = router(), router()
    for c in (batch.pd, batch.prfaas):  # the batch pass skips the recency order when nothing can be evicted
        c.assume_fits(sum(lengths) // 512 + len(lengths) * ckpt_bytes)
    expected = [one.route(h, l, 6000, False, True)[:3] for h, l in zip(reqs.iter_blocks(), lengths)]
    got = list(zip(*batch.route_all(reqs.iter_blocks(), lengths, 6000, True)))
    assert got == expected
    for a, b in ((one.pd, batch.pd), (one.prfaas, batch.prfaas)):
        assert (a.hit_tokens, a.evicted) == (b.hit_tokens, b.evicted)
        if capacity < 1e12:  # recency matters only when something can be evicted
            assert a.entries() == b.entries()
        else:
            assert not b.recency_matters and set(a.entries()) == set(b.entries())


def test_long_term_rule_queues_first_then_the_model():
    from prfaas_plan.simulator.scheduler import LongTermRule, Observation, decide, decide_why

    rule = LongTermRule()
    calm = dict(local_waiting=0.0, local_busy=1.0, decode_waiting=0.0, decode_busy_slots=40.0, n_prefill=3,
                n_decode=5, slots_per_decode=20)
    assert decide(rule, Observation(**calm), 1) == 0
    assert decide(rule, Observation(**{**calm, "local_waiting": 10.0}), 1) == +1     # prefill falls behind
    assert decide(rule, Observation(**{**calm, "local_waiting": 10.0, "decode_busy_slots": 95.0}), 1) == 0
    assert decide(rule, Observation(**{**calm, "decode_waiting": 9.0}), 1) == -1     # decode falls behind
    assert decide(rule, Observation(**calm, gain_more_prefill=0.09), 1) == +1        # the model: link dropped
    assert decide(rule, Observation(**calm, gain_more_decode=0.07), 1) == -1
    assert decide(rule, Observation(**calm, gain_more_decode=0.03), 1) == 0          # below min_gain
    assert decide(rule, Observation(**{**calm, "n_prefill": 1}, gain_more_decode=0.5), 1) == 0
    # a burst whose mean is high but which did not last the period converts nothing
    assert decide(rule, Observation(**{**calm, "local_waiting": 10.0, "local_waiting_low": 0.0}), 1) == 0
    # hysteresis: the previous period's conversion is not undone at once
    assert decide(rule, Observation(**{**calm, "decode_waiting": 9.0}), 1, last_change=+1) == 0
    assert decide(rule, Observation(**{**calm, "local_waiting": 10.0}), 1, last_change=-1) == 0
    change, why = decide_why(rule, Observation(**{**calm, "local_waiting": 10.0, "decode_busy_slots": 95.0}), 1)
    assert change == 0 and "decode cannot spare an instance" in why and "95 busy slots" in why


def test_split_gains_read_the_grid_search_surface():
    from prfaas_plan.analytic.search import GridResult
    from prfaas_plan.simulator.scheduler import split_gains

    lam = np.array([[0.0, 2.0, 3.0, 3.3], [0.0, 1.0, 2.0, 1.0]])
    res = GridResult(None, np.array([1e3, 2e3]), np.arange(4), lam)
    assert split_gains(res, 2) == (pytest.approx(0.1), pytest.approx(-1 / 3))
    assert split_gains(res, 3) == (0.0, pytest.approx(3.0 / 3.3 - 1))
    assert split_gains(res, 0) == (math.inf, 0.0)


def test_balanced_threshold_reuses_the_search_exactly():
    """The long-term rule's re-optimization reads the grid search's own stage bounds (and, at the search's
    best split, its answer) instead of recomputing them: at every split the threshold is the one a fresh
    computation over the same thresholds gives, to the bit."""
    from dataclasses import replace

    from prfaas_plan.analytic.search import (
        _balanced_threshold,
        balanced_threshold,
        grid_search,
    )
    from prfaas_plan.analytic.throughput import routing_stats, stage_bounds
    from prfaas_plan.layout import Link, prfaas_pd
    from prfaas_plan.planning import case_study as paper
    from prfaas_plan.simulator.scheduler import empirical_grid

    lengths = np.random.default_rng(3).lognormal(9.9, 1.0, 400).clip(128, 131_072).round()
    grid = empirical_grid(lengths)
    perf = paper.case_study_perf("paper")
    layout = prfaas_pd(paper.REMOTE, paper.LOCAL, Link(100e9))
    res = grid_search(replace(layout, threshold=None), grid, perf, "exact")
    assert res.bounds is not None
    free = replace(layout, threshold=None)
    r = routing_stats(grid, perf, res.thresholds, "exact", layout.pd_sites[0].name)
    for n_p in res.splits[1:-1].tolist():
        col = res.lam[:, res.splits.tolist().index(n_p)]
        fresh = _balanced_threshold(free, grid, perf, "exact", res.thresholds, col,
                                    stage_bounds(free, r, perf, [n_p]), 0, n_p, col.max())
        assert balanced_threshold(layout, grid, perf, n_p, "exact", res) == fresh
        assert balanced_threshold(layout, grid, perf, n_p, "exact", replace(res, bounds=None)) == fresh


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), split=st.integers(0, 8), gbps=st.sampled_from([1.0, 10.0, 40.0, 100.0, 400.0]),
       out=st.integers(64, 4096))
def test_long_term_surface_near_the_split_decides_as_the_full_search(seed, split, gbps, out):
    """The long-term rule evaluates only the splits one conversion reaches (`surface(..., near=split)`):
    the gains it reads and the threshold it re-optimizes after each possible change are the full grid
    search's, to the bit, on random period lengths, splits and link rates."""
    from dataclasses import replace

    from prfaas_plan.analytic.search import balanced_threshold
    from prfaas_plan.layout import Link, prfaas_pd
    from prfaas_plan.planning import case_study as paper
    from prfaas_plan.simulator.scheduler import empirical_grid, split_gains, surface

    rng = np.random.default_rng(seed)
    lengths = rng.lognormal(rng.uniform(7.0, 11.0), rng.uniform(0.3, 1.5), int(rng.integers(100, 600)))
    grid = empirical_grid(lengths.clip(1, 131_072).round())
    perf = replace(paper.case_study_perf("paper"), output_tokens=float(out))
    base = prfaas_pd(paper.REMOTE, paper.LOCAL, Link(gbps * 1e9))
    layout = replace(base, pd_sites=(base.pd_sites[0].with_split(split),))
    full, near = surface(layout, grid, perf, "exact"), surface(layout, grid, perf, "exact", near=split)
    assert near.splits.tolist() == [s for s in (split - 1, split, split + 1) if 0 <= s <= 8]
    assert split_gains(near, split) == split_gains(full, split)
    for n_p in near.splits.tolist():
        assert balanced_threshold(layout, grid, perf, n_p, "exact", near) == \
            balanced_threshold(layout, grid, perf, n_p, "exact", full)
