"""Command-line interface: ``prfaas-plan COMMAND``.

`main` turns every user error (`PlanError`, bad flags) into one line on stderr and exit code 2, and a
failed internal check (`InternalError`) into one line and exit code 3.
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import sys

from ..errors import InternalError, PlanError

from .app import app

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


# errno values that mean the output could not be written, not that an input could not be read
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EPIPE, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit has nowhere to fail a second time."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _stdout_failed(why: str) -> int:
    _discard_stdout()
    print(f"error: cannot write the output to stdout ({why}); nothing was written elsewhere", file=sys.stderr)
    return 1


GLOBAL_VALUED = ("--profiles",)   # the global options that take a value (tests/test_cli_flags.py checks)


def _command_name(command) -> str:
    from typer.main import get_command_name

    return command.name or get_command_name(command.callback.__name__)


def full_app():
    """`app` with every command and group registered, listed in `COMMAND_MODULES` order (whatever was
    imported before): what ``--help`` shows and what tests walk."""
    import copy

    for module in dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"{__name__}.{module}")
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
    importlib.import_module(f"{__name__}.{COMMAND_MODULES[name]}")
    only = copy.copy(app)
    only.registered_commands = [c for c in app.registered_commands if _command_name(c) == name]
    only.registered_groups = [g for g in app.registered_groups if g.name == name]
    return only


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: sys.argv) and return its exit code; tests call this."""
    import typer
    import typer.main

    import click
    exit_types = tuple({typer.Exit, click.exceptions.Exit})
    abort_types = tuple({typer.Abort, click.exceptions.Abort})

    command = typer.main.get_command(app_for(sys.argv[1:] if argv is None else argv))
    try:
        result = command.main(args=argv, prog_name="prfaas-plan", standalone_mode=False)
        sys.stdout.flush()   # a full device or closed pipe shows here, while the error can still be said
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:   # an output name (inputs are opened under their own checks)
            print(f"error: {exc.filename}: cannot write ({exc.strerror})", file=sys.stderr)
            return 1
        if exc.errno not in _OUTPUT_ERRNOS:
            raise
        return _stdout_failed(exc.strerror or str(exc))
    except SystemExit as exc:
        # click answers a closed pipe on stdout with sys.exit(1) after wrapping the streams; say it in one line
        if exc.code == 1 and type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":
            return _stdout_failed(os.strerror(errno.EPIPE))
        raise
    except PlanError as exc:
        from .flags import as_flags

        print(f"error: {as_flags(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except InternalError as exc:
        print(f"internal error: {exc} (please report this)", file=sys.stderr)
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return 2
    except exit_types as exc:
        if exc.exit_code == 130:  # typer turns Ctrl-C inside a command into a silent Exit(130)
            print("error: interrupted", file=sys.stderr)
        return exc.exit_code
    except (KeyboardInterrupt, *abort_types):
        print("error: interrupted", file=sys.stderr)
        return 130
    if result == 130:  # click returns typer's Exit(130) for a Ctrl-C inside a command
        print("error: interrupted", file=sys.stderr)
        return 130
    from ..profiles.notes import shadowing_files, skipped_files

    from .flags import as_flags

    for line in skipped_files():  # user profiles this command did not need: say once they were skipped
        print(f"warning: skipped profile {as_flags(line)}", file=sys.stderr)
    for line in shadowing_files():  # a user file that replaces a bundled profile of its name
        print(f"note: {line}", file=sys.stderr)
    return result if isinstance(result, int) else 0

