"""Reports of the planning answers (`prfaas_plan.planning.answers`): rows named with their units, the
table columns that show them, and the notes. Nothing here computes a figure; it names and formats them.
"""

from __future__ import annotations

import math

from ..units import format_tokens
from .report import Column, Report, Section

INSTANCE_NOTE = "instances: R remote prefill, P local prefill, D local decode (instance shapes in JSON/CSV)"


def num(v: float) -> str:
    """A figure without scientific notation: thousands separated, small values to 4 significant digits."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}" if abs(v) >= 10 else f"{v:.4g}"


def tokens(v) -> str:
    """A token count such as ``19,400 (18.9K)``; ``-`` when missing, ``inf`` when unbounded."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:,.0f} ({format_tokens(v)})" if v >= 1024 else f"{v:,.0f}"


def _musd(v) -> str:
    return f"{v / 1e6:,.2f}M"


def _counts(ev) -> str:
    """Instances per role in the ``4R + 8 (=3P+5D)`` style (R remote prefill, P/D local)."""
    site = ev.layout.pd_sites[0]
    local = f"{site.instances} (={ev.n_prefill}P+{ev.n_decode}D)"
    if ev.layout.remote is not None and ev.layout.remote.instances:
        return f"{ev.layout.remote.instances}R + {local}"
    return local


def plan_row(name: str, plan) -> dict:
    """One `Plan` as a row of unit-named figures."""
    ev = plan.best
    return {
        "layout": name,
        "threshold_tokens": ev.threshold,
        "offloaded_share": ev.p_remote,
        "mean_offloaded_tokens": ev.l_long if ev.p_remote > 0 else None,
        "mean_local_tokens": ev.l_short if ev.p_remote < 1 else None,
        "instances": _counts(ev),
        "remote_instance": str(ev.layout.remote.instance) if ev.layout.remote else None,
        "local_instance": str(ev.layout.pd_sites[0].instance),
        "remote_prefill_instances": ev.layout.remote.instances if ev.layout.remote else 0,
        "local_prefill_instances": ev.n_prefill,
        "local_decode_instances": ev.n_decode,
        "throughput_rps": ev.lambda_max,
        "output_tokens_per_s": plan.output_tokens_per_s,
        "binding_stage": ev.binding,
        "egress_gbps": ev.egress_bps / 1e9,
        "link_utilization": ev.link_utilization if ev.link_bps else None,   # of line rate
        "link_headroom_gbps": ev.link_headroom_bps / 1e9 if ev.link_bps else None,  # of goodput
        "link_binds_below_tokens": plan.link_bind_threshold,
        "ttft_unloaded_mean_s": plan.ttft.mean_s,
        "ttft_unloaded_p50_s": plan.ttft.p50_s,
        "ttft_unloaded_p90_s": plan.ttft.p90_s,
        "ttft_unloaded_p99_s": plan.ttft.p99_s,
        "capex_usd": plan.capex_usd,
        "cloud_usd_per_hour": plan.cloud_usd_per_hour,
        "rps_per_musd": plan.rps_per_musd,
        "output_tokens_per_usd_cloud": plan.output_tokens_per_usd_cloud,
    }


PLAN_COLUMNS = [
    Column("layout", "layout"),
    Column("threshold_tokens", "threshold t", tokens),
    Column("offloaded_share", "offloaded", lambda v: f"{v:.1%}"),
    Column("mean_offloaded_tokens", "E[L|L>t]", tokens),
    Column("instances", "instances"),
    Column("throughput_rps", "req/s", ".3f"),
    Column("binding_stage", "binds"),
    Column("egress_gbps", "egress Gbps", ".2f"),
    Column("link_utilization", "link util (of line rate)", lambda v: f"{v:.1%}"),
    Column("ttft_unloaded_p50_s", "unloaded TTFT P50 s", ".2f"),
    Column("ttft_unloaded_p90_s", "unloaded TTFT P90 s", ".2f"),
    Column("ttft_unloaded_p99_s", "unloaded TTFT P99 s", ".2f"),
    Column("capex_usd", "capex $", _musd),
    Column("cloud_usd_per_hour", "cloud $/h", ",.0f"),
]
SIZE_COLUMNS = PLAN_COLUMNS[:6] + [
    Column("output_tokens_per_s", "output tokens/s", ",.0f"),
] + PLAN_COLUMNS[6:9] + [
    Column("link_headroom_gbps", "link headroom Gbps (of goodput)", ".2f"),
    Column("link_binds_below_tokens", "link binds below t", lambda v: "never" if v is None else tokens(v)),
] + PLAN_COLUMNS[9:] + [
    Column("rps_per_musd", "req/s per $1M capex", ".3f"),
    Column("output_tokens_per_usd_cloud", "output tokens per cloud $", ",.0f"),
]
COMPACT_COLUMNS = [c for c in PLAN_COLUMNS if c.key not in ("ttft_unloaded_p50_s", "ttft_unloaded_p99_s",
                                                              "cloud_usd_per_hour", "mean_offloaded_tokens")]

