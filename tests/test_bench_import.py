"""Benchmark outputs read as measurements (`performance.bench_import`) and ``prfaas-plan check``: each
format on its sample file (tests/data/bench/README.md cites the layouts), refusals in one line, and the
consistency of check's per-point errors with calibrate's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.performance.bench_import import Tags, detect_format, import_runs
from prfaas_plan.performance.measurements import load_measurements
from prfaas_plan.planning.check import answer_check
from prfaas_plan.planning.rates import answer_calibrate

from pathlib import Path

BENCH = Path(__file__).parent / "data" / "bench"
VLLM = BENCH / "vllm_bench_serve_kimi_k2_b200_c4.json"
OPEN = BENCH / "vllm_bench_serve_open_loop.json"
SGLANG = BENCH / "sglang_bench_serving_deepseek_v3_h200.jsonl"
AIPERF = BENCH / "aiperf_profile_export_qwen35_h200_c8.json"
AIPERF_CSV = BENCH / "aiperf_profile_export_qwen35_h200_c8.csv"
GENAI = BENCH / "genai_perf_profile_export_qwen35_h200_c8.json"
SILICON = BENCH / "nvidia_silicon_sample_upstream_rows.csv"
NVIDIA = "nvidia_silicon_sample_subset.csv"


@pytest.mark.parametrize("path, fmt", [(VLLM, "vllm"), (OPEN, "vllm"), (SGLANG, "sglang"), (AIPERF, "aiperf"),
                                       (GENAI, "aiperf"), (AIPERF_CSV, "aiperf-csv"), (SILICON, "nvidia-silicon")])
def test_formats_are_recognised_by_content(path, fmt):
    assert detect_format(path, path.read_text()) == fmt


def test_vllm_result_maps_model_lengths_concurrency_and_means():
    doc = json.loads(VLLM.read_text())
    (run,), excluded = import_runs(VLLM, Tags(instance="8xB200", stack="vllm@0.15.1"))
    m = run.measurement
    assert excluded == []
    assert (m.model, m.instance, m.stack) == ("kimi-k2", "8xB200", "vllm")   # HF name via the bundled subset
    assert m.len_tokens == doc["total_input_tokens"] // doc["completed"]
    assert m.output_tokens == doc["total_output_tokens"] // doc["completed"]
    assert m.concurrency == doc["max_concurrency"]
    assert m.ttft_s == pytest.approx(doc["mean_ttft_ms"] / 1e3) and m.tpot_s == pytest.approx(doc["mean_tpot_ms"] / 1e3)
    assert run.percentiles["ttft_p99"] == pytest.approx(doc["p99_ttft_ms"] / 1e3)
    assert run.engine == "vllm@0.15.1" and "vllm@0.15.1" in m.source


def test_open_loop_run_takes_littles_law_concurrency_and_says_so():
    doc = json.loads(OPEN.read_text())
    (run,), _ = import_runs(OPEN, Tags(instance="8xB200", stack="vllm"))
    assert run.measurement.concurrency == round(doc["request_throughput"] * doc["mean_e2el_ms"] / 1e3)
    assert "Little's law" in run.measurement.derived
    (given_c,), _ = import_runs(OPEN, Tags(instance="8xB200", stack="vllm", concurrency=7))
    assert given_c.measurement.concurrency == 7 and not given_c.measurement.derived


def test_sglang_jsonl_reads_every_line_and_the_server_info():
    lines = [json.loads(line) for line in SGLANG.read_text().splitlines()]
    runs, _ = import_runs(SGLANG, Tags(instance="8xH200"))
    assert [r.measurement.concurrency for r in runs] == [d["max_concurrency"] for d in lines]
    assert all(r.engine == "sglang@0.5.9" and r.measurement.stack == "sglang" for r in runs)   # version recorded
    assert [r.measurement.ttft_s for r in runs] == pytest.approx([d["mean_ttft_ms"] / 1e3 for d in lines])
    assert all(r.measurement.model == "deepseek-v3" for r in runs)


@pytest.mark.parametrize("path", [AIPERF, GENAI, AIPERF_CSV])
def test_aiperf_and_genai_perf_exports_agree(path):
    tags = Tags(instance="8xH200", stack="sglang@0.5.9", model="qwen3.5-397b" if path == AIPERF_CSV else "")
    (run,), _ = import_runs(path, tags)
    m = run.measurement
    assert (m.model, m.len_tokens, m.output_tokens, m.concurrency) == ("qwen3.5-397b", 1024, 1024, 8)
    assert m.ttft_s == pytest.approx(0.233477, rel=1e-5) and m.tpot_s == pytest.approx(0.011469, rel=1e-4)
    assert run.percentiles["ttft_p99"] == pytest.approx(0.233477, rel=1e-5)


def test_upstream_silicon_rows_convert_as_the_bundled_subset_does():
    """The same NVIDIA run read from the upstream file and from the bundled subset is the same point (the
    subset rounds to 3 decimals of a millisecond); rows the model cannot represent are excluded, counted."""
    runs, excluded = import_runs(SILICON)
    subset, _ = load_measurements(NVIDIA)
    for r in runs:
        m = r.measurement
        twins = [s for s in subset if (s.model, s.instance, s.stack, s.len_tokens, s.output_tokens, s.concurrency,
                                       s.moe, s.weight_dtype, s.expert_dtype) ==
                 (m.model, m.instance, m.stack, m.len_tokens, m.output_tokens, m.concurrency, m.moe, m.weight_dtype,
                  m.expert_dtype)]
        assert twins and any(abs(s.ttft_s / m.ttft_s - 1) < 1e-5 and abs(s.tpot_s / m.tpot_s - 1) < 1e-4
                             for s in twins)
    assert len(runs) == 4
    assert any("disagg" in e for e in excluded) and any("b300" in e for e in excluded)
    assert any("gpt-oss" in e for e in excluded)


@pytest.mark.parametrize("path, tags, needle", [
    (VLLM, Tags(stack="vllm"), "pass `chip`"),
    (VLLM, Tags(instance="8xB200"), "pass `stack`"),
    (AIPERF_CSV, Tags(instance="8xH200", stack="sglang"), "pass `model`"),
    (SGLANG, Tags(instance="8xH200", tp=4), "pass `chip` 4xH200"),
    (VLLM, Tags(instance="8xB200", stack="nosuchstack"), "nosuchstack"),
])
def test_what_the_file_does_not_say_is_asked_for(path, tags, needle):
    with pytest.raises(PlanError, match=needle.replace("-", r"\-")):
        import_runs(path, tags)


@pytest.mark.parametrize("text, needle", [
    ('{"foo": 1}', "none of the keys"),
    ("{not json", "not valid JSON"),
    ('{"mean_ttft_ms": 10, "completed": 0, "model_id": "deepseek-ai/DeepSeek-V3"}', "no request finished"),
    ('{"mean_ttft_ms": -5, "completed": 3, "total_input_tokens": 30, "total_output_tokens": 30, '
     '"max_concurrency": 2, "model_id": "deepseek-ai/DeepSeek-V3"}', "positive finite"),
    ('{"mean_ttft_ms": 5, "completed": 3, "total_input_tokens": 30, "total_output_tokens": 30, '
     '"max_concurrency": 2, "model_id": "acme/unknown-model"}', "not a bundled profile"),
    ("Metric,avg\nFoo (ms),1\n", "no TTFT"),
])
def test_unreadable_files_are_refused_in_one_line(tmp_path, text, needle):
    path = tmp_path / "bench.json"
    path.write_text(text)
    with pytest.raises(PlanError, match=needle) as exc:
        import_runs(path, Tags(instance="8xH200", stack="sglang"))
    assert "\n" not in str(exc.value)


@settings(max_examples=25, deadline=None)
@given(c=st.integers(1, 512), isl=st.integers(16, 131072), ttft=st.floats(1.0, 1e5), tpot=st.floats(0.5, 500.0))
def test_vllm_fields_round_trip(tmp_path_factory, c, isl, ttft, tpot):
    """Property: whatever the run, the measurement carries the file's means in seconds and its lengths."""
    doc = {"model_id": "deepseek-ai/DeepSeek-V3", "completed": 10, "total_input_tokens": 10 * isl,
           "total_output_tokens": 10 * 256, "max_concurrency": c, "mean_ttft_ms": ttft, "mean_tpot_ms": tpot}
    path = tmp_path_factory.mktemp("v") / "r.json"
    path.write_text(json.dumps(doc))
    (run,), _ = import_runs(path, Tags(instance="8xH200", stack="sglang"))
    m = run.measurement
    assert (m.len_tokens, m.output_tokens, m.concurrency) == (isl, 256, c)
    assert m.ttft_s == pytest.approx(ttft / 1e3) and m.tpot_s == pytest.approx(tpot / 1e3)


