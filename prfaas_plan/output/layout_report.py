"""Reports of a layout file with several PD sites (``size --layout`` and ``compare --layout``): per-site
figures, the remote site, the routing rule, the best pure-threshold plan, the baselines with error bars and
the verdict. Nothing here computes a figure; it names and formats the `LayoutAnswer`'s
(`prfaas_plan.planning.layouts.LayoutFigures`).

Units follow the column names: ``_rps`` requests/s, ``_s`` seconds, ``_ms`` milliseconds, ``_gbps``
Gbit/s, ``_usd`` US dollars, ``_usd_per_hour`` US dollars per hour, ``_tokens`` tokens; shares and
utilizations are fractions.
"""

from __future__ import annotations

import math

from .plan_report import _musd, _stack, num, tokens, verdict_meta
from .report import Column, Report, Section

STAGE_WORDS = {"remote_prefill": "remote prefill", "link": "link", "local_prefill": "local prefill",
               "local_decode": "local decode"}


def _pct(v) -> str:
    return f"{v:.1%}"


def _finite(v):
    """``v`` as a number, None when it is not finite (JSON has no inf/nan; tables show '-')."""
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def _site_row(s) -> dict:
    u = s.utilization
    return {"site": s.name, "instance": s.instance, "stack": s.stack,
            "instances": f"{s.n_prefill + s.n_decode} (={s.n_prefill}P+{s.n_decode}D)",
            "n_prefill": s.n_prefill, "n_decode": s.n_decode,
            "throughput_rps": s.lambda_rps, "binding_stage": s.binding,
            "remote_prefill_utilization": u["remote_prefill"], "link_utilization": u["link"] if s.link_bps else None,
            "local_prefill_utilization": u["local_prefill"], "local_decode_utilization": u["local_decode"],
            "threshold_tokens": s.threshold_tokens if s.pure_threshold else None,
            "pure_threshold": s.pure_threshold, "remote_share": s.remote_share, "egress_gbps": s.egress_bps / 1e9,
            "link_gbps": s.link_bps / 1e9 if s.link_bps else None,
            "rtt_ms": s.rtt_s * 1e3 if s.rtt_s is not None else None,
            "ttft_mean_s": s.ttft.mean_s, "ttft_p50_s": s.ttft.p50_s, "ttft_p90_s": s.ttft.p90_s,
            "ttft_p99_s": s.ttft.p99_s, "capex_usd": _finite(s.capex_usd), "cloud_usd_per_hour": _finite(s.usd_per_hour),
            "cloud_usd_per_hour_with_remote": _finite(s.usd_per_hour_with_remote), "alone_rps": s.alone_rps}


SITE_COLUMNS = [
    Column("site", "site"), Column("instance", "instance"), Column("stack", "stack"), Column("instances", "instances"),
    Column("throughput_rps", "req/s", ".3f"), Column("alone_rps", "req/s alone (no remote)", ".3f"),
    Column("binding_stage", "binding stage", lambda v: STAGE_WORDS.get(v, v)),
    Column("threshold_tokens", "threshold t", tokens), Column("remote_share", "prefilled remotely", _pct),
    Column("egress_gbps", "egress Gbps", ".2f"), Column("link_gbps", "link Gbps", "g"),
    Column("link_utilization", "link util (of goodput)", _pct), Column("rtt_ms", "RTT ms", "g"),
    Column("ttft_p50_s", "TTFT P50 s", ".3f"), Column("ttft_p90_s", "TTFT P90 s", ".3f"),
    Column("ttft_p99_s", "TTFT P99 s", ".3f"), Column("capex_usd", "capex $", _musd),
    Column("cloud_usd_per_hour", "cloud $/h", ",.0f"),
    Column("cloud_usd_per_hour_with_remote", "cloud $/h with remote share", ",.0f"),
]


def _sites_section(a) -> Section:
    f, lay = a.figures, a.layout
    rows = [_site_row(s) for s in f.sites]
    whole = f.baselines[0]
    if lay.remote is not None:
        rows.append({"site": "remote", "instance": str(lay.remote.instance), "stack": lay.remote.stack or a.scenario.stack,
                     "instances": f"{lay.remote.instances}R shared", "binding_stage": None,
                     "remote_prefill_utilization": f.remote_utilization,
                     "capex_usd": _finite(f.remote_capex_usd), "cloud_usd_per_hour": _finite(f.remote_usd_per_hour)})
    rows.append({"site": "total", "instance": "", "instances": _total_instances(lay),
                 "throughput_rps": whole.lambda_rps, "alone_rps": sum(s.alone_rps for s in f.sites),
                 "egress_gbps": sum(s.egress_bps for s in f.sites) / 1e9,
                 "remote_share": (sum(s.remote_share * s.lambda_rps for s in f.sites) / whole.lambda_rps
                                  if whole.lambda_rps > 0 else 0.0),
                 "ttft_mean_s": whole.ttft.mean_s, "ttft_p50_s": whole.ttft.p50_s, "ttft_p90_s": whole.ttft.p90_s,
                 "ttft_p99_s": whole.ttft.p99_s, "capex_usd": _finite(whole.capex_usd),
                 "cloud_usd_per_hour": _finite(whole.usd_per_hour),
                 "cloud_usd_per_hour_with_remote": _finite(whole.usd_per_hour)})
    notes = [f"binding stage: the most utilized of remote prefill (the shared site's), the site's link (of its "
             f"goodput), local prefill and local decode; TTFT per site is unloaded, with that site's RTT: "
             f"{whole.ttft.method}"]
    if lay.remote is not None and lay.remote.instances > 0:
        notes.append("remote utilization: " + _pct(f.remote_utilization) + " of the shared remote site")
    return Section("sites", f"Layout {lay.name} for {a.scenario.model.name}", rows, SITE_COLUMNS, notes)


