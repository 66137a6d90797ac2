"""``prfaas-plan simulate --layout FILE`` for a layout of several PD sites: the plan `size --layout` makes (the
linear program's per-site split, routing and rate, `answers.answer_layout`), its workload split among the
sites in proportion to the planned rates, replayed through the multi-site simulator
(`simulator.multisite`), each site with its own link profile and scheduler state.

Units: seconds, requests/s, tokens, bit/s; costs in USD per hour and per million requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import PlanError
from ..layout import Layout
from ..textfile import refuse_folder
from ..units import plural
from ..workload.traces import TRACE_KIND
from .question import DEFAULTS

DEFAULT_LOAD = 0.8
LINK_PROFILE_KIND = "a link profile CSV time_s,gbps"   # as the simulator's reader names it
DEFAULT_SYNTHETIC_S = 1800.0


@dataclass(frozen=True)
class SitesSimulationAnswer:
    """The layout as planned (``plan``: `answers.LayoutAnswer`), the simulated layout (splits from the plan),
    each site's routing threshold and planned rate, and one `multisite.MultiSimResult` per scheduler run
    (``runs[0]``: ``scheduler``'s; then ``compare``'s in the order asked)."""

    layout: Layout
    plan: object
    thresholds: tuple              # tokens, per site (inf: every prompt local)
    planned_rps: tuple             # per site, the program's rate
    runs: tuple
    scheduler: str
    requests: int
    seed: int
    offered_rps: float
    site_costs: tuple              # per site: (USD/hour of its own chips and link, USD/hour of the remote pool)
    notes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    configurations: list = field(default_factory=list)  # per role and site, as played (`layout_search.roles_of`)


def _threshold_of(r) -> tuple[float, str]:
    """A site's routing threshold (tokens) from its program result, and how it was read: the program's own
    threshold, or for a routing that is not one, the threshold that sends the same share of its requests
    remote (lengths above it; the bins' weights are the site's length distribution)."""
    if r.is_threshold:
        return float(r.threshold_tokens), ""
    share = float(r.routed_rps.sum() / r.lambda_rps) if r.lambda_rps > 0 else 0.0
    w = np.asarray(r.routed_rps) / max(r.lambda_rps, 1e-300)  # remote share per bin, of the site's requests
    weights = np.divide(w, np.asarray(r.remote_fraction), out=np.zeros_like(w), where=np.asarray(r.remote_fraction) > 0)
    lengths = np.asarray(r.bin_length)
    # bin weights are recoverable where a bin goes partly remote; elsewhere take equal weights (equal-probability bins)
    weights = np.where(weights > 0, weights, 1.0 / len(lengths))
    tail = np.cumsum(weights[::-1])[::-1]  # share of requests at or above each bin
    k = int(np.searchsorted(-tail, -share, side="left"))
    t = float(lengths[k - 1]) if 0 < k <= len(lengths) else (0.0 if k == 0 else math.inf)
    return t, (f"its optimum sends some lengths both ways ({share:.1%} of its requests remote); simulated with the "
               f"threshold {t:,.0f} tokens that sends about that share remote")


def trace_file(path: str) -> str:
    """``path`` of a `trace` to simulate, a folder refused as such (the simulator's reader says the rest)."""
    return refuse_folder(path, TRACE_KIND, f"`trace` {path!r}")


def link_profile_file(path: str) -> str:
    """``path`` of a `link_profile`, a folder refused as such (the simulator's reader says the rest)."""
    return refuse_folder(path, LINK_PROFILE_KIND, f"`link_profile` {path!r}")


def link_profiles(text: str | None, names) -> dict:
    """``--link-profile`` for a layout: one CSV for every site (``FILE``) or per site (``a=FILE,c=FILE2``;
    the sites not named keep their nominal rate)."""
    from ..simulator import read_link_profile

    if text is None:
        return {}
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        profile = read_link_profile(link_profile_file(parts[0]))
        return {n: profile for n in names}
    out = {}
    for p in parts:
        if "=" not in p:
            raise PlanError(f"`link_profile` {text!r}: give one FILE for every site, or SITE=FILE pairs "
                            "separated by commas")
        site, path = (x.strip() for x in p.split("=", 1))
        if site not in names:
            raise PlanError(f"`link_profile` {text!r}: no site {site!r} in the layout (its sites: "
                            f"{', '.join(names)})")
        if site in out:
            raise PlanError(f"`link_profile` {text!r}: site {site!r} is named twice")
        out[site] = read_link_profile(link_profile_file(path))
    return out


def _site_costs(layout: Layout, site) -> tuple[float, float]:
    """USD/hour of ``site``'s own chips and link, and of the remote pool (shared by all sites)."""
    from .plans import _costs

    own = _costs(Layout(layout.name, (site,), layout.remote, layout.threshold))[1]
    remote = 0.0
    if layout.remote is not None:
        from ..profiles import get_hardware

        price = get_hardware(layout.remote.instance.chip.name).price
        remote = (math.nan if price is None else
                  layout.remote.instance.chips * layout.remote.instances * price.cloud_usd_per_hour)
        own -= remote  # `_costs` counted the remote pool with the site
    return own, remote


def scheduler_note(names, shares) -> str:
    """What the reacting schedulers do on several sites, with each site's planned share of the remote pool."""
    return ("schedulers per site: threshold and adaptive run the short-term rule on each site's own link and queues, "
            "seeing the shared remote pool as the site's planned share of its prefill seconds ("
            + ", ".join(f"{n} {x:.1%}" for n, x in zip(names, shares))
            + "); adaptive also spills each site's link overflow onto that site's idle local instances and every "
            "period converts one of its instances between prefill and decode (hysteresis, its own backlogs, the "
            "throughput model at its share of the pool), and serves the remote pool link-aware (the waiting request "
            "whose KV can start crossing first: enqueued at + its site's unsent KV seconds) instead of FCFS")


def answer_simulate_sites(layout_file: str, *, model: str, tpot: str, inputs: str, trace: str | None,
                          synthetic: str | None, rate: float | None, load: float | None, duration_s: float | None,
                          scheduler: str, compared: list, link_profile: str | None, seed: int,
                          stack: str | None, transfer_bytes: str | None, weight_dtype: str | None,
                          kv_dtype: str | None, cfg_base, progress=None) -> SitesSimulationAnswer:
    """Plan the layout file as ``size --layout`` does and simulate it with ``scheduler`` and each of
    ``compared`` (`simulator.multisite.MULTI_SCHEDULERS`) on one workload: the paper's synthetic one (Poisson at
    ``rate`` or ``load`` x the planned total, default 0.8, for ``duration_s``, default 1,800 s) or a trace (its
    own times unless ``rate``/``load``), each request sent to a site with probability its planned rate's share
    (seeded by ``seed``)."""
    from ..analytic.transfer import DEFAULT_POLICY
    from ..simulator.inputs import paper_requests, read_trace_and_source
    from ..simulator.multisite import MULTI_SCHEDULERS, SiteRun, planned_shares, simulate_sites
    from ..simulator.system import System
    from .answers import _count, answer_layout
    from .question import Question
    from .configurations import pinned_spec
    from .layout_search import roles_of

    for name in (scheduler, *compared):
        if name not in MULTI_SCHEDULERS:
            raise PlanError(f"`scheduler` {name!r}: a layout of several PD sites simulates "
                            f"{', '.join(MULTI_SCHEDULERS)}")
    workload = "paper" if trace is None else trace
    given = {"model": model, "tpot": tpot, "workload": workload, "inputs": inputs, "weight_dtype": weight_dtype,
             "kv_dtype": kv_dtype, "transfer_bytes": transfer_bytes or DEFAULT_POLICY, "stack": stack}
    # the plan only (no error bars: samples=0); the figures' baseline notes are size's, not the replay's
    plan = answer_layout(Question.from_layout(layout_file, **{k: v for k, v in given.items() if v is not None}),
                         samples=0, search=pinned_spec(inputs or DEFAULTS.inputs, transfer_bytes=transfer_bytes))
    lay, res, perf = plan.layout, plan.result, plan.perf
    names = [s.name for s in lay.pd_sites]
    notes = [n for n in plan.notes if plan.figures is None or n not in plan.figures.notes]
    sites, thresholds = [], []
    for s, r in zip(lay.pd_sites, res.sites):
        t, how = _threshold_of(r)
        if how:
            notes.append(f"site {s.name}: {how}")
        sites.append(s.with_split(_count(r.n_prefill)))
        thresholds.append(t)
    lay = replace(lay, pd_sites=tuple(sites))
    planned = np.array([max(float(r.lambda_rps), 0.0) for r in res.sites])
    total = float(planned.sum())
    if not total > 0:
        raise PlanError(f"layout {lay.name!r}: the plan serves nothing, so there is nothing to simulate")

    if trace is None:
        offered = rate if rate is not None else (load if load is not None else DEFAULT_LOAD) * total
        window = duration_s or DEFAULT_SYNTHETIC_S
        requests = paper_requests(offered, window, seed)
        what = f"synthetic paper workload, Poisson at {offered:.3f} req/s for {window:g} s, seed {seed}"
        if rate is None and load is None:
            notes.append(f"default in effect: --load {DEFAULT_LOAD} of the planned total {total:.3f} req/s, "
                         f"--duration {window:g} s")
    else:
        _, requests = read_trace_and_source(trace_file(trace), None if (rate or load) else duration_s)
        if rate is not None or load is not None:
            requests = requests.at_rate(rate if rate is not None else load * total)
            if duration_s is not None:
                requests = requests.until(duration_s)
        what = f"trace {trace} ({len(requests)} {plural(len(requests), 'request')})"
    rng = np.random.default_rng(seed)
    site_of = rng.choice(len(sites), size=len(requests), p=planned / total)
    profiles = link_profiles(link_profile, names)
    runs_in = []
    for s, t in zip(sites, thresholds):
        sub = Layout(lay.name, (s,), lay.remote, lay.threshold)
        runs_in.append(SiteRun(System.build(sub, perf, t), profiles.get(s.name)))
    tick = None if progress is None else (lambda n: progress(n, len(requests)))
    runs = tuple(simulate_sites(requests, site_of, runs_in, cfg_base, name, names, tick)
                 for name in (scheduler, *compared))
    first = runs[0].total.summary()
    notes += [f"workload: {what}; each request sent to a site with probability its planned rate's share "
              f"({', '.join(f'{n} {p / total:.1%}' for n, p in zip(names, planned))}), seed {seed}",
              "plan: the linear program of size --layout (per-site split and routing, the remote pool shared); the "
              "simulation starts from it",
              "engine: the multi-site Python event loop (simulator/multisite.py: one remote pool shared by the sites, "
              "per-site links, prefill and decode pools and scheduler state; no compiled twin yet)",
              "cost: each site's own chips and link at the profiles' cloud rates, plus the shared remote pool's in "
              "proportion to the remote prefill seconds the site used; per million requests at the simulated "
              "throughput"]
    if profiles:
        notes.append("link profiles: " + ", ".join(f"{n} {len(p.times_s)} {plural(len(p.times_s), 'point')}"
                                                 for n, p in profiles.items()))
    if any(r.scheduler != "static" for r in runs):
        notes.append(scheduler_note(runs[0].names, planned_shares(requests, site_of, runs_in)))
    if first["unfinished"]:
        notes.append(f"{first['unfinished']} requests did not finish; percentiles are over completed ones")
    return SitesSimulationAnswer(lay, plan, tuple(thresholds), tuple(planned.tolist()), runs, scheduler,
                                 len(requests), seed, float(first["offered_rps"]),
                                 tuple(_site_costs(lay, s) for s in sites), notes, [],
                                 [r.record() for r in roles_of(lay, perf)])
