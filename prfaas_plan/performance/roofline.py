"""Roofline time of a forward pass, and the prefill model of one instance on one serving stack.

Each operator class takes ``max(FLOPs / achieved FLOP/s, HBM bytes / achieved HBM bandwidth)`` seconds on
the busiest chip; collectives take ``bytes / achieved scale-up bandwidth + calls x latency``. Operators run
one after another (no overlap). Achieved rates are the chip's peaks times its constants
(`prfaas_plan.performance.constants`): GEMM efficiency per rate class, HBM and scale-up efficiency; on chips
with kernel micro-benchmarks the compute rate also follows the operator's shape
(`prfaas_plan.performance.kernel_curves`: tokens per GEMM, tokens per expert, keys attended).

The serving stack (`prfaas_plan.profiles.stack`) adds what the chip does not: a fixed per-request latency
(TTFT only, the GPU is free meanwhile), a busy overhead per prefill forward, and how prompts are packed into
forwards (short ones batched up to the token budget, long ones chunked). So a prefill has two times
(docs/methods.md, "Busy time and latency"): ``latency_s`` (one request alone: TTFT-equivalent) and
``busy_s`` (GPU seconds per request when the instance is kept full: what throughput divides by).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..profiles import (
    Calibration,
    HardwareProfile,
    ModelProfile,
    StackProfile,
    get_stack,
)
from .base import Instance
from .constants import ChipConstants, chip_constants
from .kernel_curves import relative_efficiency
from .operators import OpWork, Parallel, pass_work
from .sharing import Same, remembered

LINK_LATENCY_S = 8e-6  # one small-message collective on NVLink (custom one-shot all-reduce), assumed
# A collective across nodes adds the network hops of NCCL's latency model (NCCL 2.30.7 src/graph/tuning.cc,
# default tuner constants): its tree all-reduce with the LL protocol, the cheapest at small sizes, crosses
# floor(log2 nodes) network hops up and as many down at 5.0 us each (over 2 nodes of 8: 25.2 us in all
# against 15.2 within one node; a ring's 40). Only the hops are added to the in-domain latency, so a wider
# domain is never slower.
NET_HOP_S = 5.0e-6
OP_CLASSES = ("attn_proj", "attn_full", "attn_swa", "attn_linear", "dense_ffn", "moe_routed", "moe_shared",
              "lm_head", "elementwise", "comm_tp", "comm_ep")
# Attention cores are not GEMMs: their kernels (flash attention, chunked linear attention) reach their own
# fraction of the bf16 tensor-core peak, a chip constant of its own (`prfaas_plan.profiles.Calibration`).
FOUR_BIT = ("int4", "fp4", "mxfp4")   # weights a chip without a 4-bit rate dequantizes in the GEMM (w4a16)
KERNEL_CLASS = {"attn_full": "attention", "attn_swa": "attention", "attn_linear": "linear_attention"}
MAX_WORKS_ENTRIES = 256  # prefill works kept by `prefill_works` (a long-lived process must not keep them all)
MAX_WORKS_LENGTHS = 16_384  # longer length arrays (`rates` on 10^5 lengths) are not kept: their works and their
                            # key (the lengths' bytes) would hold megabytes each, and such a call is made once
_WORKS: dict = {}


def efficiency_class(chip: HardwareProfile, w: OpWork) -> str:
    """The efficiency class of an operator: its kernel class, or its GEMMs' tensor-core rate class."""
    if w.name in KERNEL_CLASS:
        return KERNEL_CLASS[w.name]
    rate = chip.rate_class(w.dtype)
    return "w4a16" if w.dtype in FOUR_BIT and rate == "bf16" else rate


def collective_latency_s(chip: HardwareProfile, span: int) -> float:
    """Seconds of one small-message collective over ``span`` chips: `LINK_LATENCY_S`, plus `NET_HOP_S` for
    each of the ``2 floor(log2 nodes)`` network hops of a tree over the nodes it spans (18 us over 2 nodes;
    the same figure for every pattern, all-gather, reduce-scatter and all-to-all included)."""
    if span <= chip.scaleup_domain:
        return LINK_LATENCY_S
    return LINK_LATENCY_S + 2 * math.floor(math.log2(chip.nodes_for(span))) * NET_HOP_S


