"""Launch files for a plan (``prfaas-plan export``): engine commands per site and role, the router rule in
the form each router takes, and Kubernetes manifests. Pure text from a `planning.export.Deployment`; no
figure is computed here (the threshold, instance counts and batch come from the plan).

Every engine flag written is one of the engine's server arguments for the chosen version, listed in
``prfaas_plan/data/engine_args/ENGINE-VERSION.txt`` (each file names its upstream source); `flags_in`
extracts the flags of a written command so the check is made on the text itself.

Engines and routers (versions of the bundled lists):

- SGLang 0.5.9 ``python -m sglang.launch_server``: ``--disaggregation-mode prefill|decode``,
  ``--disaggregation-transfer-backend mooncake|nixl``, ``--disaggregation-bootstrap-port``; its router
  (sglang_router) has no prompt-length rule, so the rule is written as ``router-rule.json`` for a gateway;
- vLLM 0.16.0 ``vllm serve``: ``--kv-transfer-config`` with ``NixlConnector`` or ``MooncakeConnector``; the
  side-channel address by ``VLLM_NIXL_SIDE_CHANNEL_HOST``/``_PORT`` or ``VLLM_MOONCAKE_BOOTSTRAP_PORT``;
- llm-d: vLLM pods plus the endpoint picker's ``prefix-based-pd-decider`` (``nonCachedTokens``: the minimum
  uncached prompt tokens that send a request through a prefill pod) under ``pd-profile-handler``;
- Dynamo 1.6.1: ``python -m dynamo.frontend --router-mode kv --router-conditional-disagg
  --router-conditional-disagg-config '{"policy": "isl_bounding", "eff_isl_threshold": N}'`` (marked
  experimental upstream: a request whose effective, i.e. uncached, prompt is within the threshold skips the
  remote prefill) and ``python -m dynamo.sglang`` workers taking SGLang's arguments;
- Kubernetes: one apps/v1 Deployment per site and role (replicas = instances, ``nvidia.com/gpu`` = chips
  per instance) and a ConfigMap holding the router rule; a role whose instances span several nodes (more chips
  than the chip's scale-up domain) is a LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``: ``size`` = nodes,
  one pod of chips/nodes GPUs per node, ``LWS_WORKER_INDEX`` and ``LWS_LEADER_ADDRESS`` as SGLang's
  ``--node-rank`` and ``--dist-init-addr``). SGLang scripts for such instances take ``NODE_RANK`` and
  ``NODE0_ADDR`` from the environment; vLLM's are two, node 0's and a headless ``-worker.sh`` for the other
  nodes (``--data-parallel-start-rank`` or ``--node-rank`` from ``NODE_RANK``), and are not written for
  Kubernetes.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache

from .._data import PACKAGE_DIR
from ..errors import PlanError

ARGS_DIR = PACKAGE_DIR / "data" / "engine_args"
ENGINE_VERSIONS = {"sglang": "0.5.9", "vllm": "0.16.0", "dynamo": "1.6.1"}
IMAGES = {"sglang": "lmsysorg/sglang:v0.5.9-cu129", "vllm": "vllm/vllm-openai:v0.16.0"}
PORTS = {"sglang": 30000, "vllm": 8000}
BOOTSTRAP_PORT = 8998       # SGLang's and vLLM-Mooncake's default bootstrap port
NIXL_PORT = 5600            # vLLM's default NIXL side-channel port (vllm/envs.py)
TARGETS = ("sglang", "vllm", "dynamo", "llm-d", "k8s")
DIST_INIT_PORT = 20000      # SGLang multi-node rendezvous port on an instance's node 0 (any free port)
VLLM_DP_RPC_PORT = 13345    # vLLM's data-parallel RPC port on node 0 (the value of its multi-node DP example)
VLLM_MASTER_PORT = 29501    # vLLM's multi-node torch.distributed port on node 0 (any free port)
SHELL_VARS = {"${IB_DEVICE}": "${IB_DEVICE:?set IB_DEVICE to the RDMA device for Mooncake, e.g. mlx5_0}",
              "${NODE_RANK}": "${NODE_RANK:?set NODE_RANK to the rank of this node in its instance, 0 on the first}",
              "${NODE0_ADDR}": "${NODE0_ADDR:?set NODE0_ADDR to the address of node 0 of this instance}",
              "${DP_START_RANK}": "${DP_START_RANK}"}    # computed by the worker script itself
K8S_VARS = {"${IB_DEVICE}": "$(IB_DEVICE)", "${NODE_RANK}": "$(LWS_WORKER_INDEX)",
            "${NODE0_ADDR}": "$(LWS_LEADER_ADDRESS)"}   # the same variables in a pod's args


@lru_cache(maxsize=None)
def engine_args(engine: str, version: str) -> frozenset[str]:
    """The bundled list of ``engine``'s server arguments at ``version`` (``--flag`` strings)."""
    path = ARGS_DIR / f"{engine}-{version}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(ln.strip() for ln in lines if ln.strip().startswith("--"))


