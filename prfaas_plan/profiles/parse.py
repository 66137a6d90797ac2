"""Profile validation: a mapping read from YAML in, a frozen profile dataclass out.

Every number in a profile carries a source: a ``sources:`` mapping from field (or group of fields)
to where it came from, or ``assumed: why``.
"""

from __future__ import annotations

import functools
import os
from typing import Annotated, Any

from ..errors import PlanError, closest_names
from .efficiency import KERNEL_DEFAULTS, Calibration
from .kinds import KINDS
from .schema import (
    DTYPE_BYTES,
    AttentionGroup,
    HardwareProfile,
    MeasuredPrefill,
    ModelProfile,
    MoE,
    Price,
    dtype_bytes,
)


def _without_pydantic_plugins(build):
    """``build`` (a schema factory) run with pydantic's plugin discovery off, as typer builds its own
    adapters: these internal schemas take no plugins, and the discovery scans every installed
    distribution's entry points (10-20 ms) the first time a validator is built."""

    @functools.wraps(build)
    def built(*args):
        previous = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
        try:
            return build(*args)
        finally:
            if previous is None:
                del os.environ["PYDANTIC_DISABLE_PLUGINS"]
            else:
                os.environ["PYDANTIC_DISABLE_PLUGINS"] = previous

    return built


@functools.cache
@_without_pydantic_plugins
def _model_schemas():
    """The pydantic schemas of a model profile (built on first use; see `validation`)."""
    from typing import Literal

    from pydantic import Field, create_model

    from .schema import MAX_CONTEXT, MAX_DIM, MAX_EXPERTS, MAX_LAYERS, MAX_VOCAB
    from .validation import LowerName, Name, NonNegative, Strict, Text

    Dim = Annotated[int, Field(ge=1, le=MAX_DIM)]
    OptDim = Annotated[int, Field(ge=0, le=MAX_DIM)]
    Layer = Annotated[int, Field(ge=0, lt=MAX_LAYERS)]
    DType = LowerName

    class LayerRange(Strict):
        start: Annotated[int, Field(ge=0, le=MAX_LAYERS)] = 0
        stop: Annotated[int, Field(ge=0, le=MAX_LAYERS)] | None = None
        step: Annotated[int, Field(ge=1, le=MAX_LAYERS)] = 1

    Layers = Literal["rest"] | Annotated[list[Layer], Field(max_length=MAX_LAYERS)] | LayerRange

    class MoESchema(Strict):
        num_experts: Annotated[int, Field(ge=1, le=MAX_EXPERTS)]
        top_k: Annotated[int, Field(ge=1, le=MAX_EXPERTS)]
        expert_intermediate: Dim
        shared_experts: Annotated[int, Field(ge=0, le=MAX_EXPERTS)] = 0
        shared_intermediate: OptDim = 0
        latent_dim: OptDim = 0

    class FFNSchema(Strict):
        moe: MoESchema | None = None
        dense_layers: Layers = []
        no_ffn_layers: Annotated[list[Layer], Field(max_length=MAX_LAYERS)] = []
        dense_intermediate: OptDim = 0
        gated: bool = True

    class DTypes(Strict):
        weights: DType = "bf16"
        experts: DType | None = None
        kv_cache: DType = "bf16"
        state: DType = "fp32"
        conv_state: DType = "bf16"

    class Published(Strict):
        total: NonNegative
        active: NonNegative

    class Point(Strict):
        len_tokens: Annotated[int, Field(ge=1, le=MAX_CONTEXT)]
        latency_s: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
        cache_mib: Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)] = 0.0

    class Measured(Strict):
        instance: Name
        points: Annotated[list[Point], Field(min_length=2, max_length=10_000)]
        source: Text

    class ModelDoc(Strict):
        kind: Literal["model"] | None = None
        name: Name
        display_name: Name | None = None
        aliases: Annotated[list[Name], Field(max_length=100)] = []
        num_layers: Annotated[int, Field(ge=1, le=MAX_LAYERS)]
        hidden_size: Dim
        vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)]
        max_context: Annotated[int, Field(ge=1, le=MAX_CONTEXT)]
        attention: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_LAYERS)]
        ffn: FFNSchema = FFNSchema()
        dtypes: DTypes = DTypes()
        tie_word_embeddings: bool = False
        published_params: Published | None = None
        reconstruction: str = ""
        measured_prefill: list[Measured] = []
        sources: Annotated[dict[str, str], Field(min_length=1)]

    @_without_pydantic_plugins
    def group_schema(kind_name: str):
        kind = KINDS[kind_name]
        fields: dict[str, Any] = {"kind": (str, ...), "layers": (Layers, ...)}
        for f in kind.required:
            fields[f] = (Annotated[int, Field(ge=1, le=MAX_DIM)], ...)
        for f in kind.optional:
            fields[f] = (OptDim, 0)
        if kind.gated:
            fields["output_gate"] = (bool, False)
        return create_model(f"{type(kind).__name__}Group", __base__=Strict, **fields)

    return ModelDoc, functools.cache(group_schema)


