"""A plain `size` pays only for what it uses: no scipy (nor scipy.optimize), cvxpy, numba, matplotlib or dask
at start-up or while it plans, not numpy.ma (45 ms, pulled in by np.unique and np.percentile), neither
pydantic nor the YAML library (the bundled profiles, stacks included, come from their validated snapshot,
prfaas_plan/profiles/snapshot.py), and not rich's console: its tables fit, so prfaas_plan/output/plain_table.py
draws them. A run imports and builds only the command it names (`prfaas_plan.cli.app_for`), and the planning
package loads its modules on first use.

Each case runs the CLI in a fresh interpreter (imports are per process) and lists the heavy top-level
packages left in ``sys.modules``. Speed itself is measured in benchmarks/bench_cli.py, not asserted here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HEAVY = ("scipy", "cvxpy", "numba", "matplotlib", "pyarrow", "dask", "pandas", "pydantic", "yaml")
UNUSED_MODULES = ("numpy.ma", "scipy.optimize", "typer._adapters", "rich.console", "rich.table")  # whole module names
ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import contextlib, io, json, sys
from prfaas_plan.cli import run
args, watched = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
with contextlib.redirect_stdout(io.StringIO()):
    code = run(args)
heavy = sorted(({m.split(".")[0] for m in sys.modules} | set(sys.modules)) & watched)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def heavy_imports(args: list[str]) -> tuple[int, list[str]]:
    # output to a pipe (no COLUMNS; under pytest a child can otherwise inherit COLUMNS=80 from the C environ)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY + UNUSED_MODULES)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["code"], result["heavy"]


@pytest.mark.parametrize("args", [["size"], ["size", "--model", "kimi-linear"], ["models"]])
def test_plain_commands_import_no_heavy_library(args):
    code, heavy = heavy_imports(args)
    assert code == 0
    assert heavy == [], f"`prfaas-plan {' '.join(args)}` imported {heavy}"


def test_the_normal_cdf_needs_no_scipy():
    from scipy.special import ndtr as reference

    from prfaas_plan.workload.distributions import ndtr

    z = np.linspace(-30.0, 30.0, 60_001)
    got, want = ndtr(z), reference(z)
    assert np.all(np.abs(got - want) <= 1e-13 * want)  # both ~1e-16 in the body; tails ~1e-14
    assert np.allclose(ndtr(z) + ndtr(-z), 1.0, rtol=0, atol=2e-16)
    assert ndtr(0.0) == 0.5 and ndtr(-math.inf) == 0.0 and ndtr(math.inf) == 1.0 and math.isnan(ndtr(math.nan))


def test_a_run_builds_only_the_command_it_names():
    import click
    import typer.main

    from prfaas_plan.cli import GLOBAL_VALUED, app_for, full_app

    whole = full_app()
    full = typer.main.get_command(whole)
    valued = {o for p in full.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
    assert valued == set(GLOBAL_VALUED)  # else app_for would take an option's value for the command name
    for name, command in full.commands.items():
        for args in ([name], ["--quiet", name, "--help"], ["--profiles", "folder", name, "x"]):
            only = typer.main.get_command(app_for(args))
            assert list(only.commands) == [name]
            assert [p.name for p in only.commands[name].params] == [p.name for p in command.params]
            assert [p.name for p in only.params] == [p.name for p in full.params]
    for args in ([], ["--help"], ["--version"], ["siz"], ["--profiles", "size"]):
        assert list(typer.main.get_command(app_for(args)).commands) == list(full.commands)


def test_the_command_table_names_each_commands_own_module():
    """`COMMAND_MODULES` is what a run imports for its command: every registered command and group is in it,
    under the module that registers it, and it lists nothing else."""
    from prfaas_plan.cli import COMMAND_MODULES, full_app

    whole = full_app()
    registered = {c.name or typer_name(c.callback.__name__): c.callback.__module__.rsplit(".", 1)[1]
                  for c in whole.registered_commands}
    groups = {g.name: {c.callback.__module__.rsplit(".", 1)[1] for c in g.typer_instance.registered_commands}
              for g in whole.registered_groups}
    assert all(len(modules) == 1 for modules in groups.values()), groups
    registered.update({name: modules.pop() for name, modules in groups.items()})
    assert registered == COMMAND_MODULES
    assert [c for c in typer_command(whole).commands] == list(COMMAND_MODULES)  # the --help order


def typer_name(function_name: str) -> str:
    from typer.main import get_command_name

    return get_command_name(function_name)


def typer_command(app):
    import typer.main

    return typer.main.get_command(app)


def test_a_run_imports_only_its_commands_module():
    code = subprocess.run([sys.executable, "-c", MODULES_PROBE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert code.returncode == 0, code.stderr
    assert json.loads(code.stdout.strip().splitlines()[-1]) == ["prfaas_plan.cli.plan_cmds"]


MODULES_PROBE = """
import contextlib, io, json, sys
from prfaas_plan.cli import run
with contextlib.redirect_stdout(io.StringIO()):
    assert run(["size", "--model", "kimi-linear"]) == 0
print(json.dumps(sorted(m for m in sys.modules if m.startswith("prfaas_plan.cli.") and m.endswith("_cmds"))))
"""


def test_messages_name_the_flags_of_every_command_whatever_a_run_imported():
    """`flags.as_flags` turns an input's name into its flag from every command's options, also in a process
    that imported one command's module only (a run's): the table is built from `full_app`."""
    probe = """
import json
from prfaas_plan.cli import app_for
from prfaas_plan.cli.flags import _flags
app_for(["kv"])
print(json.dumps(_flags()))
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import typer.main

    from prfaas_plan.cli import full_app

    stack, want = [typer.main.get_command(full_app())], set()
    while stack:
        command = stack.pop()
        stack += list(getattr(command, "commands", {}).values())
        want |= {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
                 if o.startswith("--")}
    assert set(json.loads(out.stdout.strip().splitlines()[-1]).values()) == want
