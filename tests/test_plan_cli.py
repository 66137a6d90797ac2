"""``size`` / ``compare`` / ``reproduce`` on the command line: outputs, defaults shown, bad input."""

from __future__ import annotations

import json
import re

import pytest

PAPER = ("--model", "prfaas-1t", "--inputs", "paper")


def _size_flags() -> set[str]:
    import typer.main

    from prfaas_plan.cli import full_app

    size = typer.main.get_command(full_app()).commands["size"]
    return {o for p in size.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}


SIZE_FLAGS = _size_flags()


def test_size_json_has_unit_keys_and_shows_defaults(cli):
    code, out, err = cli("size", *PAPER, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    plan = doc["sections"]["plan"][0]
    for key in ("threshold_tokens", "throughput_rps", "egress_gbps", "link_utilization", "ttft_unloaded_p90_s",
                "capex_usd", "binding_stage"):
        assert key in plan
    assert plan["instances"].startswith("4R + 8 (=")
    assert doc["meta"]["inputs"]["link"] == {"value": "100G", "default": True}
    assert doc["meta"]["inputs"]["model"] == {"value": "prfaas-1t", "default": False}
    assert any(n.startswith("remote prefill: measured") for n in doc["notes"])


def test_size_target_rate_sizes_a_cluster(cli):
    code, out, err = cli("size", *PAPER, "--target-rate", "5", "--format", "json")
    assert code == 0, err
    target = json.loads(out)["sections"]["target"][0]
    assert target["capacity_rps"] >= 5 - 1e-6
    assert target["pure_threshold"] is True


def test_the_cheapest_cluster_is_routed_by_a_threshold_where_one_reaches_its_capacity(cli):
    """At 200 req/s on the defaults the cheapest counts leave a stage with slack, so the fixed-hardware
    program's routing is one of many tied ones, and HiGHS returned one sending alternate long bins each way
    (no threshold). Among the tied routings the planner reports the threshold one: the same capacity, a
    threshold a router can be given."""
    code, out, err = cli("size", "--target-rate", "200", "--samples", "0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    target = doc["sections"]["target"][0]
    assert target["capacity_rps"] >= 200 - 1e-6 and target["remote_instances"] > 0
    assert target["pure_threshold"] is True and 0 < target["threshold_tokens"] < 131_072
    assert not any("no single threshold" in n for n in doc["notes"])


def test_compare_csv_lists_every_baseline(cli):
    code, out, err = cli("compare", *PAPER, "--format", "csv")
    assert code == 0, err
    assert out.startswith("# prfaas-plan ") and "# note: baselines: local-alone = your local chips" in out
    lines = [l for l in out.strip().splitlines() if not l.startswith("#")]
    assert lines[0].startswith("section,layout,")  # several sections: compare, error_bars
    # one homogeneous baseline: the one at the basis (capex by default: every chip has a price)
    assert [l.split(",")[1] for l in lines[1:] if l.startswith("compare,")] == [
        "prfaas-pd", "local-alone", "homogeneous-equal-capex", "naive-heterogeneous"]


@pytest.mark.parametrize("basis,price_key", [("capex", "capex_usd"), ("cost", "capex_usd"),
                                             ("rental", "cloud_usd_per_hour")])
def test_compare_equal_budget_baseline_spends_the_budget(cli, basis, price_key):
    code, out, err = cli("compare", *PAPER, "--basis", basis, "--format", "json")
    assert code == 0, err
    rows = {r["layout"]: r for r in json.loads(out)["sections"]["compare"]}
    name = "homogeneous-equal-" + ("capex" if basis == "cost" else basis)
    budget, spent = rows["prfaas-pd"][price_key], rows[name][price_key]
    per_instance = rows["local-alone"][price_key] / 8          # the local cluster is 8 instances of 8xH20
    assert spent <= budget < spent + per_instance               # as many instances as the budget buys
    assert rows["local-alone"]["instances"].startswith("8 (=")  # 64xH20 alone, no remote
    assert "homogeneous-pd" not in rows  # one basis per answer


@pytest.mark.parametrize("basis,count", [("instances", 16), ("chips", 12)])
def test_compare_count_baselines_hold_instances_or_chips(cli, basis, count):
    # 32xH200 in 4-chip instances + 64xH20 in 8-chip ones: 16 instances but 96 chips = 12 local 8xH20 instances
    code, out, err = cli("compare", "--model", "kimi-linear", "--remote-instance-chips", "4", "--basis", basis,
                         "--local-instance-chips", "8", "--transfer-bytes", "replicated", "--samples", "0",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["layout"]: r for r in doc["sections"]["compare"]}
    name = "homogeneous-pd" if basis == "instances" else "homogeneous-equal-chips"
    assert rows[name]["instances"].startswith(f"{count} (=") and doc["meta"]["basis"] == basis


@pytest.mark.parametrize("link", ["1k", "1M", "100M", "0.01G"])
def test_a_slow_link_is_a_valid_input_with_a_warning(cli, link):
    """Any positive link rate plans (the old rule refused 100M but planned 1M and 1k); a link too slow to
    offload says so."""
    code, out, err = cli("size", *PAPER, "--link", link, "--format", "json")
    assert code == 0, err
    assert "this plan is in effect homogeneous PD" in out or "it adds little here" in out


def test_plot_is_written_whole(cli, tmp_path):
    target = tmp_path / "sweep.svg"
    code, _, err = cli("size", *PAPER, "--plot", str(target))
    assert code == 0, err
    assert target.read_text().lstrip().startswith("<?xml") and list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("args,needle", [
    (("size", *PAPER, "--link", "fast"), "--link 'fast'"),
    (("size", *PAPER, "--link", "-3G"), "--link '-3G'"),
    (("size", *PAPER, "--remote", "0xH200"), "--remote '0xH200'"),
    (("size", *PAPER, "--remote", "100000000xH200"), "cap of 1,000,000 chips"),
    (("kv", "--model", "prfaas-1t", "--len", "1e30"), "--len '1e30': more than the planner's cap"),
    (("size", *PAPER, "--local", "12xH20"), "whole 8-chip instances"),
    (("size", *PAPER, "--remote", "32xH900"), "unknown chip 'h900'"),
    (("size", *PAPER, "--target-rate", "-1"), "--target-rate"),
    (("size", *PAPER, "--target-rate", "nan"), "--target-rate nan"),
    (("size", *PAPER, "--target-rate", "inf"), "--target-rate inf"),
    (("size", *PAPER, "--target-rate", "1e30"), "target rate 1e+30 req/s cannot be served"),
    (("size", *PAPER, "--link-price", "nan"), "--link-price nan"),
    (("size", *PAPER, "--link-price", "inf"), "--link-price inf"),
    (("size", *PAPER, "--workload", "nope"), "--workload 'nope'"),
    (("size", *PAPER, "--mode", "fancy"), "'--mode': 'fancy' is not one of"),
    (("size", "--model", "qwen3-235b", "--inputs", "paper"), "--inputs paper exists only for prfaas-1t"),
    (("compare", *PAPER, "--basis", "vibes"), "'vibes' is not one of 'capex', 'rental', 'chips', 'instances', 'cost'"),
    (("reproduce", "--inputs", "guess"), "'guess' is not one of 'predicted', 'paper'"),
    (("size", "--model", "qwen3.5-397b", "--local", "64xH20", "--local-instance-chips", "8"),
     "qwen3.5-397b cannot decode on 8xH20: its weights leave no HBM"),
    (("size", "--tpot", "0.1ms"), "within a 0.1 ms TPOT"),
    (("size", *PAPER, "--link", "100"), "give a unit, e.g. 100G"),
    (("size", *PAPER, "--tpot", "25"), "--tpot '25': give a unit (ms, s, min); did you mean 25ms?"),
    (("size", *PAPER, "--rtt", "20"), "--rtt '20': give a unit (ms, s, min); did you mean 20ms?"),
    (("compare", *PAPER, "--rtt", "20"), "did you mean 20ms?"),
    (("size", *PAPER, "--ttft", "p90<4"), "did you mean 4s?"),
    (("size", *PAPER, "--threshold", "lots"), "--threshold 'lots'"),
])
def test_bad_plan_input_is_one_line_exit_2(cli, args, needle, tmp_path):
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_plot_name_writes_nothing(cli, tmp_path):
    code, _, err = cli("size", *PAPER, "--plot", str(tmp_path / "x.jpg"))
    assert code == 2 and "--plot" in err and list(tmp_path.iterdir()) == []


def test_multi_site_layout_file(cli, tmp_path):
    lay = tmp_path / "two.yaml"
    lay.write_text("name: two\nremote: {instance: 8xH200, instances: 4}\nsites:\n"
                   "  - {name: a, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 100G}}\n"
                   "  - {name: b, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 1G}}\n")
    code, out, err = cli("size", *PAPER, "--layout", str(lay), "--format", "json")
    assert code == 0, err
    rows = {r["site"]: r for r in json.loads(out)["sections"]["sites"]}
    assert rows["total"]["throughput_rps"] == pytest.approx(rows["a"]["throughput_rps"] + rows["b"]["throughput_rps"])
    assert rows["b"]["egress_gbps"] <= 0.95 * 1.0 + 1e-9          # a 1G link carries at most its goodput
    assert rows["a"]["egress_gbps"] >= rows["b"]["egress_gbps"]


ONE_SITE = ("name: one\nremote: {instance: 8xH200, instances: 4}\nthreshold: auto\nsites:\n"
            "  - {name: a, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 100G, rtt: 20ms}}\n")
TWO_SITES = ONE_SITE.replace("name: one", "name: two") + \
    "  - {name: b, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 1G}}\n"


@pytest.mark.parametrize("flags", [("--remote", "32xH200"), ("--instance-chips", "4"), ("--rtt", "2ms"),
                                   ("--local-instance-chips", "16")])
def test_layout_file_rejects_flags_it_replaces(cli, tmp_path, flags):
    lay = tmp_path / "one.yaml"
    lay.write_text(ONE_SITE)
    code, out, err = cli("size", *PAPER, "--layout", str(lay), *flags)
    assert code == 2 and out == "" and flags[0] in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags", [("--load", "0.8"), ("--ttft", "p90<4s"), ("--verify",), ("--size-link", "0.9")])
def test_multi_site_layout_file_rejects_follow_up_questions(cli, tmp_path, flags):
    lay = tmp_path / "two.yaml"
    lay.write_text(TWO_SITES)
    code, out, err = cli("size", *PAPER, "--layout", str(lay), *flags)
    assert code == 2 and out == "" and f"{flags[0]}:" in err and len(err.strip().splitlines()) == 1
    # every option the refusal names is one `size` has (issue 22: it advised "--ttft-slo", "--verify-lp")
    named = set(re.findall(r"--[a-z][a-z-]*", err))
    assert named and named <= SIZE_FLAGS, named - SIZE_FLAGS


@pytest.mark.parametrize("body,needle", [
    ("name: x\nsites: []\n", "sites must have at least 1 item, not []"),
    ("name: x\nremote: {instance: 8xH200, instances: 4}\nsites:\n  - {name: a, instance: 8xH20, prefill: 0, "
     "decode: 0, link: {bandwidth: 10G}}\n", "has no instances"),
    ("name: x\nremote: {instance: 8xH200, instances: 4}\nsites:\n  - {name: a, instance: 8xH20, prefill: 1, "
     "decode: 1}\n", "has no link"),
    ("name: x\nsites:\n  - {name: a, instance: 8xH20, prefill: 1, decode: 1, link: {bandwidth: -1G}}\n",
     "bandwidth '-1G'"),
])
def test_bad_layout_file(cli, tmp_path, body, needle):
    lay = tmp_path / "bad.yaml"
    lay.write_text(body)
    code, _, err = cli("size", *PAPER, "--layout", str(lay))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_size_verify_and_link_sizing(cli):
    code, out, err = cli("size", *PAPER, "--verify", "--size-link", "0.95", "--link-price", "100",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)["sections"]
    assert abs(doc["verify"][0]["difference"]) < 0.01 and doc["verify"][0]["pure_threshold"]
    sized = doc["link_sizing"][0]
    assert sized["link_line_rate_gbps"] < 100 and sized["link_goodput_gbps"] > doc["plan"][0]["egress_gbps"] * 0.5
    assert doc["plan"][0]["cloud_usd_per_hour"] > 0


def test_compare_load_runs_every_layout_at_one_rate(cli):
    code, out, err = cli("compare", *PAPER, "--load", "0.8", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    unloaded = {r["layout"]: r for r in doc["sections"]["compare"]}
    offered = 0.8 * unloaded["prfaas-pd"]["throughput_rps"]
    assert doc["meta"]["offered_rps"] == pytest.approx(offered)
    for row in doc["sections"]["at_rate"]:
        lam = unloaded[row["layout"]]["throughput_rps"]
        assert row["offered_rps"] == pytest.approx(offered)
        assert row["saturated"] == (lam <= offered)
        assert row["served_rps"] == pytest.approx(min(offered, lam))
        if row["saturated"]:
            assert row["loaded_ttft_p90_s"] is None
        else:
            assert row["loaded_ttft_p90_s"] >= unloaded[row["layout"]]["ttft_unloaded_p90_s"]
            assert row["utilization_of_lambda_max"] == pytest.approx(offered / lam, rel=1e-6)
        tokens_per_hour = row["served_rps"] * 1024 * 3600
        assert row["usd_per_mtok_cloud"] == pytest.approx(
            unloaded[row["layout"]]["cloud_usd_per_hour"] / tokens_per_hour * 1e6)
    saturated = {r["layout"] for r in doc["sections"]["at_rate"] if r["saturated"]}
    assert "local-alone" in saturated and "prfaas-pd" not in saturated  # 64xH20 alone: fewer than 0.8 of 12 instances
    warned = next(w["message"] for w in doc["warnings"] if w["code"] == "saturated-at-rate")
    assert all(name in warned for name in saturated)
    code, _, err = cli("size", *PAPER, "--load", "1.5")
    assert code == 2 and "--load 1.5" in err


def test_compare_rate_is_one_given_rate(cli):
    code, out, err = cli("compare", *PAPER, "--rate", "1.5", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["meta"]["offered_rps"] == 1.5 and doc["meta"]["offered_load"] is None
    assert {r["offered_rps"] for r in doc["sections"]["at_rate"]} == {1.5}
    code, out, err = cli("compare", *PAPER, "--rate", "1.5", "--load", "0.5")
    assert code == 2 and out == "" and "either --load or --rate" in err


def test_ttft_slo_gives_the_rate_within_it(cli):
    rates = {}
    for slo in ("p90<5s", "p90<8s"):
        code, out, err = cli("size", *PAPER, "--ttft", slo, "--format", "json")
        assert code == 0, err
        row = json.loads(out)["sections"]["slo"][0]
        assert row["met"] and row["ttft_p90_s"] <= float(slo[4:-1]) + 1e-6 and row["load"] < 1
        rates[slo] = row["rate_rps"]
    assert rates["p90<5s"] < rates["p90<8s"]  # a tighter SLO never admits more load
    code, out, _ = cli("size", *PAPER, "--ttft", "p99<0.1s", "--format", "json")
    assert code == 0 and json.loads(out)["sections"]["slo"][0]["met"] is False


def test_any_percentile_slo(cli):
    """p95 sits between p90 and p99 in the rate each admits (a looser percentile admits more load)."""
    rates = {}
    for q in ("p90", "p95", "p99"):
        code, out, err = cli("size", *PAPER, "--ttft", f"{q}<8s", "--format", "json")
        assert code == 0, err
        row = json.loads(out)["sections"]["slo"][0]
        assert row["met"] and row["ttft_at_slo_s"] <= 8 + 1e-6
        rates[q] = row["rate_rps"]
    assert rates["p90"] >= rates["p95"] >= rates["p99"]


def test_threshold_pins_t(cli):
    code, out, err = cli("size", *PAPER, "--threshold", "8k", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)["sections"]["plan"][0]
    assert plan["threshold_tokens"] == 8192
    code, out, _ = cli("size", *PAPER, "--format", "json")
    assert json.loads(out)["sections"]["plan"][0]["throughput_rps"] >= plan["throughput_rps"]  # the optimum is no worse


@pytest.mark.parametrize("slo", ["p90", "p90<", "p101<4s", "p0<4s", "p90<-4s", "p100<4s"])
def test_bad_ttft_slo(cli, slo):
    code, _, err = cli("size", *PAPER, "--ttft", slo)
    assert code == 2 and len(err.strip().splitlines()) == 1 and ("--ttft" in err or "percentile" in err)


def test_write_atomic_failure_is_a_plan_error_naming_the_path(tmp_path):
    from prfaas_plan.errors import PlanError
    from prfaas_plan.output.report import write_atomic

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(PlanError, match="a-file/out.svg"):
        write_atomic(blocker / "out.svg", "data")        # parent exists but is not a folder
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(PlanError, match="a-folder"):
        write_atomic(folder, b"data")                      # the target is a folder: rename fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "a-folder"]
    assert list(folder.iterdir()) == []                   # the temporary sibling was removed


def test_unwritable_plot_is_one_line_exit_1(cli, tmp_path):
    (tmp_path / "a-file").write_text("x")
    code, out, err = cli("size", *PAPER, "--plot", str(tmp_path / "a-file" / "sweep.png"))
    assert code == 1 and "sweep.png" in err and len(err.strip().splitlines()) == 1 and out == ""


def test_cost_basis_without_prices_is_one_line_exit_2(cli, tmp_path):
    from pathlib import Path

    h20 = (Path(__file__).parent.parent / "hardware_profiles" / "h20.yaml").read_text().splitlines()
    body = [l for l in h20 if not l.startswith(("price:", "aliases:")) and "price" not in l]
    (tmp_path / "h20np.yaml").write_text("\n".join(body).replace("name: h20", "name: h20np", 1) + "\n")
    code, out, err = cli("--profiles", str(tmp_path), "compare", "--local", "64xH20NP", "--basis", "cost")
    assert code == 2 and out == "" and "--basis capex needs prices" in err
    assert len(err.strip().splitlines()) == 1


def test_size_plans_in_exact_mode_with_replicated_bytes_by_default(cli):
    # pinned shape: the replicated default of the fixed-shape plan (a searched plan's bytes follow its decode)
    code, out, err = cli("size", "--model", "qwen3-235b", "--format", "json", "--samples", "0", "--instance-chips", "8",
                         "--transfer-bytes", "replicated")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["meta"]["inputs"]["mode"] == {"value": "exact", "default": True}
    assert doc["meta"]["inputs"]["transfer_bytes"] == {"value": "replicated", "default": False}
    assert any(n.startswith("transfer bytes: replicated (default;") and "2.00x" in n for n in doc["notes"])
    assert "error_bars" not in doc["sections"]
    code, out, _ = cli("size", "--model", "qwen3-235b", "--format", "json", "--samples", "0",
                       "--transfer-bytes", "logical", "--instance-chips", "8")
    logical = json.loads(out)["sections"]["plan"][0]
    replicated = doc["sections"]["plan"][0]

    def per_req(p):  # bytes per offloaded request, in Gbit
        return p["egress_gbps"] / (p["throughput_rps"] * p["offloaded_share"])

    assert per_req(replicated) > 1.2 * per_req(logical)


def test_size_error_bars_and_degraded_link(cli):
    code, out, err = cli("size", *PAPER, "--link-degraded", "10G", "--load", "0.2", "--samples", "200",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    bars = {r["quantity"]: r for r in doc["sections"]["error_bars"]}
    for q in ("throughput_rps", "prfaas_gain_x", "threshold_tokens", "egress_gbps"):
        assert bars[q]["p10"] <= bars[q]["p50"] <= bars[q]["p90"]
    # the verdict is a word in meta, not a string in the numeric `point` column (issue 24)
    assert doc["meta"]["verdict"] in ("pays", "does not pay", "cannot tell")
    assert doc["meta"]["verdict_line"].startswith(f"verdict vs {doc['meta']['verdict_vs']}: ")
    assert all(isinstance(r["point"], (int, float)) for r in doc["sections"]["error_bars"])
    deg = doc["sections"]["degraded_link"][0]
    assert deg["degraded_link_gbps"] == 10 and 0 < deg["kept"] <= 1
    assert deg["switch_to_threshold_tokens"] >= deg["planned_threshold_tokens"]
    assert deg["degraded_rps"] >= deg["rps_keeping_threshold"]
    assert deg["offered_rps"] == pytest.approx(0.2 * doc["sections"]["plan"][0]["throughput_rps"])
    assert deg["loaded_ttft_p90_s"] >= deg["ttft_unloaded_p90_s"]


def test_compare_shows_error_bars_against_its_homogeneous_layout(cli):
    code, out, err = cli("compare", *PAPER, "--samples", "100", "--basis", "instances", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["quantity"] for r in doc["sections"]["error_bars"]} >= {"throughput_rps", "prfaas_gain_x"}
    assert any(n.startswith("verdict vs homogeneous-pd (12x8xH20): PrfaaS pays at equal instance count")
               for n in doc["notes"])


def test_modes_disagreeing_on_the_verdict_is_a_warning(cli):
    # minimax-m2.5 at 100G on the defaults: the representative stages at E[L] understate PrfaaS-PD's gain
    code, out, err = cli("size", "--model", "minimax-m2.5", "--link", "100G", "--samples", "0", "--basis", "instances",
                         "--instance-chips", "8", "--transfer-bytes", "replicated", "--format", "json")
    assert code == 0, err
    message = {w["code"]: w["message"] for w in json.loads(out)["warnings"]}["modes-disagree"]
    gains = dict(re.findall(r"(representative|exact) mode: gain ([0-9.]+)", message))
    assert float(gains["representative"]) < 1 < float(gains["exact"]), message


@pytest.mark.parametrize("args,needle", [
    (("size", *PAPER, "--transfer-bytes", "physical"), "physical"),
    (("size", *PAPER, "--link-degraded", "fast"), "--link-degraded 'fast'"),
    (("compare", *PAPER, "--transfer-bytes", "x"), "'x'"),
])
def test_bad_transfer_or_degraded_option_is_one_line_exit_2(cli, args, needle):
    code, out, err = cli(*args)
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


def test_compare_table_fits_100_columns_with_one_column_per_layout(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli("compare", "--model", "kimi-linear", "--samples", "0")
    assert code == 0, err
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 100
    header = next(line for line in table if "prfaas-pd" in line)
    assert "local-alone" in header   # layouts are columns, quantities rows