def _layers(spec: Any, num_layers: int, where: str) -> tuple[int, ...]:
    """Layers as validated by the schema (a list, a ``{start, stop, step}`` range with stop exclusive),
    checked against the model's depth; ``rest`` is resolved by the caller."""
    if not isinstance(spec, list):
        stop = num_layers if spec.stop is None else spec.stop
        spec = list(range(spec.start, stop, spec.step))
    for i in spec:
        if i >= num_layers:
            raise PlanError(f"{where}: layer {i} outside 0..{num_layers - 1}")
    return tuple(spec)


def model_from_dict(data: dict, path: str = "<dict>") -> ModelProfile:
    """Validate a model profile mapping (as read from YAML) into a `ModelProfile`."""
    from .validation import check

    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping")
    ModelDoc, group_schema = _model_schemas()
    doc = check(ModelDoc, data, path)
    name = doc.name.lower()
    n = doc.num_layers
    raw_groups = []
    for gi, raw in enumerate(doc.attention):
        where = f"{path}: attention[{gi}]"
        kind = raw.get("kind")
        if not isinstance(kind, str):
            raise PlanError(f"{where}: missing field 'kind' (one of {', '.join(KINDS)})")
        if kind.lower() not in KINDS:
            raise PlanError(f"{where}: unknown attention kind {kind!r}; {closest_names(kind, KINDS)}")
        raw_groups.append(check(group_schema(kind.lower()), dict(raw, kind=kind.lower()), path, ("attention", gi)))
    explicit = set()
    for gi, g in enumerate(raw_groups):
        if g.layers != "rest":
            explicit.update(_layers(g.layers, n, f"{path}: attention[{gi}]"))
    groups = []
    seen: dict[int, str] = {}
    for gi, g in enumerate(raw_groups):
        where = f"{path}: attention[{gi}]"
        layers = (tuple(i for i in range(n) if i not in explicit) if g.layers == "rest"
                  else _layers(g.layers, n, where))
        for i in layers:
            if i in seen:
                raise PlanError(f"{where}: layer {i} is already {seen[i]}")
            seen[i] = g.kind
        rule = KINDS[g.kind]
        values = rule.complete(g.model_dump(exclude={"kind", "layers"}))
        group = AttentionGroup(kind=g.kind, layers=layers, **values)
        problem = rule.check(group)
        if problem:
            raise PlanError(f"{where}: {problem}")
        groups.append(group)
    missing = [i for i in range(n) if i not in seen]
    if missing:
        raise PlanError(f"{path}: layers {missing[:5]} have no attention group")

    moe = None
    moe_layers: tuple[int, ...] = ()
    ffn = doc.ffn
    no_ffn = _layers(ffn.no_ffn_layers, n, f"{path}: ffn.no_ffn_layers")
    if len(set(no_ffn)) != len(no_ffn):
        raise PlanError(f"{path}: ffn.no_ffn_layers: a layer is listed twice")
    if ffn.moe is not None:
        moe = MoE(**ffn.moe.model_dump())
        if moe.top_k > moe.num_experts:
            raise PlanError(f"{path}: ffn.moe: top_k {moe.top_k} exceeds num_experts {moe.num_experts}")
        if ffn.dense_layers == "rest":
            raise PlanError(f"{path}: ffn.dense_layers: 'rest' is for attention groups; list the dense layers")
        dense = set(_layers(ffn.dense_layers, n, f"{path}: ffn.dense_layers"))
        both = sorted(dense & set(no_ffn))
        if both:
            raise PlanError(f"{path}: ffn: layer {both[0]} is in both dense_layers and no_ffn_layers")
        moe_layers = tuple(i for i in range(n) if i not in dense and i not in set(no_ffn))
    if len(moe_layers) + len(no_ffn) < n and ffn.dense_intermediate <= 0:
        raise PlanError(f"{path}: ffn: missing field 'dense_intermediate' (model has dense FFN layers)")

    dt = doc.dtypes
    dtypes = {"weights": dt.weights, "kv_cache": dt.kv_cache, "state": dt.state, "conv_state": dt.conv_state,
              "experts": dt.experts or dt.weights}
    for k, v in dtypes.items():
        dtype_bytes(v, f"{path}: dtypes.{k}")

    measured = []
    for mi, m in enumerate(doc.measured_prefill):
        lengths = tuple(p.len_tokens for p in m.points)
        if list(lengths) != sorted(set(lengths)):
            raise PlanError(f"{path}: measured_prefill[{mi}]: points must have strictly increasing len_tokens")
        measured.append(MeasuredPrefill(
            instance=m.instance, lengths=lengths, latency_s=tuple(p.latency_s for p in m.points),
            cache_bytes=tuple(p.cache_mib * 2**20 for p in m.points), source=m.source))

    profile = ModelProfile(
        name=name,
        display_name=doc.display_name or name,
        num_layers=n,
        hidden_size=doc.hidden_size,
        vocab_size=doc.vocab_size,
        max_context=doc.max_context,
        attention=tuple(groups),
        moe=moe,
        moe_layers=moe_layers,
        dense_intermediate=ffn.dense_intermediate,
        no_ffn_layers=tuple(sorted(no_ffn)),
        ffn_gated=ffn.gated,
        weight_dtype=dtypes["weights"],
        expert_dtype=dtypes["experts"],
        kv_dtype=dtypes["kv_cache"],
        state_dtype=dtypes["state"],
        conv_dtype=dtypes["conv_state"],
        tie_word_embeddings=doc.tie_word_embeddings,
        aliases=tuple(a.lower() for a in doc.aliases),
        published_params=(doc.published_params.total, doc.published_params.active) if doc.published_params else None,
        reconstruction=doc.reconstruction,
        measured_prefill=tuple(measured),
        sources=dict(doc.sources),
        path=path,
    )
    _check_magnitudes(profile)
    return profile


