"""The HTML report's page for each kind of result: size, compare, reproduce, sweep (and any other
sectioned JSON, generically). Each page reads: the question, the answer (with error bars where the
result has them), the warnings, the tables, the plots, then every assumption and data source.
Building blocks are in `html`; plots are matplotlib figures inlined as SVG.
"""

from __future__ import annotations

import re
from collections import Counter

from ..units import plural
from .html import Result, card, card_for, configuration_table, e, figure, fmt, key_value_table, notes_list, page, table
from .html_blocks import (
    assumptions_block,
    bars,
    defaults_and_rest,
    inputs_block,
    mpl,
    other_sections,
    section_html,
    warnings_block,
)
from .plots import figure_svg


def _stage_plot(stages: list[dict]) -> str:
    plt = mpl()
    finite = [s for s in stages if s.get("bound_rps") is not None]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(finite)), dpi=100)
    names = [s["stage"].replace("_", " ") for s in finite]
    vals = [float(s["bound_rps"]) for s in finite]
    colors = ["crimson" if s.get("binding") else "tab:blue" for s in finite]
    ax.barh(names, vals, color=colors)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("system throughput bound (requests/s); red = binding stage = Lambda_max")
    ax.set_xlim(0, max(vals) * 1.18 if vals else 1)
    ax.grid(axis="x", alpha=0.3)
    return figure(figure_svg(fig), "Each stage's bound on the request rate at the optimum; the smallest binds. "
                  "Stages without a bound (e.g. no remote site) are left out.")


def model_name(res: Result) -> str:
    """The model profile the result is for, from its meta or its ``default model`` note."""
    return res.meta.get("model") or dict(defaults_and_rest(res.notes)[0]).get("model", "the model")


def _hardware_phrase(plan: dict) -> str:
    """``4 remote prefill instances of 8xH200 and 8 local PD instances of 8xH20`` from a plan row; only
    what the row has (no remote site, no instance shape: left out)."""
    r, p, d = (plan.get(k) for k in ("remote_prefill_instances", "local_prefill_instances", "local_decode_instances"))
    local = f"{(p or 0) + (d or 0)} local PD instances" + (f" of {plan['local_instance']}"
                                                           if plan.get("local_instance") else "")
    if not r:
        return local + " (no remote prefill site)"
    return f"{r} remote prefill instances" + (f" of {plan['remote_instance']}" if plan.get("remote_instance")
                                              else "") + " and " + local


def _size_page(res: Result) -> list[str]:
    plan = res.sections.get("plan", [{}])[0]
    question = (f"How should {model_name(res)} be served with {_hardware_phrase(plan)}: which routing threshold "
                "and prefill/decode split, how many requests per second, at what link load, latency and cost?")
    cards = [card_for(plan, k, label) for k, label in (
        ("throughput_rps", "requests/s (Lambda_max)"), ("output_tokens_per_s", "output tokens/s"),
        ("threshold_tokens", "threshold t (tokens)"), ("offloaded_share", "requests offloaded"),
        ("instances", "instances (R remote + P/D local)"), ("binding_stage", "binding stage"),
        ("egress_gbps", "link egress (Gbps)"), ("link_utilization", "link utilization (of line rate)"),
        ("ttft_unloaded_p90_s", "unloaded TTFT P90 (s)"), ("capex_usd", "capex (USD)"),
        ("cloud_usd_per_hour", "cloud cost (USD/h)")) if plan.get(k) is not None]
    verdict = f"PrfaaS-PD serves {fmt(plan.get('throughput_rps'))} requests/s"
    verdict += f" with {plan['instances']}" if plan.get("instances") else ""
    if plan.get("threshold_tokens") is not None:
        verdict += f"; prompts longer than {fmt(plan['threshold_tokens'])} uncached tokens are prefilled remotely"
    if plan.get("binding_stage"):
        verdict += f"; the {plan['binding_stage'].replace('_', ' ')} stage binds"
    # the verdict against homogeneous PD at the file's basis (its sentence names the basis)
    said = next((n for n in res.notes if n.startswith("verdict vs ")), None)
    verdict += f". The {said[0].lower()}{said[1:]}" if said else ""
    stages = res.sections.get("stages", [])
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>', inputs_block(res),
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}.</p><div class="cards">{"".join(cards)}</div>',
            warnings_block(res.warnings)]
    if stages:
        body += ["<h2>Stage table</h2>", table(stages, highlight=lambda s: s.get("binding")), _stage_plot(stages)]
    configs = res.sections.get("configurations")
    if configs:
        body += ["<h2>Configuration per role</h2>", configuration_table(configs)]
    body += ["<h2>Details</h2>"] + [section_html("plan", [plan])] + other_sections(res, {"plan", "stages",
                                                                                         "configurations"})
    return body


