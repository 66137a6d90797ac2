"""The general formulation: per-length-bin routing and instance counts as a linear program (cvxpy).

Variables: for each length bin ``b`` the request rates ``r_b`` prefilled remotely and ``s_b`` locally
(requests/s, ``r_b + s_b = Lambda * w_b``), the system rate ``Lambda``, and optionally the instance
counts and the link bandwidth. Constraints are the stage capacities of `prfaas_plan.analytic.throughput` in the
distribution-exact mode (bin costs are the exact expectations of prefill time and KV bytes within
each bin). Three problems share them:

- `max_throughput`: fixed hardware, maximize ``Lambda`` (the local prefill/decode split may be a
  variable, integer by a mixed-integer solve with HiGHS);
- `min_cost`: a target rate, minimize the hardware price (integer counts);
- `min_link`: the smallest link goodput keeping ``Lambda`` within a fraction of its optimum.

Each reports whether the optimal routing is a pure threshold (remote fraction non-decreasing in
length, at most one split bin), which tests the paper's threshold policy.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from .. import arithmetic as A
from ..errors import PlanError
from ..layout import Layout
from .throughput import LengthGrid, PerfInputs, busy_s


@dataclass(frozen=True)
class Bins:
    """A length distribution aggregated into bins with exact per-bin expectations.

    ``weight`` is each bin's probability; ``remote_s``/``local_s`` are E[T | bin] (seconds),
    ``kv_bytes`` is E[S_kv | bin] (bytes), ``length`` is E[L | bin] (tokens).
    """

    length: np.ndarray
    weight: np.ndarray
    remote_s: np.ndarray
    local_s: np.ndarray
    kv_bytes: np.ndarray


def make_bins(grid: LengthGrid, perf: PerfInputs, n_bins: int = 128, site: str | None = None) -> Bins:
    """Aggregate the grid into ``n_bins`` bins of (about) equal probability."""
    l, w = grid.lengths, grid.weights
    sp = perf.sites[site or next(iter(perf.sites))]
    t_local = busy_s(sp.prefill, l)
    t_remote = (busy_s(perf.remote_prefill, l) if perf.remote_prefill is not None
                else np.full_like(l, np.inf))
    kv = A.s_kv_at(perf.model, l)
    edges = np.searchsorted(np.cumsum(w), np.linspace(0, 1, n_bins + 1)[1:-1])
    labels = np.zeros(len(l), dtype=int)
    labels[np.unique(edges[edges < len(l)])] = 1
    labels = np.cumsum(labels)
    nb = labels[-1] + 1
    weight = np.bincount(labels, w, nb)
    keep = weight > 0
    agg = lambda v: (np.bincount(labels, w * v, nb)[keep] / weight[keep])  # noqa: E731
    return Bins(agg(l), weight[keep], agg(t_remote), agg(t_local), agg(kv))


@dataclass(frozen=True)
class LPResult:
    """Solution of one of the programs. Rates in requests/s, counts in instances, link in bit/s."""

    status: str
    lambda_rps: float
    remote_fraction: np.ndarray       # per bin, share of the bin prefilled remotely
    bin_length: np.ndarray
    n_remote: float
    n_prefill: float
    n_decode: float
    link_goodput_bps: float
    cost_usd: float
    is_threshold: bool
    threshold_tokens: float           # the implied threshold when is_threshold, else nan
    egress_bps: float = 0.0           # mean KV traffic over the link at lambda_rps, bit/s
    reference_rps: float = float("nan")  # min_link: the unconstrained-link optimum it keeps a share of
    sites: tuple = ()                 # per-site results of a multi-site layout


def _threshold_shape(x: np.ndarray, lengths: np.ndarray, weight: np.ndarray, tol: float = 1e-4):
    """Is ``x`` (remote fraction by bin, ascending length) a threshold policy? Bins of negligible
    weight are ignored. Returns (is_threshold, threshold_tokens)."""
    keep = weight > 1e-9
    x, lengths = np.clip(x[keep], 0, 1), lengths[keep]
    monotone = bool(np.all(np.diff(x) >= -tol))
    fractional = np.flatnonzero((x > tol) & (x < 1 - tol))
    ok = monotone and len(fractional) <= 1
    if not ok:
        return False, float("nan")
    if np.all(x <= tol):
        return True, float("inf")
    first = int(np.argmax(x > tol))
    return True, float(lengths[first - 1]) if first > 0 else 0.0


@contextmanager
def _quiet_stdout():
    """HiGHS prints a banner from C++ straight to file descriptor 1; keep it out of our reports."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _solve(problem) -> str:
    """Solve with HiGHS and return cvxpy's status; ``solver_failed`` when HiGHS ends without any
    solution (status unknown, e.g. on absurd magnitudes), so callers report it as they do infeasibility."""
    import cvxpy as cp

    try:
        with _quiet_stdout():
            problem.solve(solver=cp.HIGHS)
    except cp.error.SolverError as exc:  # pragma: no cover - solver installation problem
        raise PlanError(f"LP solver failed: {exc}") from None
    except ValueError as exc:  # cvxpy cannot unpack a solution HiGHS did not produce
        if "invalid solution" not in str(exc):
            raise
        return "solver_failed"
    return problem.status


