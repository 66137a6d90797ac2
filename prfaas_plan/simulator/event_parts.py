"""What the two event loops share (`events.run_events`, the Python reference, and its compiled twin,
`compiled_events`): the event kinds, the timeline's columns, the service tables, the events known before a
run, and the long-term rule's step at a rebalance, which both run in Python.

Times in seconds, sizes in bytes, rates in bytes/s (the link) or bit/s (line rates), lengths in tokens.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .scheduler import long_term_step
from .system import System
from .tables import TablePrefill

# Event kinds; at equal times they run in this order (arrivals before all of them, link completions after).
CAPACITY, LOCAL_DONE, REMOTE_DONE, PREFIX_LOCAL, PREFIX_REMOTE, READY, DECODE_DONE, REBALANCE = range(8)
SAMPLE_KEYS = ("t_s", "link_capacity_gbps", "remote_waiting", "local_waiting", "local_busy", "decode_waiting",
               "decode_busy", "threshold_tokens", "n_prefill", "n_decode", "in_flight")
LONG_TERM_KEYS = tuple((SAMPLE_KEYS.index(k), k) for k in ("local_waiting", "local_busy", "decode_waiting",
                                                             "decode_busy"))  # what `long_term_step` reads


def service_tables(requests, sysm: System):
    """Service times per uncached length up to the longest prompt (`System.service`, arrays indexed by
    tokens), and the performance inputs the long-term rule re-optimizes with (those tables as prefill)."""
    svc = sysm.service(np.arange(int(requests.input_tokens.max()) + 1))
    site = sysm.layout.pd_sites[0]
    reopt_perf = replace(sysm.perf, remote_prefill=TablePrefill(svc["remote_s"], "simulator table"),
                         sites={site.name: replace(sysm.perf.sites[site.name],
                                                   prefill=TablePrefill(svc["local_s"], "simulator table"))})
    return svc, reopt_perf


def sorted_initial_events(cfg, remote_ok: bool, adaptive: bool) -> list[tuple]:
    """The events known before the run, in heap order (a sorted list is a heap): the link profile's rate
    changes (bit/s) and the first rebalance."""
    events = []
    if cfg.link_profile is not None and remote_ok:
        events += [(ts, CAPACITY, 0, bps) for ts, bps in zip(cfg.link_profile.times_s, cfg.link_profile.bps)]
    if adaptive:
        events.append((cfg.long_term.period_s, REBALANCE, 0, 0))
    return sorted(events)


def recent_samples(cfg) -> int:
    """How many of the latest timeline samples a rebalance averages (one period's)."""
    return max(1, int(round(cfg.long_term.period_s / cfg.sample_s)))


def long_term_change(cfg, sysm: System, reopt_perf, t: float, split: int, capacity_Bps: float, recent, lengths,
                     outputs, thr: float):
    """The long-term rule at a rebalance at ``t`` (s): ``split`` local prefill instances once pending
    conversions complete, the link's goodput ``capacity_Bps`` (bytes/s), the `recent_samples` latest
    timeline rows ``recent`` (`SAMPLE_KEYS`), the period's uncached ``lengths`` as the PD cache saw them and
    ``outputs`` (tokens), and the threshold in use ``thr`` (tokens). Returns the `LongTermStep` and the
    entry for ``roles`` (None without a conversion); both event loops call it."""
    mean = {k: sum(r[j] for r in recent) / len(recent) for j, k in LONG_TERM_KEYS} if recent else {}
    step = long_term_step(cfg.long_term, sysm, reopt_perf, cfg.mode, split, capacity_Bps * 8.0 / sysm.efficiency,
                          lengths, outputs, mean)
    if not step.change:
        return step, None
    split += step.change
    return step, {"time_s": t, "change": "decode->prefill" if step.change > 0 else "prefill->decode",
                  "n_prefill": split, "n_decode": sysm.layout.pd_sites[0].instances - split,
                  "threshold_tokens": thr if step.threshold is None else step.threshold, "model_gain": step.gain}
