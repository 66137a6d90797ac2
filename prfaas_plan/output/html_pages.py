"""The HTML report's page for each kind of result: size, compare, reproduce, sweep (and any other
sectioned JSON, generically). Each page reads: the question, the answer (with error bars where the
result has them), the warnings, the tables, the plots, then every assumption and data source.
Building blocks are in `html`; plots are matplotlib figures inlined as SVG.
"""

from __future__ import annotations

import re
from collections import Counter

from .html import (
    NONFINITE,
    Result,
    card,
    card_for,
    cell_value,
    e,
    figure,
    fmt,
    key_value_table,
    notes_list,
    page,
    table,
)
from .plots import figure_svg

WIDE = 6  # a one-row section with more columns than this reads better as quantity | value


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _section_html(name: str, rows: list[dict], highlight=None) -> str:
    from .html import header

    title = f"<h3>{e(name.replace('_', ' ').capitalize())}</h3>"
    if len(rows) == 1 and len(rows[0]) > WIDE:
        row = rows[0]
        return title + key_value_table((header(k), fmt(cell_value(row, k), k))
                                       for k in row if not k.endswith(NONFINITE))
    return title + table(rows, highlight=highlight)


def _defaults_and_rest(notes: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    defaults, rest = [], []
    for n in notes:
        m = re.match(r"default ([\w-]+): (.*)", n)
        (defaults.append((m.group(1), m.group(2))) if m else rest.append(n))
    return defaults, rest


OUTPUT_OPTIONS = ("fmt", "format", "plot", "output", "quiet")  # how to print, not what was asked


def _inputs_block(res: Result) -> str:
    """The inputs in effect (the envelope's ``meta.inputs`` {name: {value, default}}, else the
    ``default X: Y`` notes), then the result's other scalar facts."""
    inputs = res.meta.get("inputs") if isinstance(res.meta.get("inputs"), dict) else {}  # today: the input level
    pairs = [(k, fmt(v["value"], k) + (" (default)" if v.get("default") else ""))
             for k, v in inputs.items() if isinstance(v, dict) and "value" in v and k not in OUTPUT_OPTIONS
             and not (v["value"] in (None, False) and v.get("default"))]  # options not asked for
    if not pairs:
        pairs = [(k, f"{v} (default)") for k, v in _defaults_and_rest(res.notes)[0]]
    facts = [(k + (" (profile)" if k == "model" else ""), fmt(v, k)) for k, v in res.meta.items()
             if not isinstance(v, (dict, list)) and v is not None]
    out = ("<h3>Inputs in effect</h3>" + key_value_table(pairs)) if pairs else ""
    return out + (("<h3>About this result</h3>" + key_value_table(facts)) if facts else "")


def _warnings_block(warnings: list[str]) -> str:
    if not warnings:
        return "<h2>Warnings</h2><p>None.</p>"
    return f'<h2>Warnings ({len(warnings)})</h2><div class="warn">{notes_list(warnings, "w")}</div>'


def _assumptions_block(res: Result) -> str:
    """Every note, less the ``default X: Y`` ones when the inputs table already shows them."""
    rest = list(res.notes) if isinstance(res.meta.get("inputs"), dict) else _defaults_and_rest(res.notes)[1]
    sources = res.meta.get("data_sources") or {}
    rest += [f"data source ({k}): {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sources.items()]
    return "<h2>Assumptions and data sources</h2>" + (notes_list(rest) if rest else "<p>None recorded.</p>")


def _other_sections(res: Result, shown: set[str]) -> list[str]:
    return [_section_html(n, rows) for n, rows in res.sections.items() if n not in shown]


# ---------------------------------------------------------------------------------------------------


def _stage_plot(stages: list[dict]) -> str:
    plt = _mpl()
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


def _size_page(res: Result) -> list[str]:
    plan = res.sections.get("plan", [{}])[0]
    model = res.meta.get("model") or dict(_defaults_and_rest(res.notes)[0]).get("model", "the model")
    r, p, d = (plan.get(k) for k in ("remote_prefill_instances", "local_prefill_instances", "local_decode_instances"))
    local_n = (p or 0) + (d or 0)
    question = (f"How should {model} be served with {r} remote prefill instances of {plan.get('remote_instance')} "
                f"and {local_n} local PD instances of {plan.get('local_instance')}: which routing threshold and "
                "prefill/decode split, how many requests per second, at what link load, latency and cost?")
    cards = [card_for(plan, k, label) for k, label in (
        ("throughput_rps", "requests/s (Lambda_max)"), ("output_tokens_per_s", "output tokens/s"),
        ("threshold_tokens", "threshold t (tokens)"), ("offloaded_share", "requests offloaded"),
        ("instances", "instances (R remote + P/D local)"), ("binding_stage", "binding stage"),
        ("egress_gbps", "link egress (Gbps)"), ("link_utilization", "link utilization (of line rate)"),
        ("ttft_unloaded_p90_s", "unloaded TTFT P90 (s)"), ("capex_usd", "capex (USD)"),
        ("cloud_usd_per_hour", "cloud cost (USD/h)"))]
    verdict = (f"PrfaaS-PD serves {fmt(plan.get('throughput_rps'))} requests/s with {plan.get('instances')}; "
               f"prompts longer than {fmt(plan.get('threshold_tokens'))} uncached tokens are prefilled remotely; "
               f"the {plan.get('binding_stage', '?').replace('_', ' ')} stage binds.")
    stages = res.sections.get("stages", [])
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>', _inputs_block(res),
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}</p><div class="cards">{"".join(cards)}</div>',
            _warnings_block(res.warnings)]
    if stages:
        body += ["<h2>Stage table</h2>", table(stages, highlight=lambda s: s.get("binding")), _stage_plot(stages)]
    body += ["<h2>Details</h2>"] + [_section_html("plan", [plan])] + _other_sections(res, {"plan", "stages"})
    return body


