"""The schedulers `simulate` can run, as classes behind one protocol, registered by name.

A scheduler decides routes and instance roles while a workload runs, and says which engines can simulate
it exactly (`ENGINES`: ``pipeline``, the stage-by-stage fast path for fixed decisions, or ``events``, the
general event loop). Its decisions are a policy (`policies`: at_arrival, at_period, one config dataclass
each) that the event loop consults and applies. To add one: write the policy, a class with ``name``,
``engines``, ``policy(cfg, threshold)`` and ``run`` (`PolicyScheduler` gives the event-loop one), decorate it
with `register`, and `simulate(..., SimConfig(t, "its-name"))` and ``simulate --compare`` run it
(``docs/extending.md``).
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from ..errors import PlanError
from .events import run_events
from .pipeline import run_pipeline
from .policies import (AdaptiveConfig, AdaptivePolicy, StaticConfig, StaticPolicy, ThresholdConfig,
                       ThresholdPolicy)
from .result import RunRecord

ENGINES = ("events", "pipeline")


class Scheduler(Protocol):
    """``run`` simulates ``requests`` on the reduced `System` ``sysm`` with ``cfg`` (a `SimConfig`) and the
    `Router` ``router`` on ``engine`` (one of ``engines``; the first is the default), telling ``progress(n)``
    how many requests are routed."""

    name: ClassVar[str]
    engines: ClassVar[tuple[str, ...]]

    def run(self, requests, sysm, cfg, router, progress, engine: str) -> RunRecord: ...


SCHEDULERS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make a `Scheduler` available under its ``name``."""
    SCHEDULERS[cls.name] = cls
    return cls


def get_scheduler(name: str) -> Scheduler:
    """The registered scheduler called ``name``; a `PlanError` listing the others if there is none."""
    if name not in SCHEDULERS:
        raise PlanError(f"`scheduler` {name!r}: expected one of {', '.join(SCHEDULERS)}")
    return SCHEDULERS[name]()


@register
class StaticScheduler:
    """A fixed routing threshold and fixed roles (`policies.StaticPolicy`): a route depends only on the prefix
    caches, never on timing, so the pipeline engine is exact (and a test checks it against the event loop)."""

    name = "static"
    engines = ("pipeline", "events")
    config = StaticConfig

    def policy(self, cfg, threshold: float) -> StaticPolicy:
        return StaticPolicy(StaticConfig(), threshold)

    def run(self, requests, sysm, cfg, router, progress, engine: str) -> RunRecord:
        if engine == "pipeline":
            return run_pipeline(requests, sysm, cfg, router, progress)
        return run_events(requests, sysm, cfg, router, progress, self.policy(cfg, sysm.threshold))


class PolicyScheduler:
    """A scheduler whose decisions depend on the system's state: its policy on the general event loop."""

    engines = ("events",)

    def run(self, requests, sysm, cfg, router, progress, engine: str) -> RunRecord:
        return run_events(requests, sysm, cfg, router, progress, self.policy(cfg, sysm.threshold))


@register
class ThresholdScheduler(PolicyScheduler):
    """The short-term rule alone (`policies.ThresholdPolicy`): the threshold follows the link and the queues,
    the roles stay as planned."""

    name = "threshold"
    config = ThresholdConfig

    def policy(self, cfg, threshold: float) -> ThresholdPolicy:
        return ThresholdPolicy(ThresholdConfig(cfg.short_term), threshold)


@register
class AdaptiveScheduler(PolicyScheduler):
    """PrfaaS's dual-timescale scheduler (`policies.AdaptivePolicy`): the short-term threshold rule at arrivals
    and the long-term role conversion and re-optimization every period."""

    name = "adaptive"
    config = AdaptiveConfig

    def policy(self, cfg, threshold: float) -> AdaptivePolicy:
        return AdaptivePolicy(AdaptiveConfig(cfg.short_term, cfg.long_term, cfg.spill), threshold)
