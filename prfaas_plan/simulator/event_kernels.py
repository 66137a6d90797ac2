"""The compiled twin of the event loop (`events.run_events`): every per-event step in one numba function,
`run_segment`, which returns to its Python driver (`compiled_events.run_compiled`) only when Python is
needed -- a long-term rebalance, an array that must grow, the next chunk of block ids, a progress tick,
the end. It repeats the Python loop operation for operation (the same float operations in the same
order, the same tie-breaking), so the run is the same, bit for bit; tests/test_event_kernels.py runs both
on random workloads and compares every field.

State lives in arrays the driver owns (times in seconds, sizes in bytes, rates in bytes/s, lengths in
tokens):

- ``I`` (int64) and ``F`` (float64): the loop's counters and clocks at the slots named below (the rule and
  system constants too);
- ``hf`` (2, H) float64 = event time s, aux; ``hi`` (2, H) int64 = kind, request: a binary min-heap of
  ``I[HEAP_N]`` events ordered as Python orders the tuples ``(time, kind, request, aux)`` (no two pending
  events are equal, so any heap pops them in the order `heapq` does);
- ``queues`` (3, n) int64: the local prefill, remote prefill and decode FCFS queues (a request enters each
  at most once, so a queue is a window ``[head, tail)`` of its row);
- ``dec`` (3, D) int64 = busy slots per decode instance, the open instances in order, draining flags;
  ``free_slots`` (D x slots) int64: a stack of free slots, each naming its instance;
- ``rows`` (R, 11) float64: the timeline samples (`event_parts.SAMPLE_KEYS`);
- the link's ``state``, ``flows`` and ``bins`` (`kernels`, driven by `kernels.link_*`);
- the prefix caches' arrays (`workload.prefix_kernels`, routed by its ``_route``) and the current chunk's
  block ids.

Before an event mutates anything, `run_segment` checks that every array has room for what the event can
add; when one does not, it returns the code asking for it, and the same event runs again on re-entry.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..workload.prefix_kernels import _route, room
from .event_parts import CAPACITY, DECODE_DONE, LOCAL_DONE, PREFIX_LOCAL, PREFIX_REMOTE, READY, REBALANCE
from .event_parts import REMOTE_DONE
from .kernels import _BIN_S, _CLOCK, _N, _NEXT_T, _UTIL, link_add, link_advance, link_complete, link_reallocate
from .kernels import _CAPACITY as L_CAPACITY
from .kernels import link_uncap, link_unsent

INF = math.inf


# what `run_segment` returns
(END, REBALANCE_DUE, GROW_HEAP, GROW_ROWS, GROW_LINK, GROW_PD, GROW_RF, NEXT_CHUNK, PROGRESS) = range(9)

# I slots: counters, then constants (LP / RP: local / remote prefill; LQ, RQ, DQ: the local prefill, remote
# prefill and decode queues; C0, C1: the requests of the current block-id chunk; NEED: entries to make room for)
(ARRIVED, COMPLETED, LP_SERVERS, LP_FREE, LP_CONVERT, RP_FREE, HEAP_N, LQ_HEAD, LQ_TAIL, RQ_HEAD, RQ_TAIL,
 DQ_HEAD, DQ_TAIL, N_DEC, N_OPEN, N_DRAINING, N_FREE, K_SAMPLE, CHANGES, MOVES, PEAK_FLOWS, C0, C1, PENDING,
 CHANGE, NEED, N, N_REMOTE, SLOTS, REACTS, REMOTE_OK, HAS_CACHE) = range(32)
I_SIZE = 32
# F slots: state, then constants (THR: the threshold in use; BASE, CURRENT, LAST_EVAL: `AdaptiveThreshold`'s;
# AREA_*: server-seconds provisioned; LP_WORK, RP_WORK: queued prefill seconds; T: the time Python is told;
# the rest: the policy's `ShortTermRule` and period, `policies.CompiledRule`)
(THR, BASE, CURRENT, LAST_EVAL, AREA_T, AREA_LP, AREA_RP, AREA_LD, NEXT_SAMPLE, NOW, T, LP_WORK, RP_WORK,
 MOVED_BYTES, SAMPLE_S, HORIZON, STEP_S, EFF, RTT_HALF, KEEP, ABUNDANT_UTIL, INTERVAL_S, UTIL_HIGH, UTIL_LOW,
 QUEUE_HIGH, QUEUE_LOW, FACTOR, MAX_FACTOR, PERIOD_S, MIN_FACTOR, MARGIN_S, LOCAL_MAX_S) = range(32)
F_SIZE = 32
PUSHES_PER_EVENT = 2  # events one step pushes besides a new decode instance's admissions (``slots`` more)


@njit(cache=True)
def _before(ta, ka, ra, xa, tb, kb, rb, xb):
    """Whether event a sorts before event b, as Python compares ``(time, kind, request, aux)`` tuples."""
    if ta != tb:
        return ta < tb
    if ka != kb:
        return ka < kb
    if ra != rb:
        return ra < rb
    return xa < xb


@njit(cache=True)
def push(hf, hi, I, t, kind, rid, aux):
    """Add an event (the heap has room)."""
    j = I[HEAP_N]
    I[HEAP_N] = j + 1
    while j > 0:
        p = (j - 1) >> 1
        if not _before(t, kind, rid, aux, hf[0, p], hi[0, p], hi[1, p], hf[1, p]):
            break
        hf[0, j], hf[1, j], hi[0, j], hi[1, j] = hf[0, p], hf[1, p], hi[0, p], hi[1, p]
        j = p
    hf[0, j], hf[1, j], hi[0, j], hi[1, j] = t, aux, kind, rid


@njit(cache=True)
def _pop(hf, hi, I):
    """Remove the first event: ``(time, kind, request, aux)``."""
    out = hf[0, 0], hi[0, 0], hi[1, 0], hf[1, 0]
    n = I[HEAP_N] - 1
    I[HEAP_N] = n
    t, x, kind, rid = hf[0, n], hf[1, n], hi[0, n], hi[1, n]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and _before(hf[0, c + 1], hi[0, c + 1], hi[1, c + 1], hf[1, c + 1],
                                 hf[0, c], hi[0, c], hi[1, c], hf[1, c]):
            c += 1
        if not _before(hf[0, c], hi[0, c], hi[1, c], hf[1, c], t, kind, rid, x):
            break
        hf[0, j], hf[1, j], hi[0, j], hi[1, j] = hf[0, c], hf[1, c], hi[0, c], hi[1, c]
        j = c
    hf[0, j], hf[1, j], hi[0, j], hi[1, j] = t, x, kind, rid
    return out


@njit(cache=True)
def _link_add(ls, lf, lb, I, t, fid, size, cap):
    """`CompiledLink.add` on the arrays (room for the flow and the time checked by the caller)."""
    link_add(ls, lf, lb, t, fid, size, cap)
    if ls[_N] > I[PEAK_FLOWS]:
        I[PEAK_FLOWS] = int(ls[_N])


@njit(cache=True)
def _start_local(rid, t, tab, rec_i, rec_f, hf, hi, I):
    rec_f[0, rid] = t
    push(hf, hi, I, t + tab[0, rec_i[1, rid]], LOCAL_DONE, rid, 0.0)


@njit(cache=True)
def _start_remote(rid, t, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb):
    rec_f[0, rid] = t
    s = tab[1, rec_i[1, rid]]
    push(hf, hi, I, t + s, REMOTE_DONE, rid, 0.0)
    size = rec_f[5, rid]
    _link_add(ls, lf, lb, I, t, rid, size, size * F[KEEP] / s if s > 0 else INF)


@njit(cache=True)
def _next_local(t, queues, tab, rec_i, rec_f, hf, hi, I, F):
    rid = queues[0, I[LQ_HEAD]]
    I[LQ_HEAD] += 1
    F[LP_WORK] -= tab[0, rec_i[1, rid]]
    _start_local(rid, t, tab, rec_i, rec_f, hf, hi, I)


@njit(cache=True)
def _admit(rid, t, inst, outlen, rec_f, dec, hf, hi, I, F):
    dec[0, inst] += 1
    rec_f[3, rid] = t
    push(hf, hi, I, t + outlen[rid] * F[STEP_S], DECODE_DONE, rid, float(inst))


@njit(cache=True)
def _add_decode_instance(t, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F):
    inst = I[N_DEC]
    I[N_DEC] = inst + 1
    dec[0, inst] = 0
    dec[2, inst] = 0
    dec[1, I[N_OPEN]] = inst
    I[N_OPEN] += 1
    for _ in range(I[SLOTS]):
        _free_slot(t, inst, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F)


@njit(cache=True)
def _free_slot(t, inst, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F):
    """A slot of decode instance ``inst`` is free at ``t``: the next waiting request takes it, or it waits."""
    if I[DQ_HEAD] < I[DQ_TAIL]:
        rid = queues[2, I[DQ_HEAD]]
        I[DQ_HEAD] += 1
        _admit(rid, t, inst, outlen, rec_f, dec, hf, hi, I, F)
    else:
        free_slots[I[N_FREE]] = inst
        I[N_FREE] += 1


@njit(cache=True)
def _enqueue_local(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F):
    if I[LP_FREE] > 0:
        I[LP_FREE] -= 1
        _start_local(rid, t, tab, rec_i, rec_f, hf, hi, I)
    else:
        queues[0, I[LQ_TAIL]] = rid
        I[LQ_TAIL] += 1
        F[LP_WORK] += tab[0, rec_i[1, rid]]


@njit(cache=True)
def _enqueue_remote(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb):
    if I[RP_FREE] > 0:
        I[RP_FREE] -= 1
        _start_remote(rid, t, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb)
    else:
        queues[1, I[RQ_TAIL]] = rid
        I[RQ_TAIL] += 1
        F[RP_WORK] += tab[1, rec_i[1, rid]]


@njit(cache=True)
def _add_prefill_server(t, queues, tab, rec_i, rec_f, hf, hi, I, F):
    I[LP_SERVERS] += 1
    if I[LQ_HEAD] < I[LQ_TAIL]:
        _next_local(t, queues, tab, rec_i, rec_f, hf, hi, I, F)
    else:
        I[LP_FREE] += 1


@njit(cache=True)
def _account(t, I, F):
    """Server-seconds provisioned up to ``t``."""
    dt = t - F[AREA_T]
    F[AREA_LP] += I[LP_SERVERS] * dt
    F[AREA_RP] += I[N_REMOTE] * dt
    F[AREA_LD] += (I[N_OPEN] + I[N_DRAINING]) * I[SLOTS] * dt
    F[AREA_T] = t


@njit(cache=True)
def _sample(t_until, rows, dec, ls, I, F):
    """The timeline rows due up to ``t_until`` (the caller checked `rows_short`)."""
    while F[NEXT_SAMPLE] <= t_until:
        r = I[K_SAMPLE]
        busy = 0
        for inst in range(I[N_DEC]):
            busy += dec[0, inst]
        rows[r, 0] = F[NEXT_SAMPLE]
        rows[r, 1] = ls[L_CAPACITY] * 8e-9 / F[EFF] if I[REMOTE_OK] else 0.0
        rows[r, 2] = I[RQ_TAIL] - I[RQ_HEAD]
        rows[r, 3] = I[LQ_TAIL] - I[LQ_HEAD]
        rows[r, 4] = I[LP_SERVERS] - I[LP_FREE]
        rows[r, 5] = I[DQ_TAIL] - I[DQ_HEAD]
        rows[r, 6] = busy
        rows[r, 7] = F[THR]
        rows[r, 8] = I[LP_SERVERS] - I[LP_CONVERT]
        rows[r, 9] = I[N_OPEN]
        rows[r, 10] = I[ARRIVED] - I[COMPLETED]
        I[K_SAMPLE] = r + 1
        F[NEXT_SAMPLE] = (r + 1) * F[SAMPLE_S]


@njit(cache=True)
def rows_short(t, rows, F):
    """Whether ``rows`` lacks room for the samples due up to ``t``."""
    return int(t / F[SAMPLE_S]) + 2 > rows.shape[0]


@njit(cache=True)
def bins_short(t, ls, lb):
    """Whether the link's bins lack room for time ``t`` (as `CompiledLink._room` decides)."""
    return t >= (lb.shape[0] - 2) * ls[_BIN_S]


