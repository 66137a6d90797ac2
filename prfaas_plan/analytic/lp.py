"""The general formulation: per-length-bin routing and instance counts as linear programs (cvxpy).

Variables: for each length bin ``b`` the request rate ``r_b`` prefilled remotely (requests/s; the
rest of the bin, ``Lambda * w_b - r_b``, is prefilled locally), the system rate ``Lambda``, and
optionally the instance counts. Constraints are the stage capacities of
`prfaas_plan.analytic.throughput` in the distribution-exact mode (bin costs are the exact
expectations of prefill time and KV bytes within each bin). Three problems share them:

- `max_throughput`: fixed hardware, maximize ``Lambda`` (the local prefill/decode split may be a
  variable, integer by a mixed-integer solve);
- `min_cost`: a target rate, minimize the hardware price (integer counts);
- `min_link`: the smallest link goodput keeping ``Lambda`` within a fraction of its optimum.

Every capacity row is written as a *utilization* (load / capacity <= 1, or instance-seconds per second
against an instance count), so all coefficients are of order one. Written in raw units the link row
holds bits (1e8-1e10 per request) against a goodput of ~1e9 bit/s: HiGHS's absolute feasibility
tolerance (1e-6) is then 1e-15 of the row, the MIP rejects its own optimum over rounding noise and
ends "optimal" at the trivial zero (docs/methods.md, section 4). The programs are stated in cvxpy
in matrix form (one variable vector, sparse rows; see `_Program.solve`) and solved by HiGHS through
cvxpy's SCIPY interface, which scipy's ``disp`` option keeps silent. cvxpy is imported only when a
program is solved, so a plain ``size`` never loads it.

Each result says whether the optimal routing is a pure threshold (remote fraction non-decreasing in
length, at most one split bin), which tests the paper's threshold policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..errors import InternalError, PlanError
from ..layout import Layout
from .throughput import LengthGrid, PerfInputs, offloads

MIP_TIME_LIMIT_S = 3.0      # integer solves stop here and report the best answer with its proven gap
MIP_REL_GAP = 1e-4          # HiGHS's default relative optimality gap for integer programs
MIP_MAX_SITES = 8           # larger layouts stop at the priced rounding and its proven gap


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


def bin_labels(grid: LengthGrid, n_bins: int = 128) -> np.ndarray:
    """The bin of each grid point as `make_bins` forms them, numbered 0.. among the bins of positive
    weight (the index into a `Bins`' arrays); grid points of zero weight in an empty bin get -1."""
    raw = _raw_labels(grid.weights, n_bins)
    weight = np.bincount(raw, grid.weights, raw[-1] + 1)
    keep = weight > 0
    return np.where(keep[raw], np.cumsum(keep)[raw] - 1, -1)


def _raw_labels(w: np.ndarray, n_bins: int) -> np.ndarray:
    edges = np.searchsorted(np.cumsum(w), np.linspace(0, 1, n_bins + 1)[1:-1])
    labels = np.zeros(len(w), dtype=int)
    labels[np.unique(edges[edges < len(w)])] = 1
    return np.cumsum(labels)


def make_bins(grid: LengthGrid, perf: PerfInputs, n_bins: int = 128, site: str | None = None) -> Bins:
    """Aggregate the grid into ``n_bins`` bins of (about) equal probability (`bin_labels` says which)."""
    l = grid.lengths
    sp = perf.sites[site or next(iter(perf.sites))]
    t_remote = (grid.busy_at_lengths(perf.remote_prefill) if perf.remote_prefill is not None
                else np.full_like(l, np.inf))
    return bins_of(grid, t_remote, grid.busy_at_lengths(sp.prefill), perf.transfer_bytes(l, site), n_bins)


def bins_of(grid: LengthGrid, remote_s: np.ndarray, local_s: np.ndarray, kv_bytes: np.ndarray,
            n_bins: int = 128) -> Bins:
    """`Bins` of per-grid-length remote and local prefill seconds and KV bytes (inf remote seconds: no
    remote site), aggregated as `make_bins` does; callers that vary one input keep the others' arrays."""
    l, w = grid.lengths, grid.weights
    labels = _raw_labels(w, n_bins)
    nb = labels[-1] + 1
    weight = np.bincount(labels, w, nb)
    keep = weight > 0
    agg = lambda v: (np.bincount(labels, w * v, nb)[keep] / weight[keep])
    return Bins(agg(l), weight[keep], agg(remote_s), agg(local_s), agg(kv_bytes))


@dataclass(frozen=True)
class LPResult:
    """Solution of one of the programs. Rates in requests/s, counts in instances, link in bit/s.

    ``bound_rps`` is a proven upper bound on the optimum of `max_throughput` (the solver's dual bound,
    equal to ``lambda_rps`` for a continuous program); ``gap`` is ``1 - lambda_rps / bound_rps``.
    """

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
    bound_rps: float = float("nan")
    gap: float = 0.0
    method: str = ""                  # how the integer answer was reached (for the report)
    routed_rps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # r_b, requests/s per bin


class _Solved(NamedTuple):
    x: np.ndarray | None      # None when HiGHS ended without a solution
    value: float
    bound: float              # proven bound on the optimum (the value itself for a continuous program)
    status: str
    duals: np.ndarray         # continuous programs: d(value)/d(upper side) per row (nan elsewhere)


def _threshold_shape(x: np.ndarray, lengths: np.ndarray, weight: np.ndarray, tol: float = 1e-4):
    """Is ``x`` (remote fraction by bin, ascending length) a threshold policy? Bins of negligible
    weight are ignored, and a share counts as none below ``tol`` or a hundredth of the largest share, whichever
    is smaller (a fixed link at a huge request rate offloads a sliver of the longest bin). Returns
    (is_threshold, threshold_tokens)."""
    keep = weight > 1e-9
    x, lengths = np.clip(x[keep], 0, 1), lengths[keep]
    if x.size and 0 < x.max() < 1:
        tol = min(tol, 0.01 * float(x.max()))
    monotone = bool(np.all(np.diff(x) >= -tol))
    fractional = np.flatnonzero((x > tol) & (x < 1 - tol))
    ok = monotone and len(fractional) <= 1
    if not ok:
        return False, float("nan")
    if np.all(x <= tol):
        return True, float("inf")
    first = int(np.argmax(x > tol))
    return True, float(lengths[first - 1]) if first > 0 else 0.0


# ----------------------------------------------------------------------------------------------------
# A small sparse program builder, handed to cvxpy in matrix form


class _Program:
    """Variables with bounds and integrality, sparse rows ``lo <= a.x <= hi``, one linear objective."""

    def __init__(self) -> None:
        self.lb: list[np.ndarray] = []
        self.ub: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n = 0
        self.rows: list[tuple[np.ndarray, np.ndarray, float, float]] = []

    def var(self, size: int = 1, lb: float = 0.0, ub: float = math.inf, integer: bool = False) -> np.ndarray:
        idx = np.arange(self.n, self.n + size)
        self.n += size
        self.lb.append(np.full(size, lb, dtype=float))
        self.ub.append(np.full(size, ub, dtype=float))
        self.integer.append(np.full(size, int(integer)))
        return idx

    def bound(self, idx, lb=None, ub=None) -> None:
        """Tighten variable bounds (after all variables are declared)."""
        lbs, ubs = np.concatenate(self.lb), np.concatenate(self.ub)
        if lb is not None:
            lbs[idx] = lb
        if ub is not None:
            ubs[idx] = ub
        self.lb, self.ub = [lbs], [ubs]

    def row(self, idx, coef, lo: float = -math.inf, hi: float = math.inf) -> None:
        self.rows.append((np.asarray(idx, dtype=int).ravel(), np.asarray(coef, dtype=float).ravel(), lo, hi))

    def solve(self, objective: list, maximize: bool, time_limit_s: float | None = None,
              mip_rel_gap: float = MIP_REL_GAP) -> _Solved:
        """Solve for ``objective``, a list of (variable indices, coefficients), in cvxpy.

        The program is handed over in matrix form: one variable vector with its bounds and integrality,
        and the rows as three sparse blocks (``A x <= hi``, ``A x >= lo``, ``A x == b``), so cvxpy
        compiles a handful of constraints however many rows there are. cvxpy's SCIPY interface runs
        HiGHS (`scipy.optimize.linprog` for a continuous program, which gives the rows' duals, and
        `scipy.optimize.milp` for an integer one) and is silent through scipy's ``disp`` option.
        """
        import warnings

        import cvxpy as cp
        from scipy.sparse import csr_matrix

        c = np.zeros(self.n)
        for idx, coef in objective:
            c[idx] += coef
        lo = np.array([r[2] for r in self.rows], dtype=float)
        hi = np.array([r[3] for r in self.rows], dtype=float)
        indptr = np.concatenate([[0], np.cumsum([len(r[0]) for r in self.rows])])
        a = csr_matrix((np.concatenate([r[1] for r in self.rows]), np.concatenate([r[0] for r in self.rows]),
                        indptr), shape=(len(self.rows), self.n))
        lb, ub = np.concatenate(self.lb), np.concatenate(self.ub)
        integer_idx = np.flatnonzero(np.concatenate(self.integer))
        mip = len(integer_idx) > 0
        x = cp.Variable(self.n, bounds=[lb, ub], integer=(integer_idx,) if mip else False)
        eq = lo == hi
        upper = ~eq & np.isfinite(hi)
        lower = ~eq & np.isfinite(lo)
        blocks = {}
        if upper.any():
            blocks["upper"] = a[upper] @ x <= hi[upper]
        if lower.any():
            blocks["lower"] = a[lower] @ x >= lo[lower]
        if eq.any():
            blocks["equal"] = a[eq] @ x == hi[eq]
        problem = cp.Problem(cp.Maximize(c @ x) if maximize else cp.Minimize(c @ x), list(blocks.values()))
        options = {"disp": False}
        if mip:
            options["mip_rel_gap"] = mip_rel_gap
        if time_limit_s is not None:
            options["time_limit"] = time_limit_s
        duals = np.full(len(self.rows), np.nan)
        try:
            with warnings.catch_warnings():  # a time limit's answer is "inaccurate"; its status says so
                warnings.simplefilter("ignore")
                problem.solve(solver=cp.SCIPY, scipy_options=options)
        except cp.SolverError:
            return _Solved(None, math.nan, math.nan, "solver_failed", duals)
        status = {cp.OPTIMAL: "optimal", cp.OPTIMAL_INACCURATE: "time_limit", cp.INFEASIBLE: "infeasible",
                  cp.UNBOUNDED: "unbounded"}.get(problem.status, "solver_failed")
        if x.value is None:
            return _Solved(None, math.nan, math.nan, status, duals)
        value = float(problem.value)
        if not mip and "upper" in blocks:  # d(value)/d(hi): >= 0 when maximizing, <= 0 when minimizing
            duals[np.flatnonzero(upper)] = (1.0 if maximize else -1.0) * np.asarray(blocks["upper"].dual_value)
        bound = value
        if mip:  # HiGHS's dual bound on the program cvxpy handed it (a minimization: -c when maximizing)
            dual_bound = (problem.solver_stats.extra_stats or {}).get("mip_dual_bound")
            bound = math.nan if dual_bound is None else (-1.0 if maximize else 1.0) * float(dual_bound)
        return _Solved(np.asarray(x.value), value, bound, status, duals)


def _no_solution(what: str, status: str) -> InternalError:
    return InternalError(f"{what}: HiGHS ended without a solution (status {status}) on a program that "
                         "always has one")


# ----------------------------------------------------------------------------------------------------
# The programs


@dataclass(frozen=True)
class _SiteVars:
    lam: int
    r: np.ndarray
    n_p: int | None        # index of the split variable, None when the split is fixed
    bins: Bins
    n_total: int
    n_prefill: float       # fixed split (when n_p is None)
    goodput_bps: float


def _site_rows(prog: _Program, bins: Bins, dec_rps: float, n_total: int, goodput_bps: float, remote: bool,
               n_p_var: int | None, n_prefill_fixed: float, threshold: float | None) -> tuple[int, np.ndarray]:
    """Rows of one PD site; returns (lambda index, r indices). Local prefill is in instance-seconds per
    second against the prefill count, decode as a share of the decode pool, the link as a share of
    its goodput (``goodput_bps`` inf: no link row, 0 or no ``remote``: nothing routed remotely)."""
    nb = len(bins.weight)
    lam = int(prog.var()[0])
    r = prog.var(nb)
    for b in range(nb):  # the remote share of a bin is at most the bin: r_b <= Lambda * w_b
        prog.row([r[b], lam], [1.0, -bins.weight[b]], hi=0.0)
    # local prefill: sum_b T_l,b (Lambda w_b - r_b) <= N_p
    local_idx = [lam, *r]
    local_coef = [float(bins.local_s @ bins.weight), *(-bins.local_s)]
    if n_p_var is None:
        prog.row(local_idx, local_coef, hi=n_prefill_fixed)
    else:
        prog.row(local_idx + [n_p_var], local_coef + [-1.0], hi=0.0)
    # decode: Lambda / (decode req/s per instance) + N_p <= N_total
    if n_p_var is None:
        prog.row([lam], [1.0 / dec_rps], hi=n_total - n_prefill_fixed)
    else:
        prog.row([lam, n_p_var], [1.0 / dec_rps, 1.0], hi=float(n_total))
    if not remote or goodput_bps <= 0:
        prog.bound(r, ub=0.0)
    elif math.isfinite(goodput_bps):
        prog.row(r, bins.kv_bytes * 8.0 / goodput_bps, hi=1.0)
    if threshold is not None:  # a pinned threshold routes by length, not by the program
        short = np.flatnonzero(bins.length <= threshold)
        prog.bound(r[short], ub=0.0)
        for b in np.flatnonzero(bins.length > threshold):
            prog.row([r[b], lam], [1.0, -bins.weight[b]], lo=0.0, hi=0.0)
    return lam, r


def _remote_rows(prog: _Program, site_vars, n_remote: int) -> None:
    """The remote prefill site shared by every PD site, as a utilization: sum T_r,b r_b / N_r <= 1."""
    idx = [v.r for v in site_vars]
    coef = [np.where(np.isfinite(v.bins.remote_s), v.bins.remote_s, 0.0) / n_remote for v in site_vars]
    prog.row(np.concatenate(idx), np.concatenate(coef), hi=1.0)


def _build_max(layout: Layout, bins, perf: PerfInputs, free_split: bool, integer: bool, fixed_splits=None):
    prog = _Program()
    n_r = layout.remote.instances if layout.remote is not None else 0
    site_vars = []
    for i, site in enumerate(layout.pd_sites):
        b = bins[site.name] if isinstance(bins, dict) else bins
        dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
        goodput = site.link.planned_bps if site.link is not None else 0.0
        n_p = None
        fixed = site.prefill if fixed_splits is None else fixed_splits[i]
        if free_split and fixed_splits is None:
            n_p = int(prog.var(1, 0.0, float(site.instances), integer=integer)[0])
        lam, r = _site_rows(prog, b, dec_rps, site.instances, goodput, n_r > 0, n_p, fixed, layout.threshold)
        site_vars.append(_SiteVars(lam, r, n_p, b, site.instances, fixed, goodput))
    remote_row = None
    if n_r > 0:
        _remote_rows(prog, site_vars, n_r)
        remote_row = len(prog.rows) - 1
    return prog, site_vars, remote_row


def _site_result(x, v: _SiteVars, n_remote, status) -> LPResult:
    lam = float(x[v.lam])
    r = np.clip(x[v.r], 0.0, None)
    n_p = float(np.round(x[v.n_p], 9)) if v.n_p is not None else float(v.n_prefill)
    frac = np.divide(r, lam * v.bins.weight, out=np.zeros_like(r), where=lam * v.bins.weight > 0)
    is_t, t = _threshold_shape(frac, v.bins.length, v.bins.weight)
    egress = float((v.bins.kv_bytes * 8.0) @ r)
    return LPResult(status, lam, frac, v.bins.length, float(n_remote), n_p, v.n_total - n_p, v.goodput_bps, 0.0,
                    is_t, t, egress, routed_rps=r)


def _solve_max(layout, bins, perf, free_split, integer, fixed_splits=None, time_limit_s=None):
    """Solve `_build_max`; returns (site results, total rate, proven bound, status, remote price), the
    price being the value (req/s) of the whole remote site's capacity at the margin (continuous only)."""
    prog, site_vars, remote_row = _build_max(layout, bins, perf, free_split, integer, fixed_splits)
    sol = prog.solve([([v.lam for v in site_vars], 1.0)], True, time_limit_s)
    if sol.x is None:
        raise _no_solution(f"layout {layout.name!r}: throughput program", sol.status)
    n_r = layout.remote.instances if layout.remote is not None else 0
    sites = tuple(_site_result(sol.x, v, n_r, sol.status) for v in site_vars)
    price = float(sol.duals[remote_row]) if remote_row is not None and np.isfinite(sol.duals[remote_row]) else 0.0
    return sites, sol.value, sol.bound, sol.status, max(price, 0.0)


def _lagrangian_splits(layout: Layout, bins, perf: PerfInputs, relaxed: tuple, price: float):
    """Integer splits and a proven bound from the relaxation's price on the shared remote site.

    With the remote row priced at ``price`` (req/s per unit of remote utilization) the sites separate:
    site ``i`` maximizes ``Lambda_i - price * U_i`` (``U_i`` its share of the remote site's capacity)
    for its own split. That value is concave in the split (an LP's optimum in its right-hand side) and
    the relaxation's split maximizes it, so the best integer split is the relaxed one rounded down or
    up. Returns (splits, bound) with ``bound = price + sum_i max(...)`` >= the integer optimum (weak
    duality)."""
    n_r = layout.remote.instances if layout.remote is not None else 0
    splits, bound = [], price if n_r > 0 else 0.0
    for site, rs in zip(layout.pd_sites, relaxed):
        b = bins[site.name] if isinstance(bins, dict) else bins
        dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
        remote_s = np.where(np.isfinite(b.remote_s), b.remote_s, 0.0)
        goodput = site.link.planned_bps if site.link is not None else 0.0
        lo, hi = math.floor(rs.n_prefill + 1e-9), math.ceil(rs.n_prefill - 1e-9)
        best = (-math.inf, lo)
        for n_p in sorted({lo, hi}):
            prog = _Program()
            lam, r = _site_rows(prog, b, dec_rps, site.instances, goodput, n_r > 0, None, float(n_p),
                                layout.threshold)
            objective = [(lam, 1.0)] + ([(r, -price * remote_s / n_r)] if n_r > 0 else [])
            sol = prog.solve(objective, True)
            if sol.x is None:
                raise _no_solution(f"layout {layout.name!r}: site {site.name!r} split", sol.status)
            best = max(best, (sol.value, n_p))
        bound += best[0]
        splits.append(best[1])
    return splits, bound


def max_throughput(layout: Layout, bins: Bins | dict[str, Bins], perf: PerfInputs, free_split: bool = True,
                   integer: bool = True, time_limit_s: float = MIP_TIME_LIMIT_S,
                   mip_max_sites: int = MIP_MAX_SITES) -> LPResult:
    """Maximize the total rate over the layout's PD sites (several sites share the remote prefill site,
    each over its own link); each site's local split is a variable when ``free_split``.

    ``bins`` may be one `Bins` (every site alike) or one per site name (sites with different chips).
    The result's top-level fields describe the first site plus the total rate; ``sites`` has one
    result per site.

    With integer splits: the continuous relaxation (an upper bound and a price on the remote site),
    integer splits and a Lagrangian bound from that price (`_lagrangian_splits`), the routing of those
    splits (a feasible answer); then, for layouts of at most ``mip_max_sites`` sites whose gap is still
    open, the mixed-integer program within ``time_limit_s``. The best feasible answer is returned with
    ``bound_rps`` the tightest proven bound. An integer answer above a bound, or a MIP reported optimal
    below the feasible answer, is an `InternalError`.
    """
    what = f"layout {layout.name!r}"
    relaxed, relaxed_value, _, _, price = _solve_max(layout, bins, perf, free_split, False)
    if not (free_split and integer):
        return replace(relaxed[0], lambda_rps=relaxed_value, sites=relaxed, bound_rps=relaxed_value, gap=0.0,
                       method="linear program")
    splits, lagrangian = _lagrangian_splits(layout, bins, perf, relaxed, price)
    sites, value, _, _, _ = _solve_max(layout, bins, perf, True, True, splits)
    tol = 1e-6 * max(relaxed_value, 1.0)
    bound = min(relaxed_value, lagrangian)
    method = "relaxation, priced rounding and its routing (linear programs, HiGHS)"
    if value > bound + tol:
        raise InternalError(f"{what}: a feasible plan ({value:.6g} req/s) exceeds the proven bound ({bound:.6g} "
                            f"req/s: relaxation {relaxed_value:.6g}, Lagrangian {lagrangian:.6g})")
    if 1.0 - value / max(bound, 1e-300) > MIP_REL_GAP and len(layout.pd_sites) <= mip_max_sites:
        mip_sites, mip_value, mip_bound, status, _ = _solve_max(layout, bins, perf, True, True,
                                                                time_limit_s=time_limit_s)
        if mip_value > bound + tol:
            raise InternalError(f"{what}: the integer program ({mip_value:.6g} req/s) exceeds the proven bound "
                                f"({bound:.6g} req/s)")
        if status == "optimal" and mip_value < value - tol:
            raise InternalError(f"{what}: HiGHS reports an optimal integer plan of {mip_value:.6g} req/s below a "
                                f"feasible {value:.6g} req/s")
        if mip_value > value:
            sites, value = mip_sites, mip_value
            method = "mixed-integer program (HiGHS)" + (" at its time limit" if status == "time_limit" else "")
        if math.isfinite(mip_bound):
            bound = min(bound, mip_bound)
    bound = max(bound, value)
    gap = 1.0 - value / bound if bound > 0 else 0.0
    return replace(sites[0], lambda_rps=value, sites=sites, bound_rps=bound, gap=gap, method=method)


def min_cost(layout: Layout, bins: Bins, perf: PerfInputs, target_rps: float, remote_price: float,
             local_price: float, max_remote: int | None = None, max_local: int | None = None) -> LPResult:
    """Cheapest integer counts (remote instances, local prefill, local decode) serving ``target_rps``.

    Prices are per instance (any unit, e.g. USD); ``max_*`` cap the counts (None: uncapped).
    Costs are optimized in units of one local instance's price so the objective is of order one.
    """
    site = layout.pd_sites[0]
    dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)
    nb = len(bins.weight)
    prog = _Program()
    r = prog.var(nb)
    n_r = int(prog.var(1, 0.0, math.inf if max_remote is None else float(max_remote), integer=True)[0])
    n_p = int(prog.var(1, integer=True)[0])
    n_d = int(prog.var(1, integer=True)[0])
    goodput = site.link.planned_bps if site.link is not None else 0.0
    prog.bound(r, ub=bins.weight * target_rps)      # the remote share of a bin is at most the bin
    if layout.remote is None or goodput == 0:  # Layout.can_offload, with the remote count free here
        prog.bound(r, ub=0.0)
        prog.bound([n_r], ub=0.0)
    else:
        remote_s = np.where(np.isfinite(bins.remote_s), bins.remote_s, 0.0)
        prog.row([*r, n_r], [*remote_s, -1.0], hi=0.0)
        prog.row(r, bins.kv_bytes * 8.0 / goodput, hi=1.0)
    # local prefill: sum_b T_l,b (target w_b - r_b) <= N_p
    prog.row([*r, n_p], [*(-bins.local_s), -1.0], hi=-float(bins.local_s @ bins.weight) * target_rps)
    prog.row([n_d], [1.0], lo=math.ceil(target_rps / dec_rps * (1 - 1e-12)))
    if max_local is not None:
        prog.row([n_p, n_d], [1.0, 1.0], hi=float(max_local))
    scale = local_price if local_price > 0 else 1.0
    x, value, _, status, _ = prog.solve([(n_r, remote_price / scale), ([n_p, n_d], local_price / scale)], False,
                                        MIP_TIME_LIMIT_S)
    if status == "infeasible":
        raise PlanError(f"target rate {target_rps:g} req/s cannot be served by layout {layout.name!r} "
                        f"within the given limits ({status})")
    if x is None:
        raise _no_solution(f"layout {layout.name!r}: cost program", status)
    rr = np.clip(x[r], 0.0, None)
    frac = np.divide(rr, target_rps * bins.weight, out=np.zeros_like(rr), where=bins.weight > 0)
    is_t, t = _threshold_shape(frac, bins.length, bins.weight)
    return LPResult(status, float(target_rps), frac, bins.length, float(round(x[n_r])), float(round(x[n_p])),
                    float(round(x[n_d])), goodput, value * scale, is_t, t, float((bins.kv_bytes * 8.0) @ rr),
                    routed_rps=rr)


