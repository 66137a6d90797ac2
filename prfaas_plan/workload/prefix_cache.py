"""The prefix cache (one implementation, used by the planner's trace replay and by the simulator).

A request's prompt is a chain of blocks of ``block_tokens`` tokens (512 in the Mooncake traces), each
named by a prefix hash id: equal ids mean equal prefixes up to and including that block.

`PrefixCache` is one capacity-bounded LRU pool of KV blocks and, for models with linear-attention or
sliding-window layers, *state checkpoints* (the state after exactly ``k`` blocks, keyed by the hash of block
``k``; a cached prefix is usable for prefill only at a length that has one). Blocks and checkpoints share
one byte budget (docs/methods.md, "Prefix caches"):

- **touch**: a served prompt's blocks become most recently used, its root the most recent, its
  checkpoint just below its last block. So a block is always more recent than its descendants, eviction
  takes leaves before the prefixes they share, and the pool stays *prefix-closed* (a block is cached only
  with all its ancestors) -- which makes a match a binary search.
- **evict**: when the pool exceeds its capacity, least recently used entries go until it is at
  ``low_watermark`` of it (1.0: just back under; the simulator frees 10% at once).

Cost is proportional to what a request touches, never to the pool: the pool is a dict whose insertion
order is the recency order (a touched entry is deleted and re-inserted at the end, in C-level bulk
operations), so eviction pops from the front without sorting or scanning; memory is bounded by the
capacity. Checkpoints are stored under the bitwise complement of their block's id, so ids must be >= 0.

`replay_prefix_cache` replays a trace's ids in arrival order through such caches (one global, or one per
key of ``route(i)``) and gives each request's matched prefix. Its caches count blocks (``capacity_blocks``,
None = unlimited) and admit every id of a request, including a last partial block, since the trace gives it
an identity. Cached tokens are ``min(matched_blocks * block_size, input_length - 1)``: a fully matched
prompt still prefills its last token (engines recompute it to produce the first output token's logits).
The reference string does not depend on the capacity, so LRU's inclusion property holds: a bigger cache
never matches fewer blocks of any request.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import islice, repeat

import numpy as np

from ..errors import PlanError
from .traces import Trace

DEFAULT_BLOCK_SIZE = 512
"""Tokens per hash id in the Mooncake traces."""


class PrefixCache:
    """One pool. ``capacity_bytes`` bounds KV blocks (``block_bytes`` each) and checkpoints
    (``checkpoint_bytes`` each; 0: the model needs none); ``math.inf`` is unlimited. Counters:
    ``evicted`` entries, ``prompt_tokens`` of prompts prefilled from this pool and ``hit_tokens`` of them
    served from it (kept by the caller, who knows which pool prefilled)."""

    def __init__(self, capacity_bytes: float, block_bytes: float = 1.0, checkpoint_bytes: float = 0.0,
                 block_tokens: int = DEFAULT_BLOCK_SIZE, low_watermark: float = 1.0):
        self.capacity = float(capacity_bytes)
        self.block_bytes = float(block_bytes)
        self.checkpoint_bytes = float(checkpoint_bytes)
        self.block_tokens = int(block_tokens)
        self.low_watermark = float(low_watermark)
        self.recency_matters = True  # False once the caller knows nothing can ever be evicted
        self._pool: dict[int, None] = {}  # block id, or ~id of a checkpoint -> None; oldest first
        self._checkpoints = 0
        self.evicted = 0
        self.prompt_tokens = 0
        self.hit_tokens = 0

    def __len__(self) -> int:
        """Entries held (blocks and checkpoints)."""
        return len(self._pool)

    def __contains__(self, block_id: int) -> bool:
        """Whether the block ``block_id`` is cached."""
        return block_id >= 0 and block_id in self._pool

    def has_checkpoint(self, block_id: int) -> bool:
        """Whether the state after block ``block_id`` is cached."""
        return ~block_id in self._pool

    @property
    def blocks(self) -> int:
        """Blocks held."""
        return len(self._pool) - self._checkpoints

    @property
    def checkpoints(self) -> int:
        """Checkpoints held."""
        return self._checkpoints

    @property
    def used(self) -> float:
        """Bytes held."""
        return (len(self._pool) - self._checkpoints) * self.block_bytes + self._checkpoints * self.checkpoint_bytes

    def entries(self) -> list[int]:
        """Every entry, least recently used first (block ids; ``~id`` for a checkpoint after block ``id``)."""
        return list(self._pool)

    def assume_fits(self, total_bytes: float) -> None:
        """Tell the pool that everything it will ever be asked to hold takes at most ``total_bytes``: when
        that fits its capacity nothing is ever evicted, so `touch` skips keeping the recency order."""
        self.recency_matters = total_bytes > self.capacity

    def cached_blocks(self, hashes: Sequence[int], limit: int) -> int:
        """How many leading blocks of ``hashes[:limit]`` are cached: a binary search, right for prefix-hash
        ids (a block's id names its whole prefix), since the pool is prefix-closed."""
        pool = self._pool
        lo, hi = 0, min(limit, len(hashes))
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if hashes[mid - 1] in pool:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def leading_blocks(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached, scanning up to the first miss: right even for ids
        that are not prefix hashes (where `cached_blocks`' binary search is not)."""
        n = 0
        pool = self._pool
        for block_id in hashes:
            if block_id not in pool:
                break
            n += 1
        return n

    def usable_blocks(self, hashes: Sequence[int], cached: int) -> int:
        """The longest prefix of at most ``cached`` blocks prefill can start from: all of them, or for a
        model with state checkpoints the longest one that has one."""
        if self.checkpoint_bytes:
            pool = self._pool
            while cached and ~hashes[cached - 1] not in pool:
                cached -= 1
        return cached

    def match(self, hashes: Sequence[int], length: int) -> tuple[int, int]:
        """``(kv_tokens, usable_tokens)`` for a prompt of ``length`` tokens: the cached block-aligned prefix,
        and the longest prefix prefill can start from. At least one token is always left to compute."""
        kv = self.cached_blocks(hashes, (length - 1) // self.block_tokens)
        return kv * self.block_tokens, self.usable_blocks(hashes, kv) * self.block_tokens

    def insert(self, hashes: Sequence[int], length: int, checkpoint: bool) -> None:
        """Cache the full blocks of a prompt of ``length`` tokens, and its end-of-prompt checkpoint when
        ``checkpoint`` (the pool's cluster computed the state there)."""
        self.touch(hashes, min(length // self.block_tokens, len(hashes)), checkpoint)

    def touch(self, hashes: Sequence[int], full: int, checkpoint: bool, present: int | None = None) -> None:
        """Make ``hashes[:full]`` (and, when ``checkpoint`` and the model needs them, the checkpoint after
        block ``full``) cached and most recently used, roots most recent; evict when over capacity.
        ``present``: how many leading blocks the caller found cached (a `cached_blocks` result)."""
        if full <= 0 or self.capacity <= 0:
            return
        pool = self._pool
        ckpt = checkpoint and self.checkpoint_bytes
        if not self.recency_matters:
            pool.update(dict.fromkeys(hashes[present or 0:full]))
            if ckpt and ~hashes[full - 1] not in pool:
                pool[~hashes[full - 1]] = None
                self._checkpoints += 1
            return
        if ckpt:
            key = ~hashes[full - 1]
            if key in pool:
                del pool[key]
            else:
                self._checkpoints += 1
            pool[key] = None
        deque(map(pool.pop, hashes[:full], repeat(None, full)), maxlen=0)  # C loops: no Python per block
        pool.update(dict.fromkeys(hashes[full - 1::-1]))
        n = len(pool)
        if (n - self._checkpoints) * self.block_bytes + self._checkpoints * self.checkpoint_bytes > self.capacity:
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until the pool is at the low watermark of its capacity."""
        pool = self._pool
        excess = self.used - self.low_watermark * self.capacity
        smallest = min(s for s in (self.block_bytes, self.checkpoint_bytes) if s > 0)
        want = min(len(pool), int(excess // smallest) + 2)
        while True:  # the oldest ``want`` entries; more if checkpoints made them too small
            keys = list(islice(pool, want))
            ids = np.fromiter(keys, dtype=np.int64, count=len(keys))
            freed = np.cumsum(np.where(ids < 0, self.checkpoint_bytes, self.block_bytes))
            drop = int(np.searchsorted(freed, excess, side="left")) + 1
            if drop <= len(keys) or want == len(pool):
                break
            want = min(len(pool), 2 * want)
        drop = min(drop, len(keys))
        deque(map(pool.__delitem__, keys[:drop]), maxlen=0)
        self._checkpoints -= int(np.count_nonzero(ids[:drop] < 0))
        self.evicted += drop

    @property
    def hit_rate(self) -> float:
        """Fraction of prompt tokens prefilled from this pool that came from it."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def block_cache(capacity_blocks: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE) -> PrefixCache:
    """A pool counting whole blocks (``capacity_blocks``, None = unlimited), evicting just back to capacity."""
    _check_capacity(capacity_blocks)
    return PrefixCache(math.inf if capacity_blocks is None else capacity_blocks, 1.0, 0.0, block_size, 1.0)


def _check_capacity(capacity_blocks: int | None) -> int | None:
    if capacity_blocks is None:
        return None
    if isinstance(capacity_blocks, bool) or not isinstance(capacity_blocks, (int, np.integer)) \
            or capacity_blocks < 1:
        raise PlanError(f"cache capacity {capacity_blocks!r}: expected a whole number of blocks >= 1")
    return int(capacity_blocks)


@dataclass(frozen=True, eq=False)
class CacheReplay:
    """Per-request outcome of a prefix-cache replay (arrays in trace order, tokens)."""

    block_size: int
    capacity_blocks: int | None
    caches: int                                   # distinct caches the route used (1 = global)
    input_length: np.ndarray = field(repr=False)   # total prompt tokens
    matched_blocks: np.ndarray = field(repr=False)
    cached_length: np.ndarray = field(repr=False)  # tokens served from the cache

    @property
    def uncached_length(self) -> np.ndarray:
        """Tokens that must be prefilled (>= 1)."""
        return self.input_length - self.cached_length

    @property
    def token_hit_rate(self) -> float:
        """Cached tokens / prompt tokens over the whole trace."""
        return float(self.cached_length.sum() / self.input_length.sum())

    @property
    def request_hit_rate(self) -> float:
        """Mean over requests of each request's cached fraction of its prompt."""
        return float(np.mean(self.cached_length / self.input_length))

    @property
    def share_with_hit(self) -> float:
        """Fraction of requests with at least one cached token."""
        return float(np.mean(self.cached_length > 0))


def replay_prefix_cache(trace: Trace, block_size: int = DEFAULT_BLOCK_SIZE,
                        capacity_blocks: int | None = None,
                        route: Callable[[int], Hashable] | None = None) -> CacheReplay:
    """Replay ``trace``'s hash ids in arrival order through block-counting LRU prefix caches.

    ``block_size`` is the number of tokens one hash id stands for (the trace's own block size);
    ``capacity_blocks`` the size of each cache (None = unlimited); ``route(i)`` maps request index ``i``
    to the key of the cache that serves it (None = one global cache).
    """
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise PlanError(f"block size {block_size!r}: expected a whole number of tokens >= 1")
    _check_capacity(capacity_blocks)
    if trace.block_ids is None:
        raise PlanError(f"{trace.path}: no hash_ids: prefix-cache replay needs a Mooncake JSONL trace")
    counts = np.diff(trace.block_offsets)
    most = -(-trace.input_length // block_size)
    bad = np.flatnonzero(counts > most)
    if bad.size:
        i = int(bad[0])
        raise PlanError(f"{trace.path}:{int(trace.line[i])}: {int(counts[i])} hash ids for "
                        f"{int(trace.input_length[i])} tokens: with block size {block_size} expected at most "
                        f"{int(most[i])}")
    if trace.block_ids.size and int(trace.block_ids.min()) < 0:
        raise PlanError(f"{trace.path}: negative hash id {int(trace.block_ids.min())}: expected ids >= 0")
    caches: dict[Hashable, PrefixCache] = {}
    matched = []
    for i, blocks in enumerate(iter_blocks(trace.block_ids, trace.block_offsets)):
        key = None if route is None else route(i)
        cache = caches.get(key)
        if cache is None:
            cache = caches[key] = block_cache(capacity_blocks, block_size)
        matched.append(cache.leading_blocks(blocks))
        cache.touch(blocks, len(blocks), False)
    matched_blocks = np.asarray(matched, dtype=np.int64)
    total = trace.input_length
    cached = np.minimum(matched_blocks * block_size, total - 1)
    return CacheReplay(int(block_size), capacity_blocks, len(caches), total, matched_blocks, cached)


def iter_blocks(block_ids: np.ndarray, offsets: np.ndarray, start: int = 0, stop: int | None = None,
                chunk: int = 4096):
    """Each request's block ids as a list of ints, requests ``start`` to ``stop`` of a flat id array
    (request ``i`` owns ``block_ids[offsets[i]:offsets[i + 1]]``), converted ``chunk`` requests at a time
    so that memory holds one chunk of Python ints, not the whole trace's."""
    stop = len(offsets) - 1 if stop is None else stop
    for c0 in range(start, stop, chunk):
        c1 = min(c0 + chunk, stop)
        base = int(offsets[c0])
        ids = block_ids[base:int(offsets[c1])].tolist()
        bounds = (offsets[c0:c1 + 1] - base).tolist()
        for a, b in zip(bounds, bounds[1:]):
            yield ids[a:b]
