"""Model and hardware profiles: YAML files in, validated frozen dataclasses out.

Profiles are data. The bundled ones live in ``model_profiles/`` and ``hardware_profiles/`` at the top of
the repository and are installed inside the package (``prfaas_plan.model_profiles``); extra folders come
from ``--profiles DIR`` or the ``PRFAAS_PLAN_PROFILES`` environment variable (``os.pathsep``-separated;
each folder may hold model and hardware YAMLs side by side, told apart by their ``kind:`` field or by a
``models/`` / ``hardware/`` subfolder). A later folder overrides an earlier profile of the same name.

Every number in a profile carries a source: a ``sources:`` mapping from field (or group of fields) to
where it came from, or ``assumed: why``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import PlanError, closest_names

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5, "mxfp4": 0.5, "int4": 0.5}

ATTENTION_KINDS = ("gqa", "mla", "swa", "kda", "gated_deltanet", "lightning")
GROWING_KINDS = ("gqa", "mla")          # block-level KV that grows with the prompt
WINDOW_KINDS = ("swa",)                 # KV capped at a window
RECURRENT_KINDS = ("kda", "gated_deltanet", "lightning")  # fixed-size state per request

# Fields each attention kind needs (beyond kind and layers); value None = optional.
_ATTN_FIELDS: dict[str, dict[str, Any]] = {
    "gqa": {"num_heads": int, "num_kv_heads": int, "head_dim": int, "v_head_dim": None, "output_gate": None},
    "swa": {"num_heads": int, "num_kv_heads": int, "head_dim": int, "v_head_dim": None, "window": int,
            "output_gate": None},
    "mla": {"num_heads": int, "kv_lora_rank": int, "qk_rope_head_dim": int, "qk_nope_head_dim": int,
            "v_head_dim": int, "q_lora_rank": None, "output_gate": None},
    "kda": {"num_heads": int, "head_dim": int, "conv_kernel": int},
    "gated_deltanet": {"num_key_heads": int, "num_value_heads": int, "key_head_dim": int,
                       "value_head_dim": int, "conv_kernel": int},
    "lightning": {"num_heads": int, "head_dim": int},
}


def dtype_bytes(name: str, where: str) -> float:
    """Bytes per element of a dtype name (``bf16`` -> 2); `PlanError` naming ``where`` if unknown."""
    try:
        return DTYPE_BYTES[str(name).lower()]
    except KeyError:
        raise PlanError(f"{where}: unknown dtype {name!r}; expected one of {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class AttentionGroup:
    """All layers of one attention kind with identical shapes.

    ``layers`` are 0-based layer indices. Dimensions are element counts; which fields are meaningful
    depends on ``kind`` (see ``_ATTN_FIELDS``); unused ones are 0.
    """

    kind: str
    layers: tuple[int, ...]
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    window: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0
    num_key_heads: int = 0
    num_value_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    conv_kernel: int = 0
    output_gate: bool = False

    @property
    def count(self) -> int:
        """Number of layers in the group."""
        return len(self.layers)


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts FFN shape: ``num_experts`` routed experts of ``expert_intermediate`` width,
    ``top_k`` routed per token, plus ``shared_experts`` always-on experts of ``shared_intermediate``."""

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_experts: int = 0
    shared_intermediate: int = 0
    latent_dim: int = 0  # >0: routed experts work in a latent space of this width (Kimi-K3's latent MoE)


@dataclass(frozen=True)
class MeasuredPrefill:
    """A measured prefill profile of this model on one instance shape (lengths in tokens, latency in s,
    cache in bytes as reported)."""

    instance: str
    lengths: tuple[int, ...]
    latency_s: tuple[float, ...]
    cache_bytes: tuple[float, ...]
    source: str


