"""``--stack`` on every command that predicts performance (simulate, sweep, size --layout as size/compare),
the announcement of the stack in effect, and the simulator's busy time vs latency.

Measured (seeded, kimi-linear on 32xH200 + 64xH20 at 100G, stack sglang, 6,002-request backlog): the
simulator's steady throughput is 20.83 req/s against the analytic Lambda_max of 21.42 (-2.7%, fill and
drain of a short backlog); with a prefill's full latency (the stack's 217 ms fixed latency included) as
instance occupancy, as before, it was 11.73 req/s (-45%).
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.planning.simulate import simulation_perf, simulation_plan
from prfaas_plan.profiles import get_stack
from prfaas_plan.simulator import SimConfig, simulate
from prfaas_plan.simulator.inputs import paper_grid, paper_requests

MIXED = """name: mixed
remote: {instance: 8xH200, instances: 2, stack: trtllm}
threshold: auto
sites:
  - {name: local, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 40G}}
"""


@pytest.fixture(scope="module")
def fixed_latency_pair():
    """The default layout's perf on sglang and on sglang with 1 s more fixed latency (nothing else moved)."""
    grid = paper_grid()
    layout = prfaas_pd("32xH200", "64xH20", Link(100e9))
    sg = get_stack("sglang")
    perfs = [simulation_perf(layout, "kimi-linear", 0.025, "predicted", grid.mean, 1024.0, st)
             for st in (sg, replace(sg, latency_s=sg.latency_s + 1.0))]
    layout, ev = simulation_plan(layout, grid, perfs[0])
    return layout, ev, perfs


@pytest.mark.parametrize("engine", ["pipeline", "events"])
def test_a_fixed_latency_moves_ttft_but_not_throughput(fixed_latency_pair, engine):
    layout, ev, (base, slower) = fixed_latency_pair
    cfg = SimConfig(ev.threshold)
    backlog = paper_requests(1e4, 0.6, 1)  # ~6,000 requests at once: the instances stay busy
    full = [simulate(backlog, layout, p, cfg, engine=engine).throughput()["steady_throughput_rps"]
            for p in (base, slower)]
    assert full[1] == pytest.approx(full[0], rel=1e-9)
    assert full[0] == pytest.approx(ev.lambda_max, rel=0.05)  # busy time occupies; measured -2.7%
    light = paper_requests(0.05 * ev.lambda_max, 1200, 2)
    a, b = (simulate(light, layout, p, cfg, engine=engine) for p in (base, slower))
    done = a.completed & b.completed
    assert done.sum() > 500
    np.testing.assert_allclose((b.ttft_s - a.ttft_s)[done], 1.0, atol=1e-6)  # every request, local or remote



def test_the_analytic_ttft_adds_a_fixed_latency_on_top_of_the_transfer(fixed_latency_pair):
    """As in the simulator: the fixed latency produces no KV, so a transfer longer than the whole prefill
    latency cannot hide it (a max(latency, transfer) form adds less than 1 s to those prompts). At 10G the
    longest remote prompts' transfers outlast their prefill latency."""
    from prfaas_plan.analytic.ttft import transfer_s, ttft_by_length
    layout, ev, (base, slower) = fixed_latency_pair
    slow_link = prfaas_pd("32xH200", "64xH20", Link(10e9))
    grid = paper_grid()
    site = slow_link.pd_sites[0]
    x = transfer_s(base, grid.lengths, site.link.goodput_bps, site.name)
    remote = grid.lengths > ev.threshold
    assert (x[remote] > np.asarray(slower.remote_prefill.latency_s(grid.lengths))[remote]).any()  # exercised
    a, b = (ttft_by_length(slow_link, grid, p, ev.threshold) for p in (base, slower))
    np.testing.assert_allclose(b - a, 1.0, atol=1e-9)


def test_simulate_takes_and_announces_the_stack(cli):
    args = ("simulate", "--duration", "60s", "--format", "json")
    code, out, err = cli(*args)
    assert code == 0, err
    default = json.loads(out)
    assert default["meta"]["stack"] == "sglang"
    assert any(n.startswith("default stack: sglang") for n in default["notes"])
    code, out, err = cli(*args, "--stack", "vllm")
    assert code == 0, err
    vllm = json.loads(out)
    assert vllm["meta"]["stack"] == "vllm" and not any(n.startswith("default stack") for n in vllm["notes"])
    assert any(n.startswith("stack vllm (vLLM") for n in vllm["notes"])
    assert vllm["sections"] != default["sections"]


@pytest.mark.parametrize("command", [("simulate", "--duration", "60s"), ("size", "--layout", "L"),
                                     ("sweep", "S", "-o", "out.csv")])
def test_an_unknown_stack_is_one_line_exit_2(cli, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "L").write_text(MIXED)
    (tmp_path / "S").write_text("grid: {link: [10G, 100G]}\n")
    code, out, err = cli(*command, "--stack", "nosuch")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "--stack 'nosuch': unknown serving stack" in err
    assert not (tmp_path / "out.csv").exists()


