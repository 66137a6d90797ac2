"""Per-request routing with prefix caches (``docs/methods.md`` section 7): which cluster prefills a request, how many
of its tokens must be computed, and which cached prefix (if any) has to move across first.

- bandwidth scarce: each cluster's cache on its own; local if ``l_total - l_pd <= t``, else remote;
- bandwidth abundant: the best cache anywhere, ``l_prefix = max(l_prfaas, l_pd)``; local if
  ``l_total - l_prefix <= t``, else remote; the prefix moves across when it lives in the other cluster.

The cluster that prefills caches the prompt's blocks and its end-of-prompt state checkpoint; a remote
prefill also leaves the blocks (not the checkpoint) in the PD cluster, whose decode side received them.
"""

from __future__ import annotations

from .cache import PrefixCache


class Router:
    """Routing state: the two clusters' caches (None: no caching, every prompt is wholly uncached)."""

    def __init__(self, pd: PrefixCache | None, prfaas: PrefixCache | None, remote_ok: bool):
        self.pd = pd
        self.prfaas = prfaas
        self.remote_ok = remote_ok

    def route(self, hashes, length: int, threshold: float, abundant: bool,
              local_ok: bool) -> tuple[bool, int, int, int, int]:
        """``(local, uncached, kv_at_decode, uncached_vs_pd, moved)`` for a prompt of ``length`` tokens:
        the route, the tokens to prefill, the prefix tokens whose KV the decode side already holds, the
        length the PD cluster's cache leaves uncached (what the long-term rule observes), and the prefix
        tokens to move to the prefilling cluster first (0: none)."""
        pd, rf = self.pd, self.prfaas
        if pd is None or hashes is None:
            local = (length <= threshold and local_ok) or not self.remote_ok
            return local, length, 0, length, 0
        kv_pd, use_pd = pd.match(hashes, length)
        use_rf = rf.match(hashes, length)[1] if (abundant and self.remote_ok) else -1  # -1: not looked up
        best = use_rf if use_rf > use_pd else use_pd
        if (length - best <= threshold and local_ok) or not self.remote_ok:
            pd.prompt_tokens += length
            pd.hit_tokens += best
            pd.insert(hashes, length, True)
            return True, length - best, kv_pd, length - use_pd, best if best > use_pd else 0
        if use_rf < 0:
            use_rf = rf.match(hashes, length)[1]
        best = use_pd if (abundant and use_pd > use_rf) else use_rf
        rf.prompt_tokens += length
        rf.hit_tokens += best
        rf.insert(hashes, length, True)
        pd.insert(hashes, length, False)
        return False, length - best, kv_pd, length - use_pd, best if best > use_rf else 0

    def route_all(self, hashes, lengths, threshold: float, local_ok: bool):
        """`route` with the scarce rule over a whole arrival sequence: the static scheduler's routing pass,
        with the cache look-ups and inserts of `PrefixCache.match`/`insert` inlined (a test checks that it
        equals calling `route` request by request). Returns lists ``(local, uncached, kv_at_decode)``.

        When every prompt's blocks fit in a pool together, nothing can ever be evicted, so recency does not
        matter: only the blocks beyond the cached prefix are added, unstamped."""
        pd, rf = self.pd, self.prfaas
        bt = pd.block_tokens
        need_ckpt = bool(pd.checkpoint_bytes)
        remote_ok = self.remote_ok
        pd_blocks, pd_ckpt, rf_blocks, rf_ckpt = pd.blocks, pd.checkpoints, rf.blocks, rf.checkpoints
        pd_cap = pd.capacity if pd.capacity > 0 else -1.0  # -1: caching off
        rf_cap = rf.capacity if rf.capacity > 0 else -1.0
        most = sum(lengths) // bt * pd.block_bytes + len(lengths) * pd.checkpoint_bytes
        pd_lru, rf_lru = most > pd_cap, most > rf_cap
        out_local, out_u, out_kv = [], [], []
        for h, length in zip(hashes, lengths):
            nh = len(h)
            limit = (length - 1) // bt
            if limit > nh:
                limit = nh
            lo, hi = 0, limit  # binary search of the cached prefix (the pool is prefix-closed)
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if h[mid - 1] in pd_blocks:
                    lo = mid
                else:
                    hi = mid - 1
            kv_pd = use = lo
            if need_ckpt:
                while use and h[use - 1] not in pd_ckpt:
                    use -= 1
            local = (length - use * bt <= threshold and local_ok) or not remote_ok
            full = length // bt
            if full > nh:
                full = nh
            if not local:
                lo, hi = 0, limit
                while lo < hi:
                    mid = (lo + hi + 1) >> 1
                    if h[mid - 1] in rf_blocks:
                        lo = mid
                    else:
                        hi = mid - 1
                use = lo
                if need_ckpt:
                    while use and h[use - 1] not in rf_ckpt:
                        use -= 1
                rf.prompt_tokens += length
                rf.hit_tokens += use * bt
                if full > 0 and rf_cap > 0 and not rf_lru:
                    for x in h[lo:full]:  # lo: the blocks this pool already holds
                        rf_blocks[x] = 0
                    if need_ckpt:
                        rf_ckpt[h[full - 1]] = 0
                elif full > 0 and rf_cap > 0:
                    s = rf._stamp + full
                    for x in h[:full]:
                        rf_blocks[x] = s
                        s -= 1
                    if need_ckpt:
                        rf_ckpt[h[full - 1]] = s
                    rf._stamp += full + 1
                    if len(rf_blocks) * rf.block_bytes + len(rf_ckpt) * rf.checkpoint_bytes > rf_cap:
                        rf._evict()
            else:
                pd.prompt_tokens += length
                pd.hit_tokens += use * bt
            if full > 0 and pd_cap > 0 and not pd_lru:
                for x in h[kv_pd:full]:
                    pd_blocks[x] = 0
                if local and need_ckpt:
                    pd_ckpt[h[full - 1]] = 0
            elif full > 0 and pd_cap > 0:
                s = pd._stamp + full
                for x in h[:full]:
                    pd_blocks[x] = s
                    s -= 1
                if local and need_ckpt:
                    pd_ckpt[h[full - 1]] = s
                pd._stamp += full + 1
                if len(pd_blocks) * pd.block_bytes + len(pd_ckpt) * pd.checkpoint_bytes > pd_cap:
                    pd._evict()
            out_local.append(local)
            out_u.append(length - use * bt)
            out_kv.append(kv_pd * bt)
        return out_local, out_u, out_kv