def _bars(labels, values, xlabel: str, ref=None, caption: str = "") -> str:
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(labels)), dpi=100)
    ax.barh(labels, values, color=["crimson" if i == 0 else "tab:blue" for i in range(len(labels))])
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    if ref is not None:
        ax.axvline(ref, color="0.3", ls="--", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, max(values) * 1.18 if values else 1)
    ax.grid(axis="x", alpha=0.3)
    return figure(figure_svg(fig), caption)


def _compare_page(res: Result) -> list[str]:
    rows = res.sections["compare"]
    model = res.meta.get("model") or dict(_defaults_and_rest(res.notes)[0]).get("model", "the model")
    basis = next((n.split(":", 1)[1].strip() for n in res.notes if n.startswith("comparison basis:")), "instances")
    question = (f"Does PrfaaS-PD (remote prefill over the link) serve more requests per second than homogeneous PD "
                f"and naive heterogeneous serving for {model}, on the same budget (basis: {basis})?")
    prf = next((r for r in rows if r.get("layout") == "prfaas-pd"), rows[0])
    cards = [card_for(r, "throughput_rps", f"{r.get('layout')} requests/s") for r in rows]
    others = [r for r in rows if r is not prf]
    gains = [(r.get("layout"), r.get("prfaas_speedup_x")) for r in others if r.get("prfaas_speedup_x") is not None]
    cards += [card(f"PrfaaS-PD gain vs {name}", f"{g:.2f}x") for name, g in gains]
    if gains and all(g > 1 for _, g in gains):
        verdict = "PrfaaS-PD beats both baselines: " + "; ".join(f"{g:.2f}x {n}" for n, g in gains) + "."
    else:
        verdict = ("PrfaaS-PD does not beat " + ", ".join(n for n, g in gains if g <= 1) + " here.") if gains else ""
    plot = _bars([r.get("layout", "?") for r in rows], [float(r.get("throughput_rps") or 0) for r in rows],
                 "Lambda_max (requests/s)", caption="Maximum request rate of each layout (PrfaaS-PD in red).")
    return [f'<h2>The question</h2><p class="question">{e(question)}</p>', _inputs_block(res),
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}</p><div class="cards">{"".join(cards)}</div>',
            _warnings_block(res.warnings), "<h2>Layouts</h2>", table(rows), plot,
            *_other_sections(res, {"compare"})]


def _reproduce_page(res: Result) -> list[str]:
    figs = res.sections["figures"]
    verdict = res.meta.get("verdict_line") or next((n[len("RESULT: "):] for n in res.notes if n.startswith("RESULT: ")),
                              f"{sum(bool(f.get('within')) for f in figs)} of {len(figs)} figures within tolerance")
    setup = res.meta.get("reproduction") or next((n for n in res.notes if n.startswith("inputs:")), "")
    question = ("Does the planner, from its models, reproduce the figures the PrfaaS paper publishes for its "
                f"case study, each within a stated tolerance? ({setup})")
    plt = _mpl()
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
            _warnings_block(res.warnings), "<h2>Published vs ours</h2>",
            table(figs, highlight=lambda f: not f.get("within")), plot, *_other_sections(res, {"figures"})]


SWEEP_TABLE = ("instances", "threshold_tokens", "throughput_rps", "gain_vs_homogeneous", "gain_vs_naive",
               "binding_stage", "egress_gbps", "link_utilization", "ttft_unloaded_p90_s", "cost_per_mtok_usd",
               "error")
MAX_TABLE_ROWS = 300


