"""Reproduction of the paper's case study from models (golden figures, explicit tolerances).

Paper inputs check the arithmetic (tight bands); predicted inputs put our H20 performance model in
place of the back-solved H20 numbers (wider bands). Each figure prints how far off it is.
"""

from __future__ import annotations

import json

import pytest

from prfaas_plan.planning import case_study as paper

TARGETS = {t.key: t for t in paper.TARGETS}


@pytest.fixture(scope="module")
def paper_rows():
    return {r["figure"]: r for r in paper.compare_to_targets(paper.run_case_study("paper"))}


@pytest.fixture(scope="module")
def predicted_rows():
    return {r["figure"]: r for r in paper.compare_to_targets(paper.run_case_study("predicted"))}


def _check(row):
    print(f"{row['figure']}: ours {row['ours']:.4g} vs published {row['published']:.4g} "
          f"(diff {row['difference']:+.4g}, tolerance ±{row['tolerance']:.4g})")
    if not row["within"] and row["known_gap"]:
        pytest.xfail(f"known gap: {row['known_gap']}")
    assert row["within"]


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_paper_inputs_reproduce_published_figure(paper_rows, key):
    _check(paper_rows[key])


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_predicted_inputs_reproduce_published_figure(predicted_rows, key):
    _check(predicted_rows[key])


def test_reproduce_command_passes_and_reports_every_figure(cli):
    code, out, err = cli("reproduce", "--inputs", "paper", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["figure"] for r in doc["sections"]["figures"]} == set(TARGETS)
    assert f"RESULT: {len(TARGETS)} of {len(TARGETS)} figures within tolerance" in doc["notes"]


def test_exact_mode_stays_close_to_representative():
    rep = paper.run_case_study("paper", "representative").figures
    exact = paper.run_case_study("paper", "exact").figures
    # Jensen: the two differ, but on this workload by little; the gap is reported, not hidden.
    for key in ("threshold_tokens", "speedup_vs_homogeneous", "speedup_vs_naive"):
        print(f"{key}: representative {rep[key]:.4g}, exact {exact[key]:.4g}")
        assert exact[key] == pytest.approx(rep[key], rel=0.05)