def min_link(layout: Layout, bins: Bins, perf: PerfInputs, keep_fraction: float = 0.95) -> LPResult:
    """Smallest link goodput (bit/s) keeping Lambda >= ``keep_fraction`` of its unconstrained-link
    optimum, for the layout's hardware with a free local split (continuous relaxation)."""
    if not offloads(layout, perf):
        raise PlanError(f"layout {layout.name!r} has no remote site: there is no link to size")
    site = layout.pd_sites[0]
    dec_rps = perf.sites[site.name].decode.requests_per_s(perf.output_tokens)

    def program():
        prog = _Program()
        n_p = int(prog.var(1, 0.0, float(site.instances))[0])
        lam, r = _site_rows(prog, bins, dec_rps, site.instances, math.inf, True, n_p, 0.0, layout.threshold)
        v = _SiteVars(lam, r, n_p, bins, site.instances, 0.0, math.inf)
        _remote_rows(prog, [v], layout.remote.instances)
        return prog, v

    prog, v = program()
    x, best, _, status, _ = prog.solve([(v.lam, 1.0)], True)
    if x is None:
        raise _no_solution(f"layout {layout.name!r}: link sizing reference", status)
    # The smallest link load (Gbit/s, order one) keeping Lambda >= keep * best.
    prog, v = program()
    prog.row([v.lam], [1.0], lo=keep_fraction * best)
    x, g_gbps, _, status, _ = prog.solve([(v.r, bins.kv_bytes * 8.0 / 1e9)], False)
    if x is None:
        raise _no_solution(f"layout {layout.name!r}: link sizing", status)
    sized = _site_result(x, replace(v, goodput_bps=g_gbps * 1e9), layout.remote.instances, status)
    return replace(sized, reference_rps=float(best), bound_rps=sized.lambda_rps)