def _sweep_page(res: Result, schema) -> list[str]:
    from .sweep_plots import sweep_figure, varied_inputs

    rows = res.sections["points"]
    axes = varied_inputs(rows, schema.inputs, [a for a in res.meta.get("axes", "").split(",") if a])
    fixed = [(k, rows[0].get(k)) for k in schema.inputs if k not in dict(axes)]
    ok = [r for r in rows if not r.get("error")]
    metrics = (rows[0].get("pareto_metrics") or "").split(",") if rows[0].get("pareto_metrics") else None
    question = res.meta.get("description") or (f"Which of these {len(rows)} design points is worth building, and "
                                               "how robust is the choice?")
    question += (f" ({len(rows)} points; varied: " + "; ".join(f"{k} over {', '.join(map(str, v))}" for k, v in axes)
                 + ")")
    cards = [card("points planned", f"{len(ok)} of {len(rows)}")]
    gains = [r for r in ok if r.get("gain_vs_homogeneous") is not None]
    verdict = ""
    if gains:
        best = max(gains, key=lambda r: r["gain_vs_homogeneous"])
        pays = sum(r["gain_vs_homogeneous"] > 1 for r in gains)
        label = ", ".join(f"{k}={best.get(k)}" for k, _ in axes)
        cards += [card("points where PrfaaS-PD beats homogeneous PD", f"{pays} of {len(gains)}"),
                  card_for(best, "gain_vs_homogeneous", f"best gain vs homogeneous ({label})")]
        verdict = (f"PrfaaS-PD beats homogeneous PD at {pays} of {len(gains)} points; the best is {label} with "
                   f"{best['gain_vs_homogeneous']:.2f}x, {fmt(best.get('throughput_rps'))} requests/s.")
    cheap = [r for r in ok if r.get("cost_per_mtok_usd") is not None]
    if cheap:
        c = min(cheap, key=lambda r: r["cost_per_mtok_usd"])
        cards.append(card_for(c, "cost_per_mtok_usd", "lowest cloud USD per M output tokens ("
                               + ", ".join(f"{k}={c.get(k)}" for k, _ in axes) + ")"))
    warnings = list(res.warnings)
    for reason, n in Counter(r["error"] for r in rows if r.get("error")).most_common():
        warnings.append(f"{n} point(s) could not be planned: {reason}")
    for reason, n in Counter(r["baseline_error"] for r in rows if r.get("baseline_error")).most_common():
        warnings.append(f"{n} point(s) have no baseline (gains empty): {reason}")
    if gains and any(r["gain_vs_homogeneous"] <= 1 for r in gains):
        warnings.append(f"PrfaaS-PD does not beat homogeneous PD at {sum(r['gain_vs_homogeneous'] <= 1 for r in gains)}"
                        f" of {len(gains)} points")
    cols = [k for k, _ in axes] + list(SWEEP_TABLE) + (["pareto"] if metrics else [])
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>',
            "<h3>Inputs held fixed</h3>", key_value_table((k, fmt(v, k)) for k, v in fixed),
            f'<h2>The answer</h2><p class="verdict">{e(verdict)}</p><div class="cards">{"".join(cards)}</div>',
            _warnings_block(warnings)]
    if metrics:
        front = [r for r in rows if r.get("pareto")]
        dirs = ", ".join(f"{m} ({'lower' if schema.directions.get(m) == 'min' else 'higher'} is better)"
                         for m in metrics)
        body += [f"<h2>Pareto front ({len(front)} points)</h2><p>Non-dominated on {e(dirs)}.</p>", table(front, cols)]
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
    return ([_inputs_block(res), _warnings_block(res.warnings), "<h2>Results</h2>"]
            + _other_sections(res, set()) + [_assumptions_block(res)])


TITLES = {"size": "Sizing a PrfaaS-PD deployment", "compare": "PrfaaS-PD against its baselines",
          "reproduce": "Reproducing the PrfaaS paper's case study", "sweep": "Design-space sweep",
          "result": "prfaas-plan result"}


def build_html(res: Result, sweep_schema=None) -> str:
    """The report page for a `Result`; a sweep's needs the `rowfile.TableSchema` of its rows."""
    builders = {"size": _size_page, "compare": _compare_page, "reproduce": _reproduce_page,
                "sweep": lambda r: _sweep_page(r, sweep_schema)}
    body = builders.get(res.kind, _generic_page)(res)
    if res.kind in ("size", "compare", "reproduce"):
        body.append(_assumptions_block(res))
    return page(TITLES[res.kind], f"from {res.source} ({res.kind} result)", body)


def write_html_report(source: str, output: str, sweep_schema=None) -> None:
    """Read a result file and write its report atomically (``sweep_schema``: see `build_html`)."""
    from .html import load_result
    from .report import write_atomic

    if not str(output).lower().endswith((".html", ".htm")):
        from ..errors import PlanError

        raise PlanError(f"`output` {output!r}: expected an .html file name")
    write_atomic(output, build_html(load_result(source, sweep_schema), sweep_schema))

