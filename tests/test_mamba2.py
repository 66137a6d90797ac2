"""The Mamba2 (SSD) mixer as an attention kind: its state, conv and FLOP rules by hand, its numpy
reference core against an independent token-by-token SSD recurrence, the `validate` checks (bytes, FLOPs,
chunked = recurrent), cache bytes that never shrink with length (hypothesis), and the FFN facts
Nemotron-H needs (layers without an FFN, an ungated FFN) in arithmetic and the roofline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.performance.operators import Parallel, pass_work
from prfaas_plan.profiles import get_model, kinds, model_from_dict
from prfaas_plan.reference import TinyModel, validate_model
from prfaas_plan.reference.numerics import Flops, rms_norm, silu, softplus

MAMBA = {"kind": "mamba2", "num_heads": 8, "head_dim": 16, "state_size": 32, "num_groups": 2, "conv_kernel": 4}


def _profile(groups: list[dict], n: int = 4, ffn: dict | None = None, **top) -> dict:
    return {"name": "t", "num_layers": n, "hidden_size": 64, "vocab_size": 100, "max_context": 65_536,
            "attention": groups, "ffn": ffn or {"dense_intermediate": 128}, "sources": {"all": "assumed"}, **top}


def test_state_conv_and_flop_rules_by_hand():
    m = model_from_dict(_profile([dict(MAMBA, layers=[0, 1, 2]),
                                  {"kind": "gqa", "layers": [3], "num_heads": 4, "num_kv_heads": 2, "head_dim": 16}]))
    g, = m.groups("mamba2")
    assert g.rule is kinds.KINDS["mamba2"] and g.rule.cache == "recurrent"
    # state: heads x state_size x head_dim, fp32; conv: 3 positions x (heads head_dim + 2 groups state_size), bf16
    assert A.recurrent_state_bytes(m) == 3 * 8 * 32 * 16 * 4
    assert A.conv_state_bytes(m) == 3 * 3 * (8 * 16 + 2 * 2 * 32) * 2
    assert A.kv_bytes_per_token(m) == 1 * 2 * 2 * 16 * 2          # only the GQA layer grows
    # per token and head: decay (1) + rank-one update (2) + read-out (2) FLOPs per state element
    assert A.attention_core_flops(g, 100) == 100 * 5 * 8 * 32 * 16
    assert A.attention_core_flops(g, 100, cached=500) == A.attention_core_flops(g, 100)  # no length term
    # in_proj (z, x, B, C, dt) + out_proj + conv taps
    inner = 8 * 16
    assert A.attention_params(m, g) == 64 * (2 * inner + 2 * 2 * 32 + 8) + inner * 64 + (inner + 2 * 2 * 32) * 4
    assert m.attention_summary == "Mamba2 3 + GQA 1"


def test_schema_checks_the_kind_fields():
    with pytest.raises(PlanError, match="num_heads 8 is not a multiple of num_groups 3"):
        model_from_dict(_profile([dict(MAMBA, layers="rest", num_groups=3)]))
    with pytest.raises(PlanError, match="unknown key 'window' under attention\\[0\\]"):
        model_from_dict(_profile([dict(MAMBA, layers="rest", window=8)]))
    with pytest.raises(PlanError, match="state_size"):
        model_from_dict(_profile([{k: v for k, v in dict(MAMBA, layers="rest").items() if k != "state_size"}]))


def _naive_ssd(layer, x, fl_none=None):
    """Mamba2 written from the SSD recurrence directly (Dao and Gu 2024, eq. for the scalar-A case), one
    token and head at a time, independent of `linear_core`: h = exp(dt A) h + dt B x^T; y = h^T C + D x."""
    n = len(x)
    zxbcdt = x @ layer.w_in
    z, xbc, dt = np.split(zxbcdt, [layer.inner, 2 * layer.inner + 2 * layer.bc], axis=1)
    taps = layer.conv_w.shape[1]
    padded = np.concatenate([np.zeros((taps - 1, xbc.shape[1])), xbc])
    conv = np.stack([sum(layer.conv_w[:, j] * padded[t + j] for j in range(taps)) for t in range(n)])
    xbc = silu(conv)
    xs = xbc[:, :layer.inner].reshape(n, layer.heads, layer.p)
    b = xbc[:, layer.inner:layer.inner + layer.bc].reshape(n, layer.groups, layer.n)
    c = xbc[:, layer.inner + layer.bc:].reshape(n, layer.groups, layer.n)
    dt = softplus(dt + layer.dt_bias)
    a = -np.exp(layer.a_log)
    per_group = layer.heads // layer.groups
    h = np.zeros((layer.heads, layer.n, layer.p))
    y = np.zeros((n, layer.heads, layer.p))
    for t in range(n):
        for hd in range(layer.heads):
            gi = hd // per_group
            h[hd] = np.exp(dt[t, hd] * a[hd]) * h[hd] + dt[t, hd] * np.outer(b[t, gi], xs[t, hd])
            y[t, hd] = h[hd].T @ c[t, gi] + layer.d_skip[hd] * xs[t, hd]
    y = y.reshape(n, layer.inner) * silu(z)
    y = rms_norm(y.reshape(n, layer.groups, -1)).reshape(n, layer.inner)
    return y @ layer.wo, h


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
def test_reference_core_equals_the_ssd_recurrence(form):
    m = model_from_dict(_profile([dict(MAMBA, layers="rest")], n=1))
    tm = TinyModel(m, seed=3, chunk=16)
    layer = tm.attn[0]
    x = np.random.default_rng(0).standard_normal((50, m.hidden_size))
    cache = tm.new_cache(tm.new_pool(exact=True))
    out = layer.prefill(x, 0, cache, 0, Flops(), form=form, chunk=16)
    want, state = _naive_ssd(layer, x)
    assert np.abs(out - want).max() <= 1e-9 * np.abs(want).max()
    assert np.abs(cache.state_read(0)["state"] - state).max() <= 1e-9 * np.abs(state).max()


def test_validate_checks_pass_on_a_mamba2_hybrid():
    m = model_from_dict(_profile([dict(MAMBA, layers=[0, 1, 3, 4, 5]),
                                  {"kind": "gqa", "layers": [2, 6], "num_heads": 4, "num_kv_heads": 2, "head_dim": 16}],
                                 n=7, ffn={"dense_intermediate": 128, "no_ffn_layers": [1, 4], "gated": False}))
    v = validate_model(m)
    assert v.ok, [r for r in v.rows if r["result"] == "FAIL"]
    cases = {r["case"]: r for r in v.rows}
    assert any("chunked = recurrent prefill" in c for c in cases)
    assert v.scaled.attention_summary.startswith("Mamba2")
    state_rows = [r for r in v.rows if r["check"] == "bytes"]
    assert state_rows and all(r["result"] == "ok" for r in state_rows)


@settings(max_examples=60, deadline=None)
@given(heads=st.integers(1, 8), groups=st.sampled_from([1, 2, 4]), p=st.integers(1, 128), nstate=st.integers(1, 256),
       k=st.integers(1, 6), kv=st.integers(1, 8), window=st.integers(1, 70_000), n_mamba=st.integers(0, 5),
       n_gqa=st.integers(0, 3), n_swa=st.integers(0, 3), l1=st.integers(1, 60_000), dl=st.integers(0, 60_000))
def test_cache_bytes_never_shrink_with_length(heads, groups, p, nstate, k, kv, window, n_mamba, n_gqa, n_swa, l1, dl):
    """S_kv (growing KV + window KV + Mamba2 state and conv) is non-decreasing in the prompt length."""
    layers = iter(range(n_mamba + n_gqa + n_swa))
    groups_ = []
    if n_mamba:
        groups_.append(dict(MAMBA, num_heads=heads * groups, num_groups=groups, head_dim=p, state_size=nstate,
                            conv_kernel=k, layers=[next(layers) for _ in range(n_mamba)]))
    if n_gqa:
        groups_.append({"kind": "gqa", "layers": [next(layers) for _ in range(n_gqa)], "num_heads": 2 * kv,
                        "num_kv_heads": kv, "head_dim": 64})
    if n_swa:
        groups_.append({"kind": "swa", "layers": [next(layers) for _ in range(n_swa)], "num_heads": kv,
                        "num_kv_heads": kv, "head_dim": 64, "window": window})
    if not groups_:
        return
    m = model_from_dict(_profile(groups_, n=n_mamba + n_gqa + n_swa))
    lengths = np.array([l1, l1 + dl])
    small, large = A.s_kv(m, lengths)
    assert large >= small >= A.fixed_state_bytes(m)
    assert A.s_kv(m, l1) == small
    if n_gqa and dl:
        assert large > small


def test_ffn_free_layers_and_ungated_ffn_in_params_and_roofline():
    base = [dict(MAMBA, layers="rest")]
    gated = model_from_dict(_profile(base, ffn={"dense_intermediate": 128}))
    ungated = model_from_dict(_profile(base, ffn={"dense_intermediate": 128, "no_ffn_layers": [1], "gated": False}))
    assert ungated.dense_layers == (0, 2, 3) and ungated.ffn_matrices == 2
    assert A.param_counts(gated).dense_ffn == 4 * 3 * 64 * 128
    assert A.param_counts(ungated).dense_ffn == 3 * 2 * 64 * 128
    tp, tokens = 2, 1000.0
    ops = {w.name: w for w in pass_work(ungated, Parallel(tp), 1, tokens, 0, "prefill")}
    assert float(ops["dense_ffn"].flops) == pytest.approx(tokens * 3 * 2 * (2 * 64 * 128) / tp)
    # two all-reduces per layer with an FFN, one for a layer without
    assert float(ops["comm_tp"].link_calls) == 2 * 3 + 1
    assert "attn_linear" in ops and float(ops["attn_linear"].flops) > 0
    # the kernel reads x and writes y per head, but B and C once per group of heads
    g, = ungated.groups("mamba2")
    assert g.rule.linear_io_per_head(g) * g.num_heads == 2 * 8 * 16 + 2 * 2 * 32
    kda, = get_model("kimi-linear").groups("kda")
    assert kda.rule.linear_io_per_head(kda) == 4 * kda.head_dim  # the default: q, k, v, o of head_dim each
    total = sum(float(w.flops) for w in ops.values()) * tp
    assert total >= float(A.prefill_flops(ungated, int(tokens)).total)  # chunked form adds intra-chunk work


@pytest.mark.parametrize("ffn,needle", [
    ({"dense_intermediate": 128, "no_ffn_layers": [9]}, "ffn.no_ffn_layers: layer 9 outside 0..3"),
    ({"dense_intermediate": 128, "no_ffn_layers": [1, 1]}, "a layer is listed twice"),
    ({"moe": {"num_experts": 4, "top_k": 1, "expert_intermediate": 32}, "dense_layers": [1], "no_ffn_layers": [1],
      "dense_intermediate": 64}, "layer 1 is in both dense_layers and no_ffn_layers"),
    ({"no_ffn_layers": [0]}, "missing field 'dense_intermediate'"),
    ({"dense_intermediate": 128, "gated": "no"}, "ffn.gated"),
])
def test_bad_ffn_fields_are_one_line(ffn, needle):
    with pytest.raises(PlanError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        model_from_dict(_profile([dict(MAMBA, layers="rest")], ffn=ffn))


def test_a_model_of_mixers_only_needs_no_ffn_width():
    m = model_from_dict(_profile([dict(MAMBA, layers="rest")], ffn={"no_ffn_layers": [0, 1, 2, 3]}))
    assert m.dense_layers == () and A.param_counts(m).dense_ffn == 0
