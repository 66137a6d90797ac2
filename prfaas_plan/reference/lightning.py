"""Lightning attention (MiniMax-01 / Ring linear layers): decayed linear attention, no convolution.

Per token: q, k, v = silu(x W_q), silu(x W_k), silu(x W_v) (heads x head_dim each); head h decays its
state (head_dim x head_dim) by the fixed ``a_h = exp(-slope_h)`` per token (ALiBi-like slopes
``2^(-8 (h + 1) / heads)``); ``S = a_h S + k v^T``, ``o = S^T q``
(`prfaas_plan.reference.linear_core` with ``delta=False``). Output: RMS norm gated by
``sigmoid(x W_gate)``, then W_o. The state is the only cache (no conv state).

FLOPs: projections under ``proj``, the core under ``core``.
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from . import linear_core
from .cache import RequestCache
from .gqa import weight
from .numerics import Flops, matmul, rms_norm, sigmoid, silu


class Lightning:
    """One Lightning attention layer."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.heads, self.d = g.num_heads, g.head_dim
        hd = self.heads * self.d
        self.wq, self.wk, self.wv, self.wgate = (weight(rng, hidden, hd) for _ in range(4))
        self.wo = weight(rng, hd, hidden)
        self.slope = 2.0 ** (-8.0 * (np.arange(self.heads) + 1) / self.heads)

    @property
    def params(self) -> int:
        return sum(w.size for w in (self.wq, self.wk, self.wv, self.wgate, self.wo))

    def prefill(self, x, start, cache: RequestCache, layer, fl: Flops | None, form="chunked", chunk=16, **_):
        n, h, d = len(x), self.heads, self.d
        q, k, v = (silu(matmul(x, w, fl, "proj")).reshape(n, h, d) for w in (self.wq, self.wk, self.wv))
        log_decay = np.broadcast_to(-self.slope[None, :, None], (n, h, 1))
        state = cache.state_read(layer)["state"]
        core = linear_core.chunked if form == "chunked" else linear_core.recurrent
        args = (chunk,) if form == "chunked" else ()
        o, s = core(q, k, v, None, log_decay, state, *args, fl, delta=False)
        cache.state_write(layer, {"state": s})
        return matmul(rms_norm(o).reshape(n, h * d) * sigmoid(matmul(x, self.wgate, fl, "proj")), self.wo, fl, "proj")

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        return self.prefill(x[None], pos, cache, layer, fl, form="recurrent")[0]
