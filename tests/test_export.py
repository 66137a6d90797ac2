"""``prfaas-plan export``: launch files from the README's first plan for every target, each flag in the
bundled argument list of its engine version, Kubernetes YAML valid against the Kubernetes schemas, the
threshold in each router's form, and nothing half-written."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from prfaas_plan.errors import PlanError
from prfaas_plan.output.deploy import ENGINE_VERSIONS, engine_args, flags_in, min_uncached_tokens
from prfaas_plan.planning.export import answer_export, read_plan

README_PLAN = ("size", "--model", "kimi-linear", "--link", "100G", "--link-degraded", "10G", "-f", "json")
# the fixed 8-chip shape (no configuration search): the derived-parallelism path; the searched plan below
FIXED_PLAN = README_PLAN + ("--instance-chips", "8", "--transfer-bytes", "replicated")


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    from prfaas_plan.cli import run

    path = tmp_path_factory.mktemp("plan") / "plan.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run(list(FIXED_PLAN)) == 0
    doc = json.loads(buf.getvalue())
    doc["sections"].pop("configurations")  # a plan without the search's section: parallelism is derived
    path.write_text(json.dumps(doc))
    return path


def _commands(folder):
    """Every command line of the written shell scripts, as argument lists."""
    out = {}
    for sh in sorted(folder.glob("*.sh")):
        lines = [ln for ln in sh.read_text().splitlines() if ln and not ln.startswith(("#", "set ", "export "))]
        assert len(lines) == 1, sh
        out[sh.name] = shlex.split(lines[0].replace('"${IB_DEVICE:?', "X${").replace("mlx5_0}\"", "}"))
    return out


@pytest.mark.parametrize("target, engine", [("sglang", "sglang"), ("vllm", "vllm"), ("llm-d", "vllm")])
def test_every_flag_written_is_a_server_argument_of_the_engine_version(plan_file, tmp_path, target, engine):
    answer_export(str(plan_file), target, str(tmp_path / "out"))
    commands = _commands(tmp_path / "out")
    assert set(commands) == {"remote-prefill.sh", "local-prefill.sh", "local-decode.sh"}
    known = engine_args(engine, ENGINE_VERSIONS[engine])
    for name, cmd in commands.items():
        assert flags_in(cmd) and set(flags_in(cmd)) <= known, (name, set(flags_in(cmd)) - known)


def test_dynamo_frontend_takes_the_threshold_and_workers_take_sglang_flags(plan_file, tmp_path):
    answer_export(str(plan_file), "dynamo", str(tmp_path / "d"))
    commands = _commands(tmp_path / "d")
    dyn, sgl = engine_args("dynamo", "1.6.1"), engine_args("sglang", "0.5.9")
    plan = json.loads(plan_file.read_text())["sections"]
    for name, cmd in commands.items():
        assert set(flags_in(cmd)) <= (dyn if name.startswith("frontend") else dyn | sgl), name
    config = json.loads(commands["frontend.sh"][commands["frontend.sh"].index("--router-conditional-disagg-config") + 1])
    assert config == {"policy": "isl_bounding", "eff_isl_threshold": int(plan["plan"][0]["threshold_tokens"])}
    degraded = commands["frontend-degraded-link.sh"]
    assert str(int(plan["degraded_link"][0]["switch_to_threshold_tokens"])) in degraded[-1]
    assert "no setting that picks between two prefill pools" in (tmp_path / "d" / "frontend.sh").read_text()


def test_llmd_decider_threshold_is_the_plans_t_in_uncached_tokens(plan_file, tmp_path):
    answer_export(str(plan_file), "llm-d", str(tmp_path / "l"))
    sections = json.loads(plan_file.read_text())["sections"]
    for name, t in (("epp-config.yaml", sections["plan"][0]["threshold_tokens"]),
                    ("epp-config-degraded-link.yaml", sections["degraded_link"][0]["switch_to_threshold_tokens"])):
        doc = yaml.safe_load((tmp_path / "l" / name).read_text())
        decider = next(p for p in doc["plugins"] if p["type"] == "prefix-based-pd-decider")
        n = decider["parameters"]["nonCachedTokens"]
        assert n == min_uncached_tokens(t) and n - 1 <= t < n   # > t in whole tokens
        handler = next(p for p in doc["plugins"] if p["type"] == "pd-profile-handler")
        assert handler["parameters"]["deciderPluginName"] == "prefix-based-pd-decider"


def test_instances_batch_and_chunk_come_from_the_plan(plan_file, tmp_path):
    d = read_plan(str(plan_file))
    row = json.loads(plan_file.read_text())["sections"]["plan"][0]
    counts = {(r.site, r.role): r.instances for r in d.roles}
    assert counts == {("remote", "prefill"): row["remote_prefill_instances"],
                      ("local", "prefill"): row["local_prefill_instances"],
                      ("local", "decode"): row["local_decode_instances"]}
    assert all(r.tp == r.chips for r in d.roles) and all("derived" in r.basis for r in d.roles)
    decode = next(r for r in d.roles if r.role == "decode")
    from prfaas_plan.planning.rates import answer_rates

    rates = answer_rates("kimi-linear", "8xH20", [8192], 0.025, 27486, 1024)
    assert decode.batch > 0 and abs(decode.batch - rates.decode[0]["batch"]) <= 0.05 * decode.batch
    assert d.chunk_tokens == 8192


def test_kubernetes_yaml_validates_against_the_kubernetes_schemas(plan_file, tmp_path):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for engine in ("sglang", "vllm"):
        answer_export(str(plan_file), "k8s", str(tmp_path / engine), engine=engine)
        docs = list(yaml.safe_load_all((tmp_path / engine / "deployments.yaml").read_text()))
        assert [d["kind"] for d in docs] == ["Deployment"] * 3 + ["ConfigMap"]
        for doc in docs:
            kubernetes_validate.validate(doc, "1.30", strict=True)
        for doc in docs[:3]:
            c = doc["spec"]["template"]["spec"]["containers"][0]
            assert set(flags_in(c["command"] + c["args"])) <= engine_args(engine, ENGINE_VERSIONS[engine])
            assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
        rule = json.loads(docs[3]["data"]["router-rule.json"])
        assert rule["degraded_link"]["link_gbps"] == 10


def test_schema_check_catches_a_wrong_manifest():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"replicas": "two", "selector": {}, "template": {}}}
    with pytest.raises(Exception):
        kubernetes_validate.validate(bad, "1.30", strict=True)


def test_a_searched_plan_exports_its_own_configurations(cli, tmp_path):
    """The searched plan's `configurations` section (size's default) goes straight into the engine flags."""
    code, out, err = cli(*README_PLAN, "--samples", "0")
    assert code == 0, err
    path = tmp_path / "searched.json"
    path.write_text(out)
    doc = json.loads(out)
    d = read_plan(str(path))
    want = {(c["site"], c["role"]): c for c in doc["sections"]["configurations"]}
    for r in d.roles:
        c = want[(r.site, r.role)]
        assert (r.chips, r.tp, r.ep, r.dp_attention) == (c["chips_per_instance"], c["tp"], c["ep"], c["dp_attention"])
        assert "configurations section" in r.basis


def test_configurations_section_sets_parallelism_when_present(plan_file, tmp_path):
    doc = json.loads(plan_file.read_text())
    doc["sections"]["configurations"] = [
        {"role": "decode", "site": "local", "chips_per_instance": 8, "tp": 8, "ep": 8, "dp_attention": True,
         "batch": 64, "weight_dtype": "fp8", "kv_dtype": "fp8"}]
    path = tmp_path / "with-config.json"
    path.write_text(json.dumps(doc))
    answer_export(str(path), "sglang", str(tmp_path / "s"))
    cmd = _commands(tmp_path / "s")["local-decode.sh"]
    for flag, value in (("--ep-size", "8"), ("--dp-size", "8"), ("--max-running-requests", "64"),
                        ("--quantization", "fp8"), ("--kv-cache-dtype", "fp8_e4m3")):
        assert cmd[cmd.index(flag) + 1] == value
    assert "--enable-dp-attention" in cmd
    assert "configurations section" in (tmp_path / "s" / "local-decode.sh").read_text()
    doc["sections"]["configurations"][0]["pipeline"] = 2
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match="unknown key 'pipeline'"):
        read_plan(str(path))


@pytest.mark.parametrize("batch, sglang_total, vllm_per_rank", [(64, "64", "8"), (63, "56", "7"), (5, "8", "1")])
def test_dp_attention_batch_is_written_as_each_engine_counts_it(plan_file, tmp_path, batch, sglang_total,
                                                                vllm_per_rank):
    """SGLang's --max-running-requests is the instance's total, which its scheduler divides over the DP ranks;
    vLLM runs one engine core per DP rank, so --max-num-seqs is per rank. A plan's batch that does not divide
    is rounded down to whole ranks (at least one request each), and the script says so."""
    doc = json.loads(plan_file.read_text())
    doc["sections"]["configurations"] = [
        {"role": "decode", "site": "local", "chips_per_instance": 8, "tp": 8, "ep": 8, "dp_attention": True,
         "batch": batch, "weight_dtype": "fp8", "kv_dtype": "fp8"}]
    path = tmp_path / "dp.json"
    path.write_text(json.dumps(doc))
    for engine, flag, want in (("sglang", "--max-running-requests", sglang_total),
                               ("vllm", "--max-num-seqs", vllm_per_rank)):
        answer_export(str(path), engine, str(tmp_path / engine))
        cmd = _commands(tmp_path / engine)["local-decode.sh"]
        assert cmd[cmd.index(flag) + 1] == want
        assert f"(the plan's {batch})" in (tmp_path / engine / "local-decode.sh").read_text()


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.pop("sections"), "not a prfaas-plan JSON"),
    (lambda d: d["sections"].pop("plan"), "no 'plan' section"),
    (lambda d: d["sections"]["plan"][0].update(layout="homogeneous-pd"), "prfaas-pd plans"),
    (lambda d: d["sections"]["plan"][0].update(threshold_tokens="many"), "threshold_tokens"),
    (lambda d: d["sections"]["plan"][0].update(local_decode_instances=1.5), "whole number"),
])
def test_bad_plans_are_refused_in_one_line(plan_file, tmp_path, mutate, needle):
    doc = json.loads(plan_file.read_text())
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match=needle) as exc:
        answer_export(str(path), "sglang", str(tmp_path / "o"))
    assert "\n" not in str(exc.value) and not (tmp_path / "o").exists()


def test_cli_refuses_a_non_empty_folder_and_bad_targets_without_writing(cli, plan_file, tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "old.sh").write_text("x")
    code, out, err = cli("export", str(plan_file), "--to", "sglang", "-o", str(busy))
    assert code != 0 and err.count("\n") == 1 and "empty folder" in err
    assert [p.name for p in busy.iterdir()] == ["old.sh"]
    code, _, err = cli("export", str(plan_file), "--to", "sglangx", "-o", str(tmp_path / "n"))
    assert code != 0 and "did you mean sglang" in err and not (tmp_path / "n").exists()
    code, _, err = cli("export", str(tmp_path / "missing.json"), "--to", "vllm", "-o", str(tmp_path / "n"))
    assert code != 0 and err.count("\n") == 1
    code, out, err = cli("export", str(plan_file), "--to", "vllm", "-o", str(tmp_path / "ok"), "-f", "json")
    assert code == 0, err
    assert len(json.loads(out)["sections"]["files"]) == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary folder left


def test_a_failed_write_leaves_nothing(plan_file, tmp_path, monkeypatch):
    import prfaas_plan.planning.export as ex

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ex.os, "replace", boom)
    with pytest.raises(PlanError, match="No space left"):
        answer_export(str(plan_file), "vllm", str(tmp_path / "o"))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def two_node_plan(plan_file, tmp_path_factory):
    """The fixed plan with its local instances made 16 H20s: two 8-GPU nodes each."""
    doc = json.loads(plan_file.read_text())
    doc["sections"]["plan"][0]["local_instance"] = "16xH20"
    doc["sections"]["configurations"] = [
        {"role": "decode", "site": "local", "chips_per_instance": 16, "tp": 16, "ep": 16, "dp_attention": True,
         "batch": 64, "weight_dtype": "bf16", "kv_dtype": "bf16"}]
    path = tmp_path_factory.mktemp("two-node") / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_instance_over_two_nodes_is_launched_on_each_with_its_rank(two_node_plan, tmp_path):
    answer = answer_export(str(two_node_plan), "sglang", str(tmp_path / "s"))
    cmds = _commands(tmp_path / "s")
    decode = cmds["local-decode.sh"]
    assert decode[decode.index("--nnodes") + 1] == "2" and "--node-rank" in decode and "--dist-init-addr" in decode
    assert "--nnodes" not in cmds["remote-prefill.sh"]                     # 8xH200: one node
    text = (tmp_path / "s" / "local-decode.sh").read_text()
    assert "spans 2 nodes of 8 GPUs" in text and '"${NODE_RANK:?' in text and '"${NODE0_ADDR:?' in text
    assert set(flags_in(decode)) <= engine_args("sglang", ENGINE_VERSIONS["sglang"])
    assert any("NODE_RANK" in n for n in answer.notes)


def test_kubernetes_runs_a_two_node_instance_as_a_leader_worker_set(two_node_plan, tmp_path):
    answer_export(str(two_node_plan), "k8s", str(tmp_path / "k"))
    docs = list(yaml.safe_load_all((tmp_path / "k" / "deployments.yaml").read_text()))
    by_role = {"-".join(d["metadata"]["name"].rsplit("-", 2)[-2:]): d for d in docs if d["kind"] != "ConfigMap"}
    lws = by_role["local-decode"]
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert pod["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["args"][pod["args"].index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert pod["args"][pod["args"].index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):20000"
    assert by_role["remote-prefill"]["kind"] == "Deployment"
    kubernetes_validate = pytest.importorskip("kubernetes_validate")   # LeaderWorkerSet is a CRD: check its pod
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "lws"},
                                  "template": lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]}, "1.30",
                                 strict=True)


def test_vllm_launches_a_two_node_instance_as_a_head_and_a_headless_worker(two_node_plan, tmp_path):
    """vLLM's multi-node data parallelism: node 0 serves, node 1 runs headless with its ranks starting at 8."""
    answer_export(str(two_node_plan), "vllm", str(tmp_path / "v"))
    cmds = _commands(tmp_path / "v")
    head, worker = cmds["local-decode.sh"], cmds["local-decode-worker.sh"]
    assert "--headless" in worker and "--headless" not in head
    for cmd in (head, worker):
        assert cmd[cmd.index("--data-parallel-size") + 1] == "16"
        assert cmd[cmd.index("--data-parallel-size-local") + 1] == "8" and "--data-parallel-address" in cmd
        assert set(flags_in(cmd)) <= engine_args("vllm", ENGINE_VERSIONS["vllm"])
    assert "--data-parallel-start-rank" in worker and "--data-parallel-start-rank" not in head
    text = (tmp_path / "v" / "local-decode-worker.sh").read_text()
    assert 'export DP_START_RANK="$((${NODE_RANK:?' in text and "* 8))" in text
    assert "remote-prefill-worker.sh" not in cmds                          # 8xH200: one node


