"""``sweep``: spec validation, point order, rows equal to ``size``/``compare``, identical rows on every
backend, resumption, errors in rows, Pareto fronts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import PlanError
from prfaas_plan.output.rowfile import Journal, read_table
from prfaas_plan.planning import sweep as S
from prfaas_plan.planning import sweep_run
from prfaas_plan.planning.sweep_run import journal_path, run_sweep

EXAMPLE = Path(__file__).parent.parent / "examples" / "sweep-links.yaml"


def _spec(tmp_path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("grid: {lnk: [10G]}", "unknown input 'lnk' (did you mean link"),
    ("base: {model: kimi-linear}\nextra: 1", "unknown key 'extra'"),
    ("grid: {link: 10G}", "grid.link: expected a non-empty list"),
    ("grid: {link: [10G, 10G]}", "listed twice"),
    ("base: {link: 10G}\ngrid: {link: [40G]}", "link is set twice"),
    ("zip: {link: [10G, 40G], remote: [16xH200]}", "must have one length"),
    ("grid: {instance_chips: [8, x]}", "expected a whole number"),
    ("grid: {link: [10G, 10X]}", "sweep point 2 (link=10X): link '10X'"),
    ("base: {instance_chips: 8}\ngrid: {remote: [12xH200]}", "12 chips do not make whole 8-chip instances"),
    ("grid: {mode: [exact, fast]}", "mode 'fast': expected representative or exact"),
    ("grid: {model: [kimi-linear, no-such-model]}", "sweep point 2 (model=no-such-model)"),
])
def test_bad_spec_is_one_line_before_any_work(cli, tmp_path, text, message):
    out = tmp_path / "r.parquet"
    code, stdout, err = cli("sweep", _spec(tmp_path, text), "--output", str(out), "--no-progress")
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not journal_path(out).exists()


def test_points_follow_the_spec_order_and_zip_moves_together():
    spec = S.parse_spec({"base": {"model": "kimi-linear"}, "grid": {"remote": ["16xH200", "32xH200"]},
                         "zip": {"link": ["10G", "40G", "100G"], "link_price": [1, 2, 3]}})
    pts = S.points(spec)
    assert spec.size == len(pts) == 6
    got = [(p.values["remote"], p.values["link"], p.values["link_price"]) for p in pts]
    assert got[:3] == [("16xH200", "10G", 1.0), ("16xH200", "40G", 2.0), ("16xH200", "100G", 3.0)]
    assert [p.index for p in pts] == list(range(6))
    assert len({p.key for p in pts}) == 6
    assert pts[0].values["local"] == S.INPUTS["local"].default


@pytest.mark.parametrize("pins, flags", [
    ("", ()),   # searched per role, as size without shape flags
    (", instance_chips: 8, transfer_bytes: replicated", ("--instance-chips", "8", "--transfer-bytes", "replicated")),
    (", link_headroom: 20%", ("--link-headroom", "20%")),   # the search and the plan within 80% of goodput
])
def test_a_row_is_what_size_and_compare_print(cli, tmp_path, pins, flags):
    out = tmp_path / "r.csv"
    spec = _spec(tmp_path, "base: {model: kimi-linear, local: 64xH20, remote: 16xH200" + pins + "}\n"
                 "grid: {link: [1G, 40G]}")
    assert cli("sweep", spec, "--output", str(out), "--no-progress")[0] == 0
    row = read_table(out, S.ROW_COLUMNS)[0]
    question = ("--model", "kimi-linear", "--local", "64xH20", "--remote", "16xH200", "--link", "1G", *flags,
                "--format", "json")
    code, stdout, err = cli("size", *question)
    doc = json.loads(stdout)
    plan = doc["sections"]["plan"][0]
    for key in ("threshold_tokens", "throughput_rps", "egress_gbps", "ttft_unloaded_p90_s", "capex_usd",
                "instances", "binding_stage"):
        assert row[key] == plan[key], key
    # the configuration size chose (or was pinned to) is the row's
    roles = {(r["site"], r["role"]): r for r in doc["sections"]["configurations"]}
    assert row["remote_chips_per_instance"] == roles["remote", "prefill"]["chips_per_instance"]
    assert row["local_chips_per_instance"] == roles["local", "decode"]["chips_per_instance"]
    assert row["remote_prefill_ep"] == roles["remote", "prefill"]["ep"]
    assert row["local_prefill_ep"] == roles["local", "prefill"]["ep"]
    assert row["decode_ep"] == roles["local", "decode"]["ep"]
    assert row["decode_dp_attention"] == roles["local", "decode"]["dp_attention"]
    assert row["decode_batch"] == roles["local", "decode"]["batch"]
    assert row["transfer_policy"] == ("dp-attention" if row["decode_dp_attention"] else "replicated")
    if "--instance-chips" in flags:
        assert (row["local_chips_per_instance"], row["transfer_policy"]) == (8, "replicated")
    # 1G: the remote cluster is underused, a warning the row must carry
    size_codes = {w["code"] for w in doc["warnings"]} - {"modes-disagree", "threshold-may-not-be-optimal",
                                                          "point-outside-band"}  # error-bar ones: size only
    assert size_codes and size_codes <= set((row["warnings"] or "").split(","))  # the plan's warnings
    code, stdout, err = cli("compare", *question)
    layouts = {r["layout"]: r for r in json.loads(stdout)["sections"]["compare"]}
    # the sweep's default basis is the one compare resolves (capex: both chips have prices)
    assert row["basis"] == json.loads(stdout)["meta"]["basis"] == "capex"
    assert row["homogeneous_throughput_rps"] == layouts["homogeneous-equal-capex"]["throughput_rps"]
    assert row["gain_vs_homogeneous"] == pytest.approx(layouts["homogeneous-equal-capex"]["prfaas_speedup_x"],
                                                       rel=1e-12)
    assert row["cost_per_mtok_usd"] == pytest.approx(
        plan["cloud_usd_per_hour"] / (plan["output_tokens_per_s"] * 3600) * 1e6, rel=1e-12)


def test_link_headroom_is_an_axis_whose_default_keeps_the_earlier_point_keys(tmp_path):
    """``link_headroom`` plans within (1 - headroom) of the goodput, as ``size --link-headroom``: less
    throughput at the same link, a link load within the cap; left at its default it is not in the point key,
    so sweeps written before it was an input resume as they were."""
    spec = S.parse_spec({"base": {"link": "100G"}, "grid": {"link_headroom": ["0%", "20%"]}})
    free, kept = run_sweep(spec, tmp_path / "r.csv").rows
    assert kept["throughput_rps"] < free["throughput_rps"]
    assert kept["link_utilization"] <= 0.95 * 0.8 * (1 + 1e-9) < free["link_utilization"]
    assert S.points(spec)[0].key != S.points(spec)[1].key   # the default's key: tests/test_sweep_layout.py


def test_the_searched_configuration_differs_from_the_fixed_shape_where_it_pays(tmp_path):
    """Searched and pinned points are different questions: on this pool the search leaves 8-chip TP, and its
    throughput is at least the pinned one's (the pinned shape is one of its candidates)."""
    spec = S.parse_spec({"base": {"remote": "16xH200", "link": "40G"},
                         "grid": {"instance_chips": [0, 8], "transfer_bytes": ["auto", "replicated"]}})
    rows = {(r["instance_chips"], r["transfer_bytes"]): r for r in run_sweep(spec, tmp_path / "r.csv").rows}
    searched, fixed = rows[0, "auto"], rows[8, "replicated"]
    assert fixed["local_chips_per_instance"] == 8 and fixed["transfer_policy"] == "replicated"
    assert searched["local_chips_per_instance"] != 8 or searched["transfer_policy"] != "replicated"
    assert searched["throughput_rps"] >= fixed["throughput_rps"] * (1 - 1e-9)
    assert len({r["point_key"] for r in rows.values()}) == 4