def _common(bins: Bins):
    import cvxpy as cp

    nb = len(bins.weight)
    lam = cp.Variable(nonneg=True)
    r = cp.Variable(nb, nonneg=True)
    s = cp.Variable(nb, nonneg=True)
    cons = [r + s == lam * bins.weight]
    return lam, r, s, cons


def max_throughput(layout: Layout, bins: Bins | dict[str, Bins], perf: PerfInputs, free_split: bool = True,
                   integer: bool = True) -> LPResult:
    """Maximize the total rate over the layout's PD sites (several sites share the remote prefill site,
    each over its own link); each site's local split is a variable when ``free_split``.

    ``bins`` may be one `Bins` (every site alike) or one per site name (sites with different chips).
    The result's top-level fields describe the first site plus the total rate; ``sites`` has one
    result per site.
    """
    import cvxpy as cp

    n_r = layout.remote.instances if layout.remote is not None else 0
    remote_load = 0
    cons: list = []
    per_site = []
    for site in layout.pd_sites:
        b = bins[site.name] if isinstance(bins, dict) else bins
        dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
        lam, r, s, site_cons = _common(b)
        cons += site_cons
        goodput = site.link.goodput_bps if site.link is not None else 0.0
        if free_split:
            n_p = cp.Variable(integer=integer, nonneg=True)
            cons.append(n_p <= site.instances)
        else:
            n_p = site.prefill
        n_d = site.instances - n_p
        if n_r == 0 or goodput == 0:
            cons.append(r == 0)
        else:
            remote_load = remote_load + np.where(np.isfinite(b.remote_s), b.remote_s, 0.0) @ r
            cons.append((b.kv_bytes * 8.0) @ r <= goodput)
        cons += [b.local_s @ s <= n_p, lam <= n_d * dec_rps]
        if layout.threshold is not None:  # a pinned threshold routes by length, not by the program
            remote_bins = b.length > layout.threshold
            if remote_bins.any():
                cons.append(s[np.flatnonzero(remote_bins)] == 0)
            if (~remote_bins).any():
                cons.append(r[np.flatnonzero(~remote_bins)] == 0)
        per_site.append((lam, r, b, n_p, n_d, goodput))
    if n_r > 0 and not isinstance(remote_load, int):
        cons.append(remote_load <= n_r)
    total = sum(p[0] for p in per_site)
    prob = cp.Problem(cp.Maximize(total), cons)
    status = _solve(prob)
    if status not in ("optimal", "optimal_inaccurate"):
        raise PlanError(f"layout {layout.name!r}: no feasible routing ({status})")
    sites = tuple(_result(status, lam, r, b, n_r, n_p, n_d, g, 0.0) for lam, r, b, n_p, n_d, g in per_site)
    return replace(sites[0], lambda_rps=_value(total), sites=sites)


def _value(v) -> float:
    return float(v.value) if hasattr(v, "value") else float(v)