def flags_in(command: list[str]) -> list[str]:
    """The ``--flag`` tokens of a command (``--flag=value`` counts as ``--flag``)."""
    return [t.split("=", 1)[0] for t in command if t.startswith("--")]


def _comment(lines: list[str], mark: str = "#") -> str:
    return "".join(f"{mark} {ln}\n" if ln else f"{mark}\n" for ln in lines)


def _quant(d, dtype: str) -> list[str]:
    """``--quantization fp8`` where the plan runs fp8 weights from a checkpoint stored otherwise (online
    quantization). An fp8 checkpoint carries its method in its config, which both engines read, and refuse
    to start when the flag names another (a compressed-tensors FP8 checkpoint, say)."""
    return ["--quantization", "fp8"] if dtype == "fp8" and d.checkpoint_dtype != "fp8" else []


def _kv_dtype(dtype: str, engine: str) -> list[str]:
    if dtype != "fp8":
        return []
    return ["--kv-cache-dtype", "fp8_e4m3" if engine == "sglang" else "fp8"]


def sglang_command(d, role, backend: str, module: str = "sglang.launch_server") -> list[str]:
    """``python3 -m sglang.launch_server`` (or a Dynamo worker module) for one role."""
    cmd = ["python3", "-m", module, "--model-path", d.model_path, "--tp-size", str(role.tp)]
    if role.nodes > 1:  # one launch per node, the same command with its NODE_RANK
        cmd += ["--nnodes", str(role.nodes), "--node-rank", "${NODE_RANK}",
                "--dist-init-addr", f"${{NODE0_ADDR}}:{DIST_INIT_PORT}"]
    if role.ep > 1:
        cmd += ["--ep-size", str(role.ep)]
    if role.dp_attention:
        cmd += ["--enable-dp-attention", "--dp-size", str(role.dp_ranks)]
    cmd += ["--chunked-prefill-size", str(d.chunk_tokens)]
    if role.batch:  # SGLang divides this instance total over its DP-attention ranks (Scheduler: // dp_size)
        cmd += ["--max-running-requests", str(role.instance_batch)]
    cmd += _quant(d, role.weight_dtype) + _kv_dtype(role.kv_dtype, "sglang")
    cmd += ["--disaggregation-mode", role.role, "--disaggregation-transfer-backend", backend]
    if role.role == "prefill":
        cmd += ["--disaggregation-bootstrap-port", str(BOOTSTRAP_PORT)]
    if backend == "mooncake":
        cmd += ["--disaggregation-ib-device", "${IB_DEVICE}"]
    if module == "sglang.launch_server":
        cmd += ["--host", "0.0.0.0", "--port", str(PORTS["sglang"])]
    return cmd


