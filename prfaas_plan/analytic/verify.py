"""Cross-check of a grid-search plan against the linear program, with every disagreement explained.

Four figures of one single-PD-site layout in exact mode (requests/s):

- ``grid``: the paper's threshold grid search (`prfaas_plan.analytic.search`);
- ``threshold``: the best pure threshold on the LP's length bins (a threshold between bins, one bin
  split), found by evaluating every such routing with the throughput model's own stage bounds;
- ``lp``: the mixed-integer program over per-bin routing (`prfaas_plan.analytic.lp`), which contains
  every threshold routing;
- ``bound``: its proven upper bound (continuous relaxation or the solver's dual bound).

Invariants, each an `InternalError` when broken: ``lp <= bound``; the LP's routing re-evaluated with
`throughput.stage_bounds` (bytes and bits converted there, independently of the LP's rows) carries
``lp``; ``lp >= threshold``; ``threshold`` and ``grid`` agree within the project's band (both are
thresholds, they differ by discretization only). What remains, ``lp`` above ``threshold`` beyond the
band, is a finding: routing by length is not optimal for this hardware (docs/methods.md, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InternalError
from ..layout import Layout
from .throughput import (
    STAGES,
    Evaluation,
    LengthGrid,
    PerfInputs,
    Routing,
    stage_bounds,
)

if TYPE_CHECKING:  # pragma: no cover
    from .lp import LPResult

BAND = (-0.01, 0.02)      # the project's agreement band between grid and LP (relative)
SPLIT_STEPS = 33          # fractions of the split bin tried for the best bin threshold
FEASIBLE_RTOL = 1e-5      # HiGHS's feasibility tolerance on utilization rows, with margin
N_BINS = 128


@dataclass(frozen=True)
class Verification:
    """The grid plan against the linear program. Rates in requests/s; relative differences as
    fractions (``lp_vs_grid = lp / grid - 1``)."""

    grid_rps: float
    threshold_rps: float        # best pure threshold on the LP's bins
    lp_rps: float
    bound_rps: float            # proven upper bound on the LP's optimum
    gap: float                  # 1 - lp / bound: the integer answer's proven optimality gap
    lp_vs_grid: float
    non_threshold_gain: float   # lp / threshold - 1
    threshold_optimal: bool     # no routing beats the best threshold beyond the band
    lp_is_threshold: bool       # the LP's own routing has threshold shape
    binding: tuple[str, ...]    # stages at capacity under the LP's routing
    remote_ranges: str          # the length ranges the LP prefills remotely, e.g. "128-2K, 31K-131K"
    explanation: str
    lp: LPResult
    grid_plan: Evaluation


def _routing(bins, frac: np.ndarray) -> Routing:
    """Per-request stage loads of routings given as remote fractions per bin (rows: routings)."""
    frac = np.atleast_2d(frac)
    w = bins.weight
    remote_s = np.where(np.isfinite(bins.remote_s), bins.remote_s, 0.0)
    p = frac @ w
    nan = np.full(len(p), np.nan)
    return Routing(np.zeros(len(p)), p, nan, nan, frac @ (w * remote_s), frac @ (w * bins.kv_bytes),
                   (1.0 - frac) @ (w * bins.local_s))


def _threshold_routings(n_bins: int) -> np.ndarray:
    """Every threshold routing between bins: bins above ``k`` remote, bin ``k`` a fraction remote."""
    f = np.linspace(0.0, 1.0, SPLIT_STEPS)
    k = np.arange(n_bins)
    frac = (np.arange(n_bins)[None, None, :] > k[:, None, None]).astype(float)
    frac = np.broadcast_to(frac, (n_bins, SPLIT_STEPS, n_bins)).copy()
    frac[k, :, k] = f[None, :]
    return frac.reshape(-1, n_bins)


def best_bin_threshold(layout: Layout, bins, perf: PerfInputs) -> tuple[float, int]:
    """The best pure-threshold throughput on ``bins`` over every integer local split (requests/s),
    evaluated with `stage_bounds`; returns (rate, local prefill instances)."""
    site = layout.pd_sites[0]
    splits = np.arange(0, site.instances + 1)
    frac = _threshold_routings(len(bins.weight))
    if not layout.uses_remote:
        frac = np.zeros((1, len(bins.weight)))
    lam = stage_bounds(layout, _routing(bins, frac), perf, splits).lambda_max
    i, j = np.unravel_index(int(np.argmax(lam)), lam.shape)
    return float(lam[i, j]), int(splits[j])


def _ranges(lengths: np.ndarray, remote: np.ndarray) -> str:
    from ..units import format_tokens

    out, start = [], None
    for i, on in enumerate(remote):
        if on and start is None:
            start = i
        if start is not None and (not on or i == len(remote) - 1):
            end = i if on else i - 1
            out.append(f"{format_tokens(lengths[start])}-{format_tokens(lengths[end])}")
            start = None
    return ", ".join(out) if out else "none"


def _explain(v: dict, bins) -> str:
    lo, hi = BAND
    if v["threshold_optimal"]:
        return (f"grid and linear program agree within {lo:+.0%}/{hi:+.0%} (LP vs grid {v['lp_vs_grid']:+.2%}): "
                "threshold routing is optimal up to the discretization")
    bind = set(v["binding"])
    if {"link", "local_prefill"} <= bind:
        ratio, unit = bins.local_s / bins.kv_bytes, "local prefill seconds saved per KV byte sent"
    elif {"remote_prefill", "local_prefill"} <= bind:
        ratio, unit = bins.local_s / np.where(np.isfinite(bins.remote_s), bins.remote_s, np.inf), \
            "local prefill seconds saved per remote prefill second"
    else:
        ratio, unit = None, ""
    why = ""
    if ratio is not None:
        peak = int(np.argmax(ratio))
        why = (f"; with {' and '.join(sorted(bind))} binding, the best requests to offload are those with the most "
               f"{unit}, which is not increasing in length (highest near {bins.length[peak]:,.0f} tokens, "
               f"{ratio[peak] / ratio[-1]:.2g}x the longest bin's: per-request fixed prefill time and fixed state "
               "bytes weigh on short requests)")
    elif "local_decode" in bind:
        why = "; decode binds at the LP optimum, so its routing is one of many that reach it"
    return (f"routing is NOT a pure threshold here: per-length-bin routing reaches {v['lp_rps']:.4g} req/s, "
            f"{v['non_threshold_gain']:+.1%} over the best threshold ({v['threshold_rps']:.4g} on the bins, "
            f"{v['grid_rps']:.4g} on the grid; the plan above is the threshold one); the LP prefills "
            f"{v['remote_ranges']} tokens remotely{why}")


def _knapsack_bound(saved_s, cost, weight, budget, local_total, n_p, decode_rps, steps: int = 60):
    """Highest rate (req/s; one per split) at which some routing keeps local prefill within ``n_p``
    with one remote-side resource of capacity ``budget`` (per second) charging ``cost`` per request.

    Offloading a request saves ``saved_s`` local prefill seconds; at rate ``lam`` the resource allows a
    cost of ``budget / lam`` per arriving request, best spent on the requests with the most saved
    seconds per unit cost (a fractional knapsack, piecewise linear in the allowance). The rates that fit
    form an interval (``lam * (local_total - saved(budget / lam))`` is convex in ``lam``), so a
    bisection finds its end."""
    order = np.argsort(-saved_s / np.where(cost > 0, cost, 1e-300), kind="stable")
    spent = np.concatenate([[0.0], np.cumsum(weight[order] * cost[order])])
    saved = np.concatenate([[0.0], np.cumsum(weight[order] * saved_s[order])])
    lo, hi = np.zeros_like(decode_rps), decode_rps.astype(float)
    saved[-1] = local_total  # everything offloaded leaves no local prefill (not a rounding residue)

    def fits(lam):
        with np.errstate(over="ignore", divide="ignore"):
            allowance = budget / lam
        left = local_total - np.interp(allowance, spent, saved)
        return lam * np.maximum(left, 0.0) <= n_p + 1e-9 * lam * local_total

    ok = fits(hi)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        good = fits(mid)
        lo, hi = np.where(good, mid, lo), np.where(good, hi, mid)
    return np.where(ok, decode_rps, lo)


def routing_bound(layout: Layout, grid: LengthGrid, perf: PerfInputs) -> tuple[float, int]:
    """An upper bound (req/s) on the exact-mode throughput of *any* routing of a single-PD-site layout
    over every integer split, without a solver: each remote-side stage (link, remote prefill) bounds
    the rate on its own (`_knapsack_bound`) and the lower of the two holds. Exact when one of them is
    slack at the optimum. Returns (bound, local prefill instances reaching it)."""
    site = layout.pd_sites[0]
    sp = perf.sites[site.name]
    l, w = grid.lengths, grid.weights
    t_local = grid.busy_at_lengths(sp.prefill)   # instance occupancy, as the stage bounds count it
    splits = np.arange(0, site.instances + 1, dtype=float)
    decode = (site.instances - splits) * sp.decode.requests_per_s(perf.output_tokens)
    local_total = float(w @ t_local)
    if not layout.uses_remote or site.link is None or perf.remote_prefill is None:
        lam = np.minimum(np.divide(splits, local_total), decode)
    else:
        t_remote = grid.busy_at_lengths(perf.remote_prefill)
        kv_bits = perf.transfer_bytes(l, site.name) * 8.0
        lam = np.minimum(
            _knapsack_bound(t_local, kv_bits, w, site.link.planned_bps, local_total, splits, decode),
            _knapsack_bound(t_local, t_remote, w, float(layout.remote.instances), local_total, splits, decode))
    j = int(np.argmax(lam))
    return float(lam[j]), int(splits[j])


def screen(layout: Layout, grid: LengthGrid, perf: PerfInputs, grid_plan: Evaluation) -> str | None:
    """A warning when some routing may beat the best threshold beyond the band (by `routing_bound`,
    numpy only), else None; ``--verify`` then gives the linear program's plan."""
    if grid_plan.mode != "exact":
        from .search import grid_search

        grid_plan = grid_search(layout, grid, perf, "exact").best
    bound, n_p = routing_bound(layout, grid, perf)
    g = grid_plan.lambda_max
    if g <= 0 or bound <= g * (1 + BAND[1]):
        return None
    return (f"routing by length may not be optimal here: some routing of requests to the remote site "
            f"could carry up to {bound:.4g} req/s ({bound / g - 1:+.0%}, {n_p} local prefill instances) against "
            f"the best threshold's {g:.4g} req/s (exact mode); --verify gives the linear program's plan")


