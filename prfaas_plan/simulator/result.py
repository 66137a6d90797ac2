"""What a simulation produced: per-request times, timelines and counters, and their summary figures.

Times in seconds on the workload's clock (0 = start of the arrivals; a trace's first request), rates in
requests/s, link rates in Gbps (1e9 bit/s), lengths in tokens. A request that has not reached a stage has NaN there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..analytic.uncertainty import percentiles

SIM_METHOD = ("simulated: discrete events; per-cluster prefix caches (512-token KV blocks in a byte-bounded LRU; "
              "linear/window state reusable only from a checkpoint at the last full block of an earlier prompt) "
              "decide the uncached length and route; FCFS prefill pools (earliest-free instance); a "
              "processor-sharing link with time-varying rate and layer-pipelined flows capped at their production "
              "rate; request-level continuous batching on decode; TTFT = time the cache is complete at decode; "
              "TPOT = (finish - that time) / output tokens")
PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, eq=False)
class RunRecord:
    """What an engine hands to `SimResult.build`. Per-request arrays (one entry per request of the workload,
    NaN where a request never reached a stage): ``route`` 0 local / 1 remote / -1 not arrived, ``uncached``
    tokens prefilled, prefill ``p_start``/``p_end``, ``ready`` (cache complete at decode), decode ``d_start``
    and ``finish`` (seconds), ``flow_bytes`` handed to the link. Run-wide: ``arrived`` requests, ``end_s``,
    ``link_bins_bytes`` delivered per timeline bin, ``timeline`` samples, ``roles`` changed, short-term
    ``threshold_changes``, ``server_area`` (server-seconds provisioned per stage), ``prefix_moves``
    (count, bytes), ``peak_flows`` on the link and the long-term ``periods`` (`event_parts.long_term_change`)."""

    route: np.ndarray
    uncached: np.ndarray
    p_start: np.ndarray
    p_end: np.ndarray
    ready: np.ndarray
    d_start: np.ndarray
    finish: np.ndarray
    flow_bytes: np.ndarray
    arrived: int
    end_s: float
    link_bins_bytes: np.ndarray
    timeline: dict[str, np.ndarray]
    roles: list[dict]
    threshold_changes: int
    server_area: dict[str, float]
    prefix_moves: list
    peak_flows: int
    periods: list = field(default_factory=list)   # one entry per long-term period: what the rule saw and did
    spilled: int = 0                              # requests prefilled locally at low priority (`events`)
    preemptions: int = 0                          # spilled runs a planned arrival preempted
    preempted_s: float = 0.0                      # seconds finished spilled runs spent preempted (not busy)


def _count_before(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many of ``times`` (NaN ignored) are strictly before each of ``at``."""
    return np.searchsorted(np.sort(times[np.isfinite(times)]), at, side="left")