def _total_instances(lay) -> str:
    local = sum(s.instances for s in lay.pd_sites)
    return (f"{lay.remote.instances}R + {local} local" if lay.remote is not None else f"{local} local")


def _routing_section(f) -> Section:
    rows = [{"site": r.site, "from_tokens": r.from_tokens, "to_tokens": r.to_tokens,
             "request_share": r.request_share, "remote_share": r.remote_share} for r in f.routing]
    cols = [Column("site", "site"), Column("from_tokens", "from (uncached tokens)", tokens),
            Column("to_tokens", "to", tokens), Column("request_share", "share of the site's requests", _pct),
            Column("remote_share", "prefilled remotely", _pct)]
    return Section("routing", "Routing rule of the optimum (not a pure threshold at every site)", rows, cols,
                   ["lengths are uncached input tokens; within a range the given share of requests is prefilled "
                    "remotely (e.g. every other request, or by a hash of the request id), the rest locally"])


def _threshold_section(f) -> Section:
    t = f.threshold
    lam = f.baselines[0].lambda_rps
    rows = [{"site": s.name, "threshold_tokens": tt, "n_prefill": n_p, "n_decode": s.n_prefill + s.n_decode - n_p,
             "throughput_rps": x, "optimum_rps": s.lambda_rps}
            for s, tt, x, n_p in zip(f.sites, t.threshold_tokens, t.lambda_rps, t.n_prefill)]
    rows.append({"site": "total", "throughput_rps": t.total_rps, "optimum_rps": lam,
                 "loss": 1 - t.total_rps / lam if lam > 0 else 0.0})
    cols = [Column("site", "site"), Column("threshold_tokens", "threshold t", tokens),
            Column("n_prefill", "prefill instances", "d"), Column("n_decode", "decode instances", "d"),
            Column("throughput_rps", "req/s", ".3f"), Column("optimum_rps", "optimum req/s", ".3f"),
            Column("loss", "loses", _pct)]
    return Section("threshold_plan", "Best pure-threshold plan found, beside the optimum", rows, cols, [t.method])


def _baseline_rows(f) -> list[dict]:
    rows = []
    for b in f.baselines:
        band = b.gain_band
        rows.append({"layout": b.name, "what": b.what, "throughput_rps": b.lambda_rps,
                     "layout_gain_x": _finite(b.gain) if b.name != "layout" else None,
                     "gain_p10": band.p10 if band else None, "gain_p50": band.p50 if band else None,
                     "gain_p90": band.p90 if band else None,
                     "capex_usd": _finite(b.capex_usd), "cloud_usd_per_hour": _finite(b.usd_per_hour),
                     "ttft_p50_s": b.ttft.p50_s if b.ttft else None, "ttft_p90_s": b.ttft.p90_s if b.ttft else None,
                     "ttft_p99_s": b.ttft.p99_s if b.ttft else None})
    return rows


BASELINE_COLUMNS = [
    Column("layout", "layout"), Column("what", "what"), Column("throughput_rps", "req/s", ".3f"),
    Column("layout_gain_x", "layout's gain x", ".2f"), Column("gain_p10", "gain P10", ".2f"),
    Column("gain_p50", "gain P50", ".2f"), Column("gain_p90", "gain P90", ".2f"),
    Column("capex_usd", "capex $", _musd), Column("cloud_usd_per_hour", "cloud $/h", ",.0f"),
    Column("ttft_p50_s", "TTFT P50 s", ".3f"), Column("ttft_p90_s", "TTFT P90 s", ".3f"),
    Column("ttft_p99_s", "TTFT P99 s", ".3f")]


def _baselines_section(a, name: str) -> Section:
    f = a.figures
    notes = []
    if a.verdict is not None:
        notes.append(a.verdict["sentence"])
    if f.error_bars is not None:
        notes += [f"error bar {b.key}: {b.source}" for b in f.error_bars.inputs]
        notes.append(f"layout's req/s P10 {num(f.error_bars.lambda_rps.p10)} / P50 {num(f.error_bars.lambda_rps.p50)} "
                     f"/ P90 {num(f.error_bars.lambda_rps.p90)} over {f.error_bars.samples} samples")
    else:
        notes.append("no error bars (samples 0, or no site can offload)")
    return Section(name, f"The layout against its baselines ({f.basis} basis)", _baseline_rows(f), BASELINE_COLUMNS,
                   notes)


def layout_report(a, command: str = "size") -> Report:
    """The report of a `LayoutAnswer` of several PD sites. ``command`` ``compare`` names the baselines
    section ``compare`` (the section that command always writes); ``size`` names it ``baselines``."""
    f = a.figures
    sections = [_sites_section(a)]
    found = getattr(a, "configurations", None)
    if found is not None:
        from .config_report import configurations_section

        sections.append(configurations_section([r.record() for r in found.roles], f"searched: {found.screened} choices screened, {found.solved} solved"))
    if not f.threshold_routing:
        sections.append(_routing_section(f))
        if f.threshold is not None:
            sections.append(_threshold_section(f))
    sections.append(_baselines_section(a, "compare" if command == "compare" else "baselines"))
    meta = {"model": a.scenario.model.name, "layout": a.layout.name, "mode": "exact", "basis": f.basis,
            "stack": _stack(a.scenario), "sites": len(a.layout.pd_sites), "threshold_routing": f.threshold_routing,
            **verdict_meta(a.verdict)}
    return Report(sections, a.notes, warnings=a.warnings, meta=meta)
