"""Bytes on the link (analytic/transfer.py): the policy, and that every link figure uses it.

The TTFT tests run on a link slow enough (2 Gbps) that the KV transfer, not prefill, sets when a remote
request's cache has arrived; they fail if the transfer term is dropped from unloaded or loaded TTFT.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import arithmetic as A
from prfaas_plan._data import REFERENCE_DIR
from prfaas_plan.analytic.latency import ttft_under_load
from prfaas_plan.analytic.throughput import LengthGrid, evaluate
from prfaas_plan.analytic.transfer import POLICIES, TransferBytes
from prfaas_plan.analytic.ttft import ttft_by_length, ttft_summary
from prfaas_plan.errors import PlanError
from prfaas_plan.layout import Link, prfaas_pd
from prfaas_plan.planning import case_study as paper
from prfaas_plan.profiles import all_models, get_model
from prfaas_plan.workload import TruncatedLogNormal

GRID = LengthGrid.from_distribution(TruncatedLogNormal(9.9, 1.0, 128, 128_000), 1024)


def _with_transfer(perf, transfer: TransferBytes):
    return replace(perf, sites={k: replace(sp, transfer=transfer) for k, sp in perf.sites.items()})


def test_qwen35_tp8_moves_four_logical_copies_of_its_full_attention_kv():
    m = get_model("qwen3.5-397b")
    l = 32768
    tb = TransferBytes("replicated", 8)
    parts, logical = A.s_kv_parts(m, l, tp=8), A.s_kv_parts(m, l)
    assert parts.growing == 4 * logical.growing            # 2 KV heads on 8 ranks
    assert parts.recurrent == logical.recurrent            # Gated DeltaNet state is split by head
    assert float(tb.at(m, l)) == parts.total
    assert float(TransferBytes("logical", 8).at(m, l)) == logical.total


def test_kv_command_tp8_agrees_with_the_transfer_policy(cli):
    code, out, err = cli("kv", "--model", "qwen3.5-397b", "--tp", "8", "--len", "32k", "--format", "json")
    assert code == 0, err
    row = json.loads(out)["sections"]["kv"][0]
    assert row["s_kv_bytes"] == float(TransferBytes("replicated", 8).at(get_model("qwen3.5-397b"), 32768))


def test_replicated_bytes_reproduce_mooncakes_measured_transfer():
    lines = [l for l in (REFERENCE_DIR / "mooncake_h20_qwen3_235b_pd.csv").read_text().splitlines()
             if l and not l.startswith("#")]
    measured = {int(r["prompt_len_tokens"]): float(r["kv_size_gb"]) for r in csv.DictReader(lines)}
    m = get_model("qwen3-235b")
    ours = float(TransferBytes("replicated", 8).at(m, 32768)) / 1e9
    assert ours == pytest.approx(measured[32768], rel=0.005)  # 12.63 vs 12.62 GB: rounding of the table
    assert float(TransferBytes("logical").at(m, 32768)) / 1e9 == pytest.approx(measured[32768] / 2, rel=0.005)


def test_unknown_policy_is_a_plan_error():
    with pytest.raises(PlanError, match="`transfer_bytes`"):
        TransferBytes("physical", 8)


def test_egress_and_link_bound_scale_with_the_bytes_moved():
    perf = paper.case_study_perf("paper")
    lay = prfaas_pd("32xH200", "64xH20", Link(100e9))
    rep = _with_transfer(perf, TransferBytes("replicated", 8))
    for mode in ("representative", "exact"):
        a = evaluate(lay, GRID, perf, 20_000, 3, mode)
        b = evaluate(lay, GRID, rep, 20_000, 3, mode)
        ratio = float(rep.transfer_bytes(a.l_long) / perf.transfer_bytes(a.l_long))
        assert ratio > 5  # MLA latent on all 8 ranks, KDA state once
        assert b.bounds["link"] * ratio == pytest.approx(a.bounds["link"], rel=0.02)
        assert b.egress_bps / b.lambda_max == pytest.approx(ratio * a.egress_bps / a.lambda_max, rel=0.02)


def test_case_study_keeps_the_papers_logical_bytes():
    perf = paper.case_study_perf("paper")
    assert all(sp.transfer.policy == "logical" for sp in perf.sites.values())
    study = paper.run_case_study("paper")
    prf = study.plans["prfaas-pd"].best
    logical = prf.lambda_max * prf.p_remote * A.s_kv(perf.model, round(prf.l_long)) * 8
    assert prf.egress_bps == pytest.approx(logical, rel=1e-3)


@pytest.fixture(scope="module")
def slow_link():
    """prfaas-1t at 2 Gbps with replicated bytes: every remote transfer outlasts its prefill."""
    perf = _with_transfer(paper.case_study_perf("paper"), TransferBytes("replicated", 8))
    link = Link(2e9, rtt_s=0.004)
    lay = prfaas_pd("32xH200", "64xH20", link, local_prefill=4)
    return perf, lay, link


def test_unloaded_ttft_includes_the_exposed_transfer(slow_link):
    perf, lay, link = slow_link
    t = 30_000.0
    v = ttft_by_length(lay, GRID, perf, t)
    l = GRID.lengths
    remote = l > t
    x = A.s_kv_at(perf.model, l[remote], tp=8) * 8 / link.goodput_bps   # computed here, not by the model
    prefill = np.asarray(perf.remote_prefill.latency_s(l[remote]))
    assert np.all(x > prefill)                                         # transfer exposed on this link
    expected = x + x / perf.model.num_layers + link.rtt_s / 2
    np.testing.assert_allclose(v[remote], expected, rtol=1e-9)
    assert ttft_summary(lay, GRID, perf, t).mean_s >= float(np.dot(GRID.weights[remote], x))


def test_loaded_ttft_includes_the_exposed_transfer(slow_link):
    perf, lay, link = slow_link
    t = 30_000.0
    lat = ttft_under_load(lay, GRID, perf, t, 4, load=0.3)
    l, w = GRID.lengths, GRID.weights
    remote = l > t
    x = A.s_kv_at(perf.model, l[remote], tp=8) * 8 / link.goodput_bps
    rho = lat.utilization["link"]
    assert rho == pytest.approx(lat.rate_rps * float(np.dot(w[remote], x)), rel=1e-9)
    # mean TTFT is at least the share-weighted, sharing-slowed transfer of the remote requests
    assert lat.mean_s >= float(np.dot(w[remote], x)) / (1 - rho)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.floats(0.1, 400.0), st.sampled_from(POLICIES), st.sampled_from(["exact", "representative"]),
       st.integers(2, 16))
def test_a_pure_local_layout_never_uses_the_link(gbps, policy, mode, local_instances):
    from prfaas_plan.analytic.search import grid_search
    from prfaas_plan.layout import homogeneous_pd

    perf = _with_transfer(paper.case_study_perf("paper"), TransferBytes(policy, 8))
    for lay in (homogeneous_pd(f"{8 * local_instances}xH20"),
                prfaas_pd("32xH200", f"{8 * local_instances}xH20", Link(gbps * 1e9), threshold=float("inf"))):
        ev = grid_search(lay, GRID, perf, mode).best
        assert ev.p_remote == 0 and ev.egress_bps == 0 and ev.bounds["link"] == np.inf


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.floats(0.5, 200.0), st.floats(0.5, 200.0), st.sampled_from(POLICIES),
       st.sampled_from(["exact", "representative"]))
def test_more_bandwidth_never_lowers_the_optimum(a_gbps, b_gbps, policy, mode):
    from prfaas_plan.analytic.search import grid_search

    perf = _with_transfer(paper.case_study_perf("paper"), TransferBytes(policy, 8))
    lo, hi = sorted((a_gbps, b_gbps))
    lam = [grid_search(prfaas_pd("32xH200", "64xH20", Link(g * 1e9)), GRID, perf, mode).best.lambda_max
           for g in (lo, hi)]
    assert lam[1] >= lam[0] * (1 - 1e-6)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(all_models())), st.integers(1, 256 * 1024), st.sampled_from([1, 2, 4, 8, 16]))
def test_dp_attention_moves_one_copy_never_more_than_replicated(name, l, tp):
    m = get_model(name)
    dp, logical, replicated = (float(TransferBytes(p, tp).at(m, l)) for p in ("dp-attention", "logical", "replicated"))
    assert dp == logical <= replicated
    if tp > 1 and any(g.rule.name == "mla" for g in m.cached_as("growing")):
        assert replicated > dp  # the MLA latent sits whole on every TP rank: dp-attention moves it once
        if tp == 8 and l >= 32768:
            assert replicated > 4 * dp  # 4.9x (ring-2.5-1t) to 8x (deepseek-v3) at 32K on TP8


def test_size_with_dp_attention_moves_the_logical_bytes_and_says_so(cli):
    rows = {}
    for policy in ("dp-attention", "logical"):
        code, out, err = cli("size", "--model", "kimi-linear", "--transfer-bytes", policy, "--samples", "0",
                             "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        rows[policy] = doc["sections"]["plan"][0]
        assert sum(n.startswith(f"transfer bytes: {policy} (") for n in doc["notes"]) == 1
    assert rows["dp-attention"] == rows["logical"]
