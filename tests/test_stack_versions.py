"""Per-version stack entries (issue 20 item 3): the ``by_version`` section of a stack profile, ``--stack
NAME@VERSION`` selection and refusal, and the per-version layer `calibrate` fits (`performance/stack_versions.py`):
shrinkage toward the engine's pooled value, a configuration's rows counted as at most one observation, errors
per version, and the pooled fit left exactly as it was."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.performance import stack_versions
from prfaas_plan.performance.calibrate import SIGMA_MEASUREMENT, fit_joint
from prfaas_plan.performance.measurements import load_measurements, resolve_path
from prfaas_plan.profiles import add_profile_dir, get_stack
from prfaas_plan.profiles.stack import stack_from_dict

BUNDLED = Path(__file__).resolve().parents[1] / "stack_profiles"


def _sglang_yaml() -> dict:
    return yaml.safe_load((BUNDLED / "sglang.yaml").read_text())


# --- selection and refusal ----------------------------------------------------------------------------------

def test_name_at_version_selects_the_entry_and_the_plain_name_stays_pooled():
    pooled = get_stack("sglang")
    assert pooled.by_version, "the shipped sglang profile carries per-version entries (calibrate -o)"
    version, entry = next(iter(pooled.by_version.items()))
    chosen = get_stack(f"SGLang@{version}")
    assert chosen.name == f"sglang@{version}" and chosen.version == version and chosen.engine_stack == "sglang"
    for key in ("latency_s", "forward_overhead_s", "step_overhead_s", "request_overhead_s",
                "ep_forward_overhead_s", "wave_fraction", "prefill_token_budget"):
        expected = entry.values.get(key, getattr(pooled, key))
        assert getattr(chosen, key) == pytest.approx(expected), key
    assert "wave_fraction" not in entry.values   # the harness's share stays pooled
    assert get_stack(chosen.name) == chosen      # the name round-trips (plans pass names along)
    held = next(iter(entry.values))   # a number the entry holds (latency_s may sit at its engine bound, unheld)
    assert f"version {version}:" in chosen.sources[held] and "version entry" in chosen.describe()
    assert pooled.version == "" and "version entry" not in pooled.describe()


def test_an_unknown_version_is_one_line_naming_the_known_ones(cli):
    known = ", ".join(get_stack("sglang").by_version)
    code, out, err = cli("rates", "--model", "kimi-linear", "--instance", "8xH200", "--len", "8k",
                         "--stack", "sglang@0.0.1")
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert "sglang has no entry for version '0.0.1'" in err and f"known versions: {known}" in err
    code, _, err = cli("rates", "--model", "kimi-linear", "--instance", "8xH200", "--len", "8k",
                       "--stack", "paper-sglang@0.5.9")
    assert code == 2 and "has no per-version entries" in err
    with pytest.raises(PlanError, match="expected NAME or NAME@VERSION"):
        get_stack("sglang@")


def test_a_version_entry_changes_the_plan_and_the_pooled_plan_ignores_the_entries(cli, tmp_path):
    args = ("rates", "--model", "kimi-linear", "--instance", "8xH200", "--len", "8k", "-f", "json")
    pooled = json.loads(cli(*args, "--stack", "sglang")[1])
    version = max(get_stack("sglang").by_version)
    chosen = json.loads(cli(*args, "--stack", f"sglang@{version}")[1])
    assert chosen["sections"] != pooled["sections"]
    # the same profile without its by_version section (a user folder shadowing the bundled one) plans the same
    data = _sglang_yaml()
    del data["by_version"]
    (tmp_path / "stack_profiles").mkdir()
    (tmp_path / "stack_profiles" / "sglang.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    add_profile_dir(str(tmp_path))
    bare = json.loads(cli(*args, "--stack", "sglang")[1])
    assert bare["sections"] == pooled["sections"]


@pytest.mark.parametrize("edit, message", [
    (lambda e: e.update(speed=1.0), "unknown field speed"),
    (lambda e: e.update(latency_s=-1.0), "latency_s must be a finite number >= 0"),
    (lambda e: e.update(latency_s=120.0), "latency_s must be at most 60"),
    (lambda e: e["sources"].pop("latency_s"), "sources.latency_s missing"),
    (lambda e: e.update(spread={"wave_fraction": 0.1}), "spread.wave_fraction without a wave_fraction"),
    (lambda e: e.update(spread={"latency_s": -0.1}), "spread.latency_s must be a log-width"),
    (lambda e: e["sources"].update(wave_fraction="x"), "sources for number it does not hold: wave_fraction"),
    (lambda e: e.update(chunked_prefill="yes"), "chunked_prefill must be true or false"),
    (lambda e: e.update(prefill_token_budget=1.5, sources={**e["sources"], "prefill_token_budget": "x"}),
     "prefill_token_budget must be a whole number"),
])
def test_a_bad_version_entry_is_one_clear_line(edit, message):
    data = _sglang_yaml()
    entry = data["by_version"][next(iter(data["by_version"]))]
    entry.setdefault("latency_s", 0.05)   # the edits below act on a latency_s the entry holds
    entry["sources"].setdefault("latency_s", "x")
    edit(entry)
    with pytest.raises(PlanError) as exc:
        stack_from_dict(data, "s.yaml")
    assert message in str(exc.value) and "by_version" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("section, message", [
    ({0.16: {"latency_s": 0.1, "sources": {"latency_s": "x"}}}, "must be a quoted string ('0.16')"),
    ({"1@2": {"latency_s": 0.1, "sources": {"latency_s": "x"}}}, "one word without '@'"),
    ({"1.0": {"sources": {}}}, "holds no numbers"),
    ({"1.0": [1]}, "expected a mapping"),
    ([1], "by_version must map each engine version"),
])
def test_a_bad_by_version_section_is_refused(section, message):
    data = {**_sglang_yaml(), "by_version": section}
    with pytest.raises(PlanError) as exc:
        stack_from_dict(data, "s.yaml")
    assert message in str(exc.value)


def test_the_written_section_loads_back_with_quoted_numeric_versions():
    from prfaas_plan.performance.profile_text import stack_profile_text
    from prfaas_plan.profiles.stack import VersionEntry

    prof = dataclasses.replace(get_stack("vllm"), by_version={"0.10": VersionEntry(
        {"latency_s": 0.02}, {"latency_s": "fitted"}, {"latency_s": 0.2})})
    text = stack_profile_text(prof)
    back = stack_from_dict(yaml.safe_load(text), "v.yaml")
    assert list(back.by_version) == ["0.10"] and back.at_version("0.10").latency_s == 0.02


# --- the per-version layer ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def b200_sglang():
    """NVIDIA's B200 SGLang rows (two models, versions 0.5.6 and 0.5.9): a fit of a second or so."""
    points, _ = load_measurements(resolve_path("nvidia_silicon_sample_subset.csv"))
    return [m for m in points if m.stack == "sglang" and m.chip == "b200"]