@dataclass(frozen=True)
class ModelProfile:
    """An LLM architecture, as far as capacity planning needs it.

    Sizes are element counts; dtypes name the element type of weights, the KV cache, recurrent state and
    the short-convolution state.
    """

    name: str
    display_name: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    max_context: int
    attention: tuple[AttentionGroup, ...]
    moe: MoE | None
    moe_layers: tuple[int, ...]
    dense_intermediate: int
    weight_dtype: str = "bf16"
    expert_dtype: str = "bf16"      # routed-expert weights (W4A16 checkpoints quantize only these)
    kv_dtype: str = "bf16"
    state_dtype: str = "fp32"
    conv_dtype: str = "bf16"
    tie_word_embeddings: bool = False
    aliases: tuple[str, ...] = ()
    published_params: tuple[float, float] | None = None  # (total, active) as published
    reconstruction: str = ""        # non-empty when the architecture is a documented reconstruction
    measured_prefill: tuple[MeasuredPrefill, ...] = ()
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    path: str = ""

    @property
    def dense_layers(self) -> tuple[int, ...]:
        """Layers whose FFN is dense (not MoE)."""
        moe = set(self.moe_layers)
        return tuple(i for i in range(self.num_layers) if i not in moe)

    def groups(self, *kinds: str) -> tuple[AttentionGroup, ...]:
        """Attention groups of the given kinds."""
        return tuple(g for g in self.attention if g.kind in kinds)

    @property
    def weights_summary(self) -> str:
        """E.g. ``fp8`` or ``bf16 (experts int4)``."""
        if self.expert_dtype == self.weight_dtype or self.moe is None:
            return self.weight_dtype
        return f"{self.weight_dtype} (experts {self.expert_dtype})"

    @property
    def attention_summary(self) -> str:
        """E.g. ``KDA 20 + MLA 7``."""
        return " + ".join(f"{g.kind.upper().replace('GATED_DELTANET', 'GDN')} {g.count}" for g in self.attention)


@dataclass(frozen=True)
class Price:
    """Price indications for one chip, labelled: purchase in USD, cloud rental in USD per GPU-hour."""

    purchase_usd: float
    cloud_usd_per_hour: float
    note: str


@dataclass(frozen=True)
class Calibration:
    """Per-chip efficiency constants of the performance model (see `prfaas_plan.performance`).

    ``compute_efficiency`` and ``memory_efficiency`` are achieved fractions of peak FLOPS and HBM
    bandwidth; ``overhead_s`` is a fixed per-request prefill overhead in seconds; ``comm_efficiency`` the
    achieved fraction of scale-up bandwidth.
    """

    compute_efficiency: float
    memory_efficiency: float
    overhead_s: float
    comm_efficiency: float
    source: str


@dataclass(frozen=True)
class HardwareProfile:
    """One accelerator chip. FLOPS are dense (no sparsity), per chip."""

    name: str
    display_name: str
    peak_tflops: dict[str, float] = field(hash=False)   # dtype -> TFLOPS (1e12 FLOP/s)
    hbm_gb: float = 0.0                 # capacity, 1e9 bytes
    hbm_tb_s: float = 0.0               # bandwidth, 1e12 bytes/s
    scaleup_gb_s: float = 0.0           # NVLink-class bandwidth per direction per chip, 1e9 bytes/s
    nic_gbps: float = 0.0               # scale-out NIC per chip, 1e9 bit/s
    power_w: float = 0.0                # board power, W
    price: Price | None = None
    calibration: Calibration | None = None
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    path: str = ""

    def flops(self, dtype: str) -> float:
        """Peak dense FLOP/s of GEMMs whose weights are stored in ``dtype``.

        fp8 (W8A8) and int8 run on the 8-bit tensor cores. 4-bit weights are weight-only quantization
        (W4A16): kernels dequantize to bf16, so they compute at the bf16 rate, except fp4 formats on a
        chip with native fp4 tensor cores. fp16 runs at the bf16 rate.
        """
        key = {"fp16": "bf16", "int8": "fp8", "int4": "bf16", "fp4": "fp4", "mxfp4": "fp4"}.get(dtype, dtype)
        if key not in self.peak_tflops:
            key = "bf16"
        return self.peak_tflops[key] * 1e12


# ----------------------------------------------------------------------------------------------------
# Loading


