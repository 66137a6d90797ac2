"""The console-script entry point: imports the CLI inside a guard, so Ctrl-C at any moment — during
start-up imports included — exits 130 with one line instead of a traceback."""

import sys


def main() -> None:
    """``prfaas-plan`` and ``python -m prfaas_plan``: run the CLI; exit 130 on Ctrl-C."""
    try:
        from .cli import run

        code = run()
    except KeyboardInterrupt:
        try:
            print("error: interrupted", file=sys.stderr)
        except (KeyboardInterrupt, OSError):
            pass
        code = 130
    if code == 130:
        # Leave at once: a Ctrl-C that landed inside an extension's embedded eval makes CPython re-raise
        # SIGINT at shutdown (a -2 status) even though it was handled here; nothing is left to clean up
        # (output files are written atomically).
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        import os

        os._exit(130)
    sys.exit(code)
