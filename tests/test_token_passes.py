"""Issue 20 round 7: the per-token memory-bound passes the GEMM rooflines do not hold (the fused MoE's token
permutation, activation and combine; the FFNs' activation), counted from the model's shape."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.performance.operators import ACT_BYTES, TOKEN_PASSES, Parallel, pass_work
from prfaas_plan.profiles import get_model


def _work(model, par, tokens, name):
    works = pass_work(model, par, 1.0, np.asarray(tokens, dtype=float), 0.0, "prefill")
    return next((w for w in works if w.name == name), None)


def test_moe_dispatch_bytes_from_the_config():
    """DeepSeek-V3 under TP8: per token and MoE layer, every chip gathers and scatters all top-k copies of
    the hidden state (2 h read+written, h read by the combine), applies the activation to its slice of each
    copy's expert width (3 I / tp) and writes the token's sum (h)."""
    if not all(TOKEN_PASSES[k] for k in ("moe_permute", "moe_activation", "moe_combine")):
        pytest.skip("the MoE passes are switched off")
    m = get_model("deepseek-v3")
    moe, h = m.moe, m.hidden_size
    per_token = len(m.moe_layers) * ACT_BYTES * (moe.top_k * (3 * h + 3 * moe.expert_intermediate / 8) + h)
    w = _work(m, Parallel(8), 1024.0, "moe_dispatch")
    assert w.flops == 0 and not np.any(w.link_bytes)
    assert float(w.hbm_bytes) == pytest.approx(1024 * per_token)


def test_moe_dispatch_scales_with_tokens_and_falls_under_ep():
    """Linear in tokens; expert parallelism spreads the copies over the chips, so each processes fewer."""
    m = get_model("qwen3.5-397b")
    tp = _work(m, Parallel(8, "tp"), np.array([1024.0, 8192.0]), "moe_dispatch").hbm_bytes
    ep = _work(m, Parallel(8, "ep"), np.array([1024.0, 8192.0]), "moe_dispatch").hbm_bytes
    assert tp[1] == pytest.approx(8 * tp[0])
    assert np.all(ep < tp / 4)


def test_dense_model_has_no_dispatch():
    m = get_model("qwen3-8b")
    assert _work(m, Parallel(1), 1024.0, "moe_dispatch") is None
