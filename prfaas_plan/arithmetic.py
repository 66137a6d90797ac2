"""Model arithmetic: parameters, KV/state bytes and FLOPs of a `ModelProfile`, exact where possible.

Conventions
-----------
- Byte counts are logical bytes (what one copy of the cache holds) unless ``tp`` replication is asked
  for. They are Python ints for scalar inputs and int64 numpy arrays for array inputs.
- ``l`` is the uncached prompt length in tokens; functions of length accept a scalar or any array.
- FLOPs count a multiply-add as 2 FLOPs. Prefill computes logits for the last token only.
- Linear-attention cores (KDA, Gated DeltaNet, Lightning) are counted in their recurrent form, per
  token and head: delta-rule kinds do 3 state-sized multiply-adds (read-out of k, rank-1 update, read-out
  of q) plus the decay (1 multiply per state element); Lightning does 2 plus the decay. Chunked kernels
  do the same arithmetic regrouped plus an intra-chunk term; `prfaas_plan.reference` checks the bound.
  The short convolution of KDA / Gated DeltaNet (conv_kernel multiply-adds per channel and token) is
  counted once, with the projections, through its weights in `attention_params`.

Sources of the formulas: the architectures' public modelling code (GQA/MLA/KDA/Gated DeltaNet/Lightning
as in their Hugging Face implementations); cache layouts as in SGLang/vLLM (conv state keeps
``conv_kernel - 1`` positions; MLA caches the latent and the rope key only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .profiles import AttentionGroup, ModelProfile, dtype_bytes


def _as_len(l):
    """Scalar ints stay ints (exact); arrays become int64."""
    if np.isscalar(l):
        return int(l)
    return np.asarray(l, dtype=np.int64)


def _capped(l, cap: int):
    """``min(l, cap)``, keeping a Python int a Python int."""
    return min(l, cap) if isinstance(l, int) else np.minimum(l, cap)


def _bytes(model: ModelProfile, which: str) -> float:
    return dtype_bytes({"kv": model.kv_dtype, "state": model.state_dtype, "conv": model.conv_dtype,
                        "weights": model.weight_dtype}[which], model.name)


# ----------------------------------------------------------------------------------------------------
# Per-layer cache shapes (elements)


def kv_elements_per_token(g: AttentionGroup) -> int:
    """Cached elements per token per layer for growing/window kinds (K and V, or MLA latent + rope)."""
    return g.rule.kv_elements_per_token(g)


def recurrent_state_elements(g: AttentionGroup) -> int:
    """Elements of the recurrent state matrix of one layer (heads x key dim x value dim)."""
    return g.rule.state_elements(g)


def conv_channels(g: AttentionGroup) -> int:
    """Channels of the short causal convolution (q, k and v streams) of one layer; 0 if none."""
    return g.rule.conv_channels(g)


def conv_state_elements(g: AttentionGroup) -> int:
    """Elements of the convolution state of one layer: the last ``conv_kernel - 1`` inputs."""
    if conv_channels(g) == 0 or g.conv_kernel <= 1:
        return 0
    return (g.conv_kernel - 1) * conv_channels(g)


# ----------------------------------------------------------------------------------------------------
# KV and state bytes


def kv_bytes_per_token(model: ModelProfile) -> int:
    """Bytes per prompt token of the growing (full-attention) layers, all layers summed."""
    b = _bytes(model, "kv")
    return int(sum(g.count * kv_elements_per_token(g) * b for g in model.cached_as("growing")))


def swa_bytes_per_token(model: ModelProfile) -> int:
    """Bytes per token of the sliding-window layers (capped at each layer's window)."""
    b = _bytes(model, "kv")
    return int(sum(g.count * kv_elements_per_token(g) * b for g in model.cached_as("window")))


def recurrent_state_bytes(model: ModelProfile) -> int:
    """Bytes of the recurrent state matrices of all linear-attention layers, per request."""
    b = _bytes(model, "state")
    return int(sum(g.count * recurrent_state_elements(g) * b for g in model.cached_as("recurrent")))


def conv_state_bytes(model: ModelProfile) -> int:
    """Bytes of the short-convolution states of all linear-attention layers, per request."""
    b = _bytes(model, "conv")
    return int(sum(g.count * conv_state_elements(g) * b for g in model.cached_as("recurrent")))


def fixed_state_bytes(model: ModelProfile) -> int:
    """Fixed per-request bytes that do not depend on length: recurrent + conv states."""
    return recurrent_state_bytes(model) + conv_state_bytes(model)


def swa_bytes(model: ModelProfile, l):
    """Bytes of the sliding-window caches for ``l`` tokens (each layer capped at its window)."""
    l = _as_len(l)
    b = _bytes(model, "kv")
    total = 0 if np.isscalar(l) else np.zeros_like(l)
    for g in model.cached_as("window"):
        total = total + _capped(l, g.window) * int(g.count * kv_elements_per_token(g) * b)
    return total if np.isscalar(l) else np.asarray(total, dtype=np.int64)


def _replication(model: ModelProfile, g: AttentionGroup, tp: int) -> int:
    """How many copies of a layer's cache a tensor-parallel group of ``tp`` ranks holds in total
    (the kind's rule: GQA/SWA replicate heads beyond their KV heads, MLA copies the latent to every
    rank, recurrent states split by head)."""
    return 1 if tp <= 1 else g.rule.replication(g, tp)


@dataclass(frozen=True)
class KVParts:
    """`S_kv` split into its parts, bytes (ints or int64 arrays like the length given)."""

    growing: object
    window: object
    recurrent: object
    conv: object

    @property
    def total(self):
        return self.growing + self.window + self.recurrent + self.conv


def s_kv_parts(model: ModelProfile, l, cached=0, tp: int = 1) -> KVParts:
    """What must reach decode for an uncached length ``l`` given ``cached`` prefix tokens already there.

    ``l`` counts the new (uncached) tokens; the decode side already holds ``cached`` tokens of prefix KV.
    Growing KV: only the ``l`` new tokens cross. Window KV: the last ``min(window, l)`` new tokens
    (older window entries are part of the cached prefix). Recurrent and conv states: always whole
    (the state at the end of the prompt is new). ``tp > 1`` gives the bytes a tensor-parallel transfer
    moves when heads are replicated across ranks (see `_replication`); ``tp = 1`` is logical bytes.
    """
    l = _as_len(l)
    del cached  # the cached prefix changes nothing that crosses; kept for the signature's clarity
    kvb = _bytes(model, "kv")
    growing = sum(g.count * kv_elements_per_token(g) * kvb * _replication(model, g, tp)
                  for g in model.cached_as("growing"))
    growing = l * int(growing)
    window = 0 if np.isscalar(l) else np.zeros_like(l)
    for g in model.cached_as("window"):
        per = int(g.count * kv_elements_per_token(g) * kvb * _replication(model, g, tp))
        window = window + _capped(l, g.window) * per
    zero = 0 if np.isscalar(l) else np.zeros_like(l)
    recurrent = zero + recurrent_state_bytes(model)
    conv = zero + conv_state_bytes(model)
    return KVParts(growing, window, recurrent, conv)


def s_kv(model: ModelProfile, l, cached=0, tp: int = 1):
    """Bytes that must reach decode for uncached length ``l`` (see `s_kv_parts`)."""
    return s_kv_parts(model, l, cached, tp).total


def s_kv_at(model: ModelProfile, l, tp: int = 1) -> np.ndarray:
    """`s_kv` at real-valued lengths (grid points, conditional means): rounded to whole tokens, at least
    one; float64 bytes, for vectorized planning arithmetic. ``tp`` as in `s_kv_parts`."""
    whole = np.maximum(np.rint(np.asarray(l, dtype=float)), 1).astype(np.int64)
    return np.asarray(s_kv(model, whole, tp=tp), dtype=float)


def dense_equivalent_kv(model: ModelProfile, l):
    """Bytes a dense model of the same depth would cache for ``l`` tokens: every layer as the model's
    own full-attention kind (its first growing group's shape). Used for the KV reduction factor."""
    l = _as_len(l)
    full = model.cached_as("growing") or model.cached_as("window")
    if not full:
        return 0 * l
    per_layer = kv_elements_per_token(full[0]) * _bytes(model, "kv")
    return l * int(model.num_layers * per_layer)


# ----------------------------------------------------------------------------------------------------
# Parameters


def attention_params(model: ModelProfile, g: AttentionGroup) -> int:
    """Weight elements of one layer's attention block (projections; norms and biases omitted)."""
    return g.rule.params(g, model.hidden_size)


@dataclass(frozen=True)
class ParamCounts:
    """Weight element counts. ``active`` is per token (routed top-k plus shared experts)."""

    embedding: int
    lm_head: int
    attention: int
    dense_ffn: int
    moe_routed: int
    moe_shared: int
    router: int
    active_routed: int

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.dense_ffn + self.moe_routed
                + self.moe_shared + self.router)

    @property
    def active(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.dense_ffn + self.active_routed
                + self.moe_shared + self.router)


