"""How sure a plan is: error bars from calibration errors, the verdict in both throughput modes, and a
degraded link -- the planning-level entry points the ``size`` and ``compare`` reports call.

The methods are in `prfaas_plan.analytic.uncertainty` and `prfaas_plan.analytic.degraded`; this module
picks the baseline and the threshold grid a `Plan` was optimized on.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analytic.degraded import DegradedLink, degrade_link
from ..analytic.search import grid_search
from ..analytic.throughput import MODES
from ..analytic.uncertainty import DEFAULT_SAMPLES, DEFAULT_SEED, ErrorBars, error_bars
from ..layout import Layout
from .plans import Plan, Scenario, homogeneous_baseline


def equal_instances_baseline(sc: Scenario) -> Layout:
    """Homogeneous PD with as many local-chip instances as PrfaaS-PD has in total (the paper's basis)."""
    return homogeneous_baseline(sc.remote, sc.local, sc.instance_chips, "instances", sc.remote_instance_chips)


def plan_error_bars(sc: Scenario, plan: Plan, baseline: Layout | None = None, samples: int = DEFAULT_SAMPLES,
                    seed: int = DEFAULT_SEED) -> ErrorBars:
    """P10/P50/P90 of the plan's Lambda, gain over ``baseline`` (default: `equal_instances_baseline`),
    threshold and egress, and the verdict, from ``samples`` seeded draws of its inputs' errors."""
    base = baseline if baseline is not None else equal_instances_baseline(sc)
    return error_bars(plan.layout, base, sc.grid, plan.perf, sc.mode, plan.surface.thresholds, samples, seed)


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
        return (f"WARNING: the throughput modes disagree on whether PrfaaS pays vs {self.baseline} ({said}); "
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
    rate = None if load is None else load * plan.best.lambda_max
    return degrade_link(plan.best, sc.grid, plan.perf, bandwidth_bps, rate)
