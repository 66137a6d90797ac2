"""typer is pinned to the 0.24 line, the last built on the public ``click`` package: later lines vendor
click as a private ``typer._click`` and (0.29) convert every option through a pydantic adapter, which
would put pydantic into a cold ``size`` (tests/test_cold_start.py). The CLI imports click by its public
name and nothing private of typer; a typer outside the pin fails here before it changes either."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "prfaas_plan"


def _pin() -> tuple[tuple[int, int], tuple[int, int]]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"typer\b", d)]
    low = re.search(r">=\s*(\d+)\.(\d+)", spec)
    high = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert low and high, f"typer must be pinned to a tested range, not {spec!r}"
    return (int(low[1]), int(low[2])), (int(high[1]), int(high[2]))


def test_installed_typer_is_inside_the_tested_pin():
    (lo, hi), installed = _pin(), tuple(int(x) for x in version("typer").split(".")[:2])
    assert lo <= installed < hi, f"typer {version('typer')} is outside the tested range {lo}..<{hi}"


def test_the_pin_spans_one_minor_release_line():
    (lo, hi) = _pin()
    assert hi == (lo[0], lo[1] + 1), "a wider pin would accept typer releases nobody ran the suite on"


def test_no_module_imports_a_private_part_of_typer():
    private = re.compile(r"^\s*(from\s+typer\s+import\s+_|from\s+typer\._|import\s+typer\._)", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if private.search(p.read_text())]
    assert offenders == []


def test_the_click_typer_runs_on_is_the_public_package():
    import click
    import typer.core

    assert issubclass(typer.core.TyperCommand, click.Command)