@dataclass(frozen=True)
class UnitTimes:
    """Seconds of every operator class (rows, in `OP_CLASSES` order) at 100% efficiency on one chip:
    ``compute`` (FLOPs / peak of the class's rate, ``rate_class`` per row), ``memory`` (bytes / HBM
    bandwidth), ``link`` (bytes on the scale-up link / its bandwidth), ``nic`` (bytes through a NIC / its line
    rate, for collectives beyond the scale-up domain: they take the longer of the two,
    `HardwareProfile.collective_seconds_per_byte`) and ``latency`` (collective calls x `collective_latency_s`).
    Trailing axes are the pass shape."""

    compute: np.ndarray
    memory: np.ndarray
    link: np.ndarray
    nic: np.ndarray
    latency: np.ndarray
    rate_class: tuple[str, ...]

    def _gemm(self, cal: Calibration) -> np.ndarray:
        eff = np.array([cal.gemm_efficiency(c) for c in self.rate_class])
        return eff.reshape((-1,) + (1,) * (self.compute.ndim - 1))

    def seconds_by_op(self, cal: Calibration) -> np.ndarray:
        """Seconds of each operator class with the efficiencies of ``cal``."""
        return (np.maximum(self.compute / self._gemm(cal), self.memory / cal.memory)
                + np.maximum(self.link / cal.comm, self.nic) + self.latency)

    def seconds(self, cal: Calibration) -> np.ndarray:
        """Total seconds of the pass."""
        return self.seconds_by_op(cal).sum(axis=0)

    def bounds(self, cal: Calibration) -> np.ndarray:
        """What binds each operator class: ``compute``, ``memory``, ``link`` or ``-`` (absent)."""
        c = self.compute / self._gemm(cal)
        m = self.memory / cal.memory
        k = np.maximum(self.link / cal.comm, self.nic) + self.latency
        return np.where(k > 0, "link", np.where((c == 0) & (m == 0), "-", np.where(c >= m, "compute", "memory")))


def unit_times(works: list[OpWork], chip: HardwareProfile) -> UnitTimes:
    """Stack the work of one pass into `UnitTimes` on ``chip``."""
    shape = np.broadcast_shapes(*(np.shape(x) for w in works for x in (w.flops, w.hbm_bytes, w.link_bytes)))
    arrays = {k: np.zeros((len(OP_CLASSES),) + shape) for k in ("compute", "memory", "link", "nic", "latency")}
    classes = ["bf16"] * len(OP_CLASSES)
    for w in works:
        i = OP_CLASSES.index(w.name)
        classes[i] = efficiency_class(chip, w)
        arrays["compute"][i] = (np.asarray(w.flops) / chip.flops(w.dtype)
                                / relative_efficiency(chip.name, w.name, classes[i], w.shape))
        arrays["memory"][i] = np.asarray(w.hbm_bytes) / (chip.hbm_tb_s * 1e12)
        up, nic = chip.collective_seconds_per_byte(w.span, w.pattern)
        if nic == 0.0:   # within the scale-up domain: divided by the rate, as `pass_seconds` does, to the bit
            arrays["link"][i] = np.asarray(w.link_bytes) / chip.collective_bytes_per_s(w.span, w.pattern)
        else:
            arrays["link"][i], arrays["nic"][i] = np.asarray(w.link_bytes) * up, np.asarray(w.link_bytes) * nic
        arrays["latency"][i] = np.asarray(w.link_calls) * collective_latency_s(chip, w.span)
    return UnitTimes(rate_class=tuple(classes), **arrays)


_PEAKS: dict = {}   # (`Same`(chip), operator class, dtype) -> (efficiency class, FLOP/s)


def _class_and_peak(chip: HardwareProfile, w: OpWork) -> tuple[str, float]:
    """``(efficiency_class(chip, w), chip.flops(w.dtype))`` (FLOP/s), looked up once per chip, operator class
    and dtype: every operator of every pass asks."""
    return remembered(_PEAKS, (Same(chip), w.name, w.dtype),
                      lambda: (efficiency_class(chip, w), chip.flops(w.dtype)), MAX_WORKS_ENTRIES)