def _errors(rows, calibrated: bool = False):
    """{point: (TTFT error, TPOT error)}; of calibrate's rows, the errors with the version entry the written
    profile holds (``run_stack``: what check predicts a versioned row with)."""
    kind = "_version_error" if calibrated else "_error"
    return {(r["model"], r["instance"], r["run_stack" if calibrated else "stack"], r["moe"], r["precision"],
             r["concurrency"], r["len_tokens"], r["output_tokens"], r.get("ttft_measured_s")):
            (r.get(f"ttft{kind}"), r.get(f"tpot{kind}")) for r in rows}


# The written profiles keep 4 significant digits: a constant moves by up to 5e-5 of itself, and a
# prediction depends on a handful of them, so predicted times may differ by a few 1e-4 (measured: 2.5e-4).
ROUNDING = 1e-3


def test_check_on_the_nvidia_subset_equals_calibrates_per_point_errors():
    """The bundled profiles were fitted by ``calibrate`` on every bundled set: check's error on each NVIDIA
    point is calibrate's in-sample error of that point."""
    fit = _errors(answer_calibrate(loo=False).points, calibrated=True)
    checked = answer_check([NVIDIA]).rows
    assert len(checked) > 100
    for key, (ttft, tpot) in _errors(checked).items():
        assert fit[key][0] == pytest.approx(ttft, abs=ROUNDING) and fit[key][1] == pytest.approx(tpot, abs=ROUNDING)


