"""The sweep's speed-ups change no figure: memoized plans, relinked searches, shared grids and prefill
models, parent-warmed workers and balanced batches give the rows a cold evaluation of each point gives,
and caches filled under other profile files are dropped. Timings live in benchmarks/bench_sweep.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic import throughput
from prfaas_plan.analytic.throughput import LengthGrid
from prfaas_plan.layout import Link
from prfaas_plan.planning import plans as P
from prfaas_plan.planning import sweep as S
from prfaas_plan.planning.sweep_run import balanced, parallel_tasks, run_sweep, warm_points

# Points that share their scenario and differ in link rate, round trip and price (the memo's hits), and
# points that differ in the local site and the TPOT (shared grids and remote prefill models).
SPEC = {"base": {"model": "kimi-linear", "remote": "16xH200"},
        "grid": {"local": ["32xH20", "64xH20"], "tpot": ["20ms", "40ms"], "link": ["10G", "100G"],
                 "rtt": ["0ms", "20ms"], "link_price": [0, 30]}}
VALUES = [k for k, _ in S.ROW_COLUMNS if k not in ("fingerprint", "row_check")]


def _cold_row(point: S.Point) -> dict:
    S.clear_caches()
    throughput._GRIDS.clear()
    return S.evaluate(point)


def test_memoized_rows_are_the_rows_of_a_cold_evaluation(tmp_path):
    rows = run_sweep(S.parse_spec(SPEC), tmp_path / "r.csv").rows
    assert len(rows) == 32 and not any(r["error"] for r in rows)
    for point, row in zip(S.points(S.parse_spec(SPEC)), rows):
        cold = _cold_row(point)
        assert {k: row[k] for k in VALUES} == {k: cold[k] for k in VALUES}, point.values
    # the memo was used: round trip and price do change figures the relinked plans recompute
    by = {(r["local"], r["tpot"], r["link"], r["rtt"], r["link_price"]): r for r in rows}
    a, b = by[("64xH20", "20ms", "10G", "0ms", 0.0)], by[("64xH20", "20ms", "10G", "20ms", 30.0)]
    assert a["throughput_rps"] == b["throughput_rps"] and a["threshold_tokens"] == b["threshold_tokens"]
    assert 0 < a["offloaded_share"] and a["ttft_unloaded_mean_s"] < b["ttft_unloaded_mean_s"]
    assert a["cloud_usd_per_hour"] < b["cloud_usd_per_hour"]


def test_memoized_rows_at_the_rental_basis_are_the_rows_of_a_cold_evaluation(tmp_path):
    # the rental baseline buys what the link's price leaves (`sweep.layouts_of` keys it by the link)
    spec = S.parse_spec({"base": {"remote": "16xH200", "basis": "rental"},
                         "grid": {"link": ["10G", "100G"], "link_price": [0, 400]}})
    rows = run_sweep(spec, tmp_path / "r.csv").rows
    for point, row in zip(S.points(spec), rows):
        assert {k: row[k] for k in VALUES} == {k: _cold_row(point)[k] for k in VALUES}, point.values
    assert len({r["homogeneous_throughput_rps"] for r in rows}) > 1


@settings(max_examples=12, deadline=None)
@given(rtt=st.sampled_from([0.0, 0.002, 0.04]), price=st.sampled_from([0.0, 5.0, 40.0]),
       rate=st.sampled_from([5e9, 40e9, 400e9]), efficiency=st.sampled_from([1.0, 0.8]),
       which=st.sampled_from(["prfaas-pd", "naive-heterogeneous"]))
def test_relink_is_optimize_on_the_other_link(rtt, price, rate, efficiency, which):
    v = S.points(S.parse_spec({"base": {"model": "kimi-linear"}}))[0].values
    base = S.scenario(v)
    perf = S._perf(*S.shared_inputs(v))
    first = replace(base, link=Link(rate, efficiency))
    other = replace(base, link=Link(rate, efficiency, rtt, price))
    layout = (P.prfaas_layout if which == "prfaas-pd" else P.naive_layout)
    assert P.search_free(layout(other)) == P.search_free(layout(first))
    got = P.relink(P.optimize(layout(first), first, perf), layout(other), other)
    want = P.optimize(layout(other), other, perf)
    # repr: exact for floats and NaN-safe (naive heterogeneous has no short requests: l_short is NaN)
    assert got.layout == want.layout and repr(got.best) == repr(want.best) and got.ttft == want.ttft
    assert got.ttft.extra_s == want.ttft.extra_s and got.link_bind_threshold == want.link_bind_threshold
    assert (got.capex_usd, got.cloud_usd_per_hour) == (want.capex_usd, want.cloud_usd_per_hour)
    assert got.surface.best is got.best
    assert np.array_equal(got.surface.lam, want.surface.lam)
    assert np.array_equal(got.surface.thresholds, want.surface.thresholds)


def test_one_grid_per_distribution_equal_to_a_fresh_one():
    from prfaas_plan.workload import resolve_workload

    dist = resolve_workload("paper", what="workload").input_length
    throughput._GRIDS.clear()
    first = LengthGrid.from_distribution(dist, 512)
    assert LengthGrid.from_distribution(dist, 512) is first
    throughput._GRIDS.clear()
    fresh = LengthGrid.from_distribution(dist, 512)
    assert fresh is not first
    assert np.array_equal(fresh.lengths, first.lengths) and np.array_equal(fresh.weights, first.weights)


@settings(max_examples=40, deadline=None)
@given(groups=st.lists(st.integers(1, 12), min_size=1, max_size=6), size=st.integers(1, 10))
def test_warm_points_take_one_point_per_group_spanning_batches(groups, size):
    def point(i, group):
        v = {k: inp.default for k, inp in S.INPUTS.items()}
        v.update(remote=f"{8 * (group + 1)}xH200", link=f"{i // 3 + 1}G")   # search groups of 3
        return S.Point(i, tuple(v.items()))

    pts = [point(i, g) for i, g in enumerate(g for g, n in enumerate(groups) for _ in range(n))]
    chunks = [pts[i:i + size] for i in range(0, len(pts), size)]
    assert warm_points(chunks)[0] == []   # searched points are never warmed: each costs its search
    pts = [replace(p, inputs=tuple((k, "paper" if k == "inputs" else x) for k, x in p.inputs)) for p in pts]
    chunks = [pts[i:i + size] for i in range(0, len(pts), size)]
    warm, rest = warm_points(chunks)
    spans = {g for g in {S.shared_inputs(p.values) for p in pts}
             if len({i for i, c in enumerate(chunks) for p in c if S.shared_inputs(p.values) == g}) > 1}
    firsts = {g: next(p for p in pts if S.shared_inputs(p.values) == g) for g in spans}
    # every point here has one prefill group: it spans batches when there are two
    expected = {p.index for p in firsts.values()} | ({0} if len(chunks) > 1 else set())
    assert [p.index for p in warm] == sorted(expected)
    left = [p for c in rest for p in c]
    assert sorted(p.index for p in warm + left) == list(range(len(pts)))
    assert [p.index for p in left] == sorted(p.index for p in left) and all(rest)
    for workers in (1, 2, 3):
        tasks = balanced(rest, workers)
        assert [p for c in tasks for p in c] == left
        if left:
            # about as large as asked or a share of 4 tasks per worker, at most twice that, and cut
            # between search groups wherever a group does not fill the window
            size = min(max(map(len, rest)), -(-len(left) // (4 * workers)))
            assert all(len(c) <= 2 * size for c in tasks)
            for c, nxt in zip(tasks, tasks[1:]):
                same = S.search_group(c[-1].values) == S.search_group(nxt[0].values)
                assert not same or len(c) == size
                assert len(c) >= size


@settings(max_examples=40, deadline=None)
@given(axes=st.permutations(["remote", "local", "tpot", "link", "rtt"]), size=st.integers(1, 12),
       workers=st.integers(2, 3))
def test_parallel_tasks_keep_what_points_share_together(axes, size, workers):
    values = {"remote": ["8xH200", "16xH200"], "local": ["32xH20", "64xH20"], "tpot": ["20ms", "40ms"],
              "link": ["10G", "100G"], "rtt": ["0ms", "10ms"]}
    pts = S.points(S.parse_spec({"grid": {k: values[k] for k in axes}}))
    tasks = parallel_tasks([pts[i:i + size] for i in range(0, len(pts), size)], workers)
    order = [p for t in tasks for p in t]
    assert sorted(p.index for p in order) == list(range(len(pts)))

    def contiguous(key) -> bool:   # each value of ``key`` occupies one run of the order
        runs = [key(p.values) for i, p in enumerate(order) if i == 0 or key(order[i - 1].values) != key(p.values)]
        return len(runs) == len(set(runs))

    assert contiguous(S.search_group)
    # the local site's candidates (a local pool at one TPOT) are shared by every remote pool and link
    assert contiguous(lambda v: (v["local"], v["tpot"]))
    assert contiguous(lambda v: (v["local"], v["tpot"], v["link"]))


def test_a_profile_edited_between_sweeps_is_planned_with_its_new_figures(tmp_path):
    """Caches are keyed by profile names; the token of the files' bytes empties them when a file changes."""
    from prfaas_plan import profiles

    folder = tmp_path / "profiles"
    folder.mkdir()
    chip = (Path(__file__).parent.parent / "hardware_profiles" / "h20.yaml").read_text()
    (folder / "h20.yaml").write_text(chip)
    profiles.add_profile_dir(folder)
    spec = S.parse_spec({"base": {"remote": "16xH200"}, "grid": {"link": ["10G", "100G"]}})
    first = run_sweep(spec, tmp_path / "a.csv").rows
    (folder / "h20.yaml").write_text(chip.replace("hbm_tb_s: 4.0", "hbm_tb_s: 2.0"))
    profiles.reset_profile_dirs()
    profiles.add_profile_dir(folder)
    again = run_sweep(spec, tmp_path / "b.csv").rows
    assert [r["throughput_rps"] for r in again] != [r["throughput_rps"] for r in first]
    for point, row in zip(S.points(spec), again):
        cold = _cold_row(point)
        assert {k: row[k] for k in VALUES} == {k: cold[k] for k in VALUES}