def test_kubernetes_refuses_a_two_node_vllm_instance_in_one_line(two_node_plan, tmp_path):
    with pytest.raises(PlanError, match="span 2 nodes") as exc:
        answer_export(str(two_node_plan), "k8s", str(tmp_path / "k"), engine="vllm")
    assert "\n" not in str(exc.value) and not (tmp_path / "k").exists()


def test_an_fp8_checkpoint_is_not_told_its_own_quantization(plan_file, tmp_path):
    """Engines read an fp8 checkpoint's method from its config (and refuse a flag naming another); only fp8
    weights from a bf16 checkpoint (kimi-linear, above) need --quantization fp8."""
    doc = json.loads(plan_file.read_text())
    doc["meta"]["model"] = "deepseek-v3"                                    # stored in fp8 (its profile)
    doc["sections"]["configurations"] = [
        {"role": "decode", "site": "local", "chips_per_instance": 8, "tp": 8, "ep": 8, "dp_attention": True,
         "batch": 64, "weight_dtype": "fp8", "kv_dtype": "bf16"}]
    path = tmp_path / "fp8.json"
    path.write_text(json.dumps(doc))
    for engine in ("sglang", "vllm"):
        answer_export(str(path), engine, str(tmp_path / engine))
        assert "--quantization" not in _commands(tmp_path / engine)["local-decode.sh"]
