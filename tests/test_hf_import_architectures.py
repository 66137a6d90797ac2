"""`model import` for the architectures people serve: every model_type imports from its published
config.json, KV bytes per token match the textbook formula, parameter counts match the published
counts, sliding windows land on the layers each architecture puts them on, and what is not supported
costs one line naming what is missing.

Published parameter counts (independent of this code): the model cards and checkpoint sizes named at
each row of `PUBLISHED`. The profile convention omits norms and biases (`prfaas_plan.arithmetic`), which
is what the tolerances allow for; where the exact checkpoint count is known the test states the
difference to the element.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import get_model, model_from_dict
from prfaas_plan.profiles.hf_import import SUPPORTED_MODEL_TYPES, import_hf_config, read_hf_config

CONFIGS = Path(__file__).parents[1] / "prfaas_plan" / "data" / "hf_configs"


def _config(stem: str) -> dict:
    return read_hf_config(CONFIGS / f"{stem}.config.json")


def _model(stem: str, config: dict | None = None):
    path = CONFIGS / f"{stem}.config.json"
    return model_from_dict(import_hf_config(config or read_hf_config(path), source=str(path)), str(path))


# stem: (model_type, attention summary, full-attention layers x KV heads x head_dim, published total,
#        published active, relative tolerance, where the published figures come from)
PUBLISHED = {
    "meta-llama--Llama-3.1-8B": ("llama", "GQA 32", (32, 8, 128), 8.03e9, 8.03e9, 1e-3,
                                 "HF model page: 8.03B (checkpoint 8,030,261,248)"),
    "Qwen--Qwen3-8B": ("qwen3", "GQA 36", (36, 8, 128), 8.2e9, 8.2e9, 0.01, "Qwen3-8B model card: 8.2B"),
    "Qwen--Qwen2.5-72B": ("qwen2", "GQA 80", (80, 8, 128), 72.7e9, 72.7e9, 1e-3, "Qwen2.5-72B model card: 72.7B"),
    "mistralai--Mistral-7B-v0.1": ("mistral", "SWA 32", (0, 8, 128), 7.24e9, 7.24e9, 1e-3,
                                   "checkpoint 7,241,732,096 (Mistral 7B paper: 7.3B)"),
    "google--gemma-2-9b": ("gemma2", "GQA 21 + SWA 21", (21, 8, 256), 9.24e9, 9.24e9, 1e-3,
                           "HF model page: 9.24B (checkpoint 9,241,705,984)"),
    "google--gemma-3-1b-pt": ("gemma3_text", "GQA 4 + SWA 22", (4, 1, 256), 1.0e9, 1.0e9, 1e-3,
                              "Gemma 3 report: 1B (checkpoint 999,885,952)"),
    "mistralai--Mixtral-8x7B-v0.1": ("mixtral", "GQA 32", (32, 8, 128), 46.7e9, 12.9e9, 3e-3,
                                     "Mistral AI, 'Mixtral of experts': 46.7B total, 12.9B per token"),
    "Qwen--Qwen1.5-MoE-A2.7B": ("qwen2_moe", "GQA 24", (24, 16, 128), 14.3e9, 2.7e9, 0.01,
                                "Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated"),
    "nvidia--Nemotron-H-8B-Base-8K": ("nemotron_h", "Mamba2 24 + GQA 4", (4, 8, 128), 8.1e9, 8.1e9, 1e-3,
                                      "HF model page: 8.1B (checkpoint 8,100,852,736)"),
}


@pytest.mark.parametrize("stem", sorted(PUBLISHED), ids=lambda s: s.split("--")[-1])
def test_imports_with_textbook_kv_bytes_and_published_parameter_counts(stem):
    model_type, summary, (layers, kv_heads, head_dim), total, active, rel, _ = PUBLISHED[stem]
    config = _config(stem)
    assert config["model_type"] == model_type and model_type in SUPPORTED_MODEL_TYPES
    m = _model(stem)
    assert m.attention_summary == summary
    # K and V, bf16, on the full-attention layers only (sliding layers are capped, Mamba2 has none).
    assert A.kv_bytes_per_token(m) == layers * 2 * kv_heads * head_dim * 2
    p = A.param_counts(m)
    assert p.total == pytest.approx(total, rel=rel)
    assert p.active == pytest.approx(active, rel=rel)


@pytest.mark.parametrize("stem,checkpoint,omitted", [
    # norms: 2 per layer + the final one; Gemma 2 has 4 per layer, Gemma 3 also q/k norms (head_dim each)
    ("meta-llama--Llama-3.1-8B", 8_030_261_248, (2 * 32 + 1) * 4096),
    ("mistralai--Mistral-7B-v0.1", 7_241_732_096, (2 * 32 + 1) * 4096),
    ("google--gemma-2-9b", 9_241_705_984, (4 * 42 + 1) * 3584),
    ("google--gemma-3-1b-pt", 999_885_952, (4 * 1152 + 2 * 256) * 26 + 1152),
    # Nemotron-H: 52 block norms + the final one (4096 each), 24 gated norms over the 8192 inner channels,
    # 24 conv biases over 10,240 channels, and per-head A_log, D, dt_bias (3 x 128) in 24 Mamba2 layers
    ("nvidia--Nemotron-H-8B-Base-8K", 8_100_852_736, 53 * 4096 + 24 * 8192 + 24 * 10_240 + 24 * 3 * 128),
])
def test_parameter_count_is_the_checkpoints_minus_norms_and_biases(stem, checkpoint, omitted):
    """The checkpoint's tensor count less exactly what the profile convention leaves out."""
    assert A.param_counts(_model(stem)).total == checkpoint - omitted


