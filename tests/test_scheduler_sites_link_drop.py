"""The adaptive scheduler on several PD sites under a link drop on one of them (issue 22 item 5 on many sites).

``examples/three-sites.yaml`` (near 100G, metro 40G, far 10G; one remote pool), the default synthetic workload for
1,200 s (seed 0), and ``examples/link-drop.csv`` on near's link only (100 -> 10 Gbps for 600-900 s): near has the
fastest link and the drop to a tenth of it is the largest loss of line rate, so it is the site a drop hurts. Adaptive against static, per site and in total, measured on the run:

- near (the dropped site): P90 and P99 TTFT below static's and P50 not above it by more than one layer's wait
  (measured 0.4580 vs 0.4581 s, 171 vs 194 s, 423 vs 443 s): the link's overflow is spilled onto near's idle
  local instances at low priority, in 2,048-token forwards that yield to a planned arrival between layers
  (`policies.AdaptiveConfig`).
- metro and far (links untouched): P50, P90 and P99 not above static's by more than one layer's wait
  (`layer_wait_s`; measured metro 0.0%, -1.4%, -1.7%; far 0.0%, -0.4%, -17%; on the fit before this one
  metro's P99 was +0.56 ms). A planned request there that finds every local instance busy waits for one layer of a
  spilled forward (0.69 ms on 8xH20). With preemption at the stack's 8,192-token chunk boundaries only the medians were
  +0.7% (metro) and +1.2% (far).
- in total: P90 and P99 below static's, P50 within one layer's wait (measured 0.4678 vs 0.4678 s, 2.79 vs 2.98 s,
  366 vs 384 s).
- the same completions; every long-term period of every site states its decision and why (here no role change:
  no backlog outlasts a period, the model's gain of a conversion is below 5% or decode cannot spare an instance).

The plan is simulate's default, the configurations ``size --layout`` searches per site and role.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.planning.simulate import answer_simulate
from test_scheduler_link_drop import layer_wait_s  # one layer of a spilled forward on 8xH20 (docstring)

ROOT = Path(__file__).resolve().parents[1]
THREE = str(ROOT / "examples" / "three-sites.yaml")
DROP = str(ROOT / "examples" / "link-drop.csv")
DURATION_S = 1200.0   # the drop (600-900 s) and 300 s of recovery; the default 1,800 s takes half as long again



@pytest.fixture(scope="module")
def runs():
    a = answer_simulate(layout_file=THREE, duration_s=DURATION_S, scheduler="adaptive", compare="static",
                        link_profile=f"near={DROP}")
    adaptive, static = a.runs
    assert (adaptive.scheduler, static.scheduler) == ("adaptive", "static")
    return a, adaptive, static


def _summaries(run):
    return dict(zip(run.names, (r.summary() for r in run.sites))) | {"total": run.total.summary()}


def test_the_dropped_site_is_not_worse_at_p50_and_gains_at_p90_and_p99(runs):
    _, adaptive, static = runs
    a, s = _summaries(adaptive)["near"], _summaries(static)["near"]
    assert a["completed"] == s["completed"]
    assert a["ttft_p99_s"] < s["ttft_p99_s"]
    assert a["ttft_p90_s"] <= s["ttft_p90_s"]
    assert a["ttft_p50_s"] <= s["ttft_p50_s"] + layer_wait_s()
    near = adaptive.sites[0]
    assert near.spilled > 0 and near.threshold_changes > 0       # what it did: spilled the overflow, moved t
    assert near.timeline["link_waiting"].max() < static.sites[0].timeline["link_waiting"].max()


def test_the_sites_whose_links_hold_are_not_worse_beyond_the_stated_slack(runs):
    _, adaptive, static = runs
    a, s = _summaries(adaptive), _summaries(static)
    for site in ("metro", "far"):
        assert a[site]["completed"] == s[site]["completed"]
        for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s"):
            assert a[site][key] <= s[site][key] + layer_wait_s(), (site, key, a[site][key], s[site][key])


def test_in_total_p50_p90_and_p99_gain(runs):
    _, adaptive, static = runs
    a, s = _summaries(adaptive)["total"], _summaries(static)["total"]
    assert a["completed"] == s["completed"]
    assert a["ttft_p99_s"] < s["ttft_p99_s"] and a["ttft_p90_s"] <= s["ttft_p90_s"]
    assert a["ttft_p50_s"] <= s["ttft_p50_s"] + layer_wait_s()


def test_every_site_and_period_states_its_decision_and_why(runs):
    _, adaptive, _ = runs
    for name, r in zip(adaptive.names, adaptive.sites):
        assert len(r.periods) == int(DURATION_S // 300), name
        for p in r.periods:
            if p["change"] == "none":   # why none helps, in words
                assert "model gain of a conversion" in p["reason"], (name, p)
            else:
                assert "Lambda_max" in p["reason"] or "persisted" in p["reason"], (name, p)
        assert len(r.role_changes) == sum(p["change"] != "none" for p in r.periods)


def test_the_remote_pool_is_shared_by_planned_share_and_served_link_aware(runs):
    """Each site's rules see the pool as its planned share (the shares add up to the pool); while near's link
    is down the link-aware pool serves the other sites' requests ahead of near's older ones."""
    a, adaptive, static = runs
    share_note = next(n for n in a.notes if n.startswith("schedulers per site"))
    assert "near" in share_note and "metro" in share_note and "far" in share_note
    assert adaptive.arbitration == "link-aware" and static.arbitration == "fcfs"
    assert adaptive.yielded[0] > 0 and sum(adaptive.ahead) == sum(adaptive.yielded)
    assert static.ahead == (0, 0, 0) and static.yielded == (0, 0, 0)


def test_the_pool_serves_fcfs_or_the_request_whose_kv_can_cross_first():
    """`arbiter.RemotePool`: FCFS over the sites, or link-aware (enqueued at + the site's unsent KV seconds,
    ties FCFS), counting who went ahead of whom; a freed instance with nothing waiting stays free."""
    from prfaas_plan.simulator.arbiter import RemotePool

    class Site:
        def __init__(self, unsent):
            self.unsent = unsent

        def unsent_s(self, t):
            return self.unsent

    sites = [Site(100.0), Site(0.0)]
    for arbitration, first in (("fcfs", (0, 7)), ("link-aware", (1, 8))):
        pool = RemotePool(1, 2, arbitration)
        assert pool.take() and not pool.take()
        pool.push(0, 7, 1.0, 2.0)   # site 0's older request, its link 100 s behind
        pool.push(1, 8, 5.0, 3.0)
        assert pool.queue_per_instance() == 2 and pool.work_per_instance() == 5.0
        assert pool.pop(6.0, sites) == first
        assert pool.pop(9.0, sites) == ((1, 8) if first == (0, 7) else (0, 7))
        assert pool.pop(9.5, sites) is None and pool.free == 1 and pool.work == 0.0
        assert (pool.ahead, pool.yielded) == (([0, 0], [0, 0]) if arbitration == "fcfs" else ([0, 1], [1, 0]))
    with pytest.raises(ValueError):
        RemotePool(1, 1, "random")


def test_planned_shares_of_the_remote_pool():
    """Each site's share of the pool's prefill seconds under the plan adds up to 1; one site owns its pool."""
    import numpy as np

    from prfaas_plan.planning.answers import answer_layout
    from prfaas_plan.planning.question import Question
    from prfaas_plan.simulator import Requests
    from prfaas_plan.simulator.multisite import SiteRun, planned_shares
    from prfaas_plan.simulator.system import System
    from prfaas_plan.layout import Layout

    plan = answer_layout(Question.from_layout(THREE), samples=0)
    lay = plan.layout
    rng = np.random.default_rng(0)
    n = 2000
    req = Requests.from_arrays(np.sort(rng.uniform(0, 100, n)), np.clip(rng.lognormal(9.9, 1.0, n), 128, 200_000),
                               rng.integers(1, 600, n))
    site_of = rng.integers(0, 3, n)
    runs = [SiteRun(System.build(Layout(lay.name, (s.with_split(round(r.n_prefill)),), lay.remote, lay.threshold),
                                 plan.perf, r.threshold_tokens))
            for s, r in zip(lay.pd_sites, plan.result.sites)]
    shares = planned_shares(req, site_of, runs)
    assert sum(shares) == pytest.approx(1.0) and shares[0] > max(shares[1:]) > 0
    assert planned_shares(req, np.zeros(n, dtype=np.int64), runs[:1]) == [1.0]