BASIS_WORDS = {"capex": "purchase price (capex)", "rental": "cloud rental cost", "chips": "chip count",
               "instances": "instance count"}
BAR_VERDICTS = {"pays": "beats it", "does not pay": "does not beat it", "cannot tell": "cannot be told apart from it"}


def _basis_baseline(rows: list[dict], basis: str) -> dict | None:
    """The homogeneous baseline held at the comparison basis: ``homogeneous-equal-<basis>``, or
    ``homogeneous-pd`` (equal instance count) when the basis is instances or that row is absent."""
    by = {r.get("layout"): r for r in rows}
    return by.get(f"homogeneous-equal-{basis}") or by.get("homogeneous-pd")


def _error_bar_baseline(res: Result) -> str | None:
    """The layout the error bars' gain is against (the ``verdict vs X`` note), None without error bars."""
    for n in res.notes:
        m = re.match(r"verdict vs ([\w-]+)", n)
        if m:
            return m.group(1)
    return None


def _compare_answer(res: Result, rows: list[dict], basis: str) -> tuple[str, list[str]]:
    """One answer on one basis: the gain over the homogeneous baseline at that basis (with its error
    bars when they are for that baseline), then the gains over the other layouts, each named with what
    it holds equal (the ``baselines:`` note). Returns (sentence, extra cards)."""
    prf = next((r for r in rows if r.get("layout") == "prfaas-pd"), rows[0])
    ref = _basis_baseline(rows, basis)
    cards = []
    if ref is None or ref.get("prfaas_speedup_x") is None:
        return f"PrfaaS-PD serves {fmt(prf.get('throughput_rps'))} requests/s.", cards
    gain = float(ref["prfaas_speedup_x"])
    held = BASIS_WORDS.get(basis if ref["layout"] != "homogeneous-pd" else "instances", basis)
    text = (f"At equal {held}, PrfaaS-PD serves {fmt(prf.get('throughput_rps'))} requests/s against "
            f"{fmt(ref.get('throughput_rps'))} for homogeneous PD ({ref['layout']}, {ref.get('instances', '')}): "
            f"{gain:.2f}x, so it {'beats' if gain > 1 else 'does not beat'} it")
    bars = {r.get("quantity"): r for r in res.sections.get("error_bars", [])}
    g = bars.get("prfaas_gain_x")
    bar_ref = _error_bar_baseline(res)
    # meta.verdict since issue 24; a results file written before it has the verdict as an error-bar row
    verdict_row = next((r for q, r in bars.items() if str(q).startswith("verdict")), {})
    said = res.meta.get("verdict") or verdict_row.get("point")
    if g and bar_ref == ref["layout"] and said:
        text += (f"; with the calibration error bars it {BAR_VERDICTS.get(said, 'is undecided')}"
                 f" at 90% confidence (gain P10 {fmt(g.get('p10'))}, P90 {fmt(g.get('p90'))})")
        cards.append(card(f"gain vs {ref['layout']} P10 - P90", f"{fmt(g.get('p10'))} - {fmt(g.get('p90'))}"))
    # one basis per answer: other homogeneous rows (an older file's, held at another basis) are not quoted
    others = [r for r in rows if r is not prf and r is not ref and r.get("prfaas_speedup_x") is not None
              and not str(r.get("layout", "")).startswith("homogeneous")]
    if others:
        text += ". Against the other layouts it is " + ", ".join(
            f"{float(r['prfaas_speedup_x']):.2f}x {r['layout']}" for r in others)
    return text + ".", cards


def _error_bars_rows(res: Result) -> list[dict]:
    """The error-bar rows with the verdict row naming the layout it is against."""
    bar_ref = _error_bar_baseline(res)
    out = []
    for r in res.sections.get("error_bars", []):
        if str(r.get("quantity", "")).startswith("verdict") and bar_ref:
            r = {**r, "quantity": f"verdict vs {bar_ref} (90% confidence)"}
        elif r.get("quantity") == "prfaas_gain_x" and bar_ref:
            r = {**r, "quantity": f"gain vs {bar_ref} (x)"}
        out.append(r)
    return out


