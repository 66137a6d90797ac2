"""Compiled loops of the static fast path (`pipeline`): FCFS service on identical servers and the shared
link drained over a whole run's flows. Both are inherently sequential, so they are compiled with numba
(imported here, and this module only imported when a simulation runs, so the CLI starts without it).

Each repeats its pure-Python counterpart operation for operation (`link.SharedLink` for the link), so the
results are the same floats; tests check both against the Python implementations on random inputs.
Times in seconds, sizes in bytes, rates in bytes/s.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

INF = math.inf


@njit(cache=True)
def fcfs_starts(entry, service, servers):
    """Start times of FCFS service on ``servers`` (>= 1) identical servers, each request on the earliest free
    one; ``entry`` must be non-decreasing. Lindley's recursion with a binary min-heap of free times."""
    n = len(entry)
    out = np.empty(n)
    free = np.full(servers, -INF)
    for i in range(n):
        a = entry[i]
        f = free[0]
        st = a if a > f else f
        out[i] = st
        x = st + service[i]
        j = 0  # replace the root and sift it down
        while True:
            c = 2 * j + 1
            if c >= servers:
                break
            if c + 1 < servers and free[c + 1] < free[c]:
                c += 1
            if free[c] >= x:
                break
            free[j] = free[c]
            j = c
        free[j] = x
    return out


@njit(cache=True)
def add_to_bins(bins, nb, t0, t1, rate, bin_s):
    """Add ``rate`` x (``t1`` - ``t0``) bytes to the bins of ``bin_s`` seconds that the interval overlaps
    (``bins[:nb]`` in use; grown as needed). Returns ``(bins, nb)``."""
    b0, b1 = int(t0 / bin_s), int(t1 / bin_s)
    if nb <= b1:
        if len(bins) <= b1:
            grown = np.zeros(max(2 * len(bins), b1 + 1))
            grown[:nb] = bins[:nb]
            bins = grown
        for k in range(nb, b1 + 1):
            bins[k] = 0.0
        nb = b1 + 1
    if b0 == b1:
        bins[b0] += rate * (t1 - t0)
        return bins, nb
    bins[b0] += rate * ((b0 + 1) * bin_s - t0)
    for k in range(b0 + 1, b1):
        bins[k] += rate * bin_s
    bins[b1] += rate * (t1 - b1 * bin_s)
    return bins, nb


@njit(cache=True)
def _reallocate(n, capacity, t, cap, rem, rate):
    """Max-min fair rates of the ``n`` active flows (in start order); returns ``(total rate, next completion
    time, its slot)`` as `SharedLink._reallocate` computes them."""
    demand = 0.0
    for k in range(n):
        demand += cap[k]
    if demand <= capacity:  # every flow is producer-limited: no contention
        for k in range(n):
            rate[k] = cap[k]
        return demand, INF, -1
    order = np.empty(n, dtype=np.int64)  # slots by cap, equal caps in start order (as Python's stable sorted)
    for k in range(n):  # insertion sort: a handful of flows, nearly sorted from one event to the next
        j = k
        while j > 0 and cap[order[j - 1]] > cap[k]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = k
    left = capacity
    m = n
    best, best_k = INF, -1
    for k in order:
        share = left / m
        c = cap[k]
        x = c if c < share else share
        rate[k] = x
        left -= x
        m -= 1
        if c == INF:  # uncapped: may be the next to complete
            r = rem[k]
            d = r / x if x > 0.0 else (0.0 if r <= 0.0 else INF)
            if d < best:
                best, best_k = d, k
    return capacity - left, (t + max(best, 0.0) if best < INF else INF), best_k


