"""The report of a simulation of several PD sites (`planning.simulate_sites.SitesSimulationAnswer`): per site
and in total, the planned rate beside the simulated throughput, TTFT and TPOT percentiles, link use, cost;
each compared scheduler per site; what each scheduler did per site (role changes, each long-term period's
observation, decision and reason, the remote pool's arbitration, peak backlog per queue, the per-site
timeline of the threshold, the split and every queue); the whole layout's timeline."""

from __future__ import annotations

import math

from .config_report import configurations_section
from .report import Column, Report, Section
from .sim_report import BACKLOG_KEYS, _3g, _downsample

SITE_TIMELINE_ROWS = 12
SITE_TIMELINE_KEYS = ("t_s", "link_capacity_gbps", "link_gbps", "threshold_tokens", "n_prefill", "n_decode",
                      "remote_waiting", "link_waiting", "local_waiting", "decode_waiting")
LAYOUT_TIMELINE_KEYS = ("t_s", "link_gbps", "link_capacity_gbps", "remote_waiting", "link_waiting",
                        "local_waiting", "decode_waiting", "decode_busy")

SITE_COLUMNS = [
    Column("site", "site"), Column("instances", "instances"), Column("threshold_tokens", "t (tokens)", ",.0f"),
    Column("planned_rps", "planned req/s", ".3f"), Column("offered_rps", "offered req/s", ".3f"),
    Column("throughput_rps", "throughput req/s", ".3f"), Column("completed", "completed", ",d"),
    Column("ttft_p50_s", "TTFT P50 s", _3g), Column("ttft_p90_s", "P90", _3g), Column("ttft_p99_s", "P99", _3g),
    Column("tpot_mean_s", "TPOT mean s", _3g), Column("remote_share", "remote", ".1%"),
    Column("egress_gbps", "egress Gbps", ".2f"), Column("link_gbps", "line Gbps", ".0f"),
    Column("link_utilization", "link used", ".1%"), Column("rtt_ms", "RTT ms", _3g),
    Column("usd_per_hour", "USD/h", ",.0f"), Column("usd_per_million_requests", "USD/M req", ",.0f"),
    Column("threshold_changes", "t changes", ",d"), Column("role_changes", "role changes", ",d"),
    Column("spilled", "spilled", ",d")]


def _site_row(name, r, site, t, planned, own, remote_share, remote_usd) -> dict:
    s = r.summary()
    hourly = own + remote_share * remote_usd
    thr = s["steady_throughput_rps"] if s["steady_throughput_rps"] == s["steady_throughput_rps"] else \
        s["throughput_rps"]
    per_m = hourly / (thr * 3600.0) * 1e6 if thr and thr > 0 and math.isfinite(hourly) else math.nan
    return {"site": name, "instances": f"{site.prefill}P+{site.decode}D" if site is not None else "",
            "threshold_tokens": t, "planned_rps": planned, "offered_rps": s["offered_rps"], "throughput_rps": thr,
            "completed": s["completed"], "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"],
            "ttft_p90_s": s["ttft_p90_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_mean_s": s["tpot_mean_s"],
            "remote_share": s["remote_share"], "egress_gbps": s["egress_gbps"],
            "link_gbps": site.link.bandwidth_bps / 1e9 if site is not None and site.link is not None else 0.0,
            "link_utilization": r.utilization.get("link", 0.0),
            "rtt_ms": site.link.rtt_s * 1e3 if site is not None and site.link is not None else 0.0,
            "local_prefill_utilization": r.utilization["local_prefill"],
            "decode_utilization": r.utilization["local_decode"], "usd_per_hour": hourly,
            "usd_per_million_requests": per_m, "threshold_changes": s["threshold_changes"],
            "role_changes": s["role_changes"], "spilled": r.spilled}


