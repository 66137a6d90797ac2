"""The paper's 2-D grid search over the threshold ``t`` and the local prefill/decode split.

For fixed hardware the search evaluates ``Lambda_max`` on every (threshold, N_p) pair at once
(vectorized), keeps the best split, and among the thresholds that reach the best throughput picks
the one where the remote and local prefill bounds balance (the paper's optimality condition
``Theta_prfaas / p = Theta_pdp / (1 - p)``), refined between grid points by bisection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..layout import Layout
from .throughput import (
    Evaluation,
    LengthGrid,
    PerfInputs,
    StageBounds,
    evaluate,
    routing_stats,
    stage_bounds,
)

REL_TIE = 1e-9


def per_support_step(grid: LengthGrid, fn):
    """``fn(t)`` evaluated once per step of the routing statistics: they depend on ``t`` only through
    which support points lie above it (`LengthGrid.split_index`), so a bisection on ``t`` that has
    closed in on one support point needs no further evaluation. Results are exactly ``fn``'s."""
    seen: dict[int, object] = {}

    def at(t: float):
        k = int(grid.split_index(t))
        if k not in seen:
            seen[k] = fn(t)
        return seen[k]

    return at


def threshold_candidates(grid: LengthGrid, n: int = 2048) -> np.ndarray:
    """Candidate thresholds: log-spaced over the support, plus 0 and the support points' ends."""
    return _candidates(float(max(grid.lengths[0], 1.0)), float(grid.lengths[-1]), n).copy()


@lru_cache(maxsize=64)
def _candidates(lo: float, hi: float, n: int) -> np.ndarray:
    """`threshold_candidates` by the support's ends (tokens): the simulator's long-term rule searches a new
    grid every period, usually with the same shortest and longest prompt."""
    return sorted_unique(np.concatenate([[0.0], np.geomspace(lo, hi, n), [hi]]))


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for an array without NaN, by the same sort-and-compare, without the
    ``numpy.ma`` import (45 ms) that ``np.unique`` triggers on every call without counts."""
    out = np.sort(np.asarray(values).ravel())
    keep = np.empty(out.shape, dtype=bool)
    keep[:1] = True
    keep[1:] = out[1:] != out[:-1]
    return out[keep]


@dataclass(frozen=True)
class GridResult:
    """The optimum and the whole surface, for plots: ``lam[i, j]`` at ``thresholds[i]``, N_p = ``splits[j]``.
    ``bounds``: the stage bounds (requests/s) behind ``lam``, kept so that `balanced_threshold` at another
    split reuses them instead of recomputing the routing over every threshold. ``best`` is None on a
    surface of a few splits only (`split_columns`)."""

    best: Evaluation | None
    thresholds: np.ndarray
    splits: np.ndarray
    lam: np.ndarray
    bounds: StageBounds | None = None


def grid_search(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str = "representative",
                thresholds: np.ndarray | None = None, fixed_threshold: float | None = None,
                keep_split: bool = False) -> GridResult:
    """Best threshold and local split of a single-PD-site layout.

    ``fixed_threshold`` (or the layout's own threshold) pins ``t`` and searches the split only.
    A layout without local prefill choice (naive heterogeneous: ``t = 0``), or ``keep_split``, keeps
    its own split.
    """
    site = layout.pd_sites[0]
    pinned = layout.threshold if fixed_threshold is None else fixed_threshold
    if pinned is not None:
        ts = np.array([pinned], dtype=float)
    else:
        ts = threshold_candidates(grid) if thresholds is None else np.asarray(thresholds, dtype=float)
    fixed = keep_split or pinned == 0.0
    splits = np.array([site.prefill]) if fixed else np.arange(0, site.instances + 1)
    r = routing_stats(grid, perf, ts, mode, site.name)
    b = stage_bounds(layout, r, perf, splits)
    lam = b.lambda_max
    best_lam = lam.max()
    j = int(np.argmax(lam.max(axis=0) >= best_lam * (1 - REL_TIE)))  # fewest prefill instances at the best
    if pinned is not None:
        t_best = float(pinned)
    else:
        t_best = _balanced_threshold(layout, grid, perf, mode, ts, lam[:, j], b, j, int(splits[j]), best_lam)
    best = evaluate(layout, grid, perf, t_best, int(splits[j]), mode)
    return GridResult(best, ts, splits, lam, b)


def split_columns(layout: Layout, grid: LengthGrid, perf: PerfInputs, splits, mode: str = "exact") -> GridResult:
    """The columns of `grid_search`'s surface (free threshold) at the local splits ``splits`` only, without
    its optimum (``best`` None): each (threshold, split) bound is computed on its own, so they are the
    full search's figures to the bit, and `balanced_threshold` at one of ``splits`` gives the full
    search's answer (the simulator's long-term rule needs only the splits one conversion reaches)."""
    free = replace(layout, threshold=None)
    ts = threshold_candidates(grid)
    splits = np.asarray(splits, dtype=int)
    b = stage_bounds(free, routing_stats(grid, perf, ts, mode, layout.pd_sites[0].name), perf, splits)
    return GridResult(None, ts, splits, b.lambda_max, b)


def balanced_threshold(layout: Layout, grid: LengthGrid, perf: PerfInputs, n_prefill: int, mode: str = "exact",
                       res: GridResult | None = None) -> float:
    """The threshold (tokens) maximizing ``Lambda_max`` at the fixed local split ``n_prefill``, and among
    equally good ones the one where the remote and local prefill bounds balance: the rule `grid_search`
    applies at its best split, here for any split (the simulator's long-term rule re-optimizes ``t`` with
    it). ``res`` is the layout's grid search with a free threshold, computed unless given."""
    free = replace(layout, threshold=None)
    res = grid_search(free, grid, perf, mode) if res is None else res
    j = int(np.flatnonzero(res.splits == n_prefill)[0])
    col = res.lam[:, j]
    if res.best is not None and n_prefill == res.best.n_prefill and col.max() == res.lam.max():
        return res.best.threshold  # the search already balanced this very column (same inputs, same answer)
    if res.bounds is None:
        b, j = stage_bounds(free, routing_stats(grid, perf, res.thresholds, mode, layout.pd_sites[0].name), perf,
                            [n_prefill]), 0
    else:  # the same figures: each (threshold, split) bound is computed on its own
        b = res.bounds
    return _balanced_threshold(free, grid, perf, mode, res.thresholds, col, b, j, n_prefill, col.max())