def _check_magnitudes(m: ModelProfile) -> None:
    """A whole-context cache must stay an exact float64/int64 byte count (< 2^53 bytes, 9 PB)."""
    per_token = sum(g.count * g.rule.kv_elements_per_token(g) for g in m.attention) * dtype_bytes(m.kv_dtype, m.path)
    state = sum(g.count * (g.rule.state_elements(g) + g.rule.conv_channels(g) * g.conv_kernel) for g in m.attention)
    full = per_token * m.max_context + state * 4  # states at most 4 bytes an element
    if full >= 2**53:
        raise PlanError(f"{m.path}: a {m.max_context:,}-token context would cache {float(full):.3g} bytes; "
                        "dimensions this large are not a real model (check num_kv_heads/head_dim/layers)")


@functools.cache
@_without_pydantic_plugins
def _hardware_schema():
    """The pydantic schema of a hardware profile (built on first use; see `validation`)."""
    from typing import Literal

    from pydantic import Field

    from .validation import Efficiency, LowerName, Name, NonNegative, Strict, Text

    def bounded(high: float, low_exclusive: bool = True):
        return Annotated[float, Field(gt=0, le=high, allow_inf_nan=False)] if low_exclusive else \
            Annotated[float, Field(ge=0, le=high, allow_inf_nan=False)]


    class PriceDoc(Strict):
        purchase_usd: NonNegative
        cloud_usd_per_hour: NonNegative
        note: Text = "price indication"

    class CalibrationDoc(Strict):   # chip constants only (profiles/efficiency.py); overheads are the stack's
        gemm_efficiency: Annotated[dict[LowerName, Efficiency], Field(min_length=1)]
        memory_efficiency: Efficiency
        comm_efficiency: bounded(2.0)   # may exceed 1 where the switch reduces in-network (NVLink SHARP)
        loo_error: dict[Literal["ttft", "tpot", "busy"], bounded(100.0, low_exclusive=False)] = {}
        lomo_error: dict[Literal["ttft", "tpot", "busy"], bounded(100.0, low_exclusive=False)] = {}
        lomo_error_by_stack: dict[LowerName, dict[Literal["ttft", "tpot", "busy"],
                                                  bounded(100.0, low_exclusive=False)]] = {}
        loco_error: dict[Literal["ttft", "tpot", "busy"], bounded(100.0, low_exclusive=False)] = {}
        source: Text

    class HardwareDoc(Strict):
        kind: Literal["hardware"] | None = None
        name: Name
        display_name: Name | None = None
        aliases: Annotated[list[Name], Field(max_length=100)] = []
        peak_tflops: Annotated[dict[LowerName, bounded(1e6)],
                               Field(min_length=1)]
        hbm_gb: bounded(1e6)
        hbm_tb_s: bounded(1e4)
        scaleup_gb_s: bounded(1e6)
        nic_gbps: bounded(1e6, low_exclusive=False) = 0.0
        scaleup_domain: Annotated[int, Field(ge=1, le=100_000)] = 8
        power_w: bounded(1e6, low_exclusive=False) = 0.0
        price: PriceDoc | None = None
        calibration: CalibrationDoc | None = None
        sources: Annotated[dict[str, str], Field(min_length=1)]

    return HardwareDoc