def site_rows(a, run) -> list[dict]:
    """One row per site of ``run`` (a `MultiSimResult`) and the total; the remote pool's cost shared in
    proportion to the remote prefill seconds each site used."""
    used = [r.utilization["remote_prefill"] for r in run.sites]
    whole = sum(used)
    rows = []
    for k, (site, r) in enumerate(zip(a.layout.pd_sites, run.sites)):
        own, remote_usd = a.site_costs[k]
        share = used[k] / whole if whole > 0 else 1.0 / len(run.sites)
        rows.append(_site_row(site.name, r, site, a.thresholds[k], a.planned_rps[k], own, share, remote_usd))
    total = _site_row("total", run.total, None, math.nan, sum(a.planned_rps), sum(c[0] for c in a.site_costs),
                      1.0, a.site_costs[0][1])
    total["instances"] = (f"{a.layout.remote.instances}R shared + "
                          + " + ".join(r["instances"] for r in rows)) if a.layout.remote else " + ".join(
                              r["instances"] for r in rows)
    total["threshold_tokens"] = None
    total["link_gbps"] = sum(r["link_gbps"] for r in rows)
    total["rtt_ms"] = None
    rows.append(total)
    return rows


def _did(a) -> list[Section]:
    """What each scheduler did per site: role changes, the long-term periods, the remote pool's
    arbitration, peak backlogs, and each site's timeline."""
    runs = a.runs
    names = a.runs[0].names
    periodic = [r for r in runs if any(x.periods for x in r.sites)]
    out = []
    if periodic:
        roles = [{"scheduler": r.scheduler, "site": n, **c} for r in periodic for n, x in zip(names, r.sites)
                 for c in x.role_changes]
        out.append(Section("roles", "Role changes per site", roles or [
            {"scheduler": ", ".join(r.scheduler for r in periodic), "site": "every site", "change": "none"}]))
        out.append(Section("decisions", "What the long-term rule saw and decided, per site and period", [
            {"scheduler": r.scheduler, "site": n, **p} for r in periodic for n, x in zip(names, r.sites)
            for p in x.periods], [
            Column("scheduler", "scheduler"), Column("site", "site"), Column("time_s", "t (s)", ",.0f"),
            Column("change", "role change"), Column("n_prefill", "N_p"), Column("n_decode", "N_d"),
            Column("threshold_tokens", "t (tokens)", ",.0f"), Column("local_waiting_mean", "local waiting mean", _3g),
            Column("local_waiting_min", "min", _3g), Column("decode_waiting_mean", "decode waiting", _3g),
            Column("decode_busy_mean", "decode busy", _3g), Column("reason", "reason")], transpose=False))
    rows = []
    for r in runs:
        for k, (n, x) in enumerate(zip(names, r.sites)):
            tl = x.timeline
            has = len(tl["t_s"]) > 0
            rows.append({"scheduler": r.scheduler, "site": n, "arbitration": r.arbitration,
                         "served_ahead": r.ahead[k] if r.ahead else 0, "yielded": r.yielded[k] if r.yielded else 0,
                         **{k2: float(tl[k2].max()) if has else 0.0 for k2 in BACKLOG_KEYS},
                         "threshold_min_tokens": float(tl["threshold_tokens"].min()) if has else 0.0,
                         "threshold_max_tokens": float(tl["threshold_tokens"].max()) if has else 0.0,
                         "spilled": x.spilled, "preemptions": x.preemptions})
    out.append(Section("backlogs", "Per site and scheduler: the remote pool's arbitration (starts ahead of an older "
                       "request of another site, and the reverse), peak backlog per queue (waiting requests; link: "
                       "remote requests prefilled, KV not yet at decode), threshold range, spilled requests", rows,
                       [Column("scheduler", "scheduler"), Column("site", "site"), Column("arbitration", "remote pool"),
                        Column("served_ahead", "served ahead", ",d"), Column("yielded", "yielded", ",d")]
                       + [Column(k, k.replace("_", " "), _3g) for k in BACKLOG_KEYS]
                       + [Column("threshold_min_tokens", "t min", ",.0f"), Column("threshold_max_tokens", "t max", ",.0f"),
                          Column("spilled", "spilled", ",d"), Column("preemptions", "preemptions", ",d")]))
    timeline = [{"scheduler": r.scheduler, "site": n, **row} for r in runs for n, x in zip(names, r.sites)
                for row in _downsample(x.timeline, SITE_TIMELINE_ROWS, SITE_TIMELINE_KEYS)]
    out.append(Section("site_timeline", f"Timeline per site and scheduler ({SITE_TIMELINE_ROWS} rows each, means "
                       "of consecutive samples): threshold, split and every queue", timeline,
                       [Column("scheduler", "scheduler"), Column("site", "site"), Column("t_s", "t (s)", ",.0f"),
                        Column("link_capacity_gbps", "line Gbps", ".0f"), Column("link_gbps", "egress Gbps", ".2f"),
                        Column("threshold_tokens", "t (tokens)", ",.0f"), Column("n_prefill", "N_p", _3g),
                        Column("n_decode", "N_d", _3g), Column("remote_waiting", "remote waiting", _3g),
                        Column("link_waiting", "link waiting", _3g), Column("local_waiting", "local waiting", _3g),
                        Column("decode_waiting", "decode waiting", _3g)]))
    return out


