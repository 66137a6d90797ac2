"""`prfaas-plan validate`: every bundled model passes against the reference, and a wrong formula fails."""

from __future__ import annotations

import json

import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.profiles import all_models, get_model
from prfaas_plan.reference import scale_profile, validate_model

CHECKS = {"params", "bytes", "flops", "equivalence", "transfer", "prefix"}


@pytest.fixture(scope="module")
def results():
    return {name: validate_model(m) for name, m in sorted(all_models().items())}


@pytest.mark.parametrize("name", sorted(all_models()))
def test_every_bundled_model_passes(results, name):
    v = results[name]
    failed = [(r["check"], r["case"], r["reference"], r["analytical"], r["detail"]) for r in v.rows
              if r["result"] == "FAIL"]
    assert not failed
    assert {r["check"] for r in v.rows} == CHECKS


def test_bytes_cover_lengths_around_the_window_and_off_block_boundaries(results):
    cases = [r["case"] for r in results["mimo-v2-flash"].rows if r["check"] == "bytes"]
    lengths = [int(c.split("(")[1].split(")")[0]) for c in cases]
    assert min(lengths) < 128 < max(lengths) and any(l % 16 for l in lengths)


def test_linear_cores_match_exactly_in_recurrent_form(results):
    for name in ("kimi-linear-48b", "qwen3.5-397b", "ring-2.5-1t"):
        rows = [r for r in results[name].rows if r["check"] == "flops" and "recurrent form" in r["case"]]
        assert rows and all(r["reference"] == r["analytical"] > 0 for r in rows)


def test_cli_validate_json(cli):
    code, out, err = cli("validate", "--model", "kimi-linear", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["meta"]["all_passed"] is True
    assert doc["sections"]["summary"] == [{
        "model": "kimi-linear-48b", "scaled_layers": 8, "scaled_hidden": 18,
        "scaled_attention": "MLA 2 + KDA 6", "checks": 29, "failed": 0, "status": "ok"}]
    rows = doc["sections"]["kimi-linear-48b"]
    payload = next(r for r in rows if r["case"] == "S_kv(129) payload = live")
    assert payload["reference"] == payload["analytical"] == A.s_kv(scale_profile(get_model("kimi-linear")), 129)


def test_cli_validate_table_and_csv_are_deterministic(cli):
    code, table, _ = cli("validate", "-m", "qwen3-235b")
    assert code == 0 and "Validation summary" in table and "FAIL" not in table
    first = cli("validate", "-m", "qwen3-235b", "-f", "csv")
    assert first[0] == 0 and [l for l in first[1].splitlines() if not l.startswith("#")][0].startswith("section,")
    assert cli("validate", "-m", "qwen3-235b", "-f", "csv") == first


def test_cli_bad_input_is_one_line(cli):
    code, out, err = cli("validate", "-m", "no-such-model")
    assert code == 2 and err.startswith("error: unknown model") and out == ""
    code, _, err = cli("validate", "-m", "qwen3", "--layers", "some")
    assert code == 2 and "--layers" in err
    code, out, err = cli("validate", "-m", "qwen3", "--seed", "-1")
    assert code == 2 and err == "error: --seed -1: expected a whole number >= 0\n" and out == ""


def test_wrong_kv_formula_fails_validate(cli, monkeypatch):
    right = A.kv_elements_per_token
    monkeypatch.setattr(A, "kv_elements_per_token", lambda g: right(g) + 1 if right(g) else 0)
    code, out, _ = cli("validate", "-m", "mimo-v2-flash")
    assert code == 1
    assert "FAIL" in out


def test_wrong_state_formula_fails_the_byte_checks(monkeypatch):
    from prfaas_plan.profiles import kinds

    right = kinds._Recurrent.state_elements  # the one rule the state bytes and the core FLOPs both use
    monkeypatch.setattr(kinds._Recurrent, "state_elements", lambda self, g: right(self, g) - 1)
    v = validate_model(get_model("qwen3.5-397b"))
    assert not v.ok
    failed = {r["check"] for r in v.rows if r["result"] == "FAIL"}
    assert {"bytes", "transfer", "prefix", "flops"} <= failed


def test_conv_counted_twice_fails_the_flop_checks(monkeypatch):
    """The bug the reference found: the short convolution in the core as well as in the projections."""
    right = A.attention_core_flops
    monkeypatch.setattr(A, "attention_core_flops",
                        lambda g, l, cached=0: right(g, l, cached) + l * 2 * A.conv_channels(g) * g.conv_kernel)
    v = validate_model(get_model("kimi-linear"))
    failed = [r["case"] for r in v.rows if r["result"] == "FAIL"]
    assert failed and all("attention core" in c for c in failed)


def test_other_cache_dtypes_are_stored_and_counted_at_their_size():
    """fp8 KV (e4m3, 1 B), bf16 recurrent state, fp32 conv state: the bytes still match to the byte."""
    import dataclasses

    m = dataclasses.replace(get_model("qwen3.5-397b"), kv_dtype="fp8", state_dtype="bf16", conv_dtype="fp32")
    v = validate_model(m)
    assert v.ok, [r for r in v.rows if r["result"] == "FAIL"]
