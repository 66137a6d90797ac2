"""typer is pinned to the range `prfaas_plan.cli._coerce` is tested on (it replaces typer's per-parameter
pydantic conversion, a private layer, to keep pydantic out of a cold ``size``; docs/invariants.md #7).
A typer outside the pin, a new minor or major release, fails here before it changes a conversion."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pin() -> tuple[tuple[int, int], tuple[int, int]]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"typer\b", d)]
    low = re.search(r">=\s*(\d+)\.(\d+)", spec)
    high = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert low and high, f"typer must be pinned to a tested range, not {spec!r}"
    return (int(low[1]), int(low[2])), (int(high[1]), int(high[2]))


def test_installed_typer_is_inside_the_tested_pin():
    (lo, hi), installed = _pin(), tuple(int(x) for x in version("typer").split(".")[:2])
    assert lo <= installed < hi, f"typer {version('typer')} is outside the tested range {lo}..<{hi}: re-run " \
                                 "tests/test_cli_coercion.py against it and move the pin"


def test_the_pin_spans_one_minor_release_line():
    (lo, hi) = _pin()
    assert hi == (lo[0], lo[1] + 1), "a wider pin would accept typer releases nobody tested _coerce on"