COMPARE_ROWS = ("layout", "instances", "throughput_rps", "prfaas_speedup_x", "threshold_tokens", "offloaded_share",
                "binding_stage", "egress_gbps", "link_utilization", "ttft_unloaded_p50_s", "ttft_unloaded_p90_s",
                "ttft_unloaded_p99_s", "capex_usd", "cloud_usd_per_hour", "rps_per_musd",
                "output_tokens_per_usd_cloud", "remote_instance", "local_instance")


def _compare_page(res: Result) -> list[str]:
    rows = res.sections["compare"]
    basis = res.meta.get("basis") or next((n.split(":", 1)[1].strip() for n in res.notes
                                           if n.startswith("comparison basis:")), "instances")
    question = (f"Does PrfaaS-PD (remote prefill over the link) serve more requests per second than homogeneous PD "
                f"and naive heterogeneous serving for {model_name(res)}, at equal "
                f"{BASIS_WORDS.get(basis, basis)}?")
    answer, extra = _compare_answer(res, rows, basis)
    ref = _basis_baseline(rows, basis)
    cards = [card_for(r, "throughput_rps", f"{r.get('layout')} requests/s") for r in rows] + extra
    plot = bars([r.get("layout", "") for r in rows], [float(r.get("throughput_rps") or 0) for r in rows],
                "Lambda_max (requests/s)", caption="Maximum request rate of each layout (PrfaaS-PD in red; the "
                f"dashed line is {ref['layout'] if ref else 'PrfaaS-PD'}, the baseline at the comparison basis).",
                ref=float(ref.get("throughput_rps") or 0) if ref else None)
    cols = [c for c in COMPARE_ROWS if any(r.get(c) is not None for r in rows)]
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>', inputs_block(res),
            f'<h2>The answer</h2><p class="verdict">{e(answer)}</p><div class="cards">{"".join(cards)}</div>',
            warnings_block(res.warnings), "<h2>Layouts</h2>",
            table(rows, cols, highlight=lambda r: r is ref, transpose=True), plot]
    bar_ref = _error_bar_baseline(res)
    if res.sections.get("error_bars") and ref is not None and bar_ref not in (None, ref["layout"]):
        # an older file's error bars held another basis: one basis per page (issue 21 item 4)
        body += [f"<p>The file's error bars are against {e(bar_ref)}, not the comparison basis's baseline; "
                 "run <code>prfaas-plan compare</code> again for error bars at this basis.</p>"]
    elif res.sections.get("error_bars"):
        body += [section_html("error_bars", _error_bars_rows(res))]
    return body + other_sections(res, {"compare", "error_bars"})


def _reproduce_page(res: Result) -> list[str]:
    figs = res.sections["figures"]
    verdict = res.meta.get("verdict_line") or next((n[len("RESULT: "):] for n in res.notes if n.startswith("RESULT: ")),
                              f"{sum(bool(f.get('within')) for f in figs)} of {len(figs)} figures within tolerance")
    setup = res.meta.get("reproduction") or next((n for n in res.notes if n.startswith("inputs:")), "")
    question = ("Does the planner, from its models, reproduce the figures the PrfaaS paper publishes for its "
                f"case study, each within a stated tolerance? ({setup})")
    plt = mpl()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.42 * len(figs)), dpi=100)
    z = [float(f["difference"]) / float(f["tolerance"]) if f.get("tolerance") else 0.0 for f in figs]
    ax.barh([f.get("label", f.get("figure")) for f in figs], z,
            color=["tab:blue" if f.get("within") else "crimson" for f in figs])
    ax.axvspan(-1, 1, color="tab:green", alpha=0.12, label="within tolerance")
    ax.axvline(0, color="0.3", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlim(min(-1.5, min(z) * 1.2), max(1.5, max(z) * 1.2))
    ax.set_xlabel("(ours - published) / tolerance")
    ax.legend(fontsize=8, loc="lower right")
    plot = figure(figure_svg(fig), "Each figure's difference in units of its tolerance; inside the green band "
                  "it reproduces, red bars are out of tolerance.")
    cards = [card("figures within tolerance", f"{sum(bool(f.get('within')) for f in figs)} of {len(figs)}")]
    return [f'<h2>The question</h2><p class="question">{e(question)}</p>',
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}</p><div class="cards">{"".join(cards)}</div>',
            warnings_block(res.warnings), "<h2>Published vs ours</h2>",
            table(figs, highlight=lambda f: not f.get("within")), plot,
            *([section_html("layouts", res.sections["layouts"])] if res.sections.get("layouts") else []),
            *other_sections(res, {"figures", "layouts"})]