@njit(cache=True)
def _short_term(t, util, remote_queue, ls, lf, I, F):
    """`AdaptiveThreshold.update` for an arrival at ``t`` when it is due; returns the threshold."""
    F[LAST_EVAL] = t
    cap = ls[L_CAPACITY]
    unsent_s = link_unsent(ls, lf) / cap if cap > 0 else INF
    remote_backlog = F[RP_WORK] / I[N_REMOTE] + unsent_s
    local_backlog = F[LP_WORK] / I[LP_SERVERS] if I[LP_SERVERS] else INF
    congested = util > F[UTIL_HIGH] or remote_queue > F[QUEUE_HIGH]
    relaxed = util < F[UTIL_LOW] and remote_queue < F[QUEUE_LOW]
    cur, base = F[CURRENT], F[BASE]
    hi, lo = base * F[MAX_FACTOR], base * F[MIN_FACTOR]
    if congested and remote_backlog > local_backlog + F[MARGIN_S] and local_backlog < F[LOCAL_MAX_S] and cur < hi:
        a = cur * F[FACTOR]
        cur = hi if hi < a else a  # Python's min(a, hi)
    elif local_backlog > remote_backlog + F[MARGIN_S] and cur > lo:
        a = cur / F[FACTOR]
        cur = lo if lo > a else a  # Python's max(a, lo)
    elif cur > base and (relaxed or local_backlog > remote_backlog or local_backlog >= F[LOCAL_MAX_S]):
        a = cur / F[FACTOR]
        cur = base if base > a else a  # Python's max(a, base)
    elif cur < base and local_backlog <= remote_backlog and local_backlog < F[LOCAL_MAX_S]:
        a = cur * F[FACTOR]
        cur = base if base < a else a  # Python's min(a, base)
    else:
        return cur
    F[CURRENT] = cur
    I[CHANGES] += 1
    return cur


