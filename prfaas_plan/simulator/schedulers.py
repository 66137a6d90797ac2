"""The schedulers `simulate` can run, as classes behind one protocol, registered by name.

A scheduler decides routes and instance roles while a workload runs, and says which engines can simulate
it exactly (`ENGINES`: ``pipeline``, the stage-by-stage fast path for fixed decisions, or ``events``, the
general event loop). To add one: write a class with ``name``, ``engines`` and ``run`` (its decision rules
belong in `scheduler`), decorate it with `register`, and `simulate(..., SimConfig(t, "its-name"))` runs it.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from ..errors import PlanError
from .events import run_events
from .pipeline import run_pipeline
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
    """A fixed routing threshold and fixed roles: a route depends only on the prefix caches, never on timing,
    so the pipeline engine is exact (and a test checks it against the event loop)."""

    name = "static"
    engines = ("pipeline", "events")

    def run(self, requests, sysm, cfg, router, progress, engine: str) -> RunRecord:
        if engine == "pipeline":
            return run_pipeline(requests, sysm, cfg, router, progress)
        return run_events(requests, sysm, cfg, router, progress, adaptive=False)


@register
class AdaptiveScheduler:
    """PrfaaS's dual-timescale scheduler: the short-term threshold rule at every arrival and the long-term
    role conversion and re-optimization every period (`scheduler.AdaptiveThreshold`, `long_term_step`)."""

    name = "adaptive"
    engines = ("events",)

    def run(self, requests, sysm, cfg, router, progress, engine: str) -> RunRecord:
        return run_events(requests, sysm, cfg, router, progress, adaptive=True)
