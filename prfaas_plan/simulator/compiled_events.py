"""The event loop compiled (`event_kernels.run_segment`), driven from Python: `events.run_events` hands runs of
`pipeline.COMPILED_FROM` requests or more here. The kernel runs every event; this driver does what needs
Python -- the long-term rule at each rebalance (`event_parts.long_term_change`, the same code the Python
loop calls), growing the kernel's arrays, fetching the next chunk of block ids, progress -- and assembles the
`RunRecord`. Importing it imports numba.

Times in seconds, sizes in bytes, lengths in tokens.
"""

from __future__ import annotations

import math

import numpy as np

from . import event_kernels as K
from .compiled_link import CompiledLink
from .event_parts import SAMPLE_KEYS, long_term_change, recent_samples, service_tables, sorted_initial_events
from .result import RunRecord

INF = math.inf
FIRST_SIZES = {"heap": 1024, "rows": 1024, "decode": 4}
"""Room the kernel's growable arrays start with beyond what the run needs at once: heap events, timeline
rows, decode instances (they are doubled when the kernel asks; a test shrinks them to exercise that)."""


def _grown(a: np.ndarray, size: int, axis: int, fill=0) -> np.ndarray:
    """``a`` with its length along ``axis`` at least doubled and at least ``size``, the new part ``fill``."""
    shape = list(a.shape)
    shape[axis] = max(2 * a.shape[axis], size)
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, m) for m in a.shape)] = a
    return out


