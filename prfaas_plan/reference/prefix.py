"""Prefix cache of one site: block-level KV reuse plus request-level state checkpoints.

Full-attention KV is shared block by block: a block is identified by the hash of every token up to its
end (a chain hash), so two prompts share block i only if they agree on all tokens before its end.
Request-level state (linear-attention recurrent and conv states, sliding-window KV) cannot be cut at an
arbitrary point: it is reusable only from a checkpoint taken at exactly the matched length. A match is
therefore the longest block-aligned prefix that (a) leaves at least one token to prefill, (b) has every
block cached, and (c) when the model has request-level layers, has a checkpoint at that length.
Lengths are in tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .cache import BlockPool, Codecs, Layout, RequestCache


NO_BLOCK = -1  # block id of a prefix block that holds no KV (the model has no growing layers)


def prefix_key(tokens) -> str:
    """Hash of a token prefix (all of ``tokens``)."""
    return hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()


@dataclass
class Match:
    """Result of a lookup: ``length`` reusable tokens; ``kv_blocks`` full blocks present regardless of
    checkpoints (what a dense model could reuse)."""

    length: int
    kv_blocks: int
    cache: RequestCache | None


class PrefixCache:
    """Cached prefixes on one site's block pool."""

    def __init__(self, layout: Layout, pool: BlockPool, codecs: Codecs):
        self.layout, self.pool, self.codecs = layout, pool, codecs
        self.blocks: dict[str, int] = {}
        self.checkpoints: dict[str, dict] = {}

    def insert(self, tokens, cache: RequestCache, checkpoint: bool = True) -> None:
        """Register the full blocks of ``cache`` (holding ``tokens``) and, if asked, a checkpoint of its
        request-level state at exactly ``cache.length`` (which must then be block-aligned)."""
        b = self.pool.block_size
        assert len(tokens) == cache.length
        for i in range(cache.length // b):
            key = prefix_key(tokens[:(i + 1) * b])
            if key not in self.blocks:
                # A model without growing layers (Mistral-7B: sliding windows only) has no KV blocks;
                # the prefix is then known by its hash alone (block id NO_BLOCK).
                bid = cache.block_table[i] if i < len(cache.block_table) else NO_BLOCK
                self.blocks[key] = bid
                if bid != NO_BLOCK:
                    self.pool.retain(bid)
        if checkpoint:
            if cache.length % b:
                raise ValueError("checkpoints are kept at block-aligned lengths only")
            self.checkpoints[prefix_key(tokens)] = {
                "windows": {l: {n: a.copy() for n, a in w.items()} for l, w in cache.windows.items()},
                "states": {l: {n: a.copy() for n, a in s.items()} for l, s in cache.states.items()}}

    def match(self, tokens) -> Match:
        """The longest reusable prefix of ``tokens``, as a new request cache sharing its blocks."""
        b = self.pool.block_size
        kv_blocks = 0
        while (kv_blocks + 1) * b <= len(tokens) - 1 and prefix_key(tokens[:(kv_blocks + 1) * b]) in self.blocks:
            kv_blocks += 1
        for n_blocks in range(kv_blocks, 0, -1):
            key = prefix_key(tokens[:n_blocks * b])
            ckpt = self.checkpoints.get(key)
            if ckpt is None and self.layout.has_request_level:
                continue
            cache = RequestCache(self.layout, self.pool, self.codecs, length=n_blocks * b)
            for i in range(n_blocks):
                bid = self.blocks[prefix_key(tokens[:(i + 1) * b])]
                if bid != NO_BLOCK:
                    self.pool.retain(bid)
                    cache.block_table.append(bid)
            if ckpt is not None:
                cache.windows = {l: {n: a.copy() for n, a in w.items()} for l, w in ckpt["windows"].items()}
                cache.states = {l: {n: a.copy() for n, a in s.items()} for l, s in ckpt["states"].items()}
            return Match(n_blocks * b, kv_blocks, cache)
        return Match(0, kv_blocks, None)
