"""Fit a chip's four roofline constants to measured prefill latencies, with leave-one-out errors.

Method: maximum a-posteriori least squares on log latency (scipy ``least_squares``). Each measured point
contributes ``log(predicted / measured) / SIGMA_MEASUREMENT``; each constant contributes
``log(value / prior centre) / prior width`` (`prfaas_plan.performance.constants`), so the data set what it
can identify and the published priors hold what it cannot (e.g. HBM efficiency from compute-bound prefill
points). The same physics and constants serve every model on the chip: no per-model constant exists.
Leave-one-out: each point is predicted by a fit made without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PlanError
from ..profiles import Calibration, HardwareProfile, get_model, hardware_from_dict
from .base import parse_instance
from .constants import FIELDS, PRIOR_CENTRE, PRIOR_WIDTH
from .measurements import Measurement
from .roofline import RooflinePrefill, UnitTimes, unit_times

SIGMA_MEASUREMENT = 0.1   # assumed scatter of one measured latency (10%)
LOWER = {"compute_efficiency": 1e-3, "memory_efficiency": 1e-3, "overhead_s": 1e-6, "comm_efficiency": 1e-3}
UPPER = {"compute_efficiency": 1.0, "memory_efficiency": 1.0, "overhead_s": 10.0, "comm_efficiency": 1.0}


@dataclass(frozen=True)
class FitPoint:
    """A measured point with the fitted prediction and the leave-one-out prediction, seconds."""

    measurement: Measurement
    predicted_s: float
    loo_predicted_s: float

    @property
    def error(self) -> float:
        """Relative error of the in-sample prediction (fraction; positive = predicted too slow)."""
        return self.predicted_s / self.measurement.latency_s - 1.0

    @property
    def loo_error(self) -> float:
        """Relative error of the prediction made without this point (fraction)."""
        return self.loo_predicted_s / self.measurement.latency_s - 1.0


@dataclass(frozen=True)
class CalibrationFit:
    """Fitted constants for ``chip`` (``calibration.source`` records the data and errors) and every point."""

    chip: str
    calibration: Calibration
    points: tuple[FitPoint, ...]

    def _stat(self, attr: str, fn) -> float:
        """``fn`` (median or max) of the points' absolute relative errors ``attr``, as a fraction."""
        return float(fn([abs(getattr(p, attr)) for p in self.points]))

    @property
    def median_error(self) -> float:
        return self._stat("error", np.median)

    @property
    def max_error(self) -> float:
        return self._stat("error", np.max)

    @property
    def loo_median_error(self) -> float:
        return self._stat("loo_error", np.median)

    @property
    def loo_max_error(self) -> float:
        return self._stat("loo_error", np.max)


class _Problem:
    """Unit-efficiency operator times of every measured point, stacked so a fit evaluates all at once."""

    def __init__(self, measurements: list[Measurement], moe: str):
        stacks = []
        for m in measurements:
            inst = parse_instance(m.instance, f"measurement {m.model} {m.instance}")
            works = RooflinePrefill.build(get_model(m.model), inst, moe).work(float(m.len_tokens))
            stacks.append(unit_times(works, inst.chip))
        self.units = UnitTimes(*(np.stack([getattr(u, k) for u in stacks], axis=-1)
                                 for k in ("compute", "memory", "link", "latency")))
        self.log_measured = np.log([m.latency_s for m in measurements])

    def predict(self, cal: Calibration) -> np.ndarray:
        return self.units.seconds(cal) + cal.overhead_s


def _calibration(x: np.ndarray, source: str = "") -> Calibration:
    return Calibration(source=source, **{f: float(v) for f, v in zip(FIELDS, np.exp(x))})


def _solve(problem: _Problem, keep: np.ndarray, x0: np.ndarray) -> np.ndarray:
    from scipy.optimize import least_squares

    centre = np.log([PRIOR_CENTRE[f] for f in FIELDS])
    width = np.array([PRIOR_WIDTH[f] for f in FIELDS])

    def residuals(x):
        data = (np.log(problem.predict(_calibration(x))) - problem.log_measured)[keep] / SIGMA_MEASUREMENT
        return np.concatenate([data, (x - centre) / width])

    bounds = (np.log([LOWER[f] for f in FIELDS]), np.log([UPPER[f] for f in FIELDS]))
    return least_squares(residuals, np.clip(x0, bounds[0], bounds[1]), bounds=bounds, x_scale=1.0).x


def fit_calibration(chip: HardwareProfile, measurements: list[Measurement], data_name: str,
                    moe: str = "tp") -> CalibrationFit:
    """Fit ``chip``'s constants to ``measurements`` (each evaluated on its own instance's chip, so an
    H20-3e measurement can calibrate the H20: the constants are fractions of each chip's own peaks).
    ``data_name`` names the measurement file in the recorded source."""
    if len(measurements) < 2:
        raise PlanError("calibrate: need at least two measurements")
    problem = _Problem(measurements, moe)
    n = len(measurements)
    x0 = np.log([PRIOR_CENTRE[f] for f in FIELDS])
    x = _solve(problem, np.ones(n, bool), x0)
    predicted = problem.predict(_calibration(x))
    loo = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        loo[i] = problem.predict(_calibration(_solve(problem, keep, x)))[i]
    points = tuple(FitPoint(m, float(p), float(q)) for m, p, q in zip(measurements, predicted, loo))
    draft = CalibrationFit(chip.name, _calibration(x), points)
    measured_on = sorted({parse_instance(m.instance).chip.name for m in measurements})
    models = sorted({m.model for m in measurements})
    source = (f"fitted by prfaas-plan calibrate on {data_name} ({n} points: {', '.join(models)}; measured on "
              f"{', '.join(measured_on)}): in-sample median {draft.median_error:.1%} / worst "
              f"{draft.max_error:.1%}, leave-one-out median {draft.loo_median_error:.1%} / worst "
              f"{draft.loo_max_error:.1%}; MAP least squares on log latency ({SIGMA_MEASUREMENT:.0%} "
              f"noise) with published priors")
    return CalibrationFit(chip.name, _calibration(x, source), points)


def _rounded(cal: Calibration) -> dict:
    """The ``calibration:`` block of a profile: each constant to 4 significant digits, then the source."""
    return {**{f: float(f"{getattr(cal, f):.4g}") for f in FIELDS}, "source": cal.source}


def calibrated_profile_text(chip: HardwareProfile, cal: Calibration) -> str:
    """The chip's profile file with its ``calibration:`` block replaced by ``cal`` (other lines untouched),
    validated by loading it back."""
    import yaml

    try:
        lines = Path(chip.path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PlanError(f"{chip.path}: cannot read ({exc.strerror})") from None
    kept, skipping = [], False
    for line in lines:
        if line.startswith("calibration:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        kept.append(line)
    block = yaml.safe_dump({"calibration": _rounded(cal)}, sort_keys=False, width=100, allow_unicode=True)
    text = "\n".join(kept).rstrip("\n") + "\n" + block
    hardware_from_dict(yaml.safe_load(text), chip.path)
    return text
