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

Cost is proportional to what a request touches, never to the pool: the pool is a hash table whose
records are linked in recency order (compiled, in `prefix_kernels`), so a touch re-links the prompt's
entries and eviction pops the oldest without sorting or scanning; memory is bounded by the capacity (the
table grows by doubling as the pool fills). Checkpoints are stored under the bitwise complement of their
block's id, so ids must be >= 0.

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
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from . import prefix_layout as layout
from .traces import Trace

DEFAULT_BLOCK_SIZE = 512
"""Tokens per hash id in the Mooncake traces."""


class PrefixCache:
    """One pool. ``capacity_bytes`` bounds KV blocks (``block_bytes`` each) and checkpoints
    (``checkpoint_bytes`` each; 0: the model needs none); ``math.inf`` is unlimited. Counters:
    ``evicted`` entries, ``prompt_tokens`` of prompts prefilled from this pool and ``hit_tokens`` of them
    served from it (kept by the caller, who knows which pool prefilled). ``compiled``: the entries live in
    the arrays of `prefix_kernels` (numba; what pays from `COMPILED_FROM` requests on), else in the
    plain-Python twin `prefix_python.PyPool` (same results; ``rec`` is then None and ``py`` holds them).
    Methods taking ``hashes`` accept any sequence of ids, an int64 array fastest."""

    def __init__(self, capacity_bytes: float, block_bytes: float = 1.0, checkpoint_bytes: float = 0.0,
                 block_tokens: int = DEFAULT_BLOCK_SIZE, low_watermark: float = 1.0, compiled: bool = True):
        K = layout
        self.capacity = float(capacity_bytes)
        self.block_bytes = float(block_bytes)
        self.checkpoint_bytes = float(checkpoint_bytes)
        self.block_tokens = int(block_tokens)
        self.low_watermark = float(low_watermark)
        self.sizes = np.array([self.block_bytes, self.checkpoint_bytes, self.capacity, self.low_watermark])
        self.meta = np.zeros(K.META_SIZE, dtype=np.int64)
        self.meta[[K.HEAD, K.TAIL]] = -1
        self.meta[K.BITS] = _FIRST_TABLE_BITS
        self.meta[K.RECENCY] = 1
        self.meta[K.BLOCK_TOKENS] = self.block_tokens
        self.compiled = bool(compiled)
        if self.compiled:
            self.rec = kernels().new_table(_FIRST_TABLE_BITS)
            self.py = None
        else:
            from .prefix_python import PyPool

            self.rec = None
            self.py = PyPool(self.meta, self.sizes)

    def _counter(slot: str):  # builds the counter properties below
        def get(self) -> int:
            return int(self.meta[getattr(layout, slot)])

        def set_(self, value: int) -> None:
            self.meta[getattr(layout, slot)] = value
        return property(get, set_)

    evicted = _counter("EVICTED")  # kept in ``meta``, where the kernels count
    prompt_tokens = _counter("PROMPT")
    hit_tokens = _counter("HIT")
    del _counter

    @property
    def recency_matters(self) -> bool:
        """False once the caller knows nothing can ever be evicted (`assume_fits`)."""
        return bool(self.meta[layout.RECENCY])

    def __len__(self) -> int:
        """Entries held (blocks and checkpoints)."""
        return int(self.meta[layout.N])

    def _has(self, key: int) -> bool:
        if self.py is not None:
            return key in self.py.od
        return kernels().find(self.rec, self.meta, key) >= 0

    def __contains__(self, block_id: int) -> bool:
        """Whether the block ``block_id`` is cached."""
        return block_id >= 0 and self._has(block_id)

    def has_checkpoint(self, block_id: int) -> bool:
        """Whether the state after block ``block_id`` is cached."""
        return self._has(~block_id)

    @property
    def blocks(self) -> int:
        """Blocks held."""
        return len(self) - self.checkpoints

    @property
    def checkpoints(self) -> int:
        """Checkpoints held."""
        return int(self.meta[layout.CK])

    @property
    def used(self) -> float:
        """Bytes held."""
        return self.blocks * self.block_bytes + self.checkpoints * self.checkpoint_bytes

    def entries(self) -> list[int]:
        """Every entry, least recently used first (block ids; ``~id`` for a checkpoint after block ``id``)."""
        if self.py is not None:
            return self.py.entries()
        return kernels().entries(self.rec, self.meta).tolist()

    def assume_fits(self, total_bytes: float) -> None:
        """Tell the pool that everything it will ever be asked to hold takes at most ``total_bytes``: when
        that fits its capacity nothing is ever evicted, so `touch` skips keeping the recency order. The
        table is sized at once for the most entries the pool can then hold (no doubling on the way)."""
        self.meta[layout.RECENCY] = total_bytes > self.capacity
        smallest = min(s for s in (self.block_bytes, self.checkpoint_bytes, math.inf) if s > 0)
        most = min(total_bytes, self.capacity) / smallest
        if most < 1 << 30:
            self.make_room(int(most) + 1 - len(self))

    def make_room(self, extra: int) -> None:
        """Double the table until ``extra`` more entries fit in it (at most half full)."""
        if self.py is not None:  # a dict grows by itself
            return
        bits = int(self.meta[layout.BITS])
        while 2 * (len(self) + extra) > 1 << bits:
            bits += 1
        if bits != self.meta[layout.BITS]:
            self.rec = kernels().rehash(self.rec, self.meta, bits)

    def cached_blocks(self, hashes: Sequence[int], limit: int) -> int:
        """How many leading blocks of ``hashes[:limit]`` are cached: a binary search, right for prefix-hash
        ids (a block's id names its whole prefix), since the pool is prefix-closed."""
        ids = id_array(hashes)
        if self.py is not None:
            return self.py.cached_blocks(ids.tolist(), limit)
        return kernels().cached_blocks(self.rec, self.meta, ids, 0, len(ids), limit)

    def leading_blocks(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached, scanning up to the first miss: right even for ids
        that are not prefix hashes (where `cached_blocks`' binary search is not)."""
        ids = id_array(hashes)
        if self.py is not None:
            return self.py.leading_blocks(ids.tolist())
        return kernels().leading_blocks(self.rec, self.meta, ids, 0, len(ids))

    def usable_blocks(self, hashes: Sequence[int], cached: int) -> int:
        """The longest prefix of at most ``cached`` blocks prefill can start from: all of them, or for a
        model with state checkpoints the longest one that has one."""
        if self.py is not None:
            return self.py.usable_blocks(id_array(hashes).tolist(), cached)
        return kernels().usable_blocks(self.rec, self.meta, self.sizes, id_array(hashes), 0, cached)

    def match(self, hashes: Sequence[int], length: int) -> tuple[int, int]:
        """``(kv_tokens, usable_tokens)`` for a prompt of ``length`` tokens: the cached block-aligned prefix,
        and the longest prefix prefill can start from. At least one token is always left to compute."""
        ids = id_array(hashes)
        kv = self.cached_blocks(ids, (length - 1) // self.block_tokens)
        return kv * self.block_tokens, self.usable_blocks(ids, kv) * self.block_tokens

    def insert(self, hashes: Sequence[int], length: int, checkpoint: bool) -> None:
        """Cache the full blocks of a prompt of ``length`` tokens, and its end-of-prompt checkpoint when
        ``checkpoint`` (the pool's cluster computed the state there)."""
        self.touch(hashes, min(length // self.block_tokens, len(hashes)), checkpoint)

    def touch(self, hashes: Sequence[int], full: int, checkpoint: bool, present: int | None = None) -> None:
        """Make ``hashes[:full]`` (and, when ``checkpoint`` and the model needs them, the checkpoint after
        block ``full``) cached and most recently used, roots most recent; evict when over capacity.
        ``present``: how many leading blocks the caller found cached (a `cached_blocks` result)."""
        ids = id_array(hashes)
        full = min(int(full), len(ids))
        if self.py is not None:
            self.py.touch(ids.tolist(), full, bool(checkpoint), present or 0)
            return
        self.make_room(full + 1)
        kernels().touch(self.rec, self.meta, self.sizes, ids, 0, full, bool(checkpoint), present or 0)

    @property
    def hit_rate(self) -> float:
        """Fraction of prompt tokens prefilled from this pool that came from it."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


_FIRST_TABLE_BITS = 12  # 4,096 positions (64 KiB); doubled as the pool fills

COMPILED_FROM = 200_000
"""Requests from which a replay's pools are compiled (`prefix_kernels`) rather than plain Python
(`prefix_python`): importing numba and loading the kernels costs about 1 s a process, which the compiled
pools repay only on traces far longer than the bundled 12k one (benchmarks/bench_prefix_python.py times
both); the simulator's queues switch at the same count (`simulator.pipeline.COMPILED_FROM`)."""

_KERNELS = None


def kernels():
    """The compiled kernels, imported on first use (numba is heavy)."""
    global _KERNELS
    if _KERNELS is None:
        from . import prefix_kernels
        _KERNELS = prefix_kernels
    return _KERNELS


def id_array(hashes) -> np.ndarray:
    """``hashes`` as a contiguous int64 array (no copy when it is one)."""
    if isinstance(hashes, np.ndarray) and hashes.dtype == np.int64 and hashes.flags.c_contiguous:
        return hashes
    return np.ascontiguousarray(hashes, dtype=np.int64)


def block_cache(capacity_blocks: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                compiled: bool = True) -> PrefixCache:
    """A pool counting whole blocks (``capacity_blocks``, None = unlimited), evicting just back to capacity."""
    _check_capacity(capacity_blocks)
    return PrefixCache(math.inf if capacity_blocks is None else capacity_blocks, 1.0, 0.0, block_size, 1.0,
                       compiled)


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
                        route: Callable[[int], Hashable] | None = None,
                        compiled: bool | None = None) -> CacheReplay:
    """Replay ``trace``'s hash ids in arrival order through block-counting LRU prefix caches.

    ``block_size`` is the number of tokens one hash id stands for (the trace's own block size);
    ``capacity_blocks`` the size of each cache (None = unlimited); ``route(i)`` maps request index ``i``
    to the key of the cache that serves it (None = one global cache); ``compiled`` picks the pools'
    implementation (None: compiled from `COMPILED_FROM` requests on; both give the same result).
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
    n = len(trace.input_length)
    if route is None:
        groups = {None: range(n)} if n else {}
    else:  # each cache is independent: replay each one's requests on their own, in arrival order
        groups = {}
        for i in range(n):
            groups.setdefault(route(i), []).append(i)
    ids = id_array(trace.block_ids)
    offsets = np.ascontiguousarray(trace.block_offsets, dtype=np.int64)
    matched_blocks = np.zeros(n, dtype=np.int64)
    if compiled is None:
        compiled = n >= COMPILED_FROM
    if not compiled:
        from .prefix_python import replay

        id_list, off_list = ids.tolist(), offsets.tolist()
        for order in groups.values():
            replay(block_cache(capacity_blocks, block_size, False).py, id_list, off_list, order, matched_blocks)
    else:
        K = kernels()
        for order in groups.values():
            cache = block_cache(capacity_blocks, block_size)
            order = np.asarray(order, dtype=np.int64)
            j = 0
            while j < len(order):
                j = K.replay_chunk(cache.rec, cache.meta, cache.sizes, ids, offsets, order, j, False,
                                   matched_blocks)
                if j < len(order):
                    r = order[j]
                    cache.make_room(int(offsets[r + 1] - offsets[r]) + 1)
    total = trace.input_length
    cached = np.minimum(matched_blocks * block_size, total - 1)
    return CacheReplay(int(block_size), capacity_blocks, len(groups), total, matched_blocks, cached)


class BlockChains:
    """Each request's block ids, requests ``start`` to ``stop`` of a flat id array (request ``i`` owns
    ``block_ids[offsets[i]:offsets[i + 1]]``): an iterator of int64 array views, converted ``chunk``
    requests at a time so that memory holds one chunk, not a copy of the trace. `chunks` gives the same
    as flat arrays (what the compiled routing pass reads)."""

    def __init__(self, block_ids: np.ndarray, offsets: np.ndarray, start: int = 0, stop: int | None = None,
                 chunk: int = 4096):
        self.block_ids, self.offsets, self.chunk = block_ids, offsets, chunk
        self.start = start
        self.stop = len(offsets) - 1 if stop is None else stop
        self._views = (ids[a:b] for ids, offs, _, _ in self.chunks(chunk)
                       for a, b in zip(offs.tolist(), offs[1:].tolist()))

    def __iter__(self):
        return self

    def __next__(self) -> np.ndarray:
        return next(self._views)

    def chunks(self, size: int):
        """``(ids, offsets, first, end)`` per ``size`` requests: their int64 ids, offsets into them (one
        more than requests) and their indices relative to ``start``."""
        for c0 in range(self.start, self.stop, size):
            c1 = min(c0 + size, self.stop)
            base = int(self.offsets[c0])
            yield (id_array(self.block_ids[base:int(self.offsets[c1])]),
                   np.asarray(self.offsets[c0:c1 + 1], dtype=np.int64) - base, c0 - self.start, c1 - self.start)


def iter_blocks(block_ids: np.ndarray, offsets: np.ndarray, start: int = 0, stop: int | None = None,
                chunk: int = 4096) -> BlockChains:
    """Requests ``start`` to ``stop``'s block ids (a `BlockChains`)."""
    return BlockChains(block_ids, offsets, start, stop, chunk)
