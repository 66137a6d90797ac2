"""The paper's 2-D grid search over the threshold ``t`` and the local prefill/decode split.

For fixed hardware the search evaluates ``Lambda_max`` on every (threshold, N_p) pair at once
(vectorized), keeps the best split, and among the thresholds that reach the best throughput picks
the one where the remote and local prefill bounds balance (the paper's optimality condition
``Theta_prfaas / p = Theta_pdp / (1 - p)``), refined between grid points by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..layout import Layout
from .throughput import (
    Evaluation,
    LengthGrid,
    PerfInputs,
    StageBounds,
    _bound,
    evaluate,
    offload_bounds,
    offloads,
    routing_at,
    routing_stats,
    stage_bounds,
)

REL_TIE = 1e-9


def threshold_candidates(grid: LengthGrid, n: int = 2048) -> np.ndarray:
    """Candidate thresholds: log-spaced over the support, plus 0 and the support points' ends."""
    return _candidates(float(max(grid.lengths[0], 1.0)), float(grid.lengths[-1]), n).copy()


@lru_cache(maxsize=64)
def _candidates(lo: float, hi: float, n: int) -> np.ndarray:
    """`threshold_candidates` by the support's ends (tokens): the simulator's long-term rule searches a new
    grid every period, usually with the same shortest and longest prompt."""
    return sorted_unique(np.concatenate([[0.0], np.geomspace(lo, hi, n), [hi]]))