LOADED_COLUMNS = [Column("load", "load", ".0%"), Column("rate_rps", "req/s", ".3f"),
                  Column("loaded_ttft_mean_s", "TTFT mean s", ".2f"), Column("loaded_ttft_p50_s", "TTFT P50 s", ".2f"),
                  Column("loaded_ttft_p90_s", "TTFT P90 s", ".2f"), Column("loaded_ttft_p99_s", "TTFT P99 s", ".2f"),
                  Column("loaded_tpot_s", "TPOT s", ".4f")]


def loaded_row(lat) -> dict:
    """A `LoadedLatency` as a row."""
    return {"load": lat.load, "rate_rps": lat.rate_rps, "loaded_ttft_mean_s": lat.ttft_mean_s,
            "loaded_ttft_p50_s": lat.ttft_p50_s, "loaded_ttft_p90_s": lat.ttft_p90_s,
            "loaded_ttft_p99_s": lat.ttft_p99_s, "loaded_tpot_s": lat.tpot_s}


def _stages_section(plan) -> Section:
    ev = plan.best
    util = ev.stage_utilization
    rows = [{"stage": s, "bound_rps": ev.bounds[s] if math.isfinite(ev.bounds[s]) else None,
             "utilization": util[s], "binding": s == ev.binding} for s in ev.bounds]
    return Section("stages", "Stage bounds at the optimum (system requests/s)", rows,
                   [Column("stage", "stage"), Column("bound_rps", "bound req/s", ".3f"),
                    Column("utilization", "utilization", lambda v: f"{v:.1%}"), Column("binding", "binds")],
                   ["the link's utilization here is of its goodput (the plan's 'link util' is of line rate)"])


def _target_section(t, plan) -> Section:
    said = t.verdict_sentence(plan)
    row = {"target_rps": t.target_rps, "remote_instances": t.remote_instances,
           "local_prefill_instances": t.local_prefill_instances, "local_decode_instances": t.local_decode_instances,
           "capex_usd": t.capex_usd, "capacity_rps": t.capacity_rps, "pure_threshold": t.pure_threshold,
           "threshold_tokens": t.threshold_tokens, "prfaas_pays": t.prfaas_pays,
           "verdict": said or "PrfaaS-PD pays at these prices: the cheapest cluster buys remote prefill"}
    notes = ["instance counts are free here; the chips per instance and the link are as given"]
    if not t.pure_threshold:
        notes.append("no single threshold reaches this capacity: the routing it needs sends some lengths remote "
                     "and not others (a binding link prefers them), which a threshold router does not")
    cols = [Column("target_rps", "target req/s", ".3f"), Column("remote_instances", "remote P"),
            Column("local_prefill_instances", "local P"), Column("local_decode_instances", "local D"),
            Column("capex_usd", "capex $", _musd), Column("capacity_rps", "capacity req/s", ".3f"),
            Column("pure_threshold", "threshold routing"), Column("threshold_tokens", "t", tokens),
            Column("verdict", "verdict")]
    return Section("target", "Cheapest cluster for the target rate (mixed-integer program, exact mode); "
                   "the plan above is the given hardware's", [row], cols, notes)


