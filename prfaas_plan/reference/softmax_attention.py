"""Softmax attention shared by the GQA, MLA and SWA modules: one query row, and causal query tiles.

Shapes: queries are grouped as (..., kv_heads, group, head_dim) so that grouped-query attention needs no
copies of the KV heads; keys (tokens, kv_heads, key_dim), values (tokens, kv_heads, value_dim).

The tiled prefill computes exactly the causal query-key pairs (no masked work), in two parts merged by
their log-sum-exp, the way FlashAttention-style kernels combine a prefix part with a diagonal part:
each tile of queries attends to all keys before the tile in one product, and to the keys inside the
tile row by row. The decode path (`attend_one`) is one softmax over all keys. FLOPs: 2 per
multiply-add of the score and the weighted-sum products, counted under the tag given.
"""

from __future__ import annotations

import numpy as np

from .numerics import Flops, matmul


def _partial(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, fl: Flops | None, tag: str):
    """Unnormalised attention of queries q (kv, g, t, dk) over keys k (m, kv, dk), values v (m, kv, dv).

    Returns (row max, row sum of exp, exp-weighted values) shaped (kv, g, t), (kv, g, t), (kv, g, t, dv).
    """
    kt = k.transpose(1, 2, 0)[:, None]                 # (kv, 1, dk, m)
    s = matmul(q, kt, fl, tag) * scale                 # (kv, g, t, m)
    mx = s.max(axis=-1)
    p = np.exp(s - mx[..., None])
    o = matmul(p, v.transpose(1, 0, 2)[:, None], fl, tag)  # (kv, g, t, dv)
    return mx, p.sum(axis=-1), o


def _merge(a, b):
    """Combine two partial results over disjoint key sets (log-sum-exp merge)."""
    (ma, sa, oa), (mb, sb, ob) = a, b
    m = np.maximum(ma, mb)
    ea, eb = np.exp(ma - m), np.exp(mb - m)
    return m, sa * ea + sb * eb, oa * ea[..., None] + ob * eb[..., None]


def attend_one(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, fl: Flops | None,
               tag: str = "core") -> np.ndarray:
    """Decode: one query (kv, g, dk) over all keys k (m, kv, dk); returns (kv, g, dv)."""
    mx, s, o = _partial(q[:, :, None], k, v, scale, fl, tag)
    return (o / s[..., None])[:, :, 0]


def causal_tiled(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_start: int, tile: int, scale: float,
                 fl: Flops | None, tag: str = "core") -> np.ndarray:
    """Prefill: queries q (n, kv, g, dk) at positions q_start .. q_start+n-1 over keys k, v holding
    positions 0 .. q_start+n-1; query i sees keys 0..q_start+i. Returns (n, kv, g, dv)."""
    n = q.shape[0]
    out = np.empty(q.shape[:3] + (v.shape[-1],))
    qh = q.transpose(1, 2, 0, 3)                       # (kv, g, n, dk)
    for a in range(0, n, tile):
        b = min(n, a + tile)
        lo = q_start + a                               # first absolute position of the tile
        diag = []
        for r in range(a, b):                          # keys inside the tile, row by row
            diag.append(_partial(qh[:, :, r:r + 1], k[lo:q_start + r + 1], v[lo:q_start + r + 1],
                                 scale, fl, tag))
        part = tuple(np.concatenate(x, axis=2) for x in zip(*diag))
        if lo > 0:                                     # every key before the tile, one product
            part = _merge(_partial(qh[:, :, a:b], k[:lo], v[:lo], scale, fl, tag), part)
        _, s, o = part
        out[a:b] = (o / s[..., None]).transpose(2, 0, 1, 3)
    return out


def windowed_rows(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_start: int, k_start: int, window: int,
                  scale: float, fl: Flops | None, tag: str = "core") -> np.ndarray:
    """Sliding-window attention, row by row: query at position p sees keys max(0, p-window+1) .. p.

    q (n, kv, g, dk) at positions q_start.. ; k, v hold positions k_start .. q_start+n-1.
    Returns (n, kv, g, dv).
    """
    out = np.empty(q.shape[:3] + (v.shape[-1],))
    for i in range(q.shape[0]):
        p = q_start + i
        lo = max(0, p - window + 1) - k_start
        assert lo >= 0, "window cache lost a key the query needs"
        out[i] = attend_one(q[i], k[lo:p - k_start + 1], v[lo:p - k_start + 1], scale, fl, tag)
    return out
