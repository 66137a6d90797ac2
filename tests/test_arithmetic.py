"""Model arithmetic: KV bytes, fixed state, S_kv and parameters, pinned to public figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import arithmetic as A
from prfaas_plan.profiles import all_models, get_model

# Per-token KV bytes (bf16) of the growing layers, from the PrfaaS brief's architecture table.
KV_PER_TOKEN = {
    "minimax-m2.5": 253_952,
    "qwen3-235b": 192_512,
    "qwen3.5-397b": 30_720,
    "mimo-v2-flash": 23_040,
    "ring-2.5-1t": 11_520,
    "kimi-linear-48b": 8_064,
    "kimi-k2": 70_272,
}


@pytest.mark.parametrize("name,expected", sorted(KV_PER_TOKEN.items()))
def test_kv_bytes_per_token_matches_brief(name, expected):
    assert A.kv_bytes_per_token(get_model(name)) == expected


def test_fixed_state_bytes_from_layer_shapes():
    # Qwen3.5-397B: 45 GDN layers, 64 value heads x 128 x 128 fp32 state, conv over
    # 2*16*128 + 64*128 = 12,288 channels keeping 3 positions in bf16.
    q = get_model("qwen3.5-397b")
    assert A.recurrent_state_bytes(q) == 45 * 64 * 128 * 128 * 4
    assert A.conv_state_bytes(q) == 45 * 3 * 12_288 * 2
    # Kimi Linear: 20 KDA layers, 32 heads x 128 x 128 fp32, conv over q, k, v (3 x 4096 channels).
    k = get_model("kimi-linear")
    assert A.recurrent_state_bytes(k) == 20 * 32 * 128 * 128 * 4
    assert A.conv_state_bytes(k) == 20 * 3 * 3 * 4096 * 2
    # Ring: 70 Lightning layers, 64 heads x 128 x 128 in fp32 (SGLang's default), no conv.
    assert A.fixed_state_bytes(get_model("ring-2.5-1t")) == 70 * 64 * 128 * 128 * 4
    # Dense models have none.
    assert A.fixed_state_bytes(get_model("minimax-m2.5")) == 0


def test_swa_cache_is_capped_at_window():
    m = get_model("mimo-v2-flash")
    per = 39 * 8 * (192 + 128) * 2
    assert A.swa_bytes(m, 100) == 100 * per
    assert A.swa_bytes(m, 128) == 128 * per
    assert A.swa_bytes(m, 100_000) == 128 * per
    assert A.s_kv(m, 8192) == 8192 * 23_040 + 128 * per


def test_s_kv_vectorized_equals_scalar():
    m = get_model("qwen3.5-397b")
    lengths = np.array([1, 127, 128, 4096, 131_072])
    vec = A.s_kv(m, lengths)
    assert vec.dtype == np.int64
    assert list(vec) == [A.s_kv(m, int(l)) for l in lengths]


def test_tp_replication_matches_mooncake_measurement():
    # Mooncake measured 12.62 GB moved for a 32,768-token Qwen3-235B prefill on TP8 (4 KV heads).
    m = get_model("qwen3-235b")
    moved = A.s_kv(m, 32_768, tp=8)
    assert moved == 2 * A.s_kv(m, 32_768)
    assert moved / 1e9 == pytest.approx(12.62, rel=0.005)


def test_prfaas_1t_reconstruction_matches_measured_cache_sizes():
    m = get_model("prfaas-1t")
    table = m.measured_prefill[0]
    errors = [A.s_kv(m, l) / c - 1 for l, c in zip(table.lengths, table.cache_bytes)]
    print("prfaas-1t S_kv vs paper Table 5:", [f"{e:+.2%}" for e in errors])
    assert max(abs(e) for e in errors) < 0.01


@pytest.mark.parametrize("name", [n for n, m in sorted(all_models().items()) if m.published_params])
def test_parameter_counts_near_published(name):
    m = get_model(name)
    p = A.param_counts(m)
    total, active = m.published_params
    assert p.total == pytest.approx(total, rel=0.05)
    assert p.active == pytest.approx(active, rel=0.20)


def test_dense_equivalent_and_reduction():
    m = get_model("kimi-linear")
    # 27 layers of 576-element bf16 MLA latent.
    assert A.dense_equivalent_kv(m, 1000) == 1000 * 27 * 576 * 2


def test_prefill_flops_dominated_by_active_params_at_short_length():
    m = get_model("qwen3-235b")
    f = A.prefill_flops(m, 1024)
    p = A.param_counts(m)
    assert f.dense_matmul == 2 * 1024 * (p.active - p.embedding - p.lm_head)
    assert f.attention_core == 94 * 2 * 64 * 256 * (1024 * 1025 // 2)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(all_models())), l=st.integers(1, 1_000_000), d=st.integers(1, 100_000))
def test_kv_bytes_never_shrink_with_length(name, l, d):
    m = get_model(name)
    assert A.s_kv(m, l + d) >= A.s_kv(m, l)
    assert A.prefill_flops(m, l + d).total > A.prefill_flops(m, l).total


def test_weight_bytes_count_routed_experts_at_their_own_dtype():
    # W4A16 checkpoints quantize only the routed experts; the rest stays bf16.
    m = get_model("prfaas-1t")
    p = A.param_counts(m)
    assert (m.weight_dtype, m.expert_dtype) == ("bf16", "int4")
    assert A.weight_bytes(m) == int((p.total - p.moe_routed) * 2 + p.moe_routed * 0.5)
    # A single-dtype checkpoint counts everything alike.
    q = get_model("qwen3-235b")
    assert A.weight_bytes(q) == A.param_counts(q).total * 2


def test_imported_kimi_k3_keeps_unquantized_modules_in_bf16():
    import json
    from pathlib import Path

    from prfaas_plan.profiles import model_from_dict
    from prfaas_plan.profiles.hf_import import import_hf_config

    cfg = json.loads((Path(__file__).parents[1] / "prfaas_plan/data/hf_configs/moonshotai--Kimi-K3.config.json").read_text())
    m = model_from_dict(import_hf_config(cfg, "k3-imported"))
    assert (m.weight_dtype, m.expert_dtype) == ("bf16", "mxfp4")
    assert A.weight_bytes(m) == A.weight_bytes(get_model("kimi-k3"))
