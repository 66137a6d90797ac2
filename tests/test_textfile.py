"""Every reader of a user's file fails in one line, in one wording (`prfaas_plan.textfile`): a missing file,
a folder, bytes that are not UTF-8 and (for the JSON readers) malformed JSON each give one stderr line naming
the file and, where the file was opened, the kind of input expected; the exit code is non-zero and
nothing is written."""

from __future__ import annotations

import pytest

from prfaas_plan.errors import PlanError
from prfaas_plan.textfile import read_json, read_utf8

NOT_UTF8 = b"\xff\xfe\x00binary"

# command line with FILE where the file goes (FILE.jsonl: a reader that wants that suffix), the kind its
# messages name, and whether it reads JSON
READERS = {
    "export plan": (("export", "FILE", "--to", "sglang", "--output", "out"), "a plan: write it with size -f json",
                    True),
    "model import": (("model", "import", "FILE", "--output", "m.yaml"), "a Hugging Face config.json", True),
    "report": (("report", "FILE", "--output", "page.html"), "the --format json output of size", True),
    "calibrate measurements": (("calibrate", "--measurements", "FILE", "-o", "cal"), "a benchmark file", False),
    "check benchmark": (("check", "FILE", "--chip", "8xH200"), "a benchmark file", False),
    "simulate link profile": (("simulate", "--duration", "5s", "--link-profile", "FILE"), "a link profile CSV",
                              False),
    "simulate trace": (("simulate", "--trace", "FILE.jsonl"), "a .jsonl or .csv trace", False),
    "sweep spec": (("sweep", "FILE", "--output", "r.csv"), "a YAML file", False),
    "report sweep csv": (("report", "FILE.csv", "--output", "page.html"), "a sweep's .csv", False),
    "size layout": (("size", "--layout", "FILE"), "a YAML file", False),
    "workload trace": (("workload", "describe", "--trace", "FILE.csv"), "a .jsonl or .csv trace", False),
}
FAILURES = {
    "missing": (None, "cannot read (No such file or directory)"),
    "folder": ("dir", "is a directory, expected {kind}"),
}
# readers that look for the file before opening it, and say so in their own words
CHECKED_FIRST = {
    "simulate link profile": {"missing": "--link-profile 'input.txt': no such file",
                              "folder": "--link-profile 'input.txt': is a directory, expected {kind}"},
    "simulate trace": {"missing": "--trace 'input.jsonl': no such file",
                       "folder": "--trace 'input.jsonl': is a directory, expected {kind}"},
    "sweep spec": {"missing": "input.txt: no such file", "folder": "input.txt: is a directory, expected a sweep spec"},
    "report sweep csv": {"missing": "input.csv: no such file"},
    "size layout": {"missing": "--layout 'input.txt': no such file",
                    "folder": "--layout 'input.txt': is a directory, expected a layout file"},
    "workload trace": {"missing": "input.csv: no such trace file"},
    "not utf-8": (NOT_UTF8, "not a UTF-8 text file (expected {kind}"),
    "bad json": (b'{"meta": {}, "sections": ', "not JSON (Expecting value at line 1, column 26) (expected {kind}"),
}


def _cases():
    for reader, (args, kind, is_json) in READERS.items():
        for failure, (content, wording) in FAILURES.items():
            if failure == "bad json" and not is_json:
                continue
            wording = CHECKED_FIRST.get(reader, {}).get(failure, wording)
            yield pytest.param(args, kind, content, wording, id=f"{reader}-{failure}")


@pytest.mark.parametrize("args,kind,content,wording", list(_cases()))
def test_a_bad_file_is_one_line_naming_it(cli, tmp_path, monkeypatch, args, kind, content, wording):
    monkeypatch.chdir(tmp_path)
    suffix = next(a for a in args if a.startswith("FILE"))[len("FILE"):]
    name = f"input{suffix or '.txt'}"
    if content == "dir":
        (tmp_path / name).mkdir()
    elif content is not None:
        (tmp_path / name).write_bytes(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = cli(*[name if a.startswith("FILE") else a for a in args])
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and name in lines[0], err
    # the trace reader streams its lines: a decoding error names the line, "input.txt:1"
    assert wording.format(kind=kind) in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # nothing written


def test_the_readers_share_one_wording(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_bytes(NOT_UTF8)
    with pytest.raises(PlanError, match=r"x.json: not a UTF-8 text file \(expected a thing\)$"):
        read_utf8(bad, "a thing")
    big = tmp_path / "big.txt"
    big.write_text("x" * (2**20 + 1))
    with pytest.raises(PlanError, match=r"big.txt: larger than 1 MiB \(expected a thing\)$"):
        read_utf8(big, "a thing", max_bytes=2**20)
    assert len(read_utf8(big, "a thing", max_bytes=2**20 + 1)) == 2**20 + 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlanError, match=r"deep.json: not JSON \(nested too deeply\) \(expected a thing\)$"):
        read_json(deep, "a thing")
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2.5, "é"]}', encoding="utf-8")
    assert read_json(good, "a thing") == {"a": [1, 2.5, "é"]}