def test_layout_sites_naming_a_stack_win_over_the_option(cli, tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    code, out, err = cli("size", "--layout", str(path), "--samples", "0", "--stack", "vllm", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert "a site's own stack: wins over --stack: remote runs trtllm; local runs vllm (--stack)" in doc["notes"]
    assert any(n.startswith("stack trtllm (") for n in doc["notes"])
    assert any(n.startswith("stack vllm (") for n in doc["notes"])
    code, out, err = cli("size", "--layout", str(path), "--samples", "0", "--format", "json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(n.startswith("default stack: sglang for sites naming none") for n in notes)
    assert "a site's own stack: wins over the default: remote runs trtllm; local runs sglang (the default)" in notes


def test_sweep_stack_option_and_axis(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("grid: {link: [10G, 100G]}\n")
    code, out, err = cli("sweep", str(spec), "-o", str(tmp_path / "a.csv"), "--no-progress", "--stack", "vllm")
    assert code == 0, err
    assert "note: stack vllm (vLLM" in out and "default stack" not in out
    code, out, err = cli("sweep", str(spec), "-o", str(tmp_path / "b.csv"), "--no-progress")
    assert code == 0, err
    assert "note: default stack: sglang" in out
    a, b = (list(csv.DictReader((tmp_path / f).open())) for f in ("a.csv", "b.csv"))
    assert {r["stack"] for r in a} == {"vllm"} and {r["stack"] for r in b} == {"sglang"}
    assert [r["throughput_rps"] for r in a] != [r["throughput_rps"] for r in b]
    assert {r["point_key"] for r in a}.isdisjoint(r["point_key"] for r in b)  # the stack is part of the key
    axis = tmp_path / "axis.yaml"
    axis.write_text("grid: {stack: [sglang, vllm]}\n")
    code, out, err = cli("sweep", str(axis), "-o", str(tmp_path / "c.csv"), "--no-progress")
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "c.csv").open()))
    by_stack = {r["stack"]: r["throughput_rps"] for r in rows}
    assert by_stack == {"sglang": b[1]["throughput_rps"], "vllm": a[1]["throughput_rps"]}  # the 100G points
    code, out, err = cli("sweep", str(axis), "-o", str(tmp_path / "d.csv"), "--no-progress", "--stack", "vllm")
    assert code == 2 and "the spec sets stack itself" in err


def test_report_pages_name_the_stack_in_effect(cli, tmp_path):
    code, out, err = cli("size", "--samples", "0", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["meta"]["stack"] == "sglang"
    (tmp_path / "size.json").write_text(out)
    code, _, err = cli("report", str(tmp_path / "size.json"), "-o", str(tmp_path / "size.html"))
    assert code == 0, err
    assert "stack sglang (SGLang" in (tmp_path / "size.html").read_text()


def test_reproduce_states_the_paper_stacks(cli):
    code, out, err = cli("reproduce", "--format", "json")
    assert code in (0, 1), err
    assert any(n.startswith("no stack applied: the paper's measured H200 table") for n in json.loads(out)["notes"])


def test_sweep_and_simulate_take_the_transfer_policy(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    # at 10G the link sets the threshold for kimi-linear's replicated bytes (7x logical), so one copy gains
    spec.write_text("base: {link: 10G}\ngrid: {transfer_bytes: [replicated, dp-attention, logical]}\n")
    code, out, err = cli("sweep", str(spec), "-o", str(tmp_path / "t.csv"), "--no-progress")
    assert code == 0, err
    lam = {r["transfer_bytes"]: r["throughput_rps"] for r in csv.DictReader((tmp_path / "t.csv").open())}
    assert lam["dp-attention"] == lam["logical"] and float(lam["dp-attention"]) > float(lam["replicated"])
    plans = {}
    for policy in ("replicated", "dp-attention"):
        # simulate, like size, searches the configurations the pins leave open (here the MoE split; the sweep
        # plans the fixed TP shape), so its plan is size's with the same pins
        pins = ("--link", "10G", "--transfer-bytes", policy, "--instance-chips", "8", "--format", "json")
        code, out, err = cli("simulate", "--duration", "60s", *pins)
        assert code == 0, err
        doc = json.loads(out)
        plans[policy] = doc["sections"]["summary"][0]["lambda_max_rps"]
        assert any(f"transfer bytes: {policy} (" in n for n in doc["notes"])
        code, out, err = cli("size", "--samples", "0", *pins)
        assert code == 0, err
        size_rps = json.loads(out)["sections"]["plan"][0]["throughput_rps"]
        assert plans[policy] == pytest.approx(size_rps, rel=0.01)  # the simulator's grid
    assert plans["dp-attention"] > plans["replicated"]


def test_an_unknown_stack_in_a_layout_file_names_the_site(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(MIXED.replace("link: {bandwidth: 40G}", "link: {bandwidth: 40G}, stack: nosuch"))
    code, out, err = cli("size", "--layout", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: sites[0].stack: 'nosuch': unknown serving stack")
