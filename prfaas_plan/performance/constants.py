"""The chip constants in effect for one chip, and where they come from.

A chip's constants (`prfaas_plan.profiles.Calibration`) are fractions of its own peaks: GEMM efficiency per
tensor-core rate class, HBM efficiency and scale-up collective efficiency. They are the chip's own when
its profile has a ``calibration:`` block (fitted by ``prfaas-plan calibrate``, seeded by the chip's
micro-benchmarks). An uncalibrated chip gets principled defaults, never another chip's fit: its own
micro-benchmark seeds where ``kernel_efficiency.csv`` has them, else the median over the benchmarked
chips (`prfaas_plan.performance.kernel_seeds`), so two uncalibrated chips differ only by their peaks; flash
attention and W4A16 at its kernel curves' plateau where ``kernel_curves.csv`` covers the chip. These are the
calibration's prior centres (`performance.calibrate`): what the fit would give a chip it has no data for.
Fixed overheads are not chip constants: they belong to the serving stack (`prfaas_plan.profiles.stack`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import Calibration, HardwareProfile
from .kernel_curves import CURVE_FILE, KERNEL_CLASS_OP, kernel_class_seed
from .kernel_seeds import KERNEL_FILE, chip_seed, kernel_seeds


@dataclass(frozen=True)
class ChipConstants:
    """Constants in effect for one chip; ``origin`` is ``"calibrated"`` (its own fit) or ``"default"``
    (micro-benchmark seeds or their median, assumed)."""

    calibration: Calibration
    origin: str

    @property
    def assumed(self) -> bool:
        """True when the constants were not fitted on serving data of this chip."""
        return self.origin != "calibrated"

    def gemm(self, chip: HardwareProfile, dtype: str) -> float:
        """GEMM efficiency of GEMMs on ``dtype`` weights on ``chip`` (fraction of that rate's peak)."""
        return self.calibration.gemm_efficiency(chip.rate_class(dtype))

    def describe(self, chip: HardwareProfile) -> str:
        """One line: the values and their provenance."""
        c = self.calibration
        gemm = ", ".join(f"{k} {v:.3g}" for k, v in sorted(c.gemm.items()))
        values = f"GEMM {gemm}; memory {c.memory:.3g}; scale-up {c.comm:.3g}"
        if self.origin == "calibrated":
            return f"{chip.name} constants ({values}): {c.source}"
        return f"{chip.name} constants ASSUMED ({values}): {c.source}"


def default_calibration(chip: HardwareProfile) -> Calibration:
    """Principled defaults for an uncalibrated chip (see the module docstring)."""
    seed = chip_seed(chip.name)
    own = chip.name in kernel_seeds()
    gemm = {k: seed[k] for k in ("bf16", "fp8", "fp4") if k in chip.peak_tflops or k == "bf16"}
    measured = {k: v for k in KERNEL_CLASS_OP if (v := kernel_class_seed(chip.name, k)) is not None}
    gemm.update(measured)
    kernels = (f"; {', '.join(sorted(measured))} from its kernel curves' plateau in {CURVE_FILE}" if measured
               else "")
    source = (f"assumed: {'its own micro-benchmarks in ' + KERNEL_FILE + ' where present, else ' if own else ''}"
              f"the median of the chips micro-benchmarked in {KERNEL_FILE}{kernels}; HBM {seed['memory']:.2f} "
              "assumed; the calibration's prior for a chip without serving data")
    return Calibration(gemm=gemm, memory=seed["memory"], comm=seed["comm"], source=source)


def chip_constants(chip: HardwareProfile) -> ChipConstants:
    """The constants in effect for ``chip``: its own calibration, else principled defaults."""
    if chip.calibration is not None:
        return ChipConstants(chip.calibration, "calibrated")
    return ChipConstants(default_calibration(chip), "default")
