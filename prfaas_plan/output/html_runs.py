"""Report pages for layouts (``size --layout``: one row per site), simulations (``simulate``) and fits
(``calibrate``, ``check``: predicted vs measured per point). Each reads like the others
(docs/report.md): the question, the answer sentence with cards, warnings, tables, figures, assumptions.
Nothing here computes a planning figure; the medians of shown errors are summaries of the shown rows.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..units import plural
from .html import Result, card, card_for, cell_value, configuration_table, e, figure, fmt, measured_pairs, table
from .html_blocks import bars, inputs_block, mpl, other_sections, section_html, warnings_block
from .plots import figure_svg


def _question(text: str) -> str:
    return f'<h2>The question</h2><p class="question">{e(text)}</p>'


def _answer(text: str, cards: list[str]) -> str:
    return f'<h2>The answer</h2><p class="verdict">{e(text)}</p><div class="cards">{"".join(cards)}</div>'


def _model(res: Result) -> str:
    return res.meta.get("model") or "the model"


# ---------------------------------------------------------------------------------------------------
# layouts


LAYOUT_REPLACES = ("remote", "local", "link", "link_efficiency", "rtt", "instance_chips", "remote_instance_chips",
                   "local_instance_chips")


def layout_page(res: Result) -> list[str]:
    """N PD sites sharing one remote prefill pool: per-site table (one column per site), req/s, link use and
    TTFT per site as bars; the verdict against the baselines when the result has one (``size`` or
    ``compare --layout``)."""
    rows = res.sections["sites"]
    sites = [r for r in rows if r.get("site") not in ("total", "remote")]
    total = next((r for r in rows if r.get("site") == "total"), None)
    remote_row = next((r for r in rows if r.get("site") == "remote"), None)
    name = res.meta.get("layout") or "the layout"
    remote = (re.sub(r"R shared$", "", str(remote_row.get("instances") or "")) if remote_row else
              re.sub(r"R shared$", "", str(total.get("instances") or "")) if total else "")
    shared = f" sharing {remote} remote prefill instances" if remote and remote[0].isdigit() else ""
    has_ttft = any(s.get("ttft_p90_s") is not None for s in sites)
    question = (f"How much can {_model(res)} serve on layout {name}: {len(sites)} PD sites "
                f"({', '.join(str(s.get('site')) for s in sites)}){shared}, each over its own link — per site, "
                "which threshold and split, how many requests per second, at what link load"
                + (", TTFT and cost, and does it pay against the baselines?" if has_ttft else "?"))
    parts = []
    for s in sites:
        bits = [f"{fmt(s.get('throughput_rps'))} req/s"]
        if s.get("instances"):
            bits.append(str(s["instances"]))
        t = cell_value(s, "threshold_tokens")
        if t is not None:
            bits.append("every prompt prefilled locally" if t == float("inf") else f"t {fmt(t)} tokens")
        elif s.get("pure_threshold") is False:
            bits.append("routing by the rule below")
        if s.get("link_utilization") is not None:
            bits.append(f"link {fmt(s['link_utilization'], 'link_utilization')} used")
        if s.get("binding_stage"):
            bits.append(f"{str(s['binding_stage']).replace('_', ' ')} binds")
        if s.get("ttft_p90_s") is not None:
            bits.append(f"TTFT P90 {fmt(s['ttft_p90_s'])} s")
        parts.append(f"{s.get('site')} {', '.join(bits)}")
    answer = (f"The layout serves {fmt(total.get('throughput_rps'))} requests/s in total: " if total else "") \
        + "; ".join(parts) + "."
    if res.meta.get("verdict_line"):
        answer += " " + str(res.meta["verdict_line"]) + "."
    cards = ([card_for(total, "throughput_rps", "total requests/s")] if total else []) + [
        card_for(s, "throughput_rps", f"{s.get('site')} requests/s") for s in sites]
    verdict = res.meta.get("verdict")
    if verdict:
        cards.append(card(f"verdict vs {str(res.meta.get('verdict_vs') or 'the baseline').split(' (')[0]}",
                          str(verdict)))
    labels = [str(s.get("site")) for s in sites]
    plots = [bars(labels, [float(s.get("throughput_rps") or 0) for s in sites], "requests/s served by the site",
                  caption="Requests per second each PD site serves at the layout's optimum.", first_red=False)]
    if any(s.get("link_utilization") is not None for s in sites):
        plots.append(bars(labels, [100 * float(s.get("link_utilization") or 0) for s in sites],
                          "link utilization (%)", ref=100.0,
                          caption="Each site's link egress as a share of its link (dashed: 100%).",
                          first_red=False))
    if has_ttft:
        plots.append(bars(labels, [float(s.get("ttft_p90_s") or 0) for s in sites], "unloaded TTFT P90 (s)",
                          caption="Each site's unloaded P90 time to first token, with its own link's RTT.",
                          first_red=False))
    # the layout file replaces --remote/--local/--link: showing their defaults would mislead
    inputs = {k: v for k, v in (res.meta.get("inputs") or {}).items() if k not in LAYOUT_REPLACES}
    shown = replace(res, meta={**res.meta, "inputs": inputs}) if inputs else res
    body = [_question(question), inputs_block(shown), _answer(answer, cards), warnings_block(res.warnings),
            "<h2>Sites</h2>", table(rows, transpose=True), *plots]
    configs = res.sections.get("configurations")
    if configs:
        body += ["<h2>Configuration per role and site</h2>", configuration_table(configs)]
    return body + other_sections(res, {"sites", "configurations"})


# ---------------------------------------------------------------------------------------------------
# simulations

SUMMARY_CARDS = (("ttft_p50_s", "TTFT P50 (s)"), ("ttft_p90_s", "TTFT P90 (s)"), ("ttft_p99_s", "TTFT P99 (s)"),
                 ("tpot_mean_s", "TPOT mean (s)"), ("steady_throughput_rps", "throughput (req/s)"),
                 ("lambda_max_rps", "Lambda_max (req/s)"), ("remote_share", "prefilled remotely"),
                 ("egress_gbps", "link egress (Gbps)"), ("completed", "requests completed"))
QUEUES = (("remote_waiting", "remote prefill waiting"), ("local_waiting", "local prefill waiting"),
          ("decode_waiting", "decode waiting"))


def _timeline_plot(rows: list[dict]) -> str:
    plt = mpl()
    t = [float(r.get("t_s") or 0) for r in rows]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 5), dpi=100, sharex=True)
    for key, label in QUEUES:
        if any(r.get(key) is not None for r in rows):
            ax.plot(t, [float(r.get(key) or 0) for r in rows], lw=1.5, label=label)
    ax.set_ylabel("requests waiting")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    ax2.plot(t, [float(r.get("link_gbps") or 0) for r in rows], lw=1.5, color="tab:purple", label="egress")
    if any(r.get("link_capacity_gbps") is not None for r in rows):
        ax2.plot(t, [float(r.get("link_capacity_gbps") or 0) for r in rows], lw=1, ls="--", color="0.3",
                 label="line rate")
    ax2.set_ylabel("link (Gbps)")
    ax2.set_xlabel("time since the first arrival (s)")
    ax2.legend(fontsize=8, loc="lower right")
    ax2.grid(alpha=0.3)
    if any(r.get("threshold_tokens") is not None for r in rows):
        ax3 = ax2.twinx()
        ts = [float(r.get("threshold_tokens") or 0) for r in rows]
        ax3.plot(t, ts, lw=1, color="tab:green")
        ax3.set_ylim(0, max(ts) * 1.15 or 1)  # from zero: a fixed threshold reads as a flat line
        ax3.set_ylabel("threshold t (tokens, green)")
    return figure(figure_svg(fig), "Queues (top) and link egress against its line rate, with the routing "
                  "threshold (bottom), over the run; each point is the mean over the timeline table's interval.",
                  wide=True)


def simulate_page(res: Result) -> list[str]:
    if "sim_sites" in res.sections:  # several PD sites
        from .html_simsites import simulate_sites_page

        return simulate_sites_page(res)
    s = (res.sections.get("summary") or [{}])[0]
    split = f"{s['n_prefill']}P+{s['n_decode']}D local" if s.get("n_prefill") is not None else "its planned split"
    question = (f"What latency do requests see when {_model(res)} is served on {s.get('layout', 'the layout')} "
                f"({split}, threshold {fmt(s.get('threshold_tokens'))} tokens) at "
                f"{fmt(s.get('offered_rps'))} offered requests/s with the {s.get('scheduler', 'static')} "
                "scheduler: which queue builds, how busy is the link, does it keep up?")
    lat = res.sections.get("latency", [])
    analytic = next((r for r in lat if str(r.get("source", "")).startswith("analytic at")), None)
    answer = (f"Of {fmt(s.get('arrived'))} requests, {fmt(s.get('completed'))} completed: TTFT P50 "
              f"{fmt(s.get('ttft_p50_s'))} s, P90 {fmt(s.get('ttft_p90_s'))} s, P99 {fmt(s.get('ttft_p99_s'))} s")
    if analytic:
        answer += (f" (the analytic queueing model says P50 {fmt(analytic.get('ttft_p50_s'))} s, "
                   f"P90 {fmt(analytic.get('ttft_p90_s'))} s)")
    answer += (f"; throughput {fmt(s.get('steady_throughput_rps'))} of {fmt(s.get('offered_rps'))} offered "
               f"requests/s (Lambda_max {fmt(s.get('lambda_max_rps'))})")
    stages = [r for r in res.sections.get("stages", []) if r.get("utilization") is not None]
    if stages:
        busiest = max(stages, key=lambda r: float(r["utilization"]))
        answer += (f"; the busiest stage is {str(busiest.get('stage')).replace('_', ' ')} at "
                   f"{fmt(busiest['utilization'], 'utilization')}")
    cards = [card_for(s, k, label) for k, label in SUMMARY_CARDS if s.get(k) is not None]
    body = [_question(question), inputs_block(res), _answer(answer + ".", cards), warnings_block(res.warnings),
            "<h2>Latency percentiles</h2>", table(lat)]
    if res.sections.get("routes"):
        body += [section_html("TTFT by route (s)", res.sections["routes"])]
    if res.sections.get("timeline"):
        body += ["<h2>Timeline</h2>", _timeline_plot(res.sections["timeline"])]
    shown = {"summary", "latency", "routes"}
    return body + ["<h2>Details</h2>", section_html("summary", [s])] + other_sections(res, shown)


# ---------------------------------------------------------------------------------------------------
# fits: calibrate, check

FIT_TABLE_KEYS = ("model", "instance", "chip", "stack", "concurrency", "len_tokens", "output_tokens")


def _median_abs(values: list[float]) -> float | None:
    v = sorted(abs(x) for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _scatter(rows: list[dict], q: str, measured: str, predicted: str) -> str:
    plt = mpl()
    pts = [r for r in rows if r.get(measured) and r.get(predicted)]
    fig, ax = plt.subplots(figsize=(5.2, 4.6), dpi=100)
    group = next((k for k in ("instance", "chip", "model") if k in rows[0]), None)
    groups = sorted({str(r.get(group)) for r in pts}) if group else [""]
    for g in groups:
        sel = [r for r in pts if not group or str(r.get(group)) == g]
        ax.scatter([float(r[measured]) for r in sel], [float(r[predicted]) for r in sel], s=14, alpha=0.75, label=g)
    if pts:
        lo = min(min(float(r[measured]), float(r[predicted])) for r in pts) * 0.8
        hi = max(max(float(r[measured]), float(r[predicted])) for r in pts) * 1.25
        ax.plot([lo, hi], [lo, hi], color="0.2", lw=1)
        for f in (0.8, 1.25):
            ax.plot([lo, hi], [lo * f, hi * f], color="0.5", lw=0.8, ls="--")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    unit = measured.split("_measured", 1)[1].lstrip("_") or "value"
    ax.set_xlabel(f"measured {q.upper()} ({unit})")
    ax.set_ylabel(f"predicted {q.upper()} ({unit})")
    if group and len(groups) > 1:
        ax.legend(fontsize=7, title=group, title_fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    return figure(figure_svg(fig), f"{q.upper()}: predicted against measured, one dot per point; the solid line "
                  "is equality, the dashed lines -20% and +25%.")


def fit_page(res: Result) -> list[str]:
    """Every section with measured and predicted columns gets a scatter per quantity and a table of
    its points; the answer gives the median |error| (in-sample, and leave-one-out and leave-one-model-out
    where the rows carry them)."""
    command = res.meta.get("command", "check")
    fitted = [(name, rows, measured_pairs(rows)) for name, rows in res.sections.items() if measured_pairs(rows)]
    n = sum(len(rows) for _, rows, _ in fitted)
    source = res.meta.get("measurements") or "the measurements"
    what = ("fitted chip efficiencies and serving-stack overheads" if command == "calibrate"
            else "planner's performance model")
    question = (f"How closely does the {what} predict the measured latencies of {n} {plural(n, 'point')} "
                f"({source}), "
                + ("in-sample, leaving each point out and leaving each model out?" if command == "calibrate"
                   else "point by point?"))
    parts, cards, figs, tables = [], [], [], []
    for name, rows, pairs in fitted:
        for q, measured, predicted in pairs:
            have = [r for r in rows if r.get(measured) is not None and r.get(predicted) is not None]
            errs = {kind: _median_abs([r.get(f"{q}{suffix}") for r in have])
                    for kind, suffix in (("in-sample", "_error"), ("leave-one-out", "_loo_error"),
                                         ("leave-one-model-out", "_lomo_error"))}
            errs = {k: v for k, v in errs.items() if v is not None}
            if not have:
                continue
            if errs:
                parts.append(f"{q.upper()} median |error| " + ", ".join(f"{v:.0%} {k}" for k, v in errs.items())
                             + f" ({len(have)} {plural(len(have), 'point')})")
                cards += [card(f"{q.upper()} median |error|, {k}", f"{v:.1%}") for k, v in errs.items()]
            figs.append(_scatter(have, q, measured, predicted))
        keys = [k for k in FIT_TABLE_KEYS if any(k in r for r in rows)]
        cols = keys + [k for q, m, p in pairs for k in (m, p, f"{q}_error") if any(k in r for r in rows)]
        tables += [f"<h3>{e(name.replace('_', ' ').capitalize())} ({len(rows)})</h3>", table(rows, cols)]
    answer = ("; ".join(parts) + ".") if parts else f"{n} {plural(n, 'point')} compared."
    body = [_question(question), inputs_block(res), _answer(answer, cards), warnings_block(res.warnings),
            "<h2>Predicted vs measured</h2>", '<div class="cards">' + "".join(figs) + "</div>"]
    return body + ["<h2>Points</h2>", *tables] + other_sections(res, {name for name, _, _ in fitted})
