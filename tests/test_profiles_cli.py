"""Profile loading and the profile/kv commands, including every bad-input path."""

from __future__ import annotations

import json

import pytest

from prfaas_plan import profiles
from prfaas_plan.errors import PlanError


def test_models_lists_every_bundled_profile(cli):
    code, out, _ = cli("models", "--format", "json")
    assert code == 0
    names = {r["model"] for r in json.loads(out)["sections"]["models"]}
    for expected in ("minimax-m2.5", "qwen3-235b", "qwen3.5-397b", "mimo-v2-flash", "ring-2.5-1t",
                     "kimi-linear-48b", "kimi-k2", "kimi-k3", "deepseek-v3", "prfaas-1t"):
        assert expected in names


def test_hardware_lists_required_chips(cli):
    code, out, _ = cli("hardware", "--format", "csv")
    assert code == 0
    for chip in ("h200", "h20", "h20-3e", "h100", "h800", "b200", "mi300x"):
        assert f"\n{chip}," in out


def test_hardware_says_how_far_to_trust_each_chip(cli):
    """Each chip's row carries the held-out error its plans' error bars take: its own leave-one-model-out where
    its calibration records one, else (uncalibrated, or calibrated on too few rows) an unseen model on an unseen
    chip, never narrower than a calibrated chip's."""
    import math

    code, out, _ = cli("hardware", "--format", "json")
    rows = {r["chip"]: r for r in json.loads(out)["sections"]["hardware"]}
    h200 = profiles.get_hardware("h200").calibration
    assert rows["h200"]["ttft_error"] == pytest.approx(h200.lomo_error["ttft"])
    assert rows["h200"]["ttft_error_basis"] == "leave-one-model-out"
    for chip in ("h100", "h20"):
        assert rows[chip]["ttft_error_basis"] == "unseen model and chip"
        assert rows[chip]["ttft_error"] > max(rows[c]["ttft_error"] for c in ("b200", "h200"))
        assert math.isfinite(rows[chip]["tpot_error"])


def test_alias_lookup_and_show(cli):
    assert profiles.get_model("KIMI-LINEAR").name == "kimi-linear-48b"
    code, out, _ = cli("show", "kimi-linear")
    assert code == 0 and "kda" in out and "mla" in out


def test_show_marks_reconstruction(cli):
    code, out, _ = cli("show", "prfaas-1t")
    assert code == 0 and "RECONSTRUCTION" in out


def test_kv_json_keys_carry_units(cli):
    code, out, _ = cli("kv", "--model", "kimi-linear", "--len", "32k", "--format", "json")
    assert code == 0
    row = json.loads(out)["sections"]["kv"][0]
    assert row["len_tokens"] == 32768
    assert row["s_kv_bytes"] == 8064 * 32768 + row["recurrent_state_bytes"] + row["conv_state_bytes"]


