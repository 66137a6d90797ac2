"""Latency under load: the TTFT distribution and TPOT of a single-PD-site layout at an offered load.

The unloaded model (`prfaas_plan.analytic.ttft`) gives the service part of TTFT; this module adds queueing and a
shared link. All times are seconds, rates requests/s, sizes bytes, link rates bit/s.

- **Prefill pools** (remote and local, each fed by its share of a Poisson stream, which stays Poisson):
  M/G/c with the Allen-Cunneen approximation. ``P(wait > 0)`` is Erlang C at the pool's utilization;
  the mean wait is the M/M/c one times ``(1 + SCV) / 2``, with the service-time squared coefficient of
  variation computed from the length distribution on the `LengthGrid`; the wait beyond ``P(wait > 0)``
  is taken as exponential with that mean (the heavy-traffic tail of Kingman-Whitt).
- **Link** (remote requests): the KV of a request of length ``l`` needs ``X(l) = 8 S_kv(l) / goodput``
  seconds alone on the link (``S_kv``: the bytes the transfer moves, `PerfInputs.transfer_bytes`);
  concurrent transfers share it as an M/G/1 processor-sharing server, so a
  transfer takes ``X / (1 - rho_link)``. It is pipelined with prefill layer by layer: the cache has
  arrived at ``(T_r - B_r) + max(B_r, X') + X' / layers + RTT / 2`` (``B_r``: busy time;
  `ttft.remote_ready_s`). Inter-datacenter TCP runs at the link's own efficiency (goodput 95% of line
  rate by default).
- **Intra-cluster RDMA** (local requests): prefill to decode over the instance's NICs at the efficiency
  Mooncake measured for the transfer's size (`rdma_efficiency`); pipelined, so only the last layer's
  share is exposed.
- **Percentiles** of the mixture of routes: ``P(TTFT <= x) = sum_i w_i P(W_route(i) <= x - s_i)`` over
  the grid points ``i`` (service-plus-transfer ``s_i``), inverted by bisection.
- **TPOT**: the decode step at the SLO (the batch limit keeps every step within it) plus the wait for a
  decode slot (M/D/c over ``N_d x batch`` slots, each held ``L_out x step`` seconds) spread over the
  output tokens.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .._data import REFERENCE_DIR
from ..errors import PlanError
from ..layout import Layout
from .throughput import LengthGrid, PerfInputs, evaluate, offloads
from .ttft import SUMMARY_PERCENTILES, remote_ready_s, weighted_percentiles

METHOD = ("analytic: M/G/c waits per prefill pool (Allen-Cunneen: Erlang-C P(wait>0), M/M/c mean wait x "
          "(1+SCV)/2 with the service SCV from the length distribution, exponential tail), + prefill time, + "
          "for remote requests the KV transfer pipelined with prefill (max(prefill, X') + X'/layers + RTT/2, "
          "X' = X/(1 - rho_link): M/G/1 processor sharing on the link at TCP goodput), for local requests the "
          "exposed last layer of the RDMA transfer at Mooncake's measured efficiency for its size; "
          "percentiles of the mixture of routes; TPOT = SLO step + M/D/c decode-slot wait / output tokens")

RDMA_TABLE = REFERENCE_DIR / "mooncake_h20_qwen3_235b_pd.csv"
PERCENTILES = (50.0, 90.0, 99.0)


@lru_cache(maxsize=1)
def _rdma_points() -> tuple[np.ndarray, np.ndarray]:
    """(log transfer size in bytes, fraction of line rate) from Mooncake's H20 measurement."""
    lines = [l for l in RDMA_TABLE.read_text().splitlines() if l and not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    size = np.array([float(r["kv_size_gb"]) * 1e9 for r in rows])
    eff = np.array([float(r["link_utilization"]) for r in rows])
    return np.log(size), eff


def rdma_efficiency(size_bytes) -> np.ndarray:
    """Achieved fraction of RDMA line rate for a transfer of ``size_bytes`` (Mooncake, H20-3e, 4x400GbE):
    linear in log size between the measured points (12% at 49 MB, 82% at 12.6 GB), flat beyond them."""
    log_size, eff = _rdma_points()
    return np.interp(np.log(np.maximum(np.asarray(size_bytes, dtype=float), 1.0)), log_size, eff)


def rdma_tail_s(size_bytes, instance, layers: int) -> np.ndarray:
    """Exposed part of an intra-cluster prefill->decode transfer of ``size_bytes``, seconds: the last of
    ``layers`` layers' share at the instance's NIC line rate x `rdma_efficiency` (0 when the chip profile
    gives no NIC figure)."""
    size = np.asarray(size_bytes, dtype=float)
    line_bps = instance.chips * instance.chip.nic_gbps * 1e9
    if line_bps <= 0:
        return np.zeros_like(size)
    return size * 8.0 / (line_bps * rdma_efficiency(size)) / layers


def erlang_c(servers: int, offered: float) -> float:
    """M/M/c probability that an arrival waits, for ``servers`` servers and ``offered`` Erlangs
    (arrival rate x mean service time); 1 when ``offered >= servers``."""
    if servers <= 0 or offered >= servers:
        return 1.0
    if offered <= 0:
        return 0.0
    b = 1.0  # Erlang B by its stable recursion
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1.0 - rho * (1.0 - b))


