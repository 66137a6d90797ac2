"""Mamba2 (SSD), the state-space mixer of Nemotron-H: decayed linear attention with a scalar decay per head.

Per token: ``x W_in`` gives the gate z (heads x head_dim), the stream xBC (x: heads x head_dim; B and C:
num_groups x state_size each) and dt (one per head). xBC passes through the short causal convolution
(heads head_dim + 2 num_groups state_size channels, conv state of conv_kernel - 1 positions) and SiLU;
``dt = softplus(dt + dt_bias)`` and the decay ``log a = dt A`` with ``A = -exp(A_log)`` per head. Head h
(of group g = h // (heads / num_groups)) keeps a state S (state_size x head_dim): ``S = a S + B_g (dt
x_h)^T``, ``y_h = S^T C_g + D_h x_h`` — the core of `prfaas_plan.reference.linear_core` with ``delta=False``,
k = B, q = C, v = dt x. Output: RMS norm per group of ``y * silu(z)``, then W_out.

Sources: the Mamba2 paper's SSD recurrence (Dao and Gu, 2024) as implemented in Hugging Face's
``modeling_nemotron_h.py`` (``NemotronHMamba2Mixer.torch_forward``). FLOPs: projections under ``proj``,
the convolution under ``conv``, the core under ``core``; the elementwise dt x and D x are not counted
(as no elementwise work is, see `prfaas_plan.arithmetic`).
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from . import linear_core
from .cache import RequestCache
from .conv import short_conv
from .gqa import weight
from .numerics import Flops, matmul, rms_norm, silu, softplus


class Mamba2:
    """One Mamba2 layer."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.heads, self.p, self.n, self.groups = g.num_heads, g.head_dim, g.state_size, g.num_groups
        self.inner = self.heads * self.p
        self.bc = self.groups * self.n
        self.w_in = weight(rng, hidden, 2 * self.inner + 2 * self.bc + self.heads)
        self.conv_w = rng.standard_normal((self.inner + 2 * self.bc, g.conv_kernel)) / np.sqrt(g.conv_kernel)
        self.wo = weight(rng, self.inner, hidden)
        self.a_log = np.log(rng.uniform(1.0, 4.0, self.heads))
        self.dt_bias = np.full(self.heads, -3.0)
        self.d_skip = rng.uniform(0.5, 1.5, self.heads)

    @property
    def params(self) -> int:
        return sum(w.size for w in (self.w_in, self.conv_w, self.wo))

    def prefill(self, x, start, cache: RequestCache, layer, fl: Flops | None, form="chunked", chunk=16, **_):
        n, h, p = len(x), self.heads, self.p
        st = cache.state_read(layer)
        zxbcdt = matmul(x, self.w_in, fl, "proj")
        z, xbc, dt = np.split(zxbcdt, [self.inner, 2 * self.inner + 2 * self.bc], axis=1)
        xbc, conv = short_conv(xbc, st["conv"], self.conv_w, fl)
        xs = xbc[:, :self.inner].reshape(n, h, p)
        per_group = h // self.groups
        b = np.repeat(xbc[:, self.inner:self.inner + self.bc].reshape(n, self.groups, self.n), per_group, axis=1)
        c = np.repeat(xbc[:, self.inner + self.bc:].reshape(n, self.groups, self.n), per_group, axis=1)
        dt = softplus(dt + self.dt_bias)                                     # (n, heads)
        log_decay = (-np.exp(self.a_log) * dt)[:, :, None]                   # (n, heads, 1)
        v = xs * dt[:, :, None]
        if form == "chunked":
            o, s = linear_core.chunked(c, b, v, None, log_decay, st["state"], chunk, fl, delta=False)
        else:
            o, s = linear_core.recurrent(c, b, v, None, log_decay, st["state"], fl, delta=False)
        cache.state_write(layer, {"state": s, "conv": conv})
        y = (o + self.d_skip[None, :, None] * xs).reshape(n, self.inner) * silu(z)
        y = rms_norm(y.reshape(n, self.groups, self.inner // self.groups)).reshape(n, self.inner)
        return matmul(y, self.wo, fl, "proj")

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        return self.prefill(x[None], pos, cache, layer, fl, form="recurrent")[0]