def _relabel(points, pick, version: str, ttft_factor: float):
    return [dataclasses.replace(m, stack_version=version, ttft_s=m.ttft_s * ttft_factor) if pick(i, m) else m
            for i, m in enumerate(points)]


def test_the_pooled_fit_is_the_same_with_and_without_version_labels(b200_sglang):
    labelled = fit_joint(b200_sglang, loo=False, lomo=False)
    unlabelled = fit_joint([dataclasses.replace(m, stack_version="") for m in b200_sglang], loo=False, lomo=False)
    a, b = labelled.stacks["sglang"], unlabelled.stacks["sglang"]
    assert {f.label for f in labelled.versions.fits} == {"sglang@0.5.6", "sglang@0.5.9"}
    assert not unlabelled.versions.fits and not b.by_version and a.by_version
    assert dataclasses.replace(a, by_version={}, sources={}) == dataclasses.replace(b, sources={})
    assert labelled.chips == unlabelled.chips
    assert [p.predicted for p in labelled.points] == [p.predicted for p in unlabelled.points]


def test_a_version_measured_once_stays_near_the_pooled_value(b200_sglang):
    """One row of a made-up version measured twice as slow: its entry moves the prediction of that row
    less than half the way (in log) toward the measurement, its terms less than one prior width each, and
    they keep most of their prior spread."""
    first = next(i for i, m in enumerate(b200_sglang) if m.ttft_s is not None and m.stack_version == "0.5.9")
    fit = fit_joint(_relabel(b200_sglang, lambda i, m: i == first, "9.9", 2.0), loo=False, lomo=False)
    entry = next(f for f in fit.versions.fits if f.label == "sglang@9.9")
    assert entry.points == 1 and entry.terms
    moved = math.log(fit.versions.predicted[first]["ttft"] / fit.points[first].predicted["ttft"])
    assert 0 < moved < 0.5 * math.log(2.0)
    for name, (value, engine, spread, shift, configurations) in entry.terms.items():
        assert configurations == 1 and abs(shift) < 1.0, name
        assert spread > 0.5 * stack_versions.VERSION_WIDTH, name
        assert value == pytest.approx(engine * math.exp(shift * stack_versions.VERSION_WIDTH)), name


