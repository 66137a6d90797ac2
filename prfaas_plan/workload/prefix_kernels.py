"""Compiled kernels of the prefix-cache pool (`prefix_cache.PrefixCache`; docs/methods.md, "Prefix caches").

Imported only when a pool is built (numba takes ~0.3 s to import, so a CLI start that needs no cache never
pays it); every kernel is ``@njit(cache=True)``, so the compile (~5 s, benchmarks/bench_scale.py times it)
is paid once per machine and version of this file; later runs load it in a fraction of a second.

A pool's state is three arrays:

- ``rec``, int64 ``(M, 2)``, ``M`` a power of two (at most 2**31): an open-addressing hash table (linear
  probing) whose records are the entries themselves, 16 bytes each: ``key`` and a link word holding
  ``prev`` and ``next``, the positions of the neighbours in recency order (``-1``: none), which makes the
  recency list intrusive (no second structure). The word is 0 at a free position (a new table is
  ``np.zeros``, whose pages the kernel maps only when used); ``prev == DETACHED`` marks an entry being
  re-stamped by `touch`.
  A key is a block id (>= 0) or ``~id`` for the checkpoint after block ``id``. The home position keeps runs
  of 8 consecutive ids in one group of 8 positions, so a prompt's blocks (Mooncake ids are handed out in
  order) share cache lines, and a checkpoint's home is its block's; groups are spread by a multiplicative
  hash. The table is at most half full (the caller doubles it with `rehash` when `room` says so), so its
  memory is bounded by what the pool holds, hence by its capacity, never by the trace.
- ``meta``, int64: the counters below (entries, checkpoints, list ends, table size, counters).
- ``sizes``, float64: ``block_bytes``, ``checkpoint_bytes``, ``capacity`` (bytes, may be inf),
  ``low_watermark``.

A deletion shifts later records of its probe run back (no tombstones) and re-points their neighbours, so
lookups stay short however many entries come and go. Results equal those of a dict kept in recency
order (tests/test_prefix_kernels.py compares them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .prefix_layout import (  # noqa: F401  (the slots, re-exported: callers read them here)
    BB, BITS, BLOCK_TOKENS, CAP, CB, CK, EVICTED, HEAD, HIT, LOW, META_SIZE, N, PROMPT, RECENCY, TAIL,
)

DETACHED = -2
_BIAS = 4  # a link word stores prev + 4 and next + 4 (so that 0 means a free position)
_LOW = (1 << 32) - 1

_GROUP = 3  # log2 of the ids kept together
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def new_table(bits: int) -> np.ndarray:
    """An empty ``rec`` of ``2**bits`` positions."""
    return np.zeros((1 << bits, 2), dtype=np.int64)


@njit(cache=True)
def _home(key, bits):
    x = key if key >= 0 else ~key  # a checkpoint lives next to its block
    h = (np.uint64(x >> _GROUP) * _GOLDEN) >> np.uint64(64 - bits + _GROUP)
    return (np.int64(h) << _GROUP) | (x & ((1 << _GROUP) - 1))


@njit(cache=True)
def _prev(rec, p):
    return (rec[p, 1] >> 32) - _BIAS


@njit(cache=True)
def _next(rec, p):
    return (rec[p, 1] & _LOW) - _BIAS


@njit(cache=True)
def _link(rec, p, prev, nxt):
    rec[p, 1] = ((prev + _BIAS) << 32) | (nxt + _BIAS)


@njit(cache=True)
def find(rec, meta, key):
    """Position of ``key``, or -1."""
    mask = rec.shape[0] - 1
    i = _home(key, meta[BITS])
    while rec[i, 1] != 0:
        if rec[i, 0] == key:
            return i
        i = (i + 1) & mask
    return -1


@njit(cache=True)
def _append(rec, meta, p):
    t = meta[TAIL]
    _link(rec, p, t, -1)
    if t >= 0:
        _link(rec, t, _prev(rec, t), p)
    else:
        meta[HEAD] = p
    meta[TAIL] = p


@njit(cache=True)
def _unlink(rec, meta, p):
    a = _prev(rec, p)
    b = _next(rec, p)
    if a >= 0:
        _link(rec, a, _prev(rec, a), b)
    else:
        meta[HEAD] = b
    if b >= 0:
        _link(rec, b, a, _next(rec, b))
    else:
        meta[TAIL] = a


@njit(cache=True)
def _add(rec, meta, key):
    """Insert ``key`` (absent) as the most recent entry."""
    mask = rec.shape[0] - 1
    i = _home(key, meta[BITS])
    while rec[i, 1] != 0:
        i = (i + 1) & mask
    rec[i, 0] = key
    _append(rec, meta, i)
    meta[N] += 1
    if key < 0:
        meta[CK] += 1


@njit(cache=True)
def _delete(rec, meta, p):
    """Remove the entry at ``p``: unlink it, then shift back the records after it in its probe run."""
    _unlink(rec, meta, p)
    if rec[p, 0] < 0:
        meta[CK] -= 1
    meta[N] -= 1
    mask = rec.shape[0] - 1
    bits = meta[BITS]
    i = p
    j = p
    while True:
        j = (j + 1) & mask
        if rec[j, 1] == 0:
            break
        k = _home(rec[j, 0], bits)
        if i <= j:
            if i < k <= j:
                continue
        elif i < k or k <= j:
            continue
        # move j to i and re-point its neighbours (written out like _unlink: sharing a helper that writes
        # ``meta`` made the whole routing pass 2x slower)
        rec[i, 0] = rec[j, 0]
        rec[i, 1] = rec[j, 1]
        a = _prev(rec, j)
        b = _next(rec, j)
        if a >= 0:
            _link(rec, a, _prev(rec, a), i)
        else:
            meta[HEAD] = i
        if b >= 0:
            _link(rec, b, i, _next(rec, b))
        else:
            meta[TAIL] = i
        i = j
    rec[i, 1] = 0


@njit(cache=True)
def used(meta, sizes):
    """Bytes held."""
    return (meta[N] - meta[CK]) * sizes[BB] + meta[CK] * sizes[CB]


@njit(cache=True)
def room(rec, meta, extra):
    """Whether ``extra`` more entries keep the table at most half full."""
    return 2 * (meta[N] + extra) <= rec.shape[0]


def rehash(rec, meta, bits):
    """The entries of ``rec`` in a new table of ``2**bits`` positions, recency order kept; updates ``meta``.
    (The table is a numpy allocation, so that Linux backs it with huge pages: fewer TLB misses.)"""
    out = new_table(bits)
    _move(rec, meta, out)
    return out


@njit(cache=True)
def _move(rec, meta, out):
    bits = 0
    while (1 << bits) < out.shape[0]:
        bits += 1
    mask = out.shape[0] - 1
    p = meta[HEAD]
    last = -1
    head = -1
    while p >= 0:
        key = rec[p, 0]
        i = _home(key, bits)
        while out[i, 1] != 0:
            i = (i + 1) & mask
        out[i, 0] = key
        _link(out, i, last, -1)
        if last >= 0:
            _link(out, last, _prev(out, last), i)
        else:
            head = i
        last = i
        p = _next(rec, p)
    meta[HEAD] = head
    meta[TAIL] = last
    meta[BITS] = bits


@njit(cache=True)
def entries(rec, meta):
    """Every key, least recently used first."""
    out = np.empty(meta[N], dtype=np.int64)
    p = meta[HEAD]
    k = 0
    while p >= 0:
        out[k] = rec[p, 0]
        k += 1
        p = _next(rec, p)
    return out


@njit(cache=True)
def cached_blocks(rec, meta, ids, lo, n, limit):
    """How many leading blocks of ``ids[lo:lo + min(n, limit)]`` are cached, by binary search (prefix-closed pool)."""
    a = 0
    b = min(limit, n)
    while a < b:
        mid = (a + b + 1) >> 1
        if find(rec, meta, ids[lo + mid - 1]) >= 0:
            a = mid
        else:
            b = mid - 1
    return a


@njit(cache=True)
def leading_blocks(rec, meta, ids, lo, n):
    """How many leading blocks of ``ids[lo:lo + n]`` are cached, scanning to the first miss."""
    k = 0
    while k < n and find(rec, meta, ids[lo + k]) >= 0:
        k += 1
    return k


@njit(cache=True)
def usable_blocks(rec, meta, sizes, ids, lo, cached):
    """The longest prefix of at most ``cached`` blocks with a checkpoint (all of them if none are needed)."""
    if sizes[CB] != 0:
        while cached > 0 and find(rec, meta, ~ids[lo + cached - 1]) < 0:
            cached -= 1
    return cached


@njit(cache=True)
def evict(rec, meta, sizes):
    """Drop least recently used entries until the bytes freed reach the excess over the low watermark."""
    excess = used(meta, sizes) - sizes[LOW] * sizes[CAP]
    freed = 0.0
    while meta[N] > 0:
        p = meta[HEAD]
        freed += sizes[CB] if rec[p, 0] < 0 else sizes[BB]
        _delete(rec, meta, p)
        meta[EVICTED] += 1
        if freed >= excess:
            break


@njit(cache=True)
def touch(rec, meta, sizes, ids, lo, full, checkpoint, present):
    """Make ``ids[lo:lo + full]`` (and, when ``checkpoint`` and the model needs them, the checkpoint after the
    last) cached and most recent, ``ids[lo]`` the most recent, the checkpoint just below the last block;
    evict when over capacity. ``present``: leading blocks known cached (used only when recency is off).
    The caller makes sure `room` has space for ``full + 1`` entries."""
    if full <= 0 or sizes[CAP] <= 0:
        return
    ckpt = checkpoint and sizes[CB] != 0
    if meta[RECENCY] == 0:  # nothing can ever be evicted: only add what is missing
        for k in range(present, full):
            if find(rec, meta, ids[lo + k]) < 0:
                _add(rec, meta, ids[lo + k])
        if ckpt and find(rec, meta, ~ids[lo + full - 1]) < 0:
            _add(rec, meta, ~ids[lo + full - 1])
        return
    if ckpt:
        key = ~ids[lo + full - 1]
        p = find(rec, meta, key)
        if p >= 0:
            _unlink(rec, meta, p)
            _append(rec, meta, p)
        else:
            _add(rec, meta, key)
    where = np.empty(full, dtype=np.int64)  # positions stay put until the eviction below
    for k in range(full):  # take the prompt's cached blocks out of the order ...
        p = find(rec, meta, ids[lo + k])
        where[k] = p
        if p >= 0 and _prev(rec, p) != DETACHED:
            _unlink(rec, meta, p)
            _link(rec, p, DETACHED, -1)
    for k in range(full - 1, -1, -1):  # ... and put them all back at the recent end, root last
        p = where[k]
        if p < 0:
            if find(rec, meta, ids[lo + k]) < 0:  # (an id repeated in the prompt is added once)
                _add(rec, meta, ids[lo + k])
        elif _prev(rec, p) == DETACHED:
            _append(rec, meta, p)
    if used(meta, sizes) > sizes[CAP]:
        evict(rec, meta, sizes)


@njit(cache=True)
def _match(rec, meta, sizes, ids, lo, n, length):
    """``(kv_tokens, usable_tokens)`` of a prompt of ``length`` tokens."""
    bt = meta[BLOCK_TOKENS]
    kv = cached_blocks(rec, meta, ids, lo, n, (length - 1) // bt)
    return kv * bt, usable_blocks(rec, meta, sizes, ids, lo, kv) * bt


@njit(cache=True)
def _insert(rec, meta, sizes, ids, lo, n, length, checkpoint, present):
    touch(rec, meta, sizes, ids, lo, min(length // meta[BLOCK_TOKENS], n), checkpoint, present)


@njit(cache=True)
def _route(pr, pm, ps, rr, rm, rs, ids, lo, n, length, threshold, abundant, local_ok, remote_ok):
    """`routing.Router.route` on the kernels' state: ``(local, uncached, kv_at_decode, uncached_vs_pd,
    moved)``. (Arguments are never constants here: numba would compile a specialization per constant.)"""
    kv_pd, use_pd = _match(pr, pm, ps, ids, lo, n, length)
    use_rf = -1
    if abundant and remote_ok:
        use_rf = _match(rr, rm, rs, ids, lo, n, length)[1]
    best = max(use_pd, use_rf)
    local = (length - best <= threshold and local_ok) or not remote_ok
    if local:
        pm[PROMPT] += length
        pm[HIT] += best
        moved = best if best > use_pd else 0
    else:
        kv_rf, use_rf = _match(rr, rm, rs, ids, lo, n, length)
        best = use_pd if (abundant and use_pd > use_rf) else use_rf
        rm[PROMPT] += length
        rm[HIT] += best
        moved = best if best > use_rf else 0
        _insert(rr, rm, rs, ids, lo, n, length, not local, kv_rf // rm[BLOCK_TOKENS])
    _insert(pr, pm, ps, ids, lo, n, length, local, kv_pd // pm[BLOCK_TOKENS])  # the prefilling pool checkpoints
    return local, length - best, kv_pd, length - use_pd, moved


@njit(cache=True)
def route_one(pr, pm, ps, rr, rm, rs, ids, lo, n, length, threshold, abundant, local_ok, remote_ok):
    """The request owning ``ids[lo:lo + n]``: ``(grow, local, uncached, kv_at_decode, uncached_vs_pd,
    moved)``; ``grow`` 1 or 2 (the PD or remote table must be doubled first: nothing was done) or 0."""
    if not room(pr, pm, n + 1):
        return 1, False, 0, 0, 0, 0
    if not room(rr, rm, n + 1):
        return 2, False, 0, 0, 0, 0
    local, u, kv, u_pd, moved = _route(pr, pm, ps, rr, rm, rs, ids, lo, n, length, threshold, abundant,
                                       local_ok, remote_ok)
    return 0, local, u, kv, u_pd, moved


@njit(cache=True)
def route_chunk(pr, pm, ps, rr, rm, rs, ids, offsets, lengths, start, threshold, abundant, local_ok, remote_ok,
                out_local, out_uncached, out_kv):
    """`route_one` over requests ``start..`` of a chunk (request ``i`` owns ``ids[offsets[i]:offsets[i + 1]]``);
    returns where it stopped: the end, or a request for which a table must be doubled first."""
    for i in range(start, lengths.shape[0]):
        lo = offsets[i]
        n = offsets[i + 1] - lo
        if not (room(pr, pm, n + 1) and room(rr, rm, n + 1)):
            return i
        local, u, kv, _, _ = _route(pr, pm, ps, rr, rm, rs, ids, lo, n, lengths[i], threshold, abundant,
                                    local_ok, remote_ok)
        out_local[i] = local
        out_uncached[i] = u
        out_kv[i] = kv
    return lengths.shape[0]


@njit(cache=True)
def replay_chunk(rec, meta, sizes, ids, offsets, order, start, checkpoint, out_matched):
    """Planner replay over requests ``order[start..]``: each one's leading cached blocks, then all its ids
    touched (and its checkpoint if ``checkpoint``); returns where it stopped (the end, or a request for
    which the table must be doubled)."""
    for j in range(start, order.shape[0]):
        r = order[j]
        lo = offsets[r]
        n = offsets[r + 1] - lo
        if not room(rec, meta, n + 1):
            return j
        out_matched[r] = leading_blocks(rec, meta, ids, lo, n)
        touch(rec, meta, sizes, ids, lo, n, checkpoint, out_matched[r])
    return order.shape[0]
