"""Multi-head latent attention (MLA, DeepSeek-V2/V3 style) caching only the latent and the rope key.

Per token: ``c_kv = norm(x W_kv_a[:, :r])`` (kv_lora_rank r) and one rope key shared by all heads
``k_rope = rope(x W_kv_a[:, r:])`` (qk_rope_head_dim dr) are cached: r + dr elements per token per layer.
Queries: ``q = x W_q`` or, with ``q_lora_rank``, ``norm(x W_q_a) W_q_b``; each head has a nope part
(qk_nope_head_dim dn) and a rope part (dr). ``W_kv_b`` (r, heads, dn + dv) decompresses the latent into
per-head ``k_nope`` and ``v``.

- Prefill (naive form, as the analytical count): decompress every cached latent into per-head keys
  (dn + dr) and values (dv), then causal tiles as in GQA with one KV head per query head.
  Decompressing the latents of an already-cached prefix is counted under ``context_decompress``.
- Decode (absorbed form): fold W_kv_b's key half into the query (``q_lat = W_uk q_nope``, r per head),
  score against the cached latents and rope keys directly, take the weighted sum of latents and
  expand it with W_kv_b's value half: the latents are never decompressed.

FLOPs: projections under ``proj`` (decompressing the new tokens' latents included, as in the
parameter count), scores and weighted sums under ``core``, the absorption products of decode under
``absorb``.
"""

from __future__ import annotations

import numpy as np

from ..profiles import AttentionGroup
from .cache import RequestCache
from .gqa import weight
from .numerics import matmul, rms_norm, rope, sigmoid
from .softmax_attention import attend_one, causal_tiled


class MLA:
    """One MLA layer."""

    def __init__(self, g: AttentionGroup, hidden: int, rng: np.random.Generator):
        self.g = g
        self.h, self.r, self.dr = g.num_heads, g.kv_lora_rank, g.qk_rope_head_dim
        self.dn, self.dv = g.qk_nope_head_dim, g.v_head_dim
        qk = self.dn + self.dr
        if g.q_lora_rank:
            self.wq_a, self.wq_b = weight(rng, hidden, g.q_lora_rank), weight(rng, g.q_lora_rank, self.h * qk)
            self.wq = None
        else:
            self.wq_a = self.wq_b = None
            self.wq = weight(rng, hidden, self.h * qk)
        self.wkv_a = weight(rng, hidden, self.r + self.dr)
        self.wkv_b = weight(rng, self.r, self.h * (self.dn + self.dv))
        self.wgate = weight(rng, hidden, self.h * self.dv) if g.output_gate else None
        self.wo = weight(rng, self.h * self.dv, hidden)
        self.scale = 1.0 / np.sqrt(qk)
        wb = self.wkv_b.reshape(self.r, self.h, self.dn + self.dv)
        self.w_uk = wb[:, :, :self.dn].transpose(1, 0, 2)   # (heads, r, dn)
        self.w_uv = wb[:, :, self.dn:].transpose(1, 0, 2)   # (heads, r, dv)

    @property
    def params(self) -> int:
        return sum(w.size for w in (self.wq, self.wq_a, self.wq_b, self.wkv_a, self.wkv_b, self.wgate, self.wo)
                   if w is not None)

    def _queries(self, x, pos, fl):
        if self.wq is not None:
            q = matmul(x, self.wq, fl, "proj")
        else:
            q = matmul(rms_norm(matmul(x, self.wq_a, fl, "proj")), self.wq_b, fl, "proj")
        q = q.reshape(len(x), self.h, self.dn + self.dr)
        return q[..., :self.dn], rope(q[..., self.dn:], pos)

    def _latents(self, x, pos, fl):
        ckv = matmul(x, self.wkv_a, fl, "proj")
        return rms_norm(ckv[:, :self.r]), rope(ckv[:, self.r:], pos)

    def _output(self, x, attn, fl):
        o = attn.reshape(len(x), self.h * self.dv)
        if self.wgate is not None:
            o = o * sigmoid(matmul(x, self.wgate, fl, "proj"))
        return matmul(o, self.wo, fl, "proj")

    def prefill(self, x, start, cache: RequestCache, layer, fl, tile=16, **_):
        n = len(x)
        pos = np.arange(start, start + n)
        q_nope, q_rope = self._queries(x, pos, fl)
        c_kv, k_rope = self._latents(x, pos, fl)
        cache.kv_write(layer, start, {"c_kv": c_kv, "k_rope": k_rope})
        lat = cache.kv_read(layer, start + n)
        t = start + n
        # decompress: the new tokens' latents are projections; the cached prefix's are extra work
        kv_new = matmul(lat["c_kv"][start:], self.wkv_b, fl, "proj")
        kv_old = matmul(lat["c_kv"][:start], self.wkv_b, fl, "context_decompress")
        kv = np.concatenate([kv_old, kv_new]).reshape(t, self.h, self.dn + self.dv)
        keys = np.concatenate([kv[..., :self.dn], np.broadcast_to(lat["k_rope"][:, None], (t, self.h, self.dr))], -1)
        q = np.concatenate([q_nope, q_rope], -1)[:, :, None]       # (n, heads, 1, dn + dr)
        attn = causal_tiled(q, keys, kv[..., self.dn:], start, tile, self.scale, fl)
        return self._output(x, attn, fl)

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        p = np.array([pos])
        q_nope, q_rope = self._queries(x[None], p, fl)
        c_kv, k_rope = self._latents(x[None], p, fl)
        cache.kv_write(layer, pos, {"c_kv": c_kv, "k_rope": k_rope})
        lat = cache.kv_read(layer, pos + 1)
        q_lat = matmul(q_nope[0][:, None], self.w_uk.transpose(0, 2, 1), fl, "absorb")[:, 0]  # (heads, r)
        # score = q_lat . c_kv + q_rope . k_rope: one key of r + dr elements shared by all heads
        q = np.concatenate([q_lat, q_rope[0]], -1)[None]             # (1 kv group, heads, r + dr)
        keys = np.concatenate([lat["c_kv"], lat["k_rope"]], -1)[:, None]
        ctx = attend_one(q, keys, lat["c_kv"][:, None], self.scale, fl)[0]   # (heads, r)
        attn = matmul(ctx[:, None], self.w_uv, fl, "absorb")[:, 0]           # (heads, dv)
        return self._output(x[None], attn[None], fl)[0]