@pytest.mark.parametrize("args,needle", [
    (("kv", "--model", "kimi-linaer", "--len", "8k"), "did you mean kimi-linear"),
    (("show", "qwen4"), "unknown model 'qwen4'"),
    (("kv", "--model", "kimi-linear", "--len", "32q"), "--len '32q'"),
    (("kv", "--model", "kimi-linear", "--len", "-5"), "--len '-5'"),
    (("kv", "--model", "kimi-linear", "--len", "0"), "--len '0'"),
    (("models", "--format", "xml"), "'xml' is not one of 'table', 'json', 'csv'"),  # as every command says it
    (("kv", "--len", "8k"), "--model"),
])
def test_bad_input_is_one_line_exit_2(cli, args, needle):
    code, out, err = cli(*args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and out == ""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_malformed_yaml_names_file_and_line(tmp_path, cli):
    _write(tmp_path, "bad.yaml", "kind: model\nname: x\nnum_layers: [1,\n")
    code, out, err = cli("--profiles", str(tmp_path), "models", "--format", "csv")  # does not use it: one warning
    assert code == 0 and "kimi-linear-48b" in out
    assert err.count("bad.yaml:") == 1 and "malformed YAML" in err and err.startswith("warning:")
    code, _, err = cli("--profiles", str(tmp_path), "kv", "--model", "bad", "--len", "1k")  # uses it
    assert code == 2 and "bad.yaml:" in err and "malformed YAML" in err and len(err.splitlines()) == 1


def test_missing_field_is_named(tmp_path, cli):
    _write(tmp_path, "m.yaml", "kind: model\nname: tiny\nnum_layers: 2\nhidden_size: 8\n")
    code, _, err = cli("--profiles", str(tmp_path), "kv", "--model", "tiny", "--len", "1k")
    assert code == 2 and "m.yaml: missing fields 'vocab_size', 'max_context', 'attention', 'sources'" in err


def test_user_profile_folder_adds_a_chip(tmp_path, cli, monkeypatch):
    _write(tmp_path, "x1.yaml", "kind: hardware\nname: x1\npeak_tflops: {bf16: 100}\nhbm_gb: 10\n"
                                "hbm_tb_s: 1\nscaleup_gb_s: 100\nsources: {all: assumed}\n")
    monkeypatch.setenv("PRFAAS_PLAN_PROFILES", str(tmp_path))
    assert profiles.get_hardware("x1").hbm_gb == 10
    code, out, _ = cli("hardware", "--format", "csv")
    assert code == 0 and "\nx1," in out


def test_layer_overlap_and_gaps_rejected():
    base = {"kind": "model", "name": "t", "num_layers": 3, "hidden_size": 8, "vocab_size": 10,
            "max_context": 100, "ffn": {"dense_intermediate": 16}, "sources": {"all": "assumed"}}
    gap = dict(base, attention=[{"kind": "gqa", "layers": [0, 1], "num_heads": 1, "num_kv_heads": 1,
                                 "head_dim": 4}])
    with pytest.raises(PlanError, match=r"layers \[2\] have no attention group"):
        profiles.model_from_dict(gap)
    overlap = dict(base, attention=[
        {"kind": "gqa", "layers": [0, 1, 2], "num_heads": 1, "num_kv_heads": 1, "head_dim": 4},
        {"kind": "kda", "layers": [2], "num_heads": 1, "head_dim": 4, "conv_kernel": 4}])
    with pytest.raises(PlanError, match="layer 2 is already gqa"):
        profiles.model_from_dict(overlap)
    unknown = dict(base, attention=[{"kind": "mamba", "layers": "rest"}])
    with pytest.raises(PlanError, match="unknown attention kind 'mamba'"):
        profiles.model_from_dict(unknown)


def test_units_parsers():
    from prfaas_plan import units as U
    assert U.parse_length("32k") == 32768
    assert U.parse_lengths(["1k,8k", "128K"]) == [1024, 8192, 131072]
    assert U.parse_rate_bps("100G") == 1e11
    assert U.parse_rate_bps("12.5GB/s") == 1e11
    assert U.parse_tpot_s("40tok/s") == pytest.approx(0.025)
    assert U.parse_time_s("25ms") == pytest.approx(0.025)
    assert U.parse_chip_count("32xH200") == U.ChipCount(32, "h200")
    for bad in ("-1G", "fast", "0G"):
        with pytest.raises(PlanError):
            U.parse_rate_bps(bad)


def test_absurd_magnitudes_are_capped():
    from prfaas_plan import units as U
    assert U.parse_length("1024m") == U.MAX_TOKENS
    assert U.parse_chip_count(f"{U.MAX_CHIPS}xH200").count == U.MAX_CHIPS
    for bad in ("1e30", "1e300", str(U.MAX_TOKENS + 1)):
        with pytest.raises(PlanError, match="cap of 1,073,741,824 tokens"):
            U.parse_length(bad, "--len")
    with pytest.raises(PlanError, match="100000000xH200.*cap of 1,000,000 chips"):
        U.parse_chip_count("100000000xH200", "--remote")