def test_deepseek_v2_lite_counts():
    m = _model("deepseek-ai--DeepSeek-V2-Lite")
    assert m.attention_summary == "MLA 27" and m.dense_layers == (0,)
    assert A.kv_bytes_per_token(m) == 27 * (512 + 64) * 2      # latent + rope key, bf16
    p = A.param_counts(m)
    # Model card: 15.7B total, 2.4B activated; the activated count leaves the input embedding out.
    assert p.total == pytest.approx(15.7e9, rel=2e-3)
    assert p.active - p.embedding == pytest.approx(2.4e9, rel=0.03)


def test_bundled_profiles_are_their_import():
    for stem, name in [("Qwen--Qwen3-8B", "qwen3-8b"), ("Qwen--Qwen2.5-72B", "qwen2.5-72b"),
                       ("meta-llama--Llama-3.1-8B", "llama-3.1-8b"), ("nvidia--Nemotron-H-8B-Base-8K", "nemotron-h-8b")]:
        m, b = _model(stem), get_model(name)
        assert (m.attention, m.moe, m.dense_layers, m.dense_intermediate) == (b.attention, b.moe, b.dense_layers,
                                                                              b.dense_intermediate)
        assert (m.no_ffn_layers, m.ffn_gated, m.state_dtype, m.conv_dtype) == \
               (b.no_ffn_layers, b.ffn_gated, b.state_dtype, b.conv_dtype)
        assert A.param_counts(m) == A.param_counts(b) and A.kv_bytes_per_token(m) == A.kv_bytes_per_token(b)
        assert (m.weight_dtype, m.kv_dtype, m.max_context, m.tie_word_embeddings) == \
               (b.weight_dtype, b.kv_dtype, b.max_context, b.tie_word_embeddings)


# ----------------------------------------------------------------------------------------------------
# Where sliding windows go


def test_gemma2_alternates_sliding_and_global_from_the_first_layer():
    m = _model("google--gemma-2-9b")
    swa, = m.groups("swa")
    assert swa.layers == tuple(range(0, 42, 2)) and swa.window == 4096
    assert m.groups("gqa")[0].layers == tuple(range(1, 42, 2))
    assert m.tie_word_embeddings  # absent from the config: Gemma's default