@njit(cache=True)
def _convert(t, outlen, tab, rec_i, rec_f, hf, hi, queues, dec, free_slots, ls, I, F):
    """The rebalance the driver decided (``I[CHANGE]``: +1 a decode instance becomes prefill, -1 the
    reverse), as `events.run_events`' ``rebalance`` applies it, then the next rebalance event."""
    t_change = I[CHANGE]
    _account(t, I, F)
    if t_change > 0:  # the least busy decode instance (the first of them) drains, then prefills
        best = 0
        for j in range(1, I[N_OPEN]):
            if dec[0, dec[1, j]] < dec[0, dec[1, best]]:
                best = j
        inst = dec[1, best]
        for j in range(best, I[N_OPEN] - 1):
            dec[1, j] = dec[1, j + 1]
        I[N_OPEN] -= 1
        kept = 0
        for j in range(I[N_FREE]):
            if free_slots[j] != inst:
                free_slots[kept] = free_slots[j]
                kept += 1
        I[N_FREE] = kept
        if dec[0, inst] == 0:
            _add_prefill_server(t, queues, tab, rec_i, rec_f, hf, hi, I, F)
        else:
            dec[2, inst] = 1
            I[N_DRAINING] += 1
    elif t_change < 0:  # an idle prefill instance decodes now, else the next one to finish
        if I[LP_FREE] > 0:
            I[LP_FREE] -= 1
            I[LP_SERVERS] -= 1
            _add_decode_instance(t, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F)
        else:
            I[LP_CONVERT] += 1
    i, n = I[ARRIVED], I[N]
    if i < n or (I[COMPLETED] < i and (I[HEAP_N] > 0 or ls[_NEXT_T] < INF)):  # else nothing can move again
        push(hf, hi, I, t + F[PERIOD_S], REBALANCE, 0, 0.0)


