"""Workload builders, resolve_workload and ``prfaas-plan workload describe``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prfaas_plan.errors import PlanError
from prfaas_plan.workload import (
    Empirical,
    Fixed,
    TruncatedLogNormal,
    from_trace,
    paper_workload,
    resolve_workload,
)


def test_paper_workload():
    w = paper_workload()
    assert w.input_length == TruncatedLogNormal(9.90, 1.00, 128, 131072)
    assert w.output_length == Fixed(1024) and w.total_input_length is w.input_length
    assert w.requests is None and w.uncached_lengths is None and w.arrival_rate is None
    assert any("K = 1024" in n for n in w.notes) and w.sources


def test_trace_workload_with_and_without_cache():
    cached = resolve_workload("trace")
    assert cached.requests == 12_031 and cached.cache is not None
    assert isinstance(cached.input_length, Empirical)
    assert cached.total_input_length.mean() == pytest.approx(12_035.06, abs=0.01)
    assert cached.input_length.mean() == pytest.approx(7_538.5, abs=0.1)
    assert cached.arrival_rate == pytest.approx(3.4012, abs=1e-4)
    raw = from_trace(cached.trace, prefix_cache=False)
    assert raw.cache is None and raw.input_length is raw.total_input_length
    assert np.array_equal(raw.uncached_lengths, cached.trace.input_length)


def test_resolve_workload_paths(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("input_length,output_length\n100,10\n300,30\n")
    w = resolve_workload(str(path))
    assert w.name == "mine" and w.input_length.mean() == 200 and w.output_length.mean() == 20
    assert w.cache is None
    with pytest.raises(PlanError, match="no hash_ids"):
        resolve_workload(str(path), prefix_cache=True)
    with pytest.raises(PlanError, match="`workload` 'papr': expected paper, trace or a path .*did you mean paper"):
        resolve_workload("papr")
    with pytest.raises(PlanError, match="already uncached"):
        resolve_workload("paper", prefix_cache=True)


def test_describe_paper_json(cli):
    code, out, err = cli("workload", "describe", "--threshold", "8k,19400", "--format", "json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    lengths = {r["quantity"]: r for r in doc["sections"]["lengths"]}
    assert lengths["input_uncached"]["mean_tokens"] == pytest.approx(27_485.7, abs=0.1)
    assert lengths["output"]["p99_tokens"] == 1024
    assert "facts" not in doc["sections"]
    t = doc["sections"]["thresholds"]
    assert [r["threshold_tokens"] for r in t] == [8192, 19400]
    assert t[1]["p_above"] == pytest.approx(0.4957, abs=1e-4)
    assert t[1]["mean_above_tokens"] == pytest.approx(45_045.6, abs=0.5)


def test_describe_trace_table_and_csv(cli):
    code, out, _ = cli("workload", "describe", "--workload", "trace")
    assert code == 0
    assert "prefix_hit_rate_tokens" in out and "0.3736" in out and "12,031" in out and "E[L|L>t]" in out
    code, out, _ = cli("workload", "describe", "-w", "trace", "--no-prefix-cache", "--format", "csv")
    assert code == 0
    assert out.startswith("# prfaas-plan ") and "# note: " in out
    body = "".join(l for l in out.splitlines(True) if not l.startswith("#"))
    assert "prefix_hit_rate" not in body
    assert body.startswith("section,quantity,count,mean_tokens")


def test_describe_trace_file_with_small_cache(cli, tmp_path):
    path = tmp_path / "t.jsonl"
    recs = [{"timestamp": i * 1000, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]}
            for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code, out, _ = cli("workload", "describe", "--trace", str(path), "--cache-blocks", "2", "-f", "json")
    assert code == 0
    facts = {r["fact"]: r["value"] for r in json.loads(out)["sections"]["facts"]}
    assert facts["cache_capacity"] == 2 and facts["arrival_rate"] == pytest.approx(1.0)
    assert facts["prefix_hit_rate_tokens"] == pytest.approx(2 * 1023 / 3072)


@pytest.mark.parametrize("args,needle", [
    (("--workload", "nonsense"), "--workload 'nonsense': expected paper, trace"),
    (("--workload", "paper", "--prefix-cache"), "already uncached"),
    (("--threshold", "8q"), "--threshold '8q'"),
    (("--threshold", "0"), "--threshold '0'"),
    (("--cache-blocks", "0",), "--cache-blocks"),
    (("--format", "xml"), "'xml' is not one of 'table', 'json', 'csv'"),
    (("-w", "trace", "--block-size", "1024"), "expected at most"),
    (("--trace", "missing.jsonl"), "missing.jsonl: no such trace file"),
    (("--trace", "a.jsonl", "-w", "trace"), "give one of them"),
    (("-w", ""), "--workload '': expected paper, trace or a path"),
])
def test_describe_bad_input_is_one_line_exit_2(cli, args, needle):
    code, out, err = cli("workload", "describe", *args)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_describe_malformed_trace(cli, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": -4, "output_length": 1, "hash_ids": []}\n')
    code, out, err = cli("workload", "describe", "--trace", str(path))
    assert code == 2 and out == ""
    assert f"{path}:1: input_length = -4" in err and err.count("\n") == 1


def test_describe_csv_without_timestamps(cli, tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("input_length,output_length\n100,5\n300,7\n")
    code, out, _ = cli("workload", "describe", "--trace", str(path), "-t", "200,8k", "-f", "json")
    assert code == 0
    doc = json.loads(out)
    facts = {r["fact"]: r["value"] for r in doc["sections"]["facts"]}
    assert facts == {"requests": 2, "duration": None, "arrival_rate": None}
    above = [r["mean_above_tokens"] for r in doc["sections"]["thresholds"]]
    assert above == [300, None]
    assert "no arrival times in the trace" in doc["notes"]
