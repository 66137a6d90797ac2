"""Command-line interface: ``prfaas-plan COMMAND``.

`main` turns every user error (`PlanError`, bad flags) into one line on stderr and exit code 2, and a
failed internal check (`InternalError`) into one line and exit code 3.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from ..errors import InternalError, PlanError

from .app import app  # noqa: F401 - the app, holding the commands imported so far (`full_app`: all of them)
from .commands import COMMAND_MODULES, GLOBAL_VALUED, app_for, full_app  # noqa: F401 - the package's API

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

