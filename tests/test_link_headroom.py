"""Link headroom (`--link-headroom`, a layout link's ``headroom``): the planned link rate is capped at
(1 - headroom) x goodput and the optimum is re-found under the cap; a plan above the ``link-no-headroom``
load is re-planned at more headroom by the same optimizer and the answer says what that costs."""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.planning import Question, answer_size
from prfaas_plan.planning.configurations import pinned_spec
from prfaas_plan.planning.headroom import LEVELS
from prfaas_plan.planning.plans import optimize, perf_inputs, prfaas_layout
from prfaas_plan.planning.warnings import LINK_LINE_MAX
from prfaas_plan.units import parse_headroom

SEARCH = pinned_spec("predicted", None, None, None, None)   # what `size` searches on the defaults


def _size(**text):
    return answer_size(Question.parse(model="kimi-linear", **text), samples=0, search=SEARCH)


@pytest.fixture(scope="module")
def default_answer():
    return _size(link="100G")


@pytest.mark.parametrize("text,value", [("20%", 0.2), ("0.2", 0.2), (0, 0.0), ("0", 0.0), (" 15 % ", 0.15),
                                        ("99.5%", 0.995)])
def test_headroom_reads_fractions_and_percentages(text, value):
    assert parse_headroom(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["120%", "-5%", "abc", "1", "100%", "20 percent", "nan", ""])
def test_a_bad_headroom_is_one_plan_error(text):
    with pytest.raises(PlanError, match="`link_headroom`") as exc:
        parse_headroom(text)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("value", ["120%", "-5%", "abc"])
@pytest.mark.parametrize("command", ["size", "compare"])
def test_bad_headroom_on_the_command_line_is_one_line_exit_2(cli, command, value):
    code, out, err = cli(command, "--link-headroom", value)
    assert code == 2 and out == "", (out, err)
    assert "--link-headroom" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_zero_headroom_is_todays_plan_exactly(default_answer):
    zero = _size(link="100G", link_headroom="0%")
    a, b = default_answer.plan.best, zero.plan.best
    assert (a.lambda_max, a.threshold, a.n_prefill, a.n_decode, a.binding) == \
        (b.lambda_max, b.threshold, b.n_prefill, b.n_decode, b.binding)
    assert a.layout == b.layout and default_answer.link_headroom.requested == 0.0


def test_the_capped_plan_fills_at_most_its_share_of_goodput():
    a = _size(link="100G", link_headroom="20%")
    ev = a.plan.best
    assert ev.egress_bps <= 0.8 * ev.link_goodput_bps * (1 + 1e-9)
    assert a.link_headroom.requested == 0.2 and a.link_headroom.source == "--link-headroom"
    assert any("link headroom 20% (--link-headroom)" in n for n in a.notes)


def test_a_loaded_link_prices_more_headroom_with_the_same_optimizer(default_answer):
    hr = default_answer.link_headroom
    assert default_answer.plan.best.link_utilization > LINK_LINE_MAX   # the finding this answers
    assert [a.headroom for a in hr.alternatives] == list(LEVELS)
    rates = [hr.plan.throughput_rps] + [a.throughput_rps for a in hr.alternatives]
    assert rates == sorted(rates, reverse=True)
    for alt in hr.alternatives:   # each is what `size --link-headroom H` plans
        ev = _size(link="100G", link_headroom=alt.headroom).plan.best
        assert (alt.throughput_rps, alt.threshold_tokens, alt.n_prefill, alt.n_decode) == \
            (ev.lambda_max, ev.threshold, ev.n_prefill, ev.n_decode)
    warning = next(w for w in default_answer.warnings if w.code == "link-no-headroom")
    assert hr.line() in warning.message and "\n" not in warning.message


def test_a_link_with_headroom_prices_nothing_more():
    hr = _size(link="100G", link_headroom="15%").link_headroom
    assert hr.plan.link_load <= LINK_LINE_MAX and hr.alternatives == ()


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["10G", "40G", "100G", "400G"]), st.floats(0, 0.9), st.floats(0, 0.9))
def test_more_headroom_never_raises_throughput(link, h1, h2):
    lo, hi = sorted((h1, h2))
    sc = Question.parse(model="kimi-linear", link=link).scenario

    def rate(h):
        s = replace(sc, link=replace(sc.link, headroom=h))
        return optimize(prfaas_layout(s), s, perf_inputs(s)).best.lambda_max

    assert rate(hi) <= rate(lo) * (1 + 1e-12)
    assert rate(0.0) == optimize(prfaas_layout(sc), sc, perf_inputs(sc)).best.lambda_max


def test_size_json_carries_the_headroom_record(cli):
    code, out, _ = cli("size", "--link-headroom", "20%", "--samples", "0", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    rec = doc["meta"]["link_headroom"]
    assert rec["requested_fraction"] == 0.2 and rec["source"] == "--link-headroom"
    assert rec["link_load_of_goodput"] <= 0.8 + 1e-9 and rec["alternatives"] == []
    assert doc["meta"]["inputs"]["link_headroom"] == {"value": "20%", "default": False}


LAYOUT = ("name: one\nremote: {instance: 8xH200, instances: 4}\nsites:\n"
          "  - {name: a, instance: 8xH20, prefill: 4, decode: 4, link: {bandwidth: 100G, headroom: HR}}\n")


def test_a_layout_link_carries_its_headroom(cli, tmp_path):
    rates = {}
    for hr in ("20%", "0.2", "0"):
        lay = tmp_path / "one.yaml"
        lay.write_text(LAYOUT.replace("HR", hr))
        code, out, err = cli("size", "--layout", str(lay), "--samples", "0", "--format", "json")
        assert code == 0, err
        rates[hr] = json.loads(out)["sections"]["plan"][0]["throughput_rps"]
    assert rates["20%"] == rates["0.2"] < rates["0"]


@pytest.mark.parametrize("hr,needle", [("120%", "sites[0].link.headroom"), ("-0.1", "headroom"),
                                       ("abc", "headroom")])
def test_a_bad_layout_headroom_is_one_line(cli, tmp_path, hr, needle):
    lay = tmp_path / "bad.yaml"
    lay.write_text(LAYOUT.replace("HR", hr))
    code, out, err = cli("size", "--layout", str(lay), "--samples", "0")
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_layout_file_replaces_the_flag(cli, tmp_path):
    lay = tmp_path / "one.yaml"
    lay.write_text(LAYOUT.replace("HR", "0"))
    code, out, err = cli("size", "--layout", str(lay), "--link-headroom", "20%")
    assert code == 2 and "--link-headroom" in err and len(err.strip().splitlines()) == 1


def test_a_site_of_a_multi_site_layout_keeps_its_headroom(cli, tmp_path):
    base = (Path(__file__).parents[1] / "examples" / "three-sites.yaml").read_text()
    capped = base.replace("link: {bandwidth: 100G, rtt: 1us}", "link: {bandwidth: 100G, rtt: 1us, headroom: 20%}")
    assert capped != base
    sites = {}
    for name, text in (("free", base), ("capped", capped)):
        lay = tmp_path / f"{name}.yaml"
        lay.write_text(text)
        code, out, err = cli("size", "--layout", str(lay), "--samples", "0", "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        sites[name] = {r["site"]: r for r in doc["sections"]["sites"]}
    assert sites["capped"]["near"]["egress_gbps"] <= 0.8 * 95 * (1 + 1e-6)
    assert sites["capped"]["total"]["throughput_rps"] <= sites["free"]["total"]["throughput_rps"] * (1 + 1e-9)
    assert any("site near: link headroom 20% (layout file)" in n for n in doc["notes"])