@njit(cache=True)
def run_segment(arr, inlen, outlen, tab, rec_i, rec_f, hf, hi, queues, dec, free_slots, rows, ls, lf, lb,
                pr, pm, ps, rr, rm, rs, ids, offs, I, F):
    """Run events until Python is needed; returns the reason (`END`, `REBALANCE_DUE` at ``F[T]``, a
    ``GROW_*`` for ``F[T]`` or ``I[NEED]`` entries, `NEXT_CHUNK`, `PROGRESS`).

    ``arr``/``inlen``/``outlen``: arrivals (s, non-decreasing) and lengths (tokens); ``tab`` (5, L): per
    uncached length, local and remote prefill busy seconds, KV bytes, local tail and remote exposed
    seconds (`System.service`); ``rec_i`` (3, n) = route, uncached tokens, tokens the PD cache leaves
    uncached; ``rec_f`` (6, n) = prefill start, end, ready, decode start, finish (s), flow bytes."""
    n = I[N]
    reacts, remote_ok, has_cache = I[REACTS] != 0, I[REMOTE_OK] != 0, I[HAS_CACHE] != 0
    horizon = F[HORIZON]
    t_remote, skv, tail_local, exposed_remote = tab[1], tab[2], tab[3], tab[4]
    route, uncached, uncached_pd = rec_i[0], rec_i[1], rec_i[2]
    p_end, ready, finish, flow_bytes = rec_f[1], rec_f[2], rec_f[4], rec_f[5]
    while True:
        if I[HEAP_N] + PUSHES_PER_EVENT + I[SLOTS] > hf.shape[1]:
            return GROW_HEAP
        if I[PENDING]:
            _convert(F[T], outlen, tab, rec_i, rec_f, hf, hi, queues, dec, free_slots, ls, I, F)
            I[PENDING] = 0
            continue
        i = I[ARRIVED]
        ta = arr[i] if i < n else INF
        th = hf[0, 0] if I[HEAP_N] > 0 else INF
        tl = ls[_NEXT_T]
        t = ta if ta < th else th
        if tl < t:
            t = tl
        if t == INF or t > horizon or (i >= n and I[COMPLETED] == n):
            end = horizon if t > horizon else F[NOW]
            F[T] = end
            if rows_short(end, rows, F):
                return GROW_ROWS
            if bins_short(end, ls, lb):
                return GROW_LINK
            if end > ls[_CLOCK]:
                link_advance(ls, lf, lb, end)
            _account(end, I, F)
            _sample(end, rows, dec, ls, I, F)
            return END
        F[T] = t
        if t >= F[NEXT_SAMPLE] and rows_short(t, rows, F):
            return GROW_ROWS
        if bins_short(t, ls, lb) or ls[_N] >= lf.shape[1]:
            return GROW_LINK
        lo = nb = 0
        if ta == t and has_cache:  # what this arrival's routing needs, before anything changes
            if i == I[C1]:
                return NEXT_CHUNK
            lo = offs[i - I[C0]]
            nb = offs[i - I[C0] + 1] - lo
            I[NEED] = nb + 1
            if not room(pr, pm, nb + 1):
                return GROW_PD
            if not room(rr, rm, nb + 1):
                return GROW_RF
        F[NOW] = t
        if t >= F[NEXT_SAMPLE]:
            _sample(t, rows, dec, ls, I, F)

        if ta == t:  # ------------------------------------------------------------------------- arrival
            rid = i
            I[ARRIVED] = i + 1
            thr = F[THR]
            abundant = False
            if reacts and remote_ok:
                if t > ls[_CLOCK]:
                    link_advance(ls, lf, lb, t)
                util = ls[_UTIL]
                if t - F[LAST_EVAL] >= F[INTERVAL_S]:
                    thr = _short_term(t, util, (I[RQ_TAIL] - I[RQ_HEAD]) / I[N_REMOTE], ls, lf, I, F)
                    F[THR] = thr
                abundant = util < F[ABUNDANT_UTIL]
            length = inlen[rid]
            local_ok = I[LP_SERVERS] > 0
            if has_cache:
                local, u, kv_pd, u_pd, moved = _route(pr, pm, ps, rr, rm, rs, ids, lo, nb, length, thr, abundant,
                                                      local_ok, remote_ok)
            else:
                local = (length <= thr and local_ok) or not remote_ok
                u, kv_pd, u_pd, moved = length, 0, length, 0
            uncached[rid] = u
            uncached_pd[rid] = u_pd
            if local:
                route[rid] = 0
                if moved:  # the prefix lives in the remote cluster: pull it over the link first
                    I[MOVES] += 1
                    F[MOVED_BYTES] += skv[moved]
                    _link_add(ls, lf, lb, I, t, ~rid, skv[moved], INF)
                else:
                    _enqueue_local(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F)
            else:
                route[rid] = 1
                flow_bytes[rid] = skv[length - kv_pd]  # only what the decode side lacks crosses
                if moved:  # the prefix lives in the PD cluster: push it the other way (same line rate, idle)
                    I[MOVES] += 1
                    cap = ls[L_CAPACITY]
                    back = skv[moved] / cap if cap > 0 else INF
                    push(hf, hi, I, t + back + F[RTT_HALF], PREFIX_REMOTE, rid, 0.0)
                else:
                    _enqueue_remote(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb)
            if not ((i + 1) & 4095):
                return PROGRESS
            continue

        if th == t:  # ------------------------------------------------------------------------ heap event
            _, kind, rid, aux = _pop(hf, hi, I)
            if kind == READY:
                ready[rid] = t
                if I[N_FREE] > 0:
                    I[N_FREE] -= 1
                    _admit(rid, t, free_slots[I[N_FREE]], outlen, rec_f, dec, hf, hi, I, F)
                else:
                    queues[2, I[DQ_TAIL]] = rid
                    I[DQ_TAIL] += 1
            elif kind == DECODE_DONE:
                inst = int(aux)
                finish[rid] = t
                I[COMPLETED] += 1
                dec[0, inst] -= 1
                if dec[2, inst]:
                    if dec[0, inst] == 0:
                        _account(t, I, F)
                        dec[2, inst] = 0
                        I[N_DRAINING] -= 1
                        _add_prefill_server(t, queues, tab, rec_i, rec_f, hf, hi, I, F)
                else:
                    _free_slot(t, inst, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F)
            elif kind == LOCAL_DONE:
                p_end[rid] = t
                push(hf, hi, I, t + tail_local[uncached[rid]], READY, rid, 0.0)
                if I[LP_CONVERT]:
                    _account(t, I, F)
                    I[LP_CONVERT] -= 1
                    I[LP_SERVERS] -= 1
                    _add_decode_instance(t, outlen, rec_f, dec, free_slots, queues, hf, hi, I, F)
                elif I[LQ_HEAD] < I[LQ_TAIL]:
                    _next_local(t, queues, tab, rec_i, rec_f, hf, hi, I, F)
                else:
                    I[LP_FREE] += 1
            elif kind == REMOTE_DONE:
                p_end[rid] = t
                link_uncap(ls, lf, lb, t, rid)
                if I[RQ_HEAD] < I[RQ_TAIL]:
                    nxt = queues[1, I[RQ_HEAD]]
                    I[RQ_HEAD] += 1
                    F[RP_WORK] -= t_remote[uncached[nxt]]
                    _start_remote(nxt, t, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb)
                else:
                    I[RP_FREE] += 1
            elif kind == PREFIX_REMOTE:
                _enqueue_remote(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F, ls, lf, lb)
            elif kind == PREFIX_LOCAL:
                _enqueue_local(rid, t, queues, tab, rec_i, rec_f, hf, hi, I, F)
            elif kind == CAPACITY:  # CompiledLink.set_capacity
                if t > ls[_CLOCK]:
                    link_advance(ls, lf, lb, t)
                ls[L_CAPACITY] = aux * F[EFF] / 8.0
                link_reallocate(ls, lf)
            else:  # REBALANCE: the driver decides, `_convert` applies it on re-entry
                return REBALANCE_DUE
            continue

        fid = int(link_complete(ls, lf, lb))  # ------------------------------------------- link completion
        if fid >= 0:
            push(hf, hi, I, t + F[RTT_HALF] + exposed_remote[uncached[fid]], READY, fid, 0.0)
        else:
            push(hf, hi, I, t + F[RTT_HALF], PREFIX_LOCAL, ~fid, 0.0)


def new_state() -> tuple[np.ndarray, np.ndarray]:
    """Zeroed ``I`` and ``F``."""
    return np.zeros(I_SIZE, dtype=np.int64), np.zeros(F_SIZE)