def hardware_from_dict(data: dict, path: str = "<dict>") -> HardwareProfile:
    """Validate a hardware profile mapping into a `HardwareProfile`."""
    from .validation import check

    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping")
    doc = check(_hardware_schema(), data, path)
    for dtype in doc.peak_tflops:
        if dtype not in DTYPE_BYTES:
            raise PlanError(f"{path}: peak_tflops: unknown dtype {dtype!r}; {closest_names(dtype, DTYPE_BYTES)}")
    if "bf16" not in doc.peak_tflops:
        raise PlanError(f"{path}: peak_tflops: missing field 'bf16'")
    price = Price(doc.price.purchase_usd, doc.price.cloud_usd_per_hour, doc.price.note) if doc.price else None
    calibration = None
    if doc.calibration is not None:
        gemm = dict(doc.calibration.gemm_efficiency)
        classes = tuple(DTYPE_BYTES) + tuple(KERNEL_DEFAULTS)
        for key in gemm:
            if key not in classes:
                raise PlanError(f"{path}: calibration.gemm_efficiency: unknown class {key!r}; "
                                f"{closest_names(key, classes)}")
        if "bf16" not in gemm:
            raise PlanError(f"{path}: calibration.gemm_efficiency: missing field 'bf16'")
        calibration = Calibration(gemm=gemm, memory=doc.calibration.memory_efficiency,
                                  comm=doc.calibration.comm_efficiency, source=doc.calibration.source,
                                  loo_error=dict(doc.calibration.loo_error),
                                  lomo_error=dict(doc.calibration.lomo_error),
                                  lomo_error_by_stack={k: dict(v) for k, v in
                                                       doc.calibration.lomo_error_by_stack.items()},
                                  loco_error=dict(doc.calibration.loco_error))
    name = doc.name.lower()
    return HardwareProfile(
        name=name,
        display_name=doc.display_name or doc.name,
        peak_tflops=dict(doc.peak_tflops),
        hbm_gb=doc.hbm_gb,
        hbm_tb_s=doc.hbm_tb_s,
        scaleup_gb_s=doc.scaleup_gb_s,
        nic_gbps=doc.nic_gbps,
        scaleup_domain=doc.scaleup_domain,
        power_w=doc.power_w,
        price=price,
        calibration=calibration,
        aliases=tuple(a.lower() for a in doc.aliases),
        sources=dict(doc.sources),
        path=path,
    )
