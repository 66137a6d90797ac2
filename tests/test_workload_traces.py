"""Trace readers: the bundled Mooncake trace, streaming, CSV, and every malformed-input path."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from prfaas_plan.errors import PlanError
from prfaas_plan.workload import BUNDLED_TRACE, iter_trace, load_trace
from prfaas_plan.workload.traces import TooManyRequests


@pytest.fixture(scope="module")
def mooncake():
    return load_trace(BUNDLED_TRACE)


def _jsonl(tmp_path, *lines, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _rec(ts=0, inp=1000, out=10, ids=(1, 2)):
    return json.dumps({"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": list(ids)})


def test_bundled_trace_arrays(mooncake):
    assert len(mooncake) == 12_031
    assert mooncake.input_length.mean() == pytest.approx(12_035.06, abs=0.01)
    assert mooncake.output_length.mean() == pytest.approx(342.62, abs=0.01)
    assert mooncake.arrival_s[0] == 0 and mooncake.duration_s == pytest.approx(3536.999)
    assert mooncake.arrival_rate == pytest.approx(12_030 / 3536.999)
    counts = np.diff(mooncake.block_offsets)
    assert np.array_equal(counts, -(-mooncake.input_length // 512))    # one id per 512-token block
    assert list(mooncake.blocks(0)[:3]) == [0, 1, 2]
    assert mooncake.line[-1] == 12_031


def test_streaming_reads_only_what_is_asked(tmp_path):
    path = _jsonl(tmp_path, _rec(0), _rec(5), "this is not json")
    first_two = list(itertools.islice(iter_trace(path), 2))
    assert [r.timestamp_s for r in first_two] == [0.0, 0.005]
    with pytest.raises(PlanError, match=r"t.jsonl:3: not valid JSON"):
        list(iter_trace(path))


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path):
    path = _jsonl(tmp_path, _rec(0), "", _rec(1000, inp=600))
    trace = load_trace(path)
    assert list(trace.line) == [1, 3] and list(trace.arrival_s) == [0.0, 1.0]


def test_csv_trace(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("timestamp,input_length,output_length\n0,100,5\n500,2000,7\n")
    trace = load_trace(path)
    assert list(trace.input_length) == [100, 2000] and list(trace.arrival_s) == [0.0, 0.5]
    assert trace.block_ids is None
    path.write_text("output_length, input_length\n5,100\n")
    trace = load_trace(path)
    assert trace.arrival_s is None and trace.arrival_rate is None and list(trace.output_length) == [5]


@pytest.mark.parametrize("lines,needle", [
    (["{not json"], ":1: not valid JSON"),
    ([_rec(), "[1, 2]"], ":2: a JSON list: expected one object per line"),
    ([json.dumps({"timestamp": 0, "input_length": 5, "hash_ids": [1]})], ":1: missing output_length"),
    ([_rec(), json.dumps({**json.loads(_rec()), "hash_id": [1]})],
     ":2: unknown key 'hash_id'; did you mean hash_ids?"),
    ([_rec(inp=-5)], ":1: input_length = -5: expected a whole number of tokens from 1 to 1,073,741,824"),
    ([_rec(inp=0)], ":1: input_length = 0"),
    ([_rec(inp=1.5)], ":1: input_length = 1.5"),
    ([_rec(inp="100")], ":1: input_length = '100'"),
    ([_rec(out=-1)], ":1: output_length = -1: expected a whole number of tokens from 0 to 1,073,741,824"),
    ([_rec(ts=-1)], ":1: timestamp = -1: expected a time in milliseconds from 0 to 2^53"),
    ([_rec(ts=10), _rec(ts=5)], ":2: timestamp 5 is earlier than the line before"),
    ([_rec(ids=[1, "x"])], ":1: hash_ids = [1, 'x']: expected a list of integer block ids"),
    ([json.dumps({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 7})], ":1: hash_ids = 7"),
    ([], ": no requests"),
    (["", "  "], ": no requests"),
])
def test_bad_jsonl_is_one_line_naming_file_and_line(tmp_path, lines, needle):
    path = _jsonl(tmp_path, *lines)
    with pytest.raises(PlanError) as err:
        load_trace(path)
    msg = str(err.value)
    assert needle in msg and str(path) in msg and "\n" not in msg


@pytest.mark.parametrize("text,needle", [
    ("", ": empty file: expected a CSV header"),
    ("input_length,output_length\n", ": no requests"),
    ("input_length,output_length,prompt\n1,2,3\n", ":1: unknown column(s) 'prompt': expected columns "
                                                    "input_length, output_length and optionally timestamp"),
    ("input_length\n5\n", ":1: missing column(s) output_length"),
    ("input_length,input_length,output_length\n1,1,1\n", ":1: repeated column"),
    ("input_length,output_length\n5,2\n7\n", ":3: 1 fields: expected 2"),
    ("input_length,output_length\nabc,2\n", ":2: input_length = 'abc'"),
    ("input_length,output_length\n-3,2\n", ":2: input_length = -3.0"),
    ("timestamp,input_length,output_length\n5,1,1\n4,1,1\n", ":3: timestamp 4.0 is earlier"),
    ("timestamp,input_length,output_length\nsoon,1,1\n", ":2: timestamp = 'soon'"),
])
def test_bad_csv_is_one_line_naming_file_and_line(tmp_path, text, needle):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(PlanError) as err:
        load_trace(path)
    msg = str(err.value)
    assert needle in msg and str(path) in msg and "\n" not in msg


def test_unreadable_files(tmp_path):
    with pytest.raises(PlanError, match="no such trace file"):
        load_trace(tmp_path / "missing.jsonl")
    with pytest.raises(PlanError, match="unknown trace format '.txt'"):
        load_trace(tmp_path / "t.txt")
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(PlanError, match="d.jsonl: is a directory, expected a .jsonl or .csv trace"):
        load_trace(tmp_path / "d.jsonl")
    (tmp_path / "d").mkdir()
    with pytest.raises(PlanError, match="d: is a directory, expected"):   # not "unknown trace format"
        load_trace(tmp_path / "d")
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(_rec().encode() + b"\n\xff\xfe\x00garbage\n")
    with pytest.raises(PlanError, match=r"b.jsonl:2: not a UTF-8 text file \(expected a .jsonl or .csv trace\)"):
        load_trace(binary)


@pytest.mark.parametrize("name,text", [
    ("t.jsonl", "".join(_rec(ts=i) + "\n" for i in range(5000))),  # more than one block of the reader
    ("t.csv", "timestamp,input_length,output_length\n" + "".join(f"{i},10,1\n" for i in range(5))),
])
def test_request_cap_is_checked_while_reading(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text + "this line is never read\n")
    with pytest.raises(TooManyRequests, match=r"more than 3 requests"):
        load_trace(path, max_requests=3)
    assert len(load_trace(path, until_s=0.003, max_requests=4)) == 4  # the cap counts the window's requests


def test_csv_window_stops_reading(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("timestamp,input_length,output_length\n0,100,5\n500,2000,7\n2000,1,1\nbroken\n")
    trace = load_trace(path, until_s=1.0)
    assert list(trace.arrival_s) == [0.0, 0.5] and list(trace.line) == [2, 3]