def run_compiled(requests, sysm, cfg, router, progress, policy) -> RunRecord:
    """`events.run_events` with ``policy`` (one that offers `policies.CompiledRule` parameters), compiled: the
    same `RunRecord`, bit for bit (tests/test_event_kernels.py)."""
    rule = policy.compiled()
    n = len(requests)
    svc, reopt_perf = service_tables(requests, sysm)
    tab = np.ascontiguousarray(np.stack([svc["local_s"], svc["remote_s"], svc["skv_bytes"], svc["tail_s"],
                                         svc["remote_exposed_s"]]), dtype=float)
    arr = np.ascontiguousarray(requests.arrival_s, dtype=float)
    inlen = np.ascontiguousarray(requests.input_tokens, dtype=np.int64)
    outlen = np.ascontiguousarray(requests.output_tokens, dtype=np.int64)
    pd, rf = router.pd, router.prfaas
    chunks = requests.iter_blocks().chunks(4096) if requests.has_blocks and pd is not None else None
    none_i2, none_i1, none_f = np.zeros((1, 2), dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1)
    ids = offs = none_i1

    rec_i = np.zeros((3, n), dtype=np.int64)  # route, uncached, uncached as the PD cache sees it
    rec_i[0] = -1
    rec_f = np.full((6, n), math.nan)         # prefill start, end, ready, decode start, finish; flow bytes
    rec_f[5] = 0.0
    queues = np.zeros((3, n), dtype=np.int64)
    slots = sysm.slots
    dec = np.zeros((3, sysm.n_decode + FIRST_SIZES["decode"]), dtype=np.int64)
    dec[1, :sysm.n_decode] = np.arange(sysm.n_decode)
    free_slots = np.zeros(dec.shape[1] * slots, dtype=np.int64)
    free_slots[:sysm.n_decode * slots] = np.repeat(np.arange(sysm.n_decode), slots)
    rows = np.zeros((FIRST_SIZES["rows"], len(SAMPLE_KEYS)))
    link = CompiledLink(sysm.goodput_Bps, cfg.sample_s, cfg.short_term.tau_s)
    initial = sorted_initial_events(cfg, sysm.remote_ok, policy.period_s if rule.periodic else None)
    size = len(initial) + slots + K.PUSHES_PER_EVENT + FIRST_SIZES["heap"]
    hf, hi = np.zeros((2, size)), np.zeros((2, size), dtype=np.int64)
    for j, (t, kind, rid, aux) in enumerate(initial):  # a sorted array is a heap
        hf[:, j], hi[:, j] = (t, aux), (kind, rid)

    I, F = K.new_state()
    short = rule.short_term
    I[K.LP_SERVERS] = I[K.LP_FREE] = sysm.n_prefill
    I[K.RP_FREE] = I[K.N_REMOTE] = sysm.n_remote
    I[K.HEAP_N] = len(initial)
    I[K.N_DEC] = I[K.N_OPEN] = sysm.n_decode
    I[K.N_FREE] = sysm.n_decode * slots
    I[K.N], I[K.SLOTS], I[K.REACTS], I[K.REMOTE_OK], I[K.HAS_CACHE] = (n, slots, rule.reacts, sysm.remote_ok,
                                                                       chunks is not None)
    F[K.THR] = F[K.BASE] = F[K.CURRENT] = sysm.threshold
    F[K.LAST_EVAL] = -INF
    F[K.SAMPLE_S] = cfg.sample_s
    F[K.HORIZON] = INF if cfg.horizon_s is None else float(cfg.horizon_s)
    F[[K.STEP_S, K.EFF, K.RTT_HALF, K.KEEP]] = sysm.step_s, sysm.efficiency, sysm.rtt_half_s, sysm.keep
    F[[K.ABUNDANT_UTIL, K.INTERVAL_S, K.UTIL_HIGH, K.UTIL_LOW, K.QUEUE_HIGH, K.QUEUE_LOW, K.FACTOR,
       K.MAX_FACTOR]] = (short.abundant_util, short.interval_s, short.util_high, short.util_low, short.queue_high,
                         short.queue_low, short.factor, short.max_factor)
    F[[K.MIN_FACTOR, K.MARGIN_S, K.LOCAL_MAX_S]] = short.min_factor, short.margin_s, short.local_max_s
    F[K.PERIOD_S] = policy.period_s

    roles: list[dict] = []
    periods: list[dict] = []
    period_from = 0
    recent = recent_samples(cfg, policy.period_s)
    while True:
        code = K.run_segment(arr, inlen, outlen, tab, rec_i, rec_f, hf, hi, queues, dec, free_slots, rows,
                             link._state, link._flows, link._bins, *((pd.rec, pd.meta, pd.sizes, rf.rec, rf.meta,
                             rf.sizes) if chunks is not None else (none_i2, none_i1, none_f) * 2), ids, offs, I, F)
        if code == K.END:
            break
        t, i = float(F[K.T]), int(I[K.ARRIVED])
        if code == K.REBALANCE_DUE:
            k = int(I[K.K_SAMPLE])
            split = int(I[K.LP_SERVERS] - I[K.LP_CONVERT] + I[K.N_DRAINING])
            step, role, period = long_term_change(policy, cfg, sysm, reopt_perf, t, split,
                                                  float(link._state[K.L_CAPACITY]),
                                                  rows[max(0, k - recent):k].tolist(),
                                                  rec_i[2, period_from:i].tolist(), outlen[period_from:i].tolist(),
                                                  float(F[K.THR]))
            if I[K.N_DEC] + I[K.LP_CONVERT] + 2 > dec.shape[1]:  # room for every decode instance it can add
                dec = _grown(dec, 0, 1)
                free_slots = _grown(free_slots, dec.shape[1] * slots, 0)
            I[K.CHANGE], I[K.PENDING] = step.change, 1
            if step.threshold is not None:  # the short-term rule's new base (`AdaptiveThreshold.reset`)
                F[K.BASE] = step.threshold
                if not rule.reacts:
                    F[K.THR] = F[K.CURRENT] = step.threshold
            if role is not None:
                roles.append(role)
            periods.append(period)
            period_from = i
        elif code == K.GROW_HEAP:
            hf, hi = _grown(hf, 0, 1), _grown(hi, 0, 1)
        elif code == K.GROW_ROWS:
            rows = _grown(rows, int(t / cfg.sample_s) + 3, 0)
        elif code == K.GROW_LINK:
            link.reserve(t)
        elif code == K.GROW_PD:
            pd.make_room(int(I[K.NEED]))
        elif code == K.GROW_RF:
            rf.make_room(int(I[K.NEED]))
        elif code == K.NEXT_CHUNK:
            ids, offs, I[K.C0], I[K.C1] = next(chunks)
        elif progress is not None:  # K.PROGRESS
            progress(i)

    k = int(I[K.K_SAMPLE])
    timeline = {key: rows[:k, j].copy() for j, key in enumerate(SAMPLE_KEYS)}
    del rows, queues, hf, hi
    area = {"local_prefill": float(F[K.AREA_LP]), "remote_prefill": float(F[K.AREA_RP]),
            "local_decode": float(F[K.AREA_LD])}
    return RunRecord(route=rec_i[0], uncached=rec_i[1], p_start=rec_f[0], p_end=rec_f[1], ready=rec_f[2],
                     d_start=rec_f[3], finish=rec_f[4], flow_bytes=rec_f[5], arrived=int(I[K.ARRIVED]),
                     end_s=float(F[K.T]), link_bins_bytes=np.array(link.bins), timeline=timeline, roles=roles,
                     threshold_changes=int(I[K.CHANGES]), server_area=area,
                     prefix_moves=[int(I[K.MOVES]), float(F[K.MOVED_BYTES])], peak_flows=int(I[K.PEAK_FLOWS]),
                     periods=periods)
