"""The dual-timescale scheduler of PrfaaS (``docs/methods.md``).

- **Short term** (arrivals, every ``interval_s``): `AdaptiveThreshold` raises the routing threshold ``t`` by
  a factor while the link backs up (smoothed egress utilization or remote queue above a high mark) and the
  remote route is the more backlogged one, lowers it below the long-term value while the local route is the
  more backlogged and the link has room, and returns toward the long-term value as the backlogs even out
  (`ShortTermRule` holds the marks and the hysteresis band).
  It also decides whether bandwidth is *abundant* (utilization below ``abundant_util``), which switches
  the prefix rule from "each cluster's own cache" to "the best cache anywhere, moved across the link".
- **Long term** (every ``period_s``): `decide` (marks in `LongTermRule`) converts one local instance
  between the prefill and decode roles when a queue backlog persisting over the period shows the producers
  (prefill) falling behind the consumer (decode) or the reverse (never undoing the previous period's), and `analytic.search.balanced_threshold` re-optimizes
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
    """Marks of the per-request threshold rule, evaluated at the first arrival at least ``interval_s`` seconds
    after the previous evaluation. The link is *congested* when its utilization (fraction of the current
    goodput, smoothed over ``tau_s`` seconds) exceeds ``util_high`` or the remote queue exceeds ``queue_high``
    waiting requests per remote instance; it is *relaxed* below ``util_low`` and ``queue_low``. The two
    routes' backlogs are compared in seconds: the remote route's is its queued prefill work per remote
    instance plus the unsent KV at the current goodput, the local route's its queued prefill work per local
    instance. Each evaluation makes at most one move, by ``factor``, around the long-term value ``base``:

    1. the link backs up (congested) and the remote backlog exceeds the local one by ``margin_s``: ``t`` up
       (fewer, longer requests go remote), at most to ``max_factor`` x ``base``;
    2. the local backlog exceeds the remote one (queued prefill and unsent KV) by ``margin_s``: ``t`` down
       (more requests go remote, where the link drained), at least to ``min_factor`` x ``base``;
    3. above ``base`` while the link is relaxed, the local backlog is the larger or the local queue forms:
       back down toward ``base``;
    4. below ``base`` once the local backlog is no longer the larger: back up toward ``base``.

    Moves 1 and 4 (more work to the local pool) need the local backlog below ``local_max_s``: the local pool
    serves the short requests, most of them, and a queue there delays the median; 0.01 s is an empty
    queue up to the rounding of the running sum. ``margin_s`` is the hysteresis band: between the marks
    nothing moves. With ``min_factor`` 1 and
    ``margin_s`` 0 the rule never leaves ``[base, max_factor x base]`` (the first version of this rule,
    which under a link drop left the local backlog to drain at the local pool's own pace,
    ``docs/methods.md``)."""

    util_high: float = 0.85
    util_low: float = 0.5
    queue_high: float = 2.0
    queue_low: float = 0.5
    factor: float = 1.25
    max_factor: float = 8.0
    min_factor: float = 0.125
    margin_s: float = 2.0
    local_max_s: float = 0.01
    interval_s: float = 2.0
    tau_s: float = 10.0
    abundant_util: float = 0.5


class AdaptiveThreshold:
    """State of the short-term rule around a long-term threshold ``base`` (tokens)."""

    def __init__(self, rule: ShortTermRule, base: float):
        self.rule = rule
        self.base = float(base)
        self.current = float(base)
        self.last_eval_s = -math.inf
        self.changes = 0

    def reset(self, base: float) -> None:
        """Adopt a new long-term threshold (after re-optimization): the value the rule returns to; the
        threshold in use moves there by the rule's steps (a jump could flood a queue the rule protects)."""
        self.base = float(base)

    def due(self, t: float) -> bool:
        """Whether an arrival at ``t`` (s) evaluates the rule (else `update` would keep the threshold)."""
        return t - self.last_eval_s >= self.rule.interval_s

    def update(self, t: float, link_util: float, remote_queue: float, remote_backlog_s: float,
               local_backlog_s: float) -> float:
        """The threshold to route an arrival at time ``t`` with. ``remote_queue``: waiting requests per remote
        instance; backlogs in seconds as described in `ShortTermRule`."""
        r = self.rule
        if t - self.last_eval_s < r.interval_s:
            return self.current
        self.last_eval_s = t
        congested = link_util > r.util_high or remote_queue > r.queue_high
        relaxed = link_util < r.util_low and remote_queue < r.queue_low
        cur, base = self.current, self.base
        hi, lo = base * r.max_factor, base * r.min_factor
        if (congested and remote_backlog_s > local_backlog_s + r.margin_s and local_backlog_s < r.local_max_s
                and cur < hi):
            cur = min(cur * r.factor, hi)
        elif local_backlog_s > remote_backlog_s + r.margin_s and cur > lo:
            cur = max(cur / r.factor, lo)
        elif cur > base and (relaxed or local_backlog_s > remote_backlog_s or local_backlog_s >= r.local_max_s):
            cur = max(cur / r.factor, base)
        elif cur < base and local_backlog_s <= remote_backlog_s and local_backlog_s < r.local_max_s:
            cur = min(cur * r.factor, base)
        else:
            return cur
        self.current = cur
        self.changes += 1
        return cur


