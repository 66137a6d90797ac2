"""Prefix-cache replay: turn a trace's total prompt lengths into uncached lengths.

A request's prompt is a chain of blocks of ``block_size`` tokens (512 in the Mooncake traces), each named
by a prefix hash id: equal ids mean equal prefixes up to and including that block. Replaying the ids in
arrival order through a block-level cache gives each request's matched prefix:

- **match**: the number of leading blocks already in the cache (matching stops at the first miss, as a
  radix/prefix cache does);
- **admit**: after the request is served all its blocks are in the cache and become most recently
  used. They are touched from the last block to the first, so the shared roots of prefix chains are the
  most recent and eviction takes leaf blocks first (as vLLM and SGLang evict), never a root before its
  leaves. Every id is admitted, including a last, partial block, since the trace gives it an identity.
- **capacity** is in blocks, per cache; ``None`` is unlimited. Eviction is least-recently-used.
- **scope**: one global cache, or one cache per key of ``route(i)`` (e.g. per cluster or per instance).

Cached tokens are ``min(matched_blocks * block_size, input_length - 1)``: the last block may be partial,
and a fully matched prompt still prefills its last token (engines recompute it to produce the first
output token's logits), so every request has at least 1 uncached token.

The reference string (every block of every request, in a fixed order) does not depend on the capacity,
so LRU's inclusion property holds: a bigger cache never matches fewer blocks of any request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from .traces import Trace

DEFAULT_BLOCK_SIZE = 512
"""Tokens per hash id in the Mooncake traces."""


class BlockLRU:
    """A block-level prefix cache of hash ids with LRU eviction (``capacity_blocks`` None = unlimited).

    The simulator can drive it directly: `match` a request's ids against several caches, decide where to
    prefill, then `admit` the ids to the cache that now holds them.
    """

    def __init__(self, capacity_blocks: int | None = None) -> None:
        self.capacity_blocks = _check_capacity(capacity_blocks)
        self._blocks: set[int] | OrderedDict[int, None] = set() if capacity_blocks is None else OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_id: int) -> bool:
        return block_id in self._blocks

    def match(self, ids: Sequence[int]) -> int:
        """Number of leading ``ids`` present in the cache (no state change)."""
        blocks = self._blocks
        n = 0
        for block_id in ids:
            if block_id not in blocks:
                break
            n += 1
        return n

    def admit(self, ids: Sequence[int]) -> None:
        """Make every id of a served request present and most recently used (roots most recent), then
        evict least-recently-used blocks beyond the capacity."""
        blocks = self._blocks
        if isinstance(blocks, set):
            blocks.update(ids)
            return
        for block_id in reversed(ids):
            if block_id in blocks:
                blocks.move_to_end(block_id)
            else:
                blocks[block_id] = None
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)


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
    """Replay ``trace``'s hash ids in arrival order through block-level LRU prefix caches.

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
    ids = trace.block_ids.tolist()
    offsets = trace.block_offsets.tolist()
    caches: dict[Hashable, BlockLRU] = {}
    matched = []
    for i in range(len(trace)):
        key = None if route is None else route(i)
        cache = caches.get(key)
        if cache is None:
            cache = caches[key] = BlockLRU(capacity_blocks)
        blocks = ids[offsets[i]:offsets[i + 1]]
        matched.append(cache.match(blocks))
        cache.admit(blocks)
    matched_blocks = np.asarray(matched, dtype=np.int64)
    total = trace.input_length
    cached = np.minimum(matched_blocks * block_size, total - 1)
    return CacheReplay(int(block_size), capacity_blocks, len(caches), total, matched_blocks, cached)
