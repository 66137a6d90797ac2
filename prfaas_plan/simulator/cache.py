"""Per-cluster prefix cache: one capacity-bounded LRU pool of full-attention KV blocks and linear-state
checkpoints (``docs/methods.md`` section 7).

- **KV blocks** are block-level: a request's prompt is a sequence of ``block_tokens``-token blocks named
  by prefix hashes (Mooncake ``hash_ids``: equal ids mean equal prefixes up to that block). Only full
  blocks are cached; a prefix match may stop at any block.
- **State checkpoints** are request-level: the linear-attention / sliding-window state after exactly
  ``k`` blocks. Rule used here: a cluster that prefills a prompt of ``l`` tokens stores one checkpoint at
  its last full-block boundary, ``floor(l / block_tokens)`` blocks (keyed by that block's hash), which is
  where a later turn of the same conversation diverges. A cached prefix is *usable* for prefill only at a
  length that has a checkpoint; models without linear or window layers need none.
- Blocks and checkpoints share one byte budget. Recency is a use stamp per entry; a prompt's blocks are
  stamped so that its root is the most recent, so descendants go before a shared prefix. Eviction is LRU
  with a low watermark: when the pool exceeds its capacity, the least recently used entries are dropped
  until it is at ``low_watermark`` of it (evicting in batches makes the sort by stamp rare).
"""

from __future__ import annotations

import numpy as np


class PrefixCache:
    """One cluster's pool. ``capacity_bytes`` bounds KV blocks (``block_bytes`` each) and checkpoints
    (``checkpoint_bytes`` each); ``checkpoint_bytes = 0`` means the model needs no state checkpoints."""

    def __init__(self, capacity_bytes: float, block_bytes: float, checkpoint_bytes: float,
                 block_tokens: int = 512, low_watermark: float = 0.9):
        self.capacity = float(capacity_bytes)
        self.block_bytes = float(block_bytes)
        self.checkpoint_bytes = float(checkpoint_bytes)
        self.block_tokens = int(block_tokens)
        self.low_watermark = float(low_watermark)
        self.blocks: dict[int, int] = {}       # block hash -> use stamp
        self.checkpoints: dict[int, int] = {}  # hash of the block the state follows -> use stamp
        self._stamp = 0
        self.evicted = 0
        self.prompt_tokens = 0   # tokens of prompts prefilled in this cluster
        self.hit_tokens = 0      # of which served from the cache

    @property
    def used(self) -> float:
        """Bytes held."""
        return len(self.blocks) * self.block_bytes + len(self.checkpoints) * self.checkpoint_bytes

    def match(self, hashes, length: int) -> tuple[int, int]:
        """``(kv_tokens, usable_tokens)`` for a prompt of ``length`` tokens: the cached block-aligned prefix,
        and the longest prefix prefill can start from (with a checkpoint when the model needs one). At least
        one token is always left to compute.

        The pool is prefix-closed (a block is cached only with all its ancestors: `insert` stamps a whole
        prefix, its root last, and eviction goes by stamp), so the match is a binary search."""
        bt = self.block_tokens
        blocks = self.blocks
        lo, hi = 0, min((length - 1) // bt, len(hashes))  # the match has lo <= k <= hi blocks
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if hashes[mid - 1] in blocks:
                lo = mid
            else:
                hi = mid - 1
        usable = lo
        if self.checkpoint_bytes:
            ckpt = self.checkpoints
            while usable and hashes[usable - 1] not in ckpt:
                usable -= 1
        return lo * bt, usable * bt

    def insert(self, hashes, length: int, checkpoint: bool) -> None:
        """Cache the full blocks of a prompt of ``length`` tokens, and its end-of-prompt checkpoint when
        ``checkpoint`` (the cluster computed the state there); evict when over capacity."""
        full = min(length // self.block_tokens, len(hashes))
        if full <= 0 or self.capacity <= 0:
            return
        top = self._stamp + full
        self.blocks.update(zip(hashes[:full], range(top, top - full, -1)))
        if checkpoint and self.checkpoint_bytes:
            self.checkpoints[hashes[full - 1]] = top - full
        self._stamp = top + 1
        if len(self.blocks) * self.block_bytes + len(self.checkpoints) * self.checkpoint_bytes > self.capacity:
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until the pool is at the low watermark of its capacity."""
        keys = list(self.blocks) + list(self.checkpoints)
        nb = len(self.blocks)
        stamps = np.fromiter(self.blocks.values(), dtype=np.int64, count=nb)
        stamps = np.concatenate([stamps, np.fromiter(self.checkpoints.values(), dtype=np.int64,
                                                     count=len(self.checkpoints))])
        sizes = np.where(np.arange(len(keys)) < nb, self.block_bytes, self.checkpoint_bytes)
        order = np.argsort(stamps, kind="stable")
        freed = np.cumsum(sizes[order])
        excess = self.used - self.low_watermark * self.capacity
        drop = order[: int(np.searchsorted(freed, excess, side="left")) + 1]
        for j in drop.tolist():
            if j < nb:
                del self.blocks[keys[j]]
            else:
                del self.checkpoints[keys[j]]
        self.evicted += len(drop)

    @property
    def hit_rate(self) -> float:
        """Fraction of prompt tokens prefilled here that came from the cache."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