@dataclass(frozen=True)
class LongTermRule:
    """Marks of the role-conversion rule, applied every ``period_s`` seconds to the timeline over the period.
    Observed queues first, and only a backlog that *persists* over the whole period (its minimum over the
    period's samples above the mark, not a burst that its mean would show): a decode instance becomes prefill
    when the local prefill queue stays above ``queue_high`` waiting requests per prefill instance and the
    remaining decode instances would stay below ``busy_max`` occupancy; a prefill instance becomes decode when
    the decode queue stays above ``queue_high`` per decode instance and the remaining prefill instances would
    stay below ``busy_max`` utilization. Otherwise the producer-consumer balance: the throughput model, fed
    with the period's uncached lengths and the link's current rate, converts one instance when that raises
    ``Lambda_max`` by more than ``min_gain``. Hysteresis: no conversion undoes the previous period's.
    ``min_samples`` arrivals are needed to consult the model and re-optimize ``t``."""

    period_s: float = 300.0
    queue_high: float = 1.0
    busy_max: float = 0.9
    min_gain: float = 0.05
    min_samples: int = 100


@dataclass(frozen=True)
class Observation:
    """One long-term period: time averages (requests or instances), the split, the model's relative
    ``Lambda_max`` gain of one more prefill (or one more decode) instance, and the minima of the two queues
    over the period (None: their means)."""

    local_waiting: float
    local_busy: float          # busy local prefill instances
    decode_waiting: float
    decode_busy_slots: float
    n_prefill: int
    n_decode: int
    slots_per_decode: int
    gain_more_prefill: float = 0.0
    gain_more_decode: float = 0.0
    local_waiting_low: float | None = None
    decode_waiting_low: float | None = None


