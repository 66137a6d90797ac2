"""``prfaas-plan simulate`` end to end, including every bad-input path."""

from __future__ import annotations

import json

import pytest

TRACE = "prfaas_plan/data/traces/mooncake_conversation_trace.jsonl"
PAPER = ("--model", "prfaas-1t", "--inputs", "paper")  # the case study's inputs (golden figures)


def test_synthetic_paper_runs_and_reports(cli):
    code, out, err = cli("simulate", *PAPER, "--synthetic", "paper", "--duration", "600s", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    head = doc["sections"]["summary"][0]
    assert head["model"] == "prfaas-1t" and head["layout"] == "prfaas-pd" and head["n_prefill"] == 3
    assert head["completed"] == head["arrived"] > 1000
    assert head["offered_rps"] == pytest.approx(0.8 * head["lambda_max_rps"], rel=0.1)
    sources = [r["source"] for r in doc["sections"]["latency"]]
    assert sources == ["simulated", "analytic at the offered rate", "analytic unloaded"]
    assert {r["stage"] for r in doc["sections"]["stages"]} == {"remote_prefill", "link", "local_prefill",
                                                              "local_decode"}
    assert any("M/G/c" in n for n in doc["notes"]) and any("default in effect" in n for n in doc["notes"])


def test_trace_replay_with_caches_and_adaptive_comparison(cli, tmp_path):
    plot = tmp_path / "sim.png"
    code, out, err = cli("simulate", *PAPER, "--trace", TRACE, "--duration", "900s", "--scheduler", "adaptive",
                         "--compare", "static,threshold", "--rebalance", "2min", "--plot", str(plot), "--format",
                         "json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["cluster"] for r in doc["sections"]["cache"]} == {"pd", "prfaas"}
    assert doc["sections"]["cache"][0]["hit_rate"] > 0.1
    rows = {r["figure"]: r for r in doc["sections"]["comparison"]}
    assert set(rows) >= {"P99 TTFT (s)", "steady throughput (req/s)"}
    # three schedulers, three distinct runs (a third one once silently re-ran one of the other two)
    p99 = rows["P99 TTFT (s)"]
    assert {"static", "threshold", "adaptive", "threshold_vs_static", "adaptive_vs_static"} <= set(p99)
    assert rows["threshold moves"]["static"] == 0
    assert rows["role changes"]["threshold"] == 0
    assert [r["scheduler"] for r in doc["sections"]["backlogs"]] == ["adaptive", "static", "threshold"]
    assert {r["scheduler"] for r in doc["sections"]["decisions"]} == {"adaptive"}
    assert all(r["reason"] for r in doc["sections"]["decisions"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_output_is_byte_identical_for_the_same_seed(cli, tmp_path):
    args = ("simulate", *PAPER, "--synthetic", "paper", "--duration", "300s", "--seed", "7", "--format", "csv",
            "--scheduler", "adaptive", "--rebalance", "1min")
    first, second = cli(*args), cli(*args)
    assert first[0] == 0 and first[1] == second[1]
    svg = [tmp_path / "a.svg", tmp_path / "b.svg"]
    for p in svg:
        assert cli("simulate", *PAPER, "--synthetic", "paper", "--duration", "120s", "--plot", str(p))[0] == 0
    assert svg[0].read_bytes() == svg[1].read_bytes()


@pytest.mark.parametrize("layout", ["homogeneous", "naive"])
def test_baseline_layouts(cli, layout):
    code, out, err = cli("simulate", *PAPER, "--baseline", layout, "--duration", "300s", "--format", "json")
    assert code == 0, err
    head = json.loads(out)["sections"]["summary"][0]
    assert head["remote_share"] == (0.0 if layout == "homogeneous" else 1.0)
    assert head["completed"] == head["arrived"]


def test_other_models_use_the_performance_model(cli):
    code, out, err = cli("simulate", "--trace", TRACE, "--model", "kimi-linear", "--duration", "60s", "--format", "json")
    assert code == 0, err
    assert any("roofline" in n for n in json.loads(out)["notes"])


def _bad_trace(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n{oops\n')
    return str(p)


def _bad_profile(tmp_path):
    p = tmp_path / "drop.csv"
    p.write_text("time_s,gbps\n0,100\n60,-10\n")
    return str(p)


@pytest.mark.parametrize("compare,needle", [("static,nope", "'nope' is not a scheduler"),
                                             ("adaptive", "besides 'adaptive'"),
                                             ("static,static", "named twice")])
def test_compare_refuses_unknown_repeated_or_no_other_scheduler(cli, compare, needle):
    code, _, err = cli("simulate", *PAPER, "--synthetic", "paper", "--duration", "60s", "--scheduler", "adaptive",
                       "--compare", compare)
    assert code != 0 and needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("make_args,needle", [
    (lambda d: ("--trace", _bad_trace(d)), "bad.jsonl:2: "),
    (lambda d: ("--link-profile", _bad_profile(d)), "drop.csv:3: gbps: must be >= 0"),
    (lambda d: ("--prefill-instances", "8"), "has no decode instance"),
    (lambda d: ("--layout", "hub"), "--layout 'hub': no such file"),
    (lambda d: ("--baseline", "hub"), "'hub' is not one of 'prfaas', 'homogeneous', 'naive'"),
    (lambda d: ("--tpot", "25"), "did you mean 25ms?"),
    (lambda d: ("--rtt", "20"), "did you mean 20ms?"),
    (lambda d: ("--scheduler", "fifo"), "'fifo' is not one of 'static', 'threshold', 'adaptive'"),
    (lambda d: ("--rate", "2", "--load", "0.5"), "either --rate or --load"),
    (lambda d: ("--rate", "-1"), "--rate -1.0"),
    (lambda d: ("--synthetic", "zipf"), "--synthetic 'zipf'"),
    (lambda d: ("--link", "fast"), "--link 'fast'"),
    (lambda d: (*PAPER, "--remote", "32xH100"), "--inputs paper covers 8xH200 and 8xH20 only, not 8xH100"),
    (lambda d: ("--trace", str(d / "missing.jsonl")), "no such file"),
    (lambda d: ("--seed", "-1"), "seed -1 must be"),
])
def test_bad_input_is_one_line_exit_2_and_no_plot(cli, tmp_path, make_args, needle):
    plot = tmp_path / "out.png"
    code, out, err = cli("simulate", *PAPER, "--duration", "60s", "--plot", str(plot), *make_args(tmp_path))
    assert code == 2
    assert needle in err and err.count("\n") == 1 and out == ""
    assert not plot.exists() and not list(tmp_path.glob(".*.tmp"))


def test_homogeneous_baseline_follows_local(cli):
    """The homogeneous baseline has as many local-chip instances as the PrfaaS layout (--remote + --local)."""
    code, out, err = cli("simulate", *PAPER, "--baseline", "homogeneous", "--local", "32xH20", "--duration", "120s",
                         "--format", "json")
    assert code == 0, err
    head = json.loads(out)["sections"]["summary"][0]
    assert head["n_prefill"] + head["n_decode"] == 4 + 4


def test_layout_file_is_the_same_file_size_takes(cli, tmp_path):
    body = ("name: one-site\nremote: {instance: 8xH200, instances: 2}\nsites:\n"
            "  - {name: here, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 40G, rtt: 2ms}}\n")
    path = tmp_path / "one.yaml"
    path.write_text(body)
    code, out, err = cli("size", *PAPER, "--layout", str(path), "--format", "json")
    assert code == 0, err
    code, out, err = cli("simulate", *PAPER, "--layout", str(path), "--duration", "120s", "--format", "json")
    assert code == 0, err
    head = json.loads(out)["sections"]["summary"][0]
    assert head["layout"] == "one-site" and head["n_prefill"] + head["n_decode"] == 8
    assert json.loads(out)["meta"]["inputs"]["layout"]["value"] == str(path)


def test_bad_plot_target(cli, tmp_path):
    code, _, err = cli("simulate", "--duration", "60s", "--plot", str(tmp_path / "x.pdf"))
    assert code == 2 and ".png or .svg" in err
    code, _, err = cli("simulate", "--duration", "60s", "--plot", str(tmp_path / "nope" / "x.png"))
    assert code == 2 and "does not exist" in err


def test_homogeneous_baseline_without_a_remote_site_simulates(cli):
    # perf_note read the remote prefill's source before checking there is one (a README example crashed)
    code, out, err = cli("simulate", "--baseline", "homogeneous", "--local", "64xH20", "--tpot", "40tok/s",
                         "--duration", "30s", "--format", "json")
    assert code == 0, err
    inputs = [n for n in json.loads(out)["notes"] if n.startswith("inputs:")]
    assert len(inputs) == 1 and "remote prefill" not in inputs[0]
