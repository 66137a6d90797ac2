"""The dual-timescale scheduler of PrfaaS (``docs/methods.md``).

- **Short term** (every arrival, milliseconds): `AdaptiveThreshold` raises the routing threshold ``t`` by
  a factor while the link's smoothed egress utilization or the remote queue depth is above a high mark
  and the remote route is the more backlogged one, and lowers it back toward the long-term value when
  both fall below low marks or the local side is the more backlogged (`ShortTermRule` holds the marks).
  It also decides whether bandwidth is *abundant* (utilization below ``abundant_util``), which switches
  the prefix rule from "each cluster's own cache" to "the best cache anywhere, moved across the link".
- **Long term** (every ``period_s``): `decide` (marks in `LongTermRule`) converts one local instance
  between the prefill and decode roles when the observed queue depths show the producers (prefill)
  falling behind the consumer (decode) or the reverse, and `analytic.search.balanced_threshold` re-optimizes
  ``t`` for the new split on the recently observed lengths and the link's current rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..analytic.search import GridResult, balanced_threshold, grid_search, split_columns
from ..analytic.throughput import LengthGrid, PerfInputs
from ..layout import Layout


@dataclass(frozen=True)
class ShortTermRule:
    """Marks of the per-request threshold rule. The link is *congested* when its utilization (fraction of
    the current goodput, smoothed over ``tau_s`` seconds) exceeds ``util_high`` or the remote queue exceeds
    ``queue_high`` waiting requests per remote instance; it is *relaxed* below ``util_low`` and
    ``queue_low``. ``t`` rises by ``factor`` while the link is congested and the remote route's backlog
    (queued prefill work per remote instance + unsent KV at the current goodput, seconds) exceeds the local
    one's (queued prefill work per local instance); it falls back toward its long-term value when the link
    is relaxed or the local backlog is the larger. At most one move per ``interval_s`` seconds, never above
    ``max_factor`` x the long-term value."""

    util_high: float = 0.85
    util_low: float = 0.5
    queue_high: float = 2.0
    queue_low: float = 0.5
    factor: float = 1.25
    max_factor: float = 8.0
    interval_s: float = 2.0
    tau_s: float = 10.0
    abundant_util: float = 0.5


class AdaptiveThreshold:
    """State of the short-term rule around a long-term threshold ``base`` (tokens)."""

    def __init__(self, rule: ShortTermRule, base: float):
        self.rule = rule
        self.base = float(base)
        self.current = float(base)
        self.last_change_s = -math.inf
        self.changes = 0

    def reset(self, base: float) -> None:
        """Adopt a new long-term threshold (after re-optimization)."""
        self.base = self.current = float(base)

    def can_move(self, link_util: float, remote_queue: float) -> bool:
        """False when `update` keeps the threshold whatever the backlogs: the link is not congested below
        the cap and the threshold is not above its long-term value (the caller may skip computing them)."""
        r = self.rule
        congested = link_util > r.util_high or remote_queue > r.queue_high
        return (congested and self.current < self.base * r.max_factor) or self.current > self.base

    def update(self, t: float, link_util: float, remote_queue: float, remote_backlog_s: float,
               local_backlog_s: float) -> float:
        """The threshold to route an arrival at time ``t`` with. ``remote_queue``: waiting requests per remote
        instance; backlogs in seconds as described in `ShortTermRule`."""
        r = self.rule
        if t - self.last_change_s < r.interval_s:
            return self.current
        congested = link_util > r.util_high or remote_queue > r.queue_high
        relaxed = link_util < r.util_low and remote_queue < r.queue_low
        if congested and remote_backlog_s > local_backlog_s and self.current < self.base * r.max_factor:
            self.current = min(self.current * r.factor, self.base * r.max_factor)
        elif self.current > self.base and (relaxed or local_backlog_s > remote_backlog_s):
            self.current = max(self.current / r.factor, self.base)
        else:
            return self.current
        self.last_change_s = t
        self.changes += 1
        return self.current


@dataclass(frozen=True)
class LongTermRule:
    """Marks of the role-conversion rule, applied every ``period_s`` seconds to time averages over the
    period. Observed queues first: a decode instance becomes prefill when the local prefill queue exceeds
    ``queue_high`` waiting requests per prefill instance and the remaining decode instances would stay below
    ``busy_max`` occupancy; a prefill instance becomes decode when the decode queue exceeds ``queue_high``
    per decode instance and the remaining prefill instances would stay below ``busy_max`` utilization.
    Otherwise the producer-consumer balance: the throughput model, fed with the period's uncached lengths
    and the link's current rate, converts one instance when that raises ``Lambda_max`` by more than
    ``min_gain``. ``min_samples`` arrivals are needed to consult the model and re-optimize ``t``."""

    period_s: float = 300.0
    queue_high: float = 1.0
    busy_max: float = 0.9
    min_gain: float = 0.05
    min_samples: int = 100


@dataclass(frozen=True)
class Observation:
    """One long-term period: time averages (requests or instances), the split, and the model's relative
    ``Lambda_max`` gain of one more prefill (or one more decode) instance."""

    local_waiting: float
    local_busy: float          # busy local prefill instances
    decode_waiting: float
    decode_busy_slots: float
    n_prefill: int
    n_decode: int
    slots_per_decode: int
    gain_more_prefill: float = 0.0
    gain_more_decode: float = 0.0


def decide(rule: LongTermRule, obs: Observation, min_prefill: int) -> int:
    """+1: one decode instance becomes prefill; -1: one prefill instance becomes decode; 0: keep."""
    n_p, n_d, slots = obs.n_prefill, obs.n_decode, obs.slots_per_decode
    can_up, can_down = n_d > 1, n_p > min_prefill
    if (can_up and obs.local_waiting > rule.queue_high * max(n_p, 1)
            and obs.decode_busy_slots < rule.busy_max * (n_d - 1) * slots):
        return +1
    if (can_down and obs.decode_waiting > rule.queue_high * n_d
            and obs.local_busy < rule.busy_max * (n_p - 1)):
        return -1
    if can_up and obs.gain_more_prefill > rule.min_gain and obs.gain_more_prefill >= obs.gain_more_decode:
        return +1
    if can_down and obs.gain_more_decode > rule.min_gain:
        return -1
    return 0


@dataclass(frozen=True)
class LongTermStep:
    """One period's outcome: ``change`` of the split (+1, -1, 0), the re-optimized ``threshold`` (tokens;
    None: keep the current one) and the model's relative ``gain`` of the change made."""

    change: int
    threshold: float | None
    gain: float


