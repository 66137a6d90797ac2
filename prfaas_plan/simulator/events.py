"""The general event loop, needed whenever routing or the instance roles depend on the system's state
(the adaptive scheduler).

One heap of ``(time, kind, request, aux)`` tuples plus the link's own next completion drive the clock;
arrivals are read from the sorted arrays without entering the heap. Per-request service times come from
tables computed once, vectorized, over every uncached length up to the longest prompt. What happens:

1. **Arrival**: the scheduler's policy picks the threshold and the prefix rule (`policies`, at_arrival);
   the `Router` picks the route. A prefix cached only in the other cluster is moved first: remote->local over the
   shared link; local->remote over the reverse direction, modelled as uncontended at the link goodput.
2. **Prefill**: FCFS per pool, earliest free instance, one request at a time. A remote prefill starts its
   KV flow at once (layer-pipelined, capped at its production rate) and lifts the cap when it ends; the
   cache is at decode when the flow completes plus RTT/2. A local prefill's cache is at decode after the
   exposed last layer of the intra-cluster RDMA transfer.
   A request the policy *spills* (`policies.ArrivalDecision`) runs on the local pool at low priority: it starts
   only on an idle instance while more than the policy's ``spare_instances`` stay free for planned requests
   (else the arrival takes the threshold it would be spilled above). A spilled run prefills in forwards of the
   policy's ``spill_chunk_tokens`` (`System.spill_chunk`; its busy time is the local model's at that budget,
   so the extra forwards pay their overhead) and, with ``spill_layerwise``, each forward yields between layers:
   the engine checks the planned queue after each layer of a low-priority forward and keeps the finished
   layers' KV and the partial activations. A planned arrival finding no free instance preempts the spilled
   run whose next yield point comes first (`event_parts.first_boundary`: it waits for one layer of a small
   forward, not for a full chunk of the engine's budget; the spilled one returns to the head of the spill
   queue with its remaining seconds and resumes there), and a freed instance serves the planned queue first.
3. **Decode**: request-level continuous batching: a request holds one of ``slots`` slots of a decode
   instance for ``output_tokens x step_s`` seconds, waiting FCFS for a free one.
4. **Long-term rule**, every period of a periodic policy (at_period): one role conversion at most (a decode
   instance drains its batch first; a busy prefill instance finishes its request first) and ``t`` as the
   policy re-optimized it. The loop applies decisions; it makes none.

This loop is the reference. From `pipeline.COMPILED_FROM` requests on, `run_events` hands the run to its
compiled twin (`compiled_events` driving `event_kernels.run_segment`: the same steps, floats and
tie-breaks, with the long-term rule still in Python, `event_parts.long_term_change`), which gives the same
`RunRecord` bit for bit (tests/test_event_kernels.py) at a fraction of the cost per event; below that the
Python loop finishes first (numba's load costs about a second).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from heapq import heappop, heappush

import numpy as np

from .event_parts import (CAPACITY, DECODE_DONE, LOCAL_DONE, PREFIX_LOCAL, PREFIX_REMOTE, READY, REBALANCE,
                          REMOTE_DONE, SAMPLE_KEYS, first_boundary, long_term_change, recent_samples,
                          service_tables, sorted_initial_events, spill_tables)
from .link import SharedLink
from .result import RunRecord
from .routing import Router
from .policies import ArrivalObs, Policy, StaticConfig, StaticPolicy
from .system import System

INF = math.inf


def run_events(requests, sysm: System, cfg, router: Router, progress=None, policy: Policy | None = None
               ) -> RunRecord:
    """Simulate with the decisions of ``policy`` (`policies`; None: the static one, the plan's threshold and
    roles kept); returns the `RunRecord` `SimResult.build` takes. From `pipeline.COMPILED_FROM` requests on,
    the compiled twin of this loop runs it when the policy offers compiled parameters and the prefix caches
    are compiled ones (`compiled_events` reads their arrays; the same record, bit for bit)."""
    n = len(requests)
    from .pipeline import COMPILED_FROM

    if policy is None:
        policy = StaticPolicy(StaticConfig(), sysm.threshold)
    if n >= COMPILED_FROM and policy.compiled() is not None and (router.pd is None or router.pd.compiled):
        from .compiled_events import run_compiled

        return run_compiled(requests, sysm, cfg, router, progress, policy)
    arr = requests.arrival_s.tolist()
    inlen = requests.input_tokens.tolist()
    outlen = requests.output_tokens.tolist()
    # prompts' block ids a chunk of requests at a time, as flat arrays: ``ids[offs[j]:offs[j + 1]]`` is request
    # ``c0 + j``'s (no array view built per request)
    chunks = requests.iter_blocks().chunks(4096) if requests.has_blocks and router.pd is not None else None
    ids, offs, c0, c1 = None, [], 0, 0
    svc, reopt_perf = service_tables(requests, sysm)
    t_local = svc["local_s"].tolist()
    t_remote = svc["remote_s"].tolist()
    skv = svc["skv_bytes"].tolist()
    tail_local = svc["tail_s"].tolist()
    exposed_remote = svc["remote_exposed_s"].tolist()
    remote_ok, n_remote, slots, step_s = sysm.remote_ok, sysm.n_remote, sysm.slots, sysm.step_s
    spare = policy.spare_instances
    chunk, points, t_spill = spill_tables(sysm, policy, t_local)
    eff, rtt_half, keep, thr0 = sysm.efficiency, sysm.rtt_half_s, sysm.keep, sysm.threshold
    reacts, periodic = policy.reacts and remote_ok, policy.periodic
    link = SharedLink(sysm.goodput_Bps, cfg.sample_s, cfg.short_term.tau_s)

    # per-request records as flat C arrays (8 bytes an entry; a list of floats takes 32): at a million
    # requests the lists alone held about 200 MB
    nan = math.nan
    route = array("q", [-1]) * n
    uncached = array("q", [0]) * n
    p_start = array("d", [nan]) * n
    p_end = array("d", [nan]) * n
    ready = array("d", [nan]) * n
    d_start = array("d", [nan]) * n
    finish = array("d", [nan]) * n
    flow_bytes = array("d", [0.0]) * n
    spilled = bytearray(n)                     # 1: a low-priority local prefill (`policies.ArrivalDecision`)
    spill_gen: dict = {}                       # spilled request -> its current LOCAL_DONE's aux (older: stale)
    spill_left: dict = {}                      # preempted spilled request -> prefill seconds still to run
    spill_running: dict = {}                   # spilled request on an instance -> (this run's start, seconds left then)
    spill_queue: deque = deque()
    spill_work = 0.0                           # prefill seconds waiting in the spill queue
    spill_counts = [0, 0]                      # spilled requests, preemptions

    heap = sorted_initial_events(cfg, remote_ok, policy.period_s if periodic else None)
    lp_servers = lp_free = sysm.n_prefill
    lp_convert = 0                             # busy prefill instances to hand to decode when done
    lp_queue: deque = deque()
    lp_work = 0.0                              # prefill seconds waiting in the local queue
    rp_free = n_remote
    rp_queue: deque = deque()
    rp_work = 0.0
    dec_active = [0] * sysm.n_decode           # busy slots per decode instance
    dec_open = list(range(sysm.n_decode))      # decode instances taking new requests
    free_slots = [d for d in dec_open for _ in range(slots)]  # one entry per free slot: its instance
    draining: set = set()                      # decode instances finishing their batch before prefill
    dec_queue: deque = deque()
    server_area = {"local_prefill": 0.0, "remote_prefill": 0.0, "local_decode": 0.0}
    area_t = 0.0
    completed = 0
    prefix_moves = [0, 0.0]                    # count, bytes over the link
    thr = thr0
    roles: list[dict] = []
    periods: list[dict] = []
    period_u: list[int] = []                   # uncached lengths of the period's arrivals (PD cluster's view)
    period_from = 0                            # the period's first arrival
    rows: list[tuple] = []
    sample_s = cfg.sample_s
    next_sample = 0.0
    k_sample = 0
    horizon = INF if cfg.horizon_s is None else float(cfg.horizon_s)

    def n_prefill_now() -> int:
        return lp_servers - lp_convert

    def account_servers(t: float) -> None:
        nonlocal area_t
        dt = t - area_t
        server_area["local_prefill"] += lp_servers * dt
        server_area["remote_prefill"] += n_remote * dt
        server_area["local_decode"] += (len(dec_open) + len(draining)) * slots * dt
        area_t = t

    def start_local(rid: int, t: float) -> None:
        p_start[rid] = t
        heappush(heap, (t + t_local[uncached[rid]], LOCAL_DONE, rid, 0))

    def start_remote(rid: int, t: float) -> None:
        p_start[rid] = t
        s = t_remote[uncached[rid]]
        heappush(heap, (t + s, REMOTE_DONE, rid, 0))
        size = flow_bytes[rid]
        link.add(t, rid, size, size * keep / s if s > 0 else INF)

    def next_local(t: float) -> None:
        nonlocal lp_work
        rid = lp_queue.popleft()
        lp_work -= t_local[uncached[rid]]
        start_local(rid, t)

    def start_spilled(rid: int, t: float, left: float) -> None:
        if p_start[rid] != p_start[rid]:  # NaN: its first start
            p_start[rid] = t
        gen = spill_gen[rid] = spill_gen.get(rid, 0) + 1
        spill_running[rid] = (t, left)
        heappush(heap, (t + left, LOCAL_DONE, rid, gen))

    def next_spilled(t: float) -> None:
        nonlocal spill_work
        rid = spill_queue.popleft()
        left = spill_left.pop(rid, None)
        if left is None:
            left = t_spill[uncached[rid]]
        spill_work -= left
        start_spilled(rid, t, left)

    def instance_freed(t: float) -> None:  # a local prefill instance has nothing to finish: the next request
        nonlocal lp_free
        if lp_queue:
            next_local(t)
        elif spill_queue and lp_free >= spare:
            next_spilled(t)
        else:
            lp_free += 1

    def enqueue_spilled(rid: int, t: float) -> None:
        nonlocal lp_free, spill_work
        spilled[rid] = 1
        spill_counts[0] += 1
        if lp_free > spare:
            lp_free -= 1
            start_spilled(rid, t, t_spill[uncached[rid]])
        else:
            spill_queue.append(rid)
            spill_work += t_spill[uncached[rid]]

    def preempt(t: float) -> float:
        """A planned arrival at ``t`` takes an instance from a spilled run at that run's next yield point
        (``chunk`` tokens a forward, ``points`` yield points a forward, `first_boundary`); returns when it can
        start, or -1 when every spilled run is in its last step (it then waits in the planned queue, served
        first when one ends). Of the runs, the one whose yield point comes first."""
        nonlocal spill_work
        best, best_rid, best_left = first_boundary(spill_running, t_spill, uncached, chunk, t, points)
        if best_rid < 0:
            return -1.0
        del spill_running[best_rid]
        spill_gen[best_rid] += 1  # its pending LOCAL_DONE is stale now
        spill_left[best_rid] = best_left
        spill_queue.appendleft(best_rid)
        spill_work += best_left
        spill_counts[1] += 1
        return t + max(best, 0.0)

    def next_remote(t: float) -> None:
        nonlocal rp_work
        rid = rp_queue.popleft()
        rp_work -= t_remote[uncached[rid]]
        start_remote(rid, t)

    def enqueue_local(rid: int, t: float) -> None:
        nonlocal lp_free, lp_work
        if spilled[rid]:
            enqueue_spilled(rid, t)
        elif lp_free > 0:
            lp_free -= 1
            start_local(rid, t)
        elif spill_running and (at := preempt(t)) >= 0:
            start_local(rid, at)
        else:
            lp_queue.append(rid)
            lp_work += t_local[uncached[rid]]

    def enqueue_remote(rid: int, t: float) -> None:
        nonlocal rp_free, rp_work
        if rp_free > 0:
            rp_free -= 1
            start_remote(rid, t)
        else:
            rp_queue.append(rid)
            rp_work += t_remote[uncached[rid]]

    def admit(rid: int, t: float, inst: int) -> None:
        dec_active[inst] += 1
        d_start[rid] = t
        heappush(heap, (t + outlen[rid] * step_s, DECODE_DONE, rid, inst))

    def add_decode_instance(t: float) -> None:
        dec_active.append(0)
        inst = len(dec_active) - 1
        dec_open.append(inst)
        for _ in range(slots):
            if dec_queue:
                admit(dec_queue.popleft(), t, inst)
            else:
                free_slots.append(inst)

    def add_prefill_server(t: float) -> None:
        nonlocal lp_servers
        lp_servers += 1
        instance_freed(t)

    def sample(t_until: float) -> None:
        nonlocal next_sample, k_sample
        while next_sample <= t_until:
            rows.append((next_sample, link.capacity * 8e-9 / eff if remote_ok else 0.0, len(rp_queue),
                         len(lp_queue) + len(spill_queue), lp_servers - lp_free, len(dec_queue), sum(dec_active), thr,
                         n_prefill_now(), len(dec_open), i - completed))
            k_sample += 1
            next_sample = k_sample * sample_s

    def rebalance(t: float) -> None:
        nonlocal lp_free, lp_servers, lp_convert, thr, period_from
        split = n_prefill_now() + len(draining)  # the split once pending conversions complete
        step, role, period = long_term_change(policy, cfg, sysm, reopt_perf, t, split, link.capacity,
                                              rows[-recent_samples(cfg, policy.period_s):], period_u,
                                              outlen[period_from:i], thr)
        change = step.change
        account_servers(t)
        if change > 0:  # the least busy decode instance drains, then prefills
            inst = min(dec_open, key=dec_active.__getitem__)
            dec_open.remove(inst)
            free_slots[:] = [d for d in free_slots if d != inst]
            if dec_active[inst] == 0:
                add_prefill_server(t)
            else:
                draining.add(inst)
        elif change < 0:  # an idle prefill instance decodes now, else the next one to finish
            if lp_free > 0:
                lp_free -= 1
                lp_servers -= 1
                add_decode_instance(t)
            else:
                lp_convert += 1
        if step.threshold is not None and not policy.reacts:  # a reacting policy moves there by its own steps
            thr = step.threshold
        if role is not None:
            roles.append(role)
        periods.append(period)
        period_u.clear()
        period_from = i

    def backlogs() -> tuple[float, float]:  # seconds (`ShortTermRule`): remote queue + unsent KV, local queue
        unsent_s = link.unsent_bytes() / link.capacity if link.capacity > 0 else INF
        return rp_work / n_remote + unsent_s, (lp_work + spill_work) / lp_servers if lp_servers else INF

    obs = ArrivalObs(backlogs)
    i = 0
    now = 0.0
    t = 0.0
    while True:
        ta = arr[i] if i < n else INF
        th = heap[0][0] if heap else INF
        tl = link.next_t
        t = ta if ta < th else th
        if tl < t:
            t = tl
        if t == INF or t > horizon or (i >= n and completed == n):
            break
        now = t
        if t >= next_sample:
            sample(t)

        if ta == t:  # ------------------------------------------------------------------------- arrival
            rid = i
            i += 1
            if progress is not None and not (i & 4095):
                progress(i)
            if reacts:
                if t > link.t:
                    link.advance(t)
                obs.t_s, obs.link_util, obs.remote_queue = t, link.util, len(rp_queue) / n_remote
                thr, abundant, spill_above = policy.at_arrival(obs)
                route_thr = thr
                if thr > spill_above and lp_free <= spare:
                    route_thr = spill_above  # no idle instance to spill onto: the overflow stays on its route
            else:
                abundant, spill_above, route_thr = False, INF, thr
            if chunks is None:
                local, u, kv_pd, u_pd, moved = router.route(None, inlen[rid], route_thr, abundant, lp_servers > 0)
            else:
                if rid == c1:
                    ids, offs, c0, c1 = next(chunks)
                    offs = offs.tolist()
                lo = offs[rid - c0]
                local, u, kv_pd, u_pd, moved = router.route_at(ids, lo, offs[rid - c0 + 1] - lo, inlen[rid], route_thr,
                                                               abundant, lp_servers > 0)
            uncached[rid] = u
            if periodic:
                period_u.append(u_pd)
            if local:
                route[rid] = 0
                if moved:  # the prefix lives in the remote cluster: pull it over the link first
                    prefix_moves[0] += 1
                    prefix_moves[1] += skv[moved]
                    link.add(t, ~rid, skv[moved])
                    if u > spill_above:  # spilled once the prefix is here (enqueue_local)
                        spilled[rid] = 1
                elif u > spill_above:
                    enqueue_spilled(rid, t)
                elif lp_free > 0:  # enqueue_local, inlined: most arrivals
                    lp_free -= 1
                    p_start[rid] = t
                    heappush(heap, (t + t_local[u], LOCAL_DONE, rid, 0))
                elif spill_running and (at := preempt(t)) >= 0:
                    p_start[rid] = at
                    heappush(heap, (at + t_local[u], LOCAL_DONE, rid, 0))
                else:
                    lp_queue.append(rid)
                    lp_work += t_local[u]
            else:
                route[rid] = 1
                flow_bytes[rid] = skv[inlen[rid] - kv_pd]  # only what the decode side lacks crosses
                if moved:  # the prefix lives in the PD cluster: push it the other way (same line rate, idle)
                    prefix_moves[0] += 1
                    back = skv[moved] / link.capacity if link.capacity > 0 else INF
                    heappush(heap, (t + back + rtt_half, PREFIX_REMOTE, rid, 0))
                elif rp_free > 0:  # enqueue_remote and start_remote, inlined
                    rp_free -= 1
                    p_start[rid] = t
                    s = t_remote[u]
                    heappush(heap, (t + s, REMOTE_DONE, rid, 0))
                    size = flow_bytes[rid]
                    link.add(t, rid, size, size * keep / s if s > 0 else INF)
                else:
                    rp_queue.append(rid)
                    rp_work += t_remote[u]
            continue

        if th == t:  # ------------------------------------------------------------------------ heap event
            _, kind, rid, aux = heappop(heap)
            if kind == READY:
                ready[rid] = t
                if free_slots:
                    inst = free_slots.pop()  # admit, inlined
                    dec_active[inst] += 1
                    d_start[rid] = t
                    heappush(heap, (t + outlen[rid] * step_s, DECODE_DONE, rid, inst))
                else:
                    dec_queue.append(rid)
            elif kind == DECODE_DONE:
                finish[rid] = t
                completed += 1
                dec_active[aux] -= 1
                if aux in draining:
                    if dec_active[aux] == 0:
                        account_servers(t)
                        draining.discard(aux)
                        add_prefill_server(t)
                elif dec_queue:
                    admit(dec_queue.popleft(), t, aux)
                else:
                    free_slots.append(aux)
            elif kind == LOCAL_DONE:
                if aux:  # a spilled run: its latest start's completion, or stale (it was preempted)
                    if aux != spill_gen[rid]:
                        continue
                    del spill_running[rid]
                p_end[rid] = t
                heappush(heap, (t + tail_local[uncached[rid]], READY, rid, 0))
                if lp_convert:
                    account_servers(t)
                    lp_convert -= 1
                    lp_servers -= 1
                    add_decode_instance(t)
                elif lp_queue:
                    next_local(t)
                elif spill_queue and lp_free >= spare:
                    next_spilled(t)
                else:
                    lp_free += 1
            elif kind == REMOTE_DONE:
                p_end[rid] = t
                link.uncap(t, rid)
                if rp_queue:
                    next_remote(t)
                else:
                    rp_free += 1
            elif kind == PREFIX_REMOTE:
                enqueue_remote(rid, t)
            elif kind == PREFIX_LOCAL:
                enqueue_local(rid, t)
            elif kind == CAPACITY:
                link.set_capacity(t, aux * eff / 8.0)
            else:  # REBALANCE
                rebalance(t)
                if i < n or (completed < i and (heap or link.next_t < INF)):  # else nothing can ever move again
                    heappush(heap, (t + policy.period_s, REBALANCE, 0, 0))
            continue

        t, fid = link.complete()  # ------------------------------------------------------ link completion
        if fid >= 0:
            heappush(heap, (t + rtt_half + exposed_remote[uncached[fid]], READY, fid, 0))
        else:
            heappush(heap, (t + rtt_half, PREFIX_LOCAL, ~fid, 0))

    end = horizon if t > horizon else now
    link.advance(end)
    account_servers(end)
    sample(end)
    table = np.array(rows, dtype=float).reshape(len(rows), len(SAMPLE_KEYS))
    rows.clear()  # each list is emptied once converted: a list and its array never both stay in memory
    timeline = {k: table[:, j].copy() for j, k in enumerate(SAMPLE_KEYS)}
    del table

    def take(values: array, dtype) -> np.ndarray:
        out = np.frombuffer(values, dtype=dtype).copy()  # the array's own bytes: int64 / float64
        del values[:]
        return out

    # a preempted spilled run held no instance between its preemption and its resumption
    preempted_s = math.fsum(p_end[r] - p_start[r] - t_spill[uncached[r]] for r in spill_gen if p_end[r] == p_end[r])
    return RunRecord(route=take(route, np.int64), uncached=take(uncached, np.int64), p_start=take(p_start, float),
                p_end=take(p_end, float), ready=take(ready, float), d_start=take(d_start, float),
                finish=take(finish, float), flow_bytes=take(flow_bytes, float), arrived=i, end_s=end,
                link_bins_bytes=np.array(link.bins), timeline=timeline, roles=roles,
                threshold_changes=policy.threshold_changes, server_area=server_area, prefix_moves=prefix_moves,
                peak_flows=link.peak_flows, periods=periods, spilled=spill_counts[0], preemptions=spill_counts[1],
                preempted_s=preempted_s)
