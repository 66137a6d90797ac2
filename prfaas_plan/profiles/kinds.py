"""Attention kinds as types: one class per kind holding its fields and its byte, state and FLOP rules.

A kind is a stateless rule object; the numbers live in the profile's `AttentionGroup` (element counts,
0-based layers). Every module that needs a per-kind figure asks ``group.rule`` instead of branching on
the kind's name, so adding a kind is adding one class and registering it (see `register`): declare
its cache class and fields, override the rules that apply (the defaults are "none"), and profiles may
name it; ``tests/test_kinds.py`` adds one that way. The formulas and their sources are in
``docs/methods.md``; counting conventions are in `prfaas_plan.arithmetic`.

Cache classes (``cache``):

- ``"growing"`` — KV that grows with every prompt token (full attention: GQA, MLA);
- ``"window"`` — KV capped at a sliding window (SWA);
- ``"recurrent"`` — a fixed-size state per request (linear attention: KDA, Gated DeltaNet, Lightning;
  the Mamba2 state-space mixer).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

# Rules take an `AttentionGroup` (``profiles.schema``, which imports this module, so it is not imported
# back here).
Group = Any


def causal_pairs(l, cached):
    """Sum over new positions i = cached+1 .. cached+l of i: query-key pairs of causal attention."""
    return l * cached + l * (l + 1) // 2


def window_pairs(l, window: int):
    """Sum over positions i = 1..l of min(i, window)."""
    inside = np.minimum(l, window)
    return inside * (inside + 1) // 2 + np.maximum(l - window, 0) * window


class AttentionKind:
    """Rules of one attention kind. Subclasses set `name`, `cache`, `required`, `optional` and override
    the rules that apply to them; the defaults are "none" (0 elements, no convolution)."""

    name: ClassVar[str]
    cache: ClassVar[str]                      # "growing", "window" or "recurrent"
    required: ClassVar[tuple[str, ...]]       # integer fields >= 1 the profile must give
    optional: ClassVar[tuple[str, ...]] = ()  # integer fields >= 0, default 0
    gated: ClassVar[bool] = False             # accepts ``output_gate: true|false``
    decompresses_at_prefill: ClassVar[bool] = False  # prefill expands a latent into per-head K and V

    # --- profile fields ---------------------------------------------------------------------------
    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """Every key a profile may give for a group of this kind, besides ``kind`` and ``layers``."""
        return cls.required + cls.optional + (("output_gate",) if cls.gated else ())

    def complete(self, values: dict) -> dict:
        """Fill derived defaults into validated field values (e.g. ``v_head_dim = head_dim``)."""
        return values

    def check(self, g: Group) -> str | None:
        """A cross-field inconsistency of ``g`` as one phrase, or None."""
        return None

    # --- cache shapes (elements, one layer) -------------------------------------------------------
    def kv_elements_per_token(self, g: Group) -> int:
        """Cached elements per token (growing and window kinds)."""
        return 0

    def state_elements(self, g: Group) -> int:
        """Elements of the recurrent state matrix (recurrent kinds)."""
        return 0

    def conv_channels(self, g: Group) -> int:
        """Channels of the short causal convolution; 0 if none."""
        return 0

    def linear_dims(self, g: Group) -> tuple[int, int, int]:
        """(heads, key dim, value dim) of the recurrence (recurrent kinds)."""
        return 0, 0, 0

    def kv_share_per_chip(self, g: Group, tp: int) -> float:
        """Fraction of one layer's per-token cache one chip of a ``tp``-way group holds."""
        return 1.0

    def replication(self, g: Group, tp: int) -> int:
        """Copies of one layer's cache a ``tp``-way group holds in total (1 = split, no copies)."""
        return 1

    # --- weights and FLOPs ------------------------------------------------------------------------
    def params(self, g: Group, hidden: int) -> int:
        """Weight elements of one layer's attention block (projections; norms and biases omitted)."""
        raise NotImplementedError

    def core_flops(self, g: Group, l, cached=0):
        """FLOPs of one layer's attention core for ``l`` new tokens after ``cached`` ones."""
        raise NotImplementedError

    def decode_flops_per_pair(self, g: Group) -> float:
        """FLOPs per query-key pair at decode (full/window kinds); the prefill figure unless the kind
        runs another form at decode."""
        return float(self.core_flops(g, 1))

    def query_output_width(self, g: Group) -> int:
        """Per-head width of the activations an attention kernel reads and writes per token (q/k + v)."""
        return 0

    def chunk_intra_factor(self) -> int:
        """Chunked prefill: multiples of the intra-chunk attention the kind computes (recurrent kinds)."""
        return 0

    def linear_io_per_head(self, g: Group) -> float:
        """Activation elements per token and head a linear-attention kernel reads and writes (q, k, v in,
        o out): ``2 key dim + 2 value dim`` (recurrent kinds; kinds that share q or k across heads say less)."""
        _, dk, dv = self.linear_dims(g)
        return 2 * dk + 2 * dv

    def summary_name(self) -> str:
        """Short label used in tables (``KDA``, ``GDN``)."""
        return self.name.upper()


