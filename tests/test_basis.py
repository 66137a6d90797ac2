"""One basis for every verdict (issue 21 item 4) and the plan warnings of item 6.

The verdict's homogeneous baseline is held at one basis, resolved the same way by size, compare and
sweep (`plans.default_basis`), recorded as ``meta.basis`` and named in the verdict sentence.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.uncertainty import Band, ErrorBar, ErrorBars
from prfaas_plan.output.rowfile import read_table
from prfaas_plan.planning import sweep as S
from prfaas_plan.planning.warnings import band_warnings

QUICK = ("--samples", "60")
FIXED = ("--instance-chips", "8", "--transfer-bytes", "replicated")  # the former fixed shape (no search)
PHRASES = {"capex": "at equal capex", "rental": "at equal rental cost", "chips": "at equal chip count",
           "instances": "at equal instance count"}


def _json(cli, *args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_meta_basis_is_the_same_in_size_compare_and_sweep_on_the_defaults(cli, tmp_path):
    # size, compare and the sweep all search the configuration on the defaults
    size = _json(cli, "size", *QUICK)
    compare = _json(cli, "compare", *QUICK)
    spec = tmp_path / "spec.yaml"
    spec.write_text("grid: {link: [100G]}\n")
    rows = tmp_path / "r.csv"
    assert cli("sweep", str(spec), "--output", str(rows), "--no-progress")[0] == 0
    row = read_table(rows, S.ROW_COLUMNS)[0]
    assert size["meta"]["basis"] == compare["meta"]["basis"] == row["basis"] == "capex"
    # and the same baseline: the sweep's gain is compare's gain over homogeneous-equal-capex
    hom = next(r for r in compare["sections"]["compare"] if r["layout"] == "homogeneous-equal-capex")
    assert row["gain_vs_homogeneous"] == pytest.approx(hom["prfaas_speedup_x"], rel=1e-12)


@pytest.mark.parametrize("basis", ["capex", "rental", "chips", "instances"])
def test_the_verdict_sentence_names_the_basis_and_is_against_its_baseline(cli, basis):
    doc = _json(cli, "size", *QUICK, "--basis", basis)
    sentence = next(n for n in doc["notes"] if n.startswith("verdict vs "))
    baseline = "homogeneous-pd" if basis == "instances" else f"homogeneous-equal-{basis}"
    assert sentence.startswith(f"verdict vs {baseline} (") and PHRASES[basis] in sentence, sentence
    assert doc["meta"]["basis"] == basis
    # compare gives the same verdict at the same basis (one computation, two commands)
    cmp = _json(cli, "compare", *QUICK, "--basis", basis)
    assert next(n for n in cmp["notes"] if n.startswith("verdict vs ")) == sentence


def test_the_verdict_changes_with_the_basis_on_the_readme_question(cli):
    # kimi-linear at 200G on 8-chip TP instances: ahead of homogeneous PD at equal instance count, behind
    # it at equal capex (at 100G, since issue 20 round 4's refit, the link binds and it is behind at both). The
    # medians cross 1; since the H20 takes the unseen-model-and-chip width (issue 20 round 10), both bands
    # also reach across 1 ("cannot tell", naming the H20 prefill measurement that would decide it)
    by_count = _json(cli, "size", "--model", "kimi-linear", "--link", "200G", "--basis", "instances", *FIXED)
    by_capex = _json(cli, "size", "--model", "kimi-linear", "--link", "200G", *FIXED)
    gain = lambda d: next(r for r in d["sections"]["error_bars"] if r["quantity"] == "prfaas_gain_x")  # noqa: E731
    assert gain(by_count)["p50"] > 1 > gain(by_capex)["p50"]
    assert gain(by_count)["p10"] > gain(by_capex)["p10"] and gain(by_count)["p90"] > gain(by_capex)["p90"]
    assert by_capex["sections"]["plan"] == by_count["sections"]["plan"]  # the plan itself does not move


def test_default_basis_is_chips_when_a_chip_has_no_price(cli, monkeypatch):
    import prfaas_plan.profiles as profiles

    real = profiles.get_hardware
    monkeypatch.setattr(profiles, "get_hardware",
                        lambda name: dataclasses.replace(real(name), price=None) if "h20" in name.lower()
                        else real(name))
    from prfaas_plan.planning.plans import default_basis
    from prfaas_plan.planning.question import scenario

    assert default_basis(scenario()) == "chips"


BASIS_SAID = re.compile(r"equal[ -](capex|rental|chips|instances|purchase price|cloud rental cost|chip count|"
                        r"instance count)")
SAID_AS = {"purchase price": "capex", "cloud rental cost": "rental", "chip count": "chips",
           "instance count": "instances"}


@pytest.mark.parametrize("basis", [None, "instances", "rental"])
def test_the_compare_report_prints_one_basis(cli, tmp_path, basis):
    src = tmp_path / "c.json"
    code, out, err = cli("compare", *QUICK, *(("--basis", basis) if basis else ()), "--format", "json")
    assert code == 0, err
    src.write_text(out)
    page = tmp_path / "c.html"
    assert cli("report", str(src), "--output", str(page))[0] == 0
    text = re.sub(r"<[^>]+>", " ", page.read_text())
    said = {SAID_AS.get(m, m) for m in BASIS_SAID.findall(text)}
    assert said == {basis or "capex"}, said
    homogeneous = {m for m in re.findall(r"homogeneous-[\w-]+", text)}
    assert len(homogeneous) == 1, homogeneous
    assert not ("beats it" in text and "does not beat it" in text)


def test_every_baseline_row_of_compare_has_error_bars(cli):
    rows = _json(cli, "compare", *QUICK)["sections"]["compare"]
    for r in rows:
        if r["layout"] == "prfaas-pd":
            continue
        assert r["gain_p10_x"] <= r["gain_p90_x"], r["layout"]
        assert r["gain_p10_x"] > 0, r["layout"]


def test_a_baseline_identical_to_the_plan_has_gain_one_in_every_sample():
    # the naive row shares PrfaaS-PD's remote draw: a layout against itself must give exactly 1
    from prfaas_plan.analytic.uncertainty import error_bars
    from prfaas_plan.planning.plans import compare
    from prfaas_plan.planning.question import scenario

    sc = scenario()
    plans = compare(sc, equal_instances=False)
    naive = plans["naive-heterogeneous"]
    eb = error_bars(naive.layout, naive.layout, sc.grid, naive.perf, sc.mode, naive.surface.thresholds, 50, 3)
    assert eb.gain.p10 == eb.gain.p90 == pytest.approx(1.0, rel=1e-12)


# --- warnings (issue 21 item 6)

def test_link_above_90_percent_of_line_rate_warns_and_a_wide_link_does_not(cli):
    codes = lambda d: {w["code"] for w in d["warnings"]}  # noqa: E731
    # fixed shapes at 80G: the link binds at 95% of line rate; at 800G it no longer binds (since issue 20 round
    # 4's refit the link binds up to 400G with replicated bytes)
    tight = _json(cli, "size", "--samples", "0", "--link", "80G", *FIXED)
    assert "link-no-headroom" in codes(tight)
    assert "link-no-headroom" not in codes(_json(cli, "size", "--samples", "0", "--link", "800G", *FIXED))


def test_a_role_below_60_percent_busy_warns(cli):
    doc = _json(cli, "size", "--samples", "0", "--remote", "64xH200", *FIXED)
    message = {w["code"]: w["message"] for w in doc["warnings"]}["role-underused"]
    busy = float(re.search(r"remote prefill (\d+)% busy", message).group(1))
    assert busy < 60
    plan = _json(cli, "size", "--samples", "0", "--link", "400G", *FIXED)  # every role is at least 60% busy
    assert "role-underused" not in {w["code"] for w in plan["warnings"]}


def test_equal_instances_across_instance_sizes_warns(cli):
    """`--basis instances` with remote and local instances of different sizes (the searched default: 2-chip
    H200 and 4-chip H20 instances on the shipped fit) counts them alike: the warning gives both sides' chips;
    the same shape (pinned 8-chip instances, the paper's comparison) and the default basis do not warn."""
    codes = lambda d: {w["code"]: w["message"] for w in d["warnings"]}  # noqa: E731
    for command in ("size", "compare"):
        doc = _json(cli, command, "--samples", "0", "--basis", "instances")
        message = codes(doc)["basis-unequal-instances"]
        m = re.search(r"compares (\d+) x (\d+)xH20 of homogeneous PD \((\d+) chips\) with the plan's (\d+) x "
                      r"(\d+)xH200 remote and (\d+) x (\d+)xH20 local instances \((\d+) chips\)", message)
        n, h_chips, hom_chips, r_n, r_chips, l_n, l_chips, plan_chips = map(int, m.groups())
        assert n == r_n + l_n and hom_chips == h_chips * n and plan_chips == r_n * r_chips + l_n * l_chips
        assert r_chips != l_chips and plan_chips == 96      # 32 H200 + 64 H20
    assert "basis-unequal-instances" not in codes(_json(cli, "size", "--samples", "0", "--basis", "instances",
                                                        *FIXED))
    assert "basis-unequal-instances" not in codes(_json(cli, "size", "--samples", "0"))


def _bars(point, p10, p90, sigma=0.1):
    return ErrorBars(100, 0, Band(1, 1, 1), Band(p10, (p10 + p90) / 2, p90), Band(1, 1, 1), Band(1, 1, 1),
                     "cannot tell", "homogeneous-equal-capex (17x8xH20)", (ErrorBar(sigma, "k", "test"),), point)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.1, 3), st.floats(0.1, 3), st.floats(0.01, 2))
