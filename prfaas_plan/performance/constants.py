"""The four per-chip constants of the roofline, where they come from, and the priors of their fit.

A chip's constants (`prfaas_plan.profiles.Calibration`) are its own when its profile has a
``calibration:`` block. Otherwise they are borrowed from the closest calibrated chip (by peak BF16 FLOPS
and HBM bandwidth, on a log scale) and marked *assumed*; with no calibrated chip at all, the published
priors below are used, also marked assumed.

Priors (centre, log-normal width), used to regularize the fit and as the last-resort defaults:

- compute_efficiency 0.75 (x/ e^0.3): dense GEMMs reach 70-87% of peak on Hopper (``docs/methods.md`` section 2);
- memory_efficiency 0.85 (x/ e^0.2): decode attention kernels reach ~90% of HBM bandwidth, weight-streaming
  GEMV somewhat less (``docs/methods.md`` section 2);
- comm_efficiency 0.7 (x/ e^1.0): NCCL all-reduce bus bandwidth on NVLink, assumed, weakly held;
- overhead_s 0.05 s (x/ e^2.0): per-request scheduling/launch overhead, assumed, almost free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..profiles import Calibration, HardwareProfile, all_hardware

FIELDS = ("compute_efficiency", "memory_efficiency", "overhead_s", "comm_efficiency")
PRIOR_CENTRE = {"compute_efficiency": 0.75, "memory_efficiency": 0.85, "overhead_s": 0.05, "comm_efficiency": 0.7}
PRIOR_WIDTH = {"compute_efficiency": 0.3, "memory_efficiency": 0.2, "overhead_s": 2.0, "comm_efficiency": 1.0}
PRIOR_SOURCE = "assumed: published priors (GEMM ~75% of peak, HBM ~85%, NVLink ~70%, 50 ms overhead)"


@dataclass(frozen=True)
class ChipConstants:
    """Constants in effect for one chip and where they came from.

    ``origin`` is ``"calibrated"`` (the chip's own fit), ``"borrowed"`` (another chip's fit, assumed) or
    ``"prior"`` (published priors, assumed); ``lender`` names the chip whose fit was borrowed.
    """

    calibration: Calibration
    origin: str
    lender: str = ""

    @property
    def assumed(self) -> bool:
        """True when the constants were not fitted on this chip."""
        return self.origin != "calibrated"

    def describe(self, chip: HardwareProfile) -> str:
        """One line: the values and their provenance."""
        c = self.calibration
        values = (f"compute {c.compute_efficiency:.3g}, memory {c.memory_efficiency:.3g}, "
                  f"comm {c.comm_efficiency:.3g}, overhead {c.overhead_s * 1e3:.0f} ms")
        if self.origin == "calibrated":
            return f"{chip.name} constants ({values}): {c.source}"
        if self.origin == "borrowed":
            return (f"{chip.name} constants ASSUMED, borrowed from the closest calibrated chip {self.lender} "
                    f"({values}; {self.lender}: {c.source})")
        return f"{chip.name} constants ASSUMED ({values}): {c.source}"


def prior_calibration() -> Calibration:
    """The published priors as a `Calibration`."""
    return Calibration(source=PRIOR_SOURCE, **PRIOR_CENTRE)


def _distance(a: HardwareProfile, b: HardwareProfile) -> float:
    return math.hypot(math.log(a.flops("bf16") / b.flops("bf16")), math.log(a.hbm_tb_s / b.hbm_tb_s))


def chip_constants(chip: HardwareProfile) -> ChipConstants:
    """The constants in effect for ``chip`` (own, borrowed from the closest calibrated chip, or priors)."""
    if chip.calibration is not None:
        return ChipConstants(chip.calibration, "calibrated")
    calibrated = [h for h in all_hardware().values() if h.calibration is not None and h.name != chip.name]
    if not calibrated:
        return ChipConstants(prior_calibration(), "prior")
    lender = min(calibrated, key=lambda h: (_distance(chip, h), h.name))
    return ChipConstants(lender.calibration, "borrowed", lender.name)