def _pct(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {"mean_s": math.nan, "p50_s": math.nan, "p90_s": math.nan, "p99_s": math.nan}
    p50, p90, p99 = percentiles(x, PERCENTILES)
    return {"mean_s": float(x.mean()), "p50_s": float(p50), "p90_s": float(p90), "p99_s": float(p99)}


@dataclass(frozen=True)
class SimResult:
    """Per-request arrays (``route`` 0 local, 1 remote, -1 not arrived), timelines sampled every
    ``sample_s`` seconds, role changes, and the counters behind utilizations and hit rates."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    route: np.ndarray
    uncached_tokens: np.ndarray
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    ready_s: np.ndarray
    decode_start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray          # bytes each remote request sent to decode
    arrived: int
    end_s: float
    sample_s: float
    timeline: dict[str, np.ndarray] = field(hash=False)
    role_changes: tuple[dict, ...]
    threshold_changes: int
    utilization: dict[str, float] = field(hash=False)
    cache: dict[str, dict] = field(hash=False)
    scheduler: str
    threshold: float
    peak_link_flows: int
    egress_bytes: float             # bytes the link delivered in the run (KV and prefix moves; the timeline's sum)
    method: str = SIM_METHOD
    periods: tuple[dict, ...] = ()  # the long-term rule at each period: backlogs seen, decision, reason
    spilled: int = 0                # requests prefilled locally at low priority (`policies.ArrivalDecision`)
    preemptions: int = 0            # spilled runs a planned arrival preempted

    @classmethod
    def build(cls, requests, raw: RunRecord, *, sample_s: float, caches: dict, link_bps: float, scheduler: str,
              threshold: float) -> "SimResult":
        """Assemble the result from an engine's `RunRecord`."""
        timeline = dict(raw.timeline)
        nt = len(timeline["t_s"])
        bins = raw.link_bins_bytes
        sent = np.zeros(nt)
        m = min(nt, len(bins))
        sent[:m] = bins[:m]
        timeline["link_gbps"] = sent * 8e-9 / sample_s
        remote = raw.route == 1
        ts = timeline["t_s"]
        timeline["link_waiting"] = (_count_before(raw.p_end[remote], ts)
                                    - _count_before(raw.ready[remote], ts)).astype(float)
        end = float(raw.end_s)
        route = raw.route

        def busy(start, stop, mask):  # busy time up to the end of the run, seconds
            s, e = start[mask], stop[mask]
            started = np.isfinite(s)
            return float(np.sum(np.where(np.isfinite(e[started]), e[started], end) - s[started]))

        area = raw.server_area
        spent = {"local_prefill": busy(raw.p_start, raw.p_end, route == 0) - raw.preempted_s,
                 "remote_prefill": busy(raw.p_start, raw.p_end, route == 1),
                 "local_decode": busy(raw.d_start, raw.finish, route >= 0)}
        util = {k: (spent[k] / area[k] if area[k] > 0 else 0.0) for k in spent}
        if link_bps > 0 and end > 0:
            util["link"] = float(bins.sum()) * 8.0 / (link_bps * end)
        cache = {}
        for name, c in caches.items():
            if c is not None:
                cache[name] = {"prompt_tokens": c.prompt_tokens, "hit_tokens": c.hit_tokens,
                               "hit_rate": c.hit_rate, "used_bytes": c.used, "evicted": c.evicted}
        moves = raw.prefix_moves
        cache["prefix_moves"] = {"count": moves[0], "link_bytes": moves[1]}
        return cls(requests.arrival_s, requests.input_tokens, requests.output_tokens, route, raw.uncached,
                   raw.p_start, raw.p_end, raw.ready, raw.d_start, raw.finish,
                   raw.flow_bytes, int(raw.arrived), end, sample_s, timeline, tuple(raw.roles),
                   int(raw.threshold_changes), util, cache, scheduler, float(threshold),
                   int(raw.peak_flows), float(sent.sum()), periods=tuple(raw.periods), spilled=int(raw.spilled),
                   preemptions=int(raw.preemptions))

    @property
    def completed(self) -> np.ndarray:
        """Mask of completed requests."""
        return np.isfinite(self.finish_s)

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token per request, seconds: arrival to the cache complete at decode (NaN if never)."""
        return self.ready_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token per request, seconds (NaN unless completed)."""
        return (self.finish_s - self.ready_s) / self.output_tokens

    def throughput(self) -> dict[str, float]:
        """Completed requests per second over the whole run, and over the middle 90% of completions
        (steady state, without the fill and drain transients)."""
        f = np.sort(self.finish_s[self.completed])
        out = {"completed": int(len(f)), "arrived": int(self.arrived),
               "in_flight": int(self.arrived - len(f)), "offered_rps": math.nan,
               "throughput_rps": math.nan, "steady_throughput_rps": math.nan}
        a = self.arrival_s[: self.arrived]
        if self.arrived > 1 and a[-1] > a[0]:  # Python floats: a subnormal span gives inf, not a warning
            out["offered_rps"] = (self.arrived - 1) / (float(a[-1]) - float(a[0]))
        if len(f) and f[-1] > a[0]:
            out["throughput_rps"] = float(len(f) / (f[-1] - a[0]))
        if len(f) >= 20:
            lo, hi = int(0.05 * len(f)), int(0.95 * len(f))
            if f[hi - 1] > f[lo]:
                out["steady_throughput_rps"] = float((hi - 1 - lo) / (f[hi - 1] - f[lo]))
        return out

    def unfinished(self) -> dict[str, object]:
        """Arrived requests that did not finish by the end of the run: ``count``, ``share`` of the arrived,
        and how many of them were routed ``local`` and ``remote``."""
        arrived = self.route >= 0
        left = arrived & ~self.completed
        count = int(left.sum())
        return {"count": count, "share": count / self.arrived if self.arrived else 0.0,
                "local": int((left & (self.route == 0)).sum()), "remote": int((left & (self.route == 1)).sum())}

    def warnings(self) -> list[str]:
        """Plain warnings about figures a reader should not take at face value."""
        left = self.unfinished()
        if not left["count"]:
            return []
        return [f"{left['count']} of {self.arrived} requests ({left['share']:.1%}) did not finish by the end "
                f"of the run ({left['local']} routed local, {left['remote']} remote); throughput counts and latency "
                f"percentiles are over the {self.arrived - left['count']} completed requests only"]

    def summary(self) -> dict[str, object]:
        """Headline figures as one flat dict with unit-suffixed keys. Latency percentiles are over completed
        requests (``latency_over`` says so, with how many were left out: ``unfinished``, by route)."""
        done = self.completed
        ttft = _pct(self.ttft_s[done])
        tpot = _pct(self.tpot_s[done])
        remote = self.route[: self.arrived] == 1
        left = self.unfinished()
        out = dict(self.throughput())
        out.update({"unfinished": left["count"], "unfinished_share": left["share"],
                    "unfinished_local": left["local"], "unfinished_remote": left["remote"],
                    "latency_over": f"{int(done.sum())} completed requests ({left['count']} unfinished excluded)"})
        out.update({f"ttft_{k}": v for k, v in ttft.items()})
        out.update({f"tpot_{k}": v for k, v in tpot.items()})
        out["remote_share"] = float(remote.mean()) if self.arrived else 0.0
        out["mean_uncached_tokens"] = float(self.uncached_tokens[: self.arrived].mean()) if self.arrived else 0.0
        out["egress_gbps"] = self.egress_bytes * 8e-9 / self.end_s if self.end_s > 0 else 0.0
        out["peak_link_flows"] = self.peak_link_flows
        out["threshold_changes"] = self.threshold_changes
        out["role_changes"] = len(self.role_changes)
        out["end_s"] = self.end_s
        return out

    def ttft_by_route(self) -> dict[str, dict[str, float]]:
        """TTFT statistics of local and remote requests separately."""
        done = self.completed
        return {name: _pct(self.ttft_s[done & (self.route == r)]) for name, r in (("local", 0), ("remote", 1))}

    def stage_rows(self) -> list[dict]:
        """Per-stage utilization and time-averaged queue depth."""
        tl = self.timeline
        avg = lambda k: float(tl[k].mean()) if len(tl[k]) else 0.0  # noqa: E731
        peak = lambda k: float(tl[k].max()) if len(tl[k]) else 0.0  # noqa: E731
        rows = [
            {"stage": "remote_prefill", "utilization": self.utilization["remote_prefill"],
             "mean_waiting": avg("remote_waiting"), "peak_waiting": peak("remote_waiting")},
            {"stage": "link", "utilization": self.utilization.get("link", 0.0),
             "mean_waiting": math.nan, "peak_waiting": float(self.peak_link_flows)},
            {"stage": "local_prefill", "utilization": self.utilization["local_prefill"],
             "mean_waiting": avg("local_waiting"), "peak_waiting": peak("local_waiting")},
            {"stage": "local_decode", "utilization": self.utilization["local_decode"],
             "mean_waiting": avg("decode_waiting"), "peak_waiting": peak("decode_waiting")},
        ]
        return rows