def test_point_outside_band_warns_exactly_when_outside(point, a, width):
    lo, hi = a, a + width
    out = band_warnings(_bars(point, lo, hi))
    assert bool(out) == (not lo <= point <= hi)
    assert all(w.code == "point-outside-band" for w in out)


def test_given_inputs_or_no_point_never_warn_outside_band():
    assert band_warnings(_bars(5.0, 1.0, 1.0, sigma=0.0)) == []
    assert band_warnings(_bars(float("nan"), 1.0, 2.0)) == []
    assert np.isnan(_bars(float("nan"), 1.0, 2.0).point_gain)


def test_sweep_basis_flag_sets_every_row_and_refuses_a_spec_that_sets_it_too(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("grid: {link: [40G, 100G]}\n")
    rows = tmp_path / "r.csv"
    assert cli("sweep", str(spec), "--output", str(rows), "--no-progress", "--basis", "chips")[0] == 0
    assert {r["basis"] for r in read_table(rows, S.ROW_COLUMNS)} == {"chips"}
    spec.write_text("base: {basis: capex}\ngrid: {link: [40G]}\n")
    code, out, err = cli("sweep", str(spec), "--output", str(tmp_path / "s.csv"), "--no-progress", "--basis", "chips")
    assert code != 0 and "the spec sets basis itself" in err and len(err.strip().splitlines()) == 1
    spec.write_text("base: {basis: vibes}\ngrid: {link: [40G]}\n")
    code, out, err = cli("sweep", str(spec), "--output", str(tmp_path / "v.csv"), "--no-progress")
    assert code != 0 and "vibes" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_baseline_that_serves_nothing_has_no_band_and_no_numpy_warning(cli):
    # one 16xH20 instance cannot run both prefill and decode: local-alone serves 0, its gain is undefined
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rows = _json(cli, "compare", "--model", "qwen3.5-397b", "--remote", "8xH200", "--local", "16xH20",
                     "--link", "40G", "--local-instance-chips", "16", "--basis", "instances", *QUICK)
    by = {r["layout"]: r for r in rows["sections"]["compare"]}
    assert by["local-alone"]["throughput_rps"] == 0 and by["local-alone"]["gain_p10_x"] is None
    assert by["homogeneous-pd"]["gain_p10_x"] is not None


def test_the_size_page_answer_gives_the_verdict_at_its_basis(cli, tmp_path):
    src, page = tmp_path / "s.json", tmp_path / "s.html"
    code, out, err = cli("size", *QUICK, "--format", "json")
    assert code == 0, err
    src.write_text(out)
    assert cli("report", str(src), "--output", str(page))[0] == 0
    answer = re.search(r'<p class="verdict">(.*?)</p>', page.read_text(), re.S).group(1)
    assert "verdict vs homogeneous-equal-capex" in answer and "at equal capex" in answer, answer


def test_meta_basis_is_the_same_in_size_compare_sweep_and_report_and_each_page_names_only_it(cli, tmp_path):
    """Issue 21 item 4 on the defaults: one basis in every command's meta, the report's envelope included
    (it carries its source's basis), and every page -- size, compare and sweep -- says only that one."""
    files = {}
    for name in ("size", "compare"):
        code, out, err = cli(name, *QUICK, "--format", "json")
        assert code == 0, err
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(out)
    spec = tmp_path / "spec.yaml"
    spec.write_text("grid: {link: [40G, 100G]}\n")
    files["sweep"] = tmp_path / "rows.csv"
    assert cli("sweep", str(spec), "--output", str(files["sweep"]), "--no-progress")[0] == 0
    bases = {"size": json.loads(files["size"].read_text())["meta"]["basis"],
             "compare": json.loads(files["compare"].read_text())["meta"]["basis"],
             "sweep": {r["basis"] for r in read_table(files["sweep"], S.ROW_COLUMNS)}.pop()}
    for name, src in files.items():
        page = tmp_path / f"{name}.html"
        code, out, err = cli("report", str(src), "--output", str(page), "--format", "json")
        assert code == 0, err
        bases[f"report {name}"] = json.loads(out)["meta"]["basis"]
        text = re.sub(r"<[^>]+>", " ", page.read_text())
        said = {SAID_AS.get(m, m) for m in BASIS_SAID.findall(text)}
        assert said == {"capex"}, (name, said)
    assert set(bases.values()) == {"capex"}, bases