def param_counts(model: ModelProfile) -> ParamCounts:
    """Parameters of the model by part (element counts)."""
    h = model.hidden_size
    embedding = model.vocab_size * h
    lm_head = 0 if model.tie_word_embeddings else model.vocab_size * h
    attention = sum(g.count * attention_params(model, g) for g in model.attention)
    dense_ffn = len(model.dense_layers) * model.ffn_matrices * h * model.dense_intermediate
    routed = shared = router = active_routed = 0
    if model.moe is not None:
        n = len(model.moe_layers)
        m = model.moe
        width = m.latent_dim or h
        latent_proj = 2 * h * m.latent_dim if m.latent_dim else 0  # down and up, always active
        routed = n * m.num_experts * 3 * width * m.expert_intermediate
        active_routed = n * m.top_k * 3 * width * m.expert_intermediate
        shared = n * (m.shared_experts * 3 * h * m.shared_intermediate + latent_proj)
        router = n * h * m.num_experts
    return ParamCounts(embedding, lm_head, attention, dense_ffn, routed, shared, router, active_routed)


def weight_bytes(model: ModelProfile) -> int:
    """Bytes of all weights (one full copy): routed experts at the expert dtype, the rest at the weight
    dtype."""
    p = param_counts(model)
    experts = p.moe_routed * dtype_bytes(model.expert_dtype, model.name)
    return int((p.total - p.moe_routed) * _bytes(model, "weights") + experts)