def test_workers_warmed_by_the_parent_give_the_serial_rows(tmp_path):
    spec = S.parse_spec(SPEC)
    serial = run_sweep(spec, tmp_path / "a.csv").rows
    S.clear_caches()
    assert run_sweep(spec, tmp_path / "b.csv", workers=2, chunk_size=5).rows == serial


def test_workers_given_the_points_in_sharing_order_give_the_serial_rows(tmp_path):
    # the remote pool outermost: the workers' tasks hold the points in another order than the spec's
    spec = S.parse_spec({"grid": {"remote": ["8xH200", "16xH200"], "local": ["32xH20", "64xH20"],
                                  "tpot": ["20ms", "40ms"]}})
    tasks = parallel_tasks([S.points(spec)[i:i + 2] for i in range(0, 8, 2)], 2)
    assert [p.index for t in tasks for p in t] != list(range(8))
    serial = run_sweep(spec, tmp_path / "a.csv").rows
    S.clear_caches()
    assert run_sweep(spec, tmp_path / "b.csv", workers=2, chunk_size=2).rows == serial


def test_dask_workers_warmed_by_a_run_give_the_serial_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = S.parse_spec(SPEC)
    serial = run_sweep(spec, tmp_path / "a.csv").rows
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        assert run_sweep(spec, tmp_path / "b.csv", client=client, chunk_size=4).rows == serial