def _slo_section(s, searched=None) -> Section:
    """The rate within the TTFT SLO at the plan's threshold and split and, with ``searched``
    (`planning.slo.SloSearch`), with both re-optimized for the SLO, and why when nothing meets it."""
    q = "mean" if s.percentile == 0 else f"p{s.percentile:g}"
    row = {"slo": s.label, "rate_rps": s.rate_rps, "load": s.load, "lambda_max_rps": s.lambda_max_rps, "met": s.met}
    notes = []
    if s.met:
        row.update(ttft_mean_s=s.ttft_mean_s, ttft_p50_s=s.ttft_p50_s, ttft_p90_s=s.ttft_p90_s,
                   ttft_p99_s=s.ttft_p99_s, ttft_at_slo_s=s.ttft_at_slo_s)
    else:
        notes.append(f"at the plan's threshold an idle system misses it: unloaded {q} TTFT is {s.idle_ttft_s:.2f} s "
                     f"> {s.target_s:g} s")
    cols = [Column("slo", "SLO"), Column("rate_rps", "req/s within SLO", ".3f"), Column("load", "of Lambda_max", ".1%"),
            Column("lambda_max_rps", "Lambda_max req/s", ".3f"), Column("ttft_at_slo_s", f"TTFT {q} s", ".2f"),
            Column("ttft_p50_s", "TTFT P50 s", ".2f"),
            Column("ttft_p90_s", "TTFT P90 s", ".2f"), Column("ttft_p99_s", "TTFT P99 s", ".2f")]
    title = "Throughput within the TTFT SLO (at the plan's threshold and split)"
    if searched is not None:
        o = searched.optimum
        row.update(reoptimized_met=o.met, reoptimized_rate_rps=o.rate_rps,
                   reoptimized_threshold_tokens=o.threshold if o.met else None,
                   reoptimized_split=f"{o.n_prefill}P+{o.n_decode}D" if o.met else None,
                   reoptimized_ttft_at_slo_s=searched.ttft_at_slo_s, why_not_met=searched.why)
        what = "t and split"
        if searched.configurations is not None:
            c = searched.configuration
            row["reoptimized_configuration"] = (c.label() if c is not None else "the plan's own") if o.met else None
            what = "t, split and configuration"
        cols += [Column("reoptimized_rate_rps", f"req/s within SLO, {what} re-optimized", ".3f"),
                 Column("reoptimized_threshold_tokens", "re-optimized t", tokens),
                 Column("reoptimized_split", "re-optimized split")]
        if searched.configurations is not None:
            cols.append(Column("reoptimized_configuration", "re-optimized configuration"))
        cols += [Column("reoptimized_ttft_at_slo_s", f"re-optimized TTFT {q} s", ".2f"),
                 Column("why_not_met", "why not met")]
        title = f"Throughput within the TTFT SLO: at the plan's threshold and split, and with {what} re-optimized for it"
        notes.append("re-optimized: branch and bound over the plan's candidate thresholds and splits, each "
                     "tested by P(TTFT <= target) >= the percentile under the same queueing model "
                     f"({o.evaluated} evaluations)")
        if searched.configurations is not None:
            n, k = searched.configurations
            notes.append(f"configurations re-optimized too: {n} joint configurations (no prefill candidate "
                         f"dropped that prefills a prompt sooner), {k} besides the plan's own searched for the "
                         "SLO, the rest bounded out (their Lambda_max below the best rate found)")
    return Section("slo", title, [row], cols, notes + [f"method: {s.method}"])


