"""Per-operator work of one forward pass on the busiest chip of an instance: FLOPs, HBM bytes, scale-up bytes.

A forward pass serves ``requests`` sequences that each add ``new_tokens`` after ``context`` cached tokens:
prefill of one prompt is ``(1, l, 0)``, a decode step of a batch is ``(B, 1, c)``. Prefill and decode share
these operators; only the MLA kernel form and the linear-attention kernel form depend on the phase.
Every quantity is per chip (the instance is ``tp`` chips), vectorized over numpy arrays of the pass
shape, and hardware-free: `prfaas_plan.performance.roofline` turns work into time.

Operator classes (`OpWork.name`):

- ``attn_proj``: attention input projections and output projection of every layer (all kinds);
- ``attn_full``: causal full attention cores (GQA, MLA), quadratic in length;
- ``attn_swa``: sliding-window attention cores;
- ``attn_linear``: linear-attention cores (KDA, Gated DeltaNet, Lightning): chunked in prefill, recurrent
  in decode;
- ``dense_ffn``, ``moe_routed``, ``moe_shared`` (shared experts, router, latent projections), ``lm_head``;
- ``elementwise``: norms, residual adds and the embedding lookup (memory-bound);
- ``comm_tp`` (tensor-parallel all-reduce) and ``comm_ep`` (expert-parallel all-to-all) on the scale-up link,
  and through the NICs for an instance wider than one scale-up domain.

Assumptions (each stated where it is used): activations in bf16; the attention core computes in bf16;
weights are stored in the profile's ``weight_dtype``, except routed experts in its ``expert_dtype`` (W4A16
checkpoints quantize only those), and each GEMM runs at the peak `HardwareProfile.flops` gives for its
weights' dtype (8-bit on the fp8 tensor cores; 4-bit weights are dequantized and run at the bf16 rate
unless the chip has native fp4); uniform routing over experts; chunked linear attention with 64-token
chunks (FLA kernels); attention reads each cached KV byte once (flash kernels keep re-reads in on-chip
memory); two all-reduces per layer under tensor parallelism (after attention, after the FFN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import arithmetic as A
from ..profiles import AttentionGroup, ModelProfile, dtype_bytes
from ..vocabulary import MoeSplit, values
from .sharing import Same, remembered

ACT_BYTES = 2            # bf16 activations
CORE_DTYPE = "bf16"      # attention cores compute in bf16
LINEAR_CHUNK = 64        # chunk of the chunked linear-attention kernels (flash-linear-attention default)
ELEMENTWISE_PASSES = 10  # hidden-state reads+writes per layer: 2 RMSNorms (2 each), 2 residual adds (3 each)
MOE_MODES = values(MoeSplit)
PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class Parallel:
    """How an instance of ``tp`` chips splits a model.

    Attention, dense FFN, shared experts and the LM head are tensor-parallel over all ``tp`` chips.
    Routed experts are either sliced the same way (``moe="tp"``: every chip holds 1/tp of every expert,
    SGLang's default), distributed whole (``moe="ep"``: E/tp experts per chip, tokens dispatched and
    combined by all-to-all, the busiest chip setting the pace) or both (``moe="ep<k>"``, expert TP x EP:
    E/k experts per group of tp/k chips, each sliced over its group; `moe_split.ep_degree`).

    ``dp_attention``: attention runs data-parallel instead (SGLang ``--enable-dp-attention`` with ``--dp``
    = ``--tp``): each chip holds a whole copy of the attention weights and serves ``1/tp`` of the requests
    with their whole cache, and the tokens are gathered across chips for the FFN/MoE (which stays split as
    ``moe`` says) and scattered back. A whole number ``k`` (1 < k < tp, dividing it) instead runs ``k``
    data-parallel attention ranks of ``tp / k`` chips each, attention tensor-parallel within a rank
    (SGLang ``--dp-size k``): the attention weights are copied ``k`` times, not ``tp``, and a GQA model's
    KV heads need not be replicated (`attention_ranks`).
    """

    tp: int
    moe: str = "tp"
    dp_attention: bool | int = False

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise ValueError("tp must be >= 1")
        if self.moe not in MOE_MODES:
            from .moe_split import ep_degree

            ep_degree(self.moe, self.tp)  # an expert-TP x EP hybrid, or ValueError
        attention_ranks(self.dp_attention, self.tp)   # or ValueError

    @property
    def ep(self) -> int:
        """Expert-parallel groups of the routed experts (1: sliced by TP; ``tp``: whole experts per chip)."""
        from .moe_split import ep_degree

        return ep_degree(self.moe, self.tp) if self.tp > 1 else 1

    @property
    def attention_tp(self) -> int:
        """Tensor-parallel degree of attention within one data-parallel rank: 1 under full DP attention,
        ``tp`` under TP attention."""
        return self.tp // self.attention_dp

    @property
    def attention_dp(self) -> int:
        """Data-parallel attention ranks, each serving ``1/attention_dp`` of the requests."""
        return attention_ranks(self.dp_attention, self.tp)

    def __str__(self) -> str:
        from .moe_split import split_label

        attn = attention_label(self.dp_attention, self.tp)
        return f"{attn}{' attention' if self.attention_dp > 1 else ''}, " + (
            split_label(self.moe, self.tp) if self.tp > 1 else f"MoE TP{self.tp}")


def attention_ranks(dp_attention: bool | int, chips: int) -> int:
    """Data-parallel attention ranks of a ``chips``-chip instance: ``chips`` for ``True`` (one per chip),
    ``k`` for a whole number ``k`` > 1 dividing ``chips`` (ranks of ``chips / k`` chips), else 1 (TP
    attention); ValueError for a ``k`` that does not divide ``chips``. A boolean is never a count (``True ==
    1`` in Python): pass ``True`` for a rank per chip, never ``chips``' own number, so that one configuration
    has one key in the memos."""
    if isinstance(dp_attention, (bool, np.bool_)):
        return chips if dp_attention else 1
    k = int(dp_attention or 1)
    if k < 1 or chips % k:
        raise ValueError(f"{k} data-parallel attention ranks do not divide a {chips}-chip instance")
    return k


def attention_label(dp_attention: bool | int, chips: int) -> str:
    """How attention is split: ``DP8`` (a rank per chip), ``DP2 x TP4`` (ranks of several chips) or ``TP8``."""
    dp = attention_ranks(dp_attention, chips)
    if dp == chips and chips > 1:
        return f"DP{chips}"
    return f"DP{dp} x TP{chips // dp}" if dp > 1 else f"TP{chips}"


@dataclass(frozen=True)
class OpWork:
    """Work of one operator class on the busiest chip for one pass.

    ``flops`` (FLOPs) run at the chip's peak for ``dtype``, the dtype the operator's weights are stored in
    (`HardwareProfile.flops` maps it to a tensor-core rate); ``hbm_bytes`` (bytes) move between HBM and the
    chip; ``link_bytes`` (bytes) leave the chip on the scale-up link (per direction) in ``link_calls``
    collectives, each paying a latency, over ``span`` chips in the ``pattern`` ``"ring"`` or ``"all-to-all"``
    (`HardwareProfile.collective_bytes_per_s`: beyond one scale-up domain the NICs carry part of it). Values
    are floats or arrays shaped like the pass. ``shape`` is the
    variable its kernel's efficiency moves with (`prfaas_plan.performance.kernel_curves`: tokens per GEMM,
    tokens per routed expert, keys attended), None when it has none.
    """

    name: str
    flops: object = 0.0
    hbm_bytes: object = 0.0
    dtype: str = CORE_DTYPE
    link_bytes: object = 0.0
    link_calls: object = 0.0
    shape: object = None
    span: int = 1
    pattern: str = "ring"


def _weight_bytes(model: ModelProfile) -> float:
    return dtype_bytes(model.weight_dtype, model.name)


def kv_bytes_per_token_per_chip(model: ModelProfile, g: AttentionGroup, tp: int) -> float:
    """Cache bytes one chip holds per token of one layer of group ``g`` under tensor parallelism ``tp``.

    GQA/SWA split KV heads across chips but never below one head per chip (heads are replicated when
    ``tp`` exceeds them); MLA's latent has no head dimension, so every chip holds all of it.
    """
    share = g.rule.kv_share_per_chip(g, tp)
    return A.kv_elements_per_token(g) * share * dtype_bytes(model.kv_dtype, model.name)


def state_bytes_per_chip(model: ModelProfile, tp: int) -> float:
    """Fixed per-request recurrent + conv state bytes one chip holds (states split by head)."""
    return A.fixed_state_bytes(model) / tp


@dataclass(frozen=True)
class _ModelFacts:
    """What every pass of one model reads off its profile: its dense-FFN layers, the windows of its SWA
    groups and its parameter counts (`arithmetic.param_counts`)."""

    dense_layers: tuple[int, ...]
    windows: tuple[int, ...]
    params: A.ParamCounts


_FACTS: dict = {}   # `Same`(model) -> `_ModelFacts`
MAX_FACTS = 256  # models kept by `_model_facts` (a long-lived process must not keep every one it saw)


def _model_facts(model: ModelProfile) -> _ModelFacts:
    """`_ModelFacts` of ``model``, derived once per model object: a cold size runs ~150 passes of a few
    models, and these are loops over its layers and groups."""
    return remembered(_FACTS, Same(model), lambda: _ModelFacts(
        model.dense_layers, tuple(g.window for g in model.attention if g.rule.cache == "window"),
        A.param_counts(model)), MAX_FACTS)


class _Terms:
    """FLOPs and HBM bytes of one operator class as scalar coefficients of shared base arrays (tokens,
    requests, attention pairs, ...), so a pass over 10^5 lengths costs a handful of array operations."""

    def __init__(self) -> None:
        self.flops: dict[str, float] = {}
        self.bytes: dict[str, float] = {}

    def add(self, base: str, flops: float = 0.0, nbytes: float = 0.0) -> None:
        self.flops[base] = self.flops.get(base, 0.0) + flops
        self.bytes[base] = self.bytes.get(base, 0.0) + nbytes

    def work(self, name: str, bases: dict, dtype: str, shape=None) -> OpWork:
        return OpWork(name, _combine(self.flops, bases), _combine(self.bytes, bases), dtype, shape=shape)


def _combine(coeffs: dict[str, float], bases: dict):
    """``sum(coeff * bases[key])``, accumulating in place to spare array allocations."""
    out = None
    for key, coeff in coeffs.items():
        if not coeff:
            continue
        term = coeff * bases[key]
        if out is None or np.ndim(out) < np.ndim(term):
            out = term if out is None else out + term
        else:
            out += term
    return 0.0 if out is None else out


def _window_prefix_pairs(n, w: int):
    """Sum over positions 1..n of min(i, w)."""
    inside = np.minimum(n, w)
    return inside * (inside + 1) / 2 + np.maximum(n - w, 0) * w


def _core_flops_per_pair(g: AttentionGroup, phase: str) -> float:
    """FLOPs per query-key pair of one layer's full or windowed attention (all heads).

    Prefill runs MLA in its multi-head form (latent decompressed to per-head K and V); decode runs it
    absorbed (queries attend to the latent: score over latent + rope, value over latent), as SGLang and
    vLLM do.
    """
    if phase == "decode":
        return g.rule.decode_flops_per_pair(g)
    return float(A.attention_core_flops(g, 1))


def _attention_terms(model: ModelProfile, par: Parallel, phase: str, bases: dict) -> dict[str, _Terms]:
    """Terms of the attention operator classes; adds the window bases SWA layers need to ``bases``
    (per attention rank: under DP attention the caller passes one rank's share of the requests)."""
    tp, h, ab = par.attention_tp, model.hidden_size, ACT_BYTES
    wb = _weight_bytes(model)
    terms = {name: _Terms() for name in ("attn_proj", "attn_full", "attn_swa", "attn_linear")}
    for g in model.attention:
        n = g.count
        params = A.attention_params(model, g)
        width = params / h  # summed output width of the projections, per token
        terms["attn_proj"].add("T", n * 2.0 * params / tp, n * ab * (2 * h + 2 * width / tp))
        terms["attn_proj"].add("one", 0.0, n * params * wb / tp)
        cache = g.rule.cache
        if cache in ("growing", "window"):
            qo = g.num_heads / tp * g.rule.query_output_width(g) * ab
            if phase == "prefill" and g.rule.decompresses_at_prefill:
                qo *= 2  # the decompressed per-head K and V are written and read back
            flops = n * _core_flops_per_pair(g, phase) / tp
            kv = n * kv_bytes_per_token_per_chip(model, g, tp)
            if cache == "window":
                key = f"swa{g.window}"
                if key not in bases:
                    c, q, R = bases["c"], bases["q"], bases["R"]
                    bases[key] = R * (_window_prefix_pairs(c + q, g.window) - _window_prefix_pairs(c, g.window))
                    bases[key + "kv"] = R * np.minimum(c + q, g.window + q)
                terms["attn_swa"].add(key, flops)
                terms["attn_swa"].add(key + "kv", 0.0, kv)
                terms["attn_swa"].add("T", 0.0, n * qo)
            else:
                terms["attn_full"].add("pairs", flops)
                terms["attn_full"].add("kvtok", 0.0, kv)
                terms["attn_full"].add("T", 0.0, n * qo)
        else:
            heads, dk, dv = g.rule.linear_dims(g)
            state = A.recurrent_state_elements(g) / tp * dtype_bytes(model.state_dtype, model.name)
            conv = A.conv_state_elements(g) / tp * dtype_bytes(model.conv_dtype, model.name)
            recurrent = float(A.attention_core_flops(g, 1))  # per token, all heads
            qkvo = heads / tp * g.rule.linear_io_per_head(g) * ab
            lin = terms["attn_linear"]
            if phase == "prefill":
                # Chunked form: the recurrence's arithmetic regrouped per chunk, plus attention inside each
                # chunk (C/2 keys on average for scores and values); delta-rule kinds (KDA, GDN) spend as
                # much again on the WY/UT transform. Chunk-boundary states are written and read back; the
                # final state is written (and an initial one read when there is a cached prefix).
                intra = LINEAR_CHUNK * (dk + dv) * heads * g.rule.chunk_intra_factor()
                lin.add("T", n * (recurrent + intra) / tp, n * (qkvo + 2 * state / LINEAR_CHUNK))
                lin.add("first", 0.0, n * (state + conv))
            else:
                lin.add("T", n * recurrent / tp, n * qkvo)
                lin.add("R", 0.0, n * 2 * (state + conv))  # read and write back every step
    return terms


def _moe_ops(model: ModelProfile, par: Parallel, bases: dict) -> list[OpWork]:
    """Routed and shared experts of all MoE layers, with the token count each expert actually receives."""
    m = model.moe
    tp, h, ab = par.tp, model.hidden_size, ACT_BYTES
    wb = _weight_bytes(model)
    eb = dtype_bytes(model.expert_dtype, model.name)  # routed experts may be quantized apart from the rest
    T = bases["T"]
    n = len(model.moe_layers)
    width = m.latent_dim or h
    expert = 3.0 * width * m.expert_intermediate          # parameters of one routed expert
    p_touched = -np.expm1(T * np.log1p(-m.top_k / m.num_experts))  # P(an expert gets >= 1 token)
    e = par.ep
    if e == 1:
        inter = 3.0 * m.expert_intermediate / tp
        flops = T * (n * 2.0 * expert * m.top_k / tp)
        nbytes = p_touched * (n * m.num_experts * expert * eb / tp) + T * (n * m.top_k * ab * (2 * width + inter))
        ops = [OpWork("moe_routed", flops, nbytes, model.expert_dtype, shape=T * (m.top_k / m.num_experts))]
    else:
        # Whole experts on each of e groups of s = tp/e chips (s = 1: EP), each expert sliced over its
        # group; the busiest group sets the pace. Counts per group are sums over its E/e experts of uniform
        # routing: mean plus sqrt(2 ln e) standard deviations (expected maximum of e near-normal counts).
        # Real routers are more skewed; EPLB-style balancing is assumed.
        s = tp // e
        z = np.sqrt(2.0 * np.log(e))
        per_chip = m.num_experts / e
        mean_a = T * m.top_k / e
        chip_assign = mean_a + z * np.sqrt(mean_a * (1 - 1 / e))
        chip_experts = np.minimum(per_chip, per_chip * p_touched
                                  + z * np.sqrt(per_chip * p_touched * (1 - p_touched)))
        inter = 3.0 * m.expert_intermediate / s
        flops = chip_assign * (n * 2.0 * expert / s)
        nbytes = chip_experts * (n * expert * eb / s) + chip_assign * (n * ab * (2 * width + inter))
        # Dispatch: each chip sends its 1/tp share of the token copies to every one of the s chips of the
        # group that owns the expert (s/tp = 1/e per chip); combine: each chip returns its partial sums of
        # its group's 1/e share. (tp-1)/tp of the destinations are another chip.
        link = T * m.top_k * (2.0 / e) * (n * (tp - 1) / tp * width * ab)
        ops = [OpWork("moe_routed", flops, nbytes, model.expert_dtype,
                      shape=chip_assign / np.maximum(chip_experts, 1e-9)),
               OpWork("comm_ep", link_bytes=link, link_calls=2.0 * n, span=tp,
                      pattern="all-to-all")]
    p = _model_facts(model).params
    shared = (p.moe_shared + p.router) / n
    ops.insert(1, OpWork("moe_shared", T * (n * 2.0 * shared / tp),
                         n * shared * wb / tp + T * (n * ab * 4 * h), model.weight_dtype, shape=T))
    return ops


def pass_work(model: ModelProfile, par: Parallel, requests, new_tokens, context, phase: str) -> list[OpWork]:
    """Work of every operator class for one forward pass (see the module docstring for the pass shape).

    ``requests``, ``new_tokens`` and ``context`` are token counts (floats or arrays that broadcast);
    ``phase`` is ``"prefill"`` or ``"decode"``. Returns one `OpWork` per operator class present.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}")
    R = np.asarray(requests, dtype=float)
    q = np.asarray(new_tokens, dtype=float)
    c = np.asarray(context, dtype=float)
    T = R * q
    bases = {"one": 1.0, "R": R, "q": q, "c": c, "T": T,
             "pairs": R * (q * (c + 0.5) + q * q / 2),   # causal query-key pairs: q*c + q(q+1)/2
             "kvtok": R * (c + q),                       # cached + new tokens whose KV is read
             "first": R * (1.0 + (c > 0))}               # final state written (+ initial state read)
    tp, h, ab = par.tp, model.hidden_size, ACT_BYTES
    wb = _weight_bytes(model)
    dp = par.attention_dp
    # DP attention: each chip runs attention for 1/dp of the requests (every request-proportional base)
    abases = bases if dp == 1 else {k: (v if k in ("one", "q", "c") else v / dp) for k, v in bases.items()}
    terms = _attention_terms(model, par, phase, abases)
    facts = _model_facts(model)
    windows = facts.windows
    shapes = {"attn_proj": abases["T"], "attn_full": c + q, "attn_linear": abases["T"],
              "attn_swa": np.minimum(c + q, max(windows)) if windows else None}
    ops = [t.work(name, abases, model.weight_dtype if name == "attn_proj" else CORE_DTYPE, shapes[name])
           for name, t in terms.items() if t.flops or t.bytes]
    dense = facts.dense_layers
    if dense:
        mats = float(model.ffn_matrices)  # gate, up, down (2 for an ungated FFN: Nemotron-H)
        p = mats * h * model.dense_intermediate
        ops.append(OpWork("dense_ffn", T * (len(dense) * 2.0 * p / tp),
                          len(dense) * p * wb / tp + T * (len(dense) * ab * (2 * h + mats * model.dense_intermediate / tp)),
                          model.weight_dtype, shape=T))
    if model.moe is not None:
        ops += _moe_ops(model, par, bases)
    head = float(model.vocab_size * h)
    ops.append(OpWork("lm_head", R * (2.0 * head / tp), head * wb / tp + R * (ab * (h + model.vocab_size / tp)),
                      model.weight_dtype, shape=R))
    ops.append(OpWork("elementwise", 0.0, abases["T"] * (h * ab * (ELEMENTWISE_PASSES * model.num_layers + 1))))
    if tp > 1 and dp > 1:
        # DP attention: the FFN's tokens are all-gathered before it and reduce-scattered after it (together
        # the bytes of one ring all-reduce), except where EP's all-to-all already carries them from and to
        # their attention rank; no all-reduce after attention unless a rank spans several chips, whose
        # mixer outputs are all-reduced within it (counted over the instance's span, as the gather is).
        calls = len(dense) + (1.0 if par.moe == "tp" else 0.0) * len(model.moe_layers)
        link = T * (calls * 2 * (tp - 1) / tp * h * ab)
        atp = par.attention_tp
        if atp > 1:
            mixers = float(len(dense) + len(model.moe_layers) + len(model.no_ffn_layers))
            calls, link = calls + mixers, link + abases["T"] * (mixers * 2 * (atp - 1) / atp * h * ab)
        if calls:
            ops.append(OpWork("comm_tp", link_bytes=link, link_calls=calls, span=tp))
    elif tp > 1:
        # Ring all-reduce: each chip sends 2(tp-1)/tp of the buffer. EP replaces the MoE layers' second
        # all-reduce by its all-to-all.
        # Layers without an FFN (Nemotron-H mixers followed by a mixer) all-reduce once, after the mixer.
        calls = (2.0 * len(dense) + (2.0 if par.moe == "tp" else 1.0) * len(model.moe_layers)
                 + len(model.no_ffn_layers))
        ops.append(OpWork("comm_tp", link_bytes=T * (calls * 2 * (tp - 1) / tp * h * ab), link_calls=calls,
                          span=tp))
    return ops
