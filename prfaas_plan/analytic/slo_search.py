"""The highest request rate within a TTFT SLO over routing thresholds and local splits (issue 21 item 6).

`prfaas_plan.analytic.latency.max_rate_at_ttft_slo` answers at one threshold and split; the threshold and
split that maximize throughput need not be the ones that maximize the rate within an SLO (a lower t sends
more long prompts to the faster remote chips, a larger local prefill pool queues less). This module
searches both, with the same queueing model (`latency.ttft_under_load`: Allen-Cunneen M/G/c prefill pools,
processor-sharing link, decode-slot stability), but tests a candidate without computing a percentile:

    TTFT's q-th percentile <= target   <=>   P(TTFT <= target) >= q,

one evaluation of the mixture CDF at the target instead of a bisection over it, on per-length arrays
computed once (`latency.SloModel`). Seconds, requests/s, tokens.

Search (branch and bound; exact on the thresholds it visits, `tests/test_slo_search.py`): a candidate
(threshold, split) can carry at most its stability bound (every pool, the link and the decode slots below
saturation), so candidates are taken in decreasing order of that bound and the search stops when the next
bound is below the best rate found; a candidate is first tested at the best rate so far (one CDF
evaluation) and bisected only when it beats it. Thresholds: every `COARSE`-th of the caller's candidates,
then all of them around the best. With a ``floor`` the answer is the search without it whenever that beats
the floor: when no coarse threshold does, the best coarse one is found without the floor and its
neighbourhood searched above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..layout import Layout
from ..units import plural
from .latency import SloModel
from .search import sorted_unique
from .throughput import LengthGrid, PerfInputs
from .ttft import weighted_percentiles

COARSE = 32            # the first pass tests every 32nd candidate threshold
BISECT_REL = 1e-6      # bisection stops at this fraction of the candidate's stability bound


@dataclass(frozen=True)
class SloOptimum:
    """The best (threshold, split) found and its rate within the SLO (0 when nothing meets it), with why.

    ``unloaded_best_s`` is the lowest TTFT at the SLO's percentile (or mean) that any candidate threshold
    reaches with no load, at the thresholds ``unloaded_best_thresholds`` (lowest, highest);
    ``percentile_tokens`` the workload's length at that percentile (None for the mean) and ``remote_s`` /
    ``local_s`` its unloaded TTFT on each route (None without a remote route)."""

    met: bool
    threshold: float
    n_prefill: int
    n_decode: int
    rate_rps: float
    stability_rps: float       # the highest rate the candidate carries at all (its pools, link, decode)
    unloaded_best_s: float
    unloaded_best_thresholds: tuple[float, float]   # the range of candidate thresholds reaching it (tokens)
    percentile_tokens: float | None
    remote_s: float | None
    local_s: float | None
    evaluated: int             # CDF evaluations the search made


def search_slo(layout: Layout, grid: LengthGrid, perf: PerfInputs, percentile: float, target_s: float,
               thresholds: np.ndarray, splits: np.ndarray, seed: tuple[float, int, float] | None = None,
               floor: float = 0.0) -> SloOptimum:
    """The (threshold, local split) among ``thresholds`` x ``splits`` with the highest rate whose TTFT
    ``percentile`` (0: the mean) stays within ``target_s``. ``seed`` = (threshold, split, rate) of a point
    already known to meet it (the plan's own), which the answer never falls below. ``floor`` (requests/s,
    without a seed) searches only above it, the bound of a search over several layouts
    (`planning.slo.slo_configurations`): when no point beats it the answer is unmet, rate 0, even if some
    point meets the SLO at a lower rate."""
    pb = SloModel(layout, grid, perf, percentile, target_s)
    ts = np.asarray(thresholds, dtype=float)
    splits = [int(s) for s in splits if 0 <= s < pb.instances]
    best_rate, best_t, best_n, best_cap = 0.0, float(ts[0]), splits[0] if splits else 0, 0.0
    found = False
    if seed is not None and seed[2] > 0:
        best_t, best_n, best_rate = float(seed[0]), int(seed[1]), float(seed[2])
        best_cap, found = pb.stability(best_t, best_n), True
    elif floor > 0:
        best_rate = float(floor)
    ok_t: dict[float, bool] = {}

    def run(idx) -> None:
        nonlocal best_rate, best_t, best_n, best_cap, found
        for i in idx:
            t = float(ts[i])
            if t not in ok_t:
                ok_t[t] = pb.unloaded_ok(t)
        # thresholds an idle system already misses are never visited: leaving them out of the ordering
        # changes neither the order of the others nor where the bound stops it
        cands = [(pb.stability(float(ts[i]), n), float(ts[i]), n) for i in idx if ok_t[float(ts[i])] for n in splits]
        for cap, t, n in sorted(cands, key=lambda c: -c[0]):
            if cap <= best_rate * (1 + BISECT_REL):
                break
            if best_rate > 0 and not pb.met(t, n, best_rate * (1 + BISECT_REL)):
                continue
            lo, hi = max(best_rate, cap * 1e-6), cap * (1 - 1e-9)
            if not pb.met(t, n, lo):
                continue
            while hi - lo > BISECT_REL * cap:
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if pb.met(t, n, mid) else (lo, mid)
            best_rate, best_t, best_n, best_cap, found = lo, t, n, cap, True

    def around(t: float) -> np.ndarray:
        """Every candidate threshold within `COARSE` places of ``t``."""
        i = int(np.argmin(np.abs(ts - t)))
        return np.arange(max(i - COARSE, 0), min(i + COARSE + 1, len(ts)))

    coarse = sorted_unique(np.append(np.arange(0, len(ts), COARSE), len(ts) - 1))
    run(coarse)
    if not found and floor > 0 and seed is None and len(ts) > 1:
        # no coarse threshold beats the floor, but the thresholds around the best of them may: find that one
        # without the floor, then search its neighbourhood above the floor, as the search without one would
        best_rate = 0.0
        run(coarse)
        if found:
            best_rate, found = float(floor), False
            run(around(best_t))
    elif found and len(ts) > 1:
        run(around(best_t))
    # why, when nothing meets it: the best unloaded value over the candidate thresholds
    values = np.array([pb.unloaded_value(float(t)) for t in ts[coarse]])
    k = int(np.argmin(values))
    reach = ts[coarse][values <= values[k] * (1 + 1e-9)]
    t_un = (float(reach.min()), float(reach.max()))
    tokens = remote_s = local_s = None
    if percentile > 0:
        tokens = float(weighted_percentiles(grid.lengths, grid.weights, [percentile])[0])
        j = int(np.searchsorted(grid.lengths, tokens))
        j = min(j, len(grid.lengths) - 1)
        local_s = float(pb.local_svc[j])
        remote_s = float(pb.remote_unloaded[j]) if pb.remote_on else None
    if not found:
        best_rate = best_cap = 0.0
    return SloOptimum(best_rate > 0, best_t, best_n, pb.instances - best_n, best_rate, best_cap,
                      float(values[k]), t_un, tokens, remote_s, local_s, pb.evaluated)


def why_unmet(opt: SloOptimum, label: str, remote: str | None, local: str, configurations: int | None = None) -> str:
    """One sentence: why no threshold or split (of any of the ``configurations`` searched, when given) meets
    the SLO ``label`` (``p95 TTFT < 2 s``), from the unloaded figures of `SloOptimum` (of the configuration
    closest to it); ``remote``/``local`` name the instance shapes (``8xH200``)."""
    lo, hi = opt.unloaded_best_thresholds
    where = ("the local cluster" if not remote else f"the best threshold ({lo:,.0f} tokens)" if lo == hi else
             f"the best thresholds ({lo:,.0f} to {hi:,.0f} tokens)")
    verb = "reaches" if lo == hi or not remote else "reach"
    out = f"no threshold or split meets {label}"
    if configurations is not None:
        out += f" in any of the {configurations} {plural(configurations, 'configuration')} searched"
    out += f": even with no load, {where} {verb} {opt.unloaded_best_s:.2f} s"
    if opt.percentile_tokens is not None:
        routes = [f"{opt.remote_s:.2f} s via {remote} (prefill + KV transfer)"] if opt.remote_s is not None else []
        routes.append(f"{opt.local_s:.2f} s on {local}")
        out += (f"; a prompt at that percentile ({opt.percentile_tokens:,.0f} tokens) takes "
                + " or ".join(routes) + " before any queueing")
    return out + ("; only faster prefill (faster or larger instances), shorter prompts or a looser SLO meet it"
                  if math.isfinite(opt.unloaded_best_s) else "")