def test_gemma3_every_sixth_layer_is_global_and_the_multimodal_wrapper_imports_the_same():
    m = _model("google--gemma-3-1b-pt")
    assert m.groups("gqa")[0].layers == (5, 11, 17, 23) and m.groups("swa")[0].window == 512
    wrapped = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
               "text_config": _config("google--gemma-3-1b-pt"), "vision_config": {"hidden_size": 1152}}
    w = model_from_dict(import_hf_config(wrapped, name="gemma-3-wrapped"))
    assert w.attention == m.attention and A.param_counts(w) == A.param_counts(m)


def test_layer_types_win_over_the_architecture_rule():
    config = _config("google--gemma-3-1b-pt")
    config["layer_types"] = ["full_attention"] * 20 + ["sliding_attention"] * 6
    m = model_from_dict(import_hf_config(config, name="g"))
    assert m.groups("gqa")[0].layers == tuple(range(20)) and m.groups("swa")[0].layers == tuple(range(20, 26))


def test_qwen2_sliding_window_only_when_enabled_and_from_max_window_layers():
    config = _config("Qwen--Qwen2.5-72B")
    assert _model("Qwen--Qwen2.5-72B").attention_summary == "GQA 80"   # use_sliding_window false
    config.update(use_sliding_window=True, max_window_layers=60, sliding_window=4096)
    m = model_from_dict(import_hf_config(config, name="q"))
    assert m.groups("gqa")[0].layers == tuple(range(60))
    assert m.groups("swa")[0].layers == tuple(range(60, 80)) and m.groups("swa")[0].window == 4096


def test_mistral_without_sliding_window_is_full_attention():
    config = _config("mistralai--Mistral-7B-v0.1")
    config["sliding_window"] = None
    assert model_from_dict(import_hf_config(config, name="m")).attention_summary == "GQA 32"


def test_llama_without_kv_heads_is_multi_head():
    config = _config("meta-llama--Llama-3.1-8B")
    del config["num_key_value_heads"]
    profile = import_hf_config(config, name="l")
    assert profile["attention"][0]["num_kv_heads"] == 32
    assert "num_key_value_heads is absent" in profile["sources"]["attention.gqa.num_kv_heads"]


# ----------------------------------------------------------------------------------------------------
# Nemotron-H


def test_nemotron_h_layers_are_mixers_with_the_following_mlp_as_ffn():
    m = _model("nvidia--Nemotron-H-8B-Base-8K")
    # 52 blocks: 24 M, 4 *, 24 -; the * blocks are blocks 7, 18, 29, 40, i.e. mixers 4, 10, 16, 22.
    assert m.num_layers == 28 and m.groups("gqa")[0].layers == (4, 10, 16, 22)
    assert m.no_ffn_layers == (3, 9, 15, 21) and len(m.dense_layers) == 24 and not m.ffn_gated
    g, = m.groups("mamba2")
    assert (g.num_heads, g.head_dim, g.state_size, g.num_groups, g.conv_kernel) == (128, 64, 128, 8, 4)
    # per request: 24 layers x (128 heads x 128 x 64 fp32 state + 3 positions x 10,240 conv channels bf16)
    assert A.fixed_state_bytes(m) == 24 * (128 * 128 * 64 * 4 + 3 * 10_240 * 2)


def test_nemotron_h_layers_block_type_list_is_the_same_model():
    config = _config("nvidia--Nemotron-H-8B-Base-8K")
    names = {"M": "mamba", "*": "attention", "-": "mlp"}
    config["layers_block_type"] = [names[c] for c in config.pop("hybrid_override_pattern")]
    m = model_from_dict(import_hf_config(config, name="n"))
    assert m.attention == _model("nvidia--Nemotron-H-8B-Base-8K").attention


# ----------------------------------------------------------------------------------------------------
# Refusals: one line naming what is missing


