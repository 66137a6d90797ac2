"""The ``rates``, ``kv-throughput`` and ``calibrate`` commands, including every bad-input path."""

from __future__ import annotations

import json

import pytest

from prfaas_plan import profiles


def test_rates_measured_model_shows_roofline_gap(cli):
    code, out, _ = cli("rates", "--model", "prfaas-1t", "--instance", "8xH200", "--len", "1k,32000,128k",
                       "--stack", "paper-vllm", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    prefill = doc["sections"]["prefill"]
    assert [r["source"] for r in prefill] == ["measured"] * 3
    assert all(abs(r["roofline_gap"]) < 0.4 for r in prefill)
    assert {r["op"] for r in doc["sections"]["operators"]} >= {"attn_full", "attn_linear", "moe_routed", "comm_tp"}
    assert any("measured table on 8xH200" in n for n in doc["notes"])
    assert any(n.startswith("RECONSTRUCTION") for n in doc["notes"])


def test_rates_decode_section_and_slo_forms(cli):
    code, out, _ = cli("rates", "-m", "qwen3-235b", "-i", "8xH20-3e", "--len", "8k", "--slo", "40tok/s",
                       "--input-len", "8k", "--output-len", "1024", "--format", "json")
    assert code == 0
    dec = json.loads(out)["sections"]["decode"][0]
    assert dec["tpot_s"] == pytest.approx(0.025) and dec["context_tokens"] == 8192 + 512
    assert dec["binding"] in ("slo", "memory") and dec["batch"] > 0
    assert dec["requests_per_s"] == pytest.approx(dec["tokens_per_s"] / 1024)
    code2, out2, _ = cli("rates", "-m", "qwen3-235b", "-i", "8xH20-3e", "--len", "8k", "--tpot", "25ms",
                         "--input-len", "8k", "--format", "json")
    assert json.loads(out2)["sections"]["decode"] == json.loads(out)["sections"]["decode"]


def test_rates_warns_on_a_shape_no_engine_can_split(cli):
    code, out, _ = cli("rates", "-m", "kimi-linear", "-i", "12xH20", "--len", "8k")
    assert code == 0 and out.count("WARNING [uneven-split]: the mla layers' 32 heads do not split evenly") == 1
    code, out, _ = cli("rates", "-m", "kimi-linear", "-i", "8xH20", "--len", "8k")
    assert code == 0 and "uneven-split" not in out


def test_rates_table_warns_when_weights_do_not_fit(cli):
    code, out, _ = cli("rates", "-m", "kimi-k2", "-i", "8xH20", "--len", "32k")
    assert code == 0
    assert out.count("WARNING [weights-do-not-fit]: kimi-k2 weights") == 1 and "roofline" in out and "ASSUMED" not in out
    code, out, _ = cli("rates", "-m", "kimi-k2", "-i", "8xH20", "--len", "32k", "--weight-dtype", "int4",
                       "--format", "csv")
    assert code == 0 and "WARNING" not in out


def test_rates_on_uncalibrated_chip_marks_assumption(cli):
    code, out, _ = cli("rates", "-m", "qwen3-235b", "-i", "8xH100", "--len", "8k", "--format", "json")
    assert code == 0
    assert any("h100 constants ASSUMED" in n for n in json.loads(out)["notes"])


def test_kv_throughput_all_models_and_paper_columns(cli):
    code, out, _ = cli("kv-throughput", "--len", "8k,32k", "--state-dtype", "fp32", "--stack", "paper-sglang",
                       "--format", "json")
    assert code == 0
    rows = json.loads(out)["sections"]["kv_throughput"]
    assert {r["model"] for r in rows} == set(profiles.all_models())
    compared = [r for r in rows if r["paper_gbps"] is not None]
    assert len(compared) == 12
    assert sum(abs(r["error"]) <= 0.155 for r in compared) >= 7   # see test_performance_calibration.py
    assert all(r["prefill_source"] == ("measured" if r["model"] == "prfaas-1t" else "roofline") for r in rows)


def test_kv_throughput_points_out_state_accounting(cli):
    # Ring's profile keeps Lightning state in fp32 as SGLang (the paper's engine) does: no hint needed;
    # counting it in bf16 (vLLM's choice) lowers S_kv and points at the flag.
    code, out, _ = cli("kv-throughput", "-m", "ring", "--len", "8k")
    assert code == 0 and "pass --state-dtype fp32" not in out
    code, out, _ = cli("kv-throughput", "-m", "ring", "--len", "8k", "--state-dtype", "bf16", "--format", "json")
    assert code == 0 and json.loads(out)["sections"]["kv_throughput"][0]["s_kv_bytes"] == 8192 * 11520 + 70 * 64 * 128 * 128 * 2
    code, out, _ = cli("kv-throughput", "-m", "ring", "--len", "8k", "--instance", "8xH20")
    assert code == 0 and "paper" not in out.split("note:")[0]


MOONCAKE = "mooncake_h20_qwen3_235b_pd.csv"


def test_calibrate_prints_points_and_writes_profiles(cli, tmp_path):
    code, out, _ = cli("calibrate", "--measurements", MOONCAKE, "--output", str(tmp_path / "cal"))
    assert code == 0
    assert "leave-one-model-out" in out and "32,768" in out and "mooncake-sglang-pd" in out
    data = profiles.read_yaml(tmp_path / "cal" / "h20-3e.yaml")
    assert data["name"] == "h20-3e" and 0 < data["calibration"]["gemm_efficiency"]["bf16"] <= 1
    stack = profiles.read_yaml(tmp_path / "cal" / "mooncake-sglang-pd.yaml")
    assert stack["kind"] == "stack" and "fitted by prfaas-plan calibrate" in stack["sources"]["latency_s"]
    code, out, _ = cli("--profiles", str(tmp_path / "cal"), "rates", "-m", "qwen3-235b", "-i", "8xH20-3e",
                       "--stack", "mooncake-sglang-pd", "--len", "8k", "--format", "json")
    assert code == 0


def test_calibrate_generic_csv_with_default_stack(cli, tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("model,instance,len_tokens,latency_s\n" + "".join(
        f"qwen3-235b,8xH20-3e,{l},{t}\n" for l, t in ((2048, 0.166), (8192, 0.571), (32768, 3.183))))
    code, out, _ = cli("calibrate", "--measurements", str(f), "--row-stack", "mooncake-sglang-pd", "--format", "csv")
    body = "".join(l for l in out.splitlines(True) if not l.startswith("#"))  # without the comment lines
    assert code == 0 and body.count("qwen3-235b") == 3 and "ttft_loo_error" in body
    code, _, err = cli("calibrate", "--measurements", str(f))
    assert code == 2 and "missing column 'stack'" in err


def test_rates_reports_what_a_measurement_checks(cli):
    code, out, _ = cli("rates", "-m", "deepseek-v3", "-i", "8xH200", "--len", "1k,8k", "--stack", "trtllm",
                       "--batch", "32", "--context", "9k", "--concurrency", "16", "--output-len", "1024",
                       "--format", "json")
    assert code == 0
    doc = json.loads(out)
    pre = doc["sections"]["prefill"]
    assert all(r["prefill_s"] > r["prefill_busy_s"] > 0 and r["ttft_s"] > r["prefill_s"] for r in pre)
    step = doc["sections"]["decode_step"][0]
    assert step["batch"] == 32 and step["context_tokens"] == 9216 and step["decode_step_s"] > 0
    assert all(r["tpot_s"] > step["decode_step_s"] * 0.5 for r in pre)
    assert any(n.startswith("stack trtllm (TensorRT-LLM") for n in doc["notes"])
    assert not any(n.startswith("default stack") for n in doc["notes"])
    code, out, _ = cli("rates", "-m", "deepseek-v3", "--len", "8k", "--format", "json")
    assert any(n.startswith("default stack: sglang") for n in json.loads(out)["notes"])


def test_kv_throughput_takes_the_stack(cli):
    code, a, _ = cli("kv-throughput", "-m", "qwen3-235b", "--len", "8k", "--stack", "paper-sglang", "--format", "json")
    code2, b, _ = cli("kv-throughput", "-m", "qwen3-235b", "--len", "8k", "--stack", "vllm", "--format", "json")
    assert code == code2 == 0
    ga, gb = (json.loads(x)["sections"]["kv_throughput"][0]["kv_throughput_gbps"] for x in (a, b))
    assert ga < gb   # the paper harness's fixed latency is the larger


@pytest.mark.parametrize("args,needle", [
    (("rates", "-m", "qwen3", "--moe", "dp"), "'dp' is not one of 'tp', 'ep'"),
    (("rates", "-m", "qwen3", "--source", "table"), "'table' is not one of 'auto', 'roofline', 'measured'"),
    (("rates", "-m", "qwen3", "--tpot", "25ms", "--slo", "40tok/s"), "--tpot and --slo both given"),
    (("rates", "-m", "qwen3", "--slo", "0tok/s"), "--slo '0tok/s'"),
    (("rates", "-m", "qwen3", "--weight-dtype", "fp7"), "--weight-dtype: unknown dtype 'fp7'"),
    (("rates", "-m", "qwen3", "-i", "8xH2000"), "unknown chip 'h2000'"),
    (("rates", "-m", "qwen3", "--len", "0"), "--len '0'"),
    (("rates", "-m", "qwen3", "--stack", "sglang9"), "--stack 'sglang9': unknown serving stack"),
    (("rates", "-m", "prfaas-1t", "-i", "8xH20", "--source", "measured"), "no measured prefill table"),
    (("kv-throughput", "--state-dtype", "fp64"), "--state-dtype: unknown dtype 'fp64'"),
    (("kv-throughput", "--stack", "x"), "unknown serving stack"),
    (("calibrate", "--measurements", "nope.csv"), "nope.csv: cannot read"),
    (("check", "nope.jsonl"), "nope.jsonl: cannot read"),   # a positional file: no flag named
    (("calibrate", "--measurements", MOONCAKE, "--row-weight-dtype", "fp7"), "--row-weight-dtype: unknown dtype 'fp7'"),
    (("size", "--stack", "nope"), "unknown serving stack"),
    (("compare", "--stack", "nope"), "unknown serving stack"),
])
def test_bad_input_is_one_line_exit_2(cli, args, needle):
    code, out, err = cli(*args)
    assert code == 2
    assert needle in err and err.count("\n") == 1


def test_calibrate_output_that_cannot_be_written_is_one_line(cli, tmp_path, monkeypatch):
    args = ("calibrate", "--measurements", MOONCAKE, "--no-loo", "--output")
    (tmp_path / "file").write_text("x")
    code, out, err = cli(*args, str(tmp_path / "file"))
    assert code == 1 and "is not a folder" in err and err.count("\n") == 1 and out == ""

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    code, out, err = cli(*args, str(tmp_path / "cal"))
    assert code == 1 and "cannot write (Permission denied)" in err and err.count("\n") == 1 and out == ""
    assert not (tmp_path / "cal").exists()   # no empty folder left behind (issue 23)


def test_calibrate_corrupt_measurements(cli, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("model,instance,len_tokens,latency_s\nqwen3-235b,8xH20-3e,4096\n")
    code, _, err = cli("calibrate", "--measurements", str(f))
    assert code == 2 and "bad.csv:2: expected 4 columns" in err


def test_calibrate_binary_measurements_is_one_line(cli, tmp_path):
    f = tmp_path / "bin.csv"
    f.write_bytes(b"\xff\xfemodel,instance\n")
    code, out, err = cli("calibrate", "--measurements", str(f))
    assert code == 2 and "not a UTF-8 text file" in err and err.count("\n") == 1 and out == ""


def test_layout_sites_name_their_stack(tmp_path):
    from prfaas_plan.errors import PlanError
    from prfaas_plan.layout import load_layout
    from prfaas_plan.planning import case_study
    from prfaas_plan.planning.plans import layout_perf

    f = tmp_path / "two.yaml"
    f.write_text("remote: {instance: 8xB200, instances: 2, stack: trtllm}\n"
                 "sites:\n  - {name: a, instance: 8xH20, prefill: 1, decode: 3, stack: vllm, link: {bandwidth: 100G}}\n"
                 "  - {name: b, instance: 8xH20, prefill: 1, decode: 3, link: {bandwidth: 100G}}\n")
    lay = load_layout(f)
    assert lay.remote.stack == "trtllm" and [s.stack for s in lay.pd_sites] == ["vllm", ""]
    perf = layout_perf(lay, case_study.scenario("predicted"))   # the scenario's stack: paper-vllm
    assert "stack trtllm" in perf.remote_prefill.source
    assert "stack vllm" in perf.sites["a"].prefill.source and "stack paper-vllm" in perf.sites["b"].prefill.source
    f.write_text("sites:\n  - {name: a, instance: 8xH20, prefill: 1, decode: 3, stack: vllmm}\n")
    with pytest.raises(PlanError, match="unknown serving stack"):
        load_layout(f)
