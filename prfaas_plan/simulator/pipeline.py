"""The static scheduler's fast path: the same system as `events`, simulated stage by stage.

With a fixed threshold and fixed roles, a request's route depends only on the prefix caches (updated in
arrival order), never on timing. So the routes come first, then every stage in turn: each prefill pool is
an FCFS queue of identical servers (Lindley's recursion with a heap of server free times, in entry
order), the link is event-simulated over its flows only, and decode is an FCFS queue of slots in order
of the time each cache reached it. The result is the same as the general event loop's (a test checks it),
at a fraction of the cost; the timeline is counted from the per-request times afterwards. At scale the
queues and the link run compiled (`kernels`; the same floats as the Python loops here, also tested).
"""

from __future__ import annotations

import math
from heapq import heapreplace

import numpy as np

from ..workload.prefix_cache import COMPILED_FROM as CACHES_COMPILED_FROM
from .link import SharedLink
from .result import RunRecord
from .routing import Router
from .system import System

INF = math.inf
COMPILED_FROM = CACHES_COMPILED_FROM
"""Requests from which the FCFS queues and the link run compiled (`kernels`, same floats), and the event loop
too (`events.run_events` hands the run to `compiled_events`, the same run), and the prefix caches
(`workload.prefix_cache.COMPILED_FROM`, the same count: the compiled event loop needs compiled pools): numba
costs about 1 s a process (its import and loading the cached machine code), which the compiled loops repay
from about here on (benchmarks/bench_scale.py); below it the Python loops finish first and numba is never
imported."""


def _fcfs(entry: np.ndarray, service: np.ndarray, servers: int, compiled: bool = False) -> np.ndarray:
    """Start times of FCFS service on ``servers`` identical servers; ``entry`` must be non-decreasing."""
    if compiled:
        from .kernels import fcfs_starts

        return fcfs_starts(entry, service, servers)
    free = [-INF] * servers
    starts = []
    append = starts.append
    for a, s in zip(entry.tolist(), service.tolist()):
        f = free[0]
        st = a if a > f else f
        heapreplace(free, st + s)
        append(st)
    return np.array(starts, dtype=float)


def _link(start, end, size, cap, sysm: System, cfg, horizon: float, compiled: bool = False):
    """Completion time of each remote flow (NaN if not done by ``horizon``), and a function that closes the
    link's books: given the run's end time, seconds, the bytes delivered per timeline bin and the most flows
    at once."""
    prof = cfg.link_profile
    if compiled:
        from .kernels import add_to_bins, drain_link

        cap_t = np.asarray(prof.times_s if prof is not None else (), dtype=float)
        cap_v = np.asarray(prof.bps if prof is not None else (), dtype=float) * sysm.efficiency / 8.0
        done, bins, nb, peak, t, rate = drain_link(start, end, np.argsort(end, kind="stable"), size, cap, cap_t,
                                                   cap_v, sysm.goodput_Bps, float(cfg.sample_s), horizon)

        def close(end_s: float) -> tuple[np.ndarray, int]:
            b, k = bins, nb
            if end_s > t and rate > 0.0:  # the flows still sending deliver up to the end
                b, k = add_to_bins(b, k, t, end_s, rate, float(cfg.sample_s))
            return b[:k].copy(), int(peak)

        return done, close
    link = SharedLink(sysm.goodput_Bps, cfg.sample_s, 0.0)  # no smoothed utilization: nothing reads it
    m = len(start)
    starts, ends, sizes, caps = start.tolist(), end.tolist(), size.tolist(), cap.tolist()
    by_end = np.argsort(end, kind="stable").tolist()
    cap_t = list(prof.times_s) if prof is not None else []
    cap_v = list(prof.bps) if prof is not None else []
    done = [math.nan] * m
    ia = ie = ic = 0
    while ia < m or link.n_flows:
        ta = starts[ia] if ia < m else INF
        te = ends[by_end[ie]] if ie < m else INF
        tc = cap_t[ic] if ic < len(cap_t) else INF
        tl = link.next_t
        t = min(ta, te, tc, tl)
        if t == INF or t > horizon:
            break
        if tc == t:
            link.set_capacity(t, cap_v[ic] * sysm.efficiency / 8.0)
            ic += 1
        elif ta == t:
            link.add(t, ia, sizes[ia], caps[ia])
            ia += 1
        elif te == t:
            link.uncap(t, by_end[ie])
            ie += 1
        else:
            t, j = link.complete()
            done[j] = t

    def close_python(end_s: float) -> tuple[np.ndarray, int]:
        link.advance(end_s)
        return np.array(link.bins), link.peak_flows

    return np.array(done, dtype=float), close_python