def _nonzero(x) -> bool:
    """``np.any(x)`` of a float or an array, without `np.any`'s dispatch (a few per operator per pass)."""
    return bool(x.any()) if isinstance(x, np.ndarray) else bool(x)


def pass_seconds(works: list[OpWork], chip: HardwareProfile, cal: Calibration) -> np.ndarray:
    """Total seconds of the operators of one pass (no overheads).

    The same roofline as ``unit_times(works, chip).seconds(cal)``, accumulated operator by operator so that
    10^5 lengths cost a few dozen array operations instead of a stacked copy per operator class.
    """
    hbm = chip.hbm_tb_s * 1e12 * cal.memory
    total = 0.0
    for w in works:
        if _nonzero(w.flops) or _nonzero(w.hbm_bytes):
            cls, peak = _class_and_peak(chip, w)
            rate = peak * cal.gemm_efficiency(cls) * relative_efficiency(chip.name, w.name, cls, w.shape)
            total = total + np.maximum(w.flops / rate, w.hbm_bytes / hbm)
        if _nonzero(w.link_calls):
            link = chip.collective_bytes_per_s(w.span, w.pattern, cal.comm)
            total = total + (w.link_bytes / link + w.link_calls * collective_latency_s(chip, w.span))
    return np.asarray(total, dtype=float)


def nodes_note(instance: Instance) -> str:
    """`` over 2 nodes of 8 chips (400 Gb/s NICs: all-reduce at 400 GB/s per chip, all-to-all at 94; scale-up
    link 450; 18 us per collective against 8)`` for an instance wider than its chip's scale-up domain
    (`HardwareProfile.collective_bytes_per_s`, `collective_latency_s`), else empty."""
    chip, n = instance.chip, instance.chips
    if n <= chip.scaleup_domain:
        return ""
    ring, a2a = (chip.collective_bytes_per_s(n, p) / 1e9 for p in ("ring", "all-to-all"))
    return (f" over {chip.nodes_for(n)} nodes of {chip.scaleup_domain} chips ({chip.nic_gbps:,.0f} Gb/s "
            f"NICs: all-reduce at {ring:,.0f} GB/s per chip, all-to-all at {a2a:,.0f}; scale-up link "
            f"{chip.scaleup_gb_s:,.0f}; {collective_latency_s(chip, n) * 1e6:.0f} us per collective against "
            f"{LINK_LATENCY_S * 1e6:.0f})")


def expert_parallel(model: ModelProfile, par: Parallel) -> bool:
    """Whether ``model``'s routed experts are spread over several chips by all-to-all under ``par``."""
    return par.ep > 1 and model.moe is not None


def forward_overhead_s(stack: StackProfile, model: ModelProfile, par: Parallel) -> float:
    """The stack's GPU-busy overhead of one prefill forward of ``model`` split as ``par`` (seconds)."""
    return stack.prefill_forward_overhead_s(expert_parallel(model, par))


def prefill_shape(l, stack: StackProfile, batched: bool):
    """How a prompt of ``l`` tokens (array) is packed into forwards on ``stack``: ``(requests per forward,
    tokens per forward per request, context before each chunk, forwards per request)``.

    Alone (``batched=False``): a chunked stack splits a prompt longer than its budget into
    ``ceil(l / budget)`` equal chunks (mean context before a chunk: half the rest), one request per
    forward. Kept full (``batched=True``): short prompts share a forward, ``budget / l`` of them, and a
    chunked prompt's last chunk shares its forward with the next prompt (``l / budget`` forwards).
    """
    l = np.asarray(l, dtype=float)
    budget = float(stack.prefill_token_budget)
    if stack.chunked_prefill:
        chunks = np.maximum(1.0, l / budget) if batched else np.maximum(1.0, np.ceil(l / budget))
    else:
        chunks = np.ones_like(l)
    q = l / chunks
    requests = np.maximum(1.0, budget / np.maximum(l, 1.0)) if batched else np.ones_like(l)
    return requests, q, (l - q) / 2.0, chunks