def test_check_with_profiles_written_by_calibrate_reproduces_its_errors(tmp_path):
    from prfaas_plan.profiles import add_profile_dir

    cal = answer_calibrate([str(SGLANG), NVIDIA], output=str(tmp_path), loo=False,
                           tags=Tags(instance="8xH200", weight_dtype="fp8"))
    add_profile_dir(str(tmp_path))
    checked = answer_check([str(SGLANG)], Tags(instance="8xH200", weight_dtype="fp8"))
    # the bench file's rows come first; NVIDIA's sample holds the same runs as recorded by its harness, whose
    # rows (same key) carry the harness's client time (calibrate.harness_of), so the first row of a key is the one
    n_bench = len(checked.rows)
    fit = _errors(cal.points[:n_bench], calibrated=True)
    for key, (ttft, tpot) in _errors(checked.rows).items():
        assert fit[key][0] == pytest.approx(ttft, abs=ROUNDING) and fit[key][1] == pytest.approx(tpot, abs=ROUNDING)
    assert checked.summary[0]["points"] == 2


def test_check_cli_formats_and_errors(cli):
    code, out, err = cli("check", str(SGLANG), "--chip", "8xH200", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["sections"]["points"]) == 2 and doc["sections"]["summary"][0]["quantity"] == "ttft"
    code, out, _ = cli("check", str(SGLANG), "--chip", "8xH200", "-f", "csv")
    assert code == 0 and "ttft_error" in out
    code, out, err = cli("check", str(VLLM))
    assert code != 0 and out == "" and err.count("\n") == 1 and "--chip" in err
    code, _, err = cli("check", str(VLLM), "--chip", "8xNOPE", "--stack", "vllm")
    assert code != 0 and err.count("\n") == 1


def test_calibrate_fits_on_imported_files(cli):
    code, out, err = cli("calibrate", "--measurements", str(SGLANG), "--measurements", str(AIPERF), "--chip",
                         "8xH200", "--stack", "sglang@0.5.9", "--row-weight-dtype", "fp8", "--no-loo", "-f", "json")
    assert code == 0, err
    points = json.loads(out)["sections"]["points"]
    assert sorted(p["model"] for p in points) == ["deepseek-v3", "deepseek-v3", "qwen3.5-397b"]
