"""The prefix-cache pool in plain Python: the twin of the compiled kernels (`prefix_kernels`) for small runs.

Importing numba and loading the compiled kernels costs about 1 s a process (issue 22 item 6), more than a
small trace's whole replay takes here; `prefix_cache.COMPILED_FROM` says where the kernels start to pay.
Same operations, same arguments (a pool's ``meta`` counters and ``sizes`` included), same results bit for
bit (tests/test_prefix_kernels.py runs both against one reference): the entries live in an ``OrderedDict``
whose order is the recency order, oldest first, instead of the kernels' hash table with an intrusive list. Ids are Python
ints (lists, not arrays: indexing a numpy array from Python is several times slower).
"""

from __future__ import annotations

from collections import OrderedDict

from .prefix_layout import BB, BLOCK_TOKENS, CAP, CB, CK, EVICTED, HIT, LOW, N, PROMPT, RECENCY


class PyPool:
    """One pool's entries (block ids; ``~id`` for the checkpoint after block ``id``), oldest first; its
    counters stay in the ``meta`` array and its sizes in ``sizes`` of the owning `PrefixCache`."""

    __slots__ = ("od", "meta", "sizes")

    def __init__(self, meta, sizes):
        self.od: OrderedDict[int, None] = OrderedDict()
        self.meta, self.sizes = meta, sizes

    def used(self) -> float:
        """Bytes held (as `prefix_kernels.used`: the same float operations)."""
        m = self.meta
        return (int(m[N]) - int(m[CK])) * float(self.sizes[BB]) + int(m[CK]) * float(self.sizes[CB])

    def _add(self, key: int) -> None:
        self.od[key] = None
        self.meta[N] += 1
        if key < 0:
            self.meta[CK] += 1

    def entries(self) -> list[int]:
        return list(self.od)

    def cached_blocks(self, ids: list, limit: int) -> int:
        """`prefix_kernels.cached_blocks` over ``ids`` (a list)."""
        od = self.od
        a, b = 0, min(limit, len(ids))
        while a < b:
            mid = (a + b + 1) >> 1
            if ids[mid - 1] in od:
                a = mid
            else:
                b = mid - 1
        return a

    def leading_blocks(self, ids: list) -> int:
        od = self.od
        k, n = 0, len(ids)
        while k < n and ids[k] in od:
            k += 1
        return k

    def usable_blocks(self, ids: list, cached: int) -> int:
        if self.sizes[CB] != 0:
            od = self.od
            while cached > 0 and ~ids[cached - 1] not in od:
                cached -= 1
        return cached

    def evict(self) -> None:
        """`prefix_kernels.evict`: oldest first until the bytes freed reach the excess over the low watermark."""
        sizes = self.sizes
        bb, cb = float(sizes[BB]), float(sizes[CB])
        excess = self.used() - float(sizes[LOW]) * float(sizes[CAP])
        freed = 0.0
        od, popitem = self.od, self.od.popitem
        dropped = ck = 0
        while od:
            key, _ = popitem(last=False)
            dropped += 1
            if key < 0:
                ck += 1
                freed += cb
            else:
                freed += bb
            if freed >= excess:
                break
        m = self.meta
        m[N] -= dropped
        m[CK] -= ck
        m[EVICTED] += dropped

    def touch(self, ids: list, full: int, checkpoint: bool, present: int) -> None:
        """`prefix_kernels.touch` over ``ids[:full]``: cached and most recent, ``ids[0]`` the most recent, the
        checkpoint (when ``checkpoint`` and the model needs them) just below the last block."""
        sizes = self.sizes
        if full <= 0 or sizes[CAP] <= 0:
            return
        od = self.od
        ckpt = checkpoint and sizes[CB] != 0
        if self.meta[RECENCY] == 0:  # nothing can ever be evicted: only add what is missing
            for k in range(present, full):
                if ids[k] not in od:
                    self._add(ids[k])
            if ckpt and ~ids[full - 1] not in od:
                self._add(~ids[full - 1])
            return
        move = od.move_to_end
        if ckpt:
            key = ~ids[full - 1]
            if key in od:
                move(key)
            else:
                self._add(key)
        # the kernel takes the prompt's cached blocks out and puts them back from the last to the root, each
        # distinct id once at its last position in the prompt: the same order as walking it backwards
        added = 0
        for key in dict.fromkeys(ids[full - 1::-1]):
            if key in od:
                move(key)
            else:
                od[key] = None
                added += 1
        self.meta[N] += added
        if self.used() > float(sizes[CAP]):
            self.evict()

    def match(self, ids: list, length: int) -> tuple[int, int]:
        bt = int(self.meta[BLOCK_TOKENS])
        kv = self.cached_blocks(ids, (length - 1) // bt)
        return kv * bt, self.usable_blocks(ids, kv) * bt

    def insert(self, ids: list, length: int, checkpoint: bool, present: int) -> None:
        self.touch(ids, min(length // int(self.meta[BLOCK_TOKENS]), len(ids)), checkpoint, present)


def route(pd: PyPool, rf: PyPool, ids: list, length: int, threshold: float, abundant: bool, local_ok: bool,
          remote_ok: bool) -> tuple[bool, int, int, int, int]:
    """`prefix_kernels._route` over two `PyPool`s: ``(local, uncached, kv_at_decode, uncached_vs_pd, moved)``."""
    kv_pd, use_pd = pd.match(ids, length)
    use_rf = -1
    if abundant and remote_ok:
        use_rf = rf.match(ids, length)[1]
    best = max(use_pd, use_rf)
    local = (length - best <= threshold and local_ok) or not remote_ok
    if local:
        pd.meta[PROMPT] += length
        pd.meta[HIT] += best
        moved = best if best > use_pd else 0
    else:
        kv_rf, use_rf = rf.match(ids, length)
        best = use_pd if (abundant and use_pd > use_rf) else use_rf
        rf.meta[PROMPT] += length
        rf.meta[HIT] += best
        moved = best if best > use_rf else 0
        rf.insert(ids, length, True, kv_rf // int(rf.meta[BLOCK_TOKENS]))
    pd.insert(ids, length, local, kv_pd // int(pd.meta[BLOCK_TOKENS]))
    return local, length - best, kv_pd, length - use_pd, moved


def replay(pool: PyPool, ids: list, offsets: list, order, out_matched) -> None:
    """`prefix_kernels.replay_chunk` (no checkpoints) over every request of ``order``: each one's leading
    cached blocks into ``out_matched``, then all its ids touched."""
    for r in order:
        chain = ids[offsets[r]:offsets[r + 1]]
        k = pool.leading_blocks(chain)
        out_matched[r] = k
        pool.touch(chain, len(chain), False, k)
