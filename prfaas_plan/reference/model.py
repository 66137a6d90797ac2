"""A tiny hybrid stack built from any `ModelProfile`: the attention kinds and layer pattern kept,
dimensions scaled down, so that every cache and FLOP of a prefill can be checked against
`prfaas_plan.arithmetic` evaluated on the scaled profile.

Scaling (`scale_profile`): head dimensions, latent ranks and the hidden size are divided by fixed
factors; KV heads are halved (at least 1, at most 4) and query heads become KV heads x min(group, 2);
latent-attention and linear-attention head counts are divided by 16 (1 to 4; Mamba2: at most 2 groups
of at most 2 heads); the sliding window and the
conv kernel are kept; the first layers are kept up to the point where every attention kind has occurred
twice (``layers="pattern"``: Kimi Linear's 3:1 KDA:MLA gives 8 layers, MiMo's SWA/GQA pattern 6, Ring's
7:1 Lightning:MLA 16) or all of them (``layers="all"``). The FFN is a small dense SwiGLU MLP on every layer
(it holds no cache); dtypes are the profile's own (weights, KV, state, conv: with no routed experts, the
expert dtype has nothing to apply to). The result goes through `model_from_dict`, so it is a
valid profile.

`TinyModel` holds random weights (seeded) and runs requests: ``prefill`` appends tokens to a
`RequestCache` (block-paged KV, request-level states), ``decode`` generates one position at a time on the
decode paths. Hidden states are float64 (tokens, hidden); logits (vocab,) for the last prompt token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..profiles import AttentionGroup, ModelProfile, model_from_dict
from .cache import BlockPool, Codecs, Layout, RequestCache, layout_of
from .gdn import GatedDeltaNet
from .gqa import GQA, weight
from .kda import KDA
from .lightning import Lightning
from .mamba2 import Mamba2
from .mla import MLA
from .numerics import Flops, matmul, rms_norm, silu
from .swa import SWA

KINDS = {"gqa": GQA, "swa": SWA, "mla": MLA, "kda": KDA, "gated_deltanet": GatedDeltaNet, "lightning": Lightning,
         "mamba2": Mamba2}

DIM_DIVISOR = 16       # head dims, ranks: 128 -> 8, 192 -> 12, 512 -> 32
HIDDEN_DIVISOR = 128   # hidden size: 4096 -> 32
TINY_VOCAB = 64


def _div(x: int, by: int = DIM_DIVISOR, even: bool = False) -> int:
    if x == 0:
        return 0
    v = max(2, x // by)
    return v + (v % 2) if even else v


def _heads(x: int) -> int:
    return min(4, max(1, x // 16))


def _scaled_group(g: AttentionGroup, layers: list[int]) -> dict:
    d: dict = {"kind": g.kind, "layers": layers}
    if g.kind in ("gqa", "swa"):
        kv = min(4, max(1, g.num_kv_heads // 2))
        d.update(num_kv_heads=kv, num_heads=kv * min(2, g.num_heads // g.num_kv_heads),
                 head_dim=_div(g.head_dim, even=True), v_head_dim=_div(g.v_head_dim), output_gate=g.output_gate)
        if g.kind == "swa":
            d["window"] = g.window
    elif g.kind == "mla":
        d.update(num_heads=_heads(g.num_heads), kv_lora_rank=_div(g.kv_lora_rank),
                 qk_rope_head_dim=_div(g.qk_rope_head_dim, even=True), qk_nope_head_dim=_div(g.qk_nope_head_dim),
                 v_head_dim=_div(g.v_head_dim), q_lora_rank=_div(g.q_lora_rank), output_gate=g.output_gate)
    elif g.kind == "kda":
        d.update(num_heads=_heads(g.num_heads), head_dim=_div(g.head_dim), conv_kernel=g.conv_kernel)
    elif g.kind == "gated_deltanet":
        nk = _heads(g.num_key_heads)
        d.update(num_key_heads=nk, num_value_heads=nk * min(2, g.num_value_heads // g.num_key_heads),
                 key_head_dim=_div(g.key_head_dim), value_head_dim=_div(g.value_head_dim), conv_kernel=g.conv_kernel)
    elif g.kind == "lightning":
        d.update(num_heads=_heads(g.num_heads), head_dim=_div(g.head_dim))
    elif g.kind == "mamba2":
        groups = min(2, g.num_groups)
        d.update(num_groups=groups, num_heads=groups * min(2, g.num_heads // g.num_groups),
                 head_dim=_div(g.head_dim), state_size=_div(g.state_size), conv_kernel=g.conv_kernel)
    return d


def pattern_layers(model: ModelProfile) -> int:
    """Smallest layer count n >= 2 whose first n layers hold every attention kind at least twice
    (or as often as the model has it)."""
    kind_of = {i: g.kind for g in model.attention for i in g.layers}
    need = {g.kind: 0 for g in model.attention}
    for g in model.attention:
        need[g.kind] += g.count
    need = {k: min(2, v) for k, v in need.items()}
    seen = {k: 0 for k in need}
    for n in range(1, model.num_layers + 1):
        seen[kind_of[n - 1]] += 1
        if n >= 2 and all(seen[k] >= need[k] for k in need):
            return n
    return model.num_layers


def scale_profile(model: ModelProfile, layers: str = "pattern") -> ModelProfile:
    """The tiny version of ``model`` (see the module docstring); ``layers`` is "pattern" or "all"."""
    n = pattern_layers(model) if layers == "pattern" else model.num_layers
    hidden = max(16, model.hidden_size // HIDDEN_DIVISOR)
    attention = []
    for g in model.attention:
        kept = [i for i in g.layers if i < n]
        if kept:
            attention.append(_scaled_group(g, kept))
    data = {
        "kind": "model", "name": f"{model.name}-tiny", "display_name": f"{model.display_name} (scaled)",
        "num_layers": n, "hidden_size": hidden, "vocab_size": TINY_VOCAB, "max_context": model.max_context,
        "attention": attention, "ffn": {"dense_intermediate": 2 * hidden},
        "dtypes": {"weights": model.weight_dtype, "kv_cache": model.kv_dtype, "state": model.state_dtype,
                   "conv_state": model.conv_dtype},
        "tie_word_embeddings": model.tie_word_embeddings,
        "sources": {"architecture": f"scaled down from {model.name} by prfaas_plan.reference.scale_profile "
                                    f"(validation only)"},
    }
    return model_from_dict(data, f"<scaled {model.name}>")


@dataclass
class PrefillResult:
    """Final-norm hidden states of the new tokens (tokens, hidden) and last-token logits (vocab,)."""

    hidden: np.ndarray
    logits: np.ndarray


class TinyModel:
    """Random-weight hybrid stack of a (scaled) profile; ``block_size`` tokens per KV block, ``chunk``
    tokens per query tile and per linear-attention chunk in prefill."""

    def __init__(self, profile: ModelProfile, seed: int = 0, block_size: int = 16, chunk: int = 16):
        self.profile = profile
        self.layout: Layout = layout_of(profile)
        self.block_size, self.chunk = block_size, chunk
        rng = np.random.default_rng(seed)
        h, inter = profile.hidden_size, profile.dense_intermediate
        self.embed = rng.standard_normal((profile.vocab_size, h))
        kind_of = {i: g for g in profile.attention for i in g.layers}
        self.attn = [KINDS[kind_of[i].kind](kind_of[i], h, rng) for i in range(profile.num_layers)]
        self.mlp = [(weight(rng, h, inter), weight(rng, h, inter), weight(rng, inter, h))
                    for _ in range(profile.num_layers)]
        self.lm_head = self.embed.T if profile.tie_word_embeddings else weight(rng, h, profile.vocab_size)

    def attention_params(self, group: AttentionGroup) -> int:
        """Weight elements of one layer of the group, counted on the arrays."""
        return self.attn[group.layers[0]].params

    @property
    def ffn_params(self) -> int:
        return sum(w.size for ws in self.mlp for w in ws)

    def new_pool(self, exact: bool = False) -> BlockPool:
        """A block pool for one site (KV stored at the profile dtype, or float64 if ``exact``)."""
        return BlockPool(self.layout, self.block_size, Codecs.of(self.profile, exact).kv)

    def new_cache(self, pool: BlockPool) -> RequestCache:
        """An empty request cache on ``pool`` (request-level tensors at the same precision)."""
        exact = pool.codec.name == "fp64"
        return RequestCache(self.layout, pool, Codecs.of(self.profile, exact))

    def _mlp(self, i: int, x: np.ndarray, fl: Flops | None) -> np.ndarray:
        wg, wu, wd = self.mlp[i]
        return matmul(silu(matmul(x, wg, fl, "ffn")) * matmul(x, wu, fl, "ffn"), wd, fl, "ffn")

    def prefill(self, tokens, cache: RequestCache, fl: Flops | None = None, form: str = "chunked") -> PrefillResult:
        """Append ``tokens`` to the request at positions cache.length..; ``form`` "chunked" or
        "recurrent" selects the linear-attention prefill form."""
        tokens = np.asarray(tokens)
        start = cache.length
        x = self.embed[tokens]
        for i, attn in enumerate(self.attn):
            x = x + attn.prefill(rms_norm(x), start, cache, i, fl, form=form, tile=self.chunk, chunk=self.chunk)
            x = x + self._mlp(i, rms_norm(x), fl)
        cache.length = start + len(tokens)
        hidden = rms_norm(x)
        return PrefillResult(hidden, matmul(hidden[-1], self.lm_head, fl, "lm_head"))

    def decode(self, tokens, cache: RequestCache, fl: Flops | None = None) -> PrefillResult:
        """Feed ``tokens`` one at a time through the decode paths (teacher-forced); hidden states of each
        and the logits after the last."""
        hidden = []
        for t in np.asarray(tokens):
            pos = cache.length
            x = self.embed[t]
            for i, attn in enumerate(self.attn):
                x = x + attn.decode(rms_norm(x), pos, cache, i, fl)
                x = x + self._mlp(i, rms_norm(x[None]), fl)[0]
            cache.length = pos + 1
            hidden.append(rms_norm(x))
        hidden = np.array(hidden)
        return PrefillResult(hidden, matmul(hidden[-1], self.lm_head, fl, "lm_head"))