@pytest.mark.parametrize("stem,edit,needle", [
    ("meta-llama--Llama-3.1-8B", lambda c: c.update(model_type="phi3"),
     "unsupported model_type 'phi3' (supported: deepseek_v2, deepseek_v3, gemma, gemma2, gemma3, gemma3_text, "
     "kimi_k2, kimi_k3, kimi_linear, llama, mimo_v2_flash, minimax_m2, mistral, mixtral, nemotron_h, qwen2, "
     "qwen2_moe, qwen3, qwen3_5_moe, qwen3_moe)"),
    ("meta-llama--Llama-3.1-8B", lambda c: c.pop("intermediate_size"), "missing field 'intermediate_size'"),
    ("meta-llama--Llama-3.1-8B", lambda c: c.update(num_attention_heads=24),
     "no field 'head_dim', and hidden_size 4096 is not a multiple of num_attention_heads 24"),
    ("google--gemma-2-9b", lambda c: c.update(layer_types=["full_attention"] * 41 + ["chunked_attention"]),
     "field 'layer_types': unknown layer type 'chunked_attention' for model_type gemma2"),
    ("google--gemma-2-9b", lambda c: [c.pop("sliding_window"), c.pop("sliding_window_size")],
     "missing field 'sliding_window'"),
    ("mistralai--Mixtral-8x7B-v0.1", lambda c: c.pop("num_local_experts"), "missing field 'num_local_experts'"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.pop("n_groups"), "missing field 'n_groups'"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.pop("hybrid_override_pattern"),
     "missing field 'hybrid_override_pattern'"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.update(hybrid_override_pattern="M-M*"),
     "field 'hybrid_override_pattern' must give 52 blocks (num_hidden_layers)"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.update(hybrid_override_pattern="-M" * 26),
     "MLP block 0 does not follow a mixer block"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.update(hybrid_override_pattern="ME" * 26),
     "MoE blocks ('E', Nemotron 3) are not supported"),
    ("nvidia--Nemotron-H-8B-Base-8K", lambda c: c.update(hybrid_override_pattern="M?" * 26),
     "unknown block '?'"),
])
def test_unsupported_or_incomplete_configs_name_what_is_missing(stem, edit, needle):
    config = copy.deepcopy(_config(stem))
    edit(config)
    with pytest.raises(PlanError) as exc:
        import_hf_config(config, name="x", source="config.json")
    assert str(exc.value).startswith("config.json: ") and needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_mamba2_group_shapes_are_checked():
    config = _config("nvidia--Nemotron-H-8B-Base-8K")
    config["n_groups"] = 3
    with pytest.raises(PlanError, match="num_heads 128 is not a multiple of num_groups 3"):
        model_from_dict(import_hf_config(config, name="x"), "x.yaml")


# ----------------------------------------------------------------------------------------------------
# CLI: import, list, and run the performance model on the result


def test_imported_hybrid_and_dense_models_run_through_rates(tmp_path, cli):
    code, out, err = cli("model", "import", str(CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.config.json"),
                         "--output-dir", str(tmp_path))
    assert code == 0 and "Mamba2 24 + GQA 4" in out and "102,137,856 B/request" in out
    code, out, _ = cli("--profiles", str(tmp_path), "models", "--format", "json")
    rows = {r["model"]: r for r in json.loads(out)["sections"]["models"]}
    assert rows["nemotron-h-8b-base-8k"]["attention"] == rows["nemotron-h-8b"]["attention"] == "Mamba2 24 + GQA 4"
    assert rows["nemotron-h-8b"]["fixed_state_bytes"] == 102_137_856 and rows["qwen3-8b"]["attention"] == "GQA 36"
    for args in (("--profiles", str(tmp_path), "rates", "--model", "nemotron-h-8b-base-8k"),
                 ("rates", "--model", "qwen3-8b")):
        code, out, err = cli(*args, "--instance", "1xH100", "--len", "1k,4k,8k", "--format", "json")
        assert code == 0, err
        prefill = json.loads(out)["sections"]["prefill"]
        times = [r["prefill_s"] for r in prefill]
        assert all(t > 0 for t in times) and times == sorted(times) and len(set(times)) == 3