def test_many_rows_of_one_configuration_weigh_as_one_observation(b200_sglang):
    """Every row of one configuration relabelled as a version twice as slow: its many rows move the terms
    little more than one row would (rows counted as independent would move them nearly all the way)."""
    from collections import Counter

    key = lambda m: (m.model, m.instance, m.moe, m.stack_version)  # noqa: E731
    biggest = Counter(key(m) for m in b200_sglang if m.stack_version == "0.5.9").most_common(1)[0][0]
    same = lambda i, m: key(m) == biggest  # noqa: E731
    rows = [i for i, m in enumerate(b200_sglang) if same(i, m) and m.ttft_s is not None]
    assert len(rows) >= 10
    fit = fit_joint(_relabel(b200_sglang, same, "9.9", 2.0), loo=False, lomo=False)
    entry = next(f for f in fit.versions.fits if f.label == "sglang@9.9")
    assert all(t[4] == 1 for t in entry.terms.values())
    moved = np.median([math.log(fit.versions.predicted[i]["ttft"] / fit.points[i].predicted["ttft"]) for i in rows])
    assert 0 < moved < 0.5 * math.log(2.0)
    # measured: shifts <= 0.32 widths and spreads >= 0.28 of 0.3; counting the 35 rows as independent
    # (CONFIGURATION_SIGMA -> 0) gives 0.77 widths and spreads of 0.04: the configuration became a constant
    for name, (value, engine, spread, shift, configurations) in entry.terms.items():
        assert abs(shift) < 0.5 and spread > 0.5 * stack_versions.VERSION_WIDTH, name


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 500), sens=st.floats(0.05, 1.0))
def test_one_configuration_is_worth_at_most_one_observation(m, sens):
    """The information m rows of one configuration give a term never exceeds one observation of scatter
    CONFIGURATION_SIGMA, however many rows; one row gives one row's worth."""
    J = np.full((m, 1), sens)
    H, _ = stack_versions._normal(np.zeros(m), J, np.array(["g"] * m), SIGMA_MEASUREMENT)
    cap = sens**2 / stack_versions.CONFIGURATION_SIGMA**2
    assert H[0, 0] <= cap * (1 + 1e-12)
    if m == 1:
        assert H[0, 0] == pytest.approx(sens**2 / (SIGMA_MEASUREMENT**2 + stack_versions.CONFIGURATION_SIGMA**2))