def sites_simulation_report(a) -> Report:
    """The report of a `SitesSimulationAnswer`."""
    main = a.runs[0]
    rows = site_rows(a, main)
    sections = [Section("sim_sites", f"Per site and in total ({a.scheduler} scheduler)", rows, SITE_COLUMNS),
                configurations_section(a.configurations, "the plan of size --layout, as simulated")]
    if len(a.runs) > 1:
        cmp = []
        for run in a.runs:
            for r in site_rows(a, run):
                cmp.append({"scheduler": run.scheduler, "site": r["site"], "ttft_p50_s": r["ttft_p50_s"],
                            "ttft_p90_s": r["ttft_p90_s"], "ttft_p99_s": r["ttft_p99_s"],
                            "throughput_rps": r["throughput_rps"], "remote_share": r["remote_share"],
                            "threshold_changes": r["threshold_changes"], "role_changes": r["role_changes"],
                            "spilled": r["spilled"]})
        sections.append(Section("comparison", f"Schedulers on the same workload ({', '.join(r.scheduler for r in a.runs)})",
                                cmp, [Column("scheduler", "scheduler"), Column("site", "site"),
                                      Column("ttft_p50_s", "TTFT P50 s", _3g), Column("ttft_p90_s", "P90", _3g),
                                      Column("ttft_p99_s", "P99", _3g),
                                      Column("throughput_rps", "throughput req/s", ".3f"),
                                      Column("remote_share", "remote", ".1%"),
                                      Column("threshold_changes", "t changes", ",d"),
                                      Column("role_changes", "role changes", ",d"),
                                      Column("spilled", "spilled", ",d")]))
    sections += _did(a)
    timeline = _downsample(main.total.timeline, 24, LAYOUT_TIMELINE_KEYS)
    sections.append(Section("timeline", "Timeline of the whole layout (sites summed)", timeline,
                            [Column("t_s", "t (s)", ",.0f"), Column("link_gbps", "egress Gbps", ".2f"),
                             Column("link_capacity_gbps", "line Gbps", ".0f"),
                             Column("remote_waiting", "remote waiting", _3g),
                             Column("link_waiting", "link waiting", _3g),
                             Column("local_waiting", "local waiting", _3g),
                             Column("decode_waiting", "decode waiting", _3g),
                             Column("decode_busy", "decode busy slots", _3g)]))
    return Report(sections, a.notes, warnings=a.warnings,
                  meta={"model": a.plan.scenario.model.name, "layout": a.layout.name, "scheduler": a.scheduler,
                        "seed": a.seed, "requests": a.requests, "sites": len(a.layout.pd_sites)})