def _example_rows(cli, tmp_path, name, *flags):
    out = tmp_path / f"{name}.parquet"
    code, stdout, err = cli("sweep", str(EXAMPLE), "--output", str(out), "--no-progress", *flags)
    assert code == 0, err
    return read_table(out)


def test_serial_and_workers_give_the_same_rows(cli, tmp_path):
    serial = _example_rows(cli, tmp_path, "serial")
    assert len(serial) == 6 and not any(r["error"] for r in serial)
    assert serial == _example_rows(cli, tmp_path, "workers", "--workers", "2", "--chunk-size", "2")


def test_dask_local_gives_the_same_rows(cli, tmp_path):
    pytest.importorskip("distributed")
    serial = _example_rows(cli, tmp_path, "serial")
    assert serial == _example_rows(cli, tmp_path, "dask", "--dask", "local", "--workers", "1", "--chunk-size", "3")


def test_dask_client_in_process_gives_the_same_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = S.load_spec(str(EXAMPLE))
    serial = run_sweep(spec, tmp_path / "a.csv").rows
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = run_sweep(spec, tmp_path / "b.csv", client=client, chunk_size=2).rows
    assert serial == remote


def test_rerun_skips_points_already_done_and_resumes_from_the_journal(tmp_path):
    out = tmp_path / "r.parquet"
    small = S.parse_spec({"base": {"remote": "16xH200"}, "grid": {"link": ["10G", "40G"]}})
    first = run_sweep(small, out)
    assert (first.evaluated, first.reused) == (2, 0)
    again = run_sweep(small, out)
    assert (again.evaluated, again.reused) == (0, 2) and again.rows == first.rows
    bigger = S.parse_spec({"base": {"remote": "16xH200"}, "grid": {"link": ["10G", "25G", "40G"]}})
    # an interrupted run left one finished row in the journal, and half a line after it
    point = S.points(bigger)[1]
    done = S.evaluate(point)
    done["fingerprint"] = sweep_run.fingerprints([point])[point.key]
    done["row_check"] = sweep_run._row_check(done)
    Journal(journal_path(out)).append([done])
    with open(journal_path(out), "a") as fh:
        fh.write('{"point_key": "tor')
    res = run_sweep(bigger, out)
    assert (res.evaluated, res.reused) == (0, 3)
    assert [r["link"] for r in read_table(out)] == ["10G", "25G", "40G"]
    assert not journal_path(out).exists()