def test_memoized_busy_time_is_the_models():
    from prfaas_plan.performance import prefill_model
    from prfaas_plan.performance.base import busy_s, parse_instance
    from prfaas_plan.profiles import get_model

    inner = prefill_model(get_model("kimi-linear"), parse_instance("8xH200"))
    memo = S.MemoPrefill(inner)
    lengths = np.geomspace(128, 131072, 97)
    for _ in range(2):
        assert np.array_equal(busy_s(memo, lengths), busy_s(inner, lengths))
        assert np.array_equal(memo.latency_s(lengths), inner.latency_s(lengths))

    class LatencyOnly:   # a measured table: busy time is its latency (the paper's Eq. 4 form)
        source = "table"

        def latency_s(self, l):
            return np.asarray(l, dtype=float) * 1e-4

    assert np.array_equal(busy_s(S.MemoPrefill(LatencyOnly()), lengths), lengths * 1e-4)


def test_shared_instance_models_are_the_functions_own_answers():
    """`performance.sharing`: inside a block the same arguments give the very object first computed (equal to
    a fresh computation); outside one, and for arguments that cannot be hashed, nothing is remembered."""
    from prfaas_plan.performance import decode_capacity, parse_instance
    from prfaas_plan.performance.sharing import shared, sharing
    from prfaas_plan.profiles import get_model

    model, inst = get_model("kimi-linear"), parse_instance("4xH20")
    memo: dict = {}
    with sharing(memo):
        first = decode_capacity(model, inst, 0.025, 9000.0, "tp", stack="sglang")
        assert decode_capacity(model, inst, 0.025, 9000.0, "tp", stack="sglang") is first
    assert [k[0] for k in memo] == ["decode_steps", "decode_capacity"]   # its step table is shared too
    fresh = decode_capacity(model, inst, 0.025, 9000.0, "tp", stack="sglang")
    assert fresh == first and fresh is not first
    calls = []

    @shared
    def count(x):
        calls.append(x)
        return len(calls)

    with sharing({}):
        assert (count([1]), count([1]), count(2), count(2)) == (1, 2, 3, 3)


def test_the_local_dask_cluster_allocates_memory_as_this_process():
    """`sweep_run.local_cluster` starts its workers without Dask's MALLOC_TRIM_THRESHOLD_ (which costs the grid
    searches a third more CPU in page faults); the rest of Dask's worker environment stays."""
    distributed = pytest.importorskip("distributed")
    import os

    from prfaas_plan.planning.sweep_run import local_cluster

    with local_cluster(1) as cluster, distributed.Client(cluster) as client:
        env = next(iter(client.run(lambda: dict(os.environ)).values()))
    assert "MALLOC_TRIM_THRESHOLD_" not in env and env.get("OMP_NUM_THREADS") == "1"
