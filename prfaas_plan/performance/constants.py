"""The chip constants in effect for one chip, and where they come from.

A chip's constants (`prfaas_plan.profiles.Calibration`) are fractions of its own peaks: GEMM efficiency per
tensor-core rate class, HBM efficiency and scale-up collective efficiency (the level of the collective curve,
`prfaas_plan.performance.collective_curves`: the large 8-GPU all-reduce). They are the chip's own when
its profile has a ``calibration:`` block (fitted by ``prfaas-plan calibrate``, seeded by the chip's
micro-benchmarks). An uncalibrated chip gets principled defaults, never another chip's fit: its own
micro-benchmark seeds where ``kernel_efficiency.csv`` has them, else the median over the benchmarked
chips (`prfaas_plan.performance.kernel_seeds`), and the collective level of their fabric's curve (the
benchmarked chips' median where no benchmarked chip shares it), so two uncalibrated chips differ only by their
peaks and their fabric's measured collectives.
Fixed overheads are not chip constants: they belong to the serving stack (`prfaas_plan.profiles.stack`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import Calibration, HardwareProfile
from .collective_curves import curve_note, reference_efficiency
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
    source = (f"assumed: {'its own micro-benchmarks in ' + KERNEL_FILE + ' where present, else ' if own else ''}"
              f"the median of the chips micro-benchmarked in {KERNEL_FILE}; HBM {seed['memory']:.2f} assumed; "
              f"scale-up: {curve_note(chip.name)}")
    return Calibration(gemm=gemm, memory=seed["memory"], comm=reference_efficiency(chip.name), source=source)


def chip_constants(chip: HardwareProfile) -> ChipConstants:
    """The constants in effect for ``chip``: its own calibration, else principled defaults."""
    if chip.calibration is not None:
        return ChipConstants(chip.calibration, "calibrated")
    return ChipConstants(default_calibration(chip), "default")
