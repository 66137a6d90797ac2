"""`simulate`: run a workload through a layout with a registered scheduler (`schedulers`), on an engine
that can run it.

Two engines simulate the same system (`System`, `Router`, `SharedLink`): the general event loop
(`events`), needed by the adaptive scheduler whose decisions depend on the system's state, and a
stage-by-stage fast path (`pipeline`) that is exact for the static scheduler. Each scheduler names the
engines it runs on, its default first; a test checks that both engines agree on the static one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analytic.throughput import PerfInputs
from ..errors import PlanError
from ..layout import Layout
from .link import LinkProfile
from . import pipeline
from .requests import Requests
from .result import SimResult
from .routing import Router
from .scheduler import LongTermRule, ShortTermRule
from .schedulers import ENGINES, get_scheduler
from .schedulers import SCHEDULERS as _REGISTRY
from .system import System

SCHEDULERS = tuple(_REGISTRY)
"""Names of the registered schedulers (`schedulers.register`)."""


@dataclass(frozen=True)
class SimConfig:
    """How to run. ``threshold``: routing threshold, uncached tokens (ignored without a remote site).
    ``cache_bytes_per_instance``: prefix-cache pool of a cluster per 8-chip instance in it, bytes, scaled by
    chips for other shapes (`system.NODE_CHIPS`; assumed: the 2 TB of host DRAM of an 8-GPU node, a DGX H200;
    0: no caching; requests without hashes never hit).
    ``block_tokens``: tokens per prefix-cache block (one trace hash id). ``sample_s``: timeline resolution, s.
    ``horizon_s``: stop time, s (None: until every request is done). ``mode``: throughput mode of the
    long-term re-optimization. ``spill``: the adaptive scheduler's overflow kept local runs at low priority
    (`policies.AdaptiveConfig`)."""

    threshold: float
    scheduler: str = "static"
    short_term: ShortTermRule = field(default_factory=ShortTermRule)
    long_term: LongTermRule = field(default_factory=LongTermRule)
    link_profile: LinkProfile | None = None
    cache_bytes_per_instance: float = 2e12
    block_tokens: int = 512
    sample_s: float = 1.0
    horizon_s: float | None = None
    mode: str = "exact"
    spill: bool = True


def simulate(requests: Requests, layout: Layout, perf: PerfInputs, cfg: SimConfig, progress=None,
             engine: str | None = None) -> SimResult:
    """Replay ``requests`` through a single-PD-site ``layout``. ``progress(n)`` is told how many requests
    have been routed (every 4,096 on the event engine, once on the pipeline). ``engine`` forces ``events``
    or ``pipeline`` (the latter only for the static scheduler); by default the static scheduler uses the
    pipeline."""
    scheduler = get_scheduler(cfg.scheduler)
    if engine is not None and engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}")
    if engine is not None and engine not in scheduler.engines:
        raise ValueError(f"the {engine} engine cannot run the {scheduler.name} scheduler")
    if not cfg.sample_s > 0:
        raise PlanError("timeline resolution must be a positive number of seconds")
    sysm = System.build(layout, perf, cfg.threshold)
    pd = rf = None
    if requests.has_blocks and cfg.cache_bytes_per_instance > 0:
        # compiled pools only where numba pays (a small run imports none; the same routes either way)
        pd, rf = sysm.caches(cfg.cache_bytes_per_instance, cfg.block_tokens,
                             len(requests) >= pipeline.COMPILED_FROM)
        most = (int(requests.input_tokens.sum()) // cfg.block_tokens * pd.block_bytes
                + len(requests) * pd.checkpoint_bytes)
        pd.assume_fits(most)  # when all the workload's blocks fit, recency never matters
        rf.assume_fits(most)
    router = Router(pd, rf, sysm.remote_ok)
    raw = scheduler.run(requests, sysm, cfg, router, progress, engine or scheduler.engines[0])
    return SimResult.build(requests, raw, sample_s=cfg.sample_s, caches={"pd": pd, "prfaas": rf},
                           link_bps=sysm.link_bps, scheduler=cfg.scheduler, threshold=sysm.threshold)
