"""A chip's calibration block: achieved fractions of its own peaks, nothing of the serving stack.

``calibration:`` in a hardware profile::

    calibration:
      gemm_efficiency: {bf16: 0.72, fp8: 0.55, attention: 0.6, linear_attention: 0.3}
      memory_efficiency: 0.85                    # achieved / peak HBM bandwidth
      comm_efficiency: 0.8                       # all-reduce bus bandwidth / scale-up bandwidth per direction
      source: "where the numbers come from"

``gemm_efficiency`` is the achieved fraction of the tensor-core peak per efficiency class: GEMMs by the rate
class of their weights (the keys of ``peak_tflops``, `HardwareProfile.rate_class`), attention cores by
kernel (``attention``: flash attention of full and windowed layers; ``linear_attention``: chunked
linear-attention kernels), both of the bf16 peak. Fixed per-request and
per-step overheads are not here: they belong to the serving stack (`prfaas_plan.profiles.stack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PlanError

# assumed kernel-class efficiencies (fractions of the bf16 peak) for a chip whose fit does not set them:
# FlashAttention-2/3 forward reaches 50-75% of bf16 peak on Hopper; chunked linear-attention (FLA) kernels
# are far from it. The calibration fits both where the data identify them (docs/methods.md).
KERNEL_DEFAULTS = {"attention": 0.6, "linear_attention": 0.3}
CALIBRATION_KEYS = ("gemm_efficiency", "memory_efficiency", "comm_efficiency", "source")


@dataclass(frozen=True)
class Calibration:
    """Chip efficiencies (fractions): ``gemm`` per rate class (``bf16``, ``fp8``, ``fp4``), ``memory``
    (HBM), ``comm`` (scale-up collectives; may exceed 1 where the switch reduces in-network, NVLink
    SHARP); ``source`` says where they come from."""

    gemm: dict[str, float] = field(hash=False)
    memory: float
    comm: float
    source: str

    def gemm_efficiency(self, efficiency_class: str) -> float:
        """Efficiency of ``efficiency_class``; a class never calibrated falls back to its default (kernel
        classes) or to bf16's (rate classes)."""
        if efficiency_class in self.gemm:
            return self.gemm[efficiency_class]
        return KERNEL_DEFAULTS.get(efficiency_class, self.gemm["bf16"])


def _fraction(value, where: str, upper: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= upper:
        raise PlanError(f"{where}: expected a number in (0, {upper:g}], not {value!r}")
    return float(value)


def calibration_from_dict(data, where: str) -> Calibration:
    """Validate a ``calibration:`` mapping (unknown keys are errors)."""
    if not isinstance(data, dict):
        raise PlanError(f"{where}: expected a mapping")
    unknown = sorted(set(map(str, data)) - set(CALIBRATION_KEYS))
    if unknown:
        raise PlanError(f"{where}: unknown field(s) {', '.join(unknown)} (expected {', '.join(CALIBRATION_KEYS)})")
    for key in CALIBRATION_KEYS:
        if key not in data:
            raise PlanError(f"{where}: missing field '{key}'")
    gemm = data["gemm_efficiency"]
    if not isinstance(gemm, dict) or "bf16" not in gemm:
        raise PlanError(f"{where}: gemm_efficiency must be a mapping with at least 'bf16'")
    if not isinstance(data["source"], str) or not data["source"].strip():
        raise PlanError(f"{where}: source must say where the numbers come from")
    return Calibration(gemm={str(k).lower(): _fraction(v, f"{where}: gemm_efficiency.{k}", 1.0) for k, v in gemm.items()},
                       memory=_fraction(data["memory_efficiency"], f"{where}: memory_efficiency", 1.0),
                       comm=_fraction(data["comm_efficiency"], f"{where}: comm_efficiency", 2.0),
                       source=data["source"])