def vllm_command(d, role, backend: str, worker: bool = False) -> tuple[list[str], dict[str, str]]:
    """``vllm serve`` for one role, and the environment its KV connector reads its address from. For an
    instance over several nodes, node 0's command, or with ``worker`` that of every other node: headless,
    its data-parallel ranks starting at ``NODE_RANK`` x GPUs per node (DP attention) or its ``--node-rank``
    (TP)."""
    cmd = ["vllm", "serve", d.model_path] + (["--headless"] if worker else [])
    if 1 < role.ep < role.tp:
        raise PlanError(f"{role.site} {role.role}: vLLM has no expert-TP x EP split (the plan's TP{role.tp} with "
                        f"EP{role.ep}; its expert parallelism spreads the experts over every rank): export it for "
                        "sglang, which runs it")
    node_env = {}
    if role.dp_attention:
        if role.chips_per_node % role.rank_chips:
            raise PlanError(f"{role.site} {role.role}: a data-parallel attention rank of {role.rank_chips} GPUs does "
                            f"not fit whole on a node of {role.chips_per_node}: export it for sglang")
        cmd += ["--tensor-parallel-size", str(role.rank_chips), "--data-parallel-size", str(role.dp_ranks)]
        if role.nodes > 1:
            local = role.chips_per_node // role.rank_chips
            cmd += ["--data-parallel-size-local", str(local), "--data-parallel-address", "${NODE0_ADDR}",
                    "--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT)]
            if worker:
                cmd += ["--data-parallel-start-rank", "${DP_START_RANK}"]
                node_env = {"DP_START_RANK": f"$((${{NODE_RANK}} * {local}))"}
    else:
        cmd += ["--tensor-parallel-size", str(role.tp)]
        if role.nodes > 1:
            cmd += ["--nnodes", str(role.nodes), "--node-rank", "${NODE_RANK}" if worker else "0",
                    "--master-addr", "${NODE0_ADDR}", "--master-port", str(VLLM_MASTER_PORT)]
    if role.ep > 1:   # without it vLLM slices the experts over all DP x TP ranks: the plan's MoE TP
        cmd += ["--enable-expert-parallel"]
    cmd += ["--enable-chunked-prefill", "--max-num-batched-tokens", str(d.chunk_tokens)]
    if role.batch:  # vLLM runs one engine core, with its own scheduler, per data-parallel rank
        cmd += ["--max-num-seqs", str(role.rank_batch)]
    cmd += _quant(d, role.weight_dtype) + _kv_dtype(role.kv_dtype, "vllm")
    if backend == "nixl":
        config = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        env = {"VLLM_NIXL_SIDE_CHANNEL_HOST": "${POD_IP:?set POD_IP to this host's address}",
               "VLLM_NIXL_SIDE_CHANNEL_PORT": str(NIXL_PORT)}
    else:
        config = {"kv_connector": "MooncakeConnector",
                  "kv_role": "kv_producer" if role.role == "prefill" else "kv_consumer"}
        env = {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(BOOTSTRAP_PORT)}
    cmd += ["--kv-transfer-config", json.dumps(config, separators=(",", ":")),
            "--host", "0.0.0.0", "--port", str(PORTS["vllm"])]
    return cmd, {**node_env, **env}


def rule(d) -> dict:
    """The router rule as data: threshold ``t`` in uncached prompt tokens, and the degraded-link one."""
    out = {"uncached_tokens_threshold": d.threshold_tokens,
           "long_requests": "uncached prompt tokens > threshold: prefill on the remote site's prefill pool, "
                            "KV shipped over the cross-datacenter link",
           "short_requests": "otherwise: prefill on the local site's prefill pool",
           "from_plan": d.plan_name}
    if d.degraded is not None:
        out["degraded_link"] = {"link_gbps": d.degraded[0], "uncached_tokens_threshold": d.degraded[1],
                                "when": "the link runs at or below this rate: switch to this threshold"}
    return out


def min_uncached_tokens(threshold: float) -> int:
    """The smallest whole number of uncached tokens the plan sends remote (> t): floor(t) + 1."""
    return int(threshold // 1) + 1


def _expand(text: str, table: dict[str, str]) -> str:
    """``text`` with each variable of ``table`` (`SHELL_VARS`, `K8S_VARS`) replaced by its form there."""
    for var, form in table.items():
        text = text.replace(var, form)
    return text


def _shell_word(word: str) -> str:
    """``word`` quoted for sh, with the `SHELL_VARS` it holds left to expand (and to fail, saying what to set,
    when unset)."""
    if not any(v in word for v in SHELL_VARS):
        return shlex.quote(word)
    return f'"{_expand(word, SHELL_VARS)}"'


def _shell(header: list[str], cmd: list[str], env: dict[str, str] | None = None) -> str:
    lines = ["#!/bin/sh", _comment(header).rstrip("\n"), "set -eu"]
    for k, v in (env or {}).items():
        lines.append(f'export {k}="{_expand(v, SHELL_VARS)}"')
    lines.append(" ".join(_shell_word(c) for c in cmd))
    return "\n".join(lines) + "\n"


def _where_to_run(role, engine: str, worker: bool) -> str:
    """Which nodes run a role's script: every instance, every node of one (SGLang), or vLLM's node 0 and the
    rest (``worker``)."""
    if role.nodes == 1:
        return "run this on each instance"
    spans = f"each instance spans {role.nodes} nodes of {role.chips_per_node} GPUs"
    if engine == "sglang":
        return (f"{spans}: run this on each of them with NODE_RANK 0 to {role.nodes - 1} and NODE0_ADDR the address "
                "of rank 0")
    if worker:
        others = "node 1" if role.nodes == 2 else f"nodes 1 to {role.nodes - 1}"
        return (f"{spans}: run this on {others} (headless) with NODE_RANK set and NODE0_ADDR the address of node 0, "
                f"which runs {role.site}-{role.role}.sh")
    return (f"{spans}: run this on node 0 with NODE0_ADDR its own address, and {role.site}-{role.role}-worker.sh "
            "on the others")


def _role_header(d, role, engine: str, worker: bool = False) -> list[str]:
    ranks = f" in {role.dp_ranks} ranks of {role.rank_chips} GPUs" if 1 < role.dp_ranks < role.tp else ""
    return d.header + [f"{role.site} site, {role.role}: {role.instances} instance(s) of {role.instance} "
                       f"(TP{role.tp}{f', EP{role.ep}' if role.ep > 1 else ''}"
                       f"{', DP attention' if role.dp_attention else ''}{ranks}); "
                       + _where_to_run(role, engine, worker),
                       f"{role.basis}",
                       *([f"decode batch: {role.rank_batch} running requests on each of {role.dp_ranks} DP attention "
                          f"ranks, {role.instance_batch} per instance (the plan's {role.batch})"]
                         if role.dp_attention and role.batch else []),
                       f"flags checked against prfaas_plan/data/engine_args/{engine}-{ENGINE_VERSIONS[engine]}.txt"]


def engine_files(d, engine: str, backend: str) -> tuple[dict[str, str], list[list[str]]]:
    """Per role a launch script for ``engine`` (sglang or vllm), and the commands written (for checking)."""
    files, commands = {}, []
    for role in d.roles:
        name = f"{role.site}-{role.role}"
        if engine == "sglang":
            cmd, env = sglang_command(d, role, backend), None
        else:
            cmd, env = vllm_command(d, role, backend)
            if role.nodes > 1:
                wcmd, wenv = vllm_command(d, role, backend, worker=True)
                files[f"{name}-worker.sh"] = _shell(_role_header(d, role, engine, worker=True), wcmd, wenv)
                commands.append(wcmd)
        files[f"{name}.sh"] = _shell(_role_header(d, role, engine), cmd, env)
        commands.append(cmd)
    return files, commands


def rule_file(d, router_note: str) -> str:
    return json.dumps({"comment": d.header + [router_note], **rule(d)}, indent=2) + "\n"


def llmd_config(d, threshold: float, label: str) -> str:
    """An llm-d EndpointPickerConfig whose P/D decider takes the plan's threshold."""
    n = min_uncached_tokens(threshold)
    head = d.header + [f"llm-d endpoint picker: {label}: nonCachedTokens {n} = floor(t) + 1 with t = {threshold:,.1f} "
                       "tokens (the plan sends a request remote when its uncached prompt exceeds t)",
                       "prefill pods = the remote site's prefill instances; decode pods = the local decode "
                       "instances. llm-d's decider has two outcomes (P/D or decode-only): the plan's local "
                       "prefill pool has no place in it, so short prompts prefill on the decode pods here."]
    body = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
            "plugins": [{"type": "prefill-header-handler"}, {"type": "prefix-cache-scorer"},
                        {"type": "queue-scorer"}, {"type": "prefill-filter"}, {"type": "decode-filter"},
                        {"type": "max-score-picker"},
                        {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": n}},
                        {"type": "pd-profile-handler", "parameters": {"deciderPluginName": "prefix-based-pd-decider"}}],
            "schedulingProfiles": [
                {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, {"pluginRef": "max-score-picker"},
                                                {"pluginRef": "prefix-cache-scorer", "weight": 2},
                                                {"pluginRef": "queue-scorer", "weight": 1}]},
                {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, {"pluginRef": "max-score-picker"},
                                               {"pluginRef": "prefix-cache-scorer", "weight": 2},
                                               {"pluginRef": "queue-scorer", "weight": 1}]}]}
    import yaml

    return _comment(head) + yaml.safe_dump(body, sort_keys=False)


