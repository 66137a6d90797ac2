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
from ..layout import Link
from ..performance.given import MODEL, TPOT_S, backsolved_h20
from ..profiles import get_model
from ..units import parse_rate_bps
from ..workload import paper_workload
from .plans import compare, perf_inputs, scenario_for

REMOTE = "32xH200"
LOCAL = "64xH20"
HOMOGENEOUS = "96xH20"
LINK = "100G"
INSTANCE_CHIPS = 8
OUTPUT_TOKENS = 1024


@dataclass(frozen=True)
class Target:
    """One published figure with the tolerance each input level must meet (absolute, in ``unit``)."""

    key: str
    label: str
    published: float
    unit: str
    tol_paper: float
    tol_predicted: float


# Published figures (arXiv 2604.15039, section on the case study; ``docs/methods.md`` section 6). The paper's "K"
# here is 1000 tokens: P(L > t) = 49.6% for the stated workload holds at t = 19,400, not 19,866.
TARGETS = (
    Target("threshold_tokens", "optimal threshold t", 19_400, "tokens", 0.03 * 19_400, 0.25 * 19_400),
    Target("offloaded_share", "share of requests offloaded", 0.496, "fraction", 0.01, 0.08),
    Target("mean_offloaded_tokens", "mean offloaded length E[L | L > t]", 44_000, "tokens",
           0.03 * 44_000, 0.10 * 44_000),
    Target("egress_gbps", "average remote egress", 13.0, "Gbps", 1.0, 2.0),
    Target("speedup_vs_homogeneous", "throughput vs homogeneous PD", 1.54, "x", 0.02, 0.15),
    Target("speedup_vs_naive", "throughput vs naive heterogeneous", 1.32, "x", 0.02, 0.12),
    Target("p90_ttft_reduction", "P90 TTFT reduction vs homogeneous PD", 0.64, "fraction", 0.03, 0.10),
)


def h20_prediction_error(context_tokens: float) -> list[dict]:
    """Our predicted 8xH20 prefill latency and decode capacity for prfaas-1t against the back-solved
    paper inputs, point by point: the error that separates the two reproduction levels."""
    from ..performance import decode_capacity, parse_instance, prefill_model

    backsolved, paper_decode = backsolved_h20()
    h20 = parse_instance(f"{INSTANCE_CHIPS}xH20")
    model = get_model(MODEL)
    predicted = prefill_model(model, h20, source="roofline")
    rows = [{"quantity": "prefill_latency_s", "len_tokens": int(l), "backsolved": t,
             "predicted": float(predicted.latency_s(l)), "ratio": float(predicted.latency_s(l)) / t}
            for l, t in zip(backsolved.lengths, backsolved.latencies_s)]
    cap = decode_capacity(model, h20, TPOT_S, context_tokens)
    rows.append({"quantity": "decode_tokens_per_s", "len_tokens": int(round(context_tokens)),
                 "backsolved": paper_decode.tokens_per_s, "predicted": cap.tokens_per_s,
                 "ratio": cap.tokens_per_s / paper_decode.tokens_per_s})
    return rows


def scenario(inputs: str = "paper", mode: str = "representative", link: str = LINK):
    """The case study as a planning `Scenario` (paper workload, 32xH200 + 64xH20, 100G), with the paper's
    convention for bytes on the link: one logical copy of the cache."""

    if inputs not in ("paper", "predicted"):
        raise ValueError(inputs)
    return scenario_for(get_model(MODEL), REMOTE, LOCAL, Link(parse_rate_bps(link, "--link")), INSTANCE_CHIPS,
                        TPOT_S, mode, inputs, paper_workload(), transfer="logical")


def case_study_perf(inputs: str) -> PerfInputs:
    """PerfInputs of the case study (remote 8xH200, local 8xH20) for ``inputs`` = paper or predicted."""
    return perf_inputs(scenario(inputs))


# Figures that cannot be met honestly at an input level, with the reason (shown by `reproduce`).
# Predicted level: our H20 is calibrated on Mooncake's tuned SGLang run of Qwen3-235B (near-peak GEMMs,
# ~0.1 s overhead), and comes out 1.5-3.5x faster at prefill and over 2x higher in decode capacity than
# the paper's back-solved H20 (see `h20_prediction_error`). With that much stronger local cluster the
# optimum moves: fewer, longer requests are worth offloading and PrfaaS gains less. The published
# figures rest on the paper's own (slower) H20 stack, which no public measurement here describes.
_PREDICTED_GAP = ("our calibrated H20 (Mooncake SGLang measurement) is 1.5-3.5x faster at prefill and over 2x "
                  "higher in decode capacity than the paper's back-solved H20, so the local PD cluster is "
                  "far stronger and the optimum moves (see the H20 prediction table)")
KNOWN_GAPS: dict[tuple[str, str], str] = {("predicted", t.key): _PREDICTED_GAP for t in TARGETS}


@dataclass(frozen=True)
class CaseStudy:
    """The three layouts optimized on the case-study workload, and the figures compared to the paper."""

    inputs: str
    mode: str
    scenario: object
    plans: dict
    figures: dict[str, float]


def run_case_study(inputs: str = "paper", mode: str = "representative", link: str = LINK) -> CaseStudy:
    """Optimize PrfaaS-PD, homogeneous PD (96xH20) and naive heterogeneous and derive the figures."""
    sc = scenario(inputs, mode, link)
    plans = compare(sc, "instances")
    prf, hom, naive = plans["prfaas-pd"], plans["homogeneous-pd"], plans["naive-heterogeneous"]
    figures = {
        "threshold_tokens": prf.best.threshold,
        "offloaded_share": prf.best.p_remote,
        "mean_offloaded_tokens": prf.best.l_long,
        "egress_gbps": prf.best.egress_bps / 1e9,
        "speedup_vs_homogeneous": prf.best.lambda_max / hom.best.lambda_max,
        "speedup_vs_naive": prf.best.lambda_max / naive.best.lambda_max,
        "p90_ttft_reduction": 1.0 - prf.ttft.p90_s / hom.ttft.p90_s,
    }
    return CaseStudy(inputs, mode, sc, plans, figures)


def compare_to_targets(study: CaseStudy) -> list[dict]:
    """One row per published figure: ours, the difference, the tolerance, whether it is met, and, when
    it is not, the reason if it is a listed known gap."""
    rows = []
    for t in TARGETS:
        ours = study.figures[t.key]
        tol = t.tol_paper if study.inputs == "paper" else t.tol_predicted
        diff = ours - t.published
        rows.append({"figure": t.key, "label": t.label, "unit": t.unit, "published": t.published,
                     "ours": ours, "difference": diff, "tolerance": tol,
                     "within": bool(np.isfinite(ours) and abs(diff) <= tol)})
        rows[-1]["known_gap"] = "" if rows[-1]["within"] else KNOWN_GAPS.get((study.inputs, t.key), "")
    return rows
