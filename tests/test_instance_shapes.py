"""Per-role instance shapes and dtypes (``--remote-instance-chips``, ``--local-instance-chips``,
``--weight-dtype``, ``--kv-dtype``) on size, compare, simulate and reproduce, and layout files planned
with the full ``size`` answer."""

from __future__ import annotations

import json

import pytest

from prfaas_plan import planning
from prfaas_plan.errors import PlanError
from prfaas_plan.planning import Question

QWEN = ("--model", "qwen3.5-397b", "--remote", "8xH200", "--local", "16xH20", "--link", "40G")


def _json(cli, *args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_qwen_does_not_fit_8xh20_and_the_hint_names_the_flags(cli):
    code, out, err = cli("size", *QWEN, "--load", "0.7", "--local-instance-chips", "8")
    assert code == 2 and out == "" and "--local-instance-chips" in err and "--weight-dtype fp8" in err


def test_the_search_finds_the_local_shape_that_fits_qwen(cli):
    """Unpinned, the configuration search skips the 8-chip H20 instances that cannot hold Qwen3.5-397B."""
    doc = _json(cli, "size", *QWEN, "--samples", "0")
    assert doc["sections"]["plan"][0]["local_instance"] == "16xH20"
    assert any(r["site"] == "local" and r["chips_per_instance"] == 8 and "GB" in r["reason"]
               for r in doc["sections"]["infeasible"])


@pytest.mark.parametrize("flags", [("--local-instance-chips", "16"), ("--weight-dtype", "fp8")])
def test_qwen_walkthrough_in_one_size_call(cli, flags):
    doc = _json(cli, "size", *QWEN, "--load", "0.7", "--remote-instance-chips", "8", *flags)
    plan, loaded = doc["sections"]["plan"][0], doc["sections"]["loaded"][0]
    assert plan["remote_instance"] == "8xH200"
    # fp8 weights fit 8-chip H20 instances, but the search (local shape unpinned) may choose another
    assert plan["local_instance"] == "16xH20" if "16" in flags else plan["local_instance"] in ("8xH20", "16xH20")
    assert plan["throughput_rps"] > 0 and plan["capex_usd"] > 0 and plan["cloud_usd_per_hour"] > 0
    assert loaded["rate_rps"] == pytest.approx(0.7 * plan["throughput_rps"])
    assert loaded["loaded_ttft_p90_s"] >= plan["ttft_unloaded_p90_s"]
    assert doc["meta"]["inputs"][flags[0][2:].replace("-", "_")] == {"value": flags[1] if "dtype" in flags[0]
                                                                     else int(flags[1]), "default": False}
    if "--weight-dtype" in flags:
        assert any(n.startswith("weights as fp8 for this run (--weight-dtype") for n in doc["notes"])


def test_remote_shape_changes_only_the_remote_instances(cli):
    pin = ("--instance-chips", "8", "--transfer-bytes", "replicated")
    base = _json(cli, "size", "--remote", "32xH200", "--local", "64xH20", *pin)["sections"]["plan"][0]
    wide = _json(cli, "size", "--remote", "32xH200", "--local", "64xH20", *pin, "--remote-instance-chips", "16")
    row = wide["sections"]["plan"][0]
    assert row["remote_instance"] == "16xH200" and row["remote_prefill_instances"] == 2
    assert row["local_instance"] == base["local_instance"] == "8xH20"
    assert row["capex_usd"] == pytest.approx(base["capex_usd"])   # same chips, other shape


def test_kv_dtype_halves_the_bytes_each_offloaded_request_moves():
    def bytes_per_offload(kv):
        q = Question.parse(model="qwen3-235b", kv_dtype=kv)
        sc = q.scenario
        ev = planning.answer_size(q, threshold=30_000.0).plan.best
        return ev.egress_bps / (ev.lambda_max * ev.p_remote), sc

    bf16, _ = bytes_per_offload(None)
    fp8, sc = bytes_per_offload("fp8")
    assert fp8 / bf16 == pytest.approx(0.5, rel=1e-9)  # GQA only: every byte on the link is KV
    assert sc.model.kv_dtype == "fp8" and any("--kv-dtype" in n for n in sc.notes)


def test_weight_dtype_frees_hbm_for_decode():
    bf16 = planning.perf_inputs(planning.scenario(model="qwen3-235b")).sites["local"].decode.batch
    fp8 = planning.perf_inputs(planning.scenario(model="qwen3-235b", weight_dtype="fp8")).sites["local"].decode.batch
    assert fp8 > bf16


@pytest.mark.parametrize("kwargs,needle", [
    ({"weight_dtype": "fp7"}, "`weight_dtype`: unknown dtype 'fp7'"),
    ({"kv_dtype": "bogus"}, "`kv_dtype`: unknown dtype 'bogus'"),
    ({"local_instance_chips": 3}, "do not make whole 3-chip instances"),
])
def test_bad_shapes_and_dtypes_are_plan_errors(kwargs, needle):
    with pytest.raises(PlanError, match=needle):
        planning.size(planning.scenario(**kwargs))


def test_instance_chips_resolution():
    def shapes(remote=None, local=None):
        q = Question.parse(remote="32xH200", local="64xH20", remote_instance_chips=remote,
                           local_instance_chips=local)
        return q.instance_chips, q.scenario.remote_instance_chips

    assert shapes() == ((8, 8), None)
    assert shapes(remote=16) == ((8, 16), 16)
    assert shapes(local=16) == ((16, 8), 8)
    assert shapes(16, 16) == ((16, 16), None)


def test_compare_and_reproduce_take_the_shapes(cli):
    doc = _json(cli, "compare", *QWEN, "--local-instance-chips", "16", "--basis", "instances")
    rows = {r["layout"]: r for r in doc["sections"]["compare"]}
    assert {r["local_instance"] for r in rows.values()} == {"16xH20"}
    assert rows["prfaas-pd"]["remote_instance"] == "8xH200"
    code, out, err = cli("reproduce", "--inputs", "predicted", "--kv-dtype", "fp8", "--format", "json")
    assert code in (0, 1), err
    assert any("--kv-dtype" in n for n in json.loads(out)["notes"])


def test_simulate_accepts_the_same_flags(cli):
    # pinned to 8-chip instances, qwen3.5-397b does not fit on H20 and the error names the flag to change
    code, _, err = cli("simulate", *QWEN, "--instance-chips", "8", "--duration", "60s")
    assert code == 2 and "--local-instance-chips" in err
    # unpinned, simulate searches the shapes as size does and finds the 16-chip local instance that fits
    doc = _json(cli, "simulate", *QWEN, "--duration", "60s")
    local = {c["chips_per_instance"] for c in doc["sections"]["configurations"] if c["site"] == "local"}
    assert local == {16} and doc["sections"]["summary"][0]["completed"] > 0
    doc = _json(cli, "simulate", *QWEN, "--local-instance-chips", "16", "--weight-dtype", "fp8",
                "--duration", "120s", "--load", "0.5")
    summary = doc["sections"]["summary"][0]
    assert summary["n_prefill"] + summary["n_decode"] == 1          # 16xH20 is one 16-chip instance
    assert summary["completed"] > 0
    assert any(n.startswith("weights as fp8 for this run") for n in doc["notes"])


ONE_SITE = ("name: one\nremote: {instance: 8xH200, instances: 4}\nthreshold: auto\nsites:\n"
            "  - {name: a, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 100G, rtt: RTT}}\n")


def _layout(tmp_path, rtt="20ms", threshold="auto"):
    p = tmp_path / f"one-{rtt}-{threshold}.yaml"
    p.write_text(ONE_SITE.replace("RTT", rtt).replace("threshold: auto", f"threshold: {threshold}"))
    return str(p)


@pytest.mark.parametrize("flags,needle", [
    (("--remote-instance-chips", "0"), "--remote-instance-chips"),
    (("--local-instance-chips", "x"), "--local-instance-chips"),
    (("--weight-dtype", "fp7"), "--weight-dtype: unknown dtype 'fp7'"),
    (("--kv-dtype", "int3"), "--kv-dtype: unknown dtype 'int3'"),
])
@pytest.mark.parametrize("command", ["size", "compare", "simulate", "reproduce"])
def test_bad_shape_flags_are_one_line_exit_2(cli, command, flags, needle):
    code, out, err = cli(command, *flags)
    assert code == 2 and out == "" and needle in err


def test_layout_defaults_note_leaves_out_what_the_file_replaces(cli, tmp_path):
    code, out, err = cli("size", "--model", "prfaas-1t", "--inputs", "paper", "--layout", _layout(tmp_path))
    assert code == 0, err
    note = next(l for l in out.splitlines() if l.startswith("note: defaults in effect"))
    assert "--remote" not in note and "--link " not in note and "--tpot 25ms" in note


def test_one_site_layout_file_gets_the_full_answer(cli, tmp_path):
    plot = tmp_path / "t.svg"
    doc = _json(cli, "size", "--model", "prfaas-1t", "--inputs", "paper", "--layout", _layout(tmp_path),
                "--load", "0.7", "--ttft", "p90<8s", "--plot", str(plot))
    s = doc["sections"]
    assert {"plan", "stages", "loaded", "slo"} <= set(s)
    assert s["plan"][0]["layout"] == "one" and s["plan"][0]["instances"] == "4R + 8 (=3P+5D)"  # split kept
    assert s["plan"][0]["capex_usd"] > 0 and plot.read_text().lstrip().startswith("<?xml")
    assert any("its split 3P+5D is kept" in n and "rtt 20 ms from the file" in n for n in doc["notes"])


def test_layout_file_keeps_its_rtt_and_threshold(cli, tmp_path):
    def plan(**kw):
        return _json(cli, "size", "--model", "prfaas-1t", "--inputs", "paper",
                     "--layout", _layout(tmp_path, **kw))["sections"]["plan"][0]

    near, far = plan(rtt="1us"), plan(rtt="200ms")
    assert far["ttft_unloaded_p99_s"] > near["ttft_unloaded_p99_s"]     # remote requests pay RTT/2
    pinned = plan(threshold="16k")
    assert pinned["threshold_tokens"] == 16 * 1024


def test_a_fixed_threshold_that_leaves_the_split_free_says_so():
    a = planning.answer_size(Question.parse(remote="8xH200", local="64xH20"), threshold=500.0)
    note = next(n for n in a.notes if n.startswith("the split is not unique"))
    lam = a.plan.surface.lam.max(axis=0)
    reach = a.plan.surface.splits[lam >= a.plan.best.lambda_max * (1 - 1e-9)]
    assert f"{reach.min()} to {reach.max()} local prefill instances" in note and a.plan.best.binding in note


def test_multi_site_counts_are_never_negative(cli, tmp_path):
    p = tmp_path / "two.yaml"
    p.write_text(ONE_SITE.replace("RTT", "1ms") + "  - {name: b, instance: 8xH20, prefill: 0, decode: 1, "
                 "link: {bandwidth: 1G}}\n")
    doc = _json(cli, "size", "--model", "prfaas-1t", "--inputs", "paper", "--layout", str(p))
    assert all("-" not in r["instances"] for r in doc["sections"]["sites"])