def _bundled_dir(kind: str) -> list[Path]:
    """The bundled profile folder: inside the installed package, or at the top of a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / f"{kind}_profiles", here.parent / f"{kind}_profiles"):
        if candidate.is_dir():
            return [candidate]
    return []


_extra_dirs: list[Path] = []


def add_profile_dir(path: str | Path) -> None:
    """Add a user folder of profiles (the CLI's ``--profiles``); later folders win on name clashes."""
    p = Path(path)
    if not p.is_dir():
        raise PlanError(f"--profiles {str(path)!r}: not a folder")
    _extra_dirs.append(p)
    _load_all.cache_clear()


def _user_dirs() -> list[Path]:
    env = os.environ.get("PRFAAS_PLAN_PROFILES", "")
    dirs = [Path(p) for p in env.split(os.pathsep) if p]
    for d in dirs:
        if not d.is_dir():
            raise PlanError(f"PRFAAS_PLAN_PROFILES entry {str(d)!r}: not a folder")
    return dirs + _extra_dirs


def read_yaml(path: Path) -> dict:
    """Read one YAML mapping; malformed YAML becomes a `PlanError` naming file and line."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{where}: malformed YAML ({problem})") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a YAML mapping at the top level")
    return data


def _profile_kind(data: dict, path: Path, default: str) -> str:
    kind = data.get("kind")
    if kind is None:
        parent = path.parent.name
        kind = "model" if parent in ("models", "model_profiles") else (
            "hardware" if parent in ("hardware", "hardware_profiles") else default)
    if kind not in ("model", "hardware"):
        raise PlanError(f"{path}: field 'kind' must be 'model' or 'hardware', not {kind!r}")
    return kind


@lru_cache(maxsize=None)
def _load_all() -> tuple[dict[str, ModelProfile], dict[str, HardwareProfile]]:
    models: dict[str, ModelProfile] = {}
    hardware: dict[str, HardwareProfile] = {}
    sources: list[tuple[Path, str]] = [(d, "model") for d in _bundled_dir("model")]
    sources += [(d, "hardware") for d in _bundled_dir("hardware")]
    for d in _user_dirs():
        sources.append((d, "model"))
    for folder, default in sources:
        for path in sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("*.yml")):
            data = read_yaml(path)
            kind = _profile_kind(data, path, default)
            if kind == "model":
                prof = model_from_dict(data, str(path))
                models[prof.name] = prof
            else:
                hw = hardware_from_dict(data, str(path))
                hardware[hw.name] = hw
    return models, hardware


def all_models() -> dict[str, ModelProfile]:
    """Every known model profile by canonical name."""
    return _load_all()[0]


def all_hardware() -> dict[str, HardwareProfile]:
    """Every known hardware profile by canonical name."""
    return _load_all()[1]


def _lookup(name: str, table: dict, what: str):
    key = str(name).strip().lower()
    if key in table:
        return table[key]
    for prof in table.values():
        if key in prof.aliases:
            return prof
    names = list(table) + [a for p in table.values() for a in p.aliases]
    raise PlanError(f"unknown {what} {name!r}; {closest_names(key, names)}")


def get_model(name: str | ModelProfile) -> ModelProfile:
    """Look a model profile up by name or alias (case-insensitive)."""
    if isinstance(name, ModelProfile):
        return name
    return _lookup(name, all_models(), "model")


def get_hardware(name: str | HardwareProfile) -> HardwareProfile:
    """Look a hardware profile up by name or alias (case-insensitive)."""
    if isinstance(name, HardwareProfile):
        return name
    return _lookup(name, all_hardware(), "chip")


# ----------------------------------------------------------------------------------------------------
# Validation: dict -> dataclass


class _Fields:
    """Typed access to one mapping of a profile, raising `PlanError` that names file and field."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise PlanError(f"{where}: expected a mapping")
        self.data = data
        self.where = where

    def get(self, key: str, typ: type, default: Any = ..., minimum: float | None = None) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise PlanError(f"{self.where}: missing field '{key}'")
            return default
        value = self.data[key]
        try:
            if typ is int:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError
                value = int(value)
            elif typ is float:
                if isinstance(value, bool):
                    raise ValueError
                value = float(value)
            elif typ is bool:
                if not isinstance(value, bool):
                    raise ValueError
            elif typ is str:
                value = str(value)
        except (TypeError, ValueError):
            raise PlanError(f"{self.where}: field '{key}' must be {typ.__name__}, not {value!r}") from None
        if minimum is not None and value < minimum:
            raise PlanError(f"{self.where}: field '{key}' must be >= {minimum}, not {value!r}")
        return value


def _layer_list(value: Any, num_layers: int, where: str) -> tuple[int, ...]:
    """Layers as a list of 0-based ints, or ``{start, stop, step}`` (stop exclusive); a group may say
    ``layers: rest`` for every layer the other groups do not name."""
    if isinstance(value, dict):
        f = _Fields(value, where)
        value = list(range(f.get("start", int, 0), f.get("stop", int, num_layers), f.get("step", int, 1)))
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise PlanError(f"{where}: 'layers' must be a list of 0-based layer indices")
    for i in value:
        if not 0 <= i < num_layers:
            raise PlanError(f"{where}: layer {i} outside 0..{num_layers - 1}")
    return tuple(value)


def model_from_dict(data: dict, path: str = "<dict>") -> ModelProfile:
    """Validate a model profile mapping (as read from YAML) into a `ModelProfile`."""
    f = _Fields(data, path)
    name = f.get("name", str).lower()
    num_layers = f.get("num_layers", int, minimum=1)
    groups = []
    raw_groups = data.get("attention")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise PlanError(f"{path}: missing field 'attention' (a list of layer groups)")
    seen: dict[int, str] = {}
    explicit = set()
    for raw in raw_groups:
        if isinstance(raw, dict) and raw.get("layers") != "rest":
            explicit.update(_layer_list(raw.get("layers"), num_layers, f"{path}: attention"))
    for gi, raw in enumerate(raw_groups):
        where = f"{path}: attention[{gi}]"
        g = _Fields(raw, where)
        kind = g.get("kind", str).lower()
        if kind not in _ATTN_FIELDS:
            raise PlanError(f"{where}: unknown attention kind {kind!r}; expected one of {', '.join(ATTENTION_KINDS)}")
        if raw.get("layers") == "rest":  # every layer no other group names
            layers = tuple(i for i in range(num_layers) if i not in explicit)
        else:
            layers = _layer_list(raw.get("layers"), num_layers, where)
        kwargs: dict[str, Any] = {}
        for key, typ in _ATTN_FIELDS[kind].items():
            if key == "output_gate":
                kwargs[key] = g.get(key, bool, False)
            elif typ is None:
                kwargs[key] = g.get(key, int, 0, minimum=0)
            else:
                kwargs[key] = g.get(key, typ, minimum=1)
        if kind in ("gqa", "swa") and not kwargs.get("v_head_dim"):
            kwargs["v_head_dim"] = kwargs["head_dim"]
        for i in layers:
            if i in seen:
                raise PlanError(f"{where}: layer {i} is already {seen[i]}")
            seen[i] = kind
        groups.append(AttentionGroup(kind=kind, layers=layers, **kwargs))
    missing = [i for i in range(num_layers) if i not in seen]
    if missing:
        raise PlanError(f"{path}: layers {missing[:5]} have no attention group")

    moe = None
    moe_layers: tuple[int, ...] = ()
    ffn = _Fields(data.get("ffn", {}), f"{path}: ffn")
    if "moe" in ffn.data and ffn.data["moe"] is not None:
        m = _Fields(ffn.data["moe"], f"{path}: ffn.moe")
        moe = MoE(
            num_experts=m.get("num_experts", int, minimum=1),
            top_k=m.get("top_k", int, minimum=1),
            expert_intermediate=m.get("expert_intermediate", int, minimum=1),
            shared_experts=m.get("shared_experts", int, 0, minimum=0),
            shared_intermediate=m.get("shared_intermediate", int, 0, minimum=0),
            latent_dim=m.get("latent_dim", int, 0, minimum=0),
        )
        if moe.top_k > moe.num_experts:
            raise PlanError(f"{path}: ffn.moe: top_k {moe.top_k} exceeds num_experts {moe.num_experts}")
        dense = _layer_list(ffn.data.get("dense_layers", []), num_layers, f"{path}: ffn.dense_layers")
        moe_layers = tuple(i for i in range(num_layers) if i not in set(dense))
    dense_inter = ffn.get("dense_intermediate", int, 0, minimum=0)
    if (moe is None or len(moe_layers) < num_layers) and dense_inter <= 0:
        raise PlanError(f"{path}: ffn: missing field 'dense_intermediate' (model has dense FFN layers)")

    dt = _Fields(data.get("dtypes", {}), f"{path}: dtypes")
    dtypes = {k: dt.get(k, str, d).lower() for k, d in
              (("weights", "bf16"), ("kv_cache", "bf16"), ("state", "fp32"), ("conv_state", "bf16"))}
    dtypes["experts"] = dt.get("experts", str, dtypes["weights"]).lower()
    for k, v in dtypes.items():
        dtype_bytes(v, f"{path}: dtypes.{k}")

    published = None
    if data.get("published_params"):
        p = _Fields(data["published_params"], f"{path}: published_params")
        published = (p.get("total", float, minimum=0), p.get("active", float, minimum=0))

    measured = []
    for mi, raw in enumerate(data.get("measured_prefill", []) or []):
        where = f"{path}: measured_prefill[{mi}]"
        m = _Fields(raw, where)
        points = raw.get("points")
        if not isinstance(points, list) or len(points) < 2:
            raise PlanError(f"{where}: 'points' must list at least two measurements")
        rows = [_Fields(p, f"{where}.points") for p in points]
        lengths = tuple(r.get("len_tokens", int, minimum=1) for r in rows)
        if list(lengths) != sorted(set(lengths)):
            raise PlanError(f"{where}: points must have strictly increasing len_tokens")
        measured.append(MeasuredPrefill(
            instance=m.get("instance", str),
            lengths=lengths,
            latency_s=tuple(r.get("latency_s", float, minimum=0) for r in rows),
            cache_bytes=tuple(r.get("cache_mib", float, 0.0, minimum=0) * 2**20 for r in rows),
            source=m.get("source", str),
        ))

    sources = data.get("sources", {})
    if not isinstance(sources, dict) or not sources:
        raise PlanError(f"{path}: missing field 'sources' (where every number comes from)")

    return ModelProfile(
        name=name,
        display_name=f.get("display_name", str, name),
        num_layers=num_layers,
        hidden_size=f.get("hidden_size", int, minimum=1),
        vocab_size=f.get("vocab_size", int, minimum=1),
        max_context=f.get("max_context", int, minimum=1),
        attention=tuple(groups),
        moe=moe,
        moe_layers=moe_layers,
        dense_intermediate=dense_inter,
        weight_dtype=dtypes["weights"],
        expert_dtype=dtypes["experts"],
        kv_dtype=dtypes["kv_cache"],
        state_dtype=dtypes["state"],
        conv_dtype=dtypes["conv_state"],
        tie_word_embeddings=f.get("tie_word_embeddings", bool, False),
        aliases=tuple(str(a).lower() for a in data.get("aliases", []) or []),
        published_params=published,
        reconstruction=f.get("reconstruction", str, ""),
        measured_prefill=tuple(measured),
        sources={str(k): str(v) for k, v in sources.items()},
        path=path,
    )


def hardware_from_dict(data: dict, path: str = "<dict>") -> HardwareProfile:
    """Validate a hardware profile mapping into a `HardwareProfile`."""
    f = _Fields(data, path)
    tf = _Fields(data.get("peak_tflops"), f"{path}: peak_tflops")
    peak = {str(k).lower(): tf.get(k, float, minimum=0) for k in tf.data}
    if "bf16" not in peak:
        raise PlanError(f"{path}: peak_tflops: missing field 'bf16'")
    price = None
    if data.get("price"):
        p = _Fields(data["price"], f"{path}: price")
        price = Price(p.get("purchase_usd", float, minimum=0), p.get("cloud_usd_per_hour", float, minimum=0),
                      p.get("note", str, "price indication"))
    calibration = None
    if data.get("calibration"):
        c = _Fields(data["calibration"], f"{path}: calibration")
        calibration = Calibration(
            compute_efficiency=c.get("compute_efficiency", float, minimum=0),
            memory_efficiency=c.get("memory_efficiency", float, minimum=0),
            overhead_s=c.get("overhead_s", float, minimum=0),
            comm_efficiency=c.get("comm_efficiency", float, 0.8, minimum=0),
            source=c.get("source", str),
        )
    sources = data.get("sources", {})
    if not isinstance(sources, dict) or not sources:
        raise PlanError(f"{path}: missing field 'sources' (where every number comes from)")
    return HardwareProfile(
        name=f.get("name", str).lower(),
        display_name=f.get("display_name", str, f.get("name", str)),
        peak_tflops=peak,
        hbm_gb=f.get("hbm_gb", float, minimum=0.001),
        hbm_tb_s=f.get("hbm_tb_s", float, minimum=0.001),
        scaleup_gb_s=f.get("scaleup_gb_s", float, minimum=0.001),
        nic_gbps=f.get("nic_gbps", float, 0.0, minimum=0),
        power_w=f.get("power_w", float, 0.0, minimum=0),
        price=price,
        calibration=calibration,
        aliases=tuple(str(a).lower() for a in data.get("aliases", []) or []),
        sources={str(k): str(v) for k, v in sources.items()},
        path=path,
    )
