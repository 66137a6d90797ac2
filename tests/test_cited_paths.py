"""Notes and profile sources cite paths a reader can open: every path-looking token printed in the notes
of ``size``, ``compare``, ``rates`` and ``calibrate``, and every one in a bundled profile, exists in the
repository or the package (issue 24: ``shared/data/...``, a folder outside the project, was cited)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "prfaas_plan"
TOKEN = re.compile(r"[\w.\-]+(?:/[\w.\-]+)+")
EXTENSION = re.compile(r"\.(csv|json|jsonl|yaml|yml|md|txt|py|parquet|pickle)$")
DOMAIN = re.compile(r"^[\w-]+(\.[\w-]+)*\.(com|org|co|io|ai|net|dev|edu)$")
ROOTS = {p.name for base in (REPO, PACKAGE) for p in base.iterdir() if p.is_dir()} | {"shared", "work"}


def path_tokens(text: str) -> set[str]:
    """Tokens that read as file paths: a known file extension, or a first part naming a folder of the
    repository or package (or ``shared``, the old data folder); ``tokens/s`` or ``H200/H20`` are not."""
    out = set()
    for token in TOKEN.findall(text):
        token = token.rstrip(".")
        if DOMAIN.match(token.split("/")[0]):   # a web address (huggingface.co/...), not a file
            continue
        if EXTENSION.search(token) or token.split("/")[0] in ROOTS:
            out.add(token)
    return out


def missing(tokens: set[str]) -> list[str]:
    return sorted(t for t in tokens if not any((base / t.lstrip("/")).exists() for base in (REPO, PACKAGE)))


def test_the_scan_sees_paths_and_only_paths():
    text = ("see shared/data/hf_configs and docs/methods.md. at 12 tokens/s, H200/H20, ttft/busy, a/b.csv, "
            "https://huggingface.co/org/m/blob/main/config.json")
    assert path_tokens(text) == {"shared/data/hf_configs", "docs/methods.md", "a/b.csv"}
    assert missing(path_tokens(text)) == ["a/b.csv", "shared/data/hf_configs"]


COMMANDS = [
    ("size",), ("size", "--model", "prfaas-1t", "--inputs", "paper"), ("compare",), ("compare", "-m", "prfaas-1t"),
    ("size", "--model", "deepseek-v3"), ("rates", "-m", "kimi-linear", "-i", "8xH20", "--len", "8k"),
    ("rates", "-m", "prfaas-1t", "-i", "8xH200", "--len", "8k"), ("calibrate",), ("show", "kimi-k2"),
    ("reproduce", "--inputs", "predicted"), ("kv-throughput", "--instance", "8xH200", "--len", "8k"),
    ("workload", "describe", "--workload", "trace"), ("check", "nvidia_silicon_sample_subset.csv"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_printed_notes_cite_paths_that_exist(cli, args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    text = " ".join(doc["notes"] + [w["message"] for w in doc["warnings"]]
                    + [v for rows in doc["sections"].values() for r in rows for v in r.values() if isinstance(v, str)])
    assert missing(path_tokens(text)) == []


def test_bundled_profiles_cite_paths_that_exist():
    files = [p for d in ("model_profiles", "hardware_profiles", "stack_profiles") for p in (REPO / d).glob("*.yaml")]
    assert len(files) > 10
    assert {str(p.relative_to(REPO)): bad for p in files if (bad := missing(path_tokens(p.read_text())))} == {}