def _result(status, lam, r, bins, n_r, n_p, n_d, goodput, cost) -> LPResult:
    lam_v = _value(lam)
    x = np.divide(np.asarray(r.value, dtype=float), lam_v * bins.weight,
                  out=np.zeros_like(bins.weight), where=lam_v * bins.weight > 0)
    is_t, t = _threshold_shape(x, bins.length, bins.weight)
    egress = float((bins.kv_bytes * 8.0) @ np.asarray(r.value, dtype=float))
    return LPResult(status, lam_v, x, bins.length, _value(n_r), _value(n_p), _value(n_d), _value(goodput),
                    _value(cost), is_t, t, egress)


def min_cost(layout: Layout, bins: Bins, perf: PerfInputs, target_rps: float, remote_price: float,
             local_price: float, max_remote: int | None = None, max_local: int | None = None) -> LPResult:
    """Cheapest integer counts (remote instances, local prefill, local decode) serving ``target_rps``.

    Prices are per instance (any unit, e.g. USD); ``max_*`` cap the counts (None: uncapped).
    """
    import cvxpy as cp

    site = layout.pd_sites[0]
    dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
    lam, r, s, cons = _common(bins)
    cons.append(lam == target_rps)
    n_r = cp.Variable(integer=True, nonneg=True)
    n_p = cp.Variable(integer=True, nonneg=True)
    n_d = cp.Variable(integer=True, nonneg=True)
    goodput = site.link.goodput_bps if site.link is not None else 0.0
    remote_s = np.where(np.isfinite(bins.remote_s), bins.remote_s, 0.0)
    if layout.remote is None or goodput == 0:
        cons += [r == 0, n_r == 0]
    else:
        cons += [remote_s @ r <= n_r, (bins.kv_bytes * 8.0) @ r <= goodput]
    cons += [bins.local_s @ s <= n_p, target_rps <= n_d * dec_rps]
    if max_remote is not None:
        cons.append(n_r <= max_remote)
    if max_local is not None:
        cons.append(n_p + n_d <= max_local)
    cost = remote_price * n_r + local_price * (n_p + n_d)
    prob = cp.Problem(cp.Minimize(cost), cons)
    status = _solve(prob)
    if status not in ("optimal", "optimal_inaccurate"):
        raise PlanError(f"target rate {target_rps:g} req/s cannot be served by layout {layout.name!r} "
                        f"within the given limits ({status})")
    return _result(status, lam, r, bins, n_r, n_p, n_d, goodput, cost)


def min_link(layout: Layout, bins: Bins, perf: PerfInputs, keep_fraction: float = 0.95) -> LPResult:
    """Smallest link goodput (bit/s) keeping Lambda >= ``keep_fraction`` of its unconstrained-link
    optimum, for the layout's hardware with a free local split (continuous relaxation)."""
    import cvxpy as cp

    if layout.remote is None:
        raise PlanError(f"layout {layout.name!r} has no remote site: there is no link to size")
    site = layout.pd_sites[0]
    dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
    remote_s = np.where(np.isfinite(bins.remote_s), bins.remote_s, 0.0)

    def program(link_var):
        lam, r, s, cons = _common(bins)
        n_p = cp.Variable(nonneg=True)
        cons += [n_p <= site.instances, remote_s @ r <= layout.remote.instances,
                 bins.local_s @ s <= n_p, lam <= (site.instances - n_p) * dec_rps]
        if link_var is not None:
            cons.append((bins.kv_bytes * 8.0) @ r <= link_var)
        return lam, r, n_p, cons

    lam, r, n_p, cons = program(None)
    best = cp.Problem(cp.Maximize(lam), cons)
    status = _solve(best)
    if status not in ("optimal", "optimal_inaccurate"):
        raise PlanError(f"layout {layout.name!r}: no throughput optimum to size the link against ({status})")
    target = keep_fraction * float(lam.value)
    g = cp.Variable(nonneg=True)
    lam2, r2, n_p2, cons2 = program(g)
    cons2.append(lam2 >= target)
    prob = cp.Problem(cp.Minimize(g), cons2)
    status = _solve(prob)
    if status not in ("optimal", "optimal_inaccurate"):
        raise PlanError(f"layout {layout.name!r}: no smallest link found ({status})")
    sized = _result(status, lam2, r2, bins, layout.remote.instances, n_p2, site.instances - _value(n_p2), g, 0.0)
    return replace(sized, reference_rps=float(lam.value))