def verify(layout: Layout, grid: LengthGrid, perf: PerfInputs, grid_plan: Evaluation,
           n_bins: int = N_BINS) -> Verification:
    """Check ``grid_plan`` (the grid optimum of the single-PD-site ``layout``; re-searched in exact mode
    when it was found in representative mode) against the linear program; raises `InternalError` when
    an invariant of the module docstring fails."""
    if grid_plan.mode != "exact":
        from .search import grid_search

        grid_plan = grid_search(layout, grid, perf, "exact").best
    from .lp import make_bins, max_throughput  # here: a plain size screens the routing without the program

    site = layout.pd_sites[0]
    bins = make_bins(grid, perf, n_bins, site=site.name)
    res = max_throughput(layout, bins, perf)
    what = f"layout {layout.name!r}"
    tol = 1e-6 * max(res.bound_rps, 1.0)
    if res.lambda_rps > res.bound_rps + tol:
        raise InternalError(f"{what}: the LP's {res.lambda_rps:.6g} req/s exceeds its bound {res.bound_rps:.6g}")
    split = replace(layout, pd_sites=(site.with_split(round(res.n_prefill)),) + layout.pd_sites[1:])
    # HiGHS meets r_b <= Lambda w_b to its tolerance: snap shares within it to whole bins, so a pool
    # of zero instances is not charged a 1e-12 share of a bin.
    frac = np.where(res.remote_fraction > 1 - 1e-7, 1.0, np.where(res.remote_fraction < 1e-7, 0.0,
                                                                    res.remote_fraction))
    sb = stage_bounds(split, _routing(bins, frac), perf, [round(res.n_prefill)])
    carried = float(sb.lambda_max[0, 0])
    if res.lambda_rps > carried * (1 + FEASIBLE_RTOL) + 1e-9:
        raise InternalError(f"{what}: the LP's routing carries {carried:.6g} req/s by the throughput model's stage "
                            f"bounds, not the {res.lambda_rps:.6g} req/s the LP reports (units disagree?)")
    binding = tuple(s for s in STAGES if getattr(sb, s)[0, 0] <= carried * (1 + 1e-4))
    t_rps, _ = best_bin_threshold(layout, bins, perf)
    if res.lambda_rps < t_rps * (1 - FEASIBLE_RTOL):
        raise InternalError(f"{what}: the LP's {res.lambda_rps:.6g} req/s is below a threshold routing it contains "
                            f"({t_rps:.6g} req/s; solver status {res.status})")
    g = grid_plan.lambda_max
    lo, hi = BAND
    if g > 0 and not (lo <= t_rps / g - 1 <= hi):
        raise InternalError(f"{what}: two threshold searches disagree: {g:.6g} req/s on the grid, {t_rps:.6g} on "
                            f"the {len(bins.weight)} LP bins (beyond {lo:+.0%}/{hi:+.0%})")
    v = {"grid_rps": g, "threshold_rps": t_rps, "lp_rps": res.lambda_rps, "bound_rps": res.bound_rps,
         "gap": res.gap, "lp_vs_grid": res.lambda_rps / g - 1 if g > 0 else 0.0,
         "non_threshold_gain": res.lambda_rps / t_rps - 1 if t_rps > 0 else 0.0,
         "lp_is_threshold": res.is_threshold, "binding": binding,
         "remote_ranges": _ranges(bins.length, res.remote_fraction > 0.5)}
    v["threshold_optimal"] = v["non_threshold_gain"] <= hi and v["lp_vs_grid"] <= hi
    return Verification(**v, explanation=_explain(v, bins), lp=res, grid_plan=grid_plan)
