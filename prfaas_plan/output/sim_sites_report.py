"""The report of a simulation of several PD sites (`planning.simulate_sites.SitesSimulationAnswer`): per site
and in total, the planned rate beside the simulated throughput, TTFT and TPOT percentiles, link use, cost;
each compared scheduler per site; the whole layout's timeline."""

from __future__ import annotations

import math

from .config_report import configurations_section
from .report import Column, Report, Section
from .sim_report import _3g, _downsample

SITE_COLUMNS = [
    Column("site", "site"), Column("instances", "instances"), Column("threshold_tokens", "t (tokens)", ",.0f"),
    Column("planned_rps", "planned req/s", ".3f"), Column("offered_rps", "offered req/s", ".3f"),
    Column("throughput_rps", "throughput req/s", ".3f"), Column("completed", "completed", ",d"),
    Column("ttft_p50_s", "TTFT P50 s", _3g), Column("ttft_p90_s", "P90", _3g), Column("ttft_p99_s", "P99", _3g),
    Column("tpot_mean_s", "TPOT mean s", _3g), Column("remote_share", "remote", ".1%"),
    Column("egress_gbps", "egress Gbps", ".2f"), Column("link_gbps", "line Gbps", ".0f"),
    Column("link_utilization", "link used", ".1%"), Column("rtt_ms", "RTT ms", _3g),
    Column("usd_per_hour", "USD/h", ",.0f"), Column("usd_per_million_requests", "USD/M req", ",.0f")]


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
            "usd_per_million_requests": per_m, "threshold_changes": s["threshold_changes"]}


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
                            "threshold_changes": r["threshold_changes"]})
        sections.append(Section("comparison", f"Schedulers on the same workload ({', '.join(r.scheduler for r in a.runs)})",
                                cmp, [Column("scheduler", "scheduler"), Column("site", "site"),
                                      Column("ttft_p50_s", "TTFT P50 s", _3g), Column("ttft_p90_s", "P90", _3g),
                                      Column("ttft_p99_s", "P99", _3g),
                                      Column("throughput_rps", "throughput req/s", ".3f"),
                                      Column("remote_share", "remote", ".1%"),
                                      Column("threshold_changes", "t changes", ",d")]))
    tl = main.total.timeline
    keys = ("t_s", "link_gbps", "link_capacity_gbps", "remote_waiting", "link_waiting", "local_waiting",
            "decode_waiting", "decode_busy")
    link = _downsample({**tl, "local_waiting": tl["link_waiting"]}, 24)  # `_downsample` reads fixed keys
    timeline = [{**{k: v for k, v in row.items() if k in keys}, "link_waiting": w["local_waiting"]}
                for row, w in zip(_downsample(tl, 24), link)]
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
