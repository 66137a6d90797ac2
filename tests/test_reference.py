"""The numpy reference implementation on its own: codecs, each attention kind's two paths, caches,
serialization and prefix reuse. Everything is seeded and tiny."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import AttentionGroup, all_models, get_model
from prfaas_plan.reference import linear_core
from prfaas_plan.reference.cache import (
    BlockPool,
    Codecs,
    Layout,
    RequestCache,
    layout_of,
)
from prfaas_plan.reference.conv import short_conv
from prfaas_plan.reference.mla import MLA
from prfaas_plan.reference.model import TinyModel, pattern_layers, scale_profile
from prfaas_plan.reference.numerics import Flops, codec
from prfaas_plan.reference.prefix import PrefixCache
from prfaas_plan.reference.transfer import data_bytes, deserialize, serialize


def rng(seed=0):
    return np.random.default_rng(seed)


# -- codecs ------------------------------------------------------------------------------------------


def test_bf16_codec_is_real_bfloat16():
    c = codec("bf16")
    x = np.array([1.0, -2.5, 3.140625, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1e30, 0.0])
    stored = c.encode(x)
    assert stored.dtype == np.uint16 and stored.nbytes == 2 * len(x)
    back = c.decode(stored)
    # 8 significant bits: 1 + 2^-8 rounds to even (1.0), 1 + 3 * 2^-8 rounds up to 1 + 2^-6
    assert list(back[:5]) == [1.0, -2.5, 3.140625, 1.0, 1 + 2 ** -6]
    assert back[5] == pytest.approx(1e30, rel=2 ** -8) and back[6] == 0.0
    assert np.array_equal(c.encode(back), stored)           # storing a stored value is lossless


def test_fp8_codec_rounds_to_e4m3_and_saturates():
    c = codec("fp8")
    back = c.decode(c.encode(np.array([0.0, 1.0, -1.1, 448.0, 1000.0, 2 ** -9])))
    assert list(back) == [0.0, 1.0, -1.125, 448.0, 448.0, 2 ** -9]


def test_unsupported_cache_dtype_is_a_plan_error():
    with pytest.raises(PlanError, match="int4"):
        codec("int4", "some-model")


# -- attention kinds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("delta,channelwise", [(True, True), (True, False), (False, False)])
def test_linear_core_chunked_equals_recurrent(delta, channelwise):
    r = rng(1)
    n, h, dk, dv = 45, 2, 5, 3                              # 45: chunks of 16, 16 and 13
    q, k = r.standard_normal((n, h, dk)), r.standard_normal((n, h, dk)) / 3
    v = r.standard_normal((n, h, dv))
    beta = 1 / (1 + np.exp(-r.standard_normal((n, h))))
    log_decay = -r.uniform(0.01, 1.5, (n, h, dk if channelwise else 1))
    s0 = r.standard_normal((h, dk, dv))
    fr, fc = Flops(), Flops()
    o1, s1 = linear_core.recurrent(q, k, v, beta, log_decay, s0, fr, delta=delta)
    o2, s2 = linear_core.chunked(q, k, v, beta, log_decay, s0, 16, fc, delta=delta)
    assert np.allclose(o1, o2, rtol=0, atol=1e-12) and np.allclose(s1, s2, rtol=0, atol=1e-12)
    # recurrent form: decay + 3 (delta) or 2 (Lightning) state-sized multiply-adds per token and head
    assert fr["core"] == n * h * dk * dv * (7 if delta else 5)
    lo, hi = linear_core.chunk_bound(n, h, dk, dv, 16)
    assert fr["core"] + lo <= fc["core"] <= fr["core"] + hi


def test_short_conv_state_continues_exactly():
    r = rng(2)
    x, w = r.standard_normal((10, 6)), r.standard_normal((6, 4))
    y_all, st_all = short_conv(x, np.zeros((3, 6)), w, None)
    y1, st = short_conv(x[:7], np.zeros((3, 6)), w, None)
    y2, st2 = short_conv(x[7:], st, w, None)
    assert np.allclose(np.concatenate([y1, y2]), y_all) and np.array_equal(st2, st_all)
    assert np.array_equal(st_all, x[-3:])                   # the state is the last K - 1 inputs


def test_mla_absorbed_decode_equals_naive_prefill():
    g = AttentionGroup("mla", (0,), num_heads=3, kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6,
                       v_head_dim=5, q_lora_rank=10)
    prof = scale_profile(get_model("kimi-k2"))
    layer = MLA(g, 16, rng(3))
    lay = Layout({0: {"c_kv": (12,), "k_rope": (4,)}}, {}, {})
    codecs = Codecs.of(prof, exact=True)
    x = rng(4).standard_normal((20, 16))
    a = RequestCache(lay, BlockPool(lay, 8, codecs.kv), codecs)
    b = RequestCache(lay, BlockPool(lay, 8, codecs.kv), codecs)
    naive = layer.prefill(x, 0, a, 0, None)
    absorbed = np.array([layer.decode(x[i], i, b, 0, None) for i in range(20)])
    assert np.allclose(naive, absorbed, rtol=0, atol=1e-12)


# -- scaled models ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(all_models()))
def test_scaled_profile_keeps_kinds_pattern_and_dtypes(name):
    m = get_model(name)
    s = scale_profile(m)
    kind_of = {i: g.kind for g in m.attention for i in g.layers}
    assert {i: g.kind for g in s.attention for i in g.layers} == {i: kind_of[i] for i in range(s.num_layers)}
    assert {g.kind for g in s.attention} == {g.kind for g in m.attention}
    assert (s.kv_dtype, s.state_dtype, s.conv_dtype) == (m.kv_dtype, m.state_dtype, m.conv_dtype)
    for g in s.groups("swa"):
        assert g.window == m.groups("swa")[0].window
    assert A.s_kv(s, 100) > 0                               # the analytical functions run on it


def test_pattern_layers_of_the_hybrids():
    assert pattern_layers(get_model("kimi-linear")) == 8    # KDA KDA KDA MLA x 2
    assert pattern_layers(get_model("mimo-v2-flash")) == 6  # GQA SWA x4 GQA
    assert pattern_layers(get_model("ring-2.5-1t")) == 16   # Lightning x7 MLA x 2
    assert pattern_layers(get_model("qwen3-235b")) == 2


def test_layout_matches_cache_shapes_of_the_kinds():
    lay = layout_of(scale_profile(get_model("qwen3.5-397b")))
    assert lay.growing[3] == {"k": (1, 16), "v": (1, 16)}
    assert lay.recurrent[0] == {"state": (2, 8, 8), "conv": (3, 2 * 8 + 2 * 8)}


# -- caches, transfer, prefix ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mimo():
    return TinyModel(scale_profile(get_model("mimo-v2-flash")), seed=5)


def test_window_cache_is_capped(mimo):
    cache = mimo.new_cache(mimo.new_pool())
    mimo.prefill(rng(6).integers(0, 64, 140), cache)
    assert all(len(w["k"]) == 128 for w in cache.windows.values())
    mimo.decode([1, 2], cache)
    assert all(len(w["k"]) == 128 for w in cache.windows.values()) and cache.length == 142


def test_payload_roundtrip_is_lossless_and_sized_like_s_kv(mimo):
    toks = rng(7).integers(0, 64, 133)
    a = mimo.new_cache(mimo.new_pool())
    mimo.prefill(toks, a)
    blob = serialize(a)
    assert data_bytes(blob)["total"] == A.s_kv(mimo.profile, 133)
    b = deserialize(blob, mimo.layout, mimo.new_pool(), a.codecs)
    assert b.length == 133 and serialize(b) == blob


def test_prefix_match_is_block_aligned_and_leaves_a_token(mimo):
    toks = rng(8).integers(0, 64, 64)
    dense = TinyModel(scale_profile(get_model("qwen3-235b")), seed=5)
    hits = {}
    for name, tm in (("hybrid", mimo), ("dense", dense)):
        pool = tm.new_pool()
        pc = PrefixCache(tm.layout, pool, tm.new_cache(pool).codecs)
        c = tm.new_cache(pool)
        tm.prefill(toks[:48], c)
        pc.insert(toks[:48], c)                             # 3 blocks, checkpoint at exactly 48
        other = toks.copy()
        other[20] += 1                                      # diverges inside block 2
        hits[name] = [(m.length, m.kv_blocks) for m in (pc.match(toks[:48]), pc.match(toks), pc.match(other))]
    # a 48-token prompt must prefill at least one token: KV blocks reach 32, but the SWA window has no
    # checkpoint at 32, so the hybrid reuses nothing while the dense model reuses 2 blocks
    assert hits["hybrid"] == [(0, 2), (48, 3), (0, 1)]
    assert hits["dense"] == [(32, 2), (48, 3), (16, 1)]


def test_blocks_shared_by_a_prefix_are_reference_counted(mimo):
    toks = rng(9).integers(0, 64, 40)
    pool = mimo.new_pool()
    pc = PrefixCache(mimo.layout, pool, mimo.new_cache(pool).codecs)
    c = mimo.new_cache(pool)
    mimo.prefill(toks[:32], c)
    pc.insert(toks[:32], c)
    hit = pc.match(toks).cache
    assert hit.block_table == c.block_table and all(pool.refs[b] == 3 for b in c.block_table)
    mimo.prefill(toks[32:], hit)                            # writes a new block, never a shared one
    assert len(hit.block_table) == 3 and pool.refs[hit.block_table[-1]] == 1
    held = list(c.block_table)
    c.release()
    hit.release()
    assert all(pool.refs[b] == 1 for b in held)               # only the prefix cache holds them now
    assert len(pool.blocks) == len(held)