def test_a_point_that_cannot_be_planned_gets_its_reason(tmp_path):
    spec = S.parse_spec({"base": {"remote": "16xH200"}, "grid": {"tpot": ["25ms", "0.01ms"]}})
    rows = run_sweep(spec, tmp_path / "r.csv").rows
    assert rows[0]["error"] is None and rows[0]["throughput_rps"] > 0
    assert "cannot decode" in rows[1]["error"] and rows[1]["throughput_rps"] is None


def test_csv_and_parquet_hold_the_same_typed_rows(tmp_path):
    spec = S.parse_spec({"grid": {"link": ["10G", "100G"]}})
    run_sweep(spec, tmp_path / "r.csv", pareto=["cost_per_mtok_usd", "ttft_unloaded_p90_s"])
    run_sweep(spec, tmp_path / "r.parquet", pareto=["cost_per_mtok_usd", "ttft_unloaded_p90_s"])
    cols = S.ROW_COLUMNS + [("pareto", "bool"), ("pareto_metrics", "str")]
    assert read_table(tmp_path / "r.csv", cols) == read_table(tmp_path / "r.parquet")


def test_output_problems_are_one_line(cli, tmp_path):
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "no" / "r.parquet"), "--no-progress")
    assert code == 1 and "does not exist" in err
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "r.xlsx"))
    assert code == 2 and ".parquet or .csv" in err
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "r.csv"), "--pareto", "ttft_p90_s,capex_usd")
    assert code == 2 and "did you mean" in err


def test_plot_is_written(cli, tmp_path):
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "r.csv"), "--no-progress",
                         "--pareto", "cost_per_mtok_usd,ttft_unloaded_p90_s", "--plot", str(tmp_path / "f.svg"))
    assert code == 0, err
    assert "on the Pareto front" in out
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def test_memoized_prefill_answers_exactly_as_the_model():
    from prfaas_plan.performance import prefill_model
    from prfaas_plan.performance.base import parse_instance
    from prfaas_plan.profiles import get_model

    inner = prefill_model(get_model("kimi-linear"), parse_instance("8xH20"))
    memo = S.MemoPrefill(inner)
    lengths = np.geomspace(128, 131072, 257)
    for _ in range(2):
        assert np.array_equal(memo.latency_s(lengths), inner.latency_s(lengths))
    assert memo.source == inner.source


def _row(vals, error=None):
    return {"cost_per_mtok_usd": vals[0], "gain_vs_homogeneous": vals[1], "error": error}


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=25))
def test_the_front_is_exactly_the_non_dominated_rows(pairs):
    rows = [_row(p) for p in pairs] + [_row((-1, 99), error="cannot plan")]
    metrics = ["cost_per_mtok_usd", "gain_vs_homogeneous"]  # cost minimized, gain maximized
    mask = S.pareto_mask(rows, metrics)
    assert mask[-1] is False  # an error row is never on the front

    def dominates(a, b):
        return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])

    for i, p in enumerate(pairs):
        assert mask[i] == (not any(dominates(q, p) for q in pairs))


