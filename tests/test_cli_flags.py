"""One option, one meaning (docs/invariants.md #7): every flag is declared once under ``cli/``, and no
module below the CLI names a flag in its messages (errors name the *input*; only ``cli/`` maps inputs to
flags, `prfaas_plan.cli.flags`)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "prfaas_plan"


def _declared_flags(source: str) -> list[str]:
    """Every ``--flag`` string passed to a ``typer.Option``/``typer.Argument`` call in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("Option", "Argument"):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    out += arg.value.split("/")
    return out


def test_every_flag_is_declared_once_under_cli():
    counts = Counter(flag for path in sorted((PACKAGE / "cli").glob("*.py"))
                     for flag in _declared_flags(path.read_text()))
    assert counts, "no declarations found: the scan no longer sees the CLI's options"
    assert {f: n for f, n in counts.items() if n > 1} == {}


def test_the_scan_sees_a_duplicate():
    twice = 'import typer\na = typer.Option(1, "--x")\nb = typer.Option(\n    2, "--x", help="h")\n'
    assert _declared_flags(twice) == ["--x", "--x"]
