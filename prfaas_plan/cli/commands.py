"""Which module registers each command, and the app a run needs: only its own command's module is imported
(a cold ``size`` does not import the simulator's, the sweep's or the profile tools' code), every one for
``--help``, a typo, the flag table of error messages and tests."""

from __future__ import annotations

import importlib

from .app import app

_PACKAGE = __name__.rsplit(".", 1)[0]

# The module that registers each command and command group on `app`, in the order `--help` lists them. A run
# imports only the module of the command it names, so `size` does not import the simulator's, the sweep's or
# the profile tools' code (tests/test_cold_start.py checks this table against the registrations).
COMMAND_MODULES = {
    "check": "check_cmds", "export": "export_cmds", "kv": "kv_cmds",
    "rates": "perf_cmds", "kv-throughput": "perf_cmds", "calibrate": "perf_cmds",
    "size": "plan_cmds", "compare": "plan_cmds", "reproduce": "plan_cmds",
    "models": "profile_cmds", "hardware": "profile_cmds", "show": "profile_cmds",
    "report": "report_cmds", "schema": "schema_cmds", "simulate": "sim_cmds", "sweep": "sweep_cmds",
    "validate": "validate_cmds", "model": "import_cmds", "workload": "workload_cmds",
}
GLOBAL_VALUED = ("--profiles",)   # the global options that take a value (tests/test_cli_flags.py checks)


def _command_name(command) -> str:
    from typer.main import get_command_name

    return command.name or get_command_name(command.callback.__name__)


def full_app():
    """`app` with every command and group registered, listed in `COMMAND_MODULES` order (whatever was
    imported before): what ``--help`` shows and what tests walk."""
    import copy

    for module in dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"{_PACKAGE}.{module}")
    order = list(COMMAND_MODULES)
    whole = copy.copy(app)
    whole.registered_commands = sorted(app.registered_commands, key=lambda c: order.index(_command_name(c)))
    whole.registered_groups = sorted(app.registered_groups, key=lambda g: order.index(g.name))
    return whole


def app_for(args: list[str]):
    """`app` holding only the command ``args`` name, after the global options, with only that command's
    module imported: building the click object of every command costs a cold ``size`` about 25 ms and
    importing every command module more, and a run needs one. The whole app (`full_app`) when ``args``
    name none of its commands (no command, ``--help``, ``--version``, a typo that earns suggestions)."""
    import copy

    name, i = None, 0
    while i < len(args) and name is None:
        if args[i] in GLOBAL_VALUED:
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            name = args[i]
    if name not in COMMAND_MODULES:
        return full_app()
    importlib.import_module(f"{_PACKAGE}.{COMMAND_MODULES[name]}")
    only = copy.copy(app)
    only.registered_commands = [c for c in app.registered_commands if _command_name(c) == name]
    only.registered_groups = [g for g in app.registered_groups if g.name == name]
    return only
