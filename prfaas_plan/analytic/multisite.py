"""Several PD sites sharing one remote prefill site: figures of a routing, the best pure-threshold plan,
and error bars.

The linear program (`prfaas_plan.analytic.lp.max_throughput`) optimizes such a layout on length bins.
A *routing* is the remote share of each bin at each site (the program's, or per-site thresholds). With a
routing fixed, site ``i`` costs per arriving request ``a_i`` local prefill seconds, ``rho_i`` remote prefill
seconds and ``beta_i`` bits over its link, so (units: requests/s)

    lambda_i <= c_i = min(best integer split of min(N_p / a_i, N_d * d_i), goodput_i / beta_i)
    sum_i rho_i * lambda_i <= N_r                       (the shared remote site, instance-seconds per s)

and the most the routing carries is a fractional knapsack: fill the sites in increasing ``rho_i``, which is
exact for it (`share_remote`). This gives, with array operations over samples and candidates:

- `threshold_plan`: the best plan in which every site routes by a pure threshold (each site's threshold
  a bin boundary), by coordinate search over the sites from two starts (the program's routing rounded to
  thresholds, and everything local); a local optimum of that search, named as such in the reports. Its
  move, `coordinate_search`, works on any per-site table of options (capacity, remote seconds): the layout
  configuration search (`prfaas_plan.planning.layout_search`) gives it configurations times cuts;
- `sample_total`: each sample of the calibration errors (multiplicative factors on prefill seconds and
  decode capacity, as `prfaas_plan.analytic.uncertainty`) re-divides the remote site and re-chooses every
  site's split for each candidate routing and keeps the best. The routing itself is not re-optimized per
  sample, so a sample's figure is a lower bound on that sample's optimum, equal to the program's answer at
  the point estimate (``docs/methods.md``, "Error bars").

Unloaded TTFT of a routing per site (`site_ttft`) is `prfaas_plan.analytic.ttft`'s method with each
bin's remote share splitting its lengths' probability between the local and the remote path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .lp import Bins
from .ttft import METHOD, PERCENTILES, TTFTSummary, remote_ready_s, weighted_percentiles

THRESHOLD_SEARCH_MAX_SITES = 64   # beyond this the coordinate search (sites^2 x bins per round) is skipped
_ROUNDS = 20


@dataclass(frozen=True)
class SiteModel:
    """What the fixed-routing throughput needs of one PD site: its bins, instance count, decode requests/s
    per instance, link goodput (bit/s; 0 when it cannot offload) and whether it can offload."""

    name: str
    bins: Bins
    instances: int
    decode_rps: float
    goodput_bps: float
    offloads: bool


def loads(site: SiteModel, fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-request local prefill seconds, remote prefill seconds and link bits of ``site`` when bin ``b``
    sends ``fraction[..., b]`` of its requests remotely (any leading axes)."""
    b = site.bins
    f = np.clip(np.asarray(fraction, dtype=float), 0.0, 1.0)
    remote_s = np.where(np.isfinite(b.remote_s), b.remote_s, 0.0)
    return ((1 - f) * b.weight * b.local_s).sum(-1), (f * b.weight * remote_s).sum(-1), \
        (f * b.weight * b.kv_bytes * 8.0).sum(-1)


