"""Reproduction of the paper's case study from models (golden figures, explicit bands).

Paper inputs check the arithmetic on inputs back-solved from the paper's results (tight bands); predicted
inputs put our H20 performance model in place of the back-solved H20 numbers (wider bands). Each figure
prints how far off it is. A predicted-level miss is a known gap only when a named cause holds and is
quantified (`case_study.KNOWN_GAPS`); otherwise ``reproduce`` exits 1.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from prfaas_plan.planning import case_study as paper

TARGETS = {t.key: t for t in paper.TARGETS}
# Predicted-level figures no single H20 input brings into its band (both together are the paper level).
# Strict: a fix that brings one in fails here until it is removed from the list. Empty: each miss (threshold,
# offloaded share and length, gain over naive) comes within its band with the back-solved H20 decode alone, and
# says so. The mean offloaded length only just: 48,395 tokens that way against the band's 48,400 edge (55,732
# ours); a refit that moves H20's decode or prefill a little can put it here.
PREDICTED_UNEXPLAINED: set[str] = set()


@pytest.fixture(scope="module")
def paper_study():
    return paper.run_case_study("paper")


@pytest.fixture(scope="module")
def predicted_study():
    return paper.run_case_study("predicted")


@pytest.fixture(scope="module")
def paper_rows(paper_study):
    return {r["figure"]: r for r in paper.compare_to_targets(paper_study)}


@pytest.fixture(scope="module")
def predicted_rows(predicted_study):
    return {r["figure"]: r for r in paper.compare_to_targets(predicted_study)}


def _check(row):
    print(f"{row['figure']}: ours {row['ours']:.4g} vs published {row['published']:.4g} "
          f"(diff {row['difference']:+.4g}, band ±{row['tolerance']:.4g}) {row['known_gap']}")
    if not row["within"] and row["known_gap"]:
        pytest.xfail(f"known gap: {row['known_gap']}")
    assert row["within"]


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_paper_inputs_reproduce_published_figure(paper_rows, key):
    _check(paper_rows[key])


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason="unexplained miss"))
                                 if k in PREDICTED_UNEXPLAINED else k for k in sorted(TARGETS)])
def test_predicted_inputs_reproduce_published_figure(predicted_rows, key):
    _check(predicted_rows[key])


def test_paper_level_says_it_is_an_arithmetic_check(cli):
    code, out, err = cli("reproduce", "--inputs", "paper", "--format", "json")
    doc = json.loads(out)
    assert code == 0, err
    assert "arithmetic check on inputs back-solved from the paper's results" in doc["meta"]["reproduction"]
    assert {r["figure"] for r in doc["sections"]["figures"]} == set(TARGETS)
    assert doc["meta"]["verdict"] in ("pass", "pass-with-known-gaps") and doc["meta"]["failed"] == []
    code, out, _ = cli("reproduce", "--inputs", "paper")
    assert "arithmetic check on inputs back-solved from the paper's results" in out.split("\n", 2)[0] + out


def test_predicted_exits_1_on_an_unexplained_miss(cli):
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--format", "json")
    doc = json.loads(out)
    assert (code == 1) == (doc["meta"]["verdict"] == "fail") == bool(doc["meta"]["failed"])
    assert set(doc["meta"]["failed"]) == PREDICTED_UNEXPLAINED
    assert {r["figure"] for r in doc["sections"]["figures"]} >= {"gain_equal_cost", "p90_ttft_reduction_loaded"}


def _targets_at(study, shift: dict[str, float]):
    """Targets moved onto the study's own figures (plus ``shift`` in band units): a controlled miss."""
    out = []
    for t in paper.TARGETS:
        band = t.tol_paper if study.inputs == "paper" else t.tol_predicted
        out.append(replace(t, published=study.figures[t.key] + shift.get(t.key, 0.0) * band))
    return tuple(out)


