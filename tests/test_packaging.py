"""The wheel must carry every subpackage and the bundled data (profiles, references, trace)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_lists_every_subpackage():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "prfaas_plan").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml packages: {sorted(found - listed)}"


def test_bundled_data_is_where_the_package_data_globs_look():
    assert list((ROOT / "model_profiles").glob("*.yaml")) and list((ROOT / "hardware_profiles").glob("*.yaml"))
    assert list((ROOT / "prfaas_plan" / "data" / "reference").glob("*.csv"))
    assert list((ROOT / "prfaas_plan" / "data" / "traces").glob("*.jsonl"))
