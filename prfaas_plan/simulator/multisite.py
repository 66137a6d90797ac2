"""Several PD sites sharing one remote prefill pool: the event loop of `events`, one state per site.

Each request arrives at one PD site (``site_of``: drawn by the planning layer from the plan's per-site rates).
A site (`site_state.SiteState`) has its own local prefill pool, decode pool, link to the remote site (line
rate over time from its own `LinkProfile`, RTT), prefix cache and scheduler state: a `policies` policy of its
own (static; the short-term threshold rule reacting to that site's link and queues; or the adaptive one, which
also spills that site's link overflow onto its idle local instances and every period converts one of its
instances between prefill and decode, with hysteresis, on that site's own backlogs). The remote prefill pool
and its prefix cache are shared; who gets a freed remote instance is the scheduler's arbitration
(`arbiter.RemotePool`: FCFS over every site for static and threshold, link-aware for adaptive). The steps
are those of `events` (arrival, prefill, the link's processor sharing capped at the production rate, decode
slots, the long-term rule), with the same service tables per site (`event_parts.service_tables`); a one-site
layout through this loop is the one-site event loop request for request (tests/test_simulator_multisite.py).
The one-site simulator (`engine.simulate`) stays the one for a single PD site; this Python loop serves N
sites (no compiled twin yet).

Times in seconds, sizes in bytes, rates in bytes/s (links) or bit/s (line rates), lengths in tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from heapq import heappop, heappush

import numpy as np

from ..errors import PlanError
from .arbiter import RemotePool
from .event_parts import (CAPACITY, DECODE_DONE, LOCAL_DONE, PREFIX_LOCAL, PREFIX_REMOTE, READY, REBALANCE,
                          REMOTE_DONE, SAMPLE_KEYS)
from .link import LinkProfile
from .result import RunRecord, SimResult
from .routing import Router
from .schedulers import get_scheduler
from .site_state import Book, SiteState
from .system import System

INF = math.inf
MULTI_SCHEDULERS = ("static", "threshold", "adaptive")
"""Schedulers the multi-site loop runs, each per site; the adaptive one also arbitrates the remote pool."""
ARBITRATION = {"static": "fcfs", "threshold": "fcfs", "adaptive": "link-aware"}
"""How each scheduler shares the remote pool between sites (`arbiter.RemotePool`)."""


@dataclass(frozen=True)
class SiteRun:
    """One PD site's plan for the run: the `System` (its split, link and threshold, tokens) and the line rate
    over time of its link (None: the layout's nominal rate throughout)."""

    system: System
    link_profile: LinkProfile | None = None


@dataclass(frozen=True)
class MultiSimResult:
    """Per site (`SimResult` of that site's requests, in site order) and the whole layout (``total``: every
    request, the sites' queues and link rates summed on one timeline); ``arbitration`` of the remote pool
    and, per site, how often a freed remote instance served it ahead of an older request of another site
    (``ahead``) and the reverse (``yielded``)."""

    sites: tuple
    names: tuple
    total: SimResult
    scheduler: str
    arbitration: str = "fcfs"
    ahead: tuple = ()
    yielded: tuple = ()


def _policy(scheduler: str, cfg, threshold: float):
    if scheduler not in MULTI_SCHEDULERS:
        raise PlanError(f"`scheduler` {scheduler!r}: a layout of several PD sites simulates "
                        f"{', '.join(MULTI_SCHEDULERS)}")
    return get_scheduler(scheduler).policy(cfg, threshold)


def simulate_sites(requests, site_of: np.ndarray, runs: list[SiteRun], cfg, scheduler: str, names,
                   progress=None) -> MultiSimResult:
    """Replay ``requests`` (`Requests`), request ``i`` arriving at site ``site_of[i]`` of ``runs`` (one
    `SiteRun` per PD site, the remote pool shared), with ``scheduler`` (`MULTI_SCHEDULERS`) deciding each
    site's routing threshold (and, adaptive, its spilling and role conversions every ``cfg.long_term``
    period) and how the sites share the remote pool (`ARBITRATION`); ``cfg`` is the `SimConfig` (sampling,
    caches, horizon, the rules). ``progress(n)`` is told how many requests are routed, every 4,096."""
    from .pipeline import COMPILED_FROM

    n = len(requests)
    site_of = np.asarray(site_of, dtype=np.int64)
    if site_of.shape != (n,) or (n and (site_of.min() < 0 or site_of.max() >= len(runs))):
        raise ValueError("site_of must give one site index per request")
    if cfg.scheduler != scheduler:
        cfg = replace(cfg, scheduler=scheduler)
    n_remote = max((r.system.n_remote for r in runs), default=0)
    caches = requests.has_blocks and cfg.cache_bytes_per_instance > 0
    compiled = n >= COMPILED_FROM
    outlen = requests.output_tokens.tolist()
    book = Book(n, outlen)
    heap = book.heap
    pool = RemotePool(n_remote, len(runs), ARBITRATION[scheduler])
    shares = planned_shares(requests, site_of, runs)
    rf = None
    sites = []
    for k, run in enumerate(runs):
        pd = None
        if caches:
            pd, rf_k = run.system.caches(cfg.cache_bytes_per_instance, cfg.block_tokens, compiled)
            rf = rf if rf is not None else rf_k  # one remote cluster, one cache, shared
            most = (int(requests.input_tokens.sum()) // cfg.block_tokens * pd.block_bytes
                    + n * pd.checkpoint_bytes)
            pd.assume_fits(most)
            rf.assume_fits(most)
        router = Router(pd, rf if pd is not None else None, run.system.remote_ok)
        sites.append(SiteState(k, run, requests, cfg, _policy(scheduler, cfg, run.system.threshold), router, book,
                               pool, shares[k]))
        if run.link_profile is not None and run.system.remote_ok:
            for ts, bps in zip(run.link_profile.times_s, run.link_profile.bps):
                heappush(heap, (ts, CAPACITY, k, bps))
        if sites[-1].periodic:
            heappush(heap, (sites[-1].policy.period_s, REBALANCE, k, 0))

    arr = requests.arrival_s.tolist()
    inlen = requests.input_tokens.tolist()
    where = site_of.tolist()
    route, uncached, flow_bytes, spilled = book.route, book.uncached, book.flow_bytes, book.spilled
    blocks = requests.iter_blocks().chunks(4096) if caches else None
    ids, offs, c0, c1 = None, [], 0, 0
    sample_s = cfg.sample_s
    next_sample, k_sample = 0.0, 0
    horizon = INF if cfg.horizon_s is None else float(cfg.horizon_s)
    completed = 0
    i = 0

    def sample(t_until: float) -> None:
        nonlocal next_sample, k_sample
        while next_sample <= t_until:
            for s in sites:
                s.rows.append(s.row(next_sample))
            k_sample += 1
            next_sample = k_sample * sample_s

    now = t = 0.0
    while True:
        ta = arr[i] if i < n else INF
        th = heap[0][0] if heap else INF
        tl, ls = INF, None
        for s in sites:
            if s.link.next_t < tl:
                tl, ls = s.link.next_t, s
        t = min(ta, th, tl)
        if t == INF or t > horizon or (i >= n and completed == n):
            break
        now = t
        if t >= next_sample:
            sample(t)
        if ta == t:  # ----------------------------------------------------------------------- arrival
            rid = i
            i += 1
            if progress is not None and not (i & 4095):
                progress(i)
            s = sites[where[rid]]
            s.arrived += 1
            abundant, spill_above, route_thr = False, INF, s.thr
            if s.reacts:
                if t > s.link.t:
                    s.link.advance(t)
                s.obs.t_s, s.obs.link_util, s.obs.remote_queue = t, s.link.util, pool.queue_per_instance()
                s.thr, abundant, spill_above = s.policy.at_arrival(s.obs)
                route_thr = s.thr
                if s.thr > spill_above and s.lp_free <= s.spare:
                    route_thr = spill_above  # no idle instance to spill onto: the overflow stays on its route
            local_ok = s.lp_servers > 0
            if blocks is None:
                local, u, kv_pd, u_pd, moved = s.router.route(None, inlen[rid], route_thr, abundant, local_ok)
            else:
                if rid == c1:
                    ids, offs, c0, c1 = next(blocks)
                    offs = offs.tolist()
                lo = offs[rid - c0]
                local, u, kv_pd, u_pd, moved = s.router.route_at(ids, lo, offs[rid - c0 + 1] - lo, inlen[rid],
                                                                 route_thr, abundant, local_ok)
            uncached[rid] = u
            if s.periodic:
                s.period_u.append(u_pd)
                s.period_out.append(outlen[rid])
            if local:
                route[rid] = 0
                if u > spill_above:
                    spilled[rid] = 1
                if moved:  # the prefix lives in the remote cluster: pull it over this site's link first
                    s.moves[0] += 1
                    s.moves[1] += s.skv[moved]
                    s.link.add(t, ~rid, s.skv[moved])
                else:
                    s.enqueue_local(rid, t)
            else:
                route[rid] = 1
                flow_bytes[rid] = s.skv[inlen[rid] - kv_pd]
                if moved:  # the prefix lives in the site's cluster: push it the other way (idle direction)
                    s.moves[0] += 1
                    back = s.skv[moved] / s.link.capacity if s.link.capacity > 0 else INF
                    heappush(heap, (t + back + s.sysm.rtt_half_s, PREFIX_REMOTE, rid, 0))
                else:
                    s.enqueue_remote(rid, t)
            continue
        if th == t:  # ---------------------------------------------------------------------- heap event
            _, kind, rid, aux = heappop(heap)
            if kind == CAPACITY:
                s = sites[rid]
                s.link.set_capacity(t, aux * s.sysm.efficiency / 8.0)
                continue
            if kind == REBALANCE:
                s = sites[rid]
                s.rebalance(t, cfg)
                if i < n or (completed < i and (heap or any(o.link.next_t < INF for o in sites))):
                    heappush(heap, (t + s.policy.period_s, REBALANCE, rid, 0))
                continue
            s = sites[where[rid]]
            if kind == READY:
                s.to_decode(rid, t)
            elif kind == DECODE_DONE:
                completed += 1
                s.decode_done(rid, t, aux)
            elif kind == LOCAL_DONE:
                s.local_done(rid, t, aux)
            elif kind == REMOTE_DONE:
                book.p_end[rid] = t
                s.link.uncap(t, rid)
                nxt = pool.pop(t, sites)
                if nxt is not None:
                    sites[nxt[0]].start_remote(nxt[1], t)
            elif kind == PREFIX_REMOTE:
                s.enqueue_remote(rid, t)
            elif kind == PREFIX_LOCAL:
                s.enqueue_local(rid, t)
            continue
        t, fid = ls.link.complete()  # ------------------------------------------------ a site's link completion
        if fid >= 0:
            heappush(heap, (t + ls.sysm.rtt_half_s + ls.exposed[uncached[fid]], READY, fid, 0))
        else:
            heappush(heap, (t + ls.sysm.rtt_half_s, PREFIX_LOCAL, ~fid, 0))

    end = horizon if t > horizon else now
    for s in sites:
        s.link.advance(end)
        s.account(end)
    sample(end)
    per_request = {"route": np.array(route, dtype=np.int64), "uncached": np.array(uncached, dtype=np.int64),
                   "p_start": np.array(book.p_start), "p_end": np.array(book.p_end),
                   "ready": np.array(book.ready), "d_start": np.array(book.d_start),
                   "finish": np.array(book.finish), "flow_bytes": np.array(flow_bytes)}
    results = []
    timelines = []
    for s in sites:
        idx = np.flatnonzero(site_of == s.k)
        sy = s.sysm
        table = np.array(s.rows, dtype=float).reshape(len(s.rows), len(SAMPLE_KEYS))
        timeline = {key: table[:, j].copy() for j, key in enumerate(SAMPLE_KEYS)}
        timelines.append(timeline)
        raw = RunRecord(**{k: v[idx] for k, v in per_request.items()}, arrived=s.arrived, end_s=end,
                        link_bins_bytes=np.array(s.link.bins), timeline=timeline, roles=s.roles,
                        threshold_changes=s.policy.threshold_changes, server_area=dict(s.area),
                        prefix_moves=s.moves, peak_flows=s.link.peak_flows, periods=s.periods,
                        spilled=s.spill_counts[0], preemptions=s.spill_counts[1], preempted_s=s.preempted_s())
        results.append(SimResult.build(_Subset(requests, idx), raw, sample_s=sample_s,
                                       caches={"pd": s.router.pd, "prfaas": None}, link_bps=sy.link_bps,
                                       scheduler=scheduler, threshold=sy.threshold))
    total = _total(requests, per_request, i, end, sites, timelines, n_remote, rf, sample_s, scheduler, names)
    return MultiSimResult(tuple(results), tuple(names), total, scheduler, pool.arbitration, tuple(pool.ahead),
                          tuple(pool.yielded))


def planned_shares(requests, site_of: np.ndarray, runs) -> list[float]:
    """Each site's share of the remote pool's prefill seconds under the plan: its requests' remote busy time
    (`System.service`) over the prompts longer than its routing threshold, full lengths (no cache hits), over
    every site's. One site, or nothing planned remote: 1 each."""
    inlen = np.asarray(requests.input_tokens)
    seconds = []
    for k, run in enumerate(runs):
        sy = run.system
        mine = inlen[(site_of == k) & (inlen > sy.threshold)] if sy.remote_ok else inlen[:0]
        seconds.append(float(sy.service(mine)["remote_s"].sum()) if len(mine) else 0.0)
    whole = sum(seconds)
    if len(runs) == 1 or not whole > 0:
        return [1.0] * len(runs)
    return [x / whole for x in seconds]


class _Subset:
    """The per-request arrays `SimResult.build` reads, of the requests at ``idx``."""

    def __init__(self, requests, idx):
        self.arrival_s = requests.arrival_s[idx]
        self.input_tokens = requests.input_tokens[idx]
        self.output_tokens = requests.output_tokens[idx]


def _total(requests, per_request, arrived, end, sites, timelines, n_remote, rf, sample_s, scheduler, names):
    """The whole layout as one `SimResult`: every request; queues, busy counts and line rates summed over the
    sites on their common timeline (the shared remote queue counted once); the link bins added up; each site's
    role changes, named by site."""
    nt = min(len(tl["t_s"]) for tl in timelines)
    timeline = {}
    for key in SAMPLE_KEYS:
        stack = np.stack([tl[key][:nt] for tl in timelines])
        timeline[key] = stack[0] if key == "t_s" else stack.sum(axis=0)
    timeline["threshold_tokens"] = np.full(nt, math.nan)  # one per site: see the sites
    nb = max(len(s.link.bins) for s in sites)
    bins = np.zeros(nb)
    for s in sites:
        bins[:len(s.link.bins)] += s.link.bins
    area = {k: sum(s.area[k] for s in sites) for k in ("local_prefill", "local_decode")}
    area["remote_prefill"] = n_remote * end
    moves = [sum(s.moves[0] for s in sites), sum(s.moves[1] for s in sites)]
    roles = [{"site": name, **r} for name, s in zip(names, sites) for r in s.roles]
    raw = RunRecord(**per_request, arrived=arrived, end_s=end, link_bins_bytes=bins, timeline=timeline,
                    roles=sorted(roles, key=lambda r: r["time_s"]),
                    threshold_changes=sum(s.policy.threshold_changes for s in sites), server_area=area,
                    prefix_moves=moves, peak_flows=max(s.link.peak_flows for s in sites),
                    spilled=sum(s.spill_counts[0] for s in sites), preemptions=sum(s.spill_counts[1] for s in sites),
                    preempted_s=math.fsum(s.preempted_s() for s in sites))
    return SimResult.build(requests, raw, sample_s=sample_s, caches={"prfaas": rf},
                           link_bps=sum(s.sysm.link_bps for s in sites), scheduler=scheduler,
                           threshold=math.nan)
