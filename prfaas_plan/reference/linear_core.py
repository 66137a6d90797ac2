"""The recurrent core shared by the linear-attention kinds, in recurrent and in chunked form.

Per head, a state S (key_dim, value_dim) evolves token by token, with ``a_t = exp(log_decay_t)`` a decay
per key channel (KDA), or one per head broadcast over the channels (Gated DeltaNet, Lightning):

- delta rule (KDA, Gated DeltaNet): ``S' = diag(a_t) S``; ``u_t = beta_t (v_t - S'^T k_t)``;
  ``S = S' + k_t u_t^T``; output ``o_t = S^T q_t``;
- decayed linear attention (Lightning): ``S = diag(a_t) S + k_t v_t^T``; ``o_t = S^T q_t``.

`recurrent` runs that loop (the decode path, and the form the analytical FLOP count uses: per token and
head a decay of every state element, 1 FLOP each, plus 3 state-sized multiply-adds for the delta rule —
read-out of k, rank-one update, read-out of q — or 2 for Lightning).

`chunked` is the prefill form of the real kernels: within a chunk of C tokens, with G_j the cumulative
log-decay from the chunk start, the state at token j is ``diag(exp G_j) S_0 + sum_{i<=j}
diag(exp(G_j - G_i)) k_i u_i^T``. For the delta rule the chunk's ``u`` solve the unit lower-triangular
system ``(I + diag(beta) A) U = diag(beta) (V - (K * exp G) S_0)`` with ``A_ji = sum_d k_j k_i exp(G_j -
G_i)`` (i < j), by forward substitution; for Lightning ``U = V``. Pairwise decays are formed as
``exp(G_j - G_i)`` (never ``exp(-G_i)``), so no intermediate overflows. The chunked form does the same
state arithmetic regrouped: it saves all but one decay per chunk and adds intra-chunk products of
order C (key_dim + value_dim) per token and head — `chunk_bound` states the bound checked.

Shapes: q, k (n, heads, dk); v (n, heads, dv); beta (n, heads); log_decay (n, heads, dk) or
(n, heads, 1); state (heads, dk, dv). FLOPs under the tag ``core``.
"""

from __future__ import annotations

import numpy as np

from .numerics import Flops, decay, matmul


def recurrent(q, k, v, beta, log_decay, state, fl: Flops | None, delta: bool = True):
    """Token-by-token recurrence; returns outputs (n, heads, dv) and the final state."""
    out = np.empty(v.shape)
    s = state
    for t in range(len(q)):
        s = decay(s, np.exp(log_decay[t])[:, :, None], fl, "core")
        if delta:
            ks = matmul(k[t][:, None, :], s, fl, "core")[:, 0]           # (heads, dv)
            u = beta[t][:, None] * (v[t] - ks)
        else:
            u = v[t]
        s = s + matmul(k[t][:, :, None], u[:, None, :], fl, "core")    # rank-one update
        out[t] = matmul(q[t][:, None, :], s, fl, "core")[:, 0]
    return out, s


def _pair_decay(g: np.ndarray, diagonal: bool) -> np.ndarray:
    """exp(G_j - G_i) for i < j (i <= j if ``diagonal``), else 0: shape (heads, c, c, d)."""
    c = g.shape[1]
    keep = np.tril(np.ones((c, c), bool), 0 if diagonal else -1)[None, :, :, None]
    diff = g[:, :, None, :] - g[:, None, :, :]
    return np.where(keep, np.exp(np.where(keep, diff, 0.0)), 0.0)


def _pair_products(a, b, d, fl: Flops | None):
    """M[h, j, i] = sum_x a[h, j, x] b[h, i, x] d[h, j, i, x], counted as a (c x c x dk) product."""
    d = np.broadcast_to(d, d.shape[:3] + (a.shape[-1],))
    if fl is not None:
        fl.add("core", 2 * d.size)
    return np.einsum("hjx,hix,hjix->hji", a, b, d)


def chunked(q, k, v, beta, log_decay, state, chunk: int, fl: Flops | None, delta: bool = True):
    """Chunked prefill form; same results as `recurrent` to float64 round-off."""
    out = np.empty(v.shape)
    s = state
    for a in range(0, len(q), chunk):
        b = min(len(q), a + chunk)
        qc, kc, vc = (x[a:b].transpose(1, 0, 2) for x in (q, k, v))       # (heads, c, d)
        g = np.cumsum(log_decay[a:b], axis=0).transpose(1, 0, 2)         # (heads, c, d or 1)
        eg = np.exp(g)
        if delta:
            bc = beta[a:b].T[:, :, None]                                 # (heads, c, 1)
            amat = _pair_products(kc, kc, _pair_decay(g, False), fl)
            rhs = bc * (vc - matmul(kc * eg, s, fl, "core"))
            u = np.empty_like(rhs)
            for j in range(b - a):                                       # forward substitution
                u[:, j] = rhs[:, j] - bc[:, j] * matmul(amat[:, j:j + 1, :j], u[:, :j], fl, "core")[:, 0]
        else:
            u = vc
        inter = matmul(qc * eg, s, fl, "core")
        intra = matmul(_pair_products(qc, kc, _pair_decay(g, True), fl), u, fl, "core")
        out[a:b] = (inter + intra).transpose(1, 0, 2)
        g_last = g[:, -1:, :]
        s = decay(s, np.exp(g_last[:, 0])[:, :, None], fl, "core") + matmul(
            (kc * np.exp(g_last - g)).transpose(0, 2, 1), u, fl, "core")
    return out, s


def chunk_bound(n: int, heads: int, dk: int, dv: int, chunk: int) -> tuple[int, int]:
    """(lower, upper) offset in FLOPs of the chunked form's count from the recurrent form's, for n tokens.

    Chunked minus recurrent, per chunk of c tokens and head: the recurrent form decays the state c
    times, the chunked once (saves (c - 1) dk dv); it adds the pair products A and Q K^T
    (2 c^2 dk multiply-adds, the diagonal included), the intra-chunk sum (c^2 dv), the substitution
    (c (c - 1) / 2 dv) and one extra state-sized product for (K * exp G) S_0 against the delta rule's
    read-out of k. Bound: lower = -n heads dk dv, upper = n heads (4 C dk + 3 C dv).
    """
    return -n * heads * dk * dv, n * heads * (4 * chunk * dk + 3 * chunk * dv)