def best_threshold(layout: Layout, grid: LengthGrid, perf: PerfInputs, n_prefill: int,
                   mode: str = "exact") -> Evaluation:
    """The layout evaluated at its `balanced_threshold` for the fixed split ``n_prefill``: instance counts
    kept, only ``t`` re-optimized (a degraded link, `prfaas_plan.analytic.degraded`)."""
    return evaluate(layout, grid, perf, balanced_threshold(layout, grid, perf, n_prefill, mode), n_prefill, mode)


def _balanced_threshold(layout, grid, perf, mode, ts, lam_col, b, j, n_p, best_lam) -> float:
    """Among thresholds reaching the best throughput, the one balancing remote and local prefill."""
    ok = np.flatnonzero(lam_col >= best_lam * (1 - 1e-6))
    remote = np.minimum(b.remote_prefill[:, j], b.link[:, j])
    gap = np.log(np.maximum(remote, 1e-300)) - np.log(np.maximum(b.local_prefill[:, j], 1e-300))
    i = ok[np.argmin(np.abs(gap[ok]))]
    # Refine between neighbouring grid points where the gap changes sign (bisection on t).
    lo_i, hi_i = max(i - 1, 0), min(i + 1, len(ts) - 1)
    if np.sign(gap[lo_i]) == np.sign(gap[hi_i]) or not (np.isfinite(gap[lo_i]) and np.isfinite(gap[hi_i])):
        return float(ts[i])
    lo, hi = float(ts[lo_i]), float(ts[hi_i])
    sign_lo = np.sign(gap[lo_i])
    site = layout.pd_sites[0].name

    def gap_sign(t: float) -> float:
        bb = stage_bounds(layout, routing_stats(grid, perf, [t], mode, site), perf, [n_p])
        return np.sign(np.log(min(bb.remote_prefill[0, 0], bb.link[0, 0])) - np.log(bb.local_prefill[0, 0]))

    gap_sign = per_support_step(grid, gap_sign)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if gap_sign(mid) == sign_lo:
            lo = mid
        else:
            hi = mid
    # The routing statistics are step functions of t (they change only at support points), so the
    # bisection ends astride a step and its midpoint may sit on the step's worse side. Keep the midpoint
    # unless the bracket's ends or the grid point reach more.
    cands = [0.5 * (lo + hi), lo, hi, float(ts[i])]
    lam = stage_bounds(layout, routing_stats(grid, perf, cands, mode, site), perf, [n_p]).lambda_max[:, 0]
    return cands[int(np.argmax(lam >= lam.max() * (1 - REL_TIE)))]
