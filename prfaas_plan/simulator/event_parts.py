"""What the two event loops share (`events.run_events`, the Python reference, and its compiled twin,
`compiled_events`): the event kinds, the timeline's columns, the service tables, the events known before a
run, and the long-term rule's step at a rebalance, which both run in Python.

Times in seconds, sizes in bytes, rates in bytes/s (the link) or bit/s (line rates), lengths in tokens.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

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


def spill_tables(sysm: System, policy, t_local: list) -> tuple[int, int, list]:
    """How spilled runs prefill under ``policy``: the forward size (tokens; its ``spill_chunk_tokens``, 0 or
    absent: the engine's, `System.spill_chunk`), the points a forward can yield at (the model's layers when the
    policy's ``spill_layerwise``, else 1: chunk boundaries only) and their busy seconds per uncached length (a
    list indexed by tokens, ``t_local`` itself at the engine's budget)."""
    chunk = sysm.spill_chunk(getattr(policy, "spill_chunk_tokens", 0))
    points = max(1, int(sysm.perf.model.num_layers)) if getattr(policy, "spill_layerwise", False) else 1
    if chunk == sysm.chunk_tokens:
        return chunk, points, t_local
    return chunk, points, sysm.spill_busy_s(np.arange(len(t_local)), chunk).tolist()


def first_boundary(spill_running: dict, t_spill, uncached, chunk: int, t: float,
                   points: int = 1) -> tuple[float, int, float]:
    """Of the spilled runs on an instance (``spill_running``: request -> (this run's start, seconds left then)),
    the one whose next yield point after ``t`` comes first (chunked prefill: ``chunk`` tokens a forward, each
    an equal share of the run's busy time ``t_spill[uncached[r]]``, the spilled runs' table; a forward yields
    at ``points`` equal steps, its layers when spilled runs prefill layer-wise, else at its end): (seconds
    until it, the request, seconds left after it); (inf, -1, 0) when every run is in its last step. The loops
    preempt with it."""
    best, best_rid, best_left = math.inf, -1, 0.0
    for r, (s0, left0) in spill_running.items():
        total = t_spill[uncached[r]]
        c = total / (max(1, -(-uncached[r] // chunk)) * points)  # seconds a step
        done = total - left0 + (t - s0)
        boundary = math.ceil(done / c - 1e-9) * c if c > 0 else total
        if boundary < total - 1e-9 and boundary - done < best:
            best, best_rid, best_left = boundary - done, r, total - boundary
    return best, best_rid, best_left


def sorted_initial_events(cfg, remote_ok: bool, period_s: float | None) -> list[tuple]:
    """The events known before the run, in heap order (a sorted list is a heap): the link profile's rate
    changes (bit/s) and, for a periodic policy (``period_s`` not None), the first rebalance."""
    events = []
    if cfg.link_profile is not None and remote_ok:
        events += [(ts, CAPACITY, 0, bps) for ts, bps in zip(cfg.link_profile.times_s, cfg.link_profile.bps)]
    if period_s is not None:
        events.append((period_s, REBALANCE, 0, 0))
    return sorted(events)


def recent_samples(cfg, period_s: float) -> int:
    """How many of the latest timeline samples a rebalance reads (one period's)."""
    if not period_s < float("inf"):  # a policy without periods never rebalances
        return 1
    return max(1, int(round(period_s / cfg.sample_s)))


def long_term_change(policy, cfg, sysm: System, reopt_perf, t: float, split: int, capacity_Bps: float, recent,
                     lengths, outputs, thr: float):
    """Ask ``policy`` for its decision at a rebalance at ``t`` (s): ``split`` local prefill instances once
    pending conversions complete, the link's goodput ``capacity_Bps`` (bytes/s), the latest timeline rows
    ``recent`` (one period's, `SAMPLE_KEYS`), the period's uncached ``lengths`` as the PD cache saw them and
    ``outputs`` (tokens), and the threshold in use ``thr`` (tokens). Returns the `policies.PeriodDecision`,
    the entry for ``roles`` (None without a conversion) and the entry for ``periods`` (what the rule saw and
    did); both event loops call it."""
    from .policies import PeriodObs

    mean = {k: sum(r[j] for r in recent) / len(recent) for j, k in LONG_TERM_KEYS} if recent else {}
    low = {k: min(r[j] for r in recent) for j, k in LONG_TERM_KEYS} if recent else {}
    step = policy.at_period(PeriodObs(t, split, capacity_Bps * 8.0 / sysm.efficiency, lengths, outputs, mean, low,
                                      thr, sysm, reopt_perf, cfg.mode))
    new_thr = thr if step.threshold is None else step.threshold
    after = split + step.change
    n_all = sysm.layout.pd_sites[0].instances
    period = {"time_s": t, "change": {1: "decode->prefill", -1: "prefill->decode"}.get(step.change, "none"),
              "n_prefill": after, "n_decode": n_all - after, "threshold_tokens": new_thr,
              "local_waiting_mean": mean.get("local_waiting", 0.0), "local_waiting_min": low.get("local_waiting", 0.0),
              "decode_waiting_mean": mean.get("decode_waiting", 0.0),
              "decode_busy_mean": mean.get("decode_busy", 0.0), "reason": step.reason}
    if not step.change:
        return step, None, period
    return step, {"time_s": t, "change": period["change"], "n_prefill": after, "n_decode": n_all - after,
                  "threshold_tokens": new_thr, "model_gain": step.gain}, period
