"""The shapes a one-site simulation plays (`planning.sim_shapes`): the configuration search of ``size`` by
default, the pinned shapes when given, the paper's 8-chip instances for ``inputs`` paper; the simulated
system is built from them (instance counts, decode slots, bytes on the link) and the prefix caches keep
2 TB of host DRAM per 8 chips whatever the shape."""

from __future__ import annotations

import pytest

from prfaas_plan.planning import answer_simulate
from prfaas_plan.simulator.system import NODE_CHIPS, System

SHORT = dict(duration_s=20.0, load=0.3)


@pytest.fixture(scope="module")
def searched():
    return answer_simulate(model="kimi-linear", **SHORT)


def _by_role(answer) -> dict:
    return {(c["site"], c["role"]): c for c in answer.configurations}


def test_the_default_simulation_plays_the_searched_configuration(searched):
    best = searched.shapes.search.best
    # the configuration search's choice, role by role, is what the report names and the simulator runs
    assert searched.configurations == [r.record() for r in best.roles]
    roles = _by_role(searched)
    assert searched.layout.remote.instance.chips == roles[("remote", "prefill")]["chips_per_instance"]
    assert searched.layout.pd_sites[0].instance.chips == roles[("local", "decode")]["chips_per_instance"]
    system = System.build(searched.layout, searched.perf, searched.evaluation.threshold)
    assert system.slots == roles[("local", "decode")]["batch"]
    assert searched.perf.sites["local"].transfer.policy == best.scenario.transfer
    # the plan is the searched candidate's (distribution-exact on the simulation's grid)
    assert searched.evaluation.lambda_max == pytest.approx(best.lambda_max, rel=1e-9)
    assert any(n.startswith("configuration search:") for n in searched.notes)


def test_pinned_shapes_pin_as_in_size(searched):
    pinned = answer_simulate(model="kimi-linear", instance_chips=8, transfer_bytes="replicated", **SHORT)
    roles = _by_role(pinned)
    assert {c["chips_per_instance"] for c in roles.values()} == {8}
    assert not roles[("local", "decode")]["dp_attention"]          # replicated bytes pin TP attention
    assert pinned.perf.sites["local"].transfer.policy == "replicated"
    assert pinned.shapes.search is not None and pinned.shapes.search.pinned.local_chips == 8
    # pinning can only take candidates away from the search
    assert pinned.evaluation.lambda_max <= searched.evaluation.lambda_max * (1 + 1e-9)
    remote_only = answer_simulate(model="kimi-linear", remote_instance_chips=4, **SHORT)
    assert remote_only.layout.remote.instance.chips == 4


def test_paper_inputs_keep_the_paper_shapes():
    a = answer_simulate(model="prfaas-1t", inputs="paper", **SHORT)
    assert a.shapes.search is None and {c["chips_per_instance"] for c in a.configurations} == {8}
    assert a.perf.sites["local"].transfer.policy == "logical"      # the paper's convention
    assert any("the paper shapes (no configuration search)" in n for n in a.notes)


def test_homogeneous_baseline_runs_the_searched_local_configuration(searched):
    a = answer_simulate(model="kimi-linear", baseline="homogeneous", **SHORT)
    local = _by_role(searched)[("local", "decode")]
    assert a.layout.remote is None
    assert a.layout.pd_sites[0].instance.chips == local["chips_per_instance"]
    assert _by_role(a)[("local", "decode")] == local
    assert any(n.startswith("homogeneous baseline: the local instance shape") for n in a.notes)


@pytest.mark.parametrize("chips", [2, 4, 8, 16])
def test_prefix_cache_dram_is_per_chip_not_per_instance(chips):
    from dataclasses import replace

    from prfaas_plan.layout import Link, prfaas_pd
    from prfaas_plan.planning.simulate import simulation_perf

    lay = prfaas_pd("32xH200", "64xH20", Link(1e11), chips)
    lay = replace(lay, pd_sites=(lay.pd_sites[0].with_split(1),))
    perf = simulation_perf(lay, "kimi-linear", 0.025, "predicted", 20000.0, 1000.0)
    pd, rf = System.build(lay, perf, 1e4).caches(2e12, 512, compiled=False)
    # the same 32 + 64 chips, so the same DRAM whatever the shape
    assert pd.capacity == pytest.approx(2e12 * 64 / NODE_CHIPS)
    assert rf.capacity == pytest.approx(2e12 * 32 / NODE_CHIPS)


def test_a_layout_simulation_names_each_sites_configuration(cli):
    """``simulate --layout`` plays the plan of ``size --layout`` (its shapes, `simulate_sites`) and names every
    role at every site with size's keys, the decode batch cap the one its sites run."""
    import json
    from pathlib import Path

    layout = Path(__file__).resolve().parents[1] / "examples" / "three-sites.yaml"
    code, out, err = cli("simulate", "--layout", str(layout), "--duration", "30s", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = doc["sections"]["configurations"]
    sites = [r["site"] for r in doc["sections"]["sim_sites"] if r["site"] != "total"]
    assert [(r["site"], r["role"]) for r in rows] == [("remote", "prefill")] + [
        (s, role) for s in sites for role in ("prefill", "decode")]
    assert all(r["batch"] > 0 for r in rows if r["role"] == "decode")
    assert set(rows[0]) == {"role", "site", "chips_per_instance", "tp", "ep", "dp_attention", "attention_dp", "batch",
                            "weight_dtype", "kv_dtype"}
