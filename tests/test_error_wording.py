"""Errors raised below `prfaas_plan.cli` name the input (``\\`link\\```), never a flag (issue 19; docs/invariants.md
#7): `cli/flags.py` turns input names into flags for the command line, while a sweep spec, a layout file and the
Python API name the same input by its key. Engine command lines (`planning/export.py`'s engine flags) are
exported text, not errors about our inputs, and are not checked here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prfaas_plan"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")


def _raised_texts(path: Path):
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    yield node.lineno, part.value


def test_no_error_below_the_cli_names_a_flag():
    offenders = [f"{p.relative_to(PACKAGE)}:{line}: {s!r}" for p in PACKAGE.rglob("*.py") if "cli" not in p.parts
                 for line, s in _raised_texts(p) if FLAG.search(s)]
    assert offenders == []


def test_the_check_sees_a_flag_in_an_error():
    tree = 'raise PlanError(f"{x} is bad: drop --ttft-slo")'
    (node,) = [n for n in ast.walk(ast.parse(tree)) if isinstance(n, ast.Raise)]
    texts = [p.value for p in ast.walk(node.exc) if isinstance(p, ast.Constant) and isinstance(p.value, str)]
    assert any(FLAG.search(t) for t in texts)
