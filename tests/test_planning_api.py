"""The planning API is the one source of what commands print, and the rules the models share are
defined once (docs/invariants.md 2, 7, 8, 9)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan import planning
from prfaas_plan.layout import PrefillSite, prfaas_pd

PAPER = ("--model", "prfaas-1t", "--inputs", "paper")


@pytest.fixture(scope="module")
def paper_q():
    return planning.Question.parse(model="prfaas-1t", inputs="paper")


@pytest.fixture(scope="module")
def paper_sc(paper_q):
    return paper_q.scenario


def test_cli_prints_what_the_api_returns(cli, paper_q):
    a = planning.answer_size(paper_q, load=0.8, ttft_slo=(95.0, 8.0))
    code, out, err = cli("size", *PAPER, "--load", "0.8", "--ttft", "p95<8s", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    plan = doc["sections"]["plan"][0]
    best = a.plan.best
    assert plan["threshold_tokens"] == best.threshold and plan["throughput_rps"] == best.lambda_max
    assert plan["egress_gbps"] == best.egress_bps / 1e9 and plan["ttft_unloaded_p90_s"] == a.plan.ttft.p90_s
    assert plan["rps_per_musd"] == a.plan.rps_per_musd
    assert doc["sections"]["loaded"][0]["loaded_ttft_p99_s"] == a.loaded.ttft_p99_s
    assert doc["sections"]["slo"][0]["rate_rps"] == a.slo.rate_rps
    assert doc["warnings"] == [{"code": w.code, "message": w.message} for w in a.warnings]
    assert set(a.notes) <= set(doc["notes"])


def test_per_instance_commands_print_what_the_api_returns(cli):
    """``rates``, ``kv-throughput`` and ``show`` print the rows and notes of their planning answers."""
    a = planning.answer_rates("qwen3.5-397b", "8xH20", [8192, 32768], concurrency=4)
    code, out, err = cli("rates", "--model", "qwen3.5-397b", "--instance", "8xH20", "--len", "8k,32k",
                         "--concurrency", "4", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    for name in ("prefill", "operators", "decode_step", "decode"):
        assert doc["sections"][name] == getattr(a, name)
    assert set(a.notes) <= set(doc["notes"]) and a.serving_concurrency == 4

    kv = planning.answer_kv_throughput(["kimi-linear"], "8xH200", [8192])
    code, out, err = cli("kv-throughput", "--model", "kimi-linear", "--len", "8k", "--format", "json")
    assert code == 0, err
    assert kv.has_paper
    assert json.loads(out)["sections"]["kv_throughput"] == kv.rows

    shown = planning.answer_show("kimi-linear")
    code, out, err = cli("show", "kimi-linear", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["sections"]["layers"] == shown.layers


def test_every_command_defaults_to_the_same_model():
    import typer.main

    from prfaas_plan.cli import full_app

    group = typer.main.get_command(full_app())
    defaults = {name: next(p.default for p in group.commands[name].params if p.name == "model")
                for name in ("size", "compare", "simulate")}
    assert set(defaults.values()) == {planning.DEFAULTS.model}


def test_no_remote_instances_means_no_offload_anywhere(paper_sc):
    from prfaas_plan.analytic.latency import ttft_under_load
    from prfaas_plan.analytic.throughput import evaluate, offloads
    from prfaas_plan.analytic.ttft import ttft_by_length
    from prfaas_plan.simulator.system import System

    perf = planning.perf_inputs(paper_sc)
    lay = prfaas_pd(paper_sc.remote, paper_sc.local, paper_sc.link)
    none = replace(lay, remote=PrefillSite("remote", lay.remote.instance, 0))
    assert offloads(lay, perf) and not offloads(none, perf) and not none.uses_remote
    ev = evaluate(none, paper_sc.grid, perf, 1000.0, 4, "exact")
    assert ev.egress_bps == 0 and ev.lambda_max == 0  # a remote share it cannot serve: no capacity
    ev = evaluate(none, paper_sc.grid, perf, math.inf, 4, "exact")
    assert ev.egress_bps == 0 and ev.lambda_max > 0 and math.isinf(ev.bounds["remote_prefill"])
    local = np.asarray(perf.sites["local"].prefill.latency_s(paper_sc.grid.lengths))
    assert np.array_equal(ttft_by_length(none, paper_sc.grid, perf, 1000.0), local)
    lat = ttft_under_load(none, paper_sc.grid, perf, 1000.0, 4, rate=1.0)
    assert "remote_prefill" not in lat.utilization
    assert System.build(none, perf, 1000.0).remote_ok is False


def test_balanced_threshold_is_the_grid_searchs(paper_sc):
    from prfaas_plan.analytic.search import balanced_threshold, grid_search

    perf = planning.perf_inputs(paper_sc)
    lay = prfaas_pd(paper_sc.remote, paper_sc.local, paper_sc.link)
    res = grid_search(lay, paper_sc.grid, perf, "exact")
    assert balanced_threshold(lay, paper_sc.grid, perf, res.best.n_prefill, "exact", res) == res.best.threshold
    # another split gets its own optimum: no better threshold for it on the candidate grid
    other = res.best.n_prefill + 1
    t = balanced_threshold(lay, paper_sc.grid, perf, other, "exact", res)
    j = int(np.flatnonzero(res.splits == other)[0])
    lam = evaluate_lambda(lay, paper_sc, perf, t, other)
    assert lam >= res.lam[:, j].max() * (1 - 1e-6)


def evaluate_lambda(lay, sc, perf, t, n_p) -> float:
    from prfaas_plan.analytic.throughput import evaluate

    return evaluate(lay, sc.grid, perf, t, n_p, "exact").lambda_max


def test_readme_python_example_runs():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    scope: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        exec(compile(block.replace("print(", "(lambda *a: a)("), "README.md", "exec"), scope)  # noqa: S102
    assert scope["a"].plan.best.lambda_max > 0 and scope["s"].requests > 0
    assert scope["r"].decode[0]["tokens_per_s"] > 0 and scope["kv"].has_paper and scope["fit"].by_chip


def test_every_public_name_resolves_to_its_submodules_object():
    """`planning`'s names load on first use (`planning/__init__.py`): each is the object its submodule
    defines, `scenario` stays the function (not the submodule of that name), and an unknown name is an
    AttributeError."""
    import importlib

    for module, names in planning._SUBMODULE_NAMES.items():
        sub = importlib.import_module(f"prfaas_plan.planning.{module}")
        for name in names:
            assert getattr(planning, name) is getattr(sub, name), name
    assert callable(planning.scenario) and planning.scenario is importlib.import_module(
        "prfaas_plan.planning.question").scenario
    assert set(planning.__all__) <= set(dir(planning))
    with pytest.raises(AttributeError):
        planning.no_such_name
