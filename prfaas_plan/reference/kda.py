"""Kimi Delta Attention (KDA): gated delta rule with a channel-wise decay, plus a short convolution.

Per token: q, k, v = x W_q, x W_k, x W_v (heads x head_dim each), passed through the short causal
convolution (over the 3 x heads x head_dim q/k/v channels, conv state of conv_kernel - 1 positions) and
SiLU; q and k are L2-normalised per head, q scaled by head_dim^-1/2. ``beta = sigmoid(x W_beta)`` per
head; the decay per key channel is ``log a = -exp(A_log) softplus(x W_f_a W_f_b + dt_bias)`` (low-rank
forget gate). The core is the delta rule of `prfaas_plan.reference.linear_core` with a state of heads x
head_dim x head_dim. Output: per-head RMS norm gated by ``sigmoid(x W_g_a W_g_b)`` (low-rank), then W_o.

FLOPs: projections and gates under ``proj``, the convolution under ``conv``, the core under ``core``.
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from . import linear_core
from .cache import RequestCache
from .conv import short_conv
from .gqa import weight
from .numerics import Flops, l2_norm, matmul, rms_norm, sigmoid, softplus


class KDA:
    """One KDA layer."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.heads, self.d = g.num_heads, g.head_dim
        hd = self.heads * self.d
        self.wq, self.wk, self.wv = (weight(rng, hidden, hd) for _ in range(3))
        self.wf_a, self.wf_b = weight(rng, hidden, self.d), weight(rng, self.d, hd)
        self.wg_a, self.wg_b = weight(rng, hidden, self.d), weight(rng, self.d, hd)
        self.wbeta = weight(rng, hidden, self.heads)
        self.conv_w = rng.standard_normal((3 * hd, g.conv_kernel)) / np.sqrt(g.conv_kernel)
        self.wo = weight(rng, hd, hidden)
        self.a_log = np.log(rng.uniform(1.0, 4.0, self.heads))
        self.dt_bias = np.full(hd, -3.0)

    @property
    def params(self) -> int:
        return sum(w.size for w in (self.wq, self.wk, self.wv, self.wf_a, self.wf_b, self.wg_a, self.wg_b,
                                    self.wbeta, self.conv_w, self.wo))

    def prefill(self, x, start, cache: RequestCache, layer, fl: Flops | None, form="chunked", chunk=16, **_):
        n, h, d = len(x), self.heads, self.d
        st = cache.state_read(layer)
        qkv = np.concatenate([matmul(x, w, fl, "proj") for w in (self.wq, self.wk, self.wv)], axis=1)
        qkv, conv = short_conv(qkv, st["conv"], self.conv_w, fl)
        q, k, v = (a.reshape(n, h, d) for a in np.split(qkv, 3, axis=1))
        q, k = l2_norm(q) / np.sqrt(d), l2_norm(k)
        beta = sigmoid(matmul(x, self.wbeta, fl, "proj"))
        f = matmul(matmul(x, self.wf_a, fl, "proj"), self.wf_b, fl, "proj")
        log_decay = (-np.exp(self.a_log)[:, None] * softplus(f + self.dt_bias).reshape(n, h, d))
        if form == "chunked":
            o, s = linear_core.chunked(q, k, v, beta, log_decay, st["state"], chunk, fl)
        else:
            o, s = linear_core.recurrent(q, k, v, beta, log_decay, st["state"], fl)
        cache.state_write(layer, {"state": s, "conv": conv})
        gate = sigmoid(matmul(matmul(x, self.wg_a, fl, "proj"), self.wg_b, fl, "proj"))
        return matmul((rms_norm(o).reshape(n, h * d) * gate), self.wo, fl, "proj")

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        return self.prefill(x[None], pos, cache, layer, fl, form="recurrent")[0]