def test_a_miss_without_a_named_cause_exits_1_and_a_named_one_exits_0(cli, monkeypatch, predicted_study):
    monkeypatch.setattr(paper, "TARGETS", _targets_at(predicted_study, {}))
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--format", "json")
    assert code == 0 and json.loads(out)["meta"]["verdict"] == "pass"
    monkeypatch.setattr(paper, "TARGETS", _targets_at(predicted_study, {"egress_gbps": 2.0}))
    monkeypatch.setattr(paper, "KNOWN_GAPS", {})
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--format", "json")
    meta = json.loads(out)["meta"]
    assert code == 1 and meta["verdict"] == "fail" and meta["failed"] == ["egress_gbps"]
    named = {("predicted", "egress_gbps"): (lambda study, row, memo: "cause: 2.0 bands off on purpose",)}
    monkeypatch.setattr(paper, "KNOWN_GAPS", named)
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--format", "json")
    meta = json.loads(out)["meta"]
    assert code == 0 and meta["verdict"] == "pass-with-known-gaps" and meta["known_gaps"] == ["egress_gbps"]
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--strict", "--format", "json")
    assert code == 1 and json.loads(out)["meta"]["failed"] == ["egress_gbps"]
    # CI spells the rule: --fail-on any is --strict; --fail-on unexplained (the default) passes a known gap
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--fail-on", "any", "--format", "json")
    meta = json.loads(out)["meta"]
    assert code == 1 and meta["failed"] == ["egress_gbps"] and meta["fail_on"] == "any" and meta["strict"]
    code, out, _ = cli("reproduce", "--inputs", "predicted", "--fail-on", "unexplained", "--format", "json")
    meta = json.loads(out)["meta"]
    assert code == 0 and meta["failed"] == [] and meta["fail_on"] == "unexplained"
    monkeypatch.setattr(paper, "KNOWN_GAPS", {})   # unexplained now: both rules fail
    for rule in ("unexplained", "any"):
        code, out, _ = cli("reproduce", "--inputs", "predicted", "--fail-on", rule, "--format", "json")
        assert code == 1 and json.loads(out)["meta"]["failed"] == ["egress_gbps"], rule


def test_strict_and_fail_on_unexplained_contradict(cli):
    code, out, err = cli("reproduce", "--strict", "--fail-on", "unexplained")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--fail-on any" in err
    code, out, err = cli("reproduce", "--fail-on", "sometimes")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_a_cause_that_does_not_hold_names_no_gap(monkeypatch, paper_study):
    """The H20 cause holds only at the predicted level, the price cause only outside the needed ratios."""
    rows = {r["figure"]: r for r in paper.compare_to_targets(paper_study)}
    assert paper._h20_gap(paper_study, rows["threshold_tokens"], {}) is None
    pr = paper_study.price_ratio
    inside = replace(paper_study, price_ratio=replace(pr, profiles=pr.needed_low))
    assert paper._price_gap(inside, rows["gain_equal_cost"], {}) is None
    outside = replace(paper_study, price_ratio=replace(pr, profiles=pr.needed_high))
    assert f"{pr.needed_high:.2f}" in paper._price_gap(outside, rows["gain_equal_cost"], {})


def test_equal_cost_gain_and_its_price_ratio(paper_study):
    from prfaas_plan.profiles import get_hardware

    pr = paper_study.price_ratio
    ratio = get_hardware("h200").price.purchase_usd / get_hardware("h20").price.purchase_usd
    assert pr.profiles == pytest.approx(ratio)
    # PrfaaS-PD's price buys floor(8 + 4 * ratio) 8xH20 instances (8 local + 4 remote of the same chip count)
    assert pr.equal_cost_instances == int(8 + 4 * ratio)
    plans = paper_study.plans
    gain = plans["prfaas-pd"].best.lambda_max / plans["homogeneous-equal-capex"].best.lambda_max
    assert paper_study.figures["gain_equal_cost"] == pytest.approx(gain)
    assert gain < paper_study.figures["speedup_vs_homogeneous"]     # more homogeneous instances for the money
    assert pr.needed_low < pr.needed_high
    print(f"equal-cost gain {gain:.3f} at price ratio {ratio:.2f}; published 1.15 needs {pr.needed_low:.2f}"
          f"-{pr.needed_high:.2f}")


def test_loaded_p90_reduction_is_at_the_stated_rate(paper_study):
    from prfaas_plan.planning.questions import latency_at_rate

    plans, sc = paper_study.plans, paper_study.scenario
    rate = paper.LOADED_SHARE * plans["homogeneous-pd"].best.lambda_max
    assert paper_study.loaded_rate_rps == pytest.approx(rate)
    prf, hom = latency_at_rate(plans["prfaas-pd"], sc, rate), latency_at_rate(plans["homogeneous-pd"], sc, rate)
    assert hom.ttft_p90_s > plans["homogeneous-pd"].ttft.p90_s          # queueing at 80% shows
    assert paper_study.figures["p90_ttft_reduction_loaded"] == pytest.approx(1 - prf.ttft_p90_s / hom.ttft_p90_s)


def test_exact_mode_stays_close_to_representative():
    rep = paper.run_case_study("paper", "representative").figures
    exact = paper.run_case_study("paper", "exact").figures
    # Jensen: the two differ, but on this workload by little; the gap is reported, not hidden.
    for key in ("threshold_tokens", "speedup_vs_homogeneous", "speedup_vs_naive"):
        print(f"{key}: representative {rep[key]:.4g}, exact {exact[key]:.4g}")
        assert exact[key] == pytest.approx(rep[key], rel=0.05)
