"""Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention): delta rule with a scalar gate per head.

Per token: ``x W_qkvz`` gives q, k (num_key_heads x key_head_dim each), v and z (num_value_heads x
value_head_dim each); q, k, v pass through the short causal convolution (2 nk dk + nv dv channels, conv
state of conv_kernel - 1 positions) and SiLU; q and k are L2-normalised (q scaled by key_head_dim^-1/2)
and shared by the ``nv / nk`` value heads of their group. ``x W_ba`` gives per value head ``beta =
sigmoid(b)`` and the scalar decay ``log a = -exp(A_log) softplus(a + dt_bias)``. The core is the delta
rule of `prfaas_plan.reference.linear_core`, one state of key_head_dim x value_head_dim per value head.
Output: RMS norm gated by ``silu(z)``, then W_o.

FLOPs: projections under ``proj``, the convolution under ``conv``, the core under ``core``.
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from . import linear_core
from .cache import RequestCache
from .conv import short_conv
from .gqa import weight
from .numerics import Flops, l2_norm, matmul, rms_norm, sigmoid, silu, softplus


class GatedDeltaNet:
    """One Gated DeltaNet layer."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.nk, self.nv, self.dk, self.dv = g.num_key_heads, g.num_value_heads, g.key_head_dim, g.value_head_dim
        self.qk_ch, self.v_ch = self.nk * self.dk, self.nv * self.dv
        self.w_qkvz = weight(rng, hidden, 2 * self.qk_ch + 2 * self.v_ch)
        self.w_ba = weight(rng, hidden, 2 * self.nv)
        self.conv_w = rng.standard_normal((2 * self.qk_ch + self.v_ch, g.conv_kernel)) / np.sqrt(g.conv_kernel)
        self.wo = weight(rng, self.v_ch, hidden)
        self.a_log = np.log(rng.uniform(1.0, 4.0, self.nv))
        self.dt_bias = np.full(self.nv, -3.0)

    @property
    def params(self) -> int:
        return sum(w.size for w in (self.w_qkvz, self.w_ba, self.conv_w, self.wo))

    def prefill(self, x, start, cache: RequestCache, layer, fl: Flops | None, form="chunked", chunk=16, **_):
        n = len(x)
        st = cache.state_read(layer)
        qkvz = matmul(x, self.w_qkvz, fl, "proj")
        qkv, z = qkvz[:, :2 * self.qk_ch + self.v_ch], qkvz[:, 2 * self.qk_ch + self.v_ch:]
        qkv, conv = short_conv(qkv, st["conv"], self.conv_w, fl)
        group = self.nv // self.nk
        q = np.repeat(l2_norm(qkv[:, :self.qk_ch].reshape(n, self.nk, self.dk)), group, axis=1) / np.sqrt(self.dk)
        k = np.repeat(l2_norm(qkv[:, self.qk_ch:2 * self.qk_ch].reshape(n, self.nk, self.dk)), group, axis=1)
        v = qkv[:, 2 * self.qk_ch:].reshape(n, self.nv, self.dv)
        ba = matmul(x, self.w_ba, fl, "proj")
        beta = sigmoid(ba[:, :self.nv])
        log_decay = (-np.exp(self.a_log) * softplus(ba[:, self.nv:] + self.dt_bias))[:, :, None]
        if form == "chunked":
            o, s = linear_core.chunked(q, k, v, beta, log_decay, st["state"], chunk, fl)
        else:
            o, s = linear_core.recurrent(q, k, v, beta, log_decay, st["state"], fl)
        cache.state_write(layer, {"state": s, "conv": conv})
        return matmul(rms_norm(o).reshape(n, self.v_ch) * silu(z), self.wo, fl, "proj")

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        return self.prefill(x[None], pos, cache, layer, fl, form="recurrent")[0]
