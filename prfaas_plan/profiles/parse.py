"""Profile validation: a mapping read from YAML in, a frozen profile dataclass out.

Every number in a profile carries a source: a ``sources:`` mapping from field (or group of fields)
to where it came from, or ``assumed: why``.
"""

from __future__ import annotations

from typing import Any

from ..errors import PlanError
from .efficiency import calibration_from_dict
from .schema import (
    _ATTN_FIELDS,
    ATTENTION_KINDS,
    AttentionGroup,
    HardwareProfile,
    MeasuredPrefill,
    ModelProfile,
    MoE,
    Price,
    dtype_bytes,
)


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
        calibration = calibration_from_dict(data["calibration"], f"{path}: calibration")
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