def test_every_direction_is_a_row_column():
    names = {n for n, _ in S.ROW_COLUMNS}
    assert set(S.DIRECTIONS) <= names
    assert S.DIRECTIONS["cost_per_mtok_usd"] == S.MINIMIZE and S.DIRECTIONS["gain_vs_homogeneous"] == S.MAXIMIZE
    with pytest.raises(PlanError, match="at least two"):
        S.parse_metrics("capex_usd")


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.floats(1, 1e5), min_size=2, max_size=40, unique=True), st.floats(0, 1e5), st.floats(0, 1e5),
       st.integers(0, 41), st.lists(st.booleans(), min_size=41, max_size=41), st.booleans())
def test_bisect_steps_is_the_plain_bisection(lengths, a, b, change, pattern, monotone):
    """`search.bisect_steps`, which compares each midpoint with the support point where its per-step flag
    changes (or looks the flag up by step), halves the bracket exactly as a bisection that asks each
    midpoint's own step does: flags True then False (one change), and arbitrary ones."""
    from prfaas_plan.analytic.search import bisect_steps
    from prfaas_plan.analytic.throughput import LengthGrid

    ls = np.sort(np.array(lengths))
    grid = LengthGrid(ls, np.full(len(ls), 1 / len(ls)))
    lo, hi = min(a, b), max(a, b)
    first, last = (int(k) for k in grid.split_index([lo, hi]))
    n = last - first + 1
    below = np.arange(n) < change if monotone else np.array(pattern[:n])
    x, y = lo, hi
    for _ in range(40):
        mid = 0.5 * (x + y)
        if below[int(grid.split_index(mid)) - first]:
            x = mid
        else:
            y = mid
    assert bisect_steps(grid, lo, hi, below, first) == (x, y)


def test_the_docs_list_every_input_column_and_direction():
    text = (Path(__file__).parent.parent / "docs" / "sweep.md").read_text()
    for name in list(S.INPUTS) + [c for c, _, _ in S.OUTPUT_COLUMNS] + list(S.DIRECTIONS):
        assert f"`{name}`" in text, name


# ----------------------------------------------------------------------------------------------------
# Results that cannot lie (issue 23): fingerprints, damaged files, one writer, caps, orphans

SMALL = {"base": {"remote": "16xH200"}, "grid": {"link": ["10G", "40G"]}}


def test_an_edited_chip_profile_recomputes_the_rows_it_feeds(tmp_path, monkeypatch):
    from prfaas_plan import profiles

    folder = tmp_path / "profiles"
    folder.mkdir()
    chip = (Path(__file__).parent.parent / "hardware_profiles" / "h200.yaml").read_text()
    (folder / "h200.yaml").write_text(chip)
    profiles.add_profile_dir(folder)
    out = tmp_path / "r.csv"
    first = run_sweep(S.parse_spec(SMALL), out)
    assert (first.evaluated, first.reused) == (2, 0)
    (folder / "h200.yaml").write_text(chip.replace("hbm_tb_s: 4.8", "hbm_tb_s: 2.4"))
    profiles.reset_profile_dirs()
    profiles.add_profile_dir(folder)
    again = run_sweep(S.parse_spec(SMALL), out)
    assert (again.evaluated, again.reused, again.recomputed) == (2, 0, 2)
    assert [r["fingerprint"] for r in again.rows] != [r["fingerprint"] for r in first.rows]


def test_a_searched_rows_fingerprint_follows_its_search_space(tmp_path, monkeypatch):
    """A searched point's fingerprint covers the candidates its search enumerates: a narrower search (at most
    8 chips per instance) recomputes it; a point whose search space did not change (8 chips pinned) and one
    not searched (the paper's inputs) keep theirs."""
    from prfaas_plan.planning import configurations

    pts = [S.points(S.parse_spec({"base": {"remote": "16xH200", **pins}}))[0] for pins in
           ({}, {"instance_chips": 8}, {"instance_chips": 8, "inputs": "paper", "model": "prfaas-1t"})]
    before = sweep_run.fingerprints(pts)
    monkeypatch.setattr(configurations, "MAX_INSTANCE_CHIPS", 8)
    after = sweep_run.fingerprints(pts)
    assert [before[p.key] != after[p.key] for p in pts] == [True, False, False]
    assert S.search_space(pts[2].values) is None