def _verify_section(v) -> Section:
    """A `prfaas_plan.analytic.verify.Verification` (the grid optimum against the linear program)."""
    res, g = v.lp, v.grid_plan
    row = {"grid_rps": v.grid_rps, "threshold_rps": v.threshold_rps, "lp_rps": v.lp_rps, "bound_rps": v.bound_rps,
           "optimality_gap": v.gap, "difference": v.lp_vs_grid, "non_threshold_gain": v.non_threshold_gain,
           "grid_split": f"{g.n_prefill}P+{g.n_decode}D", "lp_split": f"{res.n_prefill:.0f}P+{res.n_decode:.0f}D",
           "pure_threshold": v.threshold_optimal, "lp_routing_is_threshold": v.lp_is_threshold,
           "lp_threshold_tokens": res.threshold_tokens, "grid_threshold_tokens": g.threshold,
           "lp_binding_stages": "+".join(v.binding), "lp_remote_tokens": v.remote_ranges}
    cols = [Column("grid_rps", "grid req/s", ".4f"), Column("threshold_rps", "best threshold on bins req/s", ".4f"),
            Column("lp_rps", "LP req/s", ".4f"), Column("bound_rps", "LP bound req/s", ".4f"),
            Column("difference", "LP vs grid", "+.2%"), Column("grid_split", "grid split"),
            Column("lp_split", "LP split"), Column("pure_threshold", "threshold routing optimal"),
            Column("lp_binding_stages", "LP binds"), Column("lp_remote_tokens", "LP offloads (tokens)")]
    notes = ([v.explanation] if v.threshold_optimal else []) + [
        f"LP: {res.method}; proven optimality gap {v.gap:.2%} (bound {v.bound_rps:.4f} req/s)"]
    return Section("verify", "Grid search vs linear program (exact mode, 128 length bins)", [row], cols, notes)


def _link_section(k) -> Section:
    row = {"keep_fraction": k.keep, "reference_rps": k.reference_rps, "throughput_rps": k.throughput_rps,
           "link_goodput_gbps": k.link_goodput_bps / 1e9, "link_line_rate_gbps": k.link_line_rate_bps / 1e9}
    cols = [Column("keep_fraction", "keep", ".0%"),
            Column("reference_rps", "of req/s (unconstrained link)", ".3f"), Column("throughput_rps", "req/s", ".3f"),
            Column("link_goodput_gbps", "goodput Gbps", ".2f"),
            Column("link_line_rate_gbps", "line rate Gbps", ".2f")]
    return Section("link_sizing", "Smallest link keeping the throughput (linear program, exact mode)", [row], cols,
                   ["exact mode with the local split as a continuous variable, so both throughputs are the "
                    "linear program's own (they differ slightly from the plan above) and the link is a lower bound"])


BAND_COLUMNS = [Column("quantity", "quantity"), Column("point", "plan", lambda v: v if isinstance(v, str) else num(v)),
                Column("p10", "P10", num), Column("p50", "P50", num), Column("p90", "P90", num)]


def verdict_meta(verdict: dict | None) -> dict:
    """``meta`` keys of the verdict (docs/output.md): ``verdict`` (``pays``, ``does not pay``, ``cannot tell``;
    None without error bars, ``--samples 0``), the baseline it is against and its headline sentence, which
    names the basis. The verdict is a word, so it lives here rather than in the numeric ``point`` column of
    ``error_bars``."""
    if verdict is None:
        return {"verdict": None, "verdict_vs": None, "verdict_line": None}
    return {"verdict": verdict["verdict"], "verdict_vs": verdict["baseline"], "verdict_line": verdict["sentence"]}


def _error_bars_section(eb, plan, mode: str, verdict: dict) -> Section:
    """P10/P50/P90 of Lambda, gain, t and egress beside the plan's figures (the verdict: `verdict_meta`
    and the section's first note, its headline sentence naming the basis)."""
    ev = plan.best
    point = {"throughput_rps": ev.lambda_max, "prfaas_gain_x": eb.point_gain, "threshold_tokens": ev.threshold,
             "egress_gbps": ev.egress_bps / 1e9}
    bands = {"throughput_rps": eb.lambda_rps, "prfaas_gain_x": eb.gain, "threshold_tokens": eb.threshold_tokens,
             "egress_gbps": eb.egress_gbps}
    rows = [{"quantity": k, "point": point[k], "p10": b.p10, "p50": b.p50, "p90": b.p90} for k, b in bands.items()]
    notes = [verdict["sentence"]] + [f"error bar {b.key}: {b.source}" for b in eb.inputs] + [
        "P50 need not equal the plan: a minimum of stages falls when any stage slows but rises only when the "
        "binding ones speed up (docs/methods.md, error bars)"]
    if eb.variants:
        notes.insert(1, f"the samples also spread uniformly over {len(eb.variants)} deployment alternatives left open "
                        "(--sensitivity): " + "; ".join(eb.variants))
    what = "calibration errors" + (" and open deployment choices" if eb.variants else "")
    return Section("error_bars", f"Error bars from {what} ({eb.samples} samples, {mode} mode)", rows,
                   BAND_COLUMNS, notes)


