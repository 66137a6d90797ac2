"""Profile data classes: what a model and a chip are, as frozen dataclasses with their units.

Loading lives in ``store.py`` and validation in ``parse.py``; this module holds only the shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PlanError
from .efficiency import Calibration

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5, "mxfp4": 0.5, "int4": 0.5}

from .kinds import KINDS, AttentionKind

# Caps on element counts in a profile: far beyond any published model, low enough that exact int64
# arithmetic on them (KV bytes of a whole context, FLOPs) cannot overflow. Raise them here if a real
# architecture ever needs more.
MAX_LAYERS = 4096
MAX_DIM = 1 << 20          # hidden size, head dims, ranks, FFN widths (1,048,576)
MAX_EXPERTS = 1 << 16
MAX_VOCAB = 1 << 24
MAX_CONTEXT = 1 << 30      # = units.MAX_TOKENS


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
    depends on ``kind`` (see `prfaas_plan.profiles.kinds`); unused ones are 0.
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
    state_size: int = 0
    num_groups: int = 0
    output_gate: bool = False

    @property
    def count(self) -> int:
        """Number of layers in the group."""
        return len(self.layers)

    @property
    def rule(self) -> AttentionKind:
        """The byte, state and FLOP rules of this group's kind."""
        return KINDS[self.kind]


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
    no_ffn_layers: tuple[int, ...] = ()  # layers with no FFN at all (Nemotron-H mixers followed by a mixer)
    ffn_gated: bool = True          # dense FFN gate+up+down (SwiGLU/GeGLU); False: up+down only (squared ReLU)
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
        """Layers whose FFN is dense (not MoE, and not one of the layers without an FFN)."""
        other = set(self.moe_layers) | set(self.no_ffn_layers)
        return tuple(i for i in range(self.num_layers) if i not in other)

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices of one dense FFN of ``hidden x dense_intermediate`` each: 3 for a gated
        FFN (gate, up, down), 2 for an ungated one (up, down; Nemotron-H's squared-ReLU MLP)."""
        return 3 if self.ffn_gated else 2

    def groups(self, *kinds: str) -> tuple[AttentionGroup, ...]:
        """Attention groups of the given kinds."""
        return tuple(g for g in self.attention if g.kind in kinds)

    def cached_as(self, cache: str) -> tuple[AttentionGroup, ...]:
        """Attention groups of one cache class: ``"growing"``, ``"window"`` or ``"recurrent"``."""
        return tuple(g for g in self.attention if g.rule.cache == cache)

    @property
    def weights_summary(self) -> str:
        """E.g. ``fp8`` or ``bf16 (experts int4)``."""
        if self.expert_dtype == self.weight_dtype or self.moe is None:
            return self.weight_dtype
        return f"{self.weight_dtype} (experts {self.expert_dtype})"

    @property
    def attention_summary(self) -> str:
        """E.g. ``KDA 20 + MLA 7``."""
        return " + ".join(f"{g.rule.summary_name()} {g.count}" for g in self.attention)


@dataclass(frozen=True)
class Price:
    """Price indications for one chip, labelled: purchase in USD, cloud rental in USD per GPU-hour."""

    purchase_usd: float
    cloud_usd_per_hour: float
    note: str


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
    scaleup_domain: int = 8             # chips one scale-up fabric joins (an HGX node: 8; NVL72: 72)
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
        return self.peak_tflops[self.rate_class(dtype)] * 1e12

    def nodes_for(self, chips: int) -> int:
        """Nodes (scale-up domains) an instance of ``chips`` of this chip spans: ``ceil(chips / scaleup_domain)``."""
        return -(-chips // self.scaleup_domain)

    def collective_seconds_per_byte(self, span: int, pattern: str = "ring") -> tuple[float, float]:
        """Seconds per byte a chip sends in a collective over ``span`` chips, as ``(scale-up part, NIC part)``:
        the collective takes the longer of the two, the scale-up part divided by the calibration's comm
        efficiency (a fit of the scale-up fabric) and the NIC part at line rate (docs/methods.md, "Instances
        over several nodes").

        Within one ``scaleup_domain`` everything goes over the scale-up link (NIC part 0). Beyond it the chips
        sit on ``nodes`` nodes of ``d = span / nodes`` chips, each chip with its own NIC (``nic_gbps``). A
        ``"ring"`` collective (all-reduce, all-gather, reduce-scatter) runs one ring per NIC, so a node's ``d``
        NICs carry between them what one chip sends: ``1 / (d x NIC)`` per byte beside the scale-up link's.
        An ``"all-to-all"`` (EP dispatch and combine) sends ``(span - d) / (span - 1)`` of a chip's bytes
        through that chip's own NIC while the rest, ``(d - 1) / (span - 1)``, goes over the scale-up link at
        the same time.
        """
        if pattern not in ("ring", "all-to-all"):
            raise ValueError(f"unknown collective pattern {pattern!r}")
        scaleup = self.scaleup_gb_s * 1e9
        if span <= self.scaleup_domain:
            return 1.0 / scaleup, 0.0
        if self.nic_gbps <= 0:
            raise PlanError(f"hardware {self.name}: a {span}-chip instance spans more than its "
                            f"{self.scaleup_domain}-chip scale-up domain, and the profile gives no nic_gbps for "
                            "the collectives between nodes; add nic_gbps or choose instances of at most "
                            f"{self.scaleup_domain} chips")
        nic = self.nic_gbps * 1e9 / 8
        d = span / self.nodes_for(span)
        if pattern == "ring":
            return 1.0 / scaleup, 1.0 / (d * nic)
        return (d - 1) / (span - 1) / scaleup, (span - d) / (span - 1) / nic

    def collective_bytes_per_s(self, span: int, pattern: str = "ring", scaleup_efficiency: float = 1.0) -> float:
        """Bytes/s per chip and direction of a collective over ``span`` chips (`collective_seconds_per_byte`),
        the scale-up link at ``scaleup_efficiency`` of its rate: the scale-up link within one domain; beyond
        it ``min(scale-up, d x NIC)`` for a ring and ``1 / max((d-1)/(span-1)/scale-up, (span-d)/(span-1)/NIC)``
        for an all-to-all."""
        up, nic = self.collective_seconds_per_byte(span, pattern)
        if nic == 0.0:
            return self.scaleup_gb_s * 1e9 * scaleup_efficiency
        return 1.0 / max(up / scaleup_efficiency, nic)

    def rate_class(self, dtype: str) -> str:
        """The ``peak_tflops`` key (tensor-core rate class) GEMMs on ``dtype`` weights run at (see `flops`)."""
        key = {"fp16": "bf16", "int8": "fp8", "int4": "bf16", "fp4": "fp4", "mxfp4": "fp4"}.get(dtype, dtype)
        return key if key in self.peak_tflops else "bf16"