def decide_why(rule: LongTermRule, obs: Observation, min_prefill: int, last_change: int = 0) -> tuple[int, str]:
    """`decide`, with the reason in words."""
    n_p, n_d, slots = obs.n_prefill, obs.n_decode, obs.slots_per_decode
    can_up, can_down = n_d > 1 and last_change >= 0, n_p > min_prefill and last_change <= 0
    local_low = obs.local_waiting if obs.local_waiting_low is None else obs.local_waiting_low
    decode_low = obs.decode_waiting if obs.decode_waiting_low is None else obs.decode_waiting_low
    why = []
    mark = rule.queue_high * max(n_p, 1)
    if local_low > mark:
        limit = rule.busy_max * (n_d - 1) * slots
        if can_up and obs.decode_busy_slots < limit:
            return +1, (f"local prefill backlog persisted (at least {local_low:,.0f} waiting all period, mark "
                        f"{mark:,.0f}) and {n_d - 1} decode instance(s) can hold the {obs.decode_busy_slots:,.0f} "
                        f"busy slots")
        why.append(f"local prefill backlog persisted (at least {local_low:,.0f} waiting, mark {mark:,.0f}) but "
                   + ("the last period converted the other way" if n_d > 1 and last_change < 0 else
                      f"decode cannot spare an instance ({obs.decode_busy_slots:,.0f} busy slots, "
                      f"{max(n_d - 1, 0)} instance(s) hold {limit:,.0f} at {rule.busy_max:.0%})"))
    mark_d = rule.queue_high * n_d
    if decode_low > mark_d:
        limit = rule.busy_max * (n_p - 1)
        if can_down and obs.local_busy < limit:
            return -1, (f"decode backlog persisted (at least {decode_low:,.0f} waiting all period, mark "
                        f"{mark_d:,.0f}) and {n_p - 1} prefill instance(s) can do the work")
        why.append(f"decode backlog persisted (at least {decode_low:,.0f} waiting) but "
                   + ("the last period converted the other way" if n_p > min_prefill and last_change > 0 else
                      f"prefill cannot spare an instance ({obs.local_busy:.1f} busy)"))
    # the model's gain is at its steady state; the instance must also be one the other role can spare now
    # (the rest of decode holds the busy slots seen, the rest of prefill the busy instances seen)
    decode_spares = obs.decode_busy_slots < rule.busy_max * (n_d - 1) * slots
    prefill_spares = obs.local_busy < rule.busy_max * (n_p - 1)
    if can_up and obs.gain_more_prefill > rule.min_gain and obs.gain_more_prefill >= obs.gain_more_decode:
        if decode_spares:
            return +1, (f"the throughput model gains {obs.gain_more_prefill:+.1%} Lambda_max with one more prefill "
                        "instance")
        why.append(f"the throughput model gains {obs.gain_more_prefill:+.1%} with one more prefill instance but "
                   f"decode cannot spare one now ({obs.decode_busy_slots:,.0f} busy slots, {max(n_d - 1, 0)} "
                   f"instance(s) hold {rule.busy_max * (n_d - 1) * slots:,.0f} at {rule.busy_max:.0%})")
    elif can_down and obs.gain_more_decode > rule.min_gain:
        if prefill_spares:
            return -1, (f"the throughput model gains {obs.gain_more_decode:+.1%} Lambda_max with one more decode "
                        "instance")
        why.append(f"the throughput model gains {obs.gain_more_decode:+.1%} with one more decode instance but "
                   f"prefill cannot spare one now ({obs.local_busy:.1f} busy)")
    if not why:
        why.append("no backlog persisted over the period")
    why.append(f"model gain of a conversion {max(obs.gain_more_prefill, obs.gain_more_decode):+.1%} "
               f"(needs > {rule.min_gain:.0%})")
    return 0, "; ".join(why)


def decide(rule: LongTermRule, obs: Observation, min_prefill: int, last_change: int = 0) -> int:
    """+1: one decode instance becomes prefill; -1: one prefill instance becomes decode; 0: keep. ``last_change``:
    the previous period's decision (hysteresis: it is not undone at once)."""
    return decide_why(rule, obs, min_prefill, last_change)[0]


@dataclass(frozen=True)
class LongTermStep:
    """One period's outcome: ``change`` of the split (+1, -1, 0), the re-optimized ``threshold`` (tokens;
    None: keep the current one), the model's relative ``gain`` of the change made and the ``reason``."""

    change: int
    threshold: float | None
    gain: float
    reason: str = ""


def long_term_step(rule: LongTermRule, sysm, perf: PerfInputs, mode: str, split: int, line_bps: float,
                   lengths, outputs, mean: dict[str, float], low: dict[str, float] | None = None,
                   last_change: int = 0) -> LongTermStep:
    """The long-term rule at a period's end: ``split`` local prefill instances (after pending conversions),
    the link's current line rate ``line_bps`` (bit/s), the period's observed uncached ``lengths`` and
    ``outputs`` (tokens), the time averages ``mean`` and minima ``low`` of the timeline samples over the
    period, and the previous period's ``last_change``. ``sysm`` is the simulated `System` (its layout, slots
    and base threshold); ``perf`` its performance inputs with the simulator's prefill tables."""
    site = sysm.layout.pd_sites[0]
    res = lay = grid = p = None
    up = down = 0.0
    low = low or {}
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
                      mean.get("decode_busy", 0.0), split, site.instances - split, sysm.slots, up, down,
                      low.get("local_waiting"), low.get("decode_waiting"))
    change, reason = decide_why(rule, obs, 1 if sysm.threshold >= 0 else 0, last_change)
    threshold = None
    if res is not None and sysm.remote_ok and 0 <= sysm.threshold < math.inf:
        threshold = balanced_threshold(lay, grid, p, split + change, mode, res)
    return LongTermStep(change, threshold, up if change > 0 else down, reason)


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