SENSITIVITY_COLUMNS = [Column("rank", "rank"), Column("driver", "driver"), Column("kind", "kind"),
                       Column("gain_low", "gain low", ".2f"), Column("low_at", "at"),
                       Column("gain_high", "gain high", ".2f"), Column("high_at", "at"),
                       Column("swing", "swing", ".2f"), Column("straddles_1", "crosses 1"),
                       Column("pin", "what would pin it")]


def _sensitivity_section(sens) -> Section:
    """The ranked drivers of the gain (`planning.sensitivity.Sensitivity`): one row each, one at a time,
    then the open choices together (their combinations' range)."""
    def row(rank, d) -> dict:
        return {"rank": rank, "driver": d.name, "kind": d.kind, "varied": d.varied, "gain_low": d.gain_low,
                "low_at": d.low_at, "gain_high": d.gain_high, "high_at": d.high_at, "swing": d.swing,
                "straddles_1": d.straddles, "pin": d.pin}
    rows = [row(i + 1, d) for i, d in enumerate(sens.drivers)]
    if sens.together is not None:
        rows.append(row(None, sens.together))
    notes = [f"PrfaaS gain vs {sens.baseline}, point {sens.point_gain:.2f}: each driver on its own with the others at "
             "the plan's values; a calibrated input at its own P10 and P90 model error (lognormal, its "
             "leave-one-model-out width), an open deployment choice (left at its default) at each alternative with "
             "threshold and split re-optimized; the last row takes the open choices together"]
    notes += [f"{d.name}: varied over {d.varied}" for d in sens.drivers]
    return Section("sensitivity", "What moves the gain most (ranked by swing)", rows, SENSITIVITY_COLUMNS, notes)


