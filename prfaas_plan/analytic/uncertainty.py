"""Error bars: each performance source's calibration error carried into Lambda, the PrfaaS gain, t and egress.

Method (``docs/methods.md``, "Error bars"):

- Every performance input of a plan (remote prefill, local prefill, local decode capacity) has an
  `ErrorBar`: a lognormal multiplicative error of log-width ``sigma`` with median 1. Inputs that share a
  ``key`` (the same chip's constants) share one draw, so PrfaaS-PD and its homogeneous baseline on the
  same local chips move together.
- Where ``sigma`` comes from (`prefill_error_bar`, `decode_error_bar`): a performance source may state
  its own -- an ``error_bar`` attribute holding an `ErrorBar`, the interface the performance layer fills
  from its calibration (key ``prefill:<chip>`` / ``decode:<chip>`` to share draws as below); otherwise a roofline
  prefill takes its chip calibration's leave-one-model-out error where its calibration records one (else leave-one-out) (median absolute relative error ``m`` of the
  leave-one-out predictions, ``sigma = ln(1 + m) / 0.6745``, the normal distribution's median absolute
  deviation) on TTFT (or saturated prefill busy time); a roofline decode capacity the chip's TPOT
  leave-one-out error; an uncalibrated chip, or one whose calibration records no held-out error (under 5
  points), the calibrated chips' median leave-one-model-out and leave-one-chip-out errors in quadrature (an
  unseen model on an unseen chip; `Calibration.loco_error`: their rows predicted by a fit without them, at an
  uncalibrated chip's constants), else the width of the calibration prior (`performance/calibrate.py`); a measured
  table `MEASURED_SIGMA`; the paper's given and back-solved inputs none ("given, no error bar").
- ``n`` seeded samples of the factors scale the per-request prefill seconds and the decode capacity of
  the routing statistics, which are computed once on the threshold grid; every sample's best split
  (the integer crossing of local prefill and decode bounds) and best threshold (a coarse pass over the
  grid's thresholds, then the grid points around the best) are found with array operations over
  samples x thresholds, so hundreds of samples take a fraction of a second
  (``benchmarks/bench_uncertainty.py``).
- The verdict compares the gain's P10 and P90 with 1: ``pays`` (P10 > 1), ``does not pay`` (P90 < 1), else
  ``cannot tell`` -- each side at 90% one-sided confidence.

The samples use the grid's thresholds without the point optimum's refinement between grid points. With
one uncertain input the P50 matches the point estimate (``docs/invariants.md``); with several it need
not: the minimum of the stages falls whenever any stage slows but rises only when the binding ones
speed up, while balanced stages' capacities add (a sum of lognormals has its median above the sum of
medians).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from ..layout import Layout
from .search import sorted_unique
from .throughput import LengthGrid, PerfInputs, routing_stats, stage_bounds

MEASURED_SIGMA = 0.05   # run-to-run scatter of a measured prefill table, assumed (5%)
QUANTILES = (10.0, 50.0, 90.0)
DEFAULT_SAMPLES = 400
DEFAULT_SEED = 0
_MAD_TO_SIGMA = 0.6745   # median |z| of a standard normal
# Widths of the calibration priors on GEMM and memory efficiency (`performance/calibrate.py`, CHIP_PRIORS).
GEMM_PRIOR_SIGMA = 0.2
MEMORY_PRIOR_SIGMA = 0.2


@dataclass(frozen=True)
class ErrorBar:
    """Multiplicative error of one performance input: lognormal, median 1, log-width ``sigma`` (0: none).
    Inputs with the same ``key`` share one draw; ``source`` says where ``sigma`` comes from."""

    sigma: float
    key: str
    source: str


def _given(key: str) -> ErrorBar:
    return ErrorBar(0.0, key, "given, no error bar")


def _loo_of(calibration, quantities: tuple[str, ...], stack: str | None = None) -> tuple[float, str, str] | None:
    """The honest median |error| (a fraction) a chip's calibration records for the first of ``quantities``
    (``ttft``, ``busy``, ``tpot``) it has, its kind and the stack it is specific to ("" for all): leave-one-
    model-out under ``stack`` where recorded, else leave-one-model-out over every stack (what a model the fit
    has not seen should expect), else leave-one-out; None when it records none of them."""
    by_stack = getattr(calibration, "lomo_error_by_stack", {}).get(stack or "", {})
    for errors, kind, scope in ((by_stack, f"leave-one-model-out under {stack}", stack or ""),
                                (getattr(calibration, "lomo_error", {}), "leave-one-model-out", ""),
                                (calibration.loo_error, "leave-one-out", "")):
        m = next((errors[q] for q in quantities if q in errors), None)
        if m is not None:
            return m, kind, scope
    return None


def _uncalibrated_error(quantities: tuple[str, ...]) -> tuple[float, str] | None:
    """What a plan on a chip nobody calibrated should expect, for a model the fit may not have seen either: the
    calibrated chips' median leave-one-model-out error (`Calibration.lomo_error`, an unseen model on a seen chip)
    and their median leave-one-chip-out error (`Calibration.loco_error`, an unseen chip running seen models, the
    server's part), added in quadrature as log-widths (the two transfers assumed independent), on the first of
    ``quantities`` the calibrated chips record both for; the combined median (a fraction) and a phrase naming
    the parts; None when none records both."""
    from ..profiles import all_hardware

    chips = {name: chip.calibration for name, chip in sorted(all_hardware().items()) if chip.calibration is not None}
    for q in quantities:
        lomo = {n: c.lomo_error[q] for n, c in chips.items() if q in c.loco_error and q in c.lomo_error}
        loco = {n: c.loco_error[q] for n, c in chips.items() if q in c.loco_error and q in c.lomo_error}
        if lomo:
            # statistics, not numpy: np.median imports numpy.ma, which a cold `size` must not pay for
            widths = [math.log1p(statistics.median(v.values())) for v in (lomo, loco)]
            combined = math.expm1(math.hypot(*widths))
            listed = "; ".join(f"{kind} ({', '.join(f'{n} {e:.0%}' for n, e in v.items())})"
                               for kind, v in (("leave-one-model-out", lomo), ("leave-one-chip-out", loco)))
            return combined, f"calibrated chips' {q.upper()} {listed} in quadrature"
    return None


def expected_error(constants, quantities: tuple[str, ...]) -> tuple[float | None, str]:
    """The median relative error (a fraction) a plan's error bar takes for a chip with ``constants`` on the first
    of ``quantities`` recorded, over every stack, and its basis (``leave-one-model-out``, ``leave-one-out``,
    ``unseen model and chip`` for a chip calibrated on too few rows or none, ``prior``); None with ``prior``
    when nothing records one (`_calibrated_sigma` states the prior's width instead)."""
    found = _loo_of(constants.calibration, quantities) if constants.origin == "calibrated" else None
    if found is not None:
        return found[0], found[1]
    unseen = _uncalibrated_error(quantities)
    return (unseen[0], "unseen model and chip") if unseen is not None else (None, "prior")


def _calibrated_sigma(constants, quantities: tuple[str, ...], prior: float, prior_name: str,
                     stack: str | None = None) -> tuple[float, str, str]:
    """Log-width from a chip's calibration: its held-out median error on ``quantities`` (`_loo_of`, under
    ``stack`` where recorded); for a chip that is uncalibrated or whose calibration records none (fewer than 5
    points: the H20's one), what an unseen model on an unseen chip should expect (`_uncalibrated_error`), else the
    calibration prior's width (``prior``); with where it comes from and the stack it is specific to ("" for
    none)."""
    found = _loo_of(constants.calibration, quantities, stack) if constants.origin == "calibrated" else None
    if found is not None:
        m, kind, scope = found
        sigma = math.log1p(m) / _MAD_TO_SIGMA
        return sigma, f"calibration {kind} median {m:.1%} ({'/'.join(quantities)}) -> sigma {sigma:.3f}", scope
    why = ("no calibration on serving data" if constants.origin != "calibrated"
           else "its calibration records no held-out error: calibrate records none from fewer than 5 points")
    unseen = _uncalibrated_error(quantities)
    if unseen is None:
        return prior, f"{prior_name} prior width x/ e^{prior:g} ({why})", ""
    m, kind = unseen
    sigma = math.log1p(m) / _MAD_TO_SIGMA
    return sigma, f"{why}; {kind} median {m:.1%} -> sigma {sigma:.3f}", ""


def prefill_error_bar(prefill, chip_name: str) -> ErrorBar:
    """The `ErrorBar` of a prefill model on ``chip_name`` (see the module docstring)."""
    own = getattr(prefill, "error_bar", None)
    if isinstance(own, ErrorBar):
        return own
    key = f"prefill:{chip_name}"
    constants = getattr(prefill, "constants", None)
    if constants is not None:
        sigma, why, scope = _calibrated_sigma(constants, ("ttft", "busy"), GEMM_PRIOR_SIGMA, "GEMM-efficiency",
                                              stack_of(prefill))
        # a stack's own error is its own draw: two sites of one chip under two stacks must not share a width
        return ErrorBar(sigma, f"{key}@{scope}" if scope else key, f"{chip_name} prefill: {why}")
    if prefill.source.startswith("measured table"):
        return ErrorBar(MEASURED_SIGMA, key, f"{chip_name} prefill: measured table, {MEASURED_SIGMA:.0%} "
                        "run-to-run scatter (assumed)")
    return _given(key)


def stack_of(prefill) -> str | None:
    """The engine-level name of the serving stack a prefill model runs (``sglang`` for ``sglang@0.5.9``), or
    None (a measured table or a given model)."""
    stack = getattr(prefill, "stack", None)
    return None if stack is None else (getattr(stack, "engine_stack", "") or stack.name)


def decode_error_bar(decode, chip_name: str, constants=None, stack: str | None = None) -> ErrorBar:
    """The `ErrorBar` of a decode capacity on ``chip_name``: the chip calibration's TPOT held-out error
    (under ``stack``, the site's serving stack, where recorded) when ``constants``
    (`performance.constants.ChipConstants`) record one, else the memory prior."""
    own = getattr(decode, "error_bar", None)
    if isinstance(own, ErrorBar):
        return own
    key = f"decode:{chip_name}"
    if decode.binding == "given":
        return _given(key)
    if constants is None:
        from ..performance.constants import chip_constants
        from ..profiles import get_hardware

        constants = chip_constants(get_hardware(chip_name))
    sigma, why, scope = _calibrated_sigma(constants, ("tpot",), MEMORY_PRIOR_SIGMA, "memory-efficiency", stack)
    return ErrorBar(sigma, f"{key}@{scope}" if scope else key, f"{chip_name} decode: {why}")


@dataclass(frozen=True)
class Band:
    """P10 / P50 / P90 of one figure over the samples."""

    p10: float
    p50: float
    p90: float

    @classmethod
    def of(cls, values: np.ndarray) -> Band:
        return cls(*(float(v) for v in percentiles(values, QUANTILES)))


def percentiles(values: np.ndarray, qs) -> np.ndarray:
    """``np.percentile(values, qs)`` of float values (its default linear method, bit for bit: the same
    partition, index, weight and two-sided interpolation), without the ``numpy.ma`` import (45 ms) that
    ``np.percentile`` pays through ``np.unique`` on its first call."""
    arr = np.asarray(values, dtype=float).flatten()
    n = arr.size
    virtual = (n - 1) * (np.asarray(qs, dtype=float) / 100)
    below = np.floor(virtual)
    above = below + 1
    last = virtual >= n - 1
    below[last], above[last] = -1, -1
    weight = virtual - below
    below, above = below.astype(np.intp), above.astype(np.intp)
    arr.partition(sorted_unique(np.concatenate(([0, -1], below, above))))
    a, b = arr[below], arr[above]
    step = b - a
    out = np.where(weight >= 0.5, b - step * (1 - weight), a + step * weight)
    if np.isnan(arr[-1]):
        out[:] = np.nan
    return out


@dataclass(frozen=True)
class SampledLayout:
    """One layout's optimum in every sample: ``lam`` (requests/s), ``threshold`` (tokens), ``egress_bps``."""

    lam: np.ndarray
    threshold: np.ndarray
    egress_bps: np.ndarray


def _best_split_bound(n_total: int, per_instance_local: np.ndarray, decode_rps: np.ndarray,
                      splits: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Max over integer splits of min(local prefill, decode) bounds, and that local prefill bound.

    ``per_instance_local`` (requests/s one prefill instance sustains; inf when nothing is local) and
    ``decode_rps`` (per decode instance) broadcast over (samples, thresholds). ``splits`` pins the
    prefill count (None: free in 0..n_total)."""
    a, d = per_instance_local, decode_rps
    if splits is None:
        with np.errstate(invalid="ignore", divide="ignore"):
            cross = np.where(np.isinf(a), 0.0, n_total * d / (a + d))
        cands = [np.clip(np.floor(cross), 0, n_total), np.clip(np.ceil(cross), 0, n_total)]
    else:
        cands = [np.full(np.broadcast_shapes(a.shape, d.shape), float(s)) for s in splits]
    best = local_at_best = None
    for n_p in cands:
        with np.errstate(invalid="ignore"):
            local = np.where(np.isinf(a), np.inf, n_p * a)
        value = np.minimum(local, (n_total - n_p) * d)
        if best is None:
            best, local_at_best = value, local
        else:
            better = value > best
            best, local_at_best = np.where(better, value, best), np.where(better, local, local_at_best)
    return best, local_at_best


COARSE_STEP = 8  # samples search every 8th grid threshold, then the 2 x 8 grid points around the best


def sample_layout(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str, thresholds: np.ndarray,
                  f_remote: np.ndarray, f_local: np.ndarray, f_decode: np.ndarray) -> SampledLayout:
    """The optimum (threshold and split as in `prfaas_plan.analytic.search.grid_search`, on its grid
    without refinement between points) of a single-PD-site layout for each sample of multiplicative
    factors on remote and local prefill seconds and on decode capacity (arrays of one length).

    Each sample searches every `COARSE_STEP`-th threshold, then the grid points around its best."""
    site = layout.pd_sites[0]
    pinned = layout.threshold
    ts = np.array([pinned], dtype=float) if pinned is not None else np.asarray(thresholds, dtype=float)
    splits = np.array([site.prefill]) if pinned == 0.0 else None
    r = routing_stats(grid, perf, ts, mode, site.name)
    b = stage_bounds(layout, r, perf, [0])
    remote0, link0 = b.remote_prefill[:, 0], b.link[:, 0]
    with np.errstate(divide="ignore"):
        per_instance = np.where(r.local_s_per_req > 0, 1.0 / np.where(r.local_s_per_req > 0, r.local_s_per_req,
                                                                          1.0), np.inf)
    dec = (perf.sites[site.name].decode.requests_per_s(perf.output_tokens) * f_decode)[:, None]
    fr, fl = f_remote[:, None], f_local[:, None]

    def at(idx: np.ndarray):
        """Lambda, the remote-side and the local prefill bound at threshold indices ``idx`` (samples x k)."""
        inc = np.minimum(remote0[idx] / fr, link0[idx])
        pd, local = _best_split_bound(site.instances, per_instance[idx] / fl, dec, splits)
        return np.minimum(inc, pd), inc, local

    coarse = sorted_unique(np.append(np.arange(0, len(ts), COARSE_STEP), len(ts) - 1))[None, :]
    lam_c = at(coarse)[0]
    centre = coarse[0, np.argmax(lam_c, axis=1)]
    idx = np.clip(centre[:, None] + np.arange(-COARSE_STEP, COARSE_STEP + 1)[None, :], 0, len(ts) - 1)
    lam, inc, local = at(idx)
    best = lam.max(axis=1)
    ok = lam >= best[:, None] * (1 - 1e-6)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(np.log(np.maximum(inc, 1e-300)) - np.log(np.maximum(local, 1e-300)))
    gap = np.where(ok, np.nan_to_num(gap, nan=np.inf), np.inf)
    pick = np.where(np.isfinite(gap).any(axis=1), np.argmin(gap, axis=1), np.argmax(ok, axis=1))
    i = idx[np.arange(len(best)), pick]
    egress = best * r.link_bytes_per_req[i] * 8.0 if layout.remote is not None else np.zeros_like(best)
    return SampledLayout(best, ts[i], np.where(np.isfinite(egress), egress, 0.0))


@dataclass(frozen=True)
class ErrorBars:
    """P10/P50/P90 of the PrfaaS layout's Lambda (requests/s), gain over ``baseline`` (x), threshold
    (tokens) and egress (Gbps), with the verdict; ``inputs`` lists each input's `ErrorBar`."""

    samples: int
    seed: int
    lambda_rps: Band
    gain: Band
    threshold_tokens: Band
    egress_gbps: Band
    verdict: str
    baseline: str
    inputs: tuple[ErrorBar, ...]
    point_gain: float = math.nan   # the point estimate's gain, when the caller has it (x)
    variants: tuple[str, ...] = ()  # deployment alternatives the samples were spread over (`Variant.label`)
    decider: str = ""               # with "cannot tell": the measurement that would decide it (planning)

    @property
    def given(self) -> bool:
        """True when no input has an error bar (every sample equals the point estimate)."""
        return all(e.sigma == 0 for e in self.inputs)

    def verdict_line(self, held: str = "") -> str:
        """One line: the verdict, the gain's band and how it was obtained; ``held`` names what the baseline
        holds equal (e.g. "at equal capex", planning/answers.py `BASIS_PHRASES`)."""
        g = self.gain
        said = {"pays": "PrfaaS pays", "does not pay": "PrfaaS does not pay",
                "cannot tell": "cannot tell whether PrfaaS pays"}[self.verdict] + (f" {held}" if held else "")
        if self.given and not self.variants:
            return f"verdict vs {self.baseline}: {said} (gain {g.p50:.2f}; given inputs, no error bar)"
        over = f"; model error and {len(self.variants)} deployment alternatives" if self.variants else ""
        decide = f"; {self.decider}" if self.decider and self.verdict == "cannot tell" else ""
        return (f"verdict vs {self.baseline}: {said} at 90% confidence (gain P10 {g.p10:.2f} / P50 {g.p50:.2f} / "
                f"P90 {g.p90:.2f}, {self.samples} samples, seed {self.seed}{over}){decide}")


def verdict(gain: Band) -> str:
    """``pays`` when P10 > 1, ``does not pay`` when P90 < 1, else ``cannot tell``."""
    if gain.p10 > 1.0:
        return "pays"
    if gain.p90 < 1.0:
        return "does not pay"
    return "cannot tell"


@dataclass(frozen=True)
class Variant:
    """One deployment alternative a band spreads its samples over: the performance inputs and throughput
    mode it implies (another serving stack, transfer policy or mode), and a ``label`` saying which."""

    label: str
    perf: PerfInputs
    mode: str


def draw_factors(bars, samples: int, seed: int) -> dict[str, np.ndarray]:
    """``samples`` seeded log-normal speed factors (x, median 1) per distinct `ErrorBar.key` of ``bars``:
    bars sharing a key (one chip and stack in two roles) share their draws."""
    keys = sorted({b.key for b in bars})
    sigma = {b.key: b.sigma for b in bars}
    z = np.random.default_rng(seed).standard_normal((samples, len(keys)))
    return {k: np.exp(sigma[k] * z[:, j]) for j, k in enumerate(keys)}


def input_bars(layout: Layout, perf: PerfInputs) -> dict[str, ErrorBar]:
    """Each performance input's `ErrorBar` by role (``local_prefill``, ``local_decode``, ``remote_prefill``)."""
    site = layout.pd_sites[0]
    local_chip = site.instance.chip.name
    sp = perf.sites[site.name]
    bars = {"local_prefill": prefill_error_bar(sp.prefill, local_chip),
            "local_decode": decode_error_bar(sp.decode, local_chip, stack=stack_of(sp.prefill))}
    if layout.remote is not None and perf.remote_prefill is not None:
        bars["remote_prefill"] = prefill_error_bar(perf.remote_prefill, layout.remote.instance.chip.name)
    return bars


def _gains(layout: Layout, baseline: Layout, grid: LengthGrid, perf: PerfInputs, mode: str, thresholds: np.ndarray,
           f_remote: np.ndarray, f_local: np.ndarray, f_decode: np.ndarray) -> tuple[SampledLayout, np.ndarray]:
    """The layout's samples and its gain over ``baseline`` in each sample of the factors (x; inf where the
    baseline serves nothing). The baseline's remote site, if any, runs the layout's remote chip: the same
    draw."""
    if baseline.remote is not None and (layout.remote is None or
                                        baseline.remote.instance.chip.name != layout.remote.instance.chip.name):
        raise ValueError("the baseline's remote chip must be the layout's remote chip")
    prf = sample_layout(layout, grid, perf, mode, thresholds, f_remote, f_local, f_decode)
    base = sample_layout(baseline, grid, perf, mode, thresholds,
                         f_remote if baseline.remote is not None else np.ones_like(f_remote), f_local, f_decode)
    with np.errstate(divide="ignore", invalid="ignore"):
        return prf, np.where(base.lam > 0, prf.lam / base.lam, np.inf)


def error_bars(layout: Layout, baseline: Layout, grid: LengthGrid, perf: PerfInputs, mode: str,
               thresholds: np.ndarray, samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED,
               variants: tuple[Variant, ...] = ()) -> ErrorBars:
    """Sample the performance inputs' errors and evaluate ``layout`` and ``baseline`` (both single-PD-site,
    the same local chips, sharing ``perf``; a baseline's remote site, if any, on the layout's remote chip)
    in every sample.

    With ``variants`` (deployment alternatives the user left open, the given ``perf``/``mode`` among them)
    each sample also draws one of them, uniformly and independently of its model-error draw, and is
    evaluated under it: the band then spans the choices as well as the model error. The model-error
    draws are the same with or without variants (one seeded stream each)."""
    if samples < 1:
        raise ValueError("samples must be at least 1")
    bars = input_bars(layout, perf)
    factor = draw_factors(bars.values(), samples, seed)
    ones = np.ones(samples)
    f_remote = factor[bars["remote_prefill"].key] if "remote_prefill" in bars else ones
    f_local, f_decode = factor[bars["local_prefill"].key], factor[bars["local_decode"].key]
    if not variants:
        prf, gain = _gains(layout, baseline, grid, perf, mode, thresholds, f_remote, f_local, f_decode)
        lam, thr, egress = prf.lam, prf.threshold, prf.egress_bps
    else:
        pick = np.random.default_rng([seed, 1]).integers(0, len(variants), samples)
        lam, thr, egress, gain = (np.empty(samples) for _ in range(4))
        for i, v in enumerate(variants):
            m = pick == i
            if m.any():
                prf, g = _gains(layout, baseline, grid, v.perf, v.mode, thresholds, f_remote[m], f_local[m],
                                f_decode[m])
                lam[m], thr[m], egress[m], gain[m] = prf.lam, prf.threshold, prf.egress_bps, g
    g = Band.of(gain)
    return ErrorBars(samples, seed, Band.of(lam), g, Band.of(thr), Band.of(egress / 1e9),
                     verdict(g), f"{baseline.name} ({baseline.pd_sites[0].instances}x{baseline.pd_sites[0].instance})",
                     tuple(bars.values()), variants=tuple(v.label for v in variants))


Z90 = 1.2815515655446004   # the standard normal's 90th percentile: an input's own P10/P90 factor is e^(-/+ Z90 sigma)


SWING_POINTS = 9   # speed quantiles from each input's P10 to its P90, the median among them


def input_swings(layout: Layout, baseline: Layout, grid: LengthGrid, perf: PerfInputs, mode: str,
                 thresholds: np.ndarray) -> list[tuple[ErrorBar, np.ndarray, np.ndarray]]:
    """One at a time, each uncertain input (sigma > 0) at `SWING_POINTS` speed quantiles from its own P10
    to its P90 (the median among them), the others at their medians: (its `ErrorBar`, the speed quantiles
    in percent, the gain at each, x). Inputs sharing a key move together, as in `error_bars`; every point
    of every input in one vectorized evaluation. The range, not only its ends: an integer split can make
    the gain peak inside it."""
    from ..workload.distributions import ndtr

    bars = input_bars(layout, perf)
    keys = [k for k in dict.fromkeys(b.key for b in bars.values()) if any(b.key == k and b.sigma > 0
                                                                          for b in bars.values())]
    if not keys:
        return []
    sigma = {b.key: b.sigma for b in bars.values()}
    z = np.linspace(-Z90, Z90, SWING_POINTS)
    n = SWING_POINTS * len(keys)
    f = {k: np.ones(n) for k in sigma}
    for j, k in enumerate(keys):
        # a prefill factor scales seconds (above 1: slower), the decode factor capacity (above 1: faster)
        f[k][j * SWING_POINTS:(j + 1) * SWING_POINTS] = np.exp((-1.0 if k.startswith("prefill:") else 1.0)
                                                                * sigma[k] * z)
    ones = np.ones(n)
    f_remote = f[bars["remote_prefill"].key] if "remote_prefill" in bars else ones
    _, gain = _gains(layout, baseline, grid, perf, mode, thresholds, f_remote, f[bars["local_prefill"].key],
                     f[bars["local_decode"].key])
    first = {b.key: b for b in bars.values()}
    quantile = 100.0 * ndtr(z)
    return [(first[k], quantile, gain[j * SWING_POINTS:(j + 1) * SWING_POINTS]) for j, k in enumerate(keys)]
