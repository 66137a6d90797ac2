"""What moves the PrfaaS gain: the deployment choices a user left open, and a ranking of every driver
(issue 21 item 5).

- **Open choices** (`open_choices`): the serving stack, the transfer policy and the throughput mode, where
  the user left them at their defaults. `deployment_variants` turns every combination into an
  `analytic.uncertainty.Variant` (its performance inputs and mode), which the error bars spread their
  samples over, so the band spans what the user has not said as well as the model error.
- **Sensitivity** (`sensitivity`): each driver on its own, the others at the plan's values -- a calibrated
  input across its own P10-P90 speed (`analytic.uncertainty.input_swings`, nine quantiles: the gain can peak
  inside the range where an integer split jumps), an open choice at each of
  its alternatives (the layout and its baseline re-optimized under it; with the configuration search, the
  configurations re-searched under it too, `researched_gain`: the gain's driver is the choice, given the
  best deployment for it) -- ranked by how far it moves the gain. Each row names the single measurement (or choice) that would pin it, and the verdict "cannot
  tell" names the first of them whose range straddles 1.

Gains are PrfaaS-PD's Lambda_max over the verdict's baseline (x).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..analytic.search import grid_search
from ..analytic.transfer import TransferBytes
from ..analytic.uncertainty import Variant, input_swings
from ..layout import Layout
from .plans import Plan
from .scenario import Scenario, perf_inputs

# Serving stacks a user who names none may be running: the current engines NVIDIA's aiconfigurator
# silicon sample measured (stack_profiles/sglang.yaml, trtllm.yaml, vllm.yaml; the default first).
STACK_ALTERNATIVES = ("sglang", "trtllm", "vllm")
# Transfer policies a deployment decides (analytic/transfer.py): per-rank copies of TP attention, or one
# copy with data-parallel attention ('logical' is the paper's accounting convention, not a deployment).
TRANSFER_ALTERNATIVES = ("replicated", "dp-attention")
MODE_ALTERNATIVES = ("exact", "representative")
CHOICES = {"stack": STACK_ALTERNATIVES, "transfer_bytes": TRANSFER_ALTERNATIVES, "mode": MODE_ALTERNATIVES}
"""The open deployment choices, by the planning input that pins each."""

CHOICE_NAMES = {"stack": "serving stack", "transfer_bytes": "transfer policy", "mode": "throughput mode"}
FLAGS = {"stack": "--stack", "transfer_bytes": "--transfer-bytes", "mode": "--mode"}
PIN = {"stack": "which engine serves it (pass --stack)",
       "transfer_bytes": "whether decode runs data-parallel attention, i.e. how many KV copies cross the link "
                         "(pass --transfer-bytes)",
       "mode": "none to measure: the planner's two throughput models (exact takes expectations over lengths; "
               "pass --mode to keep one)"}


def _current(sc: Scenario, name: str) -> str:
    return {"stack": sc.stack, "transfer_bytes": sc.transfer, "mode": sc.mode}[name]


def open_choices(sc: Scenario, defaulted) -> dict[str, tuple[str, ...]]:
    """The choices among ``defaulted`` (planning input names: ``stack``, ``transfer_bytes``, ``mode``) whose
    alternatives apply here, each with its alternatives (the scenario's own value first). The stack does not
    apply to ``inputs paper`` (the paper's tables hold its engine); a value outside the alternatives (a
    user's own stack) leaves the choice closed."""
    out = {}
    for name in CHOICES:
        if name not in defaulted or (name == "stack" and sc.inputs == "paper"):
            continue
        now = _current(sc, name)
        if now in CHOICES[name]:
            out[name] = (now,) + tuple(v for v in CHOICES[name] if v != now)
    return out


def _variant_perf(sc: Scenario, plan: Plan, stack: str, transfer: str, cache: dict):
    """Performance inputs of ``plan`` under ``stack`` and ``transfer`` (the plan's own where unchanged)."""
    key = (stack, transfer)
    if key in cache:
        return cache[key]
    perf = plan.perf if stack == sc.stack else perf_inputs(replace(sc, stack=stack))
    if transfer != perf.sites[plan.layout.pd_sites[0].name].transfer.policy:
        perf = replace(perf, sites={name: replace(sp, transfer=TransferBytes(transfer, sp.transfer.tp))
                                    for name, sp in perf.sites.items()})
    cache[key] = perf
    return perf


def _label(values: dict[str, str]) -> str:
    return ", ".join(f"{CHOICE_NAMES[k]} {v}" for k, v in values.items())


def deployment_variants(sc: Scenario, plan: Plan, choices: dict[str, tuple[str, ...]]) -> tuple[Variant, ...]:
    """Every combination of the open ``choices`` (`open_choices`) as a `Variant`; () when none is open."""
    if not choices:
        return ()
    cache: dict = {}
    out = []
    for combo in itertools.product(*choices.values()):
        values = dict(zip(choices, combo))
        stack, transfer = values.get("stack", sc.stack), values.get("transfer_bytes", sc.transfer)
        perf = _variant_perf(sc, plan, stack, transfer, cache)
        out.append(Variant(_label(values), perf, values.get("mode", sc.mode)))
    return tuple(out)


@dataclass(frozen=True)
class Driver:
    """One input's effect on the gain with every other input at the plan's value: the gain at its two ends
    (``gain_low`` <= ``gain_high``, x), which values give them, and what would pin it."""

    name: str
    kind: str            # "model error" or "deployment choice"
    varied: str          # over what it was moved
    gain_low: float
    gain_high: float
    low_at: str
    high_at: str
    pin: str             # the single measurement (or choice) that would pin it

    @property
    def swing(self) -> float:
        return self.gain_high - self.gain_low

    @property
    def straddles(self) -> bool:
        """True when the driver alone moves the gain across 1 (pays at one end, not at the other)."""
        return self.gain_low < 1.0 < self.gain_high


@dataclass(frozen=True)
class Sensitivity:
    """The drivers ranked by swing (largest first), against ``baseline`` at the plan's point gain (x);
    ``variants`` every combination of the open choices (the error bars spread over them) and ``together``
    the point gain's range over those combinations, where one-at-a-time rows miss how choices interact."""

    drivers: tuple[Driver, ...]
    point_gain: float
    baseline: str
    variants: tuple[Variant, ...] = ()
    together: Driver | None = None

    @property
    def decisive(self) -> Driver | None:
        """The highest-ranked driver whose range straddles 1 (the open choices together last), else None."""
        return next((d for d in self.drivers + ((self.together,) if self.together else ()) if d.straddles), None)

    def cannot_tell_line(self) -> str | None:
        """The sentence a "cannot tell" verdict adds: which single measurement (or choice) would decide it,
        or, when none moves the gain across 1 alone, the largest driver (None without drivers)."""
        d = self.decisive
        if d is not None:
            return (f"what would decide it: {d.pin} (alone it moves the gain from {d.gain_low:.2f} to "
                    f"{d.gain_high:.2f}, across 1)")
        if not self.drivers:
            return None
        d = self.drivers[0]
        return (f"no single input moves the gain across 1 on its own; the largest driver is {d.name}: {d.pin} "
                f"(alone {d.gain_low:.2f} to {d.gain_high:.2f})")


def _measurement(bar, plan: Plan, sc: Scenario) -> tuple[str, str]:
    """(the driver's name, the single measurement that would pin it) for an input `ErrorBar`."""
    role, chip = bar.key.split(":", 1)
    chip = chip.partition("@")[0]   # a key of a stack's own error ends in @stack (`uncertainty.prefill_error_bar`)
    ev, site = plan.best, plan.layout.pd_sites[0]
    stack = sc.stack if sc.inputs != "paper" else "the paper's engine"
    if role == "decode":
        dec = plan.perf.sites[site.name].decode
        return (f"{chip.upper()} decode speed",
                f"{chip.upper()} decode TPOT at batch {dec.batch:.0f} and {sc.context_tokens:,.0f} tokens of context "
                f"on {site.instance} under {stack}")
    remote = plan.layout.remote is not None and plan.layout.remote.instance.chip.name == chip
    inst = plan.layout.remote.instance if remote else site.instance
    length = ev.l_long if remote and ev.p_remote > 0 else sc.grid.mean
    return (f"{chip.upper()} prefill speed",
            f"{chip.upper()} prefill TTFT of a {length:,.0f}-token prompt on {inst} under {stack}")


def _speed(quantile: float) -> str:
    """``its P10 speed`` / ``its median`` / ``its P90 speed``: where in its error an input's speed is."""
    return "its median" if abs(quantile - 50) < 1e-6 else f"its P{quantile:.0f} speed"


def _point_gain(layout: Layout, baseline: Layout, sc: Scenario, perf, mode: str) -> float:
    prf = grid_search(layout, sc.grid, perf, mode).best.lambda_max
    hom = grid_search(baseline, sc.grid, perf, mode).best.lambda_max
    return prf / hom if hom > 0 else float("inf")


@dataclass(frozen=True)
class Research:
    """How to re-search the configurations under an alternative choice: the question's scenario before the
    search (`configurations.search_configurations`), what the user pinned and the verdict's basis."""

    question_sc: Scenario
    spec: object            # configurations.SearchSpec
    basis: str

    def gain(self, values: dict[str, str]) -> float:
        """PrfaaS-PD's ``Lambda_max`` over the basis's homogeneous baseline with the choices ``values``
        (`CHOICES` names) and every configuration re-searched for them (the transfer policy pins the decode
        attention it names, `configurations.SearchSpec.transfer`); the baseline runs the local shape chosen."""
        from .configurations import search_configurations
        from .plans import basis_baseline

        q, spec = self.question_sc, self.spec
        if "transfer_bytes" in values:
            spec = replace(spec, transfer=values["transfer_bytes"])
        q = replace(q, **{k: v for k, v in values.items() if k != "transfer_bytes"})
        best = search_configurations(q, spec, report=0, prune=True).best
        base = basis_baseline(best.scenario, self.basis)
        hom = grid_search(base, q.grid, best.perf, best.scenario.mode).best.lambda_max
        return best.lambda_max / hom if hom > 0 else float("inf")


def sensitivity(sc: Scenario, plan: Plan, baseline: Layout, choices: dict[str, tuple[str, ...]],
                point_gain: float, research: Research | None = None) -> Sensitivity:
    """Rank the drivers of the gain over ``baseline``: every uncertain input at its own P10/P90 and every
    open choice (`open_choices`) at each alternative, one at a time (with ``research``, the configurations
    re-searched under each alternative)."""
    from .confidence import sampler_thresholds

    drivers = []
    for bar, quantile, gain in input_swings(plan.layout, baseline, sc.grid, plan.perf, sc.mode,
                                            sampler_thresholds(plan)):
        name, pin = _measurement(bar, plan, sc)
        lo, hi = int(np.argmin(gain)), int(np.argmax(gain))
        drivers.append(Driver(name, "model error", f"its P10-P90 speed under its model error ({bar.source})",
                              float(gain[lo]), float(gain[hi]), _speed(quantile[lo]), _speed(quantile[hi]), pin))
    cache: dict = {}
    for name, values in choices.items():
        gains = {}
        for v in values:
            stack = v if name == "stack" else sc.stack
            transfer = v if name == "transfer_bytes" else sc.transfer
            mode = v if name == "mode" else sc.mode
            gains[v] = (point_gain if v == values[0] else research.gain({name: v}) if research is not None else
                        _point_gain(plan.layout, baseline, sc, _variant_perf(sc, plan, stack, transfer, cache), mode))
        lo_v, hi_v = min(gains, key=gains.get), max(gains, key=gains.get)
        if gains[hi_v] - gains[lo_v] <= 1e-9 * abs(gains[hi_v]):
            lo_v = hi_v = "every alternative alike"
        drivers.append(Driver(CHOICE_NAMES[name], "deployment choice",
                              ", ".join(f"{v}{' (default)' if v == values[0] else ''}" for v in values),
                              min(gains.values()), max(gains.values()), lo_v, hi_v, PIN[name]))
    drivers.sort(key=lambda d: -d.swing)
    return Sensitivity(tuple(drivers), point_gain, baseline.name)


def sensitivity_of(sc: Scenario, plan: Plan, baseline: Layout, defaulted, point_gain: float,
                   research: Research | None = None) -> Sensitivity:
    """`sensitivity` over the choices of ``defaulted`` that are open (`open_choices`), with every
    combination of them as `variants` and their joint range as ``together`` (when two or more are open).
    A layout file whose sites name their own stack closes the stack choice. ``research`` re-searches the
    configurations for each alternative's row and each combination of ``together`` (`Research`); the
    variants the error bars spread over keep the plan's configuration (a variant is performance inputs on
    the plan's layout)."""
    lay = plan.layout
    sites = ([lay.remote] if lay.remote is not None else []) + list(lay.pd_sites)
    if any(getattr(site, "stack", None) for site in sites):
        defaulted = [d for d in defaulted if d != "stack"]
    choices = open_choices(sc, defaulted)
    ranked = sensitivity(sc, plan, baseline, choices, point_gain, research)
    variants = deployment_variants(sc, plan, choices)
    together = None
    if len(choices) > 1:
        combos = [dict(zip(choices, combo)) for combo in itertools.product(*choices.values())]
        gains = {v.label: (point_gain if i == 0 else research.gain(values) if research is not None else
                           _point_gain(plan.layout, baseline, sc, v.perf, v.mode))
                 for i, (v, values) in enumerate(zip(variants, combos))}
        lo, hi = min(gains, key=gains.get), max(gains, key=gains.get)
        together = Driver("open choices together", "deployment choice", f"all {len(gains)} combinations",
                          gains[lo], gains[hi], lo, hi,
                          f"the {', '.join(CHOICE_NAMES[c] for c in choices)} you will run (choices to state, not "
                          f"measurements: pass {', '.join(FLAGS[c] for c in choices)})")
    return replace(ranked, variants=variants, together=together)


def deciding_bars(sc: Scenario, plan: Plan, baseline: Layout, bars, ranked: Sensitivity | None):
    """``bars`` (`analytic.uncertainty.ErrorBars`) with, when the verdict is "cannot tell", the measurement
    that would decide it: from ``ranked`` when asked, else from the calibrated inputs alone (one cheap
    vectorized evaluation)."""
    if bars.verdict != "cannot tell":
        return bars
    ranked = ranked if ranked is not None else sensitivity(sc, plan, baseline, {}, bars.point_gain)
    line = ranked.cannot_tell_line()
    return bars if line is None else replace(bars, decider=line)
