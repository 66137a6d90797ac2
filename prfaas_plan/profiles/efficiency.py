"""A chip's calibration block: achieved fractions of its own peaks, nothing of the serving stack.

``calibration:`` in a hardware profile::

    calibration:
      gemm_efficiency: {bf16: 0.72, fp8: 0.55, attention: 0.6, linear_attention: 0.3}
      memory_efficiency: 0.85                    # achieved / peak HBM bandwidth
      comm_efficiency: 0.8                       # all-reduce bus bandwidth / scale-up bandwidth per direction
      loo_error: {ttft: 0.18, tpot: 0.09}        # optional: leave-one-out median |error| of the fit, per quantity
      lomo_error: {ttft: 0.36, tpot: 0.14}       # optional: leave-one-model-out median |error| (the error bars')
      loco_error: {ttft: 0.44, tpot: 0.11}       # optional: leave-one-chip-out median |error| (uncalibrated chips')
      source: "where the numbers come from"

``gemm_efficiency`` is the achieved fraction of the tensor-core peak per efficiency class: GEMMs by the rate
class of their weights (the keys of ``peak_tflops``, `HardwareProfile.rate_class`), attention cores by
kernel (``attention``: flash attention of full and windowed layers; ``linear_attention``: chunked
linear-attention kernels), both of the bf16 peak. Fixed per-request and
per-step overheads are not here: they belong to the serving stack (`prfaas_plan.profiles.stack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


# assumed kernel-class efficiencies (fractions of the bf16 peak) for a chip whose fit does not set them:
# FlashAttention-2/3 forward reaches 50-75% of bf16 peak on Hopper; chunked linear-attention (FLA) kernels
# are far from it. The calibration fits both where the data identify them (docs/methods.md).
# Mixed-input GEMMs (4-bit weights dequantized inside the kernel, bf16 activations: Marlin/Machete-style
# W4A16 on chips without a native 4-bit rate) are tuned for decode and reach well under the bf16 GEMM rate
# in prefill; 0.4 of the bf16 peak is assumed.
KERNEL_DEFAULTS = {"attention": 0.6, "linear_attention": 0.3, "w4a16": 0.4}


@dataclass(frozen=True)
class Calibration:
    """Chip efficiencies (fractions): ``gemm`` per rate class (``bf16``, ``fp8``, ``fp4``), ``memory``
    (HBM), ``comm`` (scale-up collectives; may exceed 1 where the switch reduces in-network, NVLink
    SHARP); ``source`` says where they come from; ``loo_error`` the fit's leave-one-out median |error|
    (fraction) per measured quantity (``ttft``, ``tpot``, ``busy``), empty when not fitted; ``lomo_error`` the
    same leave-one-model-out, what a model the fit has not seen should expect (the planner's error bars), and
    ``lomo_error_by_stack`` that per serving stack ({stack: {quantity: fraction}}, stacks with enough rows on
    this chip), which the error bars prefer for a plan on that stack; ``loco_error`` this chip's rows predicted
    by a fit without them, the chip at an uncalibrated chip's constants (leave-one-chip-out), the benchmark
    client's time at its own fit (a plan never includes it): what a plan on a chip no one calibrated should
    expect, the error bars of uncalibrated chips (`analytic.uncertainty`)."""

    gemm: dict[str, float] = field(hash=False)
    memory: float
    comm: float
    source: str
    loo_error: dict[str, float] = field(default_factory=dict, hash=False)
    lomo_error: dict[str, float] = field(default_factory=dict, hash=False)
    lomo_error_by_stack: dict[str, dict[str, float]] = field(default_factory=dict, hash=False)
    loco_error: dict[str, float] = field(default_factory=dict, hash=False)

    def gemm_efficiency(self, efficiency_class: str) -> float:
        """Efficiency of ``efficiency_class``; a class never calibrated falls back to its default (kernel
        classes) or to bf16's (rate classes)."""
        if efficiency_class in self.gemm:
            return self.gemm[efficiency_class]
        return KERNEL_DEFAULTS.get(efficiency_class, self.gemm["bf16"])