def search_thresholds(grid: LengthGrid) -> np.ndarray:
    """`threshold_candidates` of ``grid``, read-only and the same array on every call, its
    `LengthGrid.split_index` computed once with it: every search of a grid asks the same 2,049 thresholds."""
    return grid.fixed_thresholds(threshold_candidates)


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
    surface of a few splits only (`split_columns`); ``lam`` and ``bounds`` are None on the optimum alone
    (`grid_optimum`)."""

    best: Evaluation | None
    thresholds: np.ndarray
    splits: np.ndarray
    lam: np.ndarray | None
    bounds: StageBounds | None = None


def grid_search(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str = "representative",
                thresholds: np.ndarray | None = None, fixed_threshold: float | None = None,
                keep_split: bool = False) -> GridResult:
    """Best threshold and local split of a single-PD-site layout.

    ``fixed_threshold`` (or the layout's own threshold) pins ``t`` and searches the split only.
    A layout without local prefill choice (naive heterogeneous: ``t = 0``), or ``keep_split``, keeps
    its own split.
    """
    ts, splits, pinned = _search_axes(layout, grid, thresholds, fixed_threshold, keep_split)
    r = routing_stats(grid, perf, ts, mode, layout.pd_sites[0].name)
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


def search_best(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str = "representative") -> Evaluation:
    """``grid_search(layout, grid, perf, mode).best`` (free or the layout's own threshold), without the
    surface: where every split is searched, the best split of each threshold is found from the two local
    bounds' crossing (`_best_splits`), so the work grows with the thresholds, not with thresholds x splits.
    The same figures are compared in the same way, so the answer is `grid_search`'s to the bit
    (tests/test_throughput.py)."""
    ts, splits, pinned = _search_axes(layout, grid, None, None, False)
    site = layout.pd_sites[0]
    rps = site_decode_rps(layout, perf)
    if len(splits) < 2 or not np.isfinite(rps) or rps < 0:
        return grid_search(layout, grid, perf, mode).best
    r = routing_stats(grid, perf, ts, mode, site.name)
    remote, link = offload_bounds(layout, r, perf)
    local_s = np.asarray(r.local_s_per_req, dtype=float)
    offload = np.minimum(remote, link)
    if not np.all(np.isfinite(local_s)) or np.any(np.isnan(offload)):
        return grid_search(layout, grid, perf, mode).best
    best_lam, j = _best_splits(offload, local_s, splits, rps)
    n_p = int(splits[j])
    if pinned is not None:
        t_best = float(pinned)
    else:
        col = _split_column(remote, link, local_s, float(splits[j]), float(site.instances - splits[j]) * rps)
        t_best = _balanced_threshold(layout, grid, perf, mode, ts, col.lambda_max[:, 0], col, 0, n_p, best_lam)
    return evaluate(layout, grid, perf, t_best, n_p, mode)


def grid_optimum(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str = "representative") -> GridResult:
    """`grid_search`'s result (free or the layout's own threshold) without its surface: ``best`` is
    `search_best`'s, ``lam`` and ``bounds`` are None (for callers that read the optimum only)."""
    ts, splits, _ = _search_axes(layout, grid, None, None, False)
    return GridResult(search_best(layout, grid, perf, mode), ts, splits, None, None)


def _search_axes(layout: Layout, grid: LengthGrid, thresholds, fixed_threshold, keep_split: bool):
    """The thresholds (tokens) and local splits `grid_search` tries, and the pinned threshold (or None)."""
    site = layout.pd_sites[0]
    pinned = layout.threshold if fixed_threshold is None else fixed_threshold
    if pinned is not None:
        ts = np.array([pinned], dtype=float)
    else:
        ts = search_thresholds(grid) if thresholds is None else np.asarray(thresholds, dtype=float)
    fixed = keep_split or pinned == 0.0
    splits = np.array([site.prefill]) if fixed else np.arange(0, site.instances + 1)
    return ts, splits, pinned


def site_decode_rps(layout: Layout, perf: PerfInputs) -> float:
    """Requests/s one decode instance of the layout's first PD site sustains (as `stage_bounds` reads it)."""
    return perf.sites[layout.pd_sites[0].name].decode.requests_per_s(perf.output_tokens)


WINDOW = np.arange(-1, 3)
"""Splits around where the local prefill and decode bounds meet that `_best_splits` compares. The meeting
point ``m`` is computed in floating point, a few ulps from the exact one, so its floor is the exact floor or
one off, and the floating-point bounds (each monotone in the split) cross at the exact crossing's floor or
the split after it: both lie in ``floor(m) - 1 .. floor(m) + 2``."""


_WINDOW_OFFSETS = tuple(float(w) for w in WINDOW)


def _best_splits(offload: np.ndarray, local_s: np.ndarray, splits: np.ndarray, rps: float) -> tuple[float, int]:
    """The best ``Lambda_max`` (requests/s) over every threshold and split ``0..N``, and the fewest prefill
    instances reaching it within `REL_TIE`, as `grid_search` picks them from its surface. ``offload``: the
    remote and link bound per threshold (requests/s, the smaller of the two); ``local_s``: local prefill
    seconds per request; ``rps``: one decode instance's requests/s.

    Per threshold, ``min(N_p / P, (N - N_p) d)`` rises then falls in ``N_p``, so its maximum lies beside
    where the two meet (`WINDOW`); the other bound does not depend on the split. A split reaches a level
    ``tau`` at some threshold exactly when its decode bound does and ``N_p / P >= tau`` at the threshold
    with the least local prefill time among those whose offload bound reaches ``tau``."""
    n = len(splits) - 1
    monotone = len(offload) > 64 and not (np.diff(offload) < 0).any() and not (np.diff(local_s) < 0).any()
    best_lam, fastest = (_best_at_crossing if monotone else _best_everywhere)(offload, local_s, n, rps)
    tau = best_lam * (1 - REL_TIE)
    prefill = splits.astype(float)
    decode = (n - prefill) * rps
    prefill_ok = np.ones(len(splits), dtype=bool) if fastest <= 0 else _bound(prefill, fastest) >= tau
    return best_lam, int(np.argmax(prefill_ok & (decode >= tau)))


def _best_everywhere(offload: np.ndarray, local_s: np.ndarray, n: int, rps: float) -> tuple[float, float]:
    """`_best_splits`' best ``Lambda_max`` and the least local prefill seconds among the thresholds whose
    offload bound reaches it (within `REL_TIE`), from the best local bound at every threshold."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        meet = np.nan_to_num(n * rps * local_s / (1.0 + rps * local_s), nan=0.0, posinf=n)
        floor = np.floor(meet)
        positive = local_s > 0
        per_request = np.where(positive, local_s, 1.0)
        local = None
        # one window offset at a time on 1-D arrays: the same figures as a (thresholds x window) array and
        # its row maxima, at a third of the cost (short-axis reductions and fancy indexing are slow)
        for w in WINDOW:
            k = np.clip(floor + float(w), 0.0, float(n))   # whole numbers: prefill[k] is k, decode[k] (n - k) rps
            v = np.minimum(np.where(positive, k / per_request, np.inf), (n - k) * rps)
            local = v if local is None else np.maximum(local, v)
    best_lam = float(np.minimum(offload, local).max())
    return best_lam, float(local_s[offload >= best_lam * (1 - REL_TIE)].min())


def _best_at_crossing(offload: np.ndarray, local_s: np.ndarray, n: int, rps: float) -> tuple[float, float]:
    """`_best_splits`' best ``Lambda_max`` and the least local prefill seconds among the thresholds whose
    offload bound reaches it, where the offload bound never falls and the local prefill seconds never fall
    with the threshold (exact mode: suffix sums): the best local bound (`_local_bound_at`) then never rises, so
    the best of their minimum is where they cross, found by bisection from a dozen thresholds' local bounds
    instead of every one's; the figures are computed as the vectorized form computes them, so the answer is
    the same."""
    lo, hi = 0, len(offload)   # the first threshold whose offload bound reaches its local bound is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if offload[mid] >= _local_bound_at(float(local_s[mid]), n, rps):
            hi = mid
        else:
            lo = mid + 1
    best = max(min(float(offload[i]), _local_bound_at(float(local_s[i]), n, rps))
               for i in (lo - 1, lo) if 0 <= i < len(offload))
    first = int(np.searchsorted(offload, best * (1 - REL_TIE), side="left"))
    return best, float(local_s[first])


def _local_bound_at(p: float, n: int, rps: float) -> float:
    """``max over N_p of min(N_p / p, (N - N_p) rps)`` for local prefill seconds ``p`` per request, ``N`` = ``n``
    instances and ``rps`` requests/s of decode each, over the `WINDOW` around where the two meet: one element of
    `_best_splits`' vectorized ``local``, in the same floating-point operations."""
    meet = n * rps * p / (1.0 + rps * p)
    meet = 0.0 if meet != meet else float(n) if meet == math.inf else meet
    floor, best = float(math.floor(meet)), -math.inf
    for w in _WINDOW_OFFSETS:
        k = min(max(floor + w, 0.0), float(n))
        best = max(best, min(k / p if p > 0 else math.inf, (n - k) * rps))
    return best


def _split_column(remote: np.ndarray, link: np.ndarray, local_s: np.ndarray, n_prefill: float,
                  decode: float) -> StageBounds:
    """`stage_bounds` at one split, from the remote and link bounds per threshold (requests/s), local prefill
    seconds per request, ``n_prefill`` instances and the decode bound (requests/s)."""
    col = lambda a: np.asarray(a, dtype=float)[:, None]  # noqa: E731 - thresholds on axis 0
    local = _bound(np.array([[n_prefill]]), col(local_s))
    return StageBounds(col(remote), col(link), local, np.full(local.shape, decode))


def split_columns(layout: Layout, grid: LengthGrid, perf: PerfInputs, splits, mode: str = "exact") -> GridResult:
    """The columns of `grid_search`'s surface (free threshold) at the local splits ``splits`` only, without
    its optimum (``best`` None): each (threshold, split) bound is computed on its own, so they are the
    full search's figures to the bit, and `balanced_threshold` at one of ``splits`` gives the full
    search's answer (the simulator's long-term rule needs only the splits one conversion reaches)."""
    free = replace(layout, threshold=None)
    ts = search_thresholds(grid)
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
    fast = exact_bounds(layout, grid, perf, n_p) if mode == "exact" else None
    first, last = (int(k) for k in grid.split_index([lo, hi]))
    same = _gap_signs(layout, grid, perf, mode, n_p, fast, np.arange(first, last + 1)) == sign_lo
    lo, hi = bisect_steps(grid, lo, hi, same, first)
    # The routing statistics are step functions of t (they change only at support points), so the
    # bisection ends astride a step and its midpoint may sit on the step's worse side. Keep the midpoint
    # unless the bracket's ends or the grid point reach more.
    cands = [0.5 * (lo + hi), lo, hi, float(ts[i])]
    if fast is None:
        site = layout.pd_sites[0].name
        lam = stage_bounds(layout, routing_stats(grid, perf, cands, mode, site), perf, [n_p]).lambda_max[:, 0]
    else:
        remote, link, local = fast(grid.split_index(cands))
        decode = (layout.pd_sites[0].instances - float(n_p)) * site_decode_rps(layout, perf)
        lam = np.minimum(np.minimum(remote, link), np.minimum(local, decode))
    return cands[int(np.argmax(lam >= lam.max() * (1 - REL_TIE)))]


def _gap_signs(layout, grid, perf, mode, n_p: int, fast, steps: np.ndarray) -> np.ndarray:
    """``sign(log(min(remote, link bound)) - log(local prefill bound))`` at ``n_p`` local prefill instances,
    at each of ``steps`` (`LengthGrid.split_index` values); ``fast`` is `exact_bounds` or None."""
    if fast is None:
        b = stage_bounds(layout, routing_at(grid, perf, steps, mode, layout.pd_sites[0].name), perf, [n_p])
        offload, local = np.minimum(b.remote_prefill[:, 0], b.link[:, 0]), b.local_prefill[:, 0]
    else:
        remote, link, local = fast(steps)
        offload = np.minimum(remote, link)
    with np.errstate(divide="ignore", invalid="ignore"):   # steps the bisection may never visit
        return np.sign(np.log(offload) - np.log(local))


def exact_bounds(layout, grid, perf, n_p: int | None):
    """``steps -> (remote prefill, link, local prefill bound)`` (requests/s, arrays) at ``n_p`` local prefill
    instances and the `LengthGrid.split_index` values ``steps`` (an index array or a slice), read from the
    grid's suffix sums: in exact mode the figures `stage_bounds` computes from `routing_at`, without the
    routing's length statistics (most of the cost at a few steps). The local bound is None when ``n_p`` is.
    None for a layout that cannot offload (its bounds take `offload_bounds`' other branch)."""
    site = layout.pd_sites[0]
    if not offloads(layout, perf, site) or site.link is None:
        return None
    sp = perf.sites[site.name]
    remote_s, local_suffix = grid.busy_suffix(perf.remote_prefill), grid.busy_suffix(sp.prefill)
    link_b = grid.transfer_suffix(perf.model, sp.transfer)
    capacity, byte_rate = float(layout.remote.instances), site.link.planned_bps / 8.0

    def bounds(steps) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        local = None if n_p is None else _bound(float(n_p), local_suffix[0] - local_suffix[steps])
        return _bound(capacity, remote_s[steps]), _bound(byte_rate, link_b[steps].astype(float, copy=False)), local

    return bounds


def link_binds_before_remote(layout, grid, perf) -> bool:
    """Whether the remote prefill bound is at least the link bound at every step of the routing statistics
    (exact mode), so that the offload bound is the link's wherever `search_best` looks. Its threshold and split
    then do not depend on the remote pool: any other for which this holds, on the same local site, link and
    decode, has the same (`configurations.search_configurations` grid-searches one and evaluates the others
    there)."""
    bounds = exact_bounds(layout, grid, perf, None)
    if bounds is None:
        return False
    remote, link, _ = bounds(slice(None))
    return bool((remote >= link).all())


def bisect_steps(grid: LengthGrid, lo: float, hi: float, below: np.ndarray, first: int,
                 iterations: int = 40) -> tuple[float, float]:
    """``iterations`` halvings of the threshold bracket ``[lo, hi]`` (tokens): a midpoint whose step of the
    routing statistics (`LengthGrid.split_index`) is ``s`` becomes the new ``lo`` if ``below[s - first]``,
    else the new ``hi``; the final ``(lo, hi)``. ``below`` covers the steps of ``[lo, hi]``, from ``first``.
    Where it is True up to one step and False from there on (a bound that only rises or only falls with
    ``t``), each midpoint is compared with the support point where it changes instead of looked up: the
    same halvings, at a float comparison each."""
    change = len(below) if below.all() else int(np.argmin(below))
    if not below[change:].any():
        edge = np.inf if change == len(below) else grid.length_list[first + change - 1] if change else -np.inf
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            if mid < edge:
                lo = mid
            else:
                hi = mid
        return lo, hi
    last = first + len(below) - 1
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if below[grid.step_of(mid, first, last) - first]:
            lo = mid
        else:
            hi = mid
    return lo, hi