@pytest.mark.parametrize("values", [{}, {"instance_chips": 8}, {"transfer_bytes": "dp-attention"},
                                    {"local": "48xH20", "remote": "24xH200", "model": "minimax-m2.5"}])
def test_the_search_space_is_what_the_search_enumerates(values):
    from prfaas_plan.planning.configurations import search_configurations

    v = S.points(S.parse_spec({"base": values}))[0].values
    found = search_configurations(S.scenario(v), S.search_spec(v), report=0)
    space = S.search_space(v)
    assert len(space) - 1 == sum(n for n, _ in found.counts.values())   # less the dtypes entry
    assert {r.chips_per_instance for c in found.ranked for r in c.roles if r.site == "local"} <= {
        c[2] for c in space if c[1] == "local"}


def test_a_cut_short_or_edited_output_is_refused(tmp_path):
    out = tmp_path / "r.csv"
    run_sweep(S.parse_spec(SMALL), out)
    text = out.read_text()
    out.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])   # the last row cut in half
    with pytest.raises(PlanError, match=r"r.csv:3: .* cells where the header has"):
        run_sweep(S.parse_spec(SMALL), out)
    out.write_text(text.replace(",10G,", ",10G,", 1).replace("\n", "\n", 1))
    lines = text.splitlines()
    cells = lines[1].split(",")
    i = lines[0].split(",").index("throughput_rps")
    cells[i] = str(float(cells[i]) * 2)
    out.write_text("\n".join([lines[0], ",".join(cells)] + lines[2:]) + "\n")
    with pytest.raises(PlanError, match="row 2: does not match its row_check"):
        run_sweep(S.parse_spec(SMALL), out)


def test_a_forged_journal_row_is_refused(tmp_path):
    out = tmp_path / "r.csv"
    spec = S.parse_spec(SMALL)
    point = S.points(spec)[0]
    forged = S.evaluate(point)
    forged["fingerprint"] = sweep_run.fingerprints([point])[point.key]
    forged["throughput_rps"] = 99.0          # a made-up figure, without a matching row_check
    Journal(journal_path(out)).append([forged])
    with pytest.raises(PlanError, match="journal row 1: does not match its row_check"):
        run_sweep(spec, out)


def test_a_second_writer_refuses_with_one_line(tmp_path):
    out = tmp_path / "r.csv"
    with sweep_run.output_lock(out):
        with pytest.raises(PlanError, match="another sweep .* is writing this file"):
            run_sweep(S.parse_spec(SMALL), out)
    assert not sweep_run.lock_path(out).exists() and not out.exists()
    run_sweep(S.parse_spec(SMALL), out)                    # the lock is released on exit
    assert not sweep_run.lock_path(out).exists()


def test_caps_refuse_with_the_estimate(tmp_path, cli):
    big = _spec(tmp_path, "grid: {link: [" + ",".join(f"{i}G" for i in range(1, 401)) + "], rtt: ["
                + ",".join(f"{i}ms" for i in range(1, 401)) + "]}")
    code, out, err = cli("sweep", big, "--output", str(tmp_path / "r.csv"), "--no-progress")
    assert code == 2 and "160,000 points (about" in err and "GiB of rows" in err and len(err.splitlines()) == 1
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "r.csv"), "--workers", str(10**20))
    assert code == 2 and "more than 4 per core" in err and not (tmp_path / "r.csv").exists()
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(tmp_path / "r.csv"), "--no-progress", "--max-points", "3")
    assert code == 2 and "6 points" in err


def test_kill_9_of_the_parent_takes_its_workers_with_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    spec = _spec(tmp_path, "grid: {link: [" + ",".join(f"{i}G" for i in range(1, 201)) + "]}")
    proc = subprocess.Popen([sys.executable, "-m", "prfaas_plan", "sweep", spec, "--output", str(tmp_path / "r.csv"),
                             "--workers", "2", "--chunk-size", "1", "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    children: list[int] = []
    deadline = time.time() + 60
    while time.time() < deadline and len(children) < 2:
        time.sleep(0.2)
        try:
            children = [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        except OSError:
            break
    assert len(children) >= 2, "the workers did not start"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    deadline = time.time() + 10
    while time.time() < deadline and any(alive(c) for c in children):
        time.sleep(0.1)
    assert not any(alive(c) for c in children)
