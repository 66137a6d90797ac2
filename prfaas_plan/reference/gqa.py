"""Grouped-query full causal attention over a paged KV cache (GQA), and its projections.

Per token: ``q`` (heads, head_dim), ``k`` (kv_heads, head_dim), ``v`` (kv_heads, v_head_dim), RoPE on q
and k; query head h reads KV head ``h // (heads / kv_heads)``. An optional output gate (Qwen3.5's gated
attention) multiplies the attention output by ``sigmoid(x W_gate)`` before the output projection.

Prefill writes the new tokens' K and V into the request's blocks and attends in causal tiles (prefix
product plus diagonal rows, merged by log-sum-exp); decode attends one query over every cached token.
FLOPs: projections under ``proj``, scores and weighted sums under ``core``.
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from .cache import RequestCache
from .numerics import Flops, matmul, rope, sigmoid
from .softmax_attention import attend_one, causal_tiled


def weight(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """A random projection (fan_in, fan_out) scaled to keep activations of order one."""
    return rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)


class GQA:
    """One GQA layer (also the projection half of `prfaas_plan.reference.swa.SWA`)."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.kv, self.group = g.num_kv_heads, g.num_heads // g.num_kv_heads
        self.dk, self.dv = g.head_dim, g.v_head_dim
        self.wq = weight(rng, hidden, g.num_heads * self.dk)
        self.wk = weight(rng, hidden, self.kv * self.dk)
        self.wv = weight(rng, hidden, self.kv * self.dv)
        self.wgate = weight(rng, hidden, g.num_heads * self.dv) if g.output_gate else None
        self.wo = weight(rng, g.num_heads * self.dv, hidden)
        self.scale = 1.0 / np.sqrt(self.dk)

    @property
    def params(self) -> int:
        """Weight elements of the layer."""
        return sum(w.size for w in (self.wq, self.wk, self.wv, self.wgate, self.wo) if w is not None)

    def project(self, x: np.ndarray, start: int, fl: Flops | None):
        """q (n, kv, group, dk), k (n, kv, dk), v (n, kv, dv) of tokens x (n, hidden) at positions start.."""
        n = len(x)
        pos = np.arange(start, start + n)
        q = rope(matmul(x, self.wq, fl, "proj").reshape(n, self.kv * self.group, self.dk), pos)
        k = rope(matmul(x, self.wk, fl, "proj").reshape(n, self.kv, self.dk), pos)
        v = matmul(x, self.wv, fl, "proj").reshape(n, self.kv, self.dv)
        return q.reshape(n, self.kv, self.group, self.dk), k, v

    def output(self, x: np.ndarray, attn: np.ndarray, fl: Flops | None) -> np.ndarray:
        """Output projection of attn (n, kv, group, dv) back to (n, hidden), gated if the layer is."""
        o = attn.reshape(len(x), -1)
        if self.wgate is not None:
            o = o * sigmoid(matmul(x, self.wgate, fl, "proj"))
        return matmul(o, self.wo, fl, "proj")

    def prefill(self, x, start, cache: RequestCache, layer, fl, tile=16, **_):
        q, k, v = self.project(x, start, fl)
        cache.kv_write(layer, start, {"k": k, "v": v})
        kv = cache.kv_read(layer, start + len(x))
        return self.output(x, causal_tiled(q, kv["k"], kv["v"], start, tile, self.scale, fl), fl)

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        q, k, v = self.project(x[None], pos, fl)
        cache.kv_write(layer, pos, {"k": k, "v": v})
        kv = cache.kv_read(layer, pos + 1)
        return self.output(x[None], attend_one(q[0], kv["k"], kv["v"], self.scale, fl)[None], fl)[0]