def long_term_step(rule: LongTermRule, sysm, perf: PerfInputs, mode: str, split: int, line_bps: float,
                   lengths, outputs, mean: dict[str, float]) -> LongTermStep:
    """The long-term rule at a period's end: ``split`` local prefill instances (after pending conversions),
    the link's current line rate ``line_bps`` (bit/s), the period's observed uncached ``lengths`` and
    ``outputs`` (tokens), and the time averages ``mean`` of the timeline samples over the period.
    ``sysm`` is the simulated `System` (its layout, slots and base threshold); ``perf`` its performance
    inputs with the simulator's prefill tables."""
    site = sysm.layout.pd_sites[0]
    res = lay = grid = p = None
    up = down = 0.0
    if len(lengths) >= rule.min_samples:  # the throughput model on what this period saw
        pd_site = site.with_split(split)
        if sysm.remote_ok:
            pd_site = replace(pd_site, link=replace(site.link, bandwidth_bps=max(line_bps, 1.0)))
        lay = replace(sysm.layout, pd_sites=(pd_site,))
        grid = empirical_grid(lengths)
        p = replace(perf, output_tokens=sum(outputs) / len(outputs))
        res = surface(lay, grid, p, mode, near=split)
        up, down = split_gains(res, split)
    obs = Observation(mean.get("local_waiting", 0.0), mean.get("local_busy", 0.0), mean.get("decode_waiting", 0.0),
                      mean.get("decode_busy", 0.0), split, site.instances - split, sysm.slots, up, down)
    change = decide(rule, obs, 1 if sysm.threshold >= 0 else 0)
    threshold = None
    if res is not None and sysm.remote_ok and 0 <= sysm.threshold < math.inf:
        threshold = balanced_threshold(lay, grid, p, split + change, mode, res)
    return LongTermStep(change, threshold, up if change > 0 else down)


def empirical_grid(lengths) -> LengthGrid:
    """A `LengthGrid` of observed lengths (tokens), each distinct value weighted by its count."""
    values, counts = np.unique(np.maximum(np.asarray(lengths, dtype=float), 1.0), return_counts=True)
    return LengthGrid(values, counts / counts.sum())


def surface(layout: Layout, grid: LengthGrid, perf: PerfInputs, mode: str = "exact",
            near: int | None = None) -> GridResult:
    """`analytic.search.grid_search` over thresholds and splits; the threshold is free unless the layout
    pins it to ``inf`` (nothing remote) or ``0`` (everything remote). ``near``: with a free threshold,
    only the splits one role conversion reaches from ``near`` local prefill instances (`split_columns`:
    the same columns, all that `split_gains` and the re-optimization of ``t`` after one conversion read)."""
    free = layout.threshold not in (0.0, math.inf)
    if free and near is not None:
        reach = [s for s in (near - 1, near, near + 1) if 0 <= s <= layout.pd_sites[0].instances]
        return split_columns(layout, grid, perf, reach, mode)
    return grid_search(replace(layout, threshold=None) if free else layout, grid, perf, mode)


def split_gains(res: GridResult, n_prefill: int) -> tuple[float, float]:
    """Relative change of the best ``Lambda_max`` (over thresholds) when one decode instance becomes prefill,
    and when one prefill instance becomes decode (0 where the split cannot move)."""
    best = dict(zip(res.splits.tolist(), res.lam.max(axis=0).tolist()))
    here = best.get(n_prefill, 0.0)

    def gain(other: int) -> float:
        if other not in best:
            return 0.0
        if here <= 0:
            return math.inf if best[other] > 0 else 0.0
        return best[other] / here - 1.0

    return gain(n_prefill + 1), gain(n_prefill - 1)
