"""How sure a plan is: error bars from calibration errors, the verdict in both throughput modes, and a
degraded link -- the planning-level entry points the ``size`` and ``compare`` reports call.

The methods are in `prfaas_plan.analytic.uncertainty` and `prfaas_plan.analytic.degraded`; this module
picks the baseline and the threshold grid a `Plan` was optimized on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..analytic.search import grid_search
from ..analytic.throughput import MODES
from ..analytic.uncertainty import DEFAULT_SAMPLES, DEFAULT_SEED, ErrorBars, error_bars
from ..layout import Layout
from ..errors import PlanError
from .plans import Plan, Scenario, homogeneous_baseline

if TYPE_CHECKING:  # pragma: no cover
    from ..analytic.degraded import DegradedLink


def equal_instances_baseline(sc: Scenario) -> Layout:
    """Homogeneous PD with as many local-chip instances as PrfaaS-PD has in total (the paper's basis)."""
    return homogeneous_baseline(sc.remote, sc.local, sc.instance_chips, "instances", sc.remote_instance_chips)


def plan_error_bars(sc: Scenario, plan: Plan, baseline: Layout | None = None, samples: int = DEFAULT_SAMPLES,
                    seed: int = DEFAULT_SEED, variants: tuple = ()) -> ErrorBars:
    """P10/P50/P90 of the plan's Lambda, gain over ``baseline`` (default: `equal_instances_baseline`),
    threshold and egress, and the verdict, from ``samples`` seeded draws of its inputs' errors (and, with
    ``variants``, of the deployment alternatives, `analytic.uncertainty.Variant`)."""
    base = baseline if baseline is not None else equal_instances_baseline(sc)
    check_sampler(samples, seed, len(plan.surface.thresholds))
    return error_bars(plan.layout, base, sc.grid, plan.perf, sc.mode, sampler_thresholds(plan), samples, seed,
                      variants)


def sampler_thresholds(plan: Plan):
    """The thresholds the error-bar samples search: the plan's grid with the plan's own optimum added. The
    samples search grid points only (no refinement between them), so without it a sample at the median
    factors would fall short of the point estimate wherever its threshold was refined between grid points,
    and a point lying at the band's kink (a stage the uncertain input cannot move binds) would sit just
    outside its own band."""
    import numpy as np

    from ..analytic.search import sorted_unique

    t = plan.best.threshold
    ts = plan.surface.thresholds
    return sorted_unique(np.append(ts, t)) if np.isfinite(t) and len(ts) > 1 else ts


# Peak bytes of the error-bar sampler per sample and coarse threshold: about 12 float64 arrays of
# (samples x thresholds) alive at once in `analytic.uncertainty.sample_layout`. Measured: `size --samples
# 100000` (default inputs) peaks at 2.18 GiB RSS, the estimate says 2.31 GiB.
BYTES_PER_SAMPLE_THRESHOLD = 12 * 8


def sampler_bytes(samples: int, thresholds: int) -> int:
    """Estimated peak memory of `plan_error_bars`, bytes: samples x (the coarse thresholds, at least the
    2 x 8 + 1 refined ones) x `BYTES_PER_SAMPLE_THRESHOLD`."""
    from ..analytic.uncertainty import COARSE_STEP

    return samples * max(thresholds // COARSE_STEP + 2, 2 * COARSE_STEP + 1) * BYTES_PER_SAMPLE_THRESHOLD


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_sampler(samples: int, seed: int, thresholds: int, need: int | None = None) -> None:
    """Refuse a negative seed, and a sample count whose estimated memory (`sampler_bytes`, or ``need``
    bytes from another sampler's estimate) exceeds half the memory available now (issue 23: 1,000,000
    samples reached 21 GiB), naming how many would fit."""
    if seed < 0:
        raise PlanError(f"seed {seed}: must be a whole number >= 0")
    if samples < 0:
        raise PlanError(f"samples {samples}: must be >= 0")
    need = sampler_bytes(samples, thresholds) if need is None else need
    have = _available_bytes()
    if have is not None and need > have / 2:
        fit = max(int(samples * (have / 2) / need), 0)
        raise PlanError(f"samples {samples:,}: the error-bar sampler would need about {need / 2**30:.1f} GiB, more "
                        f"than half the {have / 2**30:.1f} GiB available; at most about {fit:,} samples fit")


@dataclass(frozen=True)
class ModeVerdicts:
    """PrfaaS gain over ``baseline`` in each throughput mode (x)."""

    gain: dict[str, float]
    baseline: str

    def warning(self) -> str | None:
        """A warning when the modes disagree on whether PrfaaS pays (gain > 1), else None."""
        pays = {m: g > 1.0 for m, g in self.gain.items()}
        if len(set(pays.values())) < 2:
            return None
        said = "; ".join(f"{m} mode: gain {g:.2f} ({'pays' if pays[m] else 'does not pay'})"
                         for m, g in self.gain.items())
        return (f"the throughput modes disagree on whether PrfaaS pays vs {self.baseline} ({said}); "
                "exact mode takes expectations over the length distribution, representative mode evaluates "
                "each stage at its mean length (Jensen's inequality separates them for convex prefill)")


def mode_verdicts(sc: Scenario, plan: Plan, baseline: Layout | None = None) -> ModeVerdicts:
    """The PrfaaS-PD gain over ``baseline`` (default: `equal_instances_baseline`) in both modes."""
    base = baseline if baseline is not None else equal_instances_baseline(sc)
    gain = {}
    for mode in MODES:
        prf = grid_search(plan.layout, sc.grid, plan.perf, mode).best.lambda_max
        hom = grid_search(base, sc.grid, plan.perf, mode).best.lambda_max
        gain[mode] = prf / hom if hom > 0 else float("inf")
    return ModeVerdicts(gain, base.name)


def degraded_link(sc: Scenario, plan: Plan, bandwidth_bps: float, load: float | None = None) -> DegradedLink:
    """The plan's deployment at a degraded link of ``bandwidth_bps``: counts fixed, threshold re-optimized;
    with ``load`` (fraction of the plan's Lambda_max), also its TTFT under that same traffic."""
    from ..analytic.degraded import degrade_link  # only for --link-degraded: spares a plain size its import

    rate = None if load is None else load * plan.best.lambda_max
    return degrade_link(plan.best, sc.grid, plan.perf, bandwidth_bps, rate)
