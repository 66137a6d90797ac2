"""Hugging Face config.json import: every stored config imports, agrees with the hand-written profile of
the same model, writes YAML that loads through --profiles, and bad input costs one line."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import get_model, model_from_dict
from prfaas_plan.profiles.hf_import import import_hf_config, read_hf_config

DATA = Path(__file__).parent / "data"
PKG_CONFIGS = Path(__file__).parents[1] / "prfaas_plan" / "data" / "hf_configs"  # shipped: profiles cite them
CONFIGS = sorted(PKG_CONFIGS.glob("*.config.json"))
BUNDLED = {
    "MiniMaxAI--MiniMax-M2.5": "minimax-m2.5",
    "Qwen--Qwen3-235B-A22B": "qwen3-235b",
    "Qwen--Qwen3.5-397B-A17B": "qwen3.5-397b",
    "XiaomiMiMo--MiMo-V2-Flash": "mimo-v2-flash",
    "deepseek-ai--DeepSeek-V3": "deepseek-v3",
    "moonshotai--Kimi-K2-Instruct": "kimi-k2",
    "moonshotai--Kimi-K3": "kimi-k3",
}
LENGTHS = np.array([1, 127, 128, 129, 4096, 32_768, 131_072])


def _config(stem: str) -> dict:
    return read_hf_config(PKG_CONFIGS / f"{stem}.config.json")


def _import(stem: str, **kw):
    path = PKG_CONFIGS / f"{stem}.config.json"
    profile = import_hf_config(read_hf_config(path), source=str(path), **kw)
    return profile, model_from_dict(profile, str(path))


def _numeric_fields(profile: dict):
    """Source keys of every number (and layer list) in an imported profile."""
    for key in ("num_layers", "hidden_size", "vocab_size", "max_context"):
        yield key
    for g in profile["attention"]:
        yield from (f"attention.{g['kind']}.{k}" for k, v in g.items() if k != "kind" and not isinstance(v, bool))
    ffn = profile["ffn"]
    yield from (f"ffn.moe.{k}" for k in ffn.get("moe", {}))
    yield from (f"ffn.{k}" for k in ffn if k != "moe")
    yield from (f"dtypes.{k}" for k in profile["dtypes"])


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name.split("--")[-1])
def test_every_config_imports_with_a_source_for_every_number(path):
    profile = import_hf_config(read_hf_config(path), source=str(path))
    model = model_from_dict(profile, str(path))
    assert A.kv_bytes_per_token(model) + A.swa_bytes_per_token(model) > 0 and A.param_counts(model).total > 0
    missing = [k for k in _numeric_fields(profile) if k not in profile["sources"]]
    assert missing == []
    for key, text in profile["sources"].items():
        assert key == "architecture" or text.startswith(("config.json ", "assumed: ")), key


@pytest.mark.parametrize("stem,bundled", sorted(BUNDLED.items()))
def test_import_agrees_with_hand_written_profile(stem, bundled):
    _, m = _import(stem)
    b = get_model(bundled)
    assert A.kv_bytes_per_token(m) == A.kv_bytes_per_token(b)
    assert A.fixed_state_bytes(m) == A.fixed_state_bytes(b)
    assert list(A.swa_bytes(m, LENGTHS)) == list(A.swa_bytes(b, LENGTHS))
    assert A.param_counts(m).total == A.param_counts(b).total
    assert A.param_counts(m).active == A.param_counts(b).active
    assert (m.weight_dtype, m.kv_dtype, m.max_context) == (b.weight_dtype, b.kv_dtype, b.max_context)


def test_qwen3_5_122b_gives_sane_numbers():
    _, m = _import("Qwen--Qwen3.5-122B-A10B")
    assert m.name == "qwen3.5-122b-a10b" and m.attention_summary == "GQA 12 + GDN 36"
    assert m.groups("gqa")[0].layers == tuple(range(3, 48, 4))
    assert A.kv_bytes_per_token(m) == 12 * 2 * (256 + 256) * 2
    # 36 GDN layers: 64 value heads x 128 x 128 fp32 state, conv over 2*16*128 + 64*128 channels x 3 bf16.
    assert A.fixed_state_bytes(m) == 36 * (64 * 128 * 128 * 4 + 3 * 12_288 * 2)
    p = A.param_counts(m)
    assert p.total == pytest.approx(122e9, rel=0.03) and p.active == pytest.approx(10e9, rel=0.1)


def test_layer_types_and_interval_give_the_same_layers():
    config = _config("Qwen--Qwen3.5-397B-A17B")
    del config["text_config"]["layer_types"]
    by_interval = model_from_dict(import_hf_config(config, name="q"))
    assert by_interval.attention == get_model("qwen3.5-397b").attention


def test_names():
    assert _import("moonshotai--Kimi-K3")[1].name == "kimi-k3"
    assert _import("moonshotai--Kimi-K3", name="K3-Test")[1].name == "k3-test"
    config = _config("Qwen--Qwen3-235B-A22B")
    config["_name_or_path"] = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    profile = import_hf_config(config, source="config.json")
    assert profile["name"] == "qwen3-235b-a22b-instruct-2507"
    assert profile["display_name"] == "Qwen3-235B-A22B-Instruct-2507"
    with pytest.raises(PlanError, match="cannot derive a model name"):
        import_hf_config(_config("Qwen--Qwen3-235B-A22B"), source="snapshots/abc/config.json")


@pytest.mark.parametrize("edit,needle", [
    (lambda c: c.update(model_type="llama4"), "unsupported model_type 'llama4' (supported: deepseek_v2, deepseek_v3, gemma,"),
    (lambda c: [c.pop("model_type"), c["text_config"].pop("model_type")], "missing field 'model_type'"),
    (lambda c: c.pop("model_type"), "unsupported model_type 'qwen3_5_moe_text'"),
    (lambda c: c["text_config"].pop("linear_num_value_heads"), "missing field 'text_config.linear_num_value_heads'"),
    (lambda c: c["text_config"].update(num_key_value_heads="2"),
     "'text_config.num_key_value_heads' must be an integer"),
    (lambda c: c["text_config"]["layer_types"].pop(), "'text_config.layer_types' must list 60 layer types"),
    (lambda c: c["text_config"].update(mamba_ssm_dtype="float64"), "unsupported dtype 'float64'"),
])
def test_bad_config_fields_are_named(edit, needle):
    config = copy.deepcopy(_config("Qwen--Qwen3.5-397B-A17B"))
    edit(config)
    with pytest.raises(PlanError) as exc:
        import_hf_config(config, name="x", source="config.json")
    assert str(exc.value).startswith("config.json: ") and needle in str(exc.value)


@pytest.mark.parametrize("ignore", [5, "re:.*self_attn.*", [{"re": "self_attn"}]])
def test_quantization_ignore_that_is_not_a_list_of_names_is_named(ignore):
    config = copy.deepcopy(_config("moonshotai--Kimi-K3"))
    config["text_config"]["quantization_config"]["ignore"] = ignore
    with pytest.raises(PlanError, match=r"field 'text_config.quantization_config.ignore' must be a list of module"):
        import_hf_config(config, name="x")


def test_one_based_layer_out_of_range_is_named():
    config = _config("moonshotai--Kimi-K3")
    config["text_config"]["linear_attn_config"]["full_attn_layers"][-1] = 94
    with pytest.raises(PlanError, match=r"full_attn_layers': layer 94 outside 1\.\.93"):
        import_hf_config(config, name="x")


# ----------------------------------------------------------------------------------------------------
# CLI


def test_cli_round_trip_through_profiles_dir(tmp_path, cli):
    path = PKG_CONFIGS / "Qwen--Qwen3.5-122B-A10B.config.json"
    code, out, err = cli("model", "import", str(path), "--output-dir", str(tmp_path))
    assert code == 0 and err == ""
    assert "qwen3.5-122b-a10b" in out and "GQA 12 + GDN 36" in out and "24,576 B/token" in out
    assert [p.name for p in tmp_path.iterdir()] == ["qwen3.5-122b-a10b.yaml"]
    code, out, _ = cli("--profiles", str(tmp_path), "models", "--format", "json")
    rows = {r["model"]: r for r in json.loads(out)["sections"]["models"]}
    assert code == 0 and rows["qwen3.5-122b-a10b"]["kv_bytes_per_token"] == 24_576


def test_cli_stdout_is_the_yaml_and_output_file_matches(tmp_path, cli):
    path = str(PKG_CONFIGS / "XiaomiMiMo--MiMo-V2-Flash.config.json")
    code, out, _ = cli("model", "import", path, "--name", "mimo-test")
    assert code == 0 and out.startswith("# Imported by")
    assert model_from_dict(yaml.safe_load(out)).attention == get_model("mimo-v2-flash").attention
    target = tmp_path / "m.yaml"
    code, summary, _ = cli("model", "import", path, "--name", "mimo-test", "--output", str(target))
    assert code == 0 and target.read_text() == out and f"wrote {target}" in summary


@pytest.mark.parametrize("content,extra,needle", [
    ('{"model_type": "llama4", "num_hidden_layers": 48}', (), "unsupported model_type 'llama4'"),
    ('{"model_type": "qwen3_moe", "num_hidden_layers": 4}', (), "missing field 'hidden_size'"),
    ('{\n  "model_type": "qwen3_moe",\n  "num_hidden_layers": 4,,\n}', (), "config.json: not JSON (Expecting property name enclosed in double quotes at line 3"),
    ("[1, 2]", (), "expected a JSON object"),
    (None, (), "cannot read (No such file or directory)"),
    ("{}", ("--output", "a.yaml", "--output-dir", "."), "give one of them, not both"),
    ('{"model_type": "qwen3_moe"}', ("--output-dir", "no-such-dir"), "--output-dir 'no-such-dir': not a folder"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, cli, content, extra, needle):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "org--X.config.json").write_text(content)
    before = sorted(tmp_path.iterdir())
    code, out, err = cli("model", "import", "org--X.config.json", *extra)
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and out == ""
    assert sorted(tmp_path.iterdir()) == before
