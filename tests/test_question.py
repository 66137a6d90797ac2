"""The planning question (`prfaas_plan.planning.question`): one place parses and checks every planning input,
and each constructor (what a user types, a layout file, a sweep point, the case study) gives the same
resolved record for the same inputs."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.planning import sweep as S
from prfaas_plan.planning.question import FIELDS, LAYOUT_FIELDS, Question, follow_ups, scenario
from prfaas_plan.units import parse_rate_bps, parse_tpot_s

BAD = {
    "model": "no-such-model", "remote": "33 H200", "local": "64 H20", "link": "100", "link_efficiency": 1.5,
    "link_price": -1.0, "rtt": "20", "tpot": "0ms", "workload": "nowhere.jsonl", "instance_chips": 0,
    "mode": "bogus", "inputs": "guessed", "stack": "no-such-stack", "transfer_bytes": "twice", "basis": "vibes",
    "remote_instance_chips": 0, "local_instance_chips": 3, "weight_dtype": "fp7", "kv_dtype": "fp3",
    "link_headroom": "120%",
}


def test_every_field_has_a_bad_value_here():
    assert set(BAD) == set(FIELDS)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_input_is_one_plan_error_naming_it(name):
    with pytest.raises(PlanError) as exc:
        Question.parse(**{name: BAD[name]})
    message = str(exc.value)
    if name in ("model", "workload"):   # a profile or file not found is named by what was asked for
        assert repr(BAD[name]) in message or f"{BAD[name]}:" in message, message
    else:   # a chip count that does not fill the instance shape names the chips it divides
        assert {"local_instance_chips": "local"}.get(name, name) in exc.value.inputs, message
    assert "\n" not in message


def test_a_pool_left_to_the_search_stands_on_a_shape_that_divides_it():
    # the configuration search replaces the shape; until it does, the question needs whole instances
    assert Question.parse(remote="12xH200").pools["remote"].instance.chips == 4
    assert Question.parse(remote="33xH200").pools["remote"].instance.chips == 1
    assert Question.parse(remote="32xH200").pools["remote"].instance.chips == 8   # the default where it divides
    for pinned in ({"instance_chips": 8}, {"remote_instance_chips": 8}):   # a pinned shape is the user's
        with pytest.raises(PlanError, match="12 chips do not make whole 8-chip instances"):
            Question.parse(remote="12xH200", **pinned)
    with pytest.raises(PlanError, match="12 chips do not make whole 8-chip instances"):   # not searched
        Question.parse(model="prfaas-1t", inputs="paper", remote="12xH200")


def test_an_unknown_input_is_refused_with_the_closest_name():
    with pytest.raises(PlanError, match=r"unknown planning input 'lnk' \(did you mean link"):
        Question.parse(lnk="100G")


def test_the_question_is_frozen_and_its_mappings_read_only():
    q = Question.parse()
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.layout = None
    with pytest.raises(TypeError):
        q.given["link"] = "1G"


def test_defaults_resolve_to_the_fields_defaults():
    q = Question.parse()
    assert dict(q.given) == {n: f.default for n, f in FIELDS.items()}
    assert q.link.bandwidth_bps == 1e11 and q.link.efficiency == 0.95 and q.link.rtt_s == 0.0
    assert q.pools["remote"].instances == 4 and q.pools["local"].instances == 8
    assert q.stack.name == "sglang" and q.basis is None and q.tpot_s == pytest.approx(0.025)


@settings(max_examples=40, deadline=None)
@given(gbps=st.integers(1, 800), eff=st.floats(0.05, 1.0), tpot_ms=st.integers(5, 200),
       rtt_ms=st.integers(1, 300), chips=st.sampled_from([1, 2, 4, 8]))
def test_parse_resolves_units_as_the_unit_parsers_do(gbps, eff, tpot_ms, rtt_ms, chips):
    q = Question.parse(link=f"{gbps}G", link_efficiency=eff, tpot=f"{tpot_ms}ms", rtt=f"{rtt_ms}ms",
                       instance_chips=chips, remote="32xH200", local="64xH20")
    assert q.link.bandwidth_bps == parse_rate_bps(f"{gbps}G") and q.link.efficiency == eff
    assert q.link.rtt_s == pytest.approx(rtt_ms / 1e3) and q.tpot_s == parse_tpot_s(f"{tpot_ms}ms")
    assert q.pools["remote"].chips == 32 and q.pools["local"].instances * chips == 64


@settings(max_examples=20, deadline=None)
@given(link=st.sampled_from(["10G", "40G", "100G"]), mode=st.sampled_from(["exact", "representative"]),
       basis=st.sampled_from(["auto", "capex", "cost", "chips"]), rtt=st.sampled_from(["0ms", "2ms"]))
def test_a_sweep_point_and_the_typed_question_agree(link, mode, basis, rtt):
    point = {**{k: i.default for k, i in S.INPUTS.items()}, "link": link, "mode": mode, "basis": basis, "rtt": rtt}
    from_point = Question.from_point(S.planning_values(point), {})   # the search's sentinels as size's defaults
    typed = Question.parse(link=link, mode=mode, basis=None if basis == "auto" else basis, rtt=rtt)
    assert from_point.link == typed.link and from_point.basis == typed.basis
    assert from_point.scenario.link == typed.scenario.link and from_point.scenario.mode == typed.scenario.mode


def test_scenario_is_short_for_the_question_s():
    a, b = scenario(link="40G", weight_dtype="fp8"), Question.parse(link="40G", weight_dtype="fp8").scenario
    assert (a.link, a.model, a.notes, a.grid.mean) == (b.link, b.model, b.notes, b.grid.mean)


def test_a_layout_question_refuses_the_inputs_the_file_stands_in_for():
    with pytest.raises(PlanError, match=r"`layout` describes the sites.*drop `link`, `rtt`"):
        Question.from_layout("examples/one-site.yaml", link="10G", rtt="2ms")
    q = Question.from_layout("examples/one-site.yaml", model="prfaas-1t")
    assert q.layout is not None and q.link == q.layout.pd_sites[0].link and q.scenario.model.name == "prfaas-1t"
    assert set(LAYOUT_FIELDS) <= set(FIELDS)


def test_the_case_study_question_is_the_paper_s():
    from prfaas_plan.planning import case_study as paper

    q = paper.question("predicted")
    assert (q.given["remote"], q.given["local"], q.transfer, q.stack.name) == ("32xH200", "64xH20", "logical",
                                                                                 paper.STACK)
    assert q.tpot_s == paper.TPOT_S and any("paper's engine" in n for n in q.scenario.notes)


def test_follow_ups_parse_their_units():
    asked = follow_ups(threshold="16k", ttft="p95<3s", link_degraded="10G")
    assert asked["threshold"] == 16 * 1024 and asked["ttft_slo"] == (95.0, 3.0)
    assert asked["link_degraded_bps"] == 1e10 and asked["verify_lp"] is False
    with pytest.raises(PlanError, match="`threshold`"):
        follow_ups(threshold="lots")
