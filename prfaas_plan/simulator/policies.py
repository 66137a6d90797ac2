"""Scheduler policies: what a scheduler decides, apart from the event loops that apply it.

As in BLIS ("policies return decisions, the simulator applies them"), a policy never touches the simulated
system. The event loop (`events.run_events`, and its compiled twin `compiled_events`) builds an observation
and asks:

- ``at_arrival(ArrivalObs) -> ArrivalDecision``: the routing threshold (tokens), whether bandwidth is
  *abundant* (the prefix rule that moves a cached prefix across the link) and the length above which a
  request kept local runs at low priority (``spill_above``), for each arrival of a policy that ``reacts``;
- ``at_period(PeriodObs) -> PeriodDecision``: every ``period_s`` seconds for a ``periodic`` policy, one
  role change (+1: a local decode instance prefills, -1: the reverse, 0: none), a re-optimized threshold,
  and the reason in words.

A policy's numbers live in its config dataclass. ``compiled()`` returns the constants the compiled loop's
short-term rule takes (`CompiledRule`), or None: then runs of any size take the Python loop. The compiled
loop implements one family of arrival rules (`scheduler.ShortTermRule`); ``at_period`` runs in Python in
both loops. Register a policy's scheduler in `schedulers` (``docs/extending.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol

from .scheduler import AdaptiveThreshold, LongTermRule, ShortTermRule, long_term_step


class ArrivalObs:
    """What the loop sees at an arrival: time ``t_s`` (s), the link's smoothed utilization ``link_util``
    (fraction of its current goodput), ``remote_queue`` (waiting requests per remote instance), and
    ``backlogs()``: (remote, local) backlog in seconds (`ShortTermRule`), computed only when asked. One
    instance per run, refilled at each arrival (no object built per request)."""

    __slots__ = ("t_s", "link_util", "remote_queue", "backlogs")

    def __init__(self, backlogs: Callable[[], tuple[float, float]]):
        self.t_s = 0.0
        self.link_util = 0.0
        self.remote_queue = 0.0
        self.backlogs = backlogs


class ArrivalDecision(NamedTuple):
    """Route an arrival with ``threshold`` (tokens; at most this many uncached tokens prefill locally) and the
    ``abundant``-bandwidth prefix rule (`routing.Router`). A request kept local with more than ``spill_above``
    uncached tokens is *spilled*: it runs on the local prefill pool at low priority, only on an instance no
    planned request wants (a planned arrival preempts it; it resumes where it stopped, `events`), so the
    overflow the link cannot carry uses the local pool's idle time without delaying the requests the pool
    was planned for (inf: no spilling, every local request is planned)."""

    threshold: float
    abundant: bool
    spill_above: float = math.inf


@dataclass(frozen=True)
class PeriodObs:
    """A long-term period's end at ``t_s`` (s): ``split`` local prefill instances once pending conversions
    complete, the link's line rate ``line_bps`` (bit/s), the period's uncached ``lengths`` (as the PD cache saw
    them) and ``outputs`` (tokens), the time averages ``mean`` and minima ``low`` of the timeline over the
    period (`event_parts.LONG_TERM_KEYS`), the threshold in use (tokens), and the simulated ``system`` with its
    performance inputs ``perf`` (the simulator's prefill tables) and throughput ``mode``."""

    t_s: float
    split: int
    line_bps: float
    lengths: list
    outputs: list
    mean: dict
    low: dict
    threshold: float
    system: object
    perf: object
    mode: str


@dataclass(frozen=True)
class PeriodDecision:
    """``change`` of the split (+1, -1, 0), the re-optimized ``threshold`` (tokens; None: keep), the model's
    relative ``gain`` of the change, and ``reason``: why, in words."""

    change: int
    threshold: float | None
    gain: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class CompiledRule:
    """What the compiled loop needs of a policy: whether it ``reacts`` at arrivals (with ``short_term``), and
    whether it is ``periodic`` (a rebalance event every ``period_s``; the decision still comes from Python)."""

    reacts: bool
    periodic: bool
    short_term: ShortTermRule = field(default_factory=ShortTermRule)
    period_s: float = math.inf


class Policy(Protocol):
    """A scheduler's decisions (see the module docstring); one instance per run (it may keep state)."""

    reacts: bool
    periodic: bool
    period_s: float
    threshold_changes: int
    spare_instances: int  # local prefill instances a spilled request must leave free (`events`)
    spill_chunk_tokens: int  # tokens a spilled run's forward carries (0: the engine's budget, `events`)
    spill_layerwise: bool    # a spilled run's forward yields between layers (else at its end, `events`)

    def at_arrival(self, obs: ArrivalObs) -> ArrivalDecision: ...

    def at_period(self, obs: PeriodObs) -> PeriodDecision: ...

    def compiled(self) -> CompiledRule | None: ...


@dataclass(frozen=True)
class StaticConfig:
    """The static policy takes no numbers: the plan's threshold and split, kept."""


class StaticPolicy:
    """The plan's threshold for every arrival, never a role change: a route depends only on the prefix caches."""

    reacts = False
    periodic = False
    period_s = math.inf
    threshold_changes = 0
    spare_instances = 0
    spill_chunk_tokens = 0
    spill_layerwise = False

    def __init__(self, config: StaticConfig, threshold: float):
        self.config = config
        self._decision = ArrivalDecision(float(threshold), False)

    def at_arrival(self, obs: ArrivalObs) -> ArrivalDecision:
        return self._decision

    def at_period(self, obs: PeriodObs) -> PeriodDecision:
        return PeriodDecision(0, None, 0.0, "static: roles fixed")

    def compiled(self) -> CompiledRule:
        return CompiledRule(False, False)


@dataclass(frozen=True)
class ThresholdConfig:
    """The short-term rule alone (`ShortTermRule`)."""

    short_term: ShortTermRule = field(default_factory=ShortTermRule)


class ThresholdPolicy:
    """The short-term half of PrfaaS's scheduler: the threshold follows the link and the queues
    (`scheduler.AdaptiveThreshold`), the roles stay as planned."""

    periodic = False
    period_s = math.inf
    spare_instances = 0
    spill_chunk_tokens = 0
    spill_layerwise = False

    def __init__(self, config: ThresholdConfig, threshold: float):
        self.config = config
        self.short = AdaptiveThreshold(config.short_term, threshold)
        self.reacts = True

    @property
    def threshold_changes(self) -> int:
        return self.short.changes

    def at_arrival(self, obs: ArrivalObs) -> ArrivalDecision:
        s = self.short
        thr = s.current
        if s.due(obs.t_s):
            remote_s, local_s = obs.backlogs()
            thr = s.update(obs.t_s, obs.link_util, obs.remote_queue, remote_s, local_s)
        return ArrivalDecision(thr, obs.link_util < s.rule.abundant_util)

    def at_period(self, obs: PeriodObs) -> PeriodDecision:
        return PeriodDecision(0, None, 0.0, "threshold-only: roles fixed")

    def compiled(self) -> CompiledRule:
        return CompiledRule(True, False, self.config.short_term)


@dataclass(frozen=True)
class AdaptiveConfig:
    """PrfaaS's dual-timescale scheduler: the short-term rule and the long-term one (`LongTermRule`).
    ``spill``: the requests the raised threshold keeps local beyond the planned one run at low priority
    (`ArrivalDecision`); False: the earlier version, where they queue FCFS with the planned ones (and runs of
    `pipeline.COMPILED_FROM` requests or more take the compiled loop). ``spare_instances``: a request is
    spilled only onto an idle instance while more than this many local prefill instances are free (else it
    keeps the route below), so that a planned arrival rarely has to preempt one and wait for the spilled run's
    forward in progress. 2 kept the median at or below static's under every drop tested (docs/methods.md); 1
    did not, and more instances keep the tail on the link; a pool of 2 or fewer local prefill instances never
    spills. ``spill_chunk_tokens``: the forward size a spilled run prefills in (at most the stack's budget; a
    prefill model without a chunked stack keeps its own), and ``spill_layerwise``: its forwards yield to a
    planned arrival between layers (`events`, step 2). Together they bound what a planned arrival waits for
    to one layer of a 2,048-token forward (about 1 ms: kimi-linear-48b, 27 layers) instead of the rest of an
    8,192-token forward (up to ~80 ms): with chunk-boundary preemption only, the median of the planned
    requests rose 0.9-1.3% under the link drops (docs/methods.md); the smaller forwards cost each spilled run
    the stack's per-forward overhead per extra forward; a resumed forward is charged nothing more (the
    remaining layers' launches are those it would have made)."""

    short_term: ShortTermRule = field(default_factory=ShortTermRule)
    long_term: LongTermRule = field(default_factory=LongTermRule)
    spill: bool = True
    spare_instances: int = 2
    spill_chunk_tokens: int = 2048
    spill_layerwise: bool = True


class AdaptivePolicy(ThresholdPolicy):
    """The short-term rule at every arrival, and every ``period_s`` the long-term rule (`long_term_step`):
    one role conversion at most, then ``t`` re-optimized for the split.

    With ``spill`` the local pool keeps its planned work first: a request above the lower of the plan's
    threshold and the long-term value that the short-term rule keeps local (the link backs up) is spilled
    (`ArrivalDecision`). Without it, the raised threshold moved the link's overflow into the local FCFS queue,
    where it delayed the short requests that make the median (P50 1.50 s against static's 0.96 s under
    ``examples/link-drop.csv``, docs/methods.md); and a long-term value re-optimized for a dropped link would
    make the overflow planned work."""

    periodic = True

    def __init__(self, config: AdaptiveConfig, threshold: float):
        super().__init__(ThresholdConfig(config.short_term), threshold)
        self.config = config
        self.period_s = config.long_term.period_s
        self._last_change = 0          # direction of the last conversion (hysteresis: `decide`)
        self._plan = float(threshold)  # the threshold the local pool was sized for (t = 0)
        self.spare_instances = config.spare_instances if config.spill else 0
        self.spill_chunk_tokens = config.spill_chunk_tokens if config.spill else 0
        self.spill_layerwise = config.spill_layerwise and config.spill

    def at_arrival(self, obs: ArrivalObs) -> ArrivalDecision:
        d = ThresholdPolicy.at_arrival(self, obs)
        if not self.config.spill:
            return d
        return ArrivalDecision(d.threshold, d.abundant, min(self._plan, self.short.base))

    def at_period(self, obs: PeriodObs) -> PeriodDecision:
        step = long_term_step(self.config.long_term, obs.system, obs.perf, obs.mode, obs.split, obs.line_bps,
                              obs.lengths, obs.outputs, obs.mean, obs.low, self._last_change)
        self._last_change = step.change
        if step.threshold is not None:
            self.short.reset(step.threshold)
        return PeriodDecision(step.change, step.threshold, step.gain, step.reason)

    def compiled(self) -> CompiledRule | None:
        if self.config.spill:  # the compiled loop has no low-priority class: the Python loop runs it
            return None
        return CompiledRule(True, True, self.config.short_term, self.period_s)