@njit(cache=True)
def drain_link(starts, ends, by_end, sizes, caps, cap_t, cap_v, capacity, bin_s, horizon):
    """Simulate the processor-sharing link over flows ``i`` starting at ``starts[i]`` (non-decreasing) with
    ``sizes[i]`` bytes, sending at most ``caps[i]`` bytes/s until ``ends[i]`` (``by_end``: the flows in
    order of their ends, stably); the goodput is ``capacity``
    and from ``cap_t[j]`` on ``cap_v[j]``. Stops at ``horizon`` or when nothing can move.

    Returns ``(done, bins, n_bins, peak_flows, t, total_rate)``: each flow's completion time (NaN if none),
    the bytes delivered per bin of ``bin_s`` seconds (``bins[:n_bins]``), the most flows at once, and the
    link's clock and total rate where it stopped (to account the bytes of the flows still sending)."""
    m = len(starts)
    done = np.full(m, np.nan)
    fid = np.empty(m, dtype=np.int64)  # active flows in start order: ids, caps, remaining bytes, rates
    cap = np.empty(m)
    rem = np.empty(m)
    rate = np.empty(m)
    n = 0
    peak = 0
    bins = np.zeros(1024)
    nb = 0
    now = 0.0
    total = 0.0
    next_t, next_k = INF, -1
    ia = ie = ic = 0
    nc = len(cap_t)
    while ia < m or n > 0:
        ta = starts[ia] if ia < m else INF
        te = ends[by_end[ie]] if ie < m else INF
        tc = cap_t[ic] if ic < nc else INF
        t = min(min(ta, te), min(tc, next_t))
        if t == INF or t > horizon:
            break
        dt = t - now  # advance: drain every flow at its rate up to t
        if dt > 0.0:
            if total > 0.0:
                for k in range(n):
                    rem[k] -= rate[k] * dt
                bins, nb = add_to_bins(bins, nb, now, t, total, bin_s)
            now = t
        if tc == t:
            capacity = cap_v[ic]
            ic += 1
        elif ta == t:
            fid[n], cap[n], rem[n] = ia, caps[ia], sizes[ia]
            n += 1
            peak = max(peak, n)
            ia += 1
        elif te == t:
            j = by_end[ie]
            for k in range(n):
                if fid[k] == j:
                    cap[k] = INF
                    break
            ie += 1
        else:
            done[fid[next_k]] = t
            for k in range(next_k, n - 1):
                fid[k], cap[k], rem[k] = fid[k + 1], cap[k + 1], rem[k + 1]
            n -= 1
        total, next_t, next_k = _reallocate(n, capacity, now, cap, rem, rate)
    return done, bins, nb, peak, now, total


# The event loop's shared link (`compiled_link.CompiledLink`): `link.SharedLink`'s steps on its state in arrays.
# ``state`` = [clock s, capacity B/s, total rate B/s, next completion s, utilization, bin_s, tau_s, flows n,
# slot of the next completion, bins in use]; ``flows`` rows = flow id, cap B/s, remaining B, rate B/s (a column a
# flow, in start order); ``bins`` has room for the clock's bin (the caller grows it).
_CLOCK, _CAPACITY, _TOTAL, _NEXT_T, _UTIL, _BIN_S, _TAU_S, _N, _NEXT_K, _NB = range(10)


@njit(cache=True)
def link_advance(state, flows, bins, t):
    """`SharedLink.advance`: drain every flow at its rate up to ``t`` (s), count the bytes, smooth the
    utilization."""
    t0 = state[_CLOCK]
    dt = t - t0
    if dt <= 0.0:
        return
    n = int(state[_N])
    r = state[_TOTAL]
    if r > 0.0:
        rem, rate = flows[2], flows[3]
        for k in range(n):
            rem[k] -= rate[k] * dt
        _, nb = add_to_bins(bins, int(state[_NB]), t0, t, r, state[_BIN_S])
        state[_NB] = nb
    tau = state[_TAU_S]
    if tau > 0.0:
        c = state[_CAPACITY]
        now = r / c if c > 0 else (1.0 if n > 0 else 0.0)
        state[_UTIL] = now + (state[_UTIL] - now) * math.exp(-dt / tau)
    state[_CLOCK] = t


@njit(cache=True)
def link_reallocate(state, flows):
    """`SharedLink._reallocate`; returns the next completion time (s)."""
    total, next_t, next_k = _reallocate(int(state[_N]), state[_CAPACITY], state[_CLOCK], flows[1], flows[2],
                                        flows[3])
    state[_TOTAL], state[_NEXT_T], state[_NEXT_K] = total, next_t, next_k
    return next_t


@njit(cache=True)
def link_add(state, flows, bins, t, fid, size, cap):
    """`SharedLink.add` (``flows`` has room for one more); returns the next completion time (s)."""
    if t > state[_CLOCK]:
        link_advance(state, flows, bins, t)
    n = int(state[_N])
    flows[0, n], flows[1, n], flows[2, n] = fid, cap, size
    state[_N] = n + 1
    return link_reallocate(state, flows)


@njit(cache=True)
def link_uncap(state, flows, bins, t, fid):
    """`SharedLink.uncap`; returns the next completion time (s)."""
    if t > state[_CLOCK]:
        link_advance(state, flows, bins, t)
    for k in range(int(state[_N])):
        if flows[0, k] == fid:
            flows[1, k] = INF
            break
    return link_reallocate(state, flows)


@njit(cache=True)
def link_complete(state, flows, bins):
    """`SharedLink.complete` without the time: removes the next flow to complete; returns its id."""
    t = state[_NEXT_T]
    if t > state[_CLOCK]:
        link_advance(state, flows, bins, t)
    k = int(state[_NEXT_K])
    fid = flows[0, k]
    n = int(state[_N])
    for j in range(k, n - 1):
        for row in range(4):
            flows[row, j] = flows[row, j + 1]
    state[_N] = n - 1
    link_reallocate(state, flows)
    return fid


@njit(cache=True)
def link_unsent(state, flows):
    """Bytes not yet sent, summed in start order (as `SharedLink.unsent_bytes`)."""
    s = 0.0
    rem = flows[2]
    for k in range(int(state[_N])):
        s += rem[k]
    return s