class _Softmax(AttentionKind):
    """Shared rules of GQA and SWA: per-head K and V, heads split across chips (never below one)."""

    required = ("num_heads", "num_kv_heads", "head_dim")
    optional = ("v_head_dim",)
    gated = True

    def complete(self, values: dict) -> dict:
        if not values.get("v_head_dim"):
            values["v_head_dim"] = values["head_dim"]
        return values

    def check(self, g):
        if g.num_heads % g.num_kv_heads:
            return f"num_heads {g.num_heads} is not a multiple of num_kv_heads {g.num_kv_heads}"
        return None

    def kv_elements_per_token(self, g):
        return g.num_kv_heads * (g.head_dim + g.v_head_dim)

    def kv_share_per_chip(self, g, tp):
        return max(1 / g.num_kv_heads, 1 / tp)

    def replication(self, g, tp):
        # heads replicated tp / kv_heads times when tp exceeds them (Qwen3-235B: 4 heads on TP8 -> 2x)
        return max(1, tp // g.num_kv_heads) if g.num_kv_heads < tp else 1

    def params(self, g, hidden):
        q = hidden * g.num_heads * g.head_dim
        kv = hidden * g.num_kv_heads * (g.head_dim + g.v_head_dim)
        o = g.num_heads * g.v_head_dim * hidden
        gate = hidden * g.num_heads * g.v_head_dim if g.output_gate else 0
        return q + kv + o + gate

    def query_output_width(self, g):
        return g.head_dim + g.v_head_dim


class GQA(_Softmax):
    """Grouped-query (incl. multi-head) full attention."""

    name = "gqa"
    cache = "growing"

    def core_flops(self, g, l, cached=0):
        return 2 * g.num_heads * (g.head_dim + g.v_head_dim) * causal_pairs(l, cached)


class SWA(_Softmax):
    """Sliding-window attention: each query sees the last ``window`` keys."""

    name = "swa"
    cache = "window"
    required = _Softmax.required + ("window",)

    def core_flops(self, g, l, cached=0):
        if np.isscalar(l) and cached:
            pairs = window_pairs(cached + l, g.window) - window_pairs(cached, g.window)
        else:
            pairs = window_pairs(np.asarray(l) + cached, g.window) - window_pairs(np.asarray(cached), g.window)
        return 2 * g.num_heads * (g.head_dim + g.v_head_dim) * pairs


class MLA(AttentionKind):
    """Multi-head latent attention: caches the compressed latent and the rope key only; every chip of a
    tensor-parallel group holds the whole latent."""

    name = "mla"
    cache = "growing"
    required = ("num_heads", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    optional = ("q_lora_rank",)
    gated = True
    decompresses_at_prefill = True

    def kv_elements_per_token(self, g):
        return g.kv_lora_rank + g.qk_rope_head_dim

    def replication(self, g, tp):
        return tp

    def params(self, g, hidden):
        qk = g.qk_nope_head_dim + g.qk_rope_head_dim
        q = (hidden * g.q_lora_rank + g.q_lora_rank * g.num_heads * qk) if g.q_lora_rank else hidden * g.num_heads * qk
        kv_a = hidden * (g.kv_lora_rank + g.qk_rope_head_dim)
        kv_b = g.kv_lora_rank * g.num_heads * (g.qk_nope_head_dim + g.v_head_dim)
        o = g.num_heads * g.v_head_dim * hidden
        gate = hidden * g.num_heads * g.v_head_dim if g.output_gate else 0
        return q + kv_a + kv_b + o + gate

    def core_flops(self, g, l, cached=0):
        qk = g.qk_nope_head_dim + g.qk_rope_head_dim
        return 2 * g.num_heads * (qk + g.v_head_dim) * causal_pairs(l, cached)

    def decode_flops_per_pair(self, g):
        # absorbed form at decode (queries attend to the latent: score over latent + rope, value over
        # latent), as SGLang and vLLM run it
        return 2.0 * g.num_heads * (2 * g.kv_lora_rank + g.qk_rope_head_dim)

    def query_output_width(self, g):
        return g.qk_nope_head_dim + g.qk_rope_head_dim + g.v_head_dim


class _Recurrent(AttentionKind):
    """Shared rules of linear attention: a (heads x key dim x value dim) state per layer and request,
    split across chips by head; the core is counted in recurrent form (see `prfaas_plan.arithmetic`)."""

    cache = "recurrent"
    state_madds: ClassVar[int]  # state-sized multiply-adds per token and head, besides the decay

    def state_elements(self, g):
        heads, dk, dv = self.linear_dims(g)
        return heads * dk * dv

    def core_flops(self, g, l, cached=0):
        state = self.state_elements(g)
        # The short convolution is not part of the core: its weights are in `params`, so its
        # multiply-adds are counted with the projections.
        return l * (2 * self.state_madds * state + state)


class KDA(_Recurrent):
    """Kimi Delta Attention: delta rule with a channel-wise decay, short conv on q, k and v."""

    name = "kda"
    required = ("num_heads", "head_dim", "conv_kernel")
    state_madds = 3

    def linear_dims(self, g):
        return g.num_heads, g.head_dim, g.head_dim

    def conv_channels(self, g):
        return 3 * g.num_heads * g.head_dim

    def params(self, g, hidden):
        hd = g.num_heads * g.head_dim
        qkv_o = 4 * hidden * hd
        gates = 2 * (hidden * g.head_dim + g.head_dim * hd)  # low-rank forget gate and output gate
        beta = hidden * g.num_heads
        return qkv_o + gates + beta + self.conv_channels(g) * g.conv_kernel

    def chunk_intra_factor(self):
        return 2


class GatedDeltaNet(_Recurrent):
    """Gated DeltaNet (Qwen3-Next/3.5): delta rule with a scalar gate, separate key and value heads."""

    name = "gated_deltanet"
    required = ("num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim", "conv_kernel")
    state_madds = 3

    def check(self, g):
        if g.num_value_heads % g.num_key_heads:
            return f"num_value_heads {g.num_value_heads} is not a multiple of num_key_heads {g.num_key_heads}"
        return None

    def linear_dims(self, g):
        return g.num_value_heads, g.key_head_dim, g.value_head_dim

    def conv_channels(self, g):
        return 2 * g.num_key_heads * g.key_head_dim + g.num_value_heads * g.value_head_dim

    def params(self, g, hidden):
        qkvz = hidden * (2 * g.num_key_heads * g.key_head_dim + 2 * g.num_value_heads * g.value_head_dim)
        ba = hidden * 2 * g.num_value_heads
        o = g.num_value_heads * g.value_head_dim * hidden
        return qkvz + ba + o + self.conv_channels(g) * g.conv_kernel

    def chunk_intra_factor(self):
        return 2

    def summary_name(self):
        return "GDN"


class Lightning(_Recurrent):
    """Lightning attention (MiniMax): linear attention with a fixed decay, no short convolution."""

    name = "lightning"
    required = ("num_heads", "head_dim")
    state_madds = 2

    def linear_dims(self, g):
        return g.num_heads, g.head_dim, g.head_dim

    def params(self, g, hidden):
        return 5 * hidden * g.num_heads * g.head_dim  # q, k, v, output gate, o

    def chunk_intra_factor(self):
        return 1


class Mamba2(_Recurrent):
    """Mamba2 (SSD) mixer, as in Nemotron-H: a selective state-space layer with a scalar decay per head.

    Fields: ``num_heads`` heads of ``head_dim`` channels (the inner width is their product), a state of
    ``state_size`` per channel, and input/output projections B and C of ``state_size`` shared by the
    heads of each of ``num_groups`` groups; a short causal convolution of ``conv_kernel`` taps over x, B
    and C. Per token and head the recurrence is decayed linear attention (Lightning's form, with
    k = B, q = C, v = dt x and decay exp(dt A)): state ``state_size x head_dim``, 2 state-sized
    multiply-adds plus the decay. ``reference/mamba2.py`` is the numpy core it is checked against.
    """

    name = "mamba2"
    required = ("num_heads", "head_dim", "state_size", "num_groups", "conv_kernel")
    state_madds = 2

    def check(self, g):
        if g.num_heads % g.num_groups:
            return f"num_heads {g.num_heads} is not a multiple of num_groups {g.num_groups}"
        return None

    def linear_dims(self, g):
        return g.num_heads, g.state_size, g.head_dim

    def conv_channels(self, g):
        return g.num_heads * g.head_dim + 2 * g.num_groups * g.state_size  # x, B, C

    def params(self, g, hidden):
        inner = g.num_heads * g.head_dim
        in_proj = hidden * (2 * inner + 2 * g.num_groups * g.state_size + g.num_heads)  # z, x, B, C, dt
        out_proj = inner * hidden
        # per-head A_log, D and dt_bias, the gated norm and the conv bias are norms and biases: omitted
        return in_proj + out_proj + self.conv_channels(g) * g.conv_kernel

    def chunk_intra_factor(self):
        return 1  # SSD's intra-chunk term is plain masked attention, no delta-rule transform

    def linear_io_per_head(self, g):
        # x in and y out per head; B and C once per group, shared by its num_heads / num_groups heads
        return 2 * g.head_dim + 2 * g.num_groups * g.state_size / g.num_heads

    def summary_name(self):
        return "Mamba2"


KINDS: dict[str, AttentionKind] = {}


def register(kind: type[AttentionKind]) -> type[AttentionKind]:
    """Add an attention kind to the registry (profiles may then name it); returns the class."""
    KINDS[kind.name] = kind()
    return kind


for _kind in (GQA, MLA, SWA, KDA, GatedDeltaNet, Lightning, Mamba2):
    register(_kind)
