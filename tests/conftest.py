"""Shared test helpers: run the CLI in-process and capture its output; property tests made deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from prfaas_plan import profiles
from prfaas_plan.cli import run

DATA = Path(__file__).parent / "data"

# Property tests draw the same examples on every run (derandomize) and keep no example database, so a run in
# a fresh clone (CI) sees what a developer's run saw: the suite is deterministic, and a counterexample shows
# on every run, not on one in many.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


@pytest.fixture
def cli(capsys):
    """Call ``cli("kv", "--model", "x")`` -> (exit_code, stdout, stderr)."""

    def _run(*args: str):
        code = run(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return _run


@pytest.fixture(autouse=True)
def _fresh_profiles(monkeypatch):
    """Each test sees only the bundled profiles plus what it adds itself."""
    monkeypatch.delenv("PRFAAS_PLAN_PROFILES", raising=False)
    profiles.reset_profile_dirs()
    yield
    profiles.reset_profile_dirs()
