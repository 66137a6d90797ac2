"""Roofline time of a forward pass and the calibrated roofline prefill model.

Each operator class takes ``max(FLOPs / achieved FLOP/s, HBM bytes / achieved HBM bandwidth)`` seconds on
the busiest chip; collectives take ``bytes / achieved scale-up bandwidth + calls x latency``; a prefill
request adds a fixed overhead. Operators run one after another (no overlap). Achieved rates are the
chip's peaks times its calibration constants (`prfaas_plan.performance.constants`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..profiles import Calibration, HardwareProfile, ModelProfile
from .base import Instance
from .constants import ChipConstants, chip_constants
from .operators import OpWork, Parallel, pass_work

LINK_LATENCY_S = 8e-6  # one small-message collective on NVLink (custom one-shot all-reduce), assumed
OP_CLASSES = ("attn_proj", "attn_full", "attn_swa", "attn_linear", "dense_ffn", "moe_routed", "moe_shared",
              "lm_head", "elementwise", "comm_tp", "comm_ep")


@dataclass(frozen=True)
class UnitTimes:
    """Seconds of every operator class (rows, in `OP_CLASSES` order) at 100% efficiency on one chip:
    ``compute`` (FLOPs / peak), ``memory`` (bytes / HBM bandwidth), ``link`` (bytes / scale-up bandwidth)
    and ``latency`` (collective calls x `LINK_LATENCY_S`). Trailing axes are the pass shape."""

    compute: np.ndarray
    memory: np.ndarray
    link: np.ndarray
    latency: np.ndarray

    def seconds_by_op(self, cal: Calibration) -> np.ndarray:
        """Seconds of each operator class with the efficiencies of ``cal``."""
        return (np.maximum(self.compute / cal.compute_efficiency, self.memory / cal.memory_efficiency)
                + self.link / cal.comm_efficiency + self.latency)

    def seconds(self, cal: Calibration) -> np.ndarray:
        """Total seconds of the pass (no per-request overhead)."""
        return self.seconds_by_op(cal).sum(axis=0)

    def bounds(self, cal: Calibration) -> np.ndarray:
        """What binds each operator class: ``compute``, ``memory``, ``link`` or ``-`` (absent)."""
        c = self.compute / cal.compute_efficiency
        m = self.memory / cal.memory_efficiency
        k = self.link / cal.comm_efficiency + self.latency
        return np.where(k > 0, "link", np.where((c == 0) & (m == 0), "-", np.where(c >= m, "compute", "memory")))


def unit_times(works: list[OpWork], chip: HardwareProfile) -> UnitTimes:
    """Stack the work of one pass into `UnitTimes` on ``chip``."""
    shape = np.broadcast_shapes(*(np.shape(x) for w in works for x in (w.flops, w.hbm_bytes, w.link_bytes)))
    arrays = {k: np.zeros((len(OP_CLASSES),) + shape) for k in ("compute", "memory", "link", "latency")}
    for w in works:
        i = OP_CLASSES.index(w.name)
        arrays["compute"][i] = np.asarray(w.flops) / chip.flops(w.dtype)
        arrays["memory"][i] = np.asarray(w.hbm_bytes) / (chip.hbm_tb_s * 1e12)
        arrays["link"][i] = np.asarray(w.link_bytes) / (chip.scaleup_gb_s * 1e9)
        arrays["latency"][i] = np.asarray(w.link_calls) * LINK_LATENCY_S
    return UnitTimes(**arrays)


def pass_seconds(works: list[OpWork], chip: HardwareProfile, cal: Calibration) -> np.ndarray:
    """Total seconds of the operators of one pass (no per-request overhead).

    The same roofline as ``unit_times(works, chip).seconds(cal)``, accumulated operator by operator so that
    10^5 lengths cost a few dozen array operations instead of a stacked copy per operator class.
    """
    hbm = chip.hbm_tb_s * 1e12 * cal.memory_efficiency
    link = chip.scaleup_gb_s * 1e9 * cal.comm_efficiency
    total = 0.0
    for w in works:
        if np.any(w.flops) or np.any(w.hbm_bytes):
            total = total + np.maximum(w.flops / (chip.flops(w.dtype) * cal.compute_efficiency), w.hbm_bytes / hbm)
        if np.any(w.link_calls):
            total = total + (w.link_bytes / link + w.link_calls * LINK_LATENCY_S)
    return np.asarray(total, dtype=float)


@dataclass(frozen=True)
class RooflinePrefill:
    """``T_prefill(l)`` of one request on one instance from the calibrated per-operator roofline.

    ``constants`` defaults to the chip's own, borrowed or prior constants (see `chip_constants`).
    """

    model: ModelProfile
    instance: Instance
    parallel: Parallel
    constants: ChipConstants

    @classmethod
    def build(cls, model: ModelProfile, instance: Instance, moe: str = "tp",
              constants: ChipConstants | None = None) -> "RooflinePrefill":
        """The roofline prefill model with default parallelism (TP over the instance's chips)."""
        return cls(model, instance, Parallel(instance.chips, moe), constants or chip_constants(instance.chip))

    @property
    def source(self) -> str:
        """Where the numbers come from (shown to the user)."""
        return (f"roofline {self.instance} ({self.parallel}) on the {self.model.name} architecture"
                f"{' (reconstruction)' if self.model.reconstruction else ''}; "
                f"{self.constants.describe(self.instance.chip)}")

    def work(self, l) -> list[OpWork]:
        """Operator work of prefilling ``l`` tokens (one request, no cached prefix)."""
        return pass_work(self.model, self.parallel, 1.0, np.asarray(l, dtype=float), 0.0, "prefill")

    def latency_s(self, l) -> np.ndarray:
        """Seconds to prefill ``l`` uncached tokens (vectorized over any array of lengths)."""
        cal = self.constants.calibration
        return pass_seconds(self.work(l), self.instance.chip, cal) + cal.overhead_s

    def breakdown(self, l) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per operator class: (seconds, binding bound) at length(s) ``l``; classes absent from the model are
        left out, the fixed per-request overhead is the last entry."""
        cal = self.constants.calibration
        u = unit_times(self.work(l), self.instance.chip)
        seconds, bounds = u.seconds_by_op(cal), u.bounds(cal)
        out = {name: (seconds[i], bounds[i]) for i, name in enumerate(OP_CLASSES) if np.any(bounds[i] != "-")}
        shape = np.shape(np.asarray(l))
        out["overhead"] = (np.full(shape, cal.overhead_s), np.full(shape, "fixed"))
        return out
