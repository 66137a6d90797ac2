"""Issue 20 round 8: MLA's down-projections (hidden -> query latent, hidden -> KV latent + rope key) run whole on
every tensor-parallel chip, as SGLang, vLLM and TensorRT-LLM run them; the rest of attention stays split by head."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.performance.decode import attention_weight_bytes, decode_memory
from prfaas_plan.performance.operators import (
    MLA_REPLICATED,
    Parallel,
    pass_work,
    replicated_attention_params,
    replicated_attention_weight_bytes,
)
from prfaas_plan.profiles import dtype_bytes, get_model

pytestmark = pytest.mark.skipif(not (MLA_REPLICATED["flops"] and MLA_REPLICATED["weight_reads"]),
                                reason="the replicated accounting is switched off")


def _proj(model, par, tokens, phase="prefill"):
    requests, new = (1.0, tokens) if phase == "prefill" else (tokens, 1.0)
    works = pass_work(model, par, requests, new, 0.0 if phase == "prefill" else 1024.0, phase)
    return next(w for w in works if w.name == "attn_proj")


def test_down_projection_params_from_the_config():
    """DeepSeek-V3: 7168 x (1536 + 512 + 64) per layer; a model without a query latent keeps the KV one only;
    kinds with heads to split replicate nothing."""
    m = get_model("deepseek-v3")
    g = next(g for g in m.attention if g.kind == "mla")
    assert replicated_attention_params(g, m.hidden_size) == m.hidden_size * (g.q_lora_rank + g.kv_lora_rank
                                                                             + g.qk_rope_head_dim)
    no_q = dataclasses.replace(g, q_lora_rank=0)
    assert replicated_attention_params(no_q, m.hidden_size) == m.hidden_size * (g.kv_lora_rank + g.qk_rope_head_dim)
    for name in ("qwen3-8b",):
        other = get_model(name)
        assert all(replicated_attention_params(x, other.hidden_size) == 0 for x in other.attention)


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-linear-48b"])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_flops_and_weight_reads_per_chip(name, phase):
    """Under TP8 each chip runs (params - replicated) / 8 + replicated per token and reads as many weights per
    pass; one chip (or DP attention, each rank whole) is the full layer either way."""
    m = get_model(name)
    wb = dtype_bytes(m.weight_dtype, m.name)
    h = m.hidden_size
    params = sum(g.count * A.attention_params(m, g) for g in m.attention)
    rep = sum(g.count * replicated_attention_params(g, h) for g in m.attention)
    assert rep > 0
    chip = (params - rep) / 8 + rep
    tokens = 512.0
    tp8 = _proj(m, Parallel(8), tokens, phase)
    assert float(tp8.flops) == pytest.approx(2.0 * chip * tokens)
    one = _proj(m, Parallel(8), 0.0, phase) if phase == "prefill" else None
    if one is not None:
        assert float(one.hbm_bytes) == pytest.approx(chip * wb)  # no tokens: the weights alone
    whole = _proj(m, Parallel(1), tokens, phase)
    assert float(whole.flops) == pytest.approx(2.0 * params * tokens)
    dp = _proj(m, Parallel(8, dp_attention=True), tokens * 8, phase)
    assert float(dp.flops) == pytest.approx(float(whole.flops))  # each rank: 1/8 of the tokens, all weights


def test_hbm_fit_holds_a_copy_per_chip():
    """TP attention: an even split of the weights plus (1 - 1/tp) of the down-projections per chip; DP attention
    already holds every attention weight whole, the down-projections among them."""
    m = get_model("deepseek-v3")
    tp = decode_memory(m, "8xH200", 4096.0)
    assert tp.weight_bytes == pytest.approx(A.weight_bytes(m) / 8 + replicated_attention_weight_bytes(m) * 7 / 8)
    dp = decode_memory(m, "8xH200", 4096.0, dp_attention=True)
    assert dp.weight_bytes == pytest.approx(A.weight_bytes(m) / 8 + attention_weight_bytes(m) * 7 / 8)
    assert decode_memory(m, "1xH200", 4096.0).weight_bytes == pytest.approx(A.weight_bytes(m))
    assert np.isfinite(tp.weight_bytes)