def dynamo_frontend(d, threshold: float) -> list[str]:
    config = {"policy": "isl_bounding", "eff_isl_threshold": int(threshold // 1)}
    return ["python3", "-m", "dynamo.frontend", "--http-port", "8000", "--router-mode", "kv", "--router-kv-events",
            "--router-conditional-disagg", "--router-conditional-disagg-config",
            json.dumps(config, separators=(",", ":"))]


DYNAMO_NOTE = ("Dynamo 1.6.1's conditional disaggregation (experimental) chooses between remote prefill and "
               "prefill on the decode worker; it has no setting that picks between two prefill pools (the plan's "
               "remote and local prefill), so the local prefill instances are not given a role by the router "
               "and short prompts prefill on the decode workers. eff_isl_threshold = floor(t); whether the "
               "boundary is < or <= is Dynamo's (a one-token difference).")


def dynamo_files(d, backend: str) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    files, checks = {}, []
    for label, t, name in [("planned link", d.threshold_tokens, "frontend.sh")] + (
            [(f"degraded link ({d.degraded[0]:g} Gbps)", d.degraded[1], "frontend-degraded-link.sh")]
            if d.degraded else []):
        cmd = dynamo_frontend(d, t)
        files[name] = _shell(d.header + [f"Dynamo frontend, {label}: t = {t:,.1f} uncached tokens", DYNAMO_NOTE], cmd)
        checks.append(("dynamo", cmd))
    for role in d.roles:
        cmd = sglang_command(d, role, backend, module="dynamo.sglang")
        files[f"{role.site}-{role.role}.sh"] = _shell(_role_header(d, role, "sglang") + [
            "worker: python3 -m dynamo.sglang takes SGLang's server arguments"], cmd)
        checks.append(("dynamo+sglang", cmd))
    return files, checks


def k8s_files(d, engine: str, backend: str) -> tuple[dict[str, str], list[list[str]], list[dict]]:
    """Deployments (one per site and role) running ``engine``, and the router rule as a ConfigMap."""
    import yaml

    docs, commands = [], []
    for role in d.roles:
        if engine == "sglang":
            cmd, env = sglang_command(d, role, backend), {}
        elif role.nodes > 1:
            raise PlanError(f"{role.site} {role.role}: the plan's {role.instance} instances span {role.nodes} nodes; "
                            "vLLM's headless workers would each need their own data-parallel start rank, which a "
                            "LeaderWorkerSet pod template cannot compute: use the sglang engine for Kubernetes, or "
                            "export for vllm, whose worker script computes it")
        else:
            cmd, env = vllm_command(d, role, backend)
        commands.append(cmd)
        name = f"{d.slug}-{role.site}-{role.role}"
        labels = {"app.kubernetes.io/name": name, "prfaas-plan/site": role.site, "prfaas-plan/role": role.role}
        env_list = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
        env_list += [{"name": k, "value": re.sub(r"\$\{POD_IP[^}]*\}", "$(POD_IP)", v)} for k, v in env.items()]
        if backend == "mooncake" and engine == "sglang":
            env_list.append({"name": "IB_DEVICE", "value": "mlx5_0"})
        args = [_expand(c, K8S_VARS) for c in cmd]
        pod = {"metadata": {"labels": labels},
               "spec": {"nodeSelector": {"prfaas-plan/site": role.site},
                        "containers": [{"name": "engine", "image": IMAGES[engine], "command": args[:1],
                                        "args": args[1:], "env": env_list,
                                        "ports": [{"containerPort": PORTS[engine]}],
                                        "resources": {"limits": {"nvidia.com/gpu": role.chips_per_node}}}]}}
        if role.nodes > 1:  # one pod per node; LeaderWorkerSet gives each its index and the leader's address
            docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                         "metadata": {"name": name, "labels": labels},
                         "spec": {"replicas": role.instances,
                                  "leaderWorkerTemplate": {"size": role.nodes, "workerTemplate": pod}}})
            continue
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": name, "labels": labels},
                     "spec": {"replicas": role.instances, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                              "template": pod}})
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{d.slug}-router-rule"},
                 "data": {"router-rule.json": json.dumps(rule(d), indent=2)}})
    head = d.header + [f"Kubernetes: {engine} {ENGINE_VERSIONS[engine]} Deployments, one per site and role; label "
                       "each site's GPU nodes prfaas-plan/site=<site>; the ConfigMap holds the router rule",
                       *(["roles whose instances span several nodes run as LeaderWorkerSets (one pod per node; "
                          "install the LeaderWorkerSet controller, sigs.k8s.io/lws)"]
                         if any(r.nodes > 1 for r in d.roles) else []),
                       *sorted({r.basis for r in d.roles})]
    text = _comment(head) + yaml.safe_dump_all(docs, sort_keys=False)
    return {"deployments.yaml": text}, commands, docs