def _before(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many of ``times`` (NaN ignored) are strictly before each of ``at``."""
    return np.searchsorted(np.sort(times[np.isfinite(times)]), at, side="left")


def run_pipeline(requests, sysm: System, cfg, router: Router, progress=None) -> RunRecord:
    """Simulate with a static threshold; returns the `RunRecord` `SimResult.build` takes. ``progress(n)`` is
    called once the ``n`` requests are routed."""
    horizon = INF if cfg.horizon_s is None else float(cfg.horizon_s)
    arrival = requests.arrival_s
    n = int(np.searchsorted(arrival, horizon, side="right"))
    inlen = requests.input_tokens[:n]
    thr = sysm.threshold
    compiled = n >= COMPILED_FROM

    # 1. routes, in arrival order
    if router.pd is None or not requests.has_blocks:
        local = (inlen <= thr) | (not sysm.remote_ok) if sysm.n_prefill > 0 else np.zeros(n, dtype=bool)
        uncached = inlen.copy()
        kv_pd = np.zeros(n, dtype=np.int64)
    else:
        flags, u, kv = router.route_all(requests.iter_blocks(n), inlen.tolist(), thr, sysm.n_prefill > 0)
        local = np.array(flags, dtype=bool)
        uncached = np.array(u, dtype=np.int64)
        kv_pd = np.array(kv, dtype=np.int64)
    if progress is not None:
        progress(n)
    remote = ~local

    # 2. service times, vectorized over the requests
    svc = sysm.service(uncached)
    size = sysm.kv_bytes(inlen - kv_pd)  # only what the decode side lacks crosses

    # 3. prefill pools
    p_start = np.full(n, math.nan)
    li, ri = np.flatnonzero(local), np.flatnonzero(remote)
    if len(li):
        p_start[li] = _fcfs(arrival[li], svc["local_s"][li], sysm.n_prefill, compiled)
    if len(ri):
        p_start[ri] = _fcfs(arrival[ri], svc["remote_s"][ri], sysm.n_remote, compiled)
    p_end = p_start + np.where(local, svc["local_s"], svc["remote_s"])

    # 4. the link, over the remote flows
    ready = p_end + svc["tail_s"]
    flow_bytes = np.where(remote, size, 0.0)
    cap = np.where(svc["remote_s"] > 0, size * sysm.keep / np.maximum(svc["remote_s"], 1e-300), INF)
    done, close_link = _link(p_start[ri], p_end[ri], size[ri], cap[ri], sysm, cfg, horizon, compiled)
    ready[ri] = done + sysm.rtt_half_s

    ready[ri] += svc["remote_exposed_s"][ri]  # a remote prefill's latency beyond its busy time (System.service)

    # 5. decode slots, in order of readiness
    ok = np.flatnonzero(np.isfinite(ready) & (ready <= horizon))
    order = ok[np.argsort(ready[ok], kind="stable")]
    d_start = np.full(n, math.nan)
    hold = requests.output_tokens[:n] * sysm.step_s
    d_start[order] = _fcfs(ready[order], hold[order], sysm.n_decode * sysm.slots, compiled)
    finish = d_start + hold

    # 6. cut at the horizon (or the last completion) and count the timeline
    for a in (p_start, p_end, ready, d_start, finish):
        a[a > horizon] = math.nan
    end = horizon if horizon < INF else float(np.nanmax(finish)) if n else 0.0
    link_bins, peak_flows = close_link(end)
    ts = np.arange(int(end // cfg.sample_s) + 2) * cfg.sample_s
    ts = ts[ts <= end]
    prof = cfg.link_profile
    line = np.full(ts.shape, sysm.link_bps)
    if prof is not None and sysm.remote_ok:  # the rate set by the last profile point before each sample
        line = np.asarray((sysm.link_bps,) + prof.bps)[np.searchsorted(np.asarray(prof.times_s), ts, side="left")]

    def waiting(mask):
        return _before(arrival[:n][mask], ts) - _before(p_start[mask], ts)

    timeline = {
        "t_s": ts,
        "link_capacity_gbps": line * 1e-9 if sysm.remote_ok else np.zeros(ts.shape),
        "remote_waiting": waiting(remote),
        "local_waiting": waiting(local),
        "local_busy": _before(p_start[local], ts) - _before(p_end[local], ts),
        "decode_waiting": _before(ready, ts) - _before(d_start, ts),
        "decode_busy": _before(d_start, ts) - _before(finish, ts),
        "threshold_tokens": np.full(ts.shape, thr),
        "n_prefill": np.full(ts.shape, float(sysm.n_prefill)),
        "n_decode": np.full(ts.shape, float(sysm.n_decode)),
        "in_flight": _before(arrival[:n], ts) - _before(finish, ts),
    }
    timeline = {k: np.asarray(v, dtype=float) for k, v in timeline.items()}
    area = {"local_prefill": sysm.n_prefill * end, "remote_prefill": sysm.n_remote * end,
            "local_decode": sysm.n_decode * sysm.slots * end}

    def full(a: np.ndarray, fill) -> np.ndarray:  # pad to every request (those after the horizon never arrived)
        out = np.full(len(requests), fill, dtype=a.dtype)
        out[:n] = a
        return out

    return RunRecord(route=full(np.where(local, 0, 1), -1), uncached=full(uncached, 0),
                p_start=full(p_start, math.nan), p_end=full(p_end, math.nan), ready=full(ready, math.nan),
                d_start=full(d_start, math.nan), finish=full(finish, math.nan),
                flow_bytes=full(flow_bytes, 0.0), arrived=n, end_s=end, link_bins_bytes=link_bins,
                timeline=timeline, roles=[], threshold_changes=0, server_area=area, prefix_moves=[0, 0.0],
                peak_flows=peak_flows)
