"""Output failures (issue 23): a full device, a folder that cannot be written, a name too long. Every
command says so in one line and exits 1, and leaves nothing half-written.

Tests run as root, for whom permission bits do not make a folder read-only; "a folder that cannot be
written" is made as a path under a regular file (``a-file/out``), which fails with ENOTDIR for root and
for everyone else alike. ``/dev/full`` is the full device."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from prfaas_plan.cli import run

ROOT = Path(__file__).parent.parent
SPEC = ROOT / "examples" / "sweep-links.yaml"
SMALL_SPEC = "base: {model: kimi-linear, local: 64xH20, remote: 16xH200}\ngrid: {link: [10G, 40G]}\n"
FULL = "/dev/full"

# Commands whose answer goes to stdout.
STDOUT = {
    "models": ["models"],
    "hardware": ["hardware"],
    "show": ["show", "kimi-linear"],
    "kv": ["kv", "--model", "kimi-linear", "--len", "1k,32k"],
    "rates": ["rates", "--model", "kimi-linear", "--len", "1k"],
    "size": ["size"],
    "size-json": ["size", "--format", "json"],
    "compare": ["compare"],
    "simulate": ["simulate", "--duration", "20s"],
    "calibrate": ["calibrate", "--measurements", "mooncake_h20_qwen3_235b_pd.csv", "--no-loo"],
    "check": ["check", "mooncake_h20_qwen3_235b_pd.csv"],
    "schema": ["schema", "layout"],
    "workload": ["workload", "describe"],
    "sweep": ["sweep", "spec.yaml", "--output", "r.csv", "--no-progress"],
    "report": ["report", "r.json", "--output", "r.html"],
}


@pytest.fixture
def folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text(SMALL_SPEC)
    (tmp_path / "a-file").write_text("x")
    assert run(["size", "--format", "json"]) == 0
    (tmp_path / "r.json").write_text(capsys.readouterr().out)
    return tmp_path


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", sorted(STDOUT))
def test_stdout_to_a_full_device_is_one_line_exit_1(name, folder, monkeypatch, capsys):
    argv = STDOUT[name]
    before = _tree(folder)
    with open(FULL, "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = run(argv)
        monkeypatch.undo()
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error")]
    assert code == 1, err[-600:]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in err
    after = _tree(folder)
    assert not [f for f in after if f.endswith(".tmp") or f.startswith(".")], after   # no temporary or journal
    assert {f: size for f, size in after.items() if f in before} == before   # nothing that was there is touched


# Commands that write a file: the file goes under a regular file (cannot be written), or gets a name too long.
FILES = {
    "size-plot": ["size", "--plot", "{out}.png"],
    "simulate-plot": ["simulate", "--duration", "20s", "--plot", "{out}.png"],
    "sweep": ["sweep", "spec.yaml", "--output", "{out}.csv", "--no-progress"],
    "sweep-plot": ["sweep", "spec.yaml", "--output", "ok.csv", "--plot", "{out}.png", "--no-progress"],
    "report": ["report", "r.json", "--output", "{out}.html"],
    "export": ["export", "r.json", "--to", "sglang", "--output", "{out}"],
    "calibrate": ["calibrate", "--measurements", "mooncake_h20_qwen3_235b_pd.csv", "--no-loo", "--output", "{out}"],
    "model-import": ["model", "import", str(ROOT / "prfaas_plan" / "data" / "hf_configs" / "Qwen--Qwen3-235B-A22B.config.json"),
                     "--output", "{out}.yaml"],
}


@pytest.mark.parametrize("where", ["under-a-file", "name-too-long"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_that_cannot_be_written_is_one_line_exit_1(name, where, folder, capsys):
    out = "a-file/out" if where == "under-a-file" else "n" * 300
    argv = [a.replace("{out}", out) for a in FILES[name]]
    before = _tree(folder)
    code = run(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 1, captured.err[-600:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, lines
    assert "cannot write" in lines[0] or "does not exist" in lines[0] or "not a folder" in lines[0], lines[0]
    after = _tree(folder)
    new = set(after) - set(before) - {"ok.csv"}   # sweep-plot writes its table before the plot fails
    assert not new, new


def test_the_console_script_on_a_full_device_exits_1_without_a_traceback(tmp_path):
    """The real process: stdout is a full device at interpreter exit too."""
    with open(FULL, "w") as full:
        proc = subprocess.run([sys.executable, "-m", "prfaas_plan", "models"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "No space left on device" in proc.stderr, proc.stderr


def test_a_closed_pipe_exits_1_with_one_line(tmp_path):
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", "prfaas_plan", "size", "--format", "json"], stdout=w,
                          stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path)
    os.close(w)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Broken pipe" in proc.stderr, proc.stderr
