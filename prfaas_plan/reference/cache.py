"""The cache of one request: paged full-attention KV blocks plus per-layer request-level state.

Layout (derived here from the attention groups' own fields, independently of `prfaas_plan.arithmetic`,
which it is the check of):

- growing layers (GQA, MLA) keep per token GQA ``k`` (kv_heads, head_dim) and ``v`` (kv_heads,
  v_head_dim), or MLA ``c_kv`` (kv_lora_rank,) and ``k_rope`` (qk_rope_head_dim,), in fixed-size
  blocks of ``block_size`` tokens from a `BlockPool`. A block id covers the same token slots in every
  growing layer; blocks are reference-counted so that requests can share a block-aligned prefix;
- sliding-window layers (SWA) keep ``k`` and ``v`` of the last ``min(length, window)`` tokens;
- linear-attention layers keep a ``state`` (heads, key_dim, value_dim; Mamba2: heads, state_size,
  head_dim) and, for KDA, Gated DeltaNet and Mamba2, a ``conv`` state: the last ``conv_kernel - 1`` inputs of the short convolution
  (positions, channels), zeros before the first token.

Every tensor is stored through a `Codec` of its profile dtype (KV dtype for growing and window KV,
state dtype, conv dtype): values are rounded on write, as a serving engine holds them. ``exact=True``
stores float64 instead, for checks of the algorithms themselves. Sizes are in bytes, lengths in tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..profiles import ModelProfile
from .numerics import Codec, codec


@dataclass(frozen=True)
class Layout:
    """Per-layer cache shapes of a model (element counts per token, or per request)."""

    growing: dict[int, dict[str, tuple[int, ...]]]           # layer -> name -> shape per token
    window: dict[int, tuple[int, dict[str, tuple[int, ...]]]]  # layer -> (window tokens, name -> shape)
    recurrent: dict[int, dict[str, tuple[int, ...]]]         # layer -> {"state": ..., ["conv": ...]}

    @property
    def has_request_level(self) -> bool:
        """True when some layer keeps request-level state (reusable only at an exact length)."""
        return bool(self.window or self.recurrent)


def layout_of(model: ModelProfile) -> Layout:
    """The cache layout of a model profile."""
    growing, window, recurrent = {}, {}, {}
    for g in model.attention:
        for i in g.layers:
            if g.kind == "gqa":
                growing[i] = {"k": (g.num_kv_heads, g.head_dim), "v": (g.num_kv_heads, g.v_head_dim)}
            elif g.kind == "mla":
                growing[i] = {"c_kv": (g.kv_lora_rank,), "k_rope": (g.qk_rope_head_dim,)}
            elif g.kind == "swa":
                window[i] = (g.window, {"k": (g.num_kv_heads, g.head_dim), "v": (g.num_kv_heads, g.v_head_dim)})
            elif g.kind == "kda":
                recurrent[i] = {"state": (g.num_heads, g.head_dim, g.head_dim),
                                "conv": (g.conv_kernel - 1, 3 * g.num_heads * g.head_dim)}
            elif g.kind == "gated_deltanet":
                ch = 2 * g.num_key_heads * g.key_head_dim + g.num_value_heads * g.value_head_dim
                recurrent[i] = {"state": (g.num_value_heads, g.key_head_dim, g.value_head_dim),
                                "conv": (g.conv_kernel - 1, ch)}
            elif g.kind == "lightning":
                recurrent[i] = {"state": (g.num_heads, g.head_dim, g.head_dim)}
            elif g.kind == "mamba2":
                recurrent[i] = {"state": (g.num_heads, g.state_size, g.head_dim),
                                "conv": (g.conv_kernel - 1, g.num_heads * g.head_dim + 2 * g.num_groups * g.state_size)}
            else:  # pragma: no cover - profiles validates kinds
                raise ValueError(g.kind)
    for entry in recurrent.values():
        if "conv" in entry and entry["conv"][0] == 0:
            del entry["conv"]
    return Layout(growing, window, recurrent)


@dataclass(frozen=True)
class Codecs:
    """Storage codec of each kind of cache tensor."""

    kv: Codec
    state: Codec
    conv: Codec

    @classmethod
    def of(cls, model: ModelProfile, exact: bool = False) -> "Codecs":
        if exact:
            c = codec("fp64")
            return cls(c, c, c)
        return cls(codec(model.kv_dtype, model.name), codec(model.state_dtype, model.name),
                   codec(model.conv_dtype, model.name))

    def for_state(self, name: str) -> Codec:
        return self.conv if name == "conv" else self.state


class BlockPool:
    """Fixed-size KV blocks shared by the requests of one site, for every growing layer at once.

    A block holds ``block_size`` token slots of each growing layer's tensors, stored at the KV codec.
    """

    def __init__(self, layout: Layout, block_size: int, kv_codec: Codec):
        self.layout = layout
        self.block_size = block_size
        self.codec = kv_codec
        self.blocks: dict[int, dict[tuple[int, str], np.ndarray]] = {}
        self.refs: dict[int, int] = {}
        self._next = 0

    def allocate(self) -> int:
        """A fresh zeroed block (reference count 1); returns its id."""
        bid = self._next
        self._next += 1
        self.blocks[bid] = {(layer, name): np.zeros((self.block_size,) + shape, self.codec.storage)
                            for layer, fields in self.layout.growing.items() for name, shape in fields.items()}
        self.refs[bid] = 1
        return bid

    def retain(self, bid: int) -> None:
        self.refs[bid] += 1

    def release(self, bid: int) -> None:
        self.refs[bid] -= 1
        if self.refs[bid] == 0:
            del self.refs[bid], self.blocks[bid]

    @property
    def block_bytes(self) -> int:
        """Bytes of one block over all growing layers."""
        return sum(a.nbytes for a in next(iter(self.blocks.values())).values()) if self.blocks else 0


@dataclass
class RequestCache:
    """One request's cache at one site: a block table into ``pool`` plus request-level states.

    ``length`` is the number of tokens whose KV is complete in every layer. Request-level tensors are
    stored arrays (codec storage dtype) in ``windows`` and ``states`` (layer -> name -> array).
    """

    layout: Layout
    pool: BlockPool
    codecs: Codecs
    length: int = 0
    block_table: list[int] = field(default_factory=list)
    windows: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    states: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for layer, (_, fields) in self.layout.window.items():
            self.windows.setdefault(layer, {n: np.zeros((0,) + s, self.codecs.kv.storage) for n, s in fields.items()})
        for layer, fields in self.layout.recurrent.items():
            self.states.setdefault(layer, {n: self.codecs.for_state(n).encode(np.zeros(s)) for n, s in fields.items()})

    # -- growing (paged) KV ------------------------------------------------------------------------

    def reserve(self, n_tokens: int) -> None:
        """Allocate blocks so that the block table covers ``n_tokens`` slots."""
        while len(self.block_table) * self.pool.block_size < n_tokens:
            self.block_table.append(self.pool.allocate())

    def _spans(self, start: int, end: int):
        """(block id, first slot, last slot + 1, offset into [start, end)) for token range [start, end)."""
        b = self.pool.block_size
        pos = start
        while pos < end:
            bid = self.block_table[pos // b]
            lo = pos % b
            hi = min(b, lo + end - pos)
            yield bid, lo, hi, pos - start
            pos += hi - lo

    def kv_write(self, layer: int, start: int, values: dict[str, np.ndarray], raw: bool = False) -> None:
        """Write tokens start.. of one growing layer (float64, encoded here; ``raw``: already stored)."""
        n = len(next(iter(values.values())))
        self.reserve(start + n)
        for bid, lo, hi, off in self._spans(start, start + n):
            assert self.pool.refs[bid] == 1, "a shared prefix block is never written"
            for name, val in values.items():
                chunk = val[off:off + hi - lo]
                self.pool.blocks[bid][(layer, name)][lo:hi] = chunk if raw else self.codecs.kv.encode(chunk)

    def kv_raw(self, layer: int, start: int, end: int) -> dict[str, np.ndarray]:
        """Stored tensors of tokens [start, end) of one growing layer (storage dtype)."""
        out = {}
        for name in self.layout.growing[layer]:
            parts = [self.pool.blocks[bid][(layer, name)][lo:hi] for bid, lo, hi, _ in self._spans(start, end)]
            shape = (0,) + self.layout.growing[layer][name]
            out[name] = np.concatenate(parts) if parts else np.zeros(shape, self.codecs.kv.storage)
        return out

    def kv_read(self, layer: int, end: int) -> dict[str, np.ndarray]:
        """Decoded (float64) tensors of tokens [0, end) of one growing layer."""
        return {n: self.codecs.kv.decode(a) for n, a in self.kv_raw(layer, 0, end).items()}

    # -- sliding window ----------------------------------------------------------------------------

    def window_extend(self, layer: int, start: int, values: dict[str, np.ndarray]):
        """Append tokens start.. to a window layer; keep the last ``window`` tokens stored.

        Returns the decoded stored window before trimming, concatenated with the new tokens, and the
        position of its first token: what the queries of this step may attend to.
        """
        window, _ = self.layout.window[layer]
        stored = self.windows[layer]
        held = len(next(iter(stored.values())))
        first = start - held
        full = {n: np.concatenate([stored[n], self.codecs.kv.encode(values[n])]) for n in stored}
        keep = min(window, len(full["k"]))
        self.windows[layer] = {n: a[len(a) - keep:].copy() for n, a in full.items()}
        return {n: self.codecs.kv.decode(a) for n, a in full.items()}, first

    # -- recurrent state ---------------------------------------------------------------------------

    def state_read(self, layer: int) -> dict[str, np.ndarray]:
        return {n: self.codecs.for_state(n).decode(a) for n, a in self.states[layer].items()}

    def state_write(self, layer: int, values: dict[str, np.ndarray]) -> None:
        self.states[layer] = {n: self.codecs.for_state(n).encode(v) for n, v in values.items()}

    # -- bookkeeping -------------------------------------------------------------------------------

    def live_bytes(self) -> dict[str, int]:
        """Bytes the request's cache holds, measured on the stored arrays, by part.

        ``growing``: filled token slots only (a partial last block counts its used slots);
        ``window``, ``recurrent``, ``conv``: the stored arrays; ``allocated``: whole blocks (what the
        paged pool reserves) plus the request-level arrays.
        """
        growing = sum(a.nbytes for layer in self.layout.growing for a in self.kv_raw(layer, 0, self.length).values())
        window = sum(a.nbytes for w in self.windows.values() for a in w.values())
        recurrent = sum(s["state"].nbytes for s in self.states.values())
        conv = sum(s["conv"].nbytes for s in self.states.values() if "conv" in s)
        allocated = len(self.block_table) * self.pool.block_bytes + window + recurrent + conv
        return {"growing": growing, "window": window, "recurrent": recurrent, "conv": conv,
                "total": growing + window + recurrent + conv, "allocated": allocated}

    def release(self) -> None:
        """Give the blocks back to the pool (shared ones stay alive while others hold them)."""
        for bid in self.block_table:
            self.pool.release(bid)
        self.block_table = []