def best_split(n_total: int, local_s, decode_rps) -> tuple[np.ndarray, np.ndarray]:
    """The best integer local split of ``n_total`` instances: (requests/s, prefill instances), where each
    request costs ``local_s`` local prefill seconds and a decode instance serves ``decode_rps`` requests/s
    (arrays broadcast). With no local prefill every instance decodes."""
    a = np.asarray(local_s, dtype=float)
    d = np.asarray(decode_rps, dtype=float)
    a, d = np.broadcast_arrays(a, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(a > 0, 1.0 / np.where(a > 0, a, 1.0), np.inf)     # requests/s one prefill instance takes
        cross = np.where(np.isinf(per), 0.0, n_total * d / (per + d))
    best = np.full(a.shape, -np.inf)
    split = np.zeros(a.shape)
    for n_p in (np.clip(np.floor(cross), 0, n_total), np.clip(np.ceil(cross), 0, n_total)):
        with np.errstate(invalid="ignore"):
            local = np.where(np.isinf(per), np.inf, n_p * per)
        value = np.minimum(local, (n_total - n_p) * d)
        better = value > best
        best, split = np.where(better, value, best), np.where(better, n_p, split)
    return best, split


def site_capacity(site: SiteModel, local_s, link_bits, f_local=1.0, f_decode=1.0):
    """Requests/s ``site`` carries on its own under a routing (its best split, its link), and that split."""
    lam, n_p = best_split(site.instances, np.asarray(local_s) * f_local, site.decode_rps * np.asarray(f_decode))
    bits = np.asarray(link_bits, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        link = np.where(bits > 0, site.goodput_bps / np.where(bits > 0, bits, 1.0), np.inf)
    return np.minimum(lam, link), n_p


def share_remote(caps: np.ndarray, remote_s: np.ndarray, remote_capacity) -> np.ndarray:
    """Maximize the total rate: ``lambda_i <= caps[..., i]`` and ``sum_i remote_s[..., i] * lambda_i <=
    remote_capacity`` (instance-seconds per second, broadcast over the leading axes). The fractional
    knapsack's exact answer: sites in increasing remote seconds per request, each filled to its cap or
    to what is left of the remote site."""
    caps, remote_s = np.broadcast_arrays(np.asarray(caps, dtype=float), np.asarray(remote_s, dtype=float))
    order = np.argsort(remote_s, axis=-1, kind="stable")
    c = np.take_along_axis(caps, order, -1)
    r = np.take_along_axis(remote_s, order, -1)
    uses = r > 0
    need = np.where(uses, c * r, 0.0)
    before = np.concatenate([np.zeros(need.shape[:-1] + (1,)), np.cumsum(need, -1)[..., :-1]], -1)
    left = np.maximum(np.asarray(remote_capacity, dtype=float)[..., None] - before, 0.0)
    with np.errstate(invalid="ignore"):
        lam = np.where(uses, np.minimum(c, left / np.where(uses, r, 1.0)), c)
    out = np.empty_like(lam)
    np.put_along_axis(out, order, lam, -1)
    return out


def cut_fractions(site: SiteModel, cut: int) -> np.ndarray:
    """The routing of threshold cut ``cut``: bins ``cut`` and above go remote (``cut = len(bins)``: none)."""
    nb = len(site.bins.weight)
    return (np.arange(nb) >= cut).astype(float)


def cut_table(site: SiteModel):
    """Capacity, remote seconds and link bits per request for every cut 0..nb (all remote .. all local)."""
    b = site.bins
    nb = len(b.weight)
    remote_s = np.where(np.isfinite(b.remote_s), b.remote_s, 0.0)
    local = np.concatenate([[0.0], np.cumsum(b.weight * b.local_s)])
    rem = np.concatenate([np.cumsum((b.weight * remote_s)[::-1])[::-1], [0.0]])
    bits = np.concatenate([np.cumsum((b.weight * b.kv_bytes * 8.0)[::-1])[::-1], [0.0]])
    if not site.offloads or np.any(~np.isfinite(b.remote_s)):
        ok = np.arange(nb + 1) == nb   # only "all local"
    else:
        ok = np.ones(nb + 1, dtype=bool)
    cap, _ = site_capacity(site, local, bits)
    return np.where(ok, cap, -np.inf), rem, bits, local


PRICES = 24                 # prices on the remote site tried as starts of the threshold search
PAIR_SEARCH_MAX_SITES = 4   # up to this many sites the search also moves every pair of sites' cuts jointly


def price_starts(tables, n_sites: int) -> list[list[int]]:
    """Starts of the threshold search from prices on the shared remote site: at price ``mu`` (requests/s per
    remote instance-second) each site takes the cut maximizing ``cap * (1 - mu * rho)``, what it would carry
    net of the remote capacity it uses. ``mu = 0`` is every site's own best; a high price is all local."""
    if n_sites > THRESHOLD_SEARCH_MAX_SITES // 4:
        return []
    rhos = np.concatenate([t[1][t[1] > 0] for t in tables])
    if not len(rhos):
        return []
    out = []
    for mu in np.concatenate([[0.0], np.geomspace(0.05, 20.0, PRICES - 1) / np.median(rhos)]):
        out.append([int(np.argmax(np.where(np.isfinite(t[0]), t[0] * (1 - mu * t[1]), -np.inf))) for t in tables])
    return out


def _pair_search(tables, n_remote: int, best: float, cuts: list[int]) -> tuple[float, list[int]]:
    """Improve ``cuts`` by moving two sites' cuts at once (every pair of cut values), until no pair helps."""
    for _ in range(_ROUNDS):
        moved = False
        for i in range(len(tables)):
            for j in range(i + 1, len(tables)):
                ci, ri = tables[i][0], tables[i][1]
                cj, rj = tables[j][0], tables[j][1]
                base_c = np.array([t[0][k] for t, k in zip(tables, cuts)])
                base_r = np.array([t[1][k] for t, k in zip(tables, cuts)])
                caps = np.broadcast_to(base_c, (len(ci), len(cj), len(tables))).copy()
                rho = np.broadcast_to(base_r, (len(ci), len(cj), len(tables))).copy()
                caps[:, :, i], rho[:, :, i] = ci[:, None], ri[:, None]
                caps[:, :, j], rho[:, :, j] = cj[None, :], rj[None, :]
                tot = share_remote(np.maximum(caps, 0.0), rho, np.full(caps.shape[:2], float(n_remote))).sum(-1)
                tot = np.where(np.isfinite(ci)[:, None] & np.isfinite(cj)[None, :], tot, -np.inf)
                a, b = np.unravel_index(int(np.argmax(tot)), tot.shape)
                if tot[a, b] > best * (1 + 1e-9) + 1e-12:
                    best, cuts[i], cuts[j], moved = float(tot[a, b]), int(a), int(b), True
        if not moved:
            break
    return best, cuts


def options_total(tables, n_remote: int, picks) -> tuple[float, np.ndarray]:
    """Total requests/s and per-site rates when site ``i`` takes option ``picks[i]`` of its table (``tables[i]``
    = (capacity, remote seconds per request, ...) per option), the shared remote site divided by
    `share_remote`."""
    caps = np.array([t[0][k] for t, k in zip(tables, picks)])
    rho = np.array([t[1][k] for t, k in zip(tables, picks)])
    if not np.all(caps > -np.inf):
        return -math.inf, np.zeros(len(caps))
    lam = share_remote(caps, rho, float(n_remote))
    return float(lam.sum()), lam


def coordinate_search(tables, n_remote: int, picks: list[int]) -> tuple[float, list[int]]:
    """From ``picks``, move one site's option at a time to the best for the total (every option of that
    site tried at once, the remote site re-divided) until no move helps: (total requests/s, picks), a
    local optimum. An option of capacity -inf is not allowed. The threshold search's options are a site's
    cuts; the configuration search's (`planning.layout_search`) its configurations times their cuts."""
    best, _ = options_total(tables, n_remote, picks)
    for _ in range(_ROUNDS):
        moved = False
        for i, table in enumerate(tables):
            cap_i, rho_i = table[0], table[1]
            caps = np.tile([t[0][k] for t, k in zip(tables, picks)], (len(cap_i), 1))
            rho = np.tile([t[1][k] for t, k in zip(tables, picks)], (len(cap_i), 1))
            caps[:, i], rho[:, i] = cap_i, rho_i
            tot = share_remote(np.maximum(caps, 0.0), rho, float(n_remote)).sum(-1)
            tot = np.where(np.isfinite(cap_i) & (cap_i >= 0), tot, -np.inf)
            k = int(np.argmax(tot))
            if tot[k] > best * (1 + 1e-9) + 1e-12:
                best, picks[i], moved = float(tot[k]), k, True
        if not moved:
            break
    return best, picks


@dataclass(frozen=True)
class ThresholdPlan:
    """Per site: the cut (bins at and above it go remote), threshold in tokens (inf: all local), rate
    (requests/s) and split; ``total_rps`` their sum."""

    cuts: tuple[int, ...]
    threshold_tokens: tuple[float, ...]
    lambda_rps: tuple[float, ...]
    n_prefill: tuple[int, ...]
    total_rps: float
    method: str


def threshold_at_cut(site: SiteModel, cut: int, upper_tokens: np.ndarray | None = None) -> float:
    """Tokens of cut ``cut``: the longest length kept local (``upper_tokens``: each bin's longest grid
    length; else the bin's mean length), 0 when every bin goes remote, inf when none does."""
    nb = len(site.bins.weight)
    if cut >= nb:
        return math.inf
    if cut == 0:
        return 0.0
    return float((upper_tokens if upper_tokens is not None else site.bins.length)[cut - 1])


def threshold_plan(sites: list[SiteModel], n_remote: int, start_fractions: list[np.ndarray],
                   upper_tokens: list[np.ndarray] | None = None) -> ThresholdPlan | None:
    """The best pure-threshold plan found by coordinate search (see the module docstring); None beyond
    `THRESHOLD_SEARCH_MAX_SITES` sites."""
    if len(sites) > THRESHOLD_SEARCH_MAX_SITES:
        return None
    tables = [cut_table(s) for s in sites]
    nbs = [len(s.bins.weight) for s in sites]

    def rounded(f: np.ndarray, nb: int) -> int:
        above = np.flatnonzero(np.asarray(f) > 0.5)
        return int(above[0]) if len(above) else nb

    starts = [[rounded(f, nb) for f, nb in zip(start_fractions, nbs)], list(nbs)] + price_starts(tables, len(sites))
    starts = [list(c) for c in dict.fromkeys(tuple(c) for c in starts)]
    best_total, best_cuts = max((coordinate_search(tables, n_remote, list(c)) for c in starts), key=lambda x: x[0])
    if len(sites) <= PAIR_SEARCH_MAX_SITES:
        best_total, best_cuts = _pair_search(tables, n_remote, best_total, best_cuts)
    _, lam = options_total(tables, n_remote, best_cuts)
    splits = [int(site_capacity(s, t[3][k], t[2][k])[1]) for s, t, k in zip(sites, tables, best_cuts)]
    ts = tuple(threshold_at_cut(s, k, None if upper_tokens is None else upper_tokens[i])
               for i, (s, k) in enumerate(zip(sites, best_cuts)))
    return ThresholdPlan(tuple(best_cuts), ts, tuple(float(x) for x in lam), tuple(splits), best_total,
                         "search over per-site thresholds (bin boundaries): coordinate moves from the program's routing "
                         "rounded, from all local and from prices on the remote site, then joint moves of every pair "
                         f"of sites (up to {PAIR_SEARCH_MAX_SITES} sites); a local optimum of the search")


def sample_total(sites: list[SiteModel], n_remote: int, routings: list[list[np.ndarray]],
                 f_remote: np.ndarray, f_local: list[np.ndarray], f_decode: list[np.ndarray]) -> np.ndarray:
    """Total requests/s in each sample: for each candidate routing (a list of per-site bin fractions) the
    remote site re-divided and the splits re-chosen with the sample's factors (``f_remote`` on remote
    prefill seconds, ``f_local[i]``/``f_decode[i]`` on site ``i``'s prefill seconds and decode capacity),
    and the best candidate kept."""
    best = np.zeros(len(f_remote))
    for routing in routings:
        caps, rho = [], []
        for s, frac, fl, fd in zip(sites, routing, f_local, f_decode):
            a, r, bits = loads(s, frac)
            if not s.offloads and r > 0:
                raise ValueError(f"site {s.name!r} cannot offload but the routing sends requests remotely")
            caps.append(site_capacity(s, a, bits, fl, fd)[0])
            rho.append(np.full(len(f_remote), r) * f_remote)
        lam = share_remote(np.stack(caps, -1), np.stack(rho, -1), np.full(len(f_remote), float(n_remote)))
        best = np.maximum(best, lam.sum(-1))
    return best


def sample_threshold_search(sites: list[SiteModel], n_remote: int, start_cuts: tuple[int, ...],
                            f_remote: np.ndarray, f_local: list[np.ndarray], f_decode: list[np.ndarray]) -> np.ndarray:
    """Total requests/s of the best pure-threshold plan in each sample, by the coordinate search of
    `threshold_plan` run for all samples at once from ``start_cuts`` (the point estimate's plan), so every
    sample re-chooses its thresholds and splits. Arrays are (samples, cuts, sites)."""
    n = len(f_remote)
    cap_t, rho_t = [], []
    for s, fl, fd in zip(sites, f_local, f_decode):
        _, rem, bits, local = cut_table(s)
        ok = np.isfinite(cut_table(s)[0])
        cap, _ = site_capacity(s, local[None, :], bits[None, :], fl[:, None], fd[:, None])
        cap_t.append(np.where(ok[None, :], cap, -np.inf))
        rho_t.append(rem[None, :] * f_remote[:, None])
    rows = np.arange(n)
    cuts = np.array([list(start_cuts)] * n)
    cur_cap = np.stack([c[rows, cuts[:, i]] for i, c in enumerate(cap_t)], -1)
    cur_rho = np.stack([r[rows, cuts[:, i]] for i, r in enumerate(rho_t)], -1)
    best = share_remote(np.maximum(cur_cap, 0.0), cur_rho, np.full(n, float(n_remote))).sum(-1)
    for _ in range(_ROUNDS):
        moved = False
        for i in range(len(sites)):
            k = cap_t[i].shape[1]
            caps = np.repeat(cur_cap[:, None, :], k, 1)
            rho = np.repeat(cur_rho[:, None, :], k, 1)
            caps[:, :, i], rho[:, :, i] = cap_t[i], rho_t[i]
            tot = share_remote(np.maximum(caps, 0.0), rho, np.full((n, k), float(n_remote))).sum(-1)
            tot = np.where(np.isfinite(cap_t[i]), tot, -np.inf)
            pick = np.argmax(tot, 1)
            gain = tot[rows, pick] > best * (1 + 1e-9) + 1e-12
            if gain.any():
                moved = True
                cuts[gain, i] = pick[gain]
                best = np.where(gain, tot[rows, pick], best)
                cur_cap[:, i] = cap_t[i][rows, cuts[:, i]]
                cur_rho[:, i] = rho_t[i][rows, cuts[:, i]]
        if not moved:
            break
    return best


def ttft_parts(local_latency_s: np.ndarray, remote_latency_s: np.ndarray | None, remote_busy_s: np.ndarray | None,
               transfer_s: np.ndarray | None, layers: int, rtt_s: float, weights: np.ndarray,
               remote_share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unloaded TTFT values (seconds) and their probabilities for one site over the grid's lengths: each
    length's probability ``weights`` split into the local path (share ``1 - remote_share``) and the remote
    path (its KV streamed over the site's link, `prfaas_plan.analytic.ttft.remote_ready_s`, with the
    site's RTT). The probabilities sum to the weights' sum."""
    share = np.clip(np.asarray(remote_share, dtype=float), 0.0, 1.0)
    weights = np.asarray(weights, dtype=float)
    local = np.asarray(local_latency_s, dtype=float)
    if remote_latency_s is None or not np.any(share > 0):
        return local, weights
    remote = remote_ready_s(remote_latency_s, remote_busy_s, transfer_s, layers, rtt_s)
    return np.concatenate([local, remote]), np.concatenate([weights * (1 - share), weights * share])


def ttft_of(parts: list[tuple[np.ndarray, np.ndarray]]) -> TTFTSummary:
    """Mean and P50/P90/P99 (seconds) of one or several `ttft_parts` (for several sites, each part's
    probabilities scaled by its site's share of the total rate)."""
    values = np.concatenate([v for v, _ in parts])
    w = np.concatenate([x for _, x in parts])
    p50, p90, p99 = weighted_percentiles(values, w, PERCENTILES)
    return TTFTSummary(float(values @ w / w.sum()), float(p50), float(p90), float(p99), METHOD)
