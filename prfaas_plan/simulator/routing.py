"""Per-request routing with prefix caches (``docs/methods.md`` section 7): which cluster prefills a request, how many
of its tokens must be computed, and which cached prefix (if any) has to move across first.

- bandwidth scarce: each cluster's cache on its own; local if ``l_total - l_pd <= t``, else remote;
- bandwidth abundant: the best cache anywhere, ``l_prefix = max(l_prfaas, l_pd)``; local if
  ``l_total - l_prefix <= t``, else remote; the prefix moves across when it lives in the other cluster.

The cluster that prefills caches the prompt's blocks and its end-of-prompt state checkpoint; a remote
prefill also leaves the blocks (not the checkpoint) in the PD cluster, whose decode side received them.
"""

from __future__ import annotations

from ..workload.prefix_cache import PrefixCache


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

    def route_all(self, blocks, lengths, threshold: float, local_ok: bool):
        """`route` with the scarce rule over a whole arrival sequence (``blocks``: an iterable of each
        request's hash ids, ``lengths`` their prompt tokens): the static scheduler's routing pass, in one
        loop with the counters kept locally (a test checks that it equals calling `route` request by
        request). Returns lists ``(local, uncached, kv_at_decode)``."""
        pd, rf = self.pd, self.prfaas
        bt = pd.block_tokens
        remote_ok = self.remote_ok
        pd_cached, rf_cached = pd.cached_blocks, rf.cached_blocks
        pd_usable, rf_usable, pd_touch, rf_touch = pd.usable_blocks, rf.usable_blocks, pd.touch, rf.touch
        out_local, out_u, out_kv = [], [], []
        pd_prompt = pd_hit = rf_prompt = rf_hit = 0
        for h, length in zip(blocks, lengths):
            limit = (length - 1) // bt
            full = min(length // bt, len(h))
            kv_pd = pd_cached(h, limit)
            use = pd_usable(h, kv_pd)
            local = (length - use * bt <= threshold and local_ok) or not remote_ok
            if not local:
                lo = rf_cached(h, limit)
                use = rf_usable(h, lo)
                rf_prompt += length
                rf_hit += use * bt
                rf_touch(h, full, True, lo)
            else:
                pd_prompt += length
                pd_hit += use * bt
            pd_touch(h, full, local, kv_pd)
            out_local.append(local)
            out_u.append(length - use * bt)
            out_kv.append(kv_pd * bt)
        pd.prompt_tokens += pd_prompt
        pd.hit_tokens += pd_hit
        rf.prompt_tokens += rf_prompt
        rf.hit_tokens += rf_hit
        return out_local, out_u, out_kv
