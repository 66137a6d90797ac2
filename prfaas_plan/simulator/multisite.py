"""Several PD sites sharing one remote prefill pool: the event loop of `events`, one state per site.

Each request arrives at one PD site (``site_of``: drawn by the planning layer from the plan's per-site rates).
A site has its own local prefill pool, decode pool, link to the remote site (line rate over time from its own
`LinkProfile`, RTT), prefix cache and scheduler state (a `policies` policy of its own: static, or the
short-term threshold rule reacting to that site's link and queues); the remote prefill pool and its prefix
cache are shared, one FCFS queue for every site's remote requests. The steps are those of `events` (arrival,
prefill, the link's processor sharing capped at the production rate, decode slots), with the same service
tables per site (`event_parts.service_tables`). The one-site simulator (`engine.simulate`) stays the one
for a single PD site; this Python loop serves N sites (no compiled twin yet, no role conversions: the
adaptive scheduler's long-term rule and its spilling act on one site's split, so it is refused here).

Times in seconds, sizes in bytes, rates in bytes/s (links) or bit/s (line rates), lengths in tokens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from heapq import heappop, heappush

import numpy as np

from ..errors import PlanError
from .event_parts import CAPACITY, DECODE_DONE, LOCAL_DONE, PREFIX_LOCAL, PREFIX_REMOTE, READY, REMOTE_DONE
from .event_parts import SAMPLE_KEYS, service_tables
from .link import LinkProfile, SharedLink
from .policies import ArrivalObs, StaticConfig, StaticPolicy, ThresholdConfig, ThresholdPolicy
from .result import RunRecord, SimResult
from .routing import Router
from .system import System

INF = math.inf
MULTI_SCHEDULERS = ("static", "threshold")
"""Schedulers the multi-site loop runs: both decide routes only, per site."""


@dataclass(frozen=True)
class SiteRun:
    """One PD site's plan for the run: the `System` (its split, link and threshold, tokens) and the line rate
    over time of its link (None: the layout's nominal rate throughout)."""

    system: System
    link_profile: LinkProfile | None = None


@dataclass(frozen=True)
class MultiSimResult:
    """Per site (`SimResult` of that site's requests, in site order) and the whole layout (``total``: every
    request, the sites' queues and link rates summed on one timeline)."""

    sites: tuple
    names: tuple
    total: SimResult
    scheduler: str


class _Site:
    """The mutable state of one PD site in the loop."""

    def __init__(self, k: int, run: SiteRun, requests, cfg, policy, router: Router):
        sysm = run.system
        self.k, self.sysm, self.policy, self.router = k, sysm, policy, router
        svc, _ = service_tables(requests, sysm)
        self.t_local = svc["local_s"].tolist()
        self.t_remote = svc["remote_s"].tolist()
        self.skv = svc["skv_bytes"].tolist()
        self.tail = svc["tail_s"].tolist()
        self.exposed = svc["remote_exposed_s"].tolist()
        self.link = SharedLink(sysm.goodput_Bps, cfg.sample_s, cfg.short_term.tau_s)
        self.lp_free = sysm.n_prefill
        self.lp_queue: deque = deque()
        self.lp_work = 0.0
        self.rp_waiting = 0                      # this site's requests in the shared remote queue
        self.dec_active = [0] * sysm.n_decode
        self.free_slots = [d for d in range(sysm.n_decode) for _ in range(sysm.slots)]
        self.dec_queue: deque = deque()
        self.thr = sysm.threshold
        self.rows: list[tuple] = []
        self.moves = [0, 0.0]
        self.arrived = 0
        self.completed = 0
        self.reacts = policy.reacts and sysm.remote_ok
        self.obs = ArrivalObs(self.backlogs)
        self.rp_work_ref = None                  # set by the loop: a function giving the shared remote work

    def backlogs(self) -> tuple[float, float]:
        """(remote, local) backlog in seconds as `events` defines them, the shared remote queue's work per
        remote instance plus this site's unsent KV at its link's current goodput."""
        link = self.link
        unsent_s = link.unsent_bytes() / link.capacity if link.capacity > 0 else INF
        n_p = self.sysm.n_prefill
        return self.rp_work_ref() + unsent_s, self.lp_work / n_p if n_p else INF


def _policy(scheduler: str, threshold: float):
    if scheduler == "static":
        return StaticPolicy(StaticConfig(), threshold)
    if scheduler == "threshold":
        return ThresholdPolicy(ThresholdConfig(), threshold)
    raise PlanError(f"`scheduler` {scheduler!r}: a layout of several PD sites simulates "
                    f"{' or '.join(MULTI_SCHEDULERS)} (the adaptive scheduler's role conversions and spilling "
                    "act on one site's split; simulate one site's layout for it)")


def simulate_sites(requests, site_of: np.ndarray, runs: list[SiteRun], cfg, scheduler: str, names,
                   progress=None) -> MultiSimResult:
    """Replay ``requests`` (`Requests`), request ``i`` arriving at site ``site_of[i]`` of ``runs`` (one
    `SiteRun` per PD site, the remote pool shared), with ``scheduler`` (`MULTI_SCHEDULERS`) deciding each
    site's routing threshold; ``cfg`` is the `SimConfig` (sampling, caches, horizon, the short-term rule).
    ``progress(n)`` is told how many requests are routed, every 4,096."""
    from .pipeline import COMPILED_FROM

    n = len(requests)
    site_of = np.asarray(site_of, dtype=np.int64)
    if site_of.shape != (n,) or (n and (site_of.min() < 0 or site_of.max() >= len(runs))):
        raise ValueError("site_of must give one site index per request")
    if cfg.scheduler != scheduler:
        cfg = replace(cfg, scheduler=scheduler)
    first = runs[0].system
    n_remote = max((r.system.n_remote for r in runs), default=0)
    caches = requests.has_blocks and cfg.cache_bytes_per_instance > 0
    compiled = n >= COMPILED_FROM
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
        sites.append(_Site(k, run, requests, cfg, _policy(scheduler, run.system.threshold), router))

    arr = requests.arrival_s.tolist()
    inlen = requests.input_tokens.tolist()
    outlen = requests.output_tokens.tolist()
    where = site_of.tolist()
    nan = math.nan
    route = [-1] * n
    uncached = [0] * n
    p_start, p_end, ready, d_start, finish = ([nan] * n for _ in range(5))
    flow_bytes = [0.0] * n
    heap: list = []
    for s, run in zip(sites, runs):
        if run.link_profile is not None and s.sysm.remote_ok:
            for ts, bps in zip(run.link_profile.times_s, run.link_profile.bps):
                heappush(heap, (ts, CAPACITY, s.k, bps))
    rp_free = n_remote
    rp_queue: deque = deque()
    rp_work = [0.0]

    def remote_work() -> float:
        return rp_work[0] / n_remote if n_remote else INF

    for s in sites:
        s.rp_work_ref = remote_work
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
                sy = s.sysm
                s.rows.append((next_sample, s.link.capacity * 8e-9 / sy.efficiency if sy.remote_ok else 0.0,
                               s.rp_waiting, len(s.lp_queue), sy.n_prefill - s.lp_free, len(s.dec_queue),
                               sum(s.dec_active), s.thr, sy.n_prefill, sy.n_decode, s.arrived - s.completed))
            k_sample += 1
            next_sample = k_sample * sample_s

    def start_local(s: _Site, rid: int, t: float) -> None:
        p_start[rid] = t
        heappush(heap, (t + s.t_local[uncached[rid]], LOCAL_DONE, rid, 0))

    def enqueue_local(s: _Site, rid: int, t: float) -> None:
        if s.lp_free > 0:
            s.lp_free -= 1
            start_local(s, rid, t)
        else:
            s.lp_queue.append(rid)
            s.lp_work += s.t_local[uncached[rid]]

    def start_remote(s: _Site, rid: int, t: float) -> None:
        p_start[rid] = t
        d = s.t_remote[uncached[rid]]
        heappush(heap, (t + d, REMOTE_DONE, rid, 0))
        size = flow_bytes[rid]
        s.link.add(t, rid, size, size * s.sysm.keep / d if d > 0 else INF)

    def enqueue_remote(s: _Site, rid: int, t: float) -> None:
        nonlocal rp_free
        if rp_free > 0:
            rp_free -= 1
            start_remote(s, rid, t)
        else:
            rp_queue.append(rid)
            s.rp_waiting += 1
            rp_work[0] += s.t_remote[uncached[rid]]

    def start_decode(s: _Site, rid: int, inst: int, t: float) -> None:
        s.dec_active[inst] += 1
        d_start[rid] = t
        heappush(heap, (t + outlen[rid] * s.sysm.step_s, DECODE_DONE, rid, inst))

    def to_decode(s: _Site, rid: int, t: float) -> None:
        ready[rid] = t
        if s.free_slots:
            start_decode(s, rid, s.free_slots.pop(), t)
        else:
            s.dec_queue.append(rid)

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
            abundant = False
            if s.reacts:
                if t > s.link.t:
                    s.link.advance(t)
                s.obs.t_s, s.obs.link_util = t, s.link.util
                s.obs.remote_queue = len(rp_queue) / n_remote if n_remote else 0.0
                d = s.policy.at_arrival(s.obs)
                s.thr, abundant = d.threshold, d.abundant
            n_p = s.sysm.n_prefill
            if blocks is None:
                local, u, kv_pd, _, moved = s.router.route(None, inlen[rid], s.thr, abundant, n_p > 0)
            else:
                if rid == c1:
                    ids, offs, c0, c1 = next(blocks)
                    offs = offs.tolist()
                lo = offs[rid - c0]
                local, u, kv_pd, _, moved = s.router.route_at(ids, lo, offs[rid - c0 + 1] - lo, inlen[rid], s.thr,
                                                              abundant, n_p > 0)
            uncached[rid] = u
            if local:
                route[rid] = 0
                if moved:  # the prefix lives in the remote cluster: pull it over this site's link first
                    s.moves[0] += 1
                    s.moves[1] += s.skv[moved]
                    s.link.add(t, ~rid, s.skv[moved])
                else:
                    enqueue_local(s, rid, t)
            else:
                route[rid] = 1
                flow_bytes[rid] = s.skv[inlen[rid] - kv_pd]
                if moved:  # the prefix lives in the site's cluster: push it the other way (idle direction)
                    s.moves[0] += 1
                    back = s.skv[moved] / s.link.capacity if s.link.capacity > 0 else INF
                    heappush(heap, (t + back + s.sysm.rtt_half_s, PREFIX_REMOTE, rid, 0))
                else:
                    enqueue_remote(s, rid, t)
            continue
        if th == t:  # ---------------------------------------------------------------------- heap event
            _, kind, rid, aux = heappop(heap)
            if kind == CAPACITY:
                s = sites[rid]
                s.link.set_capacity(t, aux * s.sysm.efficiency / 8.0)
                continue
            s = sites[where[rid]]
            if kind == READY:
                to_decode(s, rid, t)
            elif kind == DECODE_DONE:
                finish[rid] = t
                completed += 1
                s.completed += 1
                s.dec_active[aux] -= 1
                if s.dec_queue:
                    start_decode(s, s.dec_queue.popleft(), aux, t)
                else:
                    s.free_slots.append(aux)
            elif kind == LOCAL_DONE:
                p_end[rid] = t
                heappush(heap, (t + s.tail[uncached[rid]], READY, rid, 0))
                if s.lp_queue:
                    nxt = s.lp_queue.popleft()
                    s.lp_work -= s.t_local[uncached[nxt]]
                    start_local(s, nxt, t)
                else:
                    s.lp_free += 1
            elif kind == REMOTE_DONE:
                p_end[rid] = t
                s.link.uncap(t, rid)
                if rp_queue:
                    nxt = rp_queue.popleft()
                    o = sites[where[nxt]]
                    o.rp_waiting -= 1
                    rp_work[0] -= o.t_remote[uncached[nxt]]
                    start_remote(o, nxt, t)
                else:
                    rp_free += 1
            elif kind == PREFIX_REMOTE:
                enqueue_remote(s, rid, t)
            elif kind == PREFIX_LOCAL:
                enqueue_local(s, rid, t)
            continue
        t, fid = ls.link.complete()  # ------------------------------------------------ a site's link completion
        if fid >= 0:
            heappush(heap, (t + ls.sysm.rtt_half_s + ls.exposed[uncached[fid]], READY, fid, 0))
        else:
            heappush(heap, (t + ls.sysm.rtt_half_s, PREFIX_LOCAL, ~fid, 0))

    end = horizon if t > horizon else now
    for s in sites:
        s.link.advance(end)
    sample(end)
    per_request = {"route": np.array(route, dtype=np.int64), "uncached": np.array(uncached, dtype=np.int64),
                   "p_start": np.array(p_start), "p_end": np.array(p_end), "ready": np.array(ready),
                   "d_start": np.array(d_start), "finish": np.array(finish), "flow_bytes": np.array(flow_bytes)}
    results = []
    timelines = []
    for s in sites:
        idx = np.flatnonzero(site_of == s.k)
        sy = s.sysm
        table = np.array(s.rows, dtype=float).reshape(len(s.rows), len(SAMPLE_KEYS))
        timeline = {key: table[:, j].copy() for j, key in enumerate(SAMPLE_KEYS)}
        timelines.append(timeline)
        area = {"local_prefill": sy.n_prefill * end, "remote_prefill": n_remote * end,
                "local_decode": sy.n_decode * sy.slots * end}
        raw = RunRecord(**{k: v[idx] for k, v in per_request.items()}, arrived=s.arrived, end_s=end,
                        link_bins_bytes=np.array(s.link.bins), timeline=timeline, roles=[],
                        threshold_changes=s.policy.threshold_changes, server_area=area, prefix_moves=s.moves,
                        peak_flows=s.link.peak_flows)
        results.append(SimResult.build(_Subset(requests, idx), raw, sample_s=sample_s,
                                       caches={"pd": s.router.pd, "prfaas": None}, link_bps=sy.link_bps,
                                       scheduler=scheduler, threshold=sy.threshold))
    total = _total(requests, per_request, i, end, sites, timelines, n_remote, rf, sample_s, scheduler, first)
    return MultiSimResult(tuple(results), tuple(names), total, scheduler)


class _Subset:
    """The per-request arrays `SimResult.build` reads, of the requests at ``idx``."""

    def __init__(self, requests, idx):
        self.arrival_s = requests.arrival_s[idx]
        self.input_tokens = requests.input_tokens[idx]
        self.output_tokens = requests.output_tokens[idx]


def _total(requests, per_request, arrived, end, sites, timelines, n_remote, rf, sample_s, scheduler, first):
    """The whole layout as one `SimResult`: every request; queues, busy counts and line rates summed over the
    sites on their common timeline (the shared remote queue counted once); the link bins added up."""
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
    area = {"local_prefill": sum(s.sysm.n_prefill for s in sites) * end, "remote_prefill": n_remote * end,
            "local_decode": sum(s.sysm.n_decode * s.sysm.slots for s in sites) * end}
    moves = [sum(s.moves[0] for s in sites), sum(s.moves[1] for s in sites)]
    raw = RunRecord(**per_request, arrived=arrived, end_s=end, link_bins_bytes=bins, timeline=timeline, roles=[],
                    threshold_changes=sum(s.policy.threshold_changes for s in sites), server_area=area,
                    prefix_moves=moves, peak_flows=max(s.link.peak_flows for s in sites))
    return SimResult.build(requests, raw, sample_s=sample_s, caches={"prfaas": rf},
                           link_bps=sum(s.sysm.link_bps for s in sites), scheduler=scheduler,
                           threshold=math.nan)