SWEEP_TABLE = ("instances", "threshold_tokens", "throughput_rps", "gain_vs_homogeneous", "gain_vs_naive",
               "binding_stage", "egress_gbps", "link_utilization", "ttft_unloaded_p90_s", "cost_per_mtok_usd",
               "error")
MAX_TABLE_ROWS = 300
SWEEP_LAYOUT_REPLACES = ("remote", "local", "link", "link_efficiency", "link_price", "rtt", "instance_chips")
"""Inputs a sweep's layout file replaces (`prfaas_plan.planning.sweep_layout.REPLACED`), not shown as held fixed."""


def _sweep_page(res: Result, schema) -> list[str]:
    from .sweep_plots import sweep_figure, varied_inputs

    rows = res.sections["points"]
    axes = varied_inputs(rows, schema.inputs, [a for a in res.meta.get("axes", "").split(",") if a])
    fixed = [(k, rows[0].get(k)) for k in schema.inputs if k not in dict(axes)]
    on_layout = bool(rows[0].get("layout")) and "layout" not in dict(axes)
    if on_layout:  # the layout file gives the sites, shapes and links: the defaults of those inputs do not apply
        fixed = [(k, v) for k, v in fixed if k not in SWEEP_LAYOUT_REPLACES]
    else:
        fixed = [(k, v) for k, v in fixed if k not in ("layout", "link_scale", "remote_instances")
                 or v not in ("", None, 1.0, -1)]
    ok = [r for r in rows if not r.get("error")]
    metrics = (rows[0].get("pareto_metrics") or "").split(",") if rows[0].get("pareto_metrics") else None
    question = res.meta.get("description") or (f"Which of these {len(rows)} design points is worth building, and "
                                               "how robust is the choice?")
    question += (f" ({len(rows)} {plural(len(rows), 'point')}; varied: "
                 + "; ".join(f"{k} over {', '.join(map(str, v))}" for k, v in axes) + ")")
    cards = [card("points planned", f"{len(ok)} of {len(rows)}")]
    gains = [r for r in ok if r.get("gain_vs_homogeneous") is not None]
    verdict = ""
    if gains:
        best = max(gains, key=lambda r: r["gain_vs_homogeneous"])
        pays = sum(r["gain_vs_homogeneous"] > 1 for r in gains)
        label = ", ".join(f"{k}={best.get(k)}" for k, _ in axes)
        basis = result_basis(res)
        held = f"At equal {BASIS_WORDS.get(basis, basis)}, " if basis else ""
        cards += [card("points where PrfaaS-PD beats homogeneous PD", f"{pays} of {len(gains)}"),
                  card_for(best, "gain_vs_homogeneous", f"best gain vs homogeneous ({label})")]
        verdict = (f"{held}PrfaaS-PD beats homogeneous PD at {pays} of {len(gains)} {plural(len(gains), 'point')}; "
                   f"the best is {label} with {best['gain_vs_homogeneous']:.2f}x, "
                   f"{fmt(best.get('throughput_rps'))} requests/s.")
    cheap = [r for r in ok if r.get("cost_per_mtok_usd") is not None]
    if cheap:
        c = min(cheap, key=lambda r: r["cost_per_mtok_usd"])
        cards.append(card_for(c, "cost_per_mtok_usd", "lowest cloud USD per M output tokens ("
                               + ", ".join(f"{k}={c.get(k)}" for k, _ in axes) + ")"))
    warnings = list(res.warnings)
    for reason, n in Counter(r["error"] for r in rows if r.get("error")).most_common():
        warnings.append(f"{n} {plural(n, 'point')} could not be planned: {reason}")
    for reason, n in Counter(r["baseline_error"] for r in rows if r.get("baseline_error")).most_common():
        warnings.append(f"{n} {plural(n, 'point')} {plural(n, 'has', 'have')} no baseline (gains empty): {reason}")
    if gains and any(r["gain_vs_homogeneous"] <= 1 for r in gains):
        warnings.append(f"PrfaaS-PD does not beat homogeneous PD at {sum(r['gain_vs_homogeneous'] <= 1 for r in gains)}"
                        f" of {len(gains)} {plural(len(gains), 'point')}")
    cols = [k for k, _ in axes] + list(SWEEP_TABLE) + (["pareto"] if metrics else [])
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>',
            "<h3>Inputs held fixed</h3>", key_value_table((k, fmt(v, k)) for k, v in fixed),
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}</p><div class="cards">{"".join(cards)}</div>',
            warnings_block(warnings)]
    if metrics:
        front = [r for r in rows if r.get("pareto")]
        dirs = ", ".join(f"{m} ({'lower' if schema.directions.get(m) == 'min' else 'higher'} is better)"
                         for m in metrics)
        body += [f"<h2>Pareto front ({len(front)} {plural(len(front), 'point')})</h2>"
                 f"<p>Non-dominated on {e(dirs)}.</p>", table(front, cols)]
    body += ["<h2>Plots</h2>", figure(figure_svg(sweep_figure(rows, schema, metrics, order=[k for k, _ in axes])),
                                     "Top: all planned points, the front in red. Below: each headline figure "
                                     "against one input, one line per combination of the other inputs (or their "
                                     "median and range when there are many).", wide=True)]
    shown = rows[:MAX_TABLE_ROWS]
    more = f" (first {MAX_TABLE_ROWS} of {len(rows)}; all are in {res.source})" if len(rows) > MAX_TABLE_ROWS else ""
    body += [f"<h2>All points{e(more)}</h2>",
             "<p>Highlighted: on the Pareto front.</p>" if metrics else "",
             table(shown, cols, highlight=lambda r: r.get("pareto"))]
    glossary = [(k, meaning) for k, _, meaning in schema.columns if k not in schema.inputs]
    assumptions = [("every point is planned by the same code as prfaas-plan compare (PrfaaS-PD plus both "
                    "baselines on the same budget); its PrfaaS-PD figures are prfaas-plan size's"),
                   "TTFT figures are unloaded (no queueing); cost per token is at Lambda_max (full load)",
                   "costs come from the hardware profiles' price indications (labelled there), not quotes",
                   ("per-instance performance comes from the calibrated roofline or measured tables named in "
                    "prfaas-plan size's notes for the same inputs")]
    body += ["<h2>Assumptions and data sources</h2>", notes_list(assumptions), "<h3>Columns</h3>",
             key_value_table(glossary)]
    return body


