"""``report`` validates what it reads (issue 23): truncated, duplicated, edited, mistyped or mislabelled
results are refused in one line (exit 2, no page written); an interrupted sweep is drawn with a warning."""

from __future__ import annotations

import json

import pytest

from prfaas_plan.planning import sweep as S
from prfaas_plan.planning.sweep_run import run_sweep

SMALL = {"base": {"remote": "16xH200"}, "grid": {"link": ["10G", "25G", "40G"]}}


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("sweep") / "r.csv"
    run_sweep(S.parse_spec(SMALL), out)
    return out.read_text()


def _refused(cli, tmp_path, name: str, body: str | bytes, needle: str):
    path = tmp_path / name
    path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    code, out, err = cli("report", str(path), "--output", str(tmp_path / "page.html"))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "page.html").exists()


def test_a_valid_sweep_is_drawn(cli, tmp_path, sweep_csv):
    (tmp_path / "r.csv").write_text(sweep_csv)
    code, out, err = cli("report", str(tmp_path / "r.csv"), "--output", str(tmp_path / "page.html"))
    assert code == 0 and (tmp_path / "page.html").exists(), err


def test_a_truncated_sweep_is_refused(cli, tmp_path, sweep_csv):
    _refused(cli, tmp_path, "r.csv", sweep_csv[:-40], "r.csv:4:")


def test_a_duplicated_row_is_refused(cli, tmp_path, sweep_csv):
    lines = sweep_csv.splitlines()
    _refused(cli, tmp_path, "r.csv", "\n".join(lines + [lines[1]]) + "\n", "is in rows 1 and 4")


def test_text_in_a_numeric_column_is_refused(cli, tmp_path, sweep_csv):
    lines = sweep_csv.splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("throughput_rps")] = "fast"
    _refused(cli, tmp_path, "r.csv", "\n".join([lines[0], ",".join(cells)] + lines[2:]) + "\n",
             "column 'throughput_rps'")


def test_an_edited_row_is_refused(cli, tmp_path, sweep_csv):
    lines = sweep_csv.splitlines()
    header = lines[0].split(",")
    cells = lines[2].split(",")
    i = header.index("throughput_rps")
    cells[i] = str(float(cells[i]) + 1)
    _refused(cli, tmp_path, "r.csv", "\n".join(lines[:2] + [",".join(cells)] + lines[3:]) + "\n",
             "row 2 does not match its row_check")


def test_text_in_a_numeric_parquet_column_is_refused(cli, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = run_sweep(S.parse_spec(SMALL), tmp_path / "ok.parquet").rows
    table = pa.Table.from_pylist([{**r, "throughput_rps": "fast"} for r in rows])
    pq.write_table(table, tmp_path / "bad.parquet")
    code, out, err = cli("report", str(tmp_path / "bad.parquet"), "--output", str(tmp_path / "page.html"))
    assert code == 2 and "column 'throughput_rps' holds string, expected double" in err, err


def test_json_whose_command_does_not_match_its_sections_is_refused(cli, tmp_path):
    code, out, err = cli("size", "--format", "json")
    doc = json.loads(out)
    doc["meta"]["command"] = "compare"
    _refused(cli, tmp_path, "r.json", json.dumps(doc), "meta.command is 'compare' but there is no 'compare' section")


def test_deeply_nested_json_is_refused(cli, tmp_path):
    _refused(cli, tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply")
    nested = {"meta": {"command": "size"}, "sections": {"plan": [{"x": 1}]}, "notes": []}
    node = nested
    for _ in range(100):
        node["deeper"] = {}
        node = node["deeper"]
    _refused(cli, tmp_path, "deep2.json", json.dumps(nested), "nested more than 64 levels deep")


def test_an_interrupted_sweep_is_drawn_with_a_warning(cli, tmp_path):
    from prfaas_plan.output.rowfile import write_table
    from prfaas_plan.planning.sweep import ROW_COLUMNS

    rows = run_sweep(S.parse_spec(SMALL), tmp_path / "full.parquet").rows
    write_table(tmp_path / "part.parquet", rows[:2], ROW_COLUMNS, {"complete": "false", "points": "3"})
    code, out, err = cli("report", str(tmp_path / "part.parquet"), "--output", str(tmp_path / "page.html"))
    assert code == 0, err
    assert "2 of 3 points are in the file" in (tmp_path / "page.html").read_text()
