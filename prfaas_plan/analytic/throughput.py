"""Throughput model: stage rates, ``Lambda_max``, the binding stage and link load of a layout.

For a routing threshold ``t`` (uncached tokens; longer requests are prefilled remotely) the stages
bound the system request rate ``Lambda`` (requests/s) as in the PrfaaS paper (``docs/methods.md`` section 3):

- remote prefill compute: ``N_r / (p * T_r(l_long))``
- remote egress (each link): ``B_eff / (p * S_kv(l_long))`` (bits vs bytes converted), ``S_kv`` being the
  bytes the transfer moves under the site's policy (`prfaas_plan.analytic.transfer`)
- local prefill: ``N_p / ((1 - p) * T_l(l_short))``
- local decode: ``N_d * BS / (T_decode * L_out)``, i.e. ``N_d * decode requests/s per instance``

``Lambda_max`` is their minimum. Two modes:

- ``representative`` (the paper's): ``p = P(L > t)``, ``l_long = E[L | L > t]``,
  ``l_short = E[L | L <= t]``, each stage evaluated at its representative length;
- ``exact``: expectations over the distribution, ``E[T_r(L); L > t]`` etc. (Jensen's inequality makes
  the two differ where ``T`` is convex).

Everything is evaluated on a discretized length grid with suffix sums, so one call evaluates any
number of thresholds at once (vectorized), which the optimizer's grid search uses.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..layout import Layout
from ..performance.base import DecodeCapacity, PrefillModel, busy_s  # noqa: F401 (busy_s re-exported)
from ..performance.sharing import Same, remembered
from ..profiles import ModelProfile
from ..vocabulary import Mode, values
from .transfer import LOGICAL, TransferBytes

MODES = values(Mode)


_GRIDS: dict = {}      # (id(distribution), n) -> (distribution, LengthGrid): `LengthGrid.from_distribution`
MAX_GRIDS = 32
MAX_GRID_ENTRIES = 512  # figures one grid keeps (`LengthGrid._once`), each an array of its support's size


@dataclass(frozen=True)
class LengthGrid:
    """A length distribution as sorted support points ``lengths`` (tokens) with probabilities
    ``weights`` (summing to 1)."""

    lengths: np.ndarray
    weights: np.ndarray

    @classmethod
    def from_distribution(cls, dist, n: int = 8192) -> "LengthGrid":
        """Discretize a workload length distribution (anything with ``grid(n)``). The grid of one
        distribution object is built once and shared (the distributions are immutable; a sweep's
        scenarios share their workload, and its figures computed once per grid serve them all)."""
        key = (id(dist), n)
        hit = _GRIDS.get(key)
        if hit is not None and hit[0] is dist:
            return hit[1]
        lengths, weights = dist.grid(n)
        lengths = np.asarray(lengths, dtype=float)
        weights = np.asarray(weights, dtype=float)
        order = np.argsort(lengths, kind="stable")
        grid = cls(lengths[order], weights[order] / weights.sum())
        if len(_GRIDS) >= MAX_GRIDS:
            _GRIDS.clear()
        _GRIDS[key] = (dist, grid)   # the distribution is kept beside it: an id cannot be recycled
        return grid

    def suffix(self, values: np.ndarray) -> np.ndarray:
        """``S[i] = sum_{j >= i} weights[j] * values[j]``, with a trailing 0 (length n + 1)."""
        wv = self.weights * values
        return np.concatenate([np.cumsum(wv[::-1])[::-1], [0.0]])

    def split_index(self, t) -> np.ndarray:
        """Index of the first support point strictly longer than ``t``; for the grid's `fixed_thresholds`
        (that very array) the indices computed with them."""
        hit = self.__dict__.get("_fixed_thresholds")
        if hit is not None and hit[0] is t:
            return hit[1]
        return np.searchsorted(self.lengths, np.asarray(t, dtype=float), side="right")

    def fixed_thresholds(self, make) -> np.ndarray:
        """``make(self)``, thresholds (tokens) computed once per grid and returned read-only, their
        `split_index` computed with them: the searches' candidates (`search.search_thresholds`), which
        every search of the grid asks."""
        hit = self.__dict__.get("_fixed_thresholds")
        if hit is None:
            ts = make(self)
            steps = np.searchsorted(self.lengths, ts, side="right")
            ts.setflags(write=False)
            steps.setflags(write=False)
            hit = self.__dict__["_fixed_thresholds"] = (ts, steps)
        return hit[0]

    def step_of(self, t: float, lo: int = 0, hi: int | None = None) -> int:
        """`split_index` of one threshold ``t`` (tokens, not NaN) known to lie in ``[lo, hi]`` (split indices),
        by Python's bisection over the support as floats: a bisection on ``t`` asks it at every step."""
        return bisect.bisect_right(self.length_list, float(t), lo, len(self.lengths) if hi is None else hi)

    @cached_property
    def length_list(self) -> list[float]:
        """``lengths`` as Python floats (the same doubles), for `step_of`."""
        return self.lengths.tolist()

    @property
    def mean(self) -> float:
        return float(np.dot(self.lengths, self.weights))

    @cached_property
    def weight_suffix(self) -> np.ndarray:
        """``suffix(1)``: probability of each support point or a longer one (computed once per grid)."""
        return self.suffix(np.ones_like(self.lengths))

    def _once(self, key, owner, compute) -> np.ndarray:
        """``compute()``, evaluated once per grid, ``key`` and ``owner`` object: the search and the plan's
        checks evaluate the same grid many times. The key holds ``owner`` (`Same`), so an identity match cannot
        be a recycled object; a long-lived grid keeps at most `MAX_GRID_ENTRIES` figures."""
        return remembered(self.__dict__.setdefault("_cache", {}), (key, Same(owner)), compute, MAX_GRID_ENTRIES)

    def busy_at_lengths(self, prefill: PrefillModel) -> np.ndarray:
        """`busy_s` of ``prefill`` at every support point (seconds per request), computed once per grid
        and prefill model."""
        return self._once("busy", prefill, lambda: busy_s(prefill, self.lengths))

    def latency_at_lengths(self, prefill: PrefillModel) -> np.ndarray:
        """``prefill.latency_s`` at every support point (seconds per request, float64), computed once per
        grid and prefill model."""
        return self._once("latency", prefill, lambda: np.asarray(prefill.latency_s(self.lengths), dtype=float))

    def busy_suffix(self, prefill: PrefillModel) -> np.ndarray:
        """``suffix(busy_at_lengths(prefill))`` (seconds per request), computed once per grid and model."""
        return self._once("busy_suffix", prefill, lambda: self.suffix(self.busy_at_lengths(prefill)))

    def transfer_at_lengths(self, model: ModelProfile, transfer: TransferBytes) -> np.ndarray:
        """The bytes ``transfer`` moves for ``model`` at every support point (bytes per request), computed
        once per grid, model and policy."""
        return self._once(("transfer_at", transfer), model, lambda: transfer.at(model, self.lengths))

    def transfer_suffix(self, model: ModelProfile, transfer: TransferBytes) -> np.ndarray:
        """``suffix`` of `transfer_at_lengths` (bytes per request), computed once per grid, model and policy."""
        return self._once(("transfer", transfer), model,
                          lambda: self.suffix(self.transfer_at_lengths(model, transfer)))

    def length_stats(self, idx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(P(L > t), E[L | L > t], E[L | L <= t])`` (tokens; NaN where the condition has no mass) at the
        thresholds whose `split_index` is ``idx``, read-only and remembered per index array: a search asks
        the same candidate thresholds of every configuration it grid-searches."""
        idx = np.asarray(idx)
        return remembered(self.__dict__.setdefault("_length_stats_memo", {}), (idx.dtype.str, idx.shape, idx.tobytes()),
                          lambda: self._length_stats(idx), MAX_GRID_ENTRIES)

    def _length_stats(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w_suffix, l_suffix = self.weight_suffix, self.length_suffix
        total, l_all = w_suffix[0], l_suffix[0]
        w_above = np.clip(w_suffix[idx], 0.0, total)
        p = w_above / total
        l_above = l_suffix[idx]
        with np.errstate(invalid="ignore", divide="ignore"):
            l_long = np.where(p > 0, l_above / np.where(w_above > 0, w_above, 1), np.nan)
            l_short = np.where(p < 1, (l_all - l_above) / np.where(total - w_above > 0, total - w_above, 1), np.nan)
        for a in (p, l_long, l_short):
            a.setflags(write=False)
        return p, l_long, l_short

    @cached_property
    def length_suffix(self) -> np.ndarray:
        """``suffix(lengths)``: partial first moment from each support point up (computed once per grid)."""
        return self.suffix(self.lengths)


@dataclass(frozen=True)
class SitePerf:
    """Per-instance performance of one local PD site: local prefill model, decode capacity and the bytes a
    KV transfer to it moves (`TransferBytes`; the planning layer sets the policy, one logical copy here)."""

    prefill: PrefillModel
    decode: DecodeCapacity
    transfer: TransferBytes = LOGICAL


@dataclass(frozen=True)
class PerfInputs:
    """Everything the throughput model needs besides the layout and workload.

    ``remote_prefill`` is the prefill model of one remote instance; ``sites`` maps a local PD site's name
    to its `SitePerf`; ``output_tokens`` is the mean output length (tokens).
    """

    model: ModelProfile
    remote_prefill: PrefillModel | None
    sites: dict[str, SitePerf] = field(hash=False)
    output_tokens: float = 1024.0

    def transfer_bytes(self, l, site: str | None = None) -> np.ndarray:
        """Bytes a KV transfer to ``site`` (default: the first) moves for uncached length(s) ``l``: the one
        quantity every link, egress and transfer-time figure uses."""
        return self.sites[site or next(iter(self.sites))].transfer.at(self.model, l)


def offloads(layout: Layout, perf: "PerfInputs", site=None) -> bool:
    """True when requests arriving at ``site`` (a `PDSite`, default the first) can be prefilled remotely:
    the layout can offload there (`Layout.can_offload`) and the remote prefill has a performance model.
    Every model (throughput, TTFT, latency, linear program, simulator) asks this one question."""
    return layout.can_offload(site) and perf.remote_prefill is not None


@dataclass(frozen=True)
class Routing:
    """Per-threshold routing statistics (arrays over thresholds)."""

    threshold: np.ndarray
    p_remote: np.ndarray
    l_long: np.ndarray          # E[L | L > t], tokens (nan when p = 0)
    l_short: np.ndarray         # E[L | L <= t], tokens (nan when p = 1)
    remote_s_per_req: np.ndarray   # remote prefill seconds per arriving request (all requests)
    link_bytes_per_req: np.ndarray  # bytes over the link per arriving request
    local_s_per_req: np.ndarray    # local prefill seconds per arriving request


def routing_stats(grid: LengthGrid, perf: PerfInputs, thresholds, mode: str = "representative",
                  local_site: str | None = None) -> Routing:
    """Routing statistics for each threshold (vectorized over ``thresholds``)."""
    t = np.atleast_1d(np.asarray(thresholds, dtype=float))
    return routing_at(grid, perf, grid.split_index(t), mode, local_site, t)


def routing_at(grid: LengthGrid, perf: PerfInputs, idx: np.ndarray, mode: str = "representative",
               local_site: str | None = None, thresholds: np.ndarray | None = None) -> Routing:
    """`routing_stats` at the thresholds whose `LengthGrid.split_index` is ``idx`` (the statistics depend on
    ``t`` only through it); ``thresholds`` fills `Routing.threshold` (NaN where only the step is given)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    t = np.full(len(idx), np.nan) if thresholds is None else thresholds
    site_name = local_site or next(iter(perf.sites))
    site = perf.sites[site_name]
    l = grid.lengths
    p, l_long, l_short = grid.length_stats(idx)
    if mode == "exact":
        remote = (grid.busy_suffix(perf.remote_prefill) if perf.remote_prefill is not None
                  else grid.suffix(np.full_like(l, np.inf)))[idx]
        link = grid.transfer_suffix(perf.model, site.transfer)[idx]
        local_suffix = grid.busy_suffix(site.prefill)
        local = local_suffix[0] - local_suffix[idx]
    else:
        safe_long = np.nan_to_num(l_long, nan=1.0)
        safe_short = np.nan_to_num(l_short, nan=1.0)
        remote = np.where(p > 0, p * (busy_s(perf.remote_prefill, safe_long)
                                      if perf.remote_prefill is not None else np.inf), 0.0)
        link = np.where(p > 0, p * perf.transfer_bytes(safe_long, site_name), 0.0)
        local = np.where(p < 1, (1 - p) * busy_s(site.prefill, safe_short), 0.0)
    return Routing(t, p, l_long, l_short, remote, link.astype(float), local)


def _bound(capacity, per_request):
    """Requests/s a resource of ``capacity`` sustains when each request costs ``per_request``."""
    capacity = np.asarray(capacity, dtype=float)
    per_request = np.asarray(per_request, dtype=float)
    out = np.full(np.broadcast_shapes(capacity.shape, per_request.shape), np.inf)
    return np.divide(capacity, per_request, out=out, where=per_request > 0)   # free where nothing is paid


STAGES = ("remote_prefill", "link", "local_prefill", "local_decode")


@dataclass(frozen=True)
class StageBounds:
    """System-throughput bound of each stage (requests/s), arrays broadcast over (threshold, split)."""

    remote_prefill: np.ndarray
    link: np.ndarray
    local_prefill: np.ndarray
    local_decode: np.ndarray

    @property
    def lambda_max(self) -> np.ndarray:
        return np.minimum(np.minimum(self.remote_prefill, self.link),
                          np.minimum(self.local_prefill, self.local_decode))

    def binding(self) -> np.ndarray:
        """Index into `STAGES` of the binding stage."""
        return np.argmin(np.stack([np.broadcast_to(getattr(self, s), self.lambda_max.shape)
                                   for s in STAGES]), axis=0)


def offload_bounds(layout: Layout, routing: Routing, perf: PerfInputs) -> tuple[np.ndarray, np.ndarray]:
    """The remote prefill and link bounds (requests/s) of a single-PD-site layout at each of the routing's
    thresholds (1-D): the stage bounds no local split changes."""
    site = layout.pd_sites[0]
    if not offloads(layout, perf, site):   # no remote site (or no link): nothing can be sent remote
        blocked = np.where(np.asarray(routing.p_remote, dtype=float) > 0, 0.0, np.inf)
        return blocked, blocked
    goodput = site.link.planned_bps if site.link is not None else 0.0
    return (_bound(layout.remote.instances, np.asarray(routing.remote_s_per_req, dtype=float)),
            _bound(goodput / 8.0, np.asarray(routing.link_bytes_per_req, dtype=float)))


def stage_bounds(layout: Layout, routing: Routing, perf: PerfInputs, n_prefill=None) -> StageBounds:
    """Stage bounds for a single-PD-site layout over the routing's thresholds; ``n_prefill`` (array,
    optional) overrides the site's local prefill count, broadcasting as a second axis."""
    site = layout.pd_sites[0]
    sp = perf.sites[site.name]
    n_total = site.instances
    if n_prefill is None:
        n_p = np.array([site.prefill], dtype=float)
    else:
        n_p = np.asarray(n_prefill, dtype=float)
    n_d = n_total - n_p
    col = lambda a: np.asarray(a, dtype=float)[:, None]  # noqa: E731 - thresholds on axis 0
    remote, link = (col(x) for x in offload_bounds(layout, routing, perf))
    local = _bound(n_p[None, :], col(routing.local_s_per_req))
    decode = np.broadcast_to(n_d[None, :] * sp.decode.requests_per_s(perf.output_tokens),
                             (len(routing.threshold), len(n_p)))
    shape = (len(routing.threshold), len(n_p))
    return StageBounds(*(np.broadcast_to(x, shape).astype(float) for x in (remote, link, local, decode)))


@dataclass(frozen=True)
class Evaluation:
    """Throughput of one layout at one threshold and split, with every stage's figures. ``layout`` is the
    evaluated configuration (its split and threshold set to the ones evaluated)."""

    layout: Layout
    mode: str
    threshold: float
    p_remote: float
    l_long: float
    l_short: float
    n_prefill: int
    n_decode: int
    bounds: dict[str, float]       # stage -> system-throughput bound, requests/s
    lambda_max: float              # requests/s
    binding: str
    egress_bps: float              # mean remote egress at lambda_max, bit/s
    link_bps: float                # link line rate, bit/s
    link_goodput_bps: float

    @property
    def link_utilization(self) -> float:
        return self.egress_bps / self.link_bps if self.link_bps else 0.0

    @property
    def link_headroom_bps(self) -> float:
        return max(self.link_goodput_bps - self.egress_bps, 0.0)

    @property
    def stage_utilization(self) -> dict[str, float]:
        """Utilization of each stage at lambda_max (1 for the binding stage)."""
        return {k: (self.lambda_max / v if np.isfinite(v) and v > 0 else 0.0) for k, v in self.bounds.items()}


def evaluate(layout: Layout, grid: LengthGrid, perf: PerfInputs, threshold: float | None = None,
             n_prefill: int | None = None, mode: str = "representative") -> Evaluation:
    """Evaluate a single-PD-site layout at one threshold and local split."""
    t = layout.threshold if threshold is None else threshold
    if t is None:
        raise ValueError("threshold not set: use the optimizer")
    site = layout.pd_sites[0]
    n_p = site.prefill if n_prefill is None else n_prefill
    r = routing_stats(grid, perf, [t], mode, site.name)
    b = stage_bounds(layout, r, perf, [n_p])
    bounds = {s: float(getattr(b, s)[0, 0]) for s in STAGES}
    lam = float(b.lambda_max[0, 0])
    binding = STAGES[int(np.argmin([bounds[s] for s in STAGES]))]   # `StageBounds.binding` at the one point
    egress = lam * float(r.link_bytes_per_req[0]) * 8.0 if offloads(layout, perf, site) else 0.0
    link = site.link
    evaluated = replace(layout, pd_sites=(site.with_split(int(n_p)),) + layout.pd_sites[1:], threshold=float(t))
    return Evaluation(evaluated, mode, float(t), float(r.p_remote[0]), float(r.l_long[0]), float(r.l_short[0]),
                      int(n_p), int(site.instances - n_p), bounds, lam, binding,
                      egress if np.isfinite(egress) else 0.0,
                      link.bandwidth_bps if link else 0.0, link.goodput_bps if link else 0.0)