TIE_REL = 1e-9   # `prefer_threshold` keeps every site's rate within this share of the optimum's


def prefer_threshold(layout: Layout, bins: Bins | dict[str, Bins], perf: PerfInputs, res: LPResult) -> LPResult:
    """Among the routings reaching ``res``'s per-site rates with its splits, the one closest to threshold
    routing: the remote rate of each bin is penalized by how short the bin is (penalty ``1 - rank/bins``),
    so ties -- a site whose remote share does not bind lets the program pick any of many vertices, some
    sending alternate bins each way -- resolve to the longest requests going remote. The rates, splits and
    the proven bound are ``res``'s; only ``routed_rps``/``remote_fraction`` (and what follows from them) may
    change. A routing the optimum needs (a binding link preferring some lengths) stays non-threshold."""
    splits = [float(r.n_prefill) for r in res.sites]
    prog, site_vars, _ = _build_max(layout, bins, perf, True, False, splits)
    for v, r in zip(site_vars, res.sites):
        prog.row([v.lam], [1.0], lo=r.lambda_rps * (1 - TIE_REL))
    objective = [(v.r, 1.0 - np.arange(len(v.bins.weight)) / len(v.bins.weight)) for v in site_vars]
    sol = prog.solve(objective, False)
    if sol.x is None:   # numerically the optimum's own routing is feasible; keep it if HiGHS says otherwise
        return res
    n_r = layout.remote.instances if layout.remote is not None else 0
    sites = tuple(_site_result(sol.x, v, n_r, res.status) for v in site_vars)
    return replace(sites[0], lambda_rps=res.lambda_rps, sites=sites, bound_rps=res.bound_rps, gap=res.gap,
                   method=res.method + "; among tied routings the one closest to threshold routing")
