"""Per-request routing with prefix caches (``docs/methods.md`` section 7): which cluster prefills a request, how many
of its tokens must be computed, and which cached prefix (if any) has to move across first.

- bandwidth scarce: each cluster's cache on its own; local if ``l_total - l_pd <= t``, else remote;
- bandwidth abundant: the best cache anywhere, ``l_prefix = max(l_prfaas, l_pd)``; local if
  ``l_total - l_prefix <= t``, else remote; the prefix moves across when it lives in the other cluster.

The cluster that prefills caches the prompt's blocks and its end-of-prompt state checkpoint; a remote
prefill also leaves the blocks (not the checkpoint) in the PD cluster, whose decode side received them.
"""

from __future__ import annotations

import numpy as np

from ..workload.prefix_cache import BlockChains, PrefixCache, id_array, kernels


class Router:
    """Routing state: the two clusters' caches (None: no caching, every prompt is wholly uncached)."""

    def __init__(self, pd: PrefixCache | None, prfaas: PrefixCache | None, remote_ok: bool):
        self.pd = pd
        self.prfaas = prfaas
        self.remote_ok = bool(remote_ok)

    def route(self, hashes, length: int, threshold: float, abundant: bool,
              local_ok: bool) -> tuple[bool, int, int, int, int]:
        """``(local, uncached, kv_at_decode, uncached_vs_pd, moved)`` for a prompt of ``length`` tokens:
        the route, the tokens to prefill, the prefix tokens whose KV the decode side already holds, the
        length the PD cluster's cache leaves uncached (what the long-term rule observes), and the prefix
        tokens to move to the prefilling cluster first (0: none). ``hashes``: the prompt's block ids (an
        int64 array is fastest), None for none."""
        pd = self.pd
        if pd is None or hashes is None:
            local = (length <= threshold and local_ok) or not self.remote_ok
            return local, length, 0, length, 0
        ids = id_array(hashes)
        return self.route_at(ids, 0, len(ids), length, threshold, abundant, local_ok)

    def route_at(self, ids: np.ndarray, lo: int, n: int, length: int, threshold: float, abundant: bool,
                 local_ok: bool) -> tuple[bool, int, int, int, int]:
        """`route` for the prompt whose block ids are ``ids[lo:lo + n]`` of a flat int64 array (a chunk of
        `BlockChains.chunks`), without building a view per request; the caches must be set."""
        pd, rf = self.pd, self.prfaas
        if pd.py is not None:  # the plain-Python pools (small runs: no numba)
            from ..workload.prefix_python import route

            return route(pd.py, rf.py, ids[lo:lo + n].tolist(), int(length), float(threshold), bool(abundant),
                         bool(local_ok), self.remote_ok)
        while True:
            grow, local, u, kv, u_pd, moved = kernels().route_one(
                pd.rec, pd.meta, pd.sizes, rf.rec, rf.meta, rf.sizes, ids, lo, n, length, float(threshold),
                bool(abundant), bool(local_ok), self.remote_ok)  # (one type each: one compiled kernel)
            if not grow:
                return local, u, kv, u_pd, moved
            (pd if grow == 1 else rf).make_room(n + 1)

    def route_all(self, blocks, lengths, threshold: float, local_ok: bool):
        """`route` with the scarce rule over a whole arrival sequence (``blocks``: each request's hash ids, a
        `BlockChains` read as flat arrays or any iterable of sequences; ``lengths`` their prompt tokens): the
        static scheduler's routing pass, compiled (a test checks that it equals calling `route` request by
        request; the plain-Python pools route request by request). Returns arrays ``(local, uncached,
        kv_at_decode)``."""
        pd, rf = self.pd, self.prfaas
        lengths = np.asarray(lengths, dtype=np.int64)
        if not isinstance(blocks, BlockChains):
            chains = [id_array(h) for h, _ in zip(blocks, lengths)]
            offsets = np.concatenate([[0], np.cumsum([len(h) for h in chains], dtype=np.int64)])
            ids = np.concatenate(chains) if chains else np.zeros(0, dtype=np.int64)
            blocks = BlockChains(ids, offsets)
        n = min(len(lengths), blocks.stop - blocks.start)
        blocks = BlockChains(blocks.block_ids, blocks.offsets, blocks.start, blocks.start + n)
        local = np.zeros(n, dtype=bool)
        uncached = np.zeros(n, dtype=np.int64)
        kv = np.zeros(n, dtype=np.int64)
        if pd.py is not None:
            from ..workload.prefix_python import route

            lens = lengths.tolist()
            thr, ok, remote_ok = float(threshold), bool(local_ok), self.remote_ok
            flags, unc, kvs = [], [], []
            for ids, offsets, c0, c1 in blocks.chunks(_ROUTE_CHUNK):
                id_list, offs = ids.tolist(), offsets.tolist()
                for i in range(c1 - c0):
                    f, u, k, _, _ = route(pd.py, rf.py, id_list[offs[i]:offs[i + 1]], lens[c0 + i], thr, False,
                                          ok, remote_ok)
                    flags.append(f)
                    unc.append(u)
                    kvs.append(k)
            local[:], uncached[:], kv[:] = flags, unc, kvs
            return local, uncached, kv
        route_chunk = kernels().route_chunk
        for ids, offsets, c0, c1 in blocks.chunks(_ROUTE_CHUNK):
            out = local[c0:c1], uncached[c0:c1], kv[c0:c1]
            i = 0
            while True:
                i = route_chunk(pd.rec, pd.meta, pd.sizes, rf.rec, rf.meta, rf.sizes, ids, offsets, lengths[c0:c1],
                                i, float(threshold), False, bool(local_ok), self.remote_ok, *out)
                if i == c1 - c0:
                    break
                extra = int(offsets[i + 1] - offsets[i]) + 1
                pd.make_room(extra)
                rf.make_room(extra)
        return local, uncached, kv


_ROUTE_CHUNK = 1 << 16  # requests converted to int64 ids at a time (~13 MB for Mooncake prompts)