@dataclass(frozen=True)
class PoolWait:
    """Queueing at one pool of identical servers fed by a Poisson stream (Allen-Cunneen M/G/c)."""

    servers: int
    arrival_rps: float
    mean_service_s: float
    scv: float                 # squared coefficient of variation of the service time
    utilization: float
    p_wait: float              # P(wait > 0)
    mean_wait_s: float         # E[wait], inf when utilization >= 1

    def wait_cdf(self, x) -> np.ndarray:
        """``P(wait <= x)`` for ``x`` seconds (0 below zero; exponential beyond the atom at zero)."""
        x = np.asarray(x, dtype=float)
        if self.arrival_rps <= 0:
            return np.where(x >= 0, 1.0, 0.0)
        if not math.isfinite(self.mean_wait_s):
            return np.zeros_like(x)
        if self.p_wait <= 0 or self.mean_wait_s <= 0:
            return np.where(x >= 0, 1.0, 0.0)
        theta = self.mean_wait_s / self.p_wait
        return np.where(x >= 0, 1.0 - self.p_wait * np.exp(-np.maximum(x, 0.0) / theta), 0.0)


def pool_wait(arrival_rps: float, servers: int, service_s, weights) -> PoolWait:
    """`PoolWait` for service times ``service_s`` (s) with probabilities ``weights`` (normalized here)."""
    s = np.asarray(service_s, dtype=float)
    w = np.asarray(weights, dtype=float)
    arrival_rps = float(arrival_rps)
    if arrival_rps <= 0 or w.sum() <= 0:
        return PoolWait(servers, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    w = w / w.sum()
    mean = float(np.dot(w, s))
    var = float(np.dot(w, (s - mean) ** 2))
    scv = var / mean**2 if mean > 0 else 0.0
    offered = arrival_rps * mean
    rho = offered / servers if servers > 0 else math.inf
    if rho >= 1.0:
        return PoolWait(servers, arrival_rps, mean, scv, rho, 1.0, math.inf)
    pw = erlang_c(servers, offered)
    wait = pw * mean / (servers * (1.0 - rho)) * (1.0 + scv) / 2.0
    return PoolWait(servers, arrival_rps, mean, scv, rho, pw, wait)


@dataclass(frozen=True)
class LatencySummary:
    """TTFT and TPOT at one offered load. Seconds, requests/s; ``utilization`` per stage (fraction);
    ``queue_wait_s`` mean wait per queue; ``p_wait`` probability of waiting per queue."""

    rate_rps: float
    load: float                # rate / lambda_max
    lambda_max_rps: float
    threshold: float
    n_prefill: int
    n_decode: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    tpot_s: float
    decode_batch_mean: float   # mean busy decode slots per decode instance
    utilization: dict[str, float] = field(hash=False)
    queue_wait_s: dict[str, float] = field(hash=False)
    p_wait: dict[str, float] = field(hash=False)
    method: str = METHOD
    extra_s: dict[float, float] = field(default_factory=dict, hash=False, compare=False)  # percentile -> s

    @property
    def stable(self) -> bool:
        """False when some stage is at or beyond saturation (waits grow without bound)."""
        return all(u < 1.0 for u in self.utilization.values())


def _mixture_percentiles(service: np.ndarray, weights: np.ndarray, pools: list[PoolWait],
                         route: np.ndarray, qs) -> np.ndarray:
    """Percentiles of ``service[i] + wait_{route[i]}`` over the grid by bisection on the mixture CDF."""
    qs = np.asarray(qs, dtype=float) / 100.0
    thetas = [p.mean_wait_s / p.p_wait if p.p_wait > 0 and math.isfinite(p.mean_wait_s) else 0.0
              for p in pools]
    lo = np.full(qs.shape, float(service.min()))
    hi = np.full(qs.shape, float(service.max()) + 60.0 * max(thetas + [1e-9]))

    def cdf(x: np.ndarray) -> np.ndarray:
        total = np.zeros_like(x)
        for r, pool in enumerate(pools):
            m = route == r
            if m.any():
                total += (weights[m][None, :] * pool.wait_cdf(x[:, None] - service[m][None, :])).sum(axis=1)
        return total / weights.sum()

    for _ in range(80):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < qs
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return hi


def ttft_under_load(layout: Layout, grid: LengthGrid, perf: PerfInputs, threshold: float | None = None,
                    n_prefill: int | None = None, load: float | None = None, rate: float | None = None,
                    mode: str = "exact", percentiles: tuple[float, ...] = ()) -> LatencySummary:
    """TTFT percentiles and TPOT of a single-PD-site layout at ``rate`` requests/s, or at ``load`` x its
    ``lambda_max`` (throughput model in ``mode``). ``threshold``/``n_prefill`` default to the layout's;
    ``percentiles`` (0-100) beyond P50/P90/P99 go to ``extra_s``."""
    if (load is None) == (rate is None):
        raise PlanError("give exactly one of load (fraction of lambda_max) or rate (requests/s)")
    ev = evaluate(layout, grid, perf, threshold, n_prefill, mode)
    lam = float(rate) if rate is not None else float(load) * ev.lambda_max
    if not (math.isfinite(lam) and lam > 0):
        raise PlanError(f"offered load must be a positive rate, got {lam!r} requests/s")
    site = layout.pd_sites[0]
    sp = perf.sites[site.name]
    l = grid.lengths
    w = grid.weights
    remote_on = offloads(layout, perf, site)
    is_remote = (l > ev.threshold) if remote_on else np.zeros(l.shape, dtype=bool)

    size = perf.transfer_bytes(l, site.name)  # bytes a transfer moves per grid length
    local_s = np.asarray(sp.prefill.latency_s(l), dtype=float)
    # queues hold instances for their busy time; a request's own TTFT takes its full latency
    local_pool = pool_wait(lam * w[~is_remote].sum(), ev.n_prefill, grid.busy_at_lengths(sp.prefill)[~is_remote],
                           w[~is_remote])
    service = local_s + rdma_tail_s(size, site.instance, perf.model.num_layers)
    queues = {"local_prefill": local_pool}
    util = {"local_prefill": local_pool.utilization}
    pools = [local_pool]
    if remote_on:
        remote_s = np.asarray(perf.remote_prefill.latency_s(l), dtype=float)
        remote_busy = grid.busy_at_lengths(perf.remote_prefill)
        remote_pool = pool_wait(lam * w[is_remote].sum(), layout.remote.instances, remote_busy[is_remote],
                                w[is_remote])
        x = size * 8.0 / site.link.goodput_bps
        rho_link = lam * float(np.dot(w[is_remote], x[is_remote]))  # M/G/1-PS load of the link
        x_loaded = x / (1.0 - rho_link) if rho_link < 1.0 else np.full_like(x, math.inf)
        remote_total = remote_ready_s(remote_s, remote_busy, x_loaded, perf.model.num_layers, site.link.rtt_s)
        service = np.where(is_remote, remote_total, service)
        queues["remote_prefill"] = remote_pool
        util["remote_prefill"] = remote_pool.utilization
        util["link"] = rho_link
        pools.append(remote_pool)

    route = is_remote.astype(int)
    slots = int(ev.n_decode * sp.decode.batch)
    hold = perf.output_tokens * sp.decode.step_s
    decode = pool_wait(lam, slots, [hold], [1.0])
    util["local_decode"] = decode.utilization
    queues["decode_slot"] = decode
    tpot = sp.decode.step_s + decode.mean_wait_s / perf.output_tokens

    extra = tuple(float(q) for q in percentiles if q not in SUMMARY_PERCENTILES)
    # a saturated link makes remote requests' transfer unbounded (x_loaded inf) even with stable pools
    if all(p.utilization < 1.0 for p in pools) and util.get("link", 0.0) < 1.0:
        values = _mixture_percentiles(service, w, pools, route, PERCENTILES + extra)
        p50, p90, p99 = values[:3]
        mean = float(np.dot(w, service)) + sum(p.arrival_rps * p.mean_wait_s for p in pools) / lam
    else:
        values = np.full(3 + len(extra), math.inf)
        p50 = p90 = p99 = mean = math.inf
    return LatencySummary(
        lam, lam / ev.lambda_max if ev.lambda_max > 0 else math.inf, ev.lambda_max, ev.threshold,
        ev.n_prefill, ev.n_decode, float(mean), float(p50), float(p90), float(p99), float(tpot),
        lam * hold / ev.n_decode if ev.n_decode else math.inf, util,
        {k: q.mean_wait_s for k, q in queues.items()}, {k: q.p_wait for k, q in queues.items()}, METHOD,
        {q: float(x) for q, x in zip(extra, values[3:])})


class SloModel:
    """`ttft_under_load`'s model of one single-PD-site layout, reduced to the SLO test: its per-length arrays
    computed once, then for any threshold, split and rate whether TTFT's percentile (0: the mean) stays
    within the target -- ``P(TTFT <= target) >= q``, one evaluation of the mixture CDF at the target,
    instead of a bisection over the percentile -- with every stage stable (`LatencySummary.stable`)."""

    def __init__(self, layout: Layout, grid: LengthGrid, perf: PerfInputs, percentile: float, target_s: float):
        site = layout.pd_sites[0]
        sp = perf.sites[site.name]
        self.l, self.w = grid.lengths, grid.weights   # as `ttft_under_load` weighs them (sum 1 up to rounding)
        self.total = float(grid.weights.sum())
        self.q, self.target = percentile / 100.0, target_s
        self.instances = site.instances
        size = perf.transfer_bytes(self.l, site.name)
        self.local_busy = grid.busy_at_lengths(sp.prefill)
        self.local_svc = (np.asarray(sp.prefill.latency_s(self.l), dtype=float)
                          + rdma_tail_s(size, site.instance, perf.model.num_layers))
        self.remote_on = offloads(layout, perf, site)
        self.slots_per_decode = sp.decode.batch
        self.hold = perf.output_tokens * sp.decode.step_s
        if self.remote_on:
            self.remote_servers = layout.remote.instances
            self.remote_lat = np.asarray(perf.remote_prefill.latency_s(self.l), dtype=float)
            self.remote_busy = grid.busy_at_lengths(perf.remote_prefill)
            self.x = size * 8.0 / site.link.goodput_bps
            self.layers, self.rtt = perf.model.num_layers, site.link.rtt_s
            self.remote_unloaded = remote_ready_s(self.remote_lat, self.remote_busy, self.x, self.layers, self.rtt)
        self.evaluated = 0

    def remote_mask(self, t: float) -> np.ndarray:
        return (self.l > t) if self.remote_on else np.zeros(self.l.shape, dtype=bool)

    def stability(self, t: float, n_p: int) -> float:
        """The rate (requests/s) at which the first of local prefill, remote prefill, link and decode slots
        saturates at threshold ``t`` and ``n_p`` local prefill instances."""
        rem = self.remote_mask(t)
        caps = [int((self.instances - n_p) * self.slots_per_decode) / self.hold]
        for mask, servers, busy in ((~rem, n_p, self.local_busy),) + (
                ((rem, self.remote_servers, self.remote_busy),) if self.remote_on else ()):
            load = float(np.dot(self.w[mask], busy[mask]))   # busy seconds per offered request
            if load > 0:
                caps.append(servers / load if servers > 0 else 0.0)
        if self.remote_on:
            link = float(np.dot(self.w[rem], self.x[rem]))
            if link > 0:
                caps.append(1.0 / link)
        return max(min(caps), 0.0)

    def met(self, t: float, n_p: int, rate: float) -> bool:
        """True when TTFT's percentile (or mean) at ``rate`` stays within the target, every stage stable."""
        self.evaluated += 1
        rem = self.remote_mask(t)
        loc = ~rem
        local = pool_wait(rate * self.w[loc].sum(), n_p, self.local_busy[loc], self.w[loc])
        if local.utilization >= 1.0 or rate * self.hold >= int((self.instances - n_p) * self.slots_per_decode):
            return False
        pools = [(loc, local, self.local_svc)]
        if self.remote_on and rem.any():
            remote = pool_wait(rate * self.w[rem].sum(), self.remote_servers, self.remote_busy[rem], self.w[rem])
            rho = rate * float(np.dot(self.w[rem], self.x[rem]))
            if remote.utilization >= 1.0 or rho >= 1.0:
                return False
            svc = remote_ready_s(self.remote_lat, self.remote_busy, self.x / (1.0 - rho), self.layers, self.rtt)
            pools.append((rem, remote, svc))
        if self.q == 0:   # the mean, as `ttft_under_load` sums it
            service = np.where(rem, pools[1][2], self.local_svc) if len(pools) == 2 else self.local_svc
            mean = float(np.dot(self.w, service)) + sum(p.arrival_rps * p.mean_wait_s for _, p, _ in pools) / rate
            return mean <= self.target
        cdf = sum(float(np.dot(self.w[m], p.wait_cdf(self.target - s[m]))) for m, p, s in pools)
        return cdf / self.total >= self.q

    def unloaded(self, t: float) -> np.ndarray:
        """Unloaded TTFT (s) of every grid length at threshold ``t`` (the load-free limit of `met`)."""
        return np.where(self.remote_mask(t), self.remote_unloaded, self.local_svc) if self.remote_on else self.local_svc

    def unloaded_ok(self, t: float) -> bool:
        s = self.unloaded(t)
        if self.q == 0:
            return float(np.dot(self.w, s)) <= self.target
        return float(self.w[s <= self.target].sum()) / self.total >= self.q

    def unloaded_value(self, t: float) -> float:
        """Unloaded TTFT at the SLO's percentile (or the mean), seconds."""
        s = self.unloaded(t)
        if self.q == 0:
            return float(np.dot(self.w, s))
        return float(weighted_percentiles(s, self.w, [self.q * 100])[0])


def max_rate_at_ttft_slo(layout: Layout, grid: LengthGrid, perf: PerfInputs, percentile: float, target_s: float,
                         threshold: float | None = None, n_prefill: int | None = None,
                         mode: str = "exact") -> LatencySummary | None:
    """The highest offered load at which TTFT's ``percentile`` (0 = the mean) stays within ``target_s``
    seconds, found by bisection on the load fraction (each step one `SloModel` test), and the latency there;
    None when even a nearly idle system misses it.

    TTFT grows with load, so the feasible loads form an interval starting at zero."""
    if not 0 <= percentile < 100:
        raise PlanError(f"TTFT SLO percentile p{percentile:g}: expected a percentile between 0 and 100")
    ev = evaluate(layout, grid, perf, threshold, n_prefill, mode)
    model = SloModel(layout, grid, perf, percentile, target_s)
    meets = lambda load: model.met(ev.threshold, ev.n_prefill, load * ev.lambda_max)  # noqa: E731
    lo, hi = 1e-4, 1.0 - 1e-6
    if not meets(lo):
        return None
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return ttft_under_load(layout, grid, perf, threshold, n_prefill, load=lo, mode=mode, percentiles=(percentile,))
