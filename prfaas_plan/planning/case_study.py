"""The PrfaaS paper's case study (``docs/methods.md``), set up from models, and its published figures.

Two input levels:

- ``paper``: H200 prefill from ``prfaas-1t``'s measured 8xH200 profile; H20 prefill and decode from
  ``paper_backsolved_h20_inputs.csv`` (back-solved from the paper's stage throughputs; never used to
  fit anything). Checks our arithmetic.
- ``predicted``: H200 as above; H20 prefill and decode from our calibrated performance model. The
  difference between the two levels is the error of our H20 prediction.

The published figures below are *targets* that reproduction output is compared with; nothing here
feeds them into a computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analytic.throughput import PerfInputs
from ..performance.given import MODEL, TPOT_S, backsolved_h20
from ..profiles import get_model
from .plans import compare, perf_inputs

REMOTE = "32xH200"
LOCAL = "64xH20"
HOMOGENEOUS = "96xH20"
LINK = "100G"
STACK = "paper-vllm"   # the paper's in-house vLLM (its Table 5 engine) on both sites of the predicted level
INSTANCE_CHIPS = 8
"""The paper's instance shape on both sites. The case study keeps it and runs no configuration search
(`planning.configurations`): it reproduces the paper's published figures, which are 8-chip TP instances;
``size``, ``compare`` and ``simulate`` search the shapes instead (docs/methods.md, sections 4, 6 and 7)."""
OUTPUT_TOKENS = 1024
LOADED_SHARE = 0.8   # the loaded P90 TTFT figure: both layouts at this fraction of homogeneous PD's Lambda_max


@dataclass(frozen=True)
class Target:
    """One published figure with the band each input level must meet (absolute, in ``unit``).

    Paper-level bands are tight (the inputs are back-solved from the results, so only our arithmetic and
    the paper's rounding separate them); predicted-level bands allow for a calibrated model's error on
    a chip it was not fitted to (prefill and decode errors of 15-35% in leave-one-out) but no more: a
    figure outside them is a miss unless `KNOWN_GAPS` names and quantifies its cause.
    """

    key: str
    label: str
    published: float
    unit: str
    tol_paper: float
    tol_predicted: float


# Published figures (arXiv 2604.15039, section on the case study; ``docs/methods.md`` section 6). The paper's "K"
# here is 1000 tokens: P(L > t) = 49.6% for the stated workload holds at t = 19,400, not 19,866. The paper's
# P90 TTFT reduction does not say at what load; it is checked unloaded and at `LOADED_SHARE`. The ~15% gain
# at equal cost is the paper's (quoted in issue 11); its price basis is purchase price.
TARGETS = (
    Target("threshold_tokens", "optimal threshold t", 19_400, "tokens", 0.03 * 19_400, 0.25 * 19_400),
    Target("offloaded_share", "share of requests offloaded", 0.496, "fraction", 0.01, 0.08),
    Target("mean_offloaded_tokens", "mean offloaded length E[L | L > t]", 44_000, "tokens",
           0.03 * 44_000, 0.10 * 44_000),
    Target("egress_gbps", "average remote egress", 13.0, "Gbps", 1.0, 2.0),
    Target("speedup_vs_homogeneous", "throughput vs homogeneous PD (equal instances)", 1.54, "x", 0.02, 0.15),
    Target("speedup_vs_naive", "throughput vs naive heterogeneous", 1.32, "x", 0.02, 0.12),
    Target("gain_equal_cost", "throughput vs homogeneous PD at equal purchase cost", 1.15, "x", 0.03, 0.10),
    Target("p90_ttft_reduction", "P90 TTFT reduction vs homogeneous PD, unloaded (no queueing)", 0.64, "fraction",
           0.03, 0.10),
    Target("p90_ttft_reduction_loaded", f"P90 TTFT reduction vs homogeneous PD, both at {LOADED_SHARE:.0%} of "
           "homogeneous PD's Lambda_max", 0.64, "fraction", 0.05, 0.15),
)


def h20_prediction_error(context_tokens: float) -> list[dict]:
    """Our predicted 8xH20 prefill latency and decode capacity for prfaas-1t against the back-solved
    paper inputs, point by point: the error that separates the two reproduction levels."""
    from ..performance import decode_capacity, parse_instance, prefill_model

    backsolved, paper_decode = backsolved_h20()
    h20 = parse_instance(f"{INSTANCE_CHIPS}xH20")
    model = get_model(MODEL)
    predicted = prefill_model(model, h20, source="roofline", stack=STACK)
    rows = [{"quantity": "prefill_latency_s", "len_tokens": int(l), "backsolved": t,
             "predicted": float(predicted.latency_s(l)), "ratio": float(predicted.latency_s(l)) / t}
            for l, t in zip(backsolved.lengths, backsolved.latencies_s)]
    cap = decode_capacity(model, h20, TPOT_S, context_tokens, stack=STACK)
    rows.append({"quantity": "decode_tokens_per_s", "len_tokens": int(round(context_tokens)),
                 "backsolved": paper_decode.tokens_per_s, "predicted": cap.tokens_per_s,
                 "ratio": cap.tokens_per_s / paper_decode.tokens_per_s})
    return rows


def engine_notes(inputs: str) -> tuple[str, ...]:
    """What the case study says about its serving engine at each input level."""
    from ..profiles import get_stack

    if inputs == "predicted":
        return (f"both sites on the paper's engine: {get_stack(STACK).describe()}",)
    return (f"no stack applied: the paper's measured H200 table and back-solved H20 inputs already hold its "
            f"engine (--inputs predicted runs both sites on stack {STACK})",)


def question(inputs: str = "paper", mode: str = "representative", link: str = LINK, **shapes):
    """The case study's planning `Question`: the paper's model, chips, link, SLO, workload, stack and bytes
    convention (one logical copy of the cache), ``inputs`` and ``mode`` as given, instance shapes and dtypes
    (``shapes``) as `Question.parse` takes them (the paper's: 8-chip instances, the profile's dtypes)."""
    from dataclasses import replace

    from .question import Question

    q = Question.parse(model=MODEL, remote=REMOTE, local=LOCAL, link=link, rtt="0ms", tpot=f"{TPOT_S * 1e3:g}ms",
                       workload="paper", stack=STACK, transfer_bytes="logical", inputs=inputs, mode=mode,
                       instance_chips=shapes.pop("instance_chips", INSTANCE_CHIPS), **shapes)
    return replace(q, input_notes=engine_notes(inputs))


def scenario(inputs: str = "paper", mode: str = "representative", link: str = LINK, **shapes):
    """The case study as a planning `Scenario` (`question`'s)."""
    return question(inputs, mode, link, **shapes).scenario


def case_study_perf(inputs: str) -> PerfInputs:
    """PerfInputs of the case study (remote 8xH200, local 8xH20) for ``inputs`` = paper or predicted."""
    return perf_inputs(scenario(inputs))


@dataclass(frozen=True)
class PriceRatio:
    """The H200/H20 purchase-price ratio per chip the profiles give, and the ratios at which our equal-cost
    gain would be within its band (``needed_low`` to below ``needed_high``; None when no homogeneous size
    in the scanned range gives it)."""

    profiles: float
    needed_low: float | None
    needed_high: float | None
    equal_cost_instances: int      # homogeneous instances the profiles' prices buy


@dataclass(frozen=True)
class CaseStudy:
    """The layouts optimized on the case-study workload, and the figures compared to the paper."""

    inputs: str
    mode: str
    scenario: object
    plans: dict
    figures: dict[str, float]
    price_ratio: PriceRatio
    loaded_rate_rps: float


def _figures(sc, plans: dict) -> tuple[dict[str, float], float]:
    """The published figures' counterparts from the optimized layouts, and the loaded figure's rate."""
    from .questions import latency_at_rate

    prf, hom, naive = plans["prfaas-pd"], plans["homogeneous-pd"], plans["naive-heterogeneous"]
    rate = LOADED_SHARE * hom.best.lambda_max
    prf_loaded, hom_loaded = latency_at_rate(prf, sc, rate), latency_at_rate(hom, sc, rate)
    figures = {
        "threshold_tokens": prf.best.threshold,
        "offloaded_share": prf.best.p_remote,
        "mean_offloaded_tokens": prf.best.l_long,
        "egress_gbps": prf.best.egress_bps / 1e9,
        "speedup_vs_homogeneous": prf.best.lambda_max / hom.best.lambda_max,
        "speedup_vs_naive": prf.best.lambda_max / naive.best.lambda_max,
        "gain_equal_cost": prf.best.lambda_max / plans["homogeneous-equal-capex"].best.lambda_max,
        "p90_ttft_reduction": 1.0 - prf.ttft.p90_s / hom.ttft.p90_s,
        "p90_ttft_reduction_loaded": 1.0 - prf_loaded.ttft_p90_s / hom_loaded.ttft_p90_s,
    }
    return figures, rate


def _price_ratio(sc, plans: dict, perf: PerfInputs) -> PriceRatio:
    """The profiles' H200/H20 price ratio and the ratios the published equal-cost gain needs: with
    ``r_n`` remote and ``l_n`` local instances of ``c_r`` and ``c_l`` chips, PrfaaS-PD's price buys ``n``
    local instances for per-chip ratios from ``(n - l_n) c_l / (r_n c_r)`` up to (not including) that of
    ``n + 1``; the needed ``n`` are those whose homogeneous throughput puts PrfaaS-PD's gain within the
    figure's band at this input level."""
    from ..layout import homogeneous_pd
    from ..profiles import get_hardware
    from .plans import optimize

    prf = plans["prfaas-pd"]
    lay = prf.layout
    r_chip, l_site = lay.remote.instance, lay.pd_sites[0]
    price = {chip: get_hardware(chip).price.purchase_usd for chip in (r_chip.chip.name, l_site.instance.chip.name)}
    ratio = price[r_chip.chip.name] / price[l_site.instance.chip.name]
    r_n, l_n, c_r, c_l = lay.remote.instances, l_site.instances, r_chip.chips, l_site.instance.chips
    target = next(t for t in TARGETS if t.key == "gain_equal_cost")
    band = target.tol_paper if sc.inputs == "paper" else target.tol_predicted
    needed = []
    for n in range(l_n + 1, l_n + 8 * r_n + 1):
        hom = optimize(homogeneous_pd(f"{n * c_l}x{l_site.instance.chip.name}", c_l), sc, perf)
        if abs(prf.best.lambda_max / hom.best.lambda_max - target.published) <= band:
            needed.append(n)
    hom_n = plans["homogeneous-equal-capex"].layout.pd_sites[0].instances
    if not needed:
        return PriceRatio(ratio, None, None, hom_n)
    per_chip = c_l / (r_n * c_r)
    return PriceRatio(ratio, (min(needed) - l_n) * per_chip, (max(needed) + 1 - l_n) * per_chip, hom_n)


def run_case_study(inputs: str = "paper", mode: str = "representative", link: str = LINK, **shapes) -> CaseStudy:
    """Optimize PrfaaS-PD, homogeneous PD (96xH20, and at PrfaaS-PD's purchase price) and naive
    heterogeneous and derive the figures; ``shapes`` as `scenario` takes them."""
    sc = scenario(inputs, mode, link, **shapes)
    perf = perf_inputs(sc)
    plans = compare(sc, "capex", perf=perf)
    figures, rate = _figures(sc, plans)
    return CaseStudy(inputs, mode, sc, plans, figures, _price_ratio(sc, plans, perf), rate)


def with_backsolved_h20(study: CaseStudy, parts: tuple[str, ...]) -> dict[str, float]:
    """The predicted study's figures recomputed with the back-solved H20 ``parts`` (``prefill``,
    ``decode``) in place of ours: the counterfactual that attributes a predicted-level miss to our H20."""
    from dataclasses import replace

    from .plans import optimize

    prefill, decode = backsolved_h20()
    any_plan = study.plans["prfaas-pd"]
    sites = {n: replace(sp, **({"prefill": prefill} if "prefill" in parts else {}),
                        **({"decode": decode} if "decode" in parts else {})) for n, sp in any_plan.perf.sites.items()}
    perf = replace(any_plan.perf, sites=sites)
    plans = {name: optimize(p.layout, study.scenario, perf) for name, p in study.plans.items()}
    return _figures(study.scenario, plans)[0]


def _price_gap(study: CaseStudy, row: dict, memo: dict) -> str | None:
    """The equal-cost gain misses because the profiles' price ratio is outside the range it needs."""
    pr = study.price_ratio
    if pr.needed_low is None:
        return None
    if pr.needed_low <= pr.profiles < pr.needed_high:
        return None
    return (f"price ratio: the published gain needs an H200/H20 purchase-price ratio of {pr.needed_low:.2f} to "
            f"under {pr.needed_high:.2f} per chip; the hardware profiles' indications give {pr.profiles:.2f} "
            f"({pr.equal_cost_instances} homogeneous instances for PrfaaS-PD's price)")


# One H20 input at a time: swapping both is the paper level itself, which would explain every figure the
# arithmetic gets right (a blanket gap); a figure only both together bring into its band stays a miss.
H20_PARTS = (("prefill",), ("decode",))


def _h20_gap(study: CaseStudy, row: dict, memo: dict) -> str | None:
    """A predicted-level miss one of our H20 inputs explains: the figure comes within its band when that
    input alone (prefill latency or decode capacity) is replaced by the back-solved one. ``memo`` keeps
    the counterfactual studies across figures."""
    if study.inputs != "predicted":
        return None
    for parts in H20_PARTS:
        if parts not in memo:
            memo[parts] = with_backsolved_h20(study, parts)
        value = memo[parts][row["figure"]]
        if abs(value - row["published"]) <= row["tolerance"]:
            if "errors" not in memo:
                memo["errors"] = h20_prediction_error(study.scenario.context_tokens)
            pre = [r["ratio"] for r in memo["errors"] if r["quantity"] == "prefill_latency_s"]
            dec = next(r["ratio"] for r in memo["errors"] if r["quantity"] == "decode_tokens_per_s")
            what = {"prefill": f"our H20 prefill latency is {min(pre):.2f}-{max(pre):.2f}x the back-solved",
                    "decode": f"our H20 decode capacity is {dec:.2f}x the back-solved"}
            return (f"H20 prediction: {'; '.join(what[p] for p in parts)}; with the back-solved H20 "
                    f"{' and '.join(parts)} this figure is {_with_unit(value, row['unit'])} (within its band)")
    return None


def _with_unit(v: float, unit: str) -> str:
    """``v`` and its unit for a known-gap line (thousands separated, else 3 significant digits)."""
    return f"{v:,.0f} {unit}" if abs(v) >= 1000 else f"{v:.3g} {unit}"


# Causes that can explain a figure out of its band, per (input level, figure): each a function of the study,
# the figure's row and a memo, returning one quantified line when its cause holds there, else None. A miss with
# no cause that holds is a failure (``reproduce`` exits 1).
KNOWN_GAPS: dict[tuple[str, str], tuple] = {
    **{("predicted", t.key): (_h20_gap,) for t in TARGETS},
    ("paper", "gain_equal_cost"): (_price_gap,),
    ("predicted", "gain_equal_cost"): (_price_gap, _h20_gap),
}


def compare_to_targets(study: CaseStudy) -> list[dict]:
    """One row per published figure: ours, the difference, the band, whether it is met, and, when it is
    not, the first listed cause (`KNOWN_GAPS`) that holds, as one line (empty: unexplained)."""
    rows, memo = [], {}
    for t in TARGETS:
        ours = study.figures[t.key]
        tol = t.tol_paper if study.inputs == "paper" else t.tol_predicted
        diff = ours - t.published
        row = {"figure": t.key, "label": t.label, "unit": t.unit, "published": t.published, "ours": ours,
               "difference": diff, "tolerance": tol, "within": bool(np.isfinite(ours) and abs(diff) <= tol),
               "known_gap": ""}
        if not row["within"]:
            for cause in KNOWN_GAPS.get((study.inputs, t.key), ()):
                if (line := cause(study, row, memo)) is not None:
                    row["known_gap"] = line
                    break
        rows.append(row)
    return rows