def _generic_page(res: Result) -> list[str]:
    return ([inputs_block(res), warnings_block(res.warnings), "<h2>Results</h2>"]
            + other_sections(res, set()) + [assumptions_block(res)])


TITLES = {"size": "Sizing a PrfaaS-PD deployment", "compare": "PrfaaS-PD against its baselines",
          "layout": "A layout of PD sites sharing remote prefill", "simulate": "Simulated serving",
          "fit": "Predicted against measured",
          "reproduce": "Reproducing the PrfaaS paper's case study", "sweep": "Design-space sweep",
          "result": "prfaas-plan result"}


def build_html(res: Result, sweep_schema=None) -> str:
    """The report page for a `Result`; a sweep's needs the `rowfile.TableSchema` of its rows."""
    from .html_runs import fit_page, layout_page, simulate_page

    builders = {"size": _size_page, "compare": _compare_page, "reproduce": _reproduce_page,
                "layout": layout_page, "simulate": simulate_page, "fit": fit_page,
                "sweep": lambda r: _sweep_page(r, sweep_schema)}
    body = builders.get(res.kind, _generic_page)(res)
    if res.kind in ("size", "compare", "reproduce", "layout", "simulate", "fit"):
        body.append(assumptions_block(res))
    command = res.meta.get("command") or res.kind
    return page(TITLES[res.kind], f"from {res.source} (prfaas-plan {command})", body)


def result_basis(res: Result) -> str | None:
    """The one basis a result's verdicts hold (issue 21 item 4): its ``meta.basis``, else the basis column
    its sweep rows share, else a compare file's "comparison basis" note; None when it has none."""
    if res.meta.get("basis"):
        return res.meta["basis"]
    seen = {r.get("basis") for r in res.sections.get("points", []) if r.get("basis")}
    if len(seen) == 1:
        return seen.pop()
    return next((n.split(":", 1)[1].strip() for n in res.notes if n.startswith("comparison basis:")), None)


def write_html_report(source: str, output: str, sweep_schema=None) -> str | None:
    """Read a result file and write its report atomically (``sweep_schema``: see `build_html`); returns the
    result's basis (`result_basis`), which the command's own envelope carries as ``meta.basis``."""
    from .html import load_result
    from .report import write_atomic

    if not str(output).lower().endswith((".html", ".htm")):
        from ..errors import PlanError

        raise PlanError(f"`output` {output!r}: expected an .html file name")
    res = load_result(source, sweep_schema)
    write_atomic(output, build_html(res, sweep_schema))
    return result_basis(res)