def weight_bytes_per_instance(model: ModelProfile, chips: int) -> float:
    """Weight bytes each chip of a ``chips``-way sharded instance holds (even split)."""
    return weight_bytes(model) / chips


# ----------------------------------------------------------------------------------------------------
# FLOPs


def attention_core_flops(g: AttentionGroup, l, cached=0):
    """FLOPs of one layer's attention core (score, softmax-weighted sum, or state recurrence) for ``l``
    new tokens after ``cached`` ones; projections are not included."""
    return g.rule.core_flops(g, l, cached)


@dataclass(frozen=True)
class PrefillFlops:
    """Prefill FLOPs by part (same shape as the length given)."""

    dense_matmul: object     # projections, dense FFN, shared experts, router, routed experts (active)
    attention_core: object   # quadratic / windowed / recurrent attention cores
    lm_head: object          # last-token logits

    @property
    def total(self):
        return self.dense_matmul + self.attention_core + self.lm_head


def prefill_flops(model: ModelProfile, l, cached=0) -> PrefillFlops:
    """FLOPs of prefilling ``l`` new tokens after ``cached`` ones (one request)."""
    l = _as_len(l)
    p = param_counts(model)
    per_token_matmul = p.attention + p.dense_ffn + p.active_routed + p.moe_shared + p.router
    dense = 2 * per_token_matmul * l
    core = sum(g.count * attention_core_flops(g, l, cached) for g in model.attention)
    lm_head = 2 * model.hidden_size * model.vocab_size * (l > 0 if np.isscalar(l) else (np.asarray(l) > 0))
    return PrefillFlops(dense, core, lm_head * 1)