def prefill_works(model: ModelProfile, par: Parallel, l: np.ndarray, stack: StackProfile,
                  batched: bool) -> tuple[list[OpWork], np.ndarray, np.ndarray]:
    """``(works, chunks, requests)`` of prefilling prompts of ``l`` tokens (array) packed as `prefill_shape`
    says: the operator work of one forward and how many forwards per request.

    Operator work is hardware-free, so the remote and local pools' candidates of one shape and split (and a
    sweep's points) share one computation: it is kept per model object, split, packing and length values (up to
    `MAX_WORKS_LENGTHS` lengths). The works are shared read-only."""
    if l.size > MAX_WORKS_LENGTHS:
        return _works(model, par, l, stack, batched)
    key = (Same(model), par, float(stack.prefill_token_budget), bool(stack.chunked_prefill), batched,
           l.dtype.str, l.shape, l.tobytes())
    return remembered(_WORKS, key, lambda: _works(model, par, l, stack, batched), MAX_WORKS_ENTRIES)


def _works(model: ModelProfile, par: Parallel, l: np.ndarray, stack: StackProfile, batched: bool):
    requests, q, context, chunks = prefill_shape(l, stack, batched)
    return pass_work(model, par, requests, q, context, "prefill"), chunks, requests


@dataclass(frozen=True)
class RooflinePrefill:
    """Prefill of one request on one instance: the calibrated per-operator roofline plus the stack.

    ``constants`` defaults to the chip's own (or default) constants (see `chip_constants`).
    """

    model: ModelProfile
    instance: Instance
    parallel: Parallel
    constants: ChipConstants
    stack: StackProfile

    @classmethod
    def build(cls, model: ModelProfile, instance: Instance, moe: str = "tp", constants: ChipConstants | None = None,
              stack: StackProfile | str | None = None) -> "RooflinePrefill":
        """The roofline prefill model with default parallelism (TP over the instance's chips)."""
        return cls(model, instance, Parallel(instance.chips, moe), constants or chip_constants(instance.chip),
                   get_stack(stack))

    @property
    def source(self) -> str:
        """Where the numbers come from (shown to the user)."""
        return (f"roofline {self.instance} ({self.parallel}){nodes_note(self.instance)} on the {self.model.name} "
                "architecture"
                f"{' (reconstruction)' if self.model.reconstruction else ''}; "
                f"{self.constants.describe(self.instance.chip)}; stack {self.stack.name} (its note gives its numbers)")

    def work(self, l) -> list[OpWork]:
        """Operator work of prefilling ``l`` tokens in one forward (one request, no cached prefix)."""
        return pass_work(self.model, self.parallel, 1.0, np.asarray(l, dtype=float), 0.0, "prefill")

    def _forwards_s(self, l, batched: bool) -> np.ndarray:
        works, chunks, requests = prefill_works(self.model, self.parallel, np.asarray(l, dtype=float), self.stack,
                                                batched)
        forward = (pass_seconds(works, self.instance.chip, self.constants.calibration)
                   + forward_overhead_s(self.stack, self.model, self.parallel))
        return forward * chunks / requests

    def busy_s(self, l) -> np.ndarray:
        """GPU seconds per request of ``l`` tokens when the instance is kept full (throughput's cost):
        short prompts batched up to the stack's token budget; no fixed latency."""
        return self._forwards_s(l, batched=True)

    def latency_s(self, l) -> np.ndarray:
        """Seconds from arrival to first token of one request alone (TTFT-equivalent): the stack's fixed
        latency plus its forwards."""
        return self.stack.latency_s + self._forwards_s(l, batched=False)

    def breakdown(self, l) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per operator class: (seconds, binding bound) of one unchunked forward at length(s) ``l``; classes
        absent from the model are left out; the stack's per-forward overhead and fixed latency come last."""
        cal = self.constants.calibration
        u = unit_times(self.work(l), self.instance.chip)
        seconds, bounds = u.seconds_by_op(cal), u.bounds(cal)
        out = {name: (seconds[i], bounds[i]) for i, name in enumerate(OP_CLASSES) if np.any(bounds[i] != "-")}
        shape = np.shape(np.asarray(l))
        out["forward overhead"] = (np.full(shape, forward_overhead_s(self.stack, self.model, self.parallel)),
                                   np.full(shape, "stack"))
        out["fixed latency"] = (np.full(shape, self.stack.latency_s), np.full(shape, "stack"))
        return out
