"""``prfaas-plan export PLAN.json --to sglang|vllm|dynamo|llm-d|k8s -o DIR``: what to deploy, from a plan.

A plan is the JSON of ``prfaas-plan size -f json`` (a ``prfaas-pd`` layout). Per site and role it gives
the instance shape and count; its threshold ``t`` (uncached prompt tokens above which a request prefills
on the remote site) and, with ``--link-degraded``, the threshold to switch to. Per-role parallelism and
batch come from the plan's ``configurations`` section (records ``role``, ``site``, ``chips_per_instance``,
``tp``, ``ep``, ``dp_attention``, ``batch``, ``weight_dtype``, ``kv_dtype``) when it has one; otherwise
they are derived, and every written file's header says so: TP = the instance's chips, no expert or
attention data parallelism, the decode batch = the decode capacity batch the plan sized with
(`scenario.instance_decode` at the plan's TPOT SLO and workload, recomputed from the plan's recorded
inputs), prefill running requests left to the engine (prefill packs by the token budget). The chunked-
prefill size is the stack profile's ``prefill_token_budget`` the plan assumed.

The files are written into a temporary sibling folder and renamed into place: nothing half-written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InternalError, PlanError
from ..textfile import read_json

CONFIG_KEYS = ("role", "site", "chips_per_instance", "tp", "ep", "dp_attention", "attention_dp", "batch",
               "weight_dtype", "kv_dtype")
BACKENDS = ("mooncake", "nixl")


@dataclass(frozen=True)
class Role:
    """One site's role: ``instances`` of ``instance`` (``chips`` each, on ``nodes`` nodes: more than one when
    the chips exceed the chip's scale-up domain) run as ``tp``/``ep``/``dp_attention`` with at most ``batch``
    running requests per instance (0 = engine default); ``basis`` says where these came from."""

    site: str
    role: str
    instance: str
    chips: int
    instances: int
    tp: int
    ep: int = 1
    dp_attention: bool = False
    batch: int = 0
    weight_dtype: str = ""
    kv_dtype: str = ""
    basis: str = ""
    nodes: int = 1
    attention_dp: int = 0   # data-parallel attention ranks (0: ``tp`` under DP attention, else 1)

    @property
    def chips_per_node(self) -> int:
        """GPUs each of the instance's nodes gives it."""
        return self.chips // self.nodes

    @property
    def dp_ranks(self) -> int:
        """Data-parallel attention ranks (1 without DP attention), each of ``tp / dp_ranks`` GPUs."""
        if not self.dp_attention:
            return 1
        return self.attention_dp or self.tp

    @property
    def rank_chips(self) -> int:
        """GPUs of one data-parallel attention rank (a TP group), the instance's under TP attention."""
        return self.tp // self.dp_ranks

    @property
    def rank_batch(self) -> int:
        """Running requests per attention rank: under DP attention each of the `dp_ranks` schedules its own
        requests (``batch`` rounded down to whole ranks, at least one each), else the whole ``batch``."""
        if not (self.dp_attention and self.batch):
            return self.batch
        return max(1, self.batch // self.dp_ranks)

    @property
    def instance_batch(self) -> int:
        """`rank_batch` over all of an instance's attention ranks: ``batch`` rounded to whole DP ranks."""
        return self.rank_batch * self.dp_ranks


@dataclass(frozen=True)
class Deployment:
    """What a plan says to deploy: the model's checkpoint, the roles, the threshold (tokens), the degraded
    link ``(Gbps, threshold)`` if planned, the chunked-prefill size, the header every file carries and the dtype
    the checkpoint's weights are stored in (the model profile's ``weight_dtype``: engines read a quantized
    checkpoint's method from it, so only a different dtype is asked for)."""

    plan_name: str
    slug: str
    model: str
    model_path: str
    stack: str
    roles: tuple[Role, ...]
    threshold_tokens: float
    degraded: tuple[float, float] | None
    chunk_tokens: int
    header: list[str] = field(default_factory=list, hash=False)
    checkpoint_dtype: str = ""


@dataclass(frozen=True)
class ExportAnswer:
    """The files written (``rows``: path, kind, what) and notes."""

    out_dir: str
    target: str
    rows: list[dict]
    notes: list[str]


def _load(path: str) -> dict:
    doc = read_json(path, "a plan: write it with size -f json")
    if not isinstance(doc, dict) or not isinstance(doc.get("sections"), dict) or not isinstance(doc.get("meta"), dict):
        raise PlanError(f"{path}: not a prfaas-plan JSON answer (no meta/sections); write it with size -f json")
    return doc


def _one(doc: dict, section: str, path: str) -> dict | None:
    rows = doc["sections"].get(section)
    if rows is None:
        return None
    if not isinstance(rows, list) or len(rows) != 1 or not isinstance(rows[0], dict):
        raise PlanError(f"{path}: section '{section}' must hold one row, not {type(rows).__name__} "
                        f"of {len(rows) if isinstance(rows, list) else '?'}")
    return rows[0]


def _number(row: dict, key: str, path: str, whole: bool = False) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value == value or value < 0:
        raise PlanError(f"{path}: plan field '{key}' must be a non-negative number, not {value!r}")
    if whole and int(value) != value:
        raise PlanError(f"{path}: plan field '{key}' must be a whole number, not {value!r}")
    return float(value)


def model_path_of(model) -> str:
    """The Hugging Face repository of a model profile, as its architecture source names it ('' if none)."""
    source = str((model.sources or {}).get("architecture", ""))
    m = re.match(r"\s*([\w.-]+/[\w.-]+)\s+config\.json", source)
    return m.group(1) if m and not model.reconstruction else ""


def _decode_batch(inputs: dict, local_instance: str) -> int:
    """The decode capacity batch the plan sized with, recomputed from its recorded inputs."""
    from .question import scenario
    from .scenario import instance_decode

    from .question import FIELDS

    kwargs = {k: inputs[k] for k in FIELDS if inputs.get(k) is not None}   # every planning input recorded
    sc = scenario(**kwargs)
    from ..performance import parse_instance

    cap = instance_decode(sc.model, parse_instance(local_instance), sc.tpot_s, sc.context_tokens, sc.inputs,
                          sc.stack)
    return int(cap.batch)


def _configured(rows, path: str) -> dict[tuple[str, str], dict]:
    if not isinstance(rows, list) or not rows:
        raise PlanError(f"{path}: section 'configurations' must be a list of records")
    out = {}
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise PlanError(f"{path}: configurations[{i}] is not a record")
        unknown = sorted(set(r) - set(CONFIG_KEYS))
        missing = [k for k in ("role", "site", "tp") if k not in r]
        if unknown or missing:
            raise PlanError(f"{path}: configurations[{i}]: " + (f"unknown key {unknown[0]!r}" if unknown
                                                                 else f"missing key {missing[0]!r}"))
        out[(str(r["site"]), str(r["role"]))] = r
    return out


def _nodes(instance) -> int:
    """Nodes one instance spans (`HardwareProfile.nodes_for`: a 16-chip H200 instance is two 8-GPU nodes,
    docs/methods.md "Instances over several nodes"), refused unless they hold equal shares of its chips."""
    nodes = instance.chip.nodes_for(instance.chips)
    if instance.chips % nodes:
        raise PlanError(f"{instance} spans {nodes} nodes of at most {instance.chip.scaleup_domain} chips, which its "
                        f"{instance.chips} chips cannot fill evenly: export needs the same GPUs on every node")
    return nodes


def read_plan(path: str, model_path: str | None = None) -> Deployment:
    """The `Deployment` a plan JSON describes (see the module docstring for what is derived)."""
    from ..output.result_checks import config_attention_ranks
    from ..profiles import get_model, get_stack

    doc = _load(path)
    plan = _one(doc, "plan", path)
    if plan is None:
        raise PlanError(f"{path}: no 'plan' section (export reads the JSON of prfaas-plan size)")
    if plan.get("layout") != "prfaas-pd":
        raise PlanError(f"{path}: layout {plan.get('layout')!r}: export writes prfaas-pd plans (remote prefill + "
                        "local PD) only")
    meta = doc["meta"]
    inputs = {k: (v.get("value") if isinstance(v, dict) else v) for k, v in (meta.get("inputs") or {}).items()}
    model = get_model(str(meta.get("model") or inputs.get("model") or ""))
    stack = get_stack(meta.get("stack") or None)
    hf = model_path or model_path_of(model)
    if not hf:
        raise PlanError(f"{path}: model {model.name} names no Hugging Face checkpoint; pass `model_path`")
    threshold = _number(plan, "threshold_tokens", path)
    counts = {("remote", "prefill"): _number(plan, "remote_prefill_instances", path, True),
              ("local", "prefill"): _number(plan, "local_prefill_instances", path, True),
              ("local", "decode"): _number(plan, "local_decode_instances", path, True)}
    shapes = {"remote": str(plan.get("remote_instance", "")), "local": str(plan.get("local_instance", ""))}
    from ..performance import parse_instance

    configs = _configured(doc["sections"]["configurations"], path) if "configurations" in doc["sections"] else {}
    header = [f"written by prfaas-plan export from {Path(path).name}: {model.display_name} ({model.name}), "
              f"stack {stack.name}, {plan.get('instances', '')} instances, threshold t = {threshold:,.1f} "
              "uncached prompt tokens"]
    roles = []
    decode_batch = None
    for (site, role), n in counts.items():
        inst = parse_instance(shapes[site], f"plan {site}_instance")
        dtype = {"weight_dtype": inputs.get("weight_dtype") or "", "kv_dtype": inputs.get("kv_dtype") or ""}
        if (site, role) in configs:
            c = configs[(site, role)]
            chips = int(c.get("chips_per_instance") or inst.chips)
            if chips != inst.chips:
                raise PlanError(f"{path}: configurations {site} {role}: chips_per_instance {chips} but the plan's "
                                f"{site} instance is {inst}")
            dp = bool(c.get("dp_attention"))
            ranks = config_attention_ranks({**c, "tp": int(c["tp"])}, f"{path}: configurations {site} {role}")
            roles.append(Role(site, role, str(inst), inst.chips, int(n), int(c["tp"]), int(c.get("ep") or 1),
                              dp, int(c.get("batch") or 0),
                              str(c.get("weight_dtype") or dtype["weight_dtype"]),
                              str(c.get("kv_dtype") or dtype["kv_dtype"]),
                              "parallelism and batch: the plan's configurations section", _nodes(inst),
                              ranks if dp else 0))
            continue
        if role == "decode":
            decode_batch = _decode_batch(inputs, str(inst)) if decode_batch is None else decode_batch
        batch = decode_batch if role == "decode" else 0
        basis = ("derived (the plan has no configurations section): TP = the instance's chips, no EP or DP "
                 "attention; " + (f"max running requests {batch} = the decode capacity batch at the plan's TPOT "
                                  "SLO and workload" if role == "decode" else
                                  "running requests left to the engine (prefill packs by the token budget)"))
        roles.append(Role(site, role, str(inst), inst.chips, int(n), inst.chips, 1, False, batch,
                          dtype["weight_dtype"], dtype["kv_dtype"], basis, _nodes(inst)))
    degraded = None
    row = _one(doc, "degraded_link", path)
    if row is not None:
        degraded = (_number(row, "degraded_link_gbps", path), _number(row, "switch_to_threshold_tokens", path))
        header.append(f"degraded link: at {degraded[0]:g} Gbps switch to t = {degraded[1]:,.1f} tokens")
    header.append(f"chunked prefill {stack.prefill_token_budget:,} tokens: the stack profile's prefill budget the "
                  "plan assumed")
    slug = re.sub(r"[^a-z0-9-]+", "-", model.name.lower()).strip("-")[:40] or "plan"
    return Deployment(Path(path).name, slug, model.name, hf, stack.name, tuple(r for r in roles if r.instances > 0),
                      threshold, degraded, int(stack.prefill_token_budget), header, model.weight_dtype)


def _check_flags(engine: str, version: str, command: list[str]) -> None:
    from ..output.deploy import engine_args, flags_in

    known = engine_args(engine, version)
    bad = [f for f in flags_in(command) if f not in known]
    if bad:
        raise InternalError(f"export wrote {bad[0]} which is not in the bundled {engine} {version} argument list")


def build_files(d: Deployment, target: str, engine: str | None, backend: str) -> dict[str, str]:
    """The files of one export target, each flag checked against the bundled argument list."""
    from ..output import deploy

    versions = deploy.ENGINE_VERSIONS
    if target in ("sglang", "vllm"):
        files, commands = deploy.engine_files(d, target, backend)
        for cmd in commands:
            _check_flags(target, versions[target], cmd)
        files["router-rule.json"] = deploy.rule_file(d, f"{target}'s own router has no prompt-length rule: apply "
                                                        "this in the gateway (llm-d and Dynamo exports carry it)")
        return files
    if target == "llm-d":
        files, commands = deploy.engine_files(d, "vllm", backend)
        for cmd in commands:
            _check_flags("vllm", versions["vllm"], cmd)
        files["epp-config.yaml"] = deploy.llmd_config(d, d.threshold_tokens, "planned link")
        if d.degraded:
            files["epp-config-degraded-link.yaml"] = deploy.llmd_config(
                d, d.degraded[1], f"degraded link ({d.degraded[0]:g} Gbps)")
        return files
    if target == "dynamo":
        files, checks = deploy.dynamo_files(d, backend)
        for kind, cmd in checks:
            known = deploy.engine_args("dynamo", versions["dynamo"])
            if kind == "dynamo+sglang":
                known = known | deploy.engine_args("sglang", versions["sglang"])
            bad = [f for f in deploy.flags_in(cmd) if f not in known]
            if bad:
                raise InternalError(f"export wrote {bad[0]}: not in the bundled Dynamo/SGLang argument lists")
        return files
    files, commands, _ = deploy.k8s_files(d, engine or "sglang", backend)
    for cmd in commands:
        _check_flags(engine or "sglang", versions[engine or "sglang"], cmd)
    return files


def write_tree(files: dict[str, str], out: str) -> None:
    """Write ``files`` into folder ``out`` all at once, through the one writer every command uses
    (`output.report.write_files`: all the files or none). ``out`` must not exist or be empty (an export
    never mixes with older files); the launch scripts (``*.sh``) are made executable."""
    from ..output.report import write_files

    target = Path(out)
    try:
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise PlanError(f"`output` {out!r}: exists and is not an empty folder (export writes a fresh folder)")
    except OSError:
        pass  # a name the file system cannot hold: write_files says so
    write_files(target, files)
    for name in files:
        if name.endswith(".sh"):
            os.chmod(target / name, 0o755)


DEFAULT_BACKENDS = {"sglang": "mooncake", "k8s": "mooncake", "vllm": "nixl", "llm-d": "nixl", "dynamo": "nixl"}


def answer_export(plan: str, target: str, out: str, engine: str | None = None, backend: str | None = None,
                  model_path: str | None = None) -> ExportAnswer:
    """Read ``plan``, write the ``target``'s launch files into ``out``, and list them. ``backend`` defaults
    to what each stack ships with: Mooncake for SGLang, NIXL for vLLM, llm-d and Dynamo."""
    from ..errors import closest_names
    from ..output.deploy import ENGINE_VERSIONS, TARGETS

    if target not in TARGETS:
        raise PlanError(f"`to` {target!r}: expected one of {', '.join(TARGETS)}; {closest_names(target, TARGETS)}")
    backend = backend or DEFAULT_BACKENDS[target]
    if backend not in BACKENDS:
        raise PlanError(f"`kv_backend` {backend!r}: expected mooncake or nixl")
    if engine is not None and (target != "k8s" or engine not in ("sglang", "vllm")):
        raise PlanError("`engine` applies to `to` k8s only, and is sglang or vllm")
    d = read_plan(plan, model_path)
    files = build_files(d, target, engine, backend)
    write_tree(files, out)
    rows = [{"file": str(Path(out) / name), "kind": name.rsplit(".", 1)[-1]} for name in sorted(files)]
    eng = {"sglang": "sglang", "vllm": "vllm", "llm-d": "vllm", "dynamo": "dynamo", "k8s": engine or "sglang"}[target]
    notes = [f"{target}: flags checked against the bundled {eng} {ENGINE_VERSIONS[eng]} argument list "
             f"(prfaas_plan/data/engine_args)", *d.header[1:],
             *sorted({r.basis for r in d.roles}),
             f"KV transfer backend: {backend}; addresses: engine host 0.0.0.0, bootstrap/side-channel ports as "
             "written (set POD_IP / IB_DEVICE in the environment)"]
    wide = [r for r in d.roles if r.nodes > 1]
    if wide and target != "k8s":
        notes.append("instances over several nodes (" + ", ".join(f"{r.site} {r.role}: {r.nodes} x "
                                                              f"{r.chips_per_node} GPUs" for r in wide)
                     + ("): node 0 of an instance runs its script, the others its -worker.sh with NODE_RANK 1, 2, "
                        "...; NODE0_ADDR is node 0's address" if target in ("vllm", "llm-d") else
                        "): run their script on every node of an instance with NODE_RANK 0, 1, ... and NODE0_ADDR "
                        "the address of rank 0"))
    return ExportAnswer(out, target, rows, notes)