def test_calibrate_reports_terms_and_errors_per_version_and_writes_entries(tmp_path):
    """A CSV whose stack column names versions (sglang@0.5.6 / @0.5.9, no entry needed to be measured):
    calibrate prints each version's terms with its configurations and shift, errors per version with and
    without the entry, and writes the entries; the written profile selects them."""
    from prfaas_plan.planning.rates import answer_calibrate

    rows = ["model,instance,len_tokens,output_tokens,concurrency,stack,ttft_s,tpot_s,moe,weight_dtype"]
    for m in load_measurements(resolve_path("nvidia_silicon_sample_subset.csv"))[0]:
        if m.stack == "sglang" and m.chip == "b200" and m.model == "deepseek-v3":
            rows.append(f"{m.model},{m.instance},{m.len_tokens},{m.output_tokens},{m.concurrency},"
                        f"sglang@{m.stack_version},{m.ttft_s!r},{m.tpot_s!r},{m.moe},{m.weight_dtype}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    ans = answer_calibrate([str(tmp_path / "runs.csv")], output=str(tmp_path / "out"), loo=True)
    versions = {r["version"] for r in ans.by_version}
    assert versions == {"sglang@0.5.6", "sglang@0.5.9"}
    for r in ans.by_version:
        assert {"in_median", "loo_median", "lomo_median", "ver_in_median", "ver_loo_median",
                "ver_lomo_median"} <= set(r)
    # a term the version's one configuration moves (forward_overhead_s may sit at its engine bound,
    # calibrate.ENGINE_UPPER, where no row moves it)
    assert any(n.startswith("term sglang@0.5.6 ") and "1 model x configuration" in n for n in ans.notes)
    assert {p["run_stack"] for p in ans.points} == versions
    add_profile_dir(str(tmp_path / "out"))
    written = get_stack("sglang")
    assert set(written.by_version) == {"0.5.6", "0.5.9"}
    entry = written.by_version["0.5.6"]
    assert set(entry.values) <= set(stack_versions.VERSION_TERMS) and set(entry.spread) == set(entry.values)
    assert all("deviation from the engine's" in s for s in entry.sources.values())


def test_check_predicts_a_recorded_version_with_its_entry_and_says_when_there_is_none():
    """A benchmark file's engine version is a label: with an entry, check predicts with it (the stack column
    names it); without one, with the pooled profile and a note naming the version measured."""
    from prfaas_plan.performance.bench_import import Tags
    from prfaas_plan.planning.check import answer_check

    vllm_run = str(Path(__file__).parent / "data" / "bench" / "vllm_bench_serve_kimi_k2_b200_c4.json")
    assert "0.15.1" in get_stack("vllm").by_version
    known = answer_check([vllm_run], Tags(instance="8xB200", stack="vllm@0.15.1"))
    unknown = answer_check([vllm_run], Tags(instance="8xB200", stack="vllm@0.13"))
    assert known.rows[0]["stack"] == "vllm@0.15.1" and unknown.rows[0]["stack"] == "vllm"
    assert known.rows[0]["ttft_predicted_s"] != unknown.rows[0]["ttft_predicted_s"]
    assert any("engine vllm@0.13: measured with this version, predicted with stack profile vllm" in n
               for n in unknown.notes)
    assert not any(n.startswith("engine vllm@0.15.1") for n in known.notes)


# --- the schema ---------------------------------------------------------------------------------------------

def _agree(doc) -> tuple[bool, bool]:
    import jsonschema

    from prfaas_plan.profiles.stack import stack_json_schema

    schema = stack_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(doc)
    try:
        stack_from_dict(doc, "s.yaml")
        by_parser = True
    except PlanError:
        by_parser = False
    return by_schema, by_parser


@pytest.mark.parametrize("path", sorted(BUNDLED.glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_stack_validates_on_both(path):
    assert _agree(yaml.safe_load(path.read_text())) == (True, True)


def _version(**entry):
    data = _sglang_yaml()
    data["by_version"] = {"1.0": entry}
    return data


SCHEMA_CASES = [
    (_version(latency_s=0.1, sources={"latency_s": "x"}), True),
    (_version(latency_s=0.1, chunked_prefill=False, spread={"latency_s": 0.2}, sources={"latency_s": "x"}), True),
    (_version(latency_s=0.1, speed=2, sources={"latency_s": "x"}), False),
    (_version(latency_s=-0.1, sources={"latency_s": "x"}), False),
    (_version(wave_fraction=1.5, sources={"wave_fraction": "x"}), False),
    (_version(latency_s=0.1, spread={"latency_s": 9.0}, sources={"latency_s": "x"}), False),
    (_version(latency_s=0.1, chunked_prefill="no", sources={"latency_s": "x"}), False),
    (_version(prefill_token_budget=0, sources={"prefill_token_budget": "x"}), False),
    (_version(), False),
    ({**_sglang_yaml(), "by_version": {"1@2": {"latency_s": 0.1, "sources": {"latency_s": "x"}}}}, False),
    ({**_sglang_yaml(), "by_versions": {}}, False),
]


@pytest.mark.parametrize("doc, valid", SCHEMA_CASES)
def test_the_stack_schema_and_the_validator_agree(doc, valid):
    assert _agree(doc) == (valid, valid)


def test_schema_stack_prints_the_new_section(cli):
    code, out, err = cli("schema", "stack", "-f", "json")
    assert code == 0, err
    schema = json.loads(out)["sections"]["schema"][0]
    assert "by_version" in schema["properties"] and schema["additionalProperties"] is False
    assert schema["properties"]["latency_s"]["description"].endswith("(seconds)")