def _seconds_or_saturated(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else "saturated"


def _degraded_section(d) -> Section:
    """The plan at a degraded link: counts fixed, threshold re-optimized (with --load, the TTFT of the
    plan's own traffic there)."""
    row = {"link_gbps": d.planned.link_bps / 1e9, "degraded_link_gbps": d.bandwidth_bps / 1e9,
           "planned_threshold_tokens": d.planned.threshold, "switch_to_threshold_tokens": d.switched.threshold,
           "planned_rps": d.planned.lambda_max, "degraded_rps": d.switched.lambda_max, "kept": d.kept,
           "rps_keeping_threshold": d.kept_threshold.lambda_max, "binding_stage": d.switched.binding,
           "egress_gbps": d.switched.egress_bps / 1e9, "ttft_unloaded_p50_s": d.ttft.p50_s,
           "ttft_unloaded_p90_s": d.ttft.p90_s, "instances": _counts(d.switched)}
    cols = [Column("degraded_link_gbps", "link Gbps", num), Column("planned_threshold_tokens", "planned t", tokens),
            Column("switch_to_threshold_tokens", "switch to t", tokens), Column("degraded_rps", "req/s", ".3f"),
            Column("kept", "kept", ".1%"), Column("rps_keeping_threshold", "req/s at planned t", ".3f"),
            Column("binding_stage", "binds"), Column("egress_gbps", "egress Gbps", ".2f"),
            Column("ttft_unloaded_p50_s", "unloaded TTFT P50 s", ".2f"),
            Column("ttft_unloaded_p90_s", "unloaded TTFT P90 s", ".2f")]
    if d.loaded is not None:
        row.update(offered_rps=d.loaded.rate_rps, loaded_ttft_p50_s=d.loaded.p50_s,
                   loaded_ttft_p90_s=d.loaded.p90_s)
        cols += [Column("offered_rps", "at the plan's load req/s", ".3f"),
                 Column("loaded_ttft_p50_s", "loaded TTFT P50 s", _seconds_or_saturated),
                 Column("loaded_ttft_p90_s", "loaded TTFT P90 s", _seconds_or_saturated)]
    return Section("degraded_link", f"At a degraded link ({num(d.bandwidth_bps / 1e9)} Gbps): instance counts as "
                   "planned, threshold re-optimized", [row], cols,
                   [f"instances as planned: {_counts(d.planned)}; the planned {num(d.planned.link_bps / 1e9)} Gbps "
                    f"plan serves {d.planned.lambda_max:.3f} req/s"])


def size_report(a) -> Report:
    """The report of a `SizeAnswer`."""
    sc = a.scenario
    name = a.plan.layout.name
    what = "PrfaaS-PD plan" if name == "prfaas-pd" else f"Plan of layout {name}"
    sections = [Section("plan", f"{what} for {sc.model.name} ({sc.mode} mode, {sc.inputs} inputs)",
                        [plan_row(name, a.plan)], SIZE_COLUMNS), _stages_section(a.plan)]
    if a.target is not None:
        sections.append(_target_section(a.target, a.plan))
    if a.loaded is not None:
        sections.append(Section("loaded", "TTFT and TPOT under load (queueing included)", [loaded_row(a.loaded)],
                                LOADED_COLUMNS, [f"method: {a.loaded.method}"]))
    if a.slo is not None:
        sections.append(_slo_section(a.slo, a.slo_search))
    if a.verification is not None:
        sections.append(_verify_section(a.verification))
    if a.link_sizing is not None:
        sections.append(_link_section(a.link_sizing))
    if a.degraded is not None:
        sections.append(_degraded_section(a.degraded))
    if a.error_bars is not None:
        sections.append(_error_bars_section(a.error_bars, a.plan, sc.mode, a.verdict))
    if a.sensitivity is not None:
        sections.append(_sensitivity_section(a.sensitivity))
    if getattr(a, "configurations", None) is not None:
        from .config_report import config_sections

        sections[1:1] = config_sections(a.configurations)
    elif getattr(a, "layout_roles", None) is not None:
        from .config_report import configurations_section

        sections[1:1] = [configurations_section([r.record() for r in a.layout_roles], "searched: per role of the layout file's site")]
    return Report(sections, a.notes + [INSTANCE_NOTE], warnings=a.warnings,
                  meta={"model": sc.model.name, "mode": sc.mode, "input_level": sc.inputs, "basis": a.basis,
                        "stack": _stack(sc), **verdict_meta(a.verdict),
                        "link_headroom": a.link_headroom.record() if getattr(a, "link_headroom", None) else None})


def _at_rate_row(name: str, r) -> dict:
    lat = r.latency
    return {"layout": name, "offered_rps": r.rate_rps, "served_rps": r.served_rps, "saturated": r.saturated,
            "loaded_ttft_p50_s": lat.ttft_p50_s if lat else None, "loaded_ttft_p90_s": lat.ttft_p90_s if lat else None,
            "loaded_ttft_p99_s": lat.ttft_p99_s if lat else None,
            "utilization_of_lambda_max": lat.load if lat else None,
            "usd_per_mtok_cloud": r.usd_per_mtok}


AT_RATE_COLUMNS = [Column("layout", "layout"), Column("served_rps", "req/s served", ".3f"),
                   Column("utilization_of_lambda_max", "of own Lambda_max", ".0%"),
                   Column("saturated", "saturated", lambda v: "SATURATED" if v else "no"),
                   Column("loaded_ttft_p50_s", "TTFT P50 s", ".2f"), Column("loaded_ttft_p90_s", "TTFT P90 s", ".2f"),
                   Column("loaded_ttft_p99_s", "TTFT P99 s", ".2f"),
                   Column("usd_per_mtok_cloud", "cloud $ per 1M output tokens", ".2f")]


def _opt2(v) -> str:
    """A gain band end (x) to 2 decimals; blank where the row has none (PrfaaS-PD itself; a baseline with
    another chip or a remote site, whose inputs the sampler does not share)."""
    return "" if v is None else f"{v:.2f}"


def compare_report(a) -> Report:
    """The report of a `CompareAnswer`."""
    sc = a.scenario
    bars = a.baseline_bars
    rows = [dict(plan_row(name, p), prfaas_speedup_x=a.gains[name],
                 gain_p10_x=bars[name].gain.p10 if name in bars else None,
                 gain_p90_x=bars[name].gain.p90 if name in bars else None) for name, p in a.plans.items()]
    cols = COMPACT_COLUMNS + [Column("prfaas_speedup_x", "PrfaaS-PD gain over it", ".2f"),
                              Column("gain_p10_x", "gain P10", _opt2), Column("gain_p90_x", "gain P90", _opt2)]
    sections = [Section("compare", f"Layouts for {sc.model.name} ({sc.mode} mode, {sc.inputs} inputs)", rows, cols)]
    if a.at_rate is not None:
        r = a.at_rate
        how = (f"{r.load:.0%} of PrfaaS-PD's Lambda_max" if r.load is not None else "--rate")
        rows = [_at_rate_row(name, x) for name, x in r.layouts.items()]
        method = next((x.latency.method for x in r.layouts.values() if x.latency), "")
        sections.append(Section("at_rate", f"Every layout at one offered load: {r.rate_rps:.3f} req/s ({how})",
                                rows, AT_RATE_COLUMNS,
                                ["a saturated layout serves only its Lambda_max (its queue grows without bound): no "
                                 "TTFT, cost per token at what it serves"] + ([f"method: {method}"] if method else [])))
    if a.error_bars is not None:
        sections.append(_error_bars_section(a.error_bars, a.plans["prfaas-pd"], sc.mode, a.verdict))
    if a.sensitivity is not None:
        sections.append(_sensitivity_section(a.sensitivity))
    meta = {"model": sc.model.name, "mode": sc.mode, "input_level": sc.inputs, "basis": a.basis, "stack": _stack(sc),
            **verdict_meta(a.verdict)}
    if a.at_rate is not None:
        meta.update(offered_rps=a.at_rate.rate_rps, offered_load=a.at_rate.load)
    return Report(sections, a.notes + [INSTANCE_NOTE], warnings=a.warnings, meta=meta)


def _stack(sc) -> str | None:
    """The stack in effect (of the sites that name none), None where the paper's inputs stand in for it."""
    return sc.stack if sc.inputs == "predicted" else None


def reproduce_report(a) -> Report:
    """The report of a `ReproduceAnswer`; ``meta.verdict`` and ``meta.failed`` carry the verdict."""
    cols = [Column("label", "figure"), Column("published", "published", num), Column("ours", "ours", num),
            Column("difference", "difference", lambda v: ("+" if v >= 0 else "") + num(v)),
            Column("tolerance", "band", lambda v: "±" + num(v)),
            Column("unit", "unit"), Column("within", "within"), Column("known_gap", "known gap", lambda v: "yes" if v else "")]
    layouts = [plan_row(n, p) for n, p in a.study.plans.items()]
    title = f"PrfaaS paper case study, {a.kind}: published vs ours"
    sections = [Section("figures", title, a.figures, cols),
                Section("layouts", "Optimized layouts", layouts, COMPACT_COLUMNS)]
    if a.h20_prediction is not None:
        sections.append(Section(
            "h20_prediction", "Our 8xH20 prediction for prfaas-1t vs the paper's back-solved H20 inputs",
            a.h20_prediction,
            [Column("quantity", "quantity"), Column("len_tokens", "length / context", ",d"),
             Column("backsolved", "back-solved", ",.3f"), Column("predicted", "predicted", ",.3f"),
             Column("ratio", "predicted / back-solved", ".2f")],
            ["back-solved values are the paper-inputs level (never used to fit); their ratio to ours is the "
             "H20 prediction error separating the two levels"]))
    pr = a.study.price_ratio
    return Report(sections, a.notes + [INSTANCE_NOTE, "RESULT: " + a.verdict], warnings=a.warnings,
                  meta={"model": a.study.scenario.model.name, "input_level": a.inputs, "mode": a.mode,
                        "reproduction": a.kind, "verdict": a.status, "verdict_line": a.verdict,
                        "strict": a.strict, "fail_on": "any" if a.strict else "unexplained", "within": a.within, "figures": len(a.figures), "failed": a.failed,
                        "known_gaps": a.known_gaps, "price_ratio_h200_h20": pr.profiles,
                        "price_ratio_needed": [pr.needed_low, pr.needed_high]})
