"""The multi-site simulator (`simulator.multisite`, `planning.simulate_sites`; issue 22 item 3).

- a one-site layout through the multi-site loop is the one-site event loop, request for request (the same
  floats: the new loop is checked against the reference one), with and without prefix caches, for each
  scheduler (adaptive: spilling, preemptions and role conversions both ways, period for period);
- at t = 0 the simulated layout is the plan of ``size --layout``: each site's split and routing threshold;
- the requests are split among the sites by planned rate, and the per-site results partition the total;
- each site's link follows its own profile; a drop on one site's link delays that site only;
- on random layouts (hypothesis): every request completes with its stages in order, no pool holds more
  requests than it has instances, the sites partition the total;
- the command line: three sites under adaptive with ``--compare static,threshold`` and what it did per site,
  one-line refusals (an unknown scheduler, an unknown site, ``--threshold``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.search import grid_search
from prfaas_plan.analytic.throughput import LengthGrid
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.planning import case_study as paper
from prfaas_plan.planning.answers import answer_layout
from prfaas_plan.planning.configurations import SearchSpec
from prfaas_plan.planning.question import Question
from prfaas_plan.planning.simulate import answer_simulate
from prfaas_plan.planning.simulate_sites import _threshold_of
from prfaas_plan.simulator import LinkProfile, LongTermRule, Requests, SimConfig, simulate
from prfaas_plan.simulator.multisite import SiteRun, simulate_sites
from prfaas_plan.simulator.system import System

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
THREE = str(EXAMPLES / "three-sites.yaml")


@pytest.fixture(scope="module")
def one_site():
    rng = np.random.default_rng(3)
    n = 3000
    inputs = np.clip(rng.lognormal(9.9, 1.0, n), 128, 128_000).astype(int)
    perf = paper.case_study_perf("paper")
    ev = grid_search(prfaas_pd("32xH200", "64xH20", Link(100e9, rtt_s=0.01)),
                     LengthGrid(np.sort(inputs.astype(float)), np.full(n, 1 / n)), perf, "exact").best
    hashes = [[int(rng.integers(0, 30))] + list(range(10**6 + 300 * j, 10**6 + 300 * j + (length - 1) // 512))
              for j, length in enumerate(inputs)]
    arrivals = np.cumsum(rng.exponential(1 / (0.9 * ev.lambda_max), n))
    outputs = rng.integers(1, 2000, n)
    return perf, ev, Requests.from_arrays(arrivals, inputs, outputs, hashes), Requests.from_arrays(arrivals, inputs,
                                                                                                   outputs)


@pytest.mark.parametrize("scheduler", ["static", "threshold", "adaptive"])
@pytest.mark.parametrize("blocks", [True, False])
def test_one_site_through_the_multi_site_loop_is_the_event_loop(one_site, scheduler, blocks):
    perf, ev, with_blocks, without = one_site
    req = with_blocks if blocks else without
    drop = LinkProfile.drop(20.0, 60.0, 100e9, 0.1)
    # adaptive: 30 s periods and a rule that converts on any model gain above -5%, so that the run spills,
    # preempts and converts roles both ways (32 conversions), each of which both loops must apply alike
    cfg = SimConfig(ev.threshold, scheduler, link_profile=drop, cache_bytes_per_instance=5e9,
                    long_term=LongTermRule(period_s=30.0, min_gain=-0.05, busy_max=2.0))
    ref = simulate(req, ev.layout, perf, cfg, engine="events")
    multi = simulate_sites(req, np.zeros(len(req), dtype=np.int64),
                           [SiteRun(System.build(ev.layout, perf, ev.threshold), drop)], cfg, scheduler, ["local"])
    got = multi.sites[0]
    for key in ("route", "uncached_tokens", "prefill_start_s", "prefill_end_s", "ready_s", "decode_start_s",
                "finish_s", "link_bytes"):
        assert np.array_equal(getattr(ref, key), getattr(got, key), equal_nan=True), key
    for key in ("remote_waiting", "local_waiting", "decode_waiting", "link_gbps", "threshold_tokens"):
        assert np.array_equal(ref.timeline[key], got.timeline[key]), key
    assert ref.summary() == got.summary()
    assert ref.utilization == got.utilization
    assert (ref.periods, ref.role_changes, ref.spilled, ref.preemptions) == (got.periods, got.role_changes,
                                                                          got.spilled, got.preemptions)
    if scheduler == "adaptive":
        assert len(got.role_changes) > 5 and got.spilled > 0 and len(got.periods) > 30
    if blocks:
        assert ref.cache["pd"] == got.cache["pd"]
    assert multi.total.summary()["completed"] == got.summary()["completed"]


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    drop = tmp_path_factory.mktemp("profiles") / "drop.csv"
    drop.write_text("time_s,gbps\n0,100\n60,10\n200,100\n")
    return answer_simulate(layout_file=THREE, duration_s=300.0, compare="threshold", link_profile=f"near={drop}")


def test_the_simulated_layout_is_the_plan_of_size_layout(three):
    plan = answer_layout(Question.from_layout(THREE), search=SearchSpec())   # as size --layout searches
    for site, r, t in zip(three.layout.pd_sites, plan.result.sites, three.thresholds):
        assert site.prefill == round(r.n_prefill) and site.decode == round(r.n_decode)
        if r.is_threshold:
            assert t == r.threshold_tokens
        else:   # a routing that is not a threshold is simulated at the threshold with the same remote share, said so
            assert t == _threshold_of(r)[0] and any(n.startswith(f"site {site.name}: its optimum sends some lengths both ways")
                                                    for n in three.notes)
    assert three.planned_rps == pytest.approx([r.lambda_rps for r in plan.result.sites])
    for run in three.runs:  # the threshold each site routes with at t = 0
        for r, t in zip(run.sites, three.thresholds):
            assert r.timeline["threshold_tokens"][0] == t


def test_requests_split_by_planned_rate_and_sites_partition_the_total(three):
    run = three.runs[0]
    share = np.array(three.planned_rps) / sum(three.planned_rps)
    arrived = np.array([r.arrived for r in run.sites])
    assert arrived.sum() == run.total.arrived == three.requests
    assert np.abs(arrived / arrived.sum() - share).max() < 0.02   # multinomial, ~7,000 requests
    done = [r.summary()["completed"] for r in run.sites]
    assert sum(done) == run.total.summary()["completed"]
    used = sum(r.utilization["remote_prefill"] for r in run.sites)
    assert used == pytest.approx(run.total.utilization["remote_prefill"]) and used <= 1.0 + 1e-9
    for r in (*run.sites, run.total):  # every request's stages in order
        ok = np.isfinite(r.finish_s)
        assert np.all(r.prefill_start_s[ok] >= r.arrival_s[ok])
        assert np.all(r.ready_s[ok] >= r.prefill_end_s[ok]) and np.all(r.finish_s[ok] >= r.decode_start_s[ok])


def test_each_site_follows_its_own_link_profile(three):
    run = three.runs[0]
    a, b, c = run.sites
    t, line = a.timeline["t_s"], a.timeline["link_capacity_gbps"]
    assert np.all(line[(t > 60) & (t <= 200)] == pytest.approx(10)) and np.all(line[(t > 200) | (t <= 60)] == 100)
    assert np.all(b.timeline["link_capacity_gbps"] == 40) and np.all(c.timeline["link_capacity_gbps"] == 10)
    assert a.timeline["link_waiting"][(t > 60) & (t <= 200)].max() > 10  # near's KV backs up on its own link


def test_a_drop_on_one_sites_link_delays_that_site_only():
    drop = str(EXAMPLES / "link-drop.csv")
    base = answer_simulate(layout_file=THREE, duration_s=1200.0)
    hit = answer_simulate(layout_file=THREE, duration_s=1200.0, link_profile=f"near={drop}")
    s0 = [r.summary() for r in base.runs[0].sites]
    s1 = [r.summary() for r in hit.runs[0].sites]
    assert s1[0]["ttft_p99_s"] > 5 * s0[0]["ttft_p99_s"]
    for k in (1, 2):  # metro and far keep every prompt local at this plan: untouched by near's link
        assert s1[k]["ttft_p99_s"] == s0[k]["ttft_p99_s"]


def test_the_command_line_runs_three_sites_and_refuses_in_one_line(tmp_path):
    from prfaas_plan.cli import run
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["simulate", "--layout", THREE, "--duration", "120s", "--scheduler", "adaptive", "--rebalance",
                    "40s", "--compare", "static,threshold", "--format", "json"])
    assert code == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    rows = doc["sections"]["sim_sites"]
    assert [r["site"] for r in rows] == ["near", "metro", "far", "total"]
    for r in rows:
        assert r["ttft_p99_s"] > 0 and r["usd_per_million_requests"] > 0
    assert {r["scheduler"] for r in doc["sections"]["comparison"]} == {"adaptive", "static", "threshold"}
    # what the adaptive scheduler did, per site: each period's decision and reason, arbitration and backlogs,
    # and a timeline per site and scheduler of the threshold, the split and every queue
    decisions = doc["sections"]["decisions"]
    assert {d["site"] for d in decisions} == {"near", "metro", "far"} and all(d["reason"] for d in decisions)
    assert {(b["scheduler"], b["site"]) for b in doc["sections"]["backlogs"]} == {
        (s, n) for s in ("adaptive", "static", "threshold") for n in ("near", "metro", "far")}
    assert {b["arbitration"] for b in doc["sections"]["backlogs"] if b["scheduler"] == "adaptive"} == {"link-aware"}
    timeline = doc["sections"]["site_timeline"]
    assert {(r["scheduler"], r["site"]) for r in timeline} == {(b["scheduler"], b["site"])
                                                               for b in doc["sections"]["backlogs"]}
    assert {"threshold_tokens", "n_prefill", "n_decode", "remote_waiting", "link_waiting", "local_waiting",
            "decode_waiting"} <= set(timeline[0])
    assert doc["sections"]["roles"]
    for args, needle in ((["--compare", "static,nonesuch"], "is not a scheduler"),
                         (["--link-profile", f"z={EXAMPLES / 'link-drop.csv'}"], "no site 'z'"),
                         (["--threshold", "20k"], "drop it")):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = run(["simulate", "--layout", THREE, "--duration", "60s", *args])
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        assert code == 2 and len(lines) == 1 and needle in lines[0], err.getvalue()


def _most_at_once(start: np.ndarray, end: np.ndarray) -> int:
    """Most intervals [start, end) open at one time."""
    ok = np.isfinite(start) & np.isfinite(end)
    events = sorted([(s, 1) for s in start[ok]] + [(e, -1) for e in end[ok]], key=lambda x: (x[0], x[1]))
    most = cur = 0
    for _, d in events:
        cur += d
        most = max(most, cur)
    return most



@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.sampled_from([1e9, 1e10, 1e11]),
                          st.sampled_from([8e3, 3e4, 1e9])), min_size=2, max_size=3),
       st.integers(1, 3), st.sampled_from(["static", "threshold", "adaptive"]), st.integers(0, 10**6))
def test_multi_site_invariants_on_random_layouts(sites, n_remote, scheduler, seed):
    """Whatever the sites: every request completes once, its stages in order, no pool ever holds more requests
    than it has instances (remote shared, local per site; adaptive: a spilled run preempted spans time it held
    no instance, and conversions move instances, so each site's instances in total bound it and the split
    keeps them), and the sites partition the total."""
    from prfaas_plan.layout import Layout, PDSite, PrefillSite
    from prfaas_plan.performance.base import parse_instance

    perf0 = paper.case_study_perf("paper")
    base = next(iter(perf0.sites.values()))
    pd_sites = tuple(PDSite(f"s{k}", parse_instance("8xH20", "x"), p, d, Link(bw, rtt_s=0.004))
                     for k, (p, d, bw, _) in enumerate(sites))
    layout = Layout("random", pd_sites, PrefillSite("remote", parse_instance("8xH200", "x"), n_remote))
    perf = replace(perf0, sites={s.name: base for s in pd_sites})
    rng = np.random.default_rng(seed)
    n = 400
    req = Requests.from_arrays(np.sort(rng.uniform(0, 60, n)), np.clip(rng.lognormal(9.9, 1.0, n), 128, 100_000),
                               rng.integers(1, 600, n))
    site_of = rng.integers(0, len(sites), n)
    runs = [SiteRun(System.build(Layout("random", (s,), layout.remote), perf, t),
                    LinkProfile.drop(10.0, 20.0, s.link.bandwidth_bps, 0.2))
            for s, (_, _, _, t) in zip(pd_sites, sites)]
    cfg = SimConfig(0.0, scheduler, long_term=LongTermRule(period_s=10.0, min_samples=10))
    out = simulate_sites(req, site_of, runs, cfg, scheduler, [s.name for s in pd_sites])
    total = out.total
    assert np.all(np.isfinite(total.finish_s)) and total.summary()["completed"] == n
    assert np.all(total.prefill_start_s >= total.arrival_s) and np.all(total.prefill_end_s >= total.prefill_start_s)
    assert np.all(total.ready_s >= total.prefill_end_s) and np.all(total.decode_start_s >= total.ready_s)
    remote = total.route == 1
    assert _most_at_once(total.prefill_start_s[remote], total.prefill_end_s[remote]) <= n_remote
    for k, (r, s) in enumerate(zip(out.sites, pd_sites)):
        local = r.route == 0
        most = _most_at_once(r.prefill_start_s[local], r.prefill_end_s[local])
        if scheduler == "adaptive":
            tl = r.timeline
            assert np.all(tl["n_prefill"] + tl["n_decode"] <= s.prefill + s.decode)
            assert most <= s.prefill + s.decode + r.preemptions
        else:
            assert most <= s.prefill
        assert np.array_equal(r.arrival_s, req.arrival_s[site_of == k])
    assert sum(r.summary()["completed"] for r in out.sites) == n
