"""Command-line interface: ``prfaas-plan COMMAND``.

`main` turns every user error (`PlanError`, bad flags) into one line on stderr and exit code 2, and a
failed internal check (`InternalError`) into one line and exit code 3.
"""

from __future__ import annotations

import sys

from ..errors import InternalError, PlanError

# Each module registers its commands on `app` when imported.
from . import (
    import_cmds,  # noqa: E402,F401
    kv_cmds,  # noqa: E402,F401
    perf_cmds,  # noqa: E402,F401
    plan_cmds,  # noqa: E402,F401
    profile_cmds,  # noqa: E402,F401
    report_cmds,  # noqa: E402,F401
    sim_cmds,  # noqa: E402,F401
    sweep_cmds,  # noqa: E402,F401
    validate_cmds,  # noqa: E402,F401
    workload_cmds,  # noqa: E402,F401
)
from ._coerce import install as install_direct_coercion
from .app import app


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: sys.argv) and return its exit code; tests call this."""
    import typer
    import typer.main

    from ._click import click
    exit_types = tuple({typer.Exit, getattr(click.exceptions, "Exit", typer.Exit)})
    abort_types = tuple({typer.Abort, getattr(click.exceptions, "Abort", typer.Abort)})

    install_direct_coercion()
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="prfaas-plan", standalone_mode=False)
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
    except BrokenPipeError:
        return 0
    if result == 130:  # click returns typer's Exit(130) for a Ctrl-C inside a command
        print("error: interrupted", file=sys.stderr)
        return 130
    from ..profiles.store import broken_profiles

    for line in broken_profiles():  # user profiles this command did not need: say once they were skipped
        from .flags import as_flags

        print(f"warning: skipped profile {as_flags(line)}", file=sys.stderr)
    return result if isinstance(result, int) else 0

